/** Member rules: scope placement, optimistic concurrency, archive, move between systems, trash. */
import { inTransaction, oneStatement, ownerOf, type PresetId, type ServiceContext } from '../../core/context.ts';
import { randomUUID } from 'node:crypto';
import type { Knex } from 'knex';
import type { components } from '../../../generated/api.d.ts';
import { ownerRowsOf } from '../../access/index.ts';
import { decodeCursor, encodeCursor } from '../../core/cursor.ts';
import { badRequest, conflict, notFound } from '../../core/errors.ts';
import { pageOf } from '../../core/keyset.ts';
import { toMember, type Member, type MemberRow } from '../../core/members.ts';
import { endMemberFront, frontChanged, lockFront } from '../front/index.ts';
import { findLiveFolder, leaveOtherSideGroups } from '../groups/index.ts';
import { applyDefaults } from '../privacyBuckets/index.ts';
import { resolveReadScope, resolveWriteScope, type ScopeQuery, subSystemsLinkedTo } from '../systems/index.ts';
import { membersRepo, type MemberChanges } from './repo.ts';

type Schemas = components['schemas'];

export const DEPRECATED_LIST_CAP = 100;

async function assertFolder(db: Knex, userId: string, folderId: string, sideSystemId: string): Promise<void> {
  const folder = await findLiveFolder(db, userId, folderId);
  if (!folder) throw notFound('Folder not found');
  if (folder.side_system_id !== sideSystemId)
    throw badRequest('directoryId must be a folder of the same side system as the member');
}

/**
 * A sub system's linked member must sit in the sub's side system, so a linked member may not
 * leave it. The caller holds the member's row lock, which keeps new links out meanwhile.
 */
async function assertNotLinkedBySub(trx: Knex.Transaction, userId: string, member: MemberRow): Promise<void> {
  const subs = await subSystemsLinkedTo(trx, userId, member.side_system_id, member.id);
  if (subs.length === 0) return;
  const names = subs.map((s) => `'${s.name}'`).join(', ');
  throw badRequest(
    subs.length === 1
      ? `Member is the linked member of sub system ${names}; link another member first`
      : `Member is the linked member of sub systems ${names}; link other members first`,
  );
}

function blankToNull(value: string | null | undefined): string | null | undefined {
  if (value === undefined || value === null) return value;
  const trimmed = value.trim();
  return trimmed === '' ? null : trimmed;
}

export async function createMember(
  ctx: ServiceContext,
  input: Schemas['CreateMemberRequest'] & PresetId,
): Promise<{ id: string }> {
  const { now } = ctx;
  const userId = ownerOf(ctx);
  const fields = {
    id: input.id ?? randomUUID(),
    user_id: userId,
    directory_id: input.directoryId ?? null,
    name: input.name.trim(),
    display_name: blankToNull(input.displayName) ?? null,
    pronouns: blankToNull(input.pronouns) ?? null,
    description: input.description ?? null,
    about_tags: input.aboutTags ?? [],
    profile_style: null,
    avatar: null,
    banner: null,
    archived_at: null,
    version: 1,
    created_at: now,
    updated_at: now,
    deleted_at: null,
  };
  // In the active scope and no folder: one statement (membersRepo.create), defaults and event included.
  if (!input.sideSystemId && !input.subSystemId && !input.directoryId) {
    const events = ctx.events.rows(ctx, [{ type: 'member.created', area: 'members', data: { memberId: fields.id } }]);
    const { scoped } = await oneStatement(ctx, (db) => membersRepo.create(db, fields, events), {
      body: { id: fields.id },
    });
    if (!scoped) throw new Error(`account ${userId} has no live active side or sub system`);
    return { id: fields.id };
  }
  return inTransaction(ctx, async (tx) => {
    const trx = tx.db;
    const scope = await resolveWriteScope(trx, userId, input);
    if (input.directoryId) await assertFolder(trx, userId, input.directoryId, scope.sideSystemId);
    const row: MemberRow = { ...fields, side_system_id: scope.sideSystemId, sub_system_id: scope.subSystemId };
    await membersRepo.insert(trx, row);
    // The owner's default buckets for new members and for each of their profile sections.
    await applyDefaults(trx, userId, 'new_member', [row.id], now);
    await applyDefaults(trx, userId, 'new_profile_section', [row.id], now);
    await tx.events.emit(tx, { type: 'member.created', area: 'members', data: { memberId: row.id } });
    return { id: row.id };
  });
}

export async function getMember(ctx: ServiceContext, id: string): Promise<Member> {
  const { db } = ctx;
  const userId = ownerOf(ctx);
  const row = await membersRepo.findLive(db, userId, id);
  if (!row) throw notFound('Member not found');
  return toMember(row);
}

/**
 * Applies a change set under a row lock: checks the expected version, bumps it, and returns
 * the new row. Every member write (PATCH, media) goes through here.
 */
export async function changeMember(
  trx: Knex.Transaction,
  userId: string,
  id: string,
  now: number,
  build: (row: MemberRow) => Promise<MemberChanges>,
  expectedVersion?: number,
): Promise<MemberRow> {
  const row = await membersRepo.lockLive(trx, userId, id);
  if (!row) throw notFound('Member not found');
  if (expectedVersion !== undefined && expectedVersion !== row.version) {
    throw conflict(`Member has changed since version ${expectedVersion} (now ${row.version}); reload and retry`);
  }
  const changes = await build(row);
  return membersRepo.update(trx, userId, id, { ...changes, version: row.version + 1, updated_at: now });
}

export async function updateMember(
  ctx: ServiceContext,
  id: string,
  input: Schemas['UpdateMemberRequest'],
): Promise<Member> {
  const { now } = ctx;
  const userId = ownerOf(ctx);
  const { expectedVersion, ...patch } = input;
  if (Object.keys(patch).length === 0) throw badRequest('Request body must contain at least one field to change');
  return inTransaction(ctx, async (tx) => {
    const trx = tx.db;
    let wasArchived = false;
    const row = await changeMember(
      trx,
      userId,
      id,
      now,
      async (current) => {
        wasArchived = current.archived_at !== null;
        const changes: MemberChanges = {};
        if (patch.name !== undefined) changes.name = patch.name.trim();
        if (patch.displayName !== undefined) changes.display_name = blankToNull(patch.displayName) ?? null;
        if (patch.pronouns !== undefined) changes.pronouns = blankToNull(patch.pronouns) ?? null;
        if (patch.description !== undefined) changes.description = patch.description;
        if (patch.aboutTags !== undefined) changes.about_tags = patch.aboutTags;
        if (patch.profileStyle !== undefined) changes.profile_style = patch.profileStyle;
        if (patch.avatarUrl !== undefined)
          changes.avatar = patch.avatarUrl === null ? null : { source: 'url', url: patch.avatarUrl };
        if (patch.backgroundUrl !== undefined)
          changes.banner = patch.backgroundUrl === null ? null : { source: 'url', url: patch.backgroundUrl };
        if (patch.archived !== undefined) changes.archived_at = patch.archived ? (current.archived_at ?? now) : null;

        let sideSystemId = current.side_system_id;
        if (patch.moveToSystemScope) {
          const target = await resolveWriteScope(trx, userId, patch.moveToSystemScope);
          changes.side_system_id = target.sideSystemId;
          changes.sub_system_id = target.subSystemId;
          if (target.sideSystemId !== current.side_system_id) {
            await assertNotLinkedBySub(trx, userId, current);
            sideSystemId = target.sideSystemId;
            // Folders and groups belong to one side system: the member leaves those of the old one.
            if (patch.directoryId === undefined) changes.directory_id = null;
            await leaveOtherSideGroups(trx, userId, id, target.sideSystemId);
          }
        }
        if (patch.directoryId !== undefined) {
          if (patch.directoryId !== null) await assertFolder(trx, userId, patch.directoryId, sideSystemId);
          changes.directory_id = patch.directoryId;
        }
        return changes;
      },
      expectedVersion,
    );
    await memberChanged(tx, row.id, Object.keys(patch) as Array<keyof typeof patch>);
    const archived = row.archived_at !== null;
    if (archived !== wasArchived)
      await tx.events.emit(tx, {
        type: archived ? 'member.archived' : 'member.unarchived',
        area: 'members',
        data: { memberId: row.id },
      });
    return toMember(row);
  });
}

/** The read shape's names of what a change set touched (docs/events.md). */
const FIELD_NAMES: Partial<Record<keyof Schemas['UpdateMemberRequest'], string[]>> = {
  archived: ['archivedAt'],
  moveToSystemScope: ['sideSystemId', 'subSystemId'],
};

/** Appends `member.updated` naming the fields of the member's read shape that were written. */
export async function memberChanged(
  tx: ServiceContext,
  memberId: string,
  written: Array<keyof Schemas['UpdateMemberRequest']>,
): Promise<void> {
  const fields = [...new Set(written.flatMap((k) => FIELD_NAMES[k] ?? [k]))].filter((f) => f !== 'expectedVersion');
  await tx.events.emit(tx, { type: 'member.updated', area: 'members', data: { memberId, fields } });
}

/**
 * A trashed member also leaves the front: its open session ends now and its tier presence goes.
 * Trash and restore take the account's front lock before the member row (the order every front
 * write uses), so a session opened for the member at the same moment either commits first and is
 * ended here, or waits and sees the member in the trash; the history counter (migration 0005)
 * never counts a session of a trashed member.
 */
export async function trashMember(ctx: ServiceContext, id: string): Promise<void> {
  const { now } = ctx;
  const userId = ownerOf(ctx);
  await inTransaction(ctx, async (tx) => {
    const trx = tx.db;
    await lockFront(trx, userId);
    const row = await membersRepo.lockLive(trx, userId, id);
    if (!row) throw notFound('Member not found');
    await membersRepo.setDeleted(trx, userId, id, now, now);
    const frontEnded = await endMemberFront(trx, userId, id, now);
    await tx.events.emit(tx, { type: 'member.trashed', area: 'members', data: { memberId: id } });
    if (frontEnded) await frontChanged(tx);
  });
}

export async function restoreMember(ctx: ServiceContext, id: string): Promise<void> {
  const { now } = ctx;
  const userId = ownerOf(ctx);
  await inTransaction(ctx, async (tx) => {
    const trx = tx.db;
    await lockFront(trx, userId);
    const row = await membersRepo.lockAny(trx, userId, id);
    if (!row) throw notFound('Member not found');
    if (row.deleted_at === null) throw badRequest('Member is not in the trash');
    await membersRepo.setDeleted(trx, userId, id, null, now);
    await tx.events.emit(tx, { type: 'member.restored', area: 'members', data: { memberId: id } });
  });
}

export async function listMembersPage(
  ctx: ServiceContext,
  query: ScopeQuery & { limit: number; cursor?: string },
): Promise<{ items: Member[]; nextCursor: string | null }> {
  const { db } = ctx;
  const userId = ownerOf(ctx);
  const after = query.cursor ? decodeCursor<[number, string]>(query.cursor, ['integer', 'uuid']) : undefined;
  const cursor = after && { createdAt: after[0], id: after[1] };
  // The active scope (what clients page through) costs one statement; an explicit one is validated first.
  const rows =
    query.sideSystemId || query.subSystemId
      ? await membersRepo.page(db, ctx.access, await resolveReadScope(db, userId, query), query.limit, cursor)
      : await membersRepo.activeScopePage(db, ownerRowsOf(ctx.access), query.limit, cursor);
  const { items, nextAfter } = pageOf(rows, query.limit);
  return {
    items: items.map(toMember),
    nextCursor: nextAfter ? encodeCursor([nextAfter.created_at, nextAfter.id]) : null,
  };
}

export async function listMembersDeprecated(ctx: ServiceContext, query: ScopeQuery): Promise<Member[]> {
  const { db } = ctx;
  const userId = ownerOf(ctx);
  const scope = await resolveReadScope(db, userId, query);
  return pageOf(await membersRepo.page(db, ctx.access, scope, DEPRECATED_LIST_CAP), DEPRECATED_LIST_CAP).items.map(
    toMember,
  );
}

/** The account's live member `id` (or undefined), for areas that attach things to a member. */
export function findLiveMember(db: Knex, userId: string, id: string): Promise<MemberRow | undefined> {
  return membersRepo.findLive(db, userId, id);
}

/** The ids that are not live members of the account, in input order (no query for none). */
export function missingLiveMembers(db: Knex, userId: string, ids: string[]): Promise<string[]> {
  return membersRepo.missingLive(db, userId, ids);
}

/** The account's members among the ids, trashed ones included (no query for none). */
export function membersByIds(db: Knex, userId: string, ids: string[]): Promise<MemberRow[]> {
  return membersRepo.byIds(db, userId, ids);
}

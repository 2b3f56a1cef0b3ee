/** Notes: links to members, the per-member note cap, the lifecycle table (trash, purge, restore). */
import { randomUUID } from 'node:crypto';
import type { Knex } from 'knex';
import type { components } from '../../../generated/api.d.ts';
import { ownerRowsOf } from '../../access/index.ts';
import {
  claimKey,
  inTransaction,
  oneStatement,
  ownerOf,
  type PresetId,
  type ServiceContext,
} from '../../core/context.ts';
import { badRequest, DomainError, notFound, noteLimitReached, unavailable } from '../../core/errors.ts';
import { fetchOptionsFromConfig } from '../../net/guardedFetch.ts';
import { PLAN_NAMES, type PlanKey } from '../accounts/index.ts';
import { membersByIds, type MemberSummary, missingLiveMembers, toMemberSummary } from '../members/index.ts';
import { resolveWriteScope } from '../systems/index.ts';
import { dropObjects, purgeItems } from '../trash/index.ts';
import { readStoredImage, type StoredImageResponse } from '../../storage/serve.ts';
import { registerNoteImage } from '../../storage/noteImages.ts';
import { externalImageUrls, imageKey, rehostImages } from './rehost.ts';
import {
  type CreateVerdict,
  type EntryChanges,
  entriesRepo,
  type EntryRow,
  type ImportedEntryRow,
  type NoteCreate,
} from './repo.ts';

export {
  CREATE_VERDICT_COLUMNS,
  type CreateVerdict,
  createEntrySql,
  EXAMPLE_NOTE_CREATE,
  type NoteCreate,
} from './repo.ts';

type Schemas = components['schemas'];

/** The linked set: the legacy single link first, then the list, without repeats (ids compared as the database stores them, in lower case). */
function linkSet(memberId: string | null, memberIds: string[] | null): string[] {
  return [...new Set([...(memberId ? [memberId] : []), ...(memberIds ?? [])].map((id) => id.toLowerCase()))];
}

const notLinkable = (ids: string[]) => badRequest(`Linked members must be your live members; not: ${ids.join(', ')}`);

async function assertOwnMembers(db: Knex, userId: string, ids: string[]): Promise<void> {
  const bad = await missingLiveMembers(db, userId, ids);
  if (bad.length) throw notLinkable(bad);
}

const capMessage = (ctx: ServiceContext, plan: PlanKey, full: string[]) =>
  `Note limit of ${ctx.config.noteCaps[plan]} per member on the ${PLAN_NAMES[plan]} plan reached for member ${full.join(', ')}`;

/** The members (of `memberIds`) already at the plan's note cap, and the message saying so; null when none is. */
async function capViolation(
  db: Knex,
  ctx: ServiceContext,
  userId: string,
  memberIds: string[],
  excludeEntryId: string | undefined,
): Promise<string | null> {
  if (memberIds.length === 0) return null;
  const state = await entriesRepo.capState(db, userId, memberIds, excludeEntryId);
  const plan = (state.plan ?? 'free') as PlanKey;
  const cap = ctx.config.noteCaps[plan];
  const counts = state.counts;
  const full = memberIds.filter((id) => (counts.get(id) ?? 0) >= cap);
  return full.length ? capMessage(ctx, plan, full) : null;
}

/**
 * Links under the plan's note cap (`fail` otherwise), with the member rows locked until the
 * transaction ends (entriesRepo.lockMembers). With `live` (links being added), each must also be a live member
 * of the account (400); a restore re-counts links the note already had, whatever their state.
 */
async function assertCaps(
  trx: Knex.Transaction,
  ctx: ServiceContext,
  memberIds: string[],
  options: { excludeEntryId?: string; live: boolean; fail: (message: string) => DomainError },
): Promise<void> {
  if (memberIds.length === 0) return;
  const userId = ownerOf(ctx);
  // The member rows stay locked until the transaction ends, so two notes created at once for the
  // same member cannot both slip under the cap.
  const live = await entriesRepo.lockMembers(trx, userId, memberIds);
  const bad = options.live ? memberIds.filter((id) => !live.has(id)) : [];
  if (bad.length) throw notLinkable(bad);
  const violation = await capViolation(trx, ctx, userId, memberIds, options.excludeEntryId);
  if (violation) throw options.fail(violation);
}

/**
 * The same checks without locks, before any external image is fetched: a note that will be
 * refused anyway must not cost downloads. The transaction repeats them under locks, so content
 * without external images skips this (the answer would be the same, and it costs statements).
 */
async function precheckLinks(
  ctx: ServiceContext,
  content: string | undefined,
  memberIds: string[],
  excludeEntryId: string | undefined,
  fail: (message: string) => DomainError,
): Promise<void> {
  if (content === undefined || externalImageUrls(content).length === 0) return;
  await assertOwnMembers(ctx.db, ownerOf(ctx), memberIds);
  const violation = await capViolation(ctx.db, ctx, ownerOf(ctx), memberIds, excludeEntryId);
  if (violation) throw fail(violation);
}

const noteLimit = noteLimitReached;

async function summaries(db: Knex, userId: string, ids: string[]): Promise<Map<string, MemberSummary>> {
  const rows = await membersByIds(db, userId, [...new Set(ids)]);
  return new Map(rows.map((r) => [r.id, toMemberSummary(r)]));
}

function listRow(row: EntryRow, links: string[], members: Map<string, MemberSummary>): Schemas['EntryListRow'] {
  const linked = links.map((id) => members.get(id)).filter((m): m is MemberSummary => m !== undefined);
  return {
    _id: row.id,
    title: row.title,
    content: row.content,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
    member: linked[0] ?? null,
    members: linked,
  };
}

async function detail(db: Knex, userId: string, row: EntryRow): Promise<Schemas['EntryDetail']> {
  const links = (await entriesRepo.linksOf(db, userId, [row.id])).get(row.id) ?? [];
  return {
    ...listRow(row, links, await summaries(db, userId, links)),
    memberId: row.member_id,
    memberIds: row.member_ids,
  };
}

function rehost(ctx: ServiceContext, content: string): Promise<string> {
  return rehostImages(content, ownerOf(ctx), ctx.storage, fetchOptionsFromConfig(ctx.config), {
    concurrency: ctx.config.noteImageFetchConcurrency,
    totalTimeoutMs: ctx.config.noteImagesTimeoutMs,
    beforeStore: (sha256) => registerNoteImage(ctx.db, ownerOf(ctx), sha256, ctx.now),
  });
}

/** The note createEntry writes (its id, links, caps and entry.created), its content as given. */
function noteOf(ctx: ServiceContext, input: Schemas['CreateEntryRequest'] & PresetId, content: string): NoteCreate {
  const { now } = ctx;
  const id = input.id ?? randomUUID();
  return {
    row: {
      id,
      user_id: ownerOf(ctx),
      title: input.title ?? null,
      content,
      member_id: input.memberId ?? null,
      member_ids: input.memberIds ?? null,
      created_at: now,
      updated_at: now,
    },
    links: linkSet(input.memberId ?? null, input.memberIds ?? null),
    caps: ctx.config.noteCaps,
    events: ctx.events.rows(ctx, [{ type: 'entry.created', area: 'entries', data: { id } }]),
  };
}

/** The error createEntry answers for a note its statement refused (`verdict.ok` false). */
function refusal(ctx: ServiceContext, note: NoteCreate, verdict: CreateVerdict): Error {
  if (!verdict.scoped) return new Error(`account ${ownerOf(ctx)} has no live active side or sub system`);
  const live = new Set(verdict.live);
  const bad = note.links.filter((m) => !live.has(m));
  if (bad.length) return notLinkable(bad);
  const plan = (verdict.plan ?? 'free') as PlanKey;
  const under = new Set(verdict.under_cap);
  return noteLimit(
    capMessage(
      ctx,
      plan,
      note.links.filter((m) => !under.has(m)),
    ),
  );
}

/**
 * A note as createEntry writes it, for a statement of another area that creates it with checks of
 * its own (createEntrySql's `gate`: a friend's note): null when its content embeds external images,
 * which createEntry fetches and re-hosts first. `refused` is the error createEntry answers when the
 * statement's verdict refused the note.
 */
export function noteToCreate(
  ctx: ServiceContext,
  input: Schemas['CreateEntryRequest'],
): { note: NoteCreate; refused: (verdict: CreateVerdict) => Error } | null {
  if (externalImageUrls(input.content).length > 0) return null;
  const note = noteOf(ctx, input, input.content);
  return { note, refused: (verdict) => refusal(ctx, note, verdict) };
}

export async function createEntry(
  ctx: ServiceContext,
  input: Schemas['CreateEntryRequest'] & PresetId,
): Promise<{ id: string }> {
  const links = linkSet(input.memberId ?? null, input.memberIds ?? null);
  // A keyed note that downloads images claims its key first: a retry meanwhile is told to wait.
  if (externalImageUrls(input.content).length > 0) await claimKey(ctx);
  await precheckLinks(ctx, input.content, links, undefined, noteLimit);
  const note = noteOf(ctx, input, await rehost(ctx, input.content));
  // One statement: the scope, the links' locks and caps, the note, its links and its event (entriesRepo.create).
  const verdict = await oneStatement(ctx, (db) => entriesRepo.create(db, note), { body: { id: note.row.id } });
  if (verdict.ok) return { id: note.row.id };
  throw refusal(ctx, note, verdict);
}

export async function getEntry(ctx: ServiceContext, id: string): Promise<Schemas['EntryDetail']> {
  const { db } = ctx;
  const userId = ownerOf(ctx);
  const row = await entriesRepo.find(db, userId, id);
  if (!row || row.deleted_at !== null) throw notFound('Entry not found');
  return detail(db, userId, row);
}

export async function listEntries(
  ctx: ServiceContext,
  query: { limit?: number; memberId?: string },
): Promise<Schemas['EntryListRow'][]> {
  const rows = await entriesRepo.listWithMembers(ctx.db, ownerRowsOf(ctx.access), query.limit ?? 50, query.memberId);
  return rows.map((r) => {
    const members = r.members.map(toMemberSummary);
    return {
      _id: r.id,
      title: r.title,
      content: r.content,
      createdAt: r.created_at,
      updatedAt: r.updated_at,
      member: members[0] ?? null,
      members,
    };
  });
}

export async function updateEntry(
  ctx: ServiceContext,
  id: string,
  input: Schemas['UpdateEntryRequest'],
): Promise<Schemas['EntryDetail']> {
  const { db, now } = ctx;
  const userId = ownerOf(ctx);
  if (Object.keys(input).length === 0)
    throw badRequest('Request body must contain at least one of title, content, memberId, memberIds');
  const current = await entriesRepo.find(db, userId, id);
  if (!current) throw notFound('Entry not found');
  if (current.deleted_at !== null) throw badRequest('Entry is in trash; restore it before editing');
  if (input.content !== undefined && (input.memberId !== undefined || input.memberIds !== undefined)) {
    const before = linkSet(current.member_id, current.member_ids);
    const after = linkSet(
      input.memberId !== undefined ? input.memberId : current.member_id,
      input.memberIds !== undefined ? input.memberIds : current.member_ids,
    );
    await precheckLinks(
      ctx,
      input.content,
      after.filter((m) => !before.includes(m)),
      id,
      badRequest,
    );
  }
  const content = input.content !== undefined ? await rehost(ctx, input.content) : undefined;
  const row = await inTransaction(ctx, async (tx) => {
    const trx = tx.db;
    const locked = await entriesRepo.lock(trx, userId, id);
    if (!locked) throw notFound('Entry not found');
    if (locked.deleted_at !== null) throw badRequest('Entry is in trash; restore it before editing');
    const changes: EntryChanges = { updated_at: now };
    if (input.title !== undefined) changes.title = input.title;
    if (content !== undefined) changes.content = content;
    if (input.memberId !== undefined) changes.member_id = input.memberId;
    if (input.memberIds !== undefined) changes.member_ids = input.memberIds;
    if (input.memberId !== undefined || input.memberIds !== undefined) {
      const before = linkSet(locked.member_id, locked.member_ids);
      const after = linkSet(
        changes.member_id !== undefined ? changes.member_id : locked.member_id,
        changes.member_ids !== undefined ? changes.member_ids : locked.member_ids,
      );
      const added = after.filter((m) => !before.includes(m));
      await assertCaps(trx, ctx, added, { excludeEntryId: id, live: true, fail: badRequest });
      await entriesRepo.setLinks(trx, userId, id, after);
    }
    const updated = await entriesRepo.update(trx, userId, id, changes);
    await tx.events.emit(tx, { type: 'entry.updated', area: 'entries', data: { id, fields: Object.keys(input) } });
    return updated;
  });
  return detail(db, userId, row);
}

const PERMANENT = new Set(['true', '1', 'yes']);

/** Trashes a note, or with `permanent` purges it for good (audited: `entry.purge`). */
export async function deleteEntry(ctx: ServiceContext, id: string, permanent: string | undefined): Promise<void> {
  const { now } = ctx;
  const userId = ownerOf(ctx);
  const purge = permanent !== undefined && PERMANENT.has(permanent);
  const keys = await inTransaction(ctx, async (tx) => {
    const trx = tx.db;
    const row = await entriesRepo.lock(trx, userId, id);
    if (!row) throw notFound('Entry not found');
    if (!purge) {
      if (row.deleted_at !== null) throw badRequest('Entry is already in trash');
      await entriesRepo.update(trx, userId, id, { deleted_at: now, updated_at: now });
      await tx.events.emit(tx, { type: 'entry.trashed', area: 'entries', data: { id } });
      return [];
    }
    // Permanent delete goes through the trash: trashed first (if it was active), then purged.
    if (row.deleted_at === null) await entriesRepo.update(trx, userId, id, { deleted_at: now, updated_at: now });
    const purged = await purgeItems(trx, userId, [{ type: 'entry', id }]);
    await tx.audit.record(tx, { action: 'entry.purge', targetType: 'entry', targetId: id });
    await tx.events.emit(tx, { type: 'entry.purged', area: 'entries', data: { id } });
    return purged.objectKeys;
  });
  await dropObjects(ctx.storage, keys, ctx.log);
}

export async function restoreEntry(ctx: ServiceContext, id: string): Promise<void> {
  const { now } = ctx;
  const userId = ownerOf(ctx);
  await inTransaction(ctx, async (tx) => {
    const trx = tx.db;
    const row = await entriesRepo.lock(trx, userId, id);
    if (!row) throw notFound('Entry not found');
    if (row.deleted_at === null) throw badRequest('Entry is not in trash');
    const links = (await entriesRepo.linksOf(trx, userId, [id])).get(id) ?? [];
    await assertCaps(trx, ctx, links, {
      excludeEntryId: id,
      live: false,
      fail: (m) => badRequest(`Restoring would exceed the note limit: ${m}`),
    });
    await entriesRepo.update(trx, userId, id, { deleted_at: null, updated_at: now });
    await tx.events.emit(tx, { type: 'entry.restored', area: 'entries', data: { id } });
  });
}

/** A re-hosted note image of the owner, with ETag revalidation. */
export async function readEntryImage(
  ctx: ServiceContext,
  imageId: string,
  ifNoneMatch: string | undefined,
): Promise<Exclude<StoredImageResponse, { status: 404 }>> {
  if (!ctx.storage) throw unavailable('Object storage is not configured on this server');
  const result = await readStoredImage(ctx.storage, imageKey(ownerOf(ctx), imageId), ifNoneMatch);
  if (result.status === 404) throw notFound('Image not found');
  return result;
}

export interface ImportedNote {
  id: string;
  title: string | null;
  content: string;
  memberId: string | null;
  /** When it was written in the source: its creation and last change here. */
  at: number;
}

/**
 * Notes an import writes, as they were: the rules of createEntry (live linked members, the plan's
 * note cap per member, under the members' row locks) checked once for all of them, then written
 * 1000 to a statement, with the ids given. A note with external images goes through createEntry
 * one at a time, so its images are re-hosted like any note's (and it gets an id of its own).
 * Returns the id each written note has, and why each refused one was refused.
 */
export async function insertImportedNotes(
  ctx: ServiceContext,
  notes: ImportedNote[],
): Promise<{ written: Map<string, string>; refused: Map<string, string> }> {
  const userId = ownerOf(ctx);
  const refused = new Map<string, string>();
  const written = new Map<string, string>();
  await inTransaction(ctx, async (tx) => {
    const trx = tx.db;
    const scope = await resolveWriteScope(trx, userId);
    const memberIds = [...new Set(notes.map((n) => n.memberId).filter((id) => id !== null))];
    const live = await entriesRepo.lockMembers(trx, userId, memberIds);
    const state = memberIds.length ? await entriesRepo.capState(trx, userId, memberIds) : undefined;
    const plan = (state?.plan ?? 'free') as PlanKey;
    const cap = ctx.config.noteCaps[plan];
    const counts = state?.counts ?? new Map<string, number>();
    const rows: ImportedEntryRow[] = [];
    const withImages: ImportedNote[] = [];
    for (const note of notes) {
      const member = note.memberId;
      if (member !== null && !live.has(member)) {
        refused.set(note.id, `Linked members must be your live members; not: ${member}`);
        continue;
      }
      if (member !== null && (counts.get(member) ?? 0) >= cap) {
        refused.set(note.id, capMessage(ctx, plan, [member]));
        continue;
      }
      if (member !== null) counts.set(member, (counts.get(member) ?? 0) + 1);
      if (externalImageUrls(note.content).length > 0) {
        withImages.push(note);
        continue;
      }
      written.set(note.id, note.id);
      rows.push({
        id: note.id,
        side_system_id: scope.sideSystemId,
        sub_system_id: scope.subSystemId,
        title: note.title,
        content: note.content,
        member_id: member,
        created_at: note.at,
      });
    }
    await entriesRepo.insertImported(trx, userId, rows);
    for (const note of withImages) {
      try {
        const id = await inTransaction(tx, async (one) => {
          const created = await createEntry(one, {
            content: note.content,
            title: note.title,
            ...(note.memberId ? { memberId: note.memberId } : {}),
          });
          await entriesRepo.setImportedTimes(one.db, userId, created.id, note.at);
          return created.id;
        });
        written.set(note.id, id);
      } catch (err) {
        if (!(err instanceof DomainError)) throw err;
        refused.set(note.id, err.message);
      }
    }
  });
  return { written, refused };
}

/** An imported note that an edited export changed keeps the time the export gives it. */
export async function setImportedNoteTime(ctx: ServiceContext, id: string, at: number): Promise<void> {
  await entriesRepo.setImportedTimes(ctx.db, ownerOf(ctx), id, at);
}

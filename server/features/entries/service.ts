/** Notes: links to members, the per-member note cap, the lifecycle table (trash, purge, restore). */
import { randomUUID } from 'node:crypto';
import type { Knex } from 'knex';
import type { components } from '../../../generated/api.d.ts';
import type { AppDeps } from '../../deps.ts';
import { ApiError, badRequest, notFound } from '../../http/errors.ts';
import { fetchOptionsFromConfig } from '../../net/guardedFetch.ts';
import { PLAN_NAMES, type PlanKey } from '../accounts/plans.ts';
import { accountsRepo } from '../accounts/repo.ts';
import { toMemberSummary, type MemberSummary } from '../members/present.ts';
import { membersRepo } from '../members/repo.ts';
import { resolveReadScope, resolveWriteScope } from '../systems/scope.ts';
import { purgeItems } from '../trash/purge.ts';
import { dropObjects } from '../trash/service.ts';
import { registerNoteImage } from '../../storage/noteImages.ts';
import { rehostImages } from './rehost.ts';
import { entriesRepo, type EntryRow } from './repo.ts';

type Schemas = components['schemas'];
type Deps = Pick<AppDeps, 'db' | 'storage' | 'config' | 'logger'>;

/** The linked set: the legacy single link first, then the list, without repeats. */
function linkSet(memberId: string | null, memberIds: string[] | null): string[] {
  return [...new Set([...(memberId ? [memberId] : []), ...(memberIds ?? [])])];
}

async function assertOwnMembers(db: Knex, userId: string, ids: string[]): Promise<void> {
  const bad = await membersRepo.missingLive(db, userId, ids);
  if (bad.length) throw badRequest(`Linked members must be your live members; not: ${bad.join(', ')}`);
}

/** The members (of `memberIds`) already at the plan's note cap, and the message saying so; null when none is. */
async function capViolation(db: Knex, deps: Deps, userId: string, memberIds: string[], excludeEntryId: string | undefined): Promise<string | null> {
  if (memberIds.length === 0) return null;
  const account = await accountsRepo.findAccount(db, userId);
  const plan = (account?.plan ?? 'free') as PlanKey;
  const cap = deps.config.noteCaps[plan];
  const counts = await entriesRepo.activeCounts(db, userId, memberIds, excludeEntryId);
  const full = memberIds.filter((id) => (counts.get(id) ?? 0) >= cap);
  return full.length ? `Note limit of ${cap} per member on the ${PLAN_NAMES[plan]} plan reached for member ${full.join(', ')}` : null;
}

/**
 * The cap counts active notes per member. Member rows are locked first so two notes created at
 * once for the same member cannot both slip under the cap.
 */
async function assertCaps(
  trx: Knex.Transaction,
  deps: Deps,
  userId: string,
  memberIds: string[],
  excludeEntryId: string | undefined,
  fail: (message: string) => ApiError,
): Promise<void> {
  if (memberIds.length === 0) return;
  await trx('members').where({ user_id: userId }).whereIn('id', memberIds).orderBy('id').forUpdate().select('id');
  const violation = await capViolation(trx, deps, userId, memberIds, excludeEntryId);
  if (violation) throw fail(violation);
}

/**
 * The same checks without locks, before any external image is fetched: a note that will be
 * refused anyway must not cost downloads. The transaction repeats them under locks.
 */
async function precheckLinks(
  deps: Deps,
  userId: string,
  memberIds: string[],
  excludeEntryId: string | undefined,
  fail: (message: string) => ApiError,
): Promise<void> {
  const db = deps.db.knex;
  await assertOwnMembers(db, userId, memberIds);
  const violation = await capViolation(db, deps, userId, memberIds, excludeEntryId);
  if (violation) throw fail(violation);
}

const noteLimit = (message: string) => new ApiError(403, 'NOTE_LIMIT_REACHED', message);

async function summaries(db: Knex, userId: string, ids: string[]): Promise<Map<string, MemberSummary>> {
  const rows = await membersRepo.byIds(db, userId, [...new Set(ids)]);
  return new Map(rows.map((r) => [r.id, toMemberSummary(r)]));
}

function listRow(row: EntryRow, links: string[], members: Map<string, MemberSummary>): Schemas['EntryListRow'] {
  const linked = links.map((id) => members.get(id)).filter((m): m is MemberSummary => m !== undefined);
  return { _id: row.id, title: row.title, content: row.content, createdAt: row.created_at, updatedAt: row.updated_at, member: linked[0] ?? null, members: linked };
}

async function detail(db: Knex, userId: string, row: EntryRow): Promise<Schemas['EntryDetail']> {
  const links = (await entriesRepo.linksOf(db, userId, [row.id])).get(row.id) ?? [];
  return { ...listRow(row, links, await summaries(db, userId, links)), memberId: row.member_id, memberIds: row.member_ids };
}

function rehost(deps: Deps, userId: string, content: string, now: number): Promise<string> {
  return rehostImages(content, userId, deps.storage, fetchOptionsFromConfig(deps.config), {
    concurrency: deps.config.noteImageFetchConcurrency,
    totalTimeoutMs: deps.config.noteImagesTimeoutMs,
    beforeStore: (sha256) => registerNoteImage(deps.db.knex, userId, sha256, now),
  });
}

export async function createEntry(deps: Deps, userId: string, input: Schemas['CreateEntryRequest'], now: number): Promise<{ id: string }> {
  const db = deps.db.knex;
  const links = linkSet(input.memberId ?? null, input.memberIds ?? null);
  await precheckLinks(deps, userId, links, undefined, noteLimit);
  const content = await rehost(deps, userId, input.content, now);
  return db.transaction(async (trx) => {
    const scope = await resolveWriteScope(trx, userId);
    await assertOwnMembers(trx, userId, links);
    await assertCaps(trx, deps, userId, links, undefined, noteLimit);
    const row: EntryRow = {
      id: randomUUID(),
      user_id: userId,
      side_system_id: scope.sideSystemId,
      sub_system_id: scope.subSystemId,
      title: input.title ?? null,
      content,
      member_id: input.memberId ?? null,
      member_ids: input.memberIds ?? null,
      created_at: now,
      updated_at: now,
      deleted_at: null,
    };
    await entriesRepo.insert(trx, row);
    await entriesRepo.setLinks(trx, userId, row.id, links);
    return { id: row.id };
  });
}

export async function getEntry(db: Knex, userId: string, id: string): Promise<Schemas['EntryDetail']> {
  const row = await entriesRepo.find(db, userId, id);
  if (!row || row.deleted_at !== null) throw notFound('Entry not found');
  return detail(db, userId, row);
}

export async function listEntries(db: Knex, userId: string, query: { limit?: number; memberId?: string }): Promise<Schemas['EntryListRow'][]> {
  const scope = await resolveReadScope(db, userId);
  const rows = await entriesRepo.list(db, userId, scope, query.limit ?? 50, query.memberId);
  const links = await entriesRepo.linksOf(db, userId, rows.map((r) => r.id));
  const members = await summaries(db, userId, [...links.values()].flat());
  return rows.map((r) => listRow(r, links.get(r.id) ?? [], members));
}

export async function updateEntry(deps: Deps, userId: string, id: string, input: Schemas['UpdateEntryRequest'], now: number): Promise<Schemas['EntryDetail']> {
  const db = deps.db.knex;
  if (Object.keys(input).length === 0) throw badRequest('Request body must contain at least one of title, content, memberId, memberIds');
  const current = await entriesRepo.find(db, userId, id);
  if (!current) throw notFound('Entry not found');
  if (current.deleted_at !== null) throw badRequest('Entry is in trash; restore it before editing');
  if (input.content !== undefined && (input.memberId !== undefined || input.memberIds !== undefined)) {
    const before = linkSet(current.member_id, current.member_ids);
    const after = linkSet(input.memberId !== undefined ? input.memberId : current.member_id, input.memberIds !== undefined ? input.memberIds : current.member_ids);
    await precheckLinks(deps, userId, after.filter((m) => !before.includes(m)), id, badRequest);
  }
  const content = input.content !== undefined ? await rehost(deps, userId, input.content, now) : undefined;
  const row = await db.transaction(async (trx) => {
    const locked = await entriesRepo.lock(trx, userId, id);
    if (!locked) throw notFound('Entry not found');
    if (locked.deleted_at !== null) throw badRequest('Entry is in trash; restore it before editing');
    const changes: Partial<EntryRow> = { updated_at: now };
    if (input.title !== undefined) changes.title = input.title;
    if (content !== undefined) changes.content = content;
    if (input.memberId !== undefined) changes.member_id = input.memberId;
    if (input.memberIds !== undefined) changes.member_ids = input.memberIds;
    if (input.memberId !== undefined || input.memberIds !== undefined) {
      const before = linkSet(locked.member_id, locked.member_ids);
      const after = linkSet(changes.member_id !== undefined ? changes.member_id : locked.member_id, changes.member_ids !== undefined ? changes.member_ids : locked.member_ids);
      const added = after.filter((m) => !before.includes(m));
      await assertOwnMembers(trx, userId, added);
      await assertCaps(trx, deps, userId, added, id, badRequest);
      await entriesRepo.setLinks(trx, userId, id, after);
    }
    return entriesRepo.update(trx, userId, id, changes);
  });
  return detail(db, userId, row);
}

const PERMANENT = new Set(['true', '1', 'yes']);

export async function deleteEntry(deps: Deps, userId: string, id: string, permanent: string | undefined, now: number): Promise<void> {
  const db = deps.db.knex;
  const purge = permanent !== undefined && PERMANENT.has(permanent);
  const keys = await db.transaction(async (trx) => {
    const row = await entriesRepo.lock(trx, userId, id);
    if (!row) throw notFound('Entry not found');
    if (!purge) {
      if (row.deleted_at !== null) throw badRequest('Entry is already in trash');
      await entriesRepo.update(trx, userId, id, { deleted_at: now, updated_at: now });
      return [];
    }
    // Permanent delete goes through the trash: trashed first (if it was active), then purged.
    if (row.deleted_at === null) await entriesRepo.update(trx, userId, id, { deleted_at: now, updated_at: now });
    return (await purgeItems(trx, userId, [{ type: 'entry', id }])).objectKeys;
  });
  await dropObjects(deps.storage, keys, deps.logger);
}

export async function restoreEntry(deps: Deps, userId: string, id: string, now: number): Promise<void> {
  await deps.db.knex.transaction(async (trx) => {
    const row = await entriesRepo.lock(trx, userId, id);
    if (!row) throw notFound('Entry not found');
    if (row.deleted_at === null) throw badRequest('Entry is not in trash');
    const links = (await entriesRepo.linksOf(trx, userId, [id])).get(id) ?? [];
    await assertCaps(trx, deps, userId, links, id, (m) => badRequest(`Restoring would exceed the note limit: ${m}`));
    await entriesRepo.update(trx, userId, id, { deleted_at: null, updated_at: now });
  });
}

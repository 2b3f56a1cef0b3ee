/**
 * Front rules: who is fronting and in which order, tier presence, the history and its
 * corrections. The front is account-wide (one body, one front); new sessions are stamped with
 * the active side/sub system, but reads are never narrowed by it. Every write that reads the
 * front before changing it takes the account's front lock (frontRepo.lock) in its transaction.
 */
import { inTransaction, oneStatement, ownerOf, type PresetId, type ServiceContext } from '../../core/context.ts';
import { randomUUID } from 'node:crypto';
import type { Knex } from 'knex';
import type { components } from '../../../generated/api.d.ts';
import { badRequest, notFound } from '../../core/errors.ts';
import { pageOf } from '../../core/keyset.ts';
import { type MemberRow, memberOf, toMemberSummary } from '../../core/members.ts';
import {
  frontRepo,
  type FrontSessionChanges,
  type FrontSessionRow,
  type HistoryCursor,
  type HistoryFilter,
} from './repo.ts';

type Schemas = components['schemas'];
type FrontState = Schemas['FrontState'];
type ActiveSession = Schemas['FrontActiveSession'];
type HistorySession = Schemas['FrontHistorySession'];
type HistoryPage = Schemas['FrontHistoryPage'];
type FrontTier = Schemas['FrontTier'];

export const PRESET_TIERS: ReadonlyArray<{ key: string; displayName: string }> = [
  { key: 'coFront', displayName: 'Co-front' },
  { key: 'coConscious', displayName: 'Co-conscious' },
];
const PRESET_NAMES = new Map(PRESET_TIERS.map((t) => [t.key, t.displayName]));

export const MAX_CUSTOM_TIERS = 50;
export const DEFAULT_HISTORY_LIMIT = 20;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** Whitespace-only notes are no note. */
function noteOrNull(note: string | null | undefined): string | null {
  return note === undefined || note === null || note.trim() === '' ? null : note;
}

function toHistorySession(
  row: Pick<FrontSessionRow, 'id' | 'member_id' | 'started_at' | 'ended_at' | 'note'>,
  userId: string,
): HistorySession {
  const session: HistorySession = {
    _id: row.id,
    userId,
    memberId: row.member_id,
    startedAt: row.started_at,
    endedAt: row.ended_at,
  };
  if (row.note !== null) session.note = row.note;
  return session;
}

/** Open sessions of members that are not in the trash, in front order. */
async function liveOpenSessions(db: Knex, userId: string): Promise<FrontSessionRow[]> {
  const sessions = await frontRepo.openSessions(db, userId);
  const live = await frontRepo.liveMemberIds(
    db,
    userId,
    sessions.map((s) => s.member_id),
  );
  return sessions.filter((s) => live.has(s.member_id));
}

export async function getFront(ctx: ServiceContext): Promise<FrontState> {
  const userId = ownerOf(ctx);
  // One statement: open sessions of members not in the trash, in front order, then tier presence.
  const rows = await frontRepo.frontNow(ctx.db, userId);
  // One pass: the rows come sessions first (in front order), then presence.
  const memberIds: string[] = [];
  const members: FrontState['members'] = [];
  const activeSessions: ActiveSession[] = [];
  const tieredPresence: FrontState['tieredPresence'] = [];
  for (const row of rows) {
    if (row.kind === 'session') {
      memberIds.push(row.member_id);
      members.push(memberOf(row.member_id, userId, row));
      const session: ActiveSession = { _id: row.id, userId, memberId: row.member_id, startedAt: row.started_at };
      if (row.note !== null) session.note = row.note;
      activeSessions.push(session);
    } else {
      tieredPresence.push({
        memberId: row.member_id,
        tierKey: row.tier_key,
        tierDisplayName: PRESET_NAMES.get(row.tier_key) ?? row.custom_display_name ?? row.tier_key,
        note: row.note,
      });
    }
  }
  const primary = activeSessions[0];
  return {
    memberIds,
    members,
    activeSessions,
    primaryMemberId: primary?.memberId ?? null,
    primaryNote: primary?.note ?? null,
    tieredPresence,
  };
}

/**
 * `front.changed`'s data as it is appended: the front is filled in as the transaction commits
 * (front_state, migration 0030), so the event shows the front as its transaction leaves it.
 */
const FRONT_AT_COMMIT = { front: null } as unknown as Schemas['FrontChangedEvent']['data'];

/** Appends `front.changed` with the front as this transaction leaves it (docs/events.md). */
export async function frontChanged(tx: ServiceContext): Promise<void> {
  await tx.events.emit(tx, { type: 'front.changed', area: 'front', data: FRONT_AT_COMMIT });
}

/** The member may join the front or a tier: the caller's, not archived, not in the trash. */
async function assertActiveMember(db: Knex, userId: string, memberId: string, field = 'memberId'): Promise<void> {
  const member = await frontRepo.member(db, userId, memberId);
  if (!member || member.deleted_at !== null) throw badRequest(`${field} is not one of your members`);
  if (member.archived_at !== null) throw badRequest(`${field} is an archived member; unarchive it first`);
}

/** Starts the member's session in one statement (frontRepo.start); a member already fronting is left as it is. */
export async function startFronting(
  ctx: ServiceContext,
  input: Schemas['StartFrontingRequest'] & PresetId,
): Promise<void> {
  const events = ctx.events.rows(ctx, [{ type: 'front.changed', area: 'front', data: FRONT_AT_COMMIT }]);
  const verdict = await oneStatement(
    ctx,
    (db) =>
      frontRepo.start(db, {
        id: input.id ?? randomUUID(),
        userId: ownerOf(ctx),
        memberId: input.memberId,
        note: noteOrNull(input.note),
        createdBy: input.createdBy ?? null,
        now: ctx.now,
        events,
      }),
    { body: undefined },
  );
  if (!verdict.member_live) throw badRequest('memberId is not one of your members');
  if (verdict.member_archived) throw badRequest('memberId is an archived member; unarchive it first');
  if (!verdict.creator_ok) throw badRequest('createdBy is not one of your members');
  if (!verdict.scoped) throw new Error(`account ${ownerOf(ctx)} has no live active side or sub system`);
}

/** Ends the member's open session in one statement (frontRepo.stop); a trashed member may still be ended. */
export async function stopFronting(ctx: ServiceContext, memberId: string): Promise<void> {
  const events = ctx.events.rows(ctx, [{ type: 'front.changed', area: 'front', data: FRONT_AT_COMMIT }]);
  const verdict = await oneStatement(ctx, (db) =>
    frontRepo.stop(db, { userId: ownerOf(ctx), memberId, now: ctx.now, events }),
  );
  if (!verdict.member) throw badRequest('memberId is not one of your members');
}

export async function clearFront(ctx: ServiceContext): Promise<void> {
  const { now } = ctx;
  const userId = ownerOf(ctx);
  await inTransaction(ctx, async (tx) => {
    await frontRepo.lock(tx.db, userId);
    await frontRepo.endOpen(tx.db, userId, now);
    await frontRepo.deletePresence(tx.db, userId);
    await frontChanged(tx);
  });
}

/**
 * The account's front lock, for other areas whose writes change what the front or its history
 * counts (trashing or restoring a member). Take it before any member row lock.
 */
export async function lockFront(trx: Knex.Transaction, userId: string): Promise<void> {
  await frontRepo.lock(trx, userId);
}

/**
 * Ends the member's open session and removes its tier presence, inside the caller's
 * transaction. For areas that take a member out of circulation (moving it to the trash). Whether
 * the front changed (a session ended or a presence removed): the caller then emits `front.changed`.
 */
export async function endMemberFront(trx: Knex, userId: string, memberId: string, now: number): Promise<boolean> {
  await frontRepo.lock(trx, userId);
  const ended = await frontRepo.endOpen(trx, userId, now, memberId);
  const removed = await frontRepo.deletePresence(trx, userId, memberId);
  return ended + removed > 0;
}

export async function reorderFront(ctx: ServiceContext, memberIds: string[]): Promise<void> {
  const { now } = ctx;
  const userId = ownerOf(ctx);
  await inTransaction(ctx, async (tx) => {
    const trx = tx.db;
    await frontRepo.lock(trx, userId);
    const current = new Set((await liveOpenSessions(trx, userId)).map((s) => s.member_id));
    const given = new Set(memberIds);
    const missing = [...current].filter((id) => !given.has(id));
    const extra = [...given].filter((id) => !current.has(id));
    if (given.size !== memberIds.length || missing.length > 0 || extra.length > 0) {
      const details = [
        given.size !== memberIds.length ? 'an id is repeated' : '',
        missing.length > 0 ? `missing: ${missing.join(', ')}` : '',
        extra.length > 0 ? `not fronting: ${extra.join(', ')}` : '',
      ].filter(Boolean);
      throw badRequest(`memberIds must list each member fronting now exactly once (${details.join('; ')})`);
    }
    await frontRepo.setOrder(trx, userId, memberIds, now);
    await frontChanged(tx);
  });
}

async function assertTierKey(db: Knex, userId: string, tierKey: string): Promise<void> {
  if (PRESET_NAMES.has(tierKey)) return;
  if (UUID.test(tierKey) && (await frontRepo.findTier(db, userId, tierKey.toLowerCase()))) return;
  throw badRequest(`Unknown tierKey '${tierKey}'; use coFront, coConscious or one of your custom tier ids`);
}

export async function setTierPresence(ctx: ServiceContext, input: Schemas['SetTierPresenceRequest']): Promise<void> {
  const { now } = ctx;
  const userId = ownerOf(ctx);
  const tierKey = PRESET_NAMES.has(input.tierKey) ? input.tierKey : input.tierKey.toLowerCase();
  await inTransaction(ctx, async (tx) => {
    const trx = tx.db;
    await frontRepo.lock(trx, userId);
    await assertTierKey(trx, userId, tierKey);
    await assertActiveMember(trx, userId, input.memberId);
    const [primary] = await liveOpenSessions(trx, userId);
    if (primary?.member_id === input.memberId)
      throw badRequest('The primary fronter cannot also be in a presence tier');
    await frontRepo.upsertPresence(trx, {
      user_id: userId,
      member_id: input.memberId,
      tier_key: tierKey,
      note: noteOrNull(input.note),
      created_at: now,
      updated_at: now,
    });
    await frontChanged(tx);
  });
}

export async function clearTierPresence(ctx: ServiceContext, memberId: string): Promise<void> {
  const userId = ownerOf(ctx);
  await inTransaction(ctx, async (tx) => {
    await frontRepo.deletePresence(tx.db, userId, memberId);
    await frontChanged(tx);
  });
}

export async function listTiers(ctx: ServiceContext): Promise<FrontTier[]> {
  const { db } = ctx;
  const userId = ownerOf(ctx);
  const custom = await frontRepo.listTiers(db, userId);
  return [
    ...PRESET_TIERS.map((t) => ({ key: t.key, displayName: t.displayName, kind: 'preset' as const })),
    ...custom.map((t) => ({ key: t.id, displayName: t.display_name, kind: 'custom' as const })),
  ];
}

export async function createTier(
  ctx: ServiceContext,
  input: Schemas['CreateFrontTierRequest'] & PresetId,
): Promise<{ id: string }> {
  const { now } = ctx;
  const userId = ownerOf(ctx);
  return inTransaction(ctx, async ({ db: trx }) => {
    await frontRepo.lock(trx, userId);
    if ((await frontRepo.countTiers(trx, userId)) >= MAX_CUSTOM_TIERS) {
      throw badRequest(`An account can have at most ${MAX_CUSTOM_TIERS} custom tiers`);
    }
    const id = input.id ?? randomUUID();
    await frontRepo.insertTier(trx, {
      id,
      user_id: userId,
      display_name: input.displayName.trim(),
      created_at: now,
      updated_at: now,
    });
    return { id };
  });
}

export async function deleteTier(ctx: ServiceContext, id: string): Promise<void> {
  const userId = ownerOf(ctx);
  await inTransaction(ctx, async ({ db: trx }) => {
    await frontRepo.lock(trx, userId);
    if (!(await frontRepo.deleteTier(trx, userId, id))) throw notFound('Custom tier not found');
  });
}

export interface HistoryQuery {
  limit?: number;
  startTime?: number;
  endTime?: number;
  cursorStartedAt?: number;
  cursorId?: string;
}

export async function getHistory(ctx: ServiceContext, query: HistoryQuery): Promise<HistoryPage> {
  const { db } = ctx;
  const userId = ownerOf(ctx);
  if ((query.cursorStartedAt === undefined) !== (query.cursorId === undefined)) {
    throw badRequest('cursorStartedAt and cursorId must be sent together (both from nextCursor) or not at all');
  }
  if (query.startTime !== undefined && query.endTime !== undefined && query.startTime > query.endTime) {
    throw badRequest('startTime must be <= endTime');
  }
  const limit = query.limit ?? DEFAULT_HISTORY_LIMIT;
  const after: HistoryCursor | undefined =
    query.cursorId !== undefined ? { startedAt: query.cursorStartedAt!, id: query.cursorId } : undefined;
  if (query.startTime === undefined && query.endTime === undefined) {
    // The whole history (what clients page through): page, members and count in one statement.
    const { rows, count } = await frontRepo.historyPageWithCount(db, userId, limit, after);
    const { items: page, nextAfter: last } = pageOf(rows, limit);
    const items: HistoryPage['items'] = [];
    for (const row of page) {
      if (row.summary_id === null) continue; // the member was purged meanwhile
      const member = {
        id: row.summary_id,
        name: row.name!,
        display_name: row.display_name,
        archived_at: row.archived_at,
        avatar: row.avatar,
      };
      items.push(historyItem(userId, row, member));
    }
    return { items, count, nextCursor: last ? { startedAt: last.started_at, id: last.id } : null };
  }
  const filter = { startTime: query.startTime, endTime: query.endTime };
  const [rows, count] = await Promise.all([
    frontRepo.historyPage(db, userId, filter, limit, after),
    frontRepo.historyCount(db, userId, filter),
  ]);
  const { items: page, nextAfter: last } = pageOf(rows, limit);
  const members = await frontRepo.historyMembers(db, userId, [...new Set(page.map((r) => r.member_id))]);
  const byId = new Map(members.map((m) => [m.id, m]));
  // The cursor is the last row read, so a member purged between the two queries cannot cause a gap.
  return {
    items: page.flatMap((row) => {
      const member = byId.get(row.member_id);
      return member ? [historyItem(userId, row, member)] : [];
    }),
    count,
    nextCursor: last ? { startedAt: last.started_at, id: last.id } : null,
  };
}

/** A history item: the session, its member's summary and its duration (null while open). */
function historyItem(
  userId: string,
  row: Pick<FrontSessionRow, 'id' | 'member_id' | 'started_at' | 'ended_at' | 'note'>,
  member: Pick<MemberRow, 'id' | 'name' | 'display_name' | 'archived_at' | 'avatar'>,
): HistoryPage['items'][number] {
  return {
    session: toHistorySession(row, userId),
    member: toMemberSummary(member),
    durationMs: row.ended_at === null ? null : row.ended_at - row.started_at,
  };
}

/** Rejects a session that would share time with another session of the same member. */
async function assertNoOverlap(
  trx: Knex,
  row: FrontSessionRow,
  startedAt: number,
  endedAt: number | null,
): Promise<void> {
  if (await frontRepo.overlaps(trx, row.user_id, row.member_id, row.id, startedAt, endedAt)) {
    throw badRequest('The session would overlap another front session of the same member');
  }
}

export async function updateSession(
  ctx: ServiceContext,
  id: string,
  patch: Schemas['UpdateFrontSessionRequest'],
): Promise<HistorySession> {
  const { now } = ctx;
  const userId = ownerOf(ctx);
  if (patch.startedAt !== undefined && patch.startedAt > now) throw badRequest('startedAt cannot be in the future');
  if (patch.endedAt !== undefined && patch.endedAt > now) throw badRequest('endedAt cannot be in the future');
  return inTransaction(ctx, async (tx) => {
    const trx = tx.db;
    await frontRepo.lock(trx, userId);
    const row = await frontRepo.findSession(trx, userId, id);
    if (!row) throw notFound('Front session not found');
    if (row.deleted_at !== null) throw badRequest('Front session is in the trash; restore it first');
    const startedAt = patch.startedAt ?? row.started_at;
    const endedAt = patch.endedAt ?? row.ended_at;
    if (endedAt !== null && startedAt > endedAt) throw badRequest('startedAt must be <= endedAt');
    const changes: FrontSessionChanges = { updated_at: now };
    if (patch.startedAt !== undefined) changes.started_at = patch.startedAt;
    if (patch.endedAt !== undefined) {
      changes.ended_at = patch.endedAt;
      changes.position = null; // an open session that gets an end leaves the front
    }
    if (patch.note !== undefined) changes.note = noteOrNull(patch.note);
    if (patch.startedAt !== undefined || patch.endedAt !== undefined)
      await assertNoOverlap(trx, row, startedAt, endedAt);
    const updated = toHistorySession(await frontRepo.updateSession(trx, userId, id, changes), userId);
    await tx.events.emit(tx, {
      type: 'front_session.corrected',
      area: 'front',
      data: { id: row.id, fields: Object.keys(patch) },
    });
    // An open session's note or end is the front's too.
    if (row.ended_at === null && row.deleted_at === null) await frontChanged(tx);
    return updated;
  });
}

export async function trashSession(ctx: ServiceContext, id: string): Promise<void> {
  const { now } = ctx;
  const userId = ownerOf(ctx);
  await inTransaction(ctx, async (tx) => {
    const trx = tx.db;
    await frontRepo.lock(trx, userId);
    const row = await frontRepo.findSession(trx, userId, id);
    if (!row) throw notFound('Front session not found');
    if (row.deleted_at !== null) throw badRequest('Front session is already in the trash');
    // An open session stays open in the trash, so restoring it puts the member back in the front.
    await frontRepo.updateSession(trx, userId, id, { deleted_at: now, position: null, updated_at: now });
    await tx.events.emit(tx, { type: 'front_session.trashed', area: 'front', data: { id: row.id } });
    if (row.ended_at === null) await frontChanged(tx);
  });
}

export async function restoreSession(ctx: ServiceContext, id: string): Promise<void> {
  const { now } = ctx;
  const userId = ownerOf(ctx);
  await inTransaction(ctx, async (tx) => {
    const trx = tx.db;
    await frontRepo.lock(trx, userId);
    const row = await frontRepo.findSession(trx, userId, id);
    if (!row) throw notFound('Front session not found');
    if (row.deleted_at === null) throw badRequest('Front session is not in the trash');
    if (row.ended_at === null && (await frontRepo.findOpenByMember(trx, userId, row.member_id))) {
      throw badRequest('The member is fronting again; end that session before restoring this open one');
    }
    await assertNoOverlap(trx, row, row.started_at, row.ended_at);
    const position = row.ended_at === null ? await frontRepo.nextPosition(trx, userId) : null;
    await frontRepo.updateSession(trx, userId, id, { deleted_at: null, position, updated_at: now });
    await tx.events.emit(tx, { type: 'front_session.restored', area: 'front', data: { id: row.id } });
    if (row.ended_at === null) await frontChanged(tx);
  });
}

/**
 * The number of sessions of the owner's history within the time filter (sessions of members in the
 * trash left out), for a friend's history page once the access engine has let the friend see it.
 */
export function frontHistoryCount(db: Knex, ownerId: string, filter: HistoryFilter): Promise<number> {
  return frontRepo.historyCount(db, ownerId, filter);
}

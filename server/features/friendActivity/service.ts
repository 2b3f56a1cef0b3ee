/**
 * Friend-scoped activity (docs/privacy.md, "Friend-scoped data: activity side"): the owner's
 * front, front history and notes as a friend sees them, and the friend's writes to them. Reads
 * filter in SQL through server/access/ (friendActivityRepo). Writes are authorised here with the
 * same engine, then carried out by the owner's own front and entries services with
 * delegatedWrite(), in one transaction with a `friend_write.*` audit entry on the owner's account.
 */
import type { components } from '../../../generated/api.d.ts';
import { delegatedWrite, requireFriend, requireFriendship, viewerCeiling } from '../../access/index.ts';
import {
  type AuditEntry,
  type FriendContext,
  type InStatementFriendContext,
  inTransaction,
  oneStatement,
  type PermissionGroup,
} from '../../core/context.ts';
import { badRequest, forbidden, notFound } from '../../core/errors.ts';
import { createEntry, deleteEntry, noteToCreate, updateEntry } from '../entries/index.ts';
import {
  clearFront,
  clearTierPresence,
  frontHistoryCount,
  lockFront,
  PRESET_TIERS,
  reorderFront,
  startFronting,
  stopFronting,
} from '../front/index.ts';
import { toMemberSummary } from '../members/index.ts';
import { friendActivityRepo, type FriendMemberCols, type FrontPresenceView, type FrontSessionView } from './repo.ts';

type Schemas = components['schemas'];
type FrontView = Schemas['FriendFrontView'];
type FriendMember = Schemas['FriendFrontMember'];

export const DEFAULT_FRIEND_HISTORY_LIMIT = 20;
export const DEFAULT_MONTH_MAX_SESSIONS = 5000;
export const DEFAULT_FRIEND_NOTES_LIMIT = 50;
/** The longest range of the month aggregation: a month view with its leading and trailing weeks. */
export const MONTH_MAX_SPAN_MS = 62 * 86_400_000;
const PRESET_NAMES = new Map(PRESET_TIERS.map((t) => [t.key, t.displayName]));

const EMPTY_FRONT: FrontView = { primary: null, alsoFronting: [], tieredMembers: [], note: '' };

const FRONT_DENIED = 'Your buckets do not allow changing the front of this member';
const NOTES_DENIED = 'Your buckets do not allow writing notes of every member this note links';

function viewerOf(ctx: FriendContext | InStatementFriendContext): string {
  return ctx.access.viewerId;
}

/** The member as a friend sees it: the avatar URL (when the avatar is visible) tagged with the owner. */
function friendMember(ownerId: string, id: string, row: FriendMemberCols): FriendMember {
  const url = toMemberSummary({
    id,
    name: row.name,
    display_name: null,
    archived_at: null,
    avatar: row.avatar,
  }).avatarUrl;
  return { _id: id, name: row.name, avatarUrl: url === null ? null : `${url}&ownerUserId=${ownerId}` };
}

/** The owner's services, run with the owner's rights once this module has authorised the write. */
function asOwner<C extends FriendContext>(tx: C): C {
  return { ...tx, access: delegatedWrite(tx.access) };
}

async function audit(tx: FriendContext, entry: Omit<AuditEntry, 'detail'>): Promise<void> {
  await tx.audit.record(tx, { ...entry, detail: { friendUserId: viewerOf(tx) } });
}

// ---- Front ----

function frontView(ownerId: string, sessions: FrontSessionView[], presence: FrontPresenceView[]): FrontView {
  const fronters = sessions.map((s) => ({
    member: friendMember(ownerId, s.member_id, s),
    activeSession: { note: s.note, startedAt: s.started_at },
  }));
  const [primary, ...alsoFronting] = fronters;
  return {
    primary: primary ?? null,
    alsoFronting,
    tieredMembers: presence.map((p) => ({
      member: friendMember(ownerId, p.member_id, p),
      tierKey: p.tier_key,
      tierName: PRESET_NAMES.get(p.tier_key) ?? p.custom_display_name ?? p.tier_key,
      note: p.note,
    })),
    note: primary?.activeSession.note ?? '',
  };
}

/**
 * The visible front, in one statement that also resolves the friendship (404 without one). An
 * unexpected failure answers the empty front (spec) and is logged; the friendship is then checked
 * on its own, so that a failure never answers someone who is not a friend with a front.
 */
export async function getFront(ctx: InStatementFriendContext): Promise<FrontView> {
  let read: Awaited<ReturnType<typeof friendActivityRepo.front>>;
  try {
    read = await friendActivityRepo.front(ctx.db, ctx.access);
  } catch (err) {
    ctx.log.error({ err, ownerId: ctx.access.ownerId }, 'friend front read failed; answering the empty front');
    await requireFriend(ctx.db, viewerOf(ctx), ctx.access.ownerId);
    return { ...EMPTY_FRONT, alsoFronting: [], tieredMembers: [] };
  }
  requireFriendship(read.ok);
  return frontView(ctx.access.ownerId, read.sessions, read.presence);
}

/**
 * Each of `ids` must be a live member visible to the friend (not archived with `active`), else
 * 404 with the body of an unknown member; and `group` read_write on each, else 403.
 */
async function authoriseMembers(
  ctx: FriendContext,
  ids: readonly string[],
  group: PermissionGroup,
  active: boolean,
  denied: string,
): Promise<void> {
  const unique = [...new Set(ids)];
  if (unique.length === 0) return;
  const rows = await friendActivityRepo.membersForWrite(ctx.db, ctx.access, unique, group, active);
  if (rows.length !== unique.length) throw notFound('Member not found');
  if (rows.some((r) => !r.can_write)) throw forbidden(denied);
}

/** A front write on one member: the front lock, the engine's check, the owner's write, the audit entry. */
async function frontWrite(
  ctx: FriendContext,
  memberId: string,
  active: boolean,
  action: string,
  write: (owner: FriendContext) => Promise<void>,
): Promise<void> {
  await inTransaction(ctx, async (tx) => {
    await lockFront(tx.db, tx.access.ownerId);
    await authoriseMembers(tx, [memberId], 'front', active, FRONT_DENIED);
    await write(asOwner(tx));
    await audit(tx, { action, targetType: 'member', targetId: memberId });
  });
}

/** Clears the whole front (hidden members included: spec), then fronts the member. */
export function setFront(ctx: FriendContext, memberId: string): Promise<void> {
  return frontWrite(ctx, memberId, true, 'friend_write.front.set', async (owner) => {
    await clearFront(owner);
    await startFronting(owner, { memberId });
  });
}

export function startFront(ctx: FriendContext, memberId: string): Promise<void> {
  return frontWrite(ctx, memberId, true, 'friend_write.front.start', (owner) => startFronting(owner, { memberId }));
}

/** Archived members may be taken off the front (only joining needs an active member). */
export function stopFront(ctx: FriendContext, memberId: string): Promise<void> {
  return frontWrite(ctx, memberId, false, 'friend_write.front.stop', (owner) => stopFronting(owner, memberId));
}

export function clearPresence(ctx: FriendContext, memberId: string): Promise<void> {
  return frontWrite(ctx, memberId, false, 'friend_write.front.tier_presence_clear', (owner) =>
    clearTierPresence(owner, memberId),
  );
}

/**
 * Reorders the fronters the friend sees: `memberIds` must be exactly those (else 400); hidden
 * fronters keep their slots and the visible ones fill the visible slots in the given order.
 */
export async function reorder(ctx: FriendContext, memberIds: string[]): Promise<void> {
  await inTransaction(ctx, async (tx) => {
    if (viewerCeiling(tx.access).front !== 'read_write') throw forbidden(FRONT_DENIED);
    await lockFront(tx.db, tx.access.ownerId);
    const fronters = await friendActivityRepo.fronters(tx.db, tx.access);
    const visible = fronters.filter((f) => f.visible).map((f) => f.member_id);
    const given = new Set(memberIds);
    if (given.size !== memberIds.length || given.size !== visible.length || visible.some((id) => !given.has(id))) {
      throw badRequest('memberIds must list each fronter you can see exactly once');
    }
    await authoriseMembers(tx, memberIds, 'front', false, FRONT_DENIED);
    const next = [...memberIds];
    const order = fronters.map((f) => (f.visible ? next.shift()! : f.member_id));
    await reorderFront(asOwner(tx), order);
    await audit(tx, { action: 'friend_write.front.reorder', targetType: 'front', targetId: null });
  });
}

export async function writableMemberIds(ctx: FriendContext): Promise<Schemas['FriendWritableMemberIds']> {
  return { memberIds: await friendActivityRepo.frontWritableIds(ctx.db, ctx.access) };
}

// ---- History ----

export interface FriendHistoryQuery {
  limit?: number;
  startTime?: number;
  endTime?: number;
  cursorStartedAt?: number;
  cursorId?: string;
}

export async function history(
  ctx: InStatementFriendContext,
  query: FriendHistoryQuery,
): Promise<Schemas['FriendHistoryPage']> {
  if ((query.cursorStartedAt === undefined) !== (query.cursorId === undefined)) {
    throw badRequest('cursorStartedAt and cursorId must be sent together (both from nextCursor) or not at all');
  }
  if (query.startTime !== undefined && query.endTime !== undefined && query.startTime > query.endTime)
    throw badRequest('startTime must be <= endTime');
  const limit = query.limit ?? DEFAULT_FRIEND_HISTORY_LIMIT;
  const ownerId = ctx.access.ownerId;
  const filter = { startTime: query.startTime, endTime: query.endTime };
  const after = query.cursorId !== undefined ? { startedAt: query.cursorStartedAt!, id: query.cursorId } : undefined;
  // Spec: `count` is the number of matching sessions before the per-member privacy filter. Without
  // a time filter the page statement reads it too; with one, it is counted alongside.
  const timed = filter.startTime !== undefined || filter.endTime !== undefined;
  const [{ ok, rows, total }, timedCount] = await Promise.all([
    friendActivityRepo.historyPage(ctx.db, ctx.access, filter, limit, after),
    timed ? frontHistoryCount(ctx.db, ownerId, filter) : Promise.resolve(null),
  ]);
  requireFriendship(ok);
  const count = timedCount ?? total ?? 0;
  const page = rows.slice(0, limit);
  const last = rows.length > limit ? page[page.length - 1] : undefined;
  return {
    items: page.map((r) => ({
      session: {
        _id: r.id,
        userId: ownerId,
        memberId: r.member_id,
        startedAt: r.started_at,
        endedAt: r.ended_at,
        note: r.note,
      },
      member: friendMember(ownerId, r.member_id, r),
      durationMs: r.ended_at === null ? null : r.ended_at - r.started_at,
    })),
    count,
    nextCursor: last ? { startedAt: last.started_at, id: last.id } : null,
  };
}

export async function month(
  ctx: FriendContext,
  query: { startTime: number; endTime: number; maxSessions?: number },
): Promise<Schemas['FriendFrontMonth']> {
  if (query.endTime <= query.startTime || query.endTime - query.startTime > MONTH_MAX_SPAN_MS) {
    throw badRequest('endTime must be after startTime and at most 62 days later');
  }
  if (viewerCeiling(ctx.access).front === 'none')
    throw forbidden("Your buckets do not open this friend's front history");
  const maxSessions = query.maxSessions ?? DEFAULT_MONTH_MAX_SESSIONS;
  const rows = await friendActivityRepo.month(ctx.db, ctx.access, {
    start: query.startTime,
    end: query.endTime,
    now: ctx.now,
    maxSessions,
  });
  const days: Schemas['FriendFrontMonth']['days'] = [];
  for (const row of rows) {
    const date = new Date(Number(row.day) * 86_400_000).toISOString().slice(0, 10);
    let day = days[days.length - 1];
    if (day?.date !== date) {
      day = { date, members: [] };
      days.push(day);
    }
    day.members.push({
      memberId: row.member_id,
      minutes: Math.floor(Number(row.ms) / 60_000),
      sessions: Number(row.sessions),
    });
  }
  return { days, truncated: Number(rows[0]?.matched ?? 0) > maxSessions };
}

// ---- Notes ----

export async function listNotes(
  ctx: InStatementFriendContext,
  query: { limit?: number; memberId?: string },
): Promise<Schemas['FriendNoteRow'][]> {
  const { ok, rows } = await friendActivityRepo.notes(
    ctx.db,
    ctx.access,
    query.limit ?? DEFAULT_FRIEND_NOTES_LIMIT,
    query.memberId,
  );
  requireFriendship(ok);
  return rows.map((r) => ({
    _id: r.id,
    title: r.title,
    content: r.content,
    createdAt: r.created_at,
    updatedAt: r.updated_at,
    members: r.members,
    member: r.members[0] ?? null,
    viewerCanWrite: r.can_write,
  }));
}

function linkSet(memberId: string | null | undefined, memberIds: string[] | null | undefined): string[] {
  return [...new Set([...(memberId ? [memberId] : []), ...(memberIds ?? [])])];
}

/**
 * A friend's note on the owner's account. One statement (friendActivityRepo.createNote) when it
 * links members and embeds no external image: the friendship, the friend's rights on each link and
 * the owner's note create with its audit row, refused in the order of the transaction below.
 * Otherwise the friendship first, then the transaction (entries fetches the images after the checks).
 */
export async function createNote(
  ctx: InStatementFriendContext,
  input: Schemas['CreateEntryRequest'],
): Promise<{ id: string }> {
  const links = linkSet(input.memberId, input.memberIds);
  const one = links.length > 0 ? noteToCreate(ctx, input) : null;
  if (one) {
    const { note, refused } = one;
    const id = note.row.id;
    const auditEntry = { action: 'friend_write.entry.create', targetType: 'entry', targetId: id };
    const audit = { row: ctx.audit.row(ctx, auditEntry), detail: JSON.stringify({ friendUserId: viewerOf(ctx) }) };
    const verdict = await oneStatement(ctx, (db) => friendActivityRepo.createNote(db, ctx.access, note, audit), {
      body: { id },
    });
    requireFriendship(verdict.friend);
    if (!verdict.found) throw notFound('Member not found');
    if (!verdict.writable) throw forbidden(NOTES_DENIED);
    if (verdict.ok) return { id };
    throw refused(verdict);
  }
  const fctx: FriendContext = {
    ...ctx,
    access: await requireFriend(ctx.db, viewerOf(ctx), ctx.access.ownerId),
  };
  if (links.length === 0) throw badRequest("A friend's note must link at least one member (memberId or memberIds)");
  return inTransaction(fctx, async (tx) => {
    await authoriseMembers(tx, links, 'member_notes', false, NOTES_DENIED);
    const created = await createEntry(asOwner(tx), input);
    await audit(tx, { action: 'friend_write.entry.create', targetType: 'entry', targetId: created.id });
    return created;
  });
}

/** The note, visible to the friend (else 404 as an unknown note) and writable on every linked member (else 403). */
async function writableNote(tx: FriendContext, entryId: string) {
  const note = await friendActivityRepo.noteForWrite(tx.db, tx.access, entryId);
  if (!note || !note.visible) throw notFound('Entry not found');
  if (!note.can_write) throw forbidden(NOTES_DENIED);
  return note;
}

export async function updateNote(
  ctx: FriendContext,
  entryId: string,
  input: Schemas['UpdateEntryRequest'],
): Promise<void> {
  await inTransaction(ctx, async (tx) => {
    const note = await writableNote(tx, entryId);
    if (input.memberId !== undefined || input.memberIds !== undefined) {
      const after = linkSet(
        input.memberId !== undefined ? input.memberId : note.member_id,
        input.memberIds !== undefined ? input.memberIds : note.member_ids,
      );
      if (after.length === 0) throw badRequest("A friend's note must keep at least one linked member");
      await authoriseMembers(tx, after, 'member_notes', false, NOTES_DENIED);
    }
    await updateEntry(asOwner(tx), entryId, input);
    await audit(tx, { action: 'friend_write.entry.update', targetType: 'entry', targetId: entryId });
  });
}

export async function deleteNote(ctx: FriendContext, entryId: string): Promise<void> {
  await inTransaction(ctx, async (tx) => {
    await writableNote(tx, entryId);
    await deleteEntry(asOwner(tx), entryId, undefined);
    await audit(tx, { action: 'friend_write.entry.delete', targetType: 'entry', targetId: entryId });
  });
}

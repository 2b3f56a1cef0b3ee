import type { Knex } from 'knex';
import { keysetPage, type Keyset } from '../../core/keyset.ts';
import { sql } from '../../db/sql.ts';
import { prepared } from '../../db/prepared.ts';
import { EXAMPLE_UUID, statement } from '../../db/statements.ts';
import type { MemberRow } from '../../core/members.ts';

const AREA = 'front';

/** The member `id` of the account, trashed or not, with what the front's checks need of it. */
const memberOf = statement<{ userId: string; id: string }, Pick<MemberRow, 'archived_at' | 'deleted_at'>>({
  name: 'front_member_of',
  area: AREA,
  variants: { 'the member': { userId: EXAMPLE_UUID, id: EXAMPLE_UUID } },
  build: ({ userId, id }) => sql`select archived_at, deleted_at from members where id = ${id} and user_id = ${userId}`,
});

/** Which of the ids are live (not trashed) members of the account. */
const liveMemberIds = statement<{ userId: string; ids: string[] }, { id: string }>({
  name: 'front_live_member_ids',
  area: AREA,
  variants: { 'the ids': { userId: EXAMPLE_UUID, ids: [EXAMPLE_UUID] } },
  build: ({ userId, ids }) =>
    sql`select id from members where user_id = ${userId} and id = any (${ids}::uuid[]) and deleted_at is null`,
});

export type HistoryMemberRow = Pick<MemberRow, 'id' | 'name' | 'display_name' | 'archived_at' | 'avatar'>;

/** The members of a history page (trashed ones too), with their summary columns. */
const historyMembers = statement<{ userId: string; ids: string[] }, HistoryMemberRow>({
  name: 'front_history_members',
  area: AREA,
  variants: { 'the ids': { userId: EXAMPLE_UUID, ids: [EXAMPLE_UUID] } },
  build: ({ userId, ids }) =>
    sql`select id, name, display_name, archived_at, avatar from members where user_id = ${userId} and id = any (${ids}::uuid[])`,
});

const HISTORY_ORDER: Keyset = {
  columns: [
    { sql: sql`s.started_at`, type: 'bigint' },
    { sql: sql`s.id`, type: 'uuid' },
  ],
  direction: 'desc',
};

export interface FrontSessionRow {
  id: string;
  user_id: string;
  member_id: string;
  side_system_id: string;
  sub_system_id: string | null;
  started_at: number;
  ended_at: number | null;
  note: string | null;
  created_by: string | null;
  /** Place in the current front order; null once the session is ended or trashed. */
  position: number | null;
  created_at: number;
  updated_at: number;
  deleted_at: number | null;
}

export type FrontSessionChanges = Partial<
  Pick<FrontSessionRow, 'started_at' | 'ended_at' | 'note' | 'position' | 'deleted_at'>
> & { updated_at: number };

export interface CustomTierRow {
  id: string;
  user_id: string;
  display_name: string;
  created_at: number;
  updated_at: number;
}

export interface TierPresenceRow {
  user_id: string;
  member_id: string;
  tier_key: string;
  note: string | null;
  created_at: number;
  updated_at: number;
}

/**
 * One row of the current-front read (the front_now statement): either an open session with the fields of its
 * member that the response shows, or a tier presence row. Rows come sessions first in front
 * order, then presence rows in the order they were set.
 */
export type FrontNowRow =
  | ({ kind: 'session'; id: string; member_id: string; started_at: number; note: string | null } & FrontMemberFields)
  | { kind: 'presence'; member_id: string; note: string | null; tier_key: string; custom_display_name: string | null };

/** The member columns the current front shows (all but user_id and deleted_at). */
export type FrontMemberFields = Omit<MemberRow, 'id' | 'user_id' | 'deleted_at'>;

/**
 * The whole current front in one statement (the text is constant, so PostgreSQL sees the same
 * statement on every request). Open sessions of members not in the trash, by the unique partial
 * index front_sessions_one_open and the members primary key; then the tier presence of members
 * not in the trash, by its primary key, with the display name of a custom tier. Columns that one
 * branch does not have are typed nulls. The member of each session (and the liveness check of each
 * presence row) is a lateral subquery with `limit 1` so it stays a primary-key probe per row: as a
 * plain join (or EXISTS) the planner, which expects a dozen rows, may hash the account's whole
 * member list instead.
 */
const frontNow = prepared<FrontNowRow>(
  'front_now',
  `
select 'session' as kind, s.id, s.member_id, s.note, s.position as ord_position, s.started_at as ord_time, s.id as ord_id,
       s.started_at, null::text as tier_key, null::text as custom_display_name,
       m.side_system_id, m.sub_system_id, m.directory_id, m.name, m.display_name, m.pronouns, m.description,
       m.about_tags, m.profile_style, m.avatar, m.banner, m.archived_at, m.version, m.created_at, m.updated_at
from "front_sessions" s
cross join lateral (
  select m.side_system_id, m.sub_system_id, m.directory_id, m.name, m.display_name, m.pronouns, m.description,
         m.about_tags, m.profile_style, m.avatar, m.banner, m.archived_at, m.version, m.created_at, m.updated_at
  from "members" m
  where m.id = s.member_id and m.user_id = s.user_id and m.deleted_at is null
  limit 1
) m
where s.user_id = ? and s.ended_at is null and s.deleted_at is null
union all
select 'presence', null, p.member_id, p.note, null, p.created_at, p.member_id,
       null, p.tier_key, t.display_name,
       null, null, null, null, null, null, null,
       null, null, null, null, null, null, null, null
from "front_tier_presence" p
cross join lateral (select 1 from "members" m where m.id = p.member_id and m.user_id = p.user_id and m.deleted_at is null limit 1) live
left join "front_custom_tiers" t on t.user_id = p.user_id and t.id::text = p.tier_key
where p.user_id = ?
order by kind desc, ord_position asc nulls last, ord_time asc, ord_id asc`,
);

/** One row of a whole-history page read (historyPageWithCount): a session with its member's summary columns. */
export type HistoryPageRow = Pick<FrontSessionRow, 'id' | 'member_id' | 'started_at' | 'ended_at' | 'note'> & {
  /** The member's columns, null when the member row is gone (purged since). */
  summary_id: string | null;
} & { [K in 'name' | 'display_name' | 'archived_at' | 'avatar']: MemberRow[K] | null };

/**
 * A page of the whole history (no time filter) and the history's size in one statement: the
 * counter row (migration 0005) left-joined to `size` + 1 sessions on the history index (not in the
 * trash, member not in the trash), each with its member's summary columns. Every row carries the
 * count; a page past the end is one row with only the count. Both member lookups sit behind
 * `offset 0` (an optimisation fence), so each stays one primary-key probe per session read,
 * whatever plan is cached. Without it the NOT EXISTS becomes an anti-join (as ofLiveMembers writes
 * it for the time-filtered reads), for which a generic plan reads every trashed member of every
 * account for each page; the member as a plain join may hash the account's whole member list. (A
 * lateral "is it trashed" probe filtered with IS NULL does not work either: the planner expects
 * that filter to pass almost nothing and sorts the account's whole history.)
 */
function historyStatement(name: string, after: string) {
  return prepared<{ live: number } & ({ id: null } | HistoryPageRow)>(
    name,
    `select c.live, p.* from (select coalesce((select live from front_session_counts where user_id = ?), 0) as live) c
left join lateral (
  select s.id, s.member_id, s.started_at, s.ended_at, s.note, m.summary_id, m.name, m.display_name, m.archived_at, m.avatar
  from (select s.id, s.member_id, s.started_at, s.ended_at, s.note from front_sessions s
        where s.user_id = ? and s.deleted_at is null
          and not exists (select 1 from members t where t.id = s.member_id and t.deleted_at is not null offset 0)${after}
        order by s.started_at desc, s.id desc limit ?) s
  left join lateral (select m.id as summary_id, m.name, m.display_name, m.archived_at, m.avatar
                     from members m where m.id = s.member_id and m.user_id = ? offset 0) m on true
) p on true
order by p.started_at desc, p.id desc`,
  );
}
const historyFirst = historyStatement('front_history_first', '');
const historyAfter = historyStatement(
  'front_history_after',
  '\n          and (s.started_at, s.id) < (?::bigint, ?::uuid)',
);

export interface HistoryFilter {
  startTime?: number;
  endTime?: number;
}

export interface HistoryCursor {
  startedAt: number;
  id: string;
}

/** Open and not in the trash: the sessions that make up the current front. */
function open<T extends Knex.QueryBuilder>(qb: T, table = 'front_sessions'): T {
  qb.whereNull(`${table}.ended_at`).whereNull(`${table}.deleted_at`);
  return qb;
}

/**
 * Restricts a query over `front_sessions as s` to sessions whose member is not in the trash, as
 * an anti-join probing each session's member by primary key. The planner estimates it from the
 * members' statistics (few trashed members: nearly every session passes), so a page walks the
 * history index in order and stops at the limit. Two earlier forms failed that: an EXISTS over
 * live members could be turned into a members-driven join that sorts the whole history, and a
 * `member_id <> all(<trashed ids>)` array filter got a default selectivity of ~0.1 %, for which
 * the planner preferred a bitmap scan plus a sort of every session of the account.
 */
function ofLiveMembers<T extends Knex.QueryBuilder>(qb: T): T {
  qb.whereRaw('not exists (select 1 from members m where m.id = s.member_id and m.deleted_at is not null)');
  return qb;
}

function historyQuery(db: Knex, userId: string, filter: HistoryFilter): Knex.QueryBuilder {
  const q = db('front_sessions as s').where('s.user_id', userId).whereNull('s.deleted_at');
  ofLiveMembers(q);
  if (filter.endTime !== undefined) q.where('s.started_at', '<=', filter.endTime);
  if (filter.startTime !== undefined) {
    const startTime = filter.startTime;
    q.where((w) => w.whereNull('s.ended_at').orWhere('s.ended_at', '>=', startTime));
  }
  return q;
}

/** The open sessions of the listed members take their place in the array as their position. */
const setOrder = statement<{ userId: string; memberIds: string[]; now: number }, never>({
  name: 'front_set_order',
  area: AREA,
  variants: { 'the order': { userId: EXAMPLE_UUID, memberIds: [EXAMPLE_UUID], now: 0 } },
  build: ({ userId, memberIds, now }) =>
    sql`update front_sessions set position = array_position(${memberIds}::uuid[], member_id) - 1, updated_at = ${now}
      where user_id = ${userId} and ended_at is null and deleted_at is null and member_id = any (${memberIds}::uuid[])`,
});

export const frontRepo = {
  /** The member, trashed or not; undefined when it is not the account's. */
  async member(
    db: Knex,
    userId: string,
    id: string,
  ): Promise<Pick<MemberRow, 'archived_at' | 'deleted_at'> | undefined> {
    return (await memberOf(db, { userId, id }))[0];
  },

  /** The ids among `ids` that are live members of the account (no query for none). */
  async liveMemberIds(db: Knex, userId: string, ids: string[]): Promise<Set<string>> {
    if (ids.length === 0) return new Set();
    return new Set((await liveMemberIds(db, { userId, ids })).map((m) => m.id));
  },

  /** The members (trashed ones too) of a history page, with their summary columns (no query for none). */
  historyMembers(db: Knex, userId: string, ids: string[]): Promise<HistoryMemberRow[]> {
    if (ids.length === 0) return Promise.resolve([]);
    return historyMembers(db, { userId, ids });
  },

  /**
   * Serialises the front writes of one account until the transaction ends, so the order,
   * the one-open-session rule and the primary check never race each other. Outside a
   * transaction the lock is released at once, so callers pass their transaction.
   */
  async lock(trx: Knex, userId: string): Promise<void> {
    await trx.raw('select pg_advisory_xact_lock(hashtextextended(?, 0))', [`front:${userId}`]);
  },

  /**
   * Open sessions in front order, members in the trash included: callers drop those with the
   * member rows they read anyway. (Joining members here lets the planner hash the account's
   * whole member list to filter a handful of open sessions.)
   */
  openSessions(db: Knex, userId: string): Promise<FrontSessionRow[]> {
    const q = db('front_sessions as s').where('s.user_id', userId);
    open(q, 's');
    return q.select('s.*').orderByRaw('s.position asc nulls last, s.started_at asc, s.id asc');
  },

  /** The current front: its open sessions with their members and the tier presence (the front_now statement). */
  frontNow(db: Knex, userId: string): Promise<FrontNowRow[]> {
    return frontNow(db, [userId, userId]);
  },

  findOpenByMember(db: Knex, userId: string, memberId: string): Promise<FrontSessionRow | undefined> {
    return open(db('front_sessions').where({ user_id: userId, member_id: memberId })).first();
  },

  /** One past the last place in the current front order. */
  async nextPosition(db: Knex, userId: string): Promise<number> {
    const row = await open(db('front_sessions').where({ user_id: userId }))
      .max('position as max')
      .first();
    const max = (row as { max: number | null } | undefined)?.max;
    return max === null || max === undefined ? 0 : max + 1;
  },

  /** Inserts an open session; false when the member already has one (the unique partial index). */
  async insertOpen(db: Knex, row: FrontSessionRow): Promise<boolean> {
    const inserted = await db('front_sessions')
      .insert(row)
      .onConflict(db.raw('(user_id, member_id) where ended_at is null and deleted_at is null'))
      .ignore()
      .returning('id');
    return inserted.length > 0;
  },

  /** Ends the open sessions of the account, or of one member, and takes them out of the order. */
  async endOpen(db: Knex, userId: string, now: number, memberId?: string): Promise<number> {
    const q = open(db('front_sessions').where({ user_id: userId }));
    if (memberId) q.where({ member_id: memberId });
    return q.update({ ended_at: now, position: null, updated_at: now });
  },

  /** Positions follow the array; only open sessions of the listed members are touched. */
  async setOrder(db: Knex, userId: string, memberIds: string[], now: number): Promise<void> {
    if (memberIds.length === 0) return;
    await setOrder(db, { userId, memberIds, now });
  },

  /** Live or trashed. */
  findSession(db: Knex, userId: string, id: string): Promise<FrontSessionRow | undefined> {
    return db('front_sessions').where({ id, user_id: userId }).first();
  },

  async updateSession(db: Knex, userId: string, id: string, changes: FrontSessionChanges): Promise<FrontSessionRow> {
    const [row] = await db('front_sessions').where({ id, user_id: userId }).update(changes).returning('*');
    return row as FrontSessionRow;
  },

  /**
   * Whether another session of the member (not in the trash) shares time with [startedAt, endedAt);
   * a null end means still open. Sessions that only touch at an end do not overlap.
   */
  async overlaps(
    db: Knex,
    userId: string,
    memberId: string,
    exceptId: string,
    startedAt: number,
    endedAt: number | null,
  ): Promise<boolean> {
    const q = db('front_sessions')
      .where({ user_id: userId, member_id: memberId })
      .whereNull('deleted_at')
      .whereNot({ id: exceptId });
    if (endedAt !== null) q.where('started_at', '<', endedAt);
    q.where((w) => w.whereNull('ended_at').orWhere('ended_at', '>', startedAt));
    return (await q.first('id')) !== undefined;
  },

  /** A page (`size` + 1 rows), newest first on the (user_id, started_at desc, id desc) index, strictly after the cursor. */
  historyPage(
    db: Knex,
    userId: string,
    filter: HistoryFilter,
    size: number,
    after?: HistoryCursor,
  ): Promise<FrontSessionRow[]> {
    return keysetPage(
      historyQuery(db, userId, filter).select('s.*'),
      HISTORY_ORDER,
      size,
      after && [after.startedAt, after.id],
    );
  },

  /** The whole history's page (`size` + 1 rows) after the cursor and its count, in one statement (see historyStatement). */
  async historyPageWithCount(
    db: Knex,
    userId: string,
    size: number,
    after?: HistoryCursor,
  ): Promise<{ rows: HistoryPageRow[]; count: number }> {
    const rows = after
      ? await historyAfter(db, [userId, userId, after.startedAt, after.id, size + 1, userId])
      : await historyFirst(db, [userId, userId, size + 1, userId]);
    return {
      rows: rows.filter((r): r is { live: number } & HistoryPageRow => r.id !== null),
      count: Number(rows[0]?.live ?? 0),
    };
  },

  async historyCount(db: Knex, userId: string, filter: HistoryFilter): Promise<number> {
    if (filter.startTime === undefined && filter.endTime === undefined) {
      // The whole history: the trigger-maintained counter (migration 0005), O(1) at any size.
      const counter = await db('front_session_counts').where({ user_id: userId }).first('live');
      return Number(counter?.live ?? 0);
    }
    const row = await historyQuery(db, userId, filter).count({ n: '*' }).first();
    return Number((row as { n: number | string } | undefined)?.n ?? 0);
  },

  async upsertPresence(db: Knex, row: TierPresenceRow): Promise<void> {
    await db('front_tier_presence')
      .insert(row)
      .onConflict(['user_id', 'member_id'])
      .merge({ tier_key: row.tier_key, note: row.note, updated_at: row.updated_at });
  },

  async deletePresence(db: Knex, userId: string, memberId?: string): Promise<void> {
    const q = db('front_tier_presence').where({ user_id: userId });
    if (memberId) q.where({ member_id: memberId });
    await q.delete();
  },

  listTiers(db: Knex, userId: string): Promise<CustomTierRow[]> {
    return db('front_custom_tiers')
      .where({ user_id: userId })
      .orderBy([{ column: 'created_at' }, { column: 'id' }]);
  },

  findTier(db: Knex, userId: string, id: string): Promise<CustomTierRow | undefined> {
    return db('front_custom_tiers').where({ id, user_id: userId }).first();
  },

  async countTiers(db: Knex, userId: string): Promise<number> {
    const row = await db('front_custom_tiers').where({ user_id: userId }).count({ n: '*' }).first();
    return Number((row as { n: number | string } | undefined)?.n ?? 0);
  },

  async insertTier(db: Knex, row: CustomTierRow): Promise<void> {
    await db('front_custom_tiers').insert(row);
  },

  /** Deletes the tier and every presence row that uses it; false when it is not the caller's. */
  async deleteTier(db: Knex, userId: string, id: string): Promise<boolean> {
    const deleted = await db('front_custom_tiers').where({ id, user_id: userId }).delete().returning('id');
    if (deleted.length === 0) return false;
    await db('front_tier_presence').where({ user_id: userId, tier_key: id }).delete();
    return true;
  },
};

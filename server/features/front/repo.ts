import type { Knex } from 'knex';
import { writeScopeSql } from '../../access/systemScope.ts';
import type { PendingEvent } from '../../core/context.ts';
import { keysetAfterSql, keysetOrderSql, type Keyset } from '../../core/keyset.ts';
import { type Sql, sql } from '../../db/sql.ts';
import { EXAMPLE_UUID, statement } from '../../db/statements.ts';
import { appendEvents, EXAMPLE_EVENT, keyedExample, notifiedColumn } from '../../events/log.ts';
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
const frontNow = statement<{ userId: string }, FrontNowRow>({
  name: 'front_now',
  area: AREA,
  variants: { 'the account': { userId: EXAMPLE_UUID } },
  build: ({ userId }) => sql`
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
where s.user_id = ${userId} and s.ended_at is null and s.deleted_at is null
union all
select 'presence', null, p.member_id, p.note, null, p.created_at, p.member_id,
       null, p.tier_key, t.display_name,
       null, null, null, null, null, null, null,
       null, null, null, null, null, null, null, null
from "front_tier_presence" p
cross join lateral (select 1 from "members" m where m.id = p.member_id and m.user_id = p.user_id and m.deleted_at is null limit 1) live
left join "front_custom_tiers" t on t.user_id = p.user_id and t.id::text = p.tier_key
where p.user_id = ${userId}
order by kind desc, ord_position asc nulls last, ord_time asc, ord_id asc`,
});

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
function historyStatement(name: string, cursor: boolean) {
  return statement<
    { userId: string; size: number; after?: HistoryCursor },
    { live: number } & ({ id: null } | HistoryPageRow)
  >({
    name,
    area: AREA,
    variants: {
      [cursor ? 'after a cursor' : 'first page']: {
        userId: EXAMPLE_UUID,
        size: 1,
        after: cursor ? { startedAt: 0, id: EXAMPLE_UUID } : undefined,
      },
    },
    build: ({ userId, size, after: cursorAt }) => {
      const after = cursorAt
        ? sql`
          and (s.started_at, s.id) < (${cursorAt.startedAt}::bigint, ${cursorAt.id}::uuid)`
        : sql.empty;
      return sql`select c.live, p.* from (select coalesce((select live from front_session_counts where user_id = ${userId}), 0) as live) c
left join lateral (
  select s.id, s.member_id, s.started_at, s.ended_at, s.note, m.summary_id, m.name, m.display_name, m.archived_at, m.avatar
  from (select s.id, s.member_id, s.started_at, s.ended_at, s.note from front_sessions s
        where s.user_id = ${userId} and s.deleted_at is null
          and not exists (select 1 from members t where t.id = s.member_id and t.deleted_at is not null offset 0)${after}
        order by s.started_at desc, s.id desc limit ${size + 1}) s
  left join lateral (select m.id as summary_id, m.name, m.display_name, m.archived_at, m.avatar
                     from members m where m.id = s.member_id and m.user_id = ${userId} offset 0) m on true
) p on true
order by p.started_at desc, p.id desc`;
    },
  });
}
const historyFirst = historyStatement('front_history_first', false);
const historyAfter = historyStatement('front_history_after', true);

export interface HistoryFilter {
  startTime?: number;
  endTime?: number;
}

export interface HistoryCursor {
  startedAt: number;
  id: string;
}

/** Open and not in the trash: the sessions that make up the current front (over `front_sessions`, unaliased). */
const OPEN = sql`ended_at is null and deleted_at is null`;

/**
 * The time-filtered history of the account over `front_sessions as s`: not in the trash, member not
 * in the trash (an anti-join probing each session's member by primary key), within the filter. The
 * planner estimates the anti-join from the members' statistics (few trashed members: nearly every
 * session passes), so a page walks the history index in order and stops at the limit. Two earlier
 * forms failed that: an EXISTS over live members could be turned into a members-driven join that
 * sorts the whole history, and a `member_id <> all(<trashed ids>)` array filter got a default
 * selectivity of ~0.1 %, for which the planner preferred a bitmap scan plus a sort of every session
 * of the account.
 */
function historyWhere(userId: string, filter: HistoryFilter): Sql {
  const end = filter.endTime !== undefined ? sql` and s.started_at <= ${filter.endTime}` : sql.empty;
  const start =
    filter.startTime !== undefined ? sql` and (s.ended_at is null or s.ended_at >= ${filter.startTime})` : sql.empty;
  return sql`where s.user_id = ${userId} and s.deleted_at is null and not exists (select 1 from members m where m.id = s.member_id and m.deleted_at is not null)${end}${start}`;
}

/** The three shapes of a time filter (at least one bound: the whole history is read by front_history_first/after). */
const TIME_FILTERS: Record<string, HistoryFilter> = {
  'from a start time': { startTime: 0 },
  'up to an end time': { endTime: 0 },
  'between two times': { startTime: 0, endTime: 0 },
};

/** A page (`size` + 1 rows) of the time-filtered history, newest first on the history index, strictly after the cursor. */
const historyPage = statement<
  { userId: string; filter: HistoryFilter; size: number; after?: HistoryCursor },
  FrontSessionRow
>({
  name: 'front_history_timed',
  area: AREA,
  variants: Object.fromEntries(
    Object.entries(TIME_FILTERS).flatMap(([label, filter]) => [
      [`${label}, first page`, { userId: EXAMPLE_UUID, filter, size: 1 }],
      [
        `${label}, after a cursor`,
        { userId: EXAMPLE_UUID, filter, size: 1, after: { startedAt: 0, id: EXAMPLE_UUID } },
      ],
    ]),
  ),
  build: ({ userId, filter, size, after }) => {
    const cursor = after ? sql` and ${keysetAfterSql(HISTORY_ORDER, [after.startedAt, after.id])}` : sql.empty;
    return sql`select s.* from front_sessions as s ${historyWhere(userId, filter)}${cursor} ${keysetOrderSql(HISTORY_ORDER, size)}`;
  },
});

/** The size of the time-filtered history. */
const historyCount = statement<{ userId: string; filter: HistoryFilter }, { n: number }>({
  name: 'front_history_timed_count',
  area: AREA,
  variants: Object.fromEntries(
    Object.entries(TIME_FILTERS).map(([label, filter]) => [label, { userId: EXAMPLE_UUID, filter }]),
  ),
  build: ({ userId, filter }) => sql`select count(*) as n from front_sessions as s ${historyWhere(userId, filter)}`,
});

/** The size of the whole history: the trigger-maintained counter (migration 0005), O(1) at any size. */
const historyCounter = statement<{ userId: string }, { live: number }>({
  name: 'front_history_counter',
  area: AREA,
  variants: { 'the account': { userId: EXAMPLE_UUID } },
  build: ({ userId }) => sql`select live from front_session_counts where user_id = ${userId}`,
});

/**
 * The account's front lock as the first CTE `turn` of a statement: its counter row
 * (front_session_counts, migration 0030) locked to commit, created when missing; with
 * `takePosition`, `turn.position` is the next place in the front order, read from the row's
 * newest committed version even when the statement waited for it.
 */
function frontTurnSql(userId: string, takePosition: boolean): Sql {
  return sql`turn as (
      insert into front_session_counts as c (user_id, next_position) values (${userId}, ${takePosition ? 1 : 0})
      on conflict (user_id) do update set next_position = c.next_position${takePosition ? sql` + 1` : sql.empty}
      returning c.next_position${takePosition ? sql` - 1` : sql.empty} as position
    )`;
}

/** The account's front lock (frontRepo.lock): its counter row, held to commit (frontTurnSql). */
const lock = statement<{ userId: string }, unknown>({
  name: 'front_lock',
  area: AREA,
  variants: { 'the account': { userId: EXAMPLE_UUID } },
  build: ({ userId }) => sql`with ${frontTurnSql(userId, false)} select 1 from turn`,
});

/** What a one-statement front write decided (startFronting, stopFronting). */
export interface FrontWriteVerdict {
  /** The member is the account's (trashed or not). */
  member: boolean;
  member_live: boolean;
  member_archived: boolean;
  /** createdBy, when given, is a live member of the account. */
  creator_ok: boolean;
  /** The active context names a live side (and sub) system. */
  scoped: boolean;
  /** Sessions started or ended. */
  changed: number;
}

export interface StartInput {
  id: string;
  userId: string;
  memberId: string;
  note: string | null;
  createdBy: string | null;
  now: number;
  events: readonly PendingEvent[];
}

/** The member's row, share-locked after the front lock (`turn`, always taken first: other front writers lock the counter row before members). */
const memberAfterTurn = (userId: string, id: string | null, name: string) =>
  sql`${sql.id(name)} as (
      select m.id, m.deleted_at, m.archived_at from turn, members m
      where m.id = ${id}::uuid and m.user_id = ${userId}
      for share of m
    )`;

const EXAMPLE_START: StartInput = {
  id: EXAMPLE_UUID,
  userId: EXAMPLE_UUID,
  memberId: EXAMPLE_UUID,
  note: null,
  createdBy: EXAMPLE_UUID,
  now: 0,
  events: [EXAMPLE_EVENT],
};

/**
 * A member joins the front in one statement (docs/data-access.md, "Writes in one statement"): the
 * front lock and the next position (`turn`), the member (live, not archived) and `createdBy` (live)
 * share-locked, the write scope, then the open session unless the member has one (the unique
 * partial index front_sessions_one_open, which sees committed rows whatever the snapshot), and its
 * `front.changed` event only when a session was started. The event's front is filled as the
 * statement commits (front_state, migration 0030).
 */
const start = statement<StartInput, FrontWriteVerdict & { notified: unknown }>({
  name: 'front_start',
  area: AREA,
  variants: {
    'a member joins': EXAMPLE_START,
    'a member joins, the request keyed (its response stored under the key)': {
      ...EXAMPLE_START,
      events: keyedExample([EXAMPLE_EVENT]),
    },
  },
  build: ({ id, userId, memberId, note, createdBy, now, events }) => sql`with ${frontTurnSql(userId, true)},
    ${writeScopeSql(userId)},
    ${memberAfterTurn(userId, memberId, 'member')},
    ${memberAfterTurn(userId, createdBy, 'creator')},
    verdict as (
      select exists (select 1 from member) as member,
        exists (select 1 from member where deleted_at is null) as member_live,
        exists (select 1 from member where archived_at is not null) as member_archived,
        (${createdBy}::uuid is null or exists (select 1 from creator where deleted_at is null)) as creator_ok,
        exists (select 1 from write_scope) as scoped
    ),
    started as (
      insert into front_sessions (id, user_id, member_id, side_system_id, sub_system_id, started_at, ended_at, note, created_by, position, created_at, updated_at, deleted_at)
      select ${id}, ${userId}, ${memberId}, w.side_system_id, w.sub_system_id, ${now}, null, ${note}, ${createdBy}::uuid, t.position, ${now}, ${now}, null
      from verdict v, write_scope w, turn t
      where v.member_live and not v.member_archived and v.creator_ok
      on conflict (user_id, member_id) where ended_at is null and deleted_at is null do nothing
      returning id
    ),
    ${appendEvents(events, sql`exists (select 1 from started)`)}
    select v.*, (select count(*) from started)::int as changed,
      ${notifiedColumn}
    from verdict v`,
});

/**
 * A member leaves the front in one statement: the front lock, then its open sessions ended and
 * taken out of the order, and `front.changed`, when the member is the account's (in the trash too).
 */
const stop = statement<
  { userId: string; memberId: string; now: number; events: readonly PendingEvent[] },
  FrontWriteVerdict & { notified: unknown }
>({
  name: 'front_stop',
  area: AREA,
  variants: {
    'a member leaves': { userId: EXAMPLE_UUID, memberId: EXAMPLE_UUID, now: 0, events: [EXAMPLE_EVENT] },
  },
  build: ({ userId, memberId, now, events }) => sql`with ${frontTurnSql(userId, false)},
    ${memberAfterTurn(userId, memberId, 'member')},
    ended as (
      update front_sessions set ended_at = ${now}, position = null, updated_at = ${now}
      where user_id = ${userId} and member_id = ${memberId} and ${OPEN} and exists (select 1 from member)
      returning id
    ),
    ${appendEvents(events, sql`exists (select 1 from member)`)}
    select exists (select 1 from member) as member, (select count(*) from ended)::int as changed,
      ${notifiedColumn}`,
});

const openSessions = statement<{ userId: string }, FrontSessionRow>({
  name: 'front_open_sessions',
  area: AREA,
  variants: { 'the account': { userId: EXAMPLE_UUID } },
  build: ({ userId }) =>
    sql`select s.* from front_sessions as s where s.user_id = ${userId} and s.ended_at is null and s.deleted_at is null
      order by s.position asc nulls last, s.started_at asc, s.id asc`,
});

const openOfMember = statement<{ userId: string; memberId: string }, FrontSessionRow>({
  name: 'front_open_session_of_member',
  area: AREA,
  variants: { 'the member': { userId: EXAMPLE_UUID, memberId: EXAMPLE_UUID } },
  build: ({ userId, memberId }) =>
    sql`select * from front_sessions where user_id = ${userId} and member_id = ${memberId} and ${OPEN} limit 1`,
});

const maxPosition = statement<{ userId: string }, { max: number | null }>({
  name: 'front_max_position',
  area: AREA,
  variants: { 'the account': { userId: EXAMPLE_UUID } },
  build: ({ userId }) => sql`select max(position) as max from front_sessions where user_id = ${userId} and ${OPEN}`,
});

/** Ends the open sessions of the account, or of one member, and takes them out of the order. */
const endOpen = statement<{ userId: string; now: number; memberId?: string }, { id: string }>({
  name: 'front_end_open',
  area: AREA,
  variants: {
    'every open session': { userId: EXAMPLE_UUID, now: 0 },
    "one member's": { userId: EXAMPLE_UUID, now: 0, memberId: EXAMPLE_UUID },
  },
  build: ({ userId, now, memberId }) =>
    sql`update front_sessions set ended_at = ${now}, position = null, updated_at = ${now}
      where user_id = ${userId} and ${OPEN}${memberId === undefined ? sql.empty : sql` and member_id = ${memberId}`}
      returning id`,
});

const findSession = statement<{ userId: string; id: string }, FrontSessionRow>({
  name: 'front_find_session',
  area: AREA,
  variants: { 'the session': { userId: EXAMPLE_UUID, id: EXAMPLE_UUID } },
  build: ({ userId, id }) => sql`select * from front_sessions where id = ${id} and user_id = ${userId}`,
});

/** `column = case when <given> then <value> else column end`: one text whichever columns a change sets. */
function setIfGiven(changes: FrontSessionChanges, column: keyof FrontSessionChanges & string, type: string): Sql {
  const given = column in changes && changes[column] !== undefined;
  const id = sql.id(column);
  return sql`${id} = case when ${given}::boolean then ${given ? changes[column] : null}::${sql.constant(type, ['bigint', 'int', 'text'])} else ${id} end`;
}

const updateSession = statement<{ userId: string; id: string; changes: FrontSessionChanges }, FrontSessionRow>({
  name: 'front_update_session',
  area: AREA,
  variants: { 'any change': { userId: EXAMPLE_UUID, id: EXAMPLE_UUID, changes: { updated_at: 0 } } },
  build: ({ userId, id, changes }) =>
    sql`update front_sessions set ${setIfGiven(changes, 'started_at', 'bigint')}, ${setIfGiven(changes, 'ended_at', 'bigint')},
        ${setIfGiven(changes, 'note', 'text')}, ${setIfGiven(changes, 'position', 'int')}, ${setIfGiven(changes, 'deleted_at', 'bigint')},
        updated_at = ${changes.updated_at}
      where id = ${id} and user_id = ${userId} returning *`,
});

/** Another session of the member, not in the trash, sharing time with [startedAt, endedAt) (a null end: still open). */
const overlapping = statement<
  { userId: string; memberId: string; exceptId: string; startedAt: number; endedAt: number | null },
  { id: string }
>({
  name: 'front_overlapping_session',
  area: AREA,
  variants: {
    'an ended session': {
      userId: EXAMPLE_UUID,
      memberId: EXAMPLE_UUID,
      exceptId: EXAMPLE_UUID,
      startedAt: 0,
      endedAt: 0,
    },
    'an open session': {
      userId: EXAMPLE_UUID,
      memberId: EXAMPLE_UUID,
      exceptId: EXAMPLE_UUID,
      startedAt: 0,
      endedAt: null,
    },
  },
  build: ({ userId, memberId, exceptId, startedAt, endedAt }) =>
    sql`select id from front_sessions
      where user_id = ${userId} and member_id = ${memberId} and deleted_at is null and id <> ${exceptId}${endedAt === null ? sql.empty : sql` and started_at < ${endedAt}`}
        and (ended_at is null or ended_at > ${startedAt})
      limit 1`,
});

const upsertPresence = statement<{ row: TierPresenceRow }, never>({
  name: 'front_upsert_presence',
  area: AREA,
  variants: {
    'a presence': {
      row: { user_id: EXAMPLE_UUID, member_id: EXAMPLE_UUID, tier_key: '', note: null, created_at: 0, updated_at: 0 },
    },
  },
  build: ({ row }) =>
    sql`insert into front_tier_presence (user_id, member_id, tier_key, note, created_at, updated_at)
      values (${row.user_id}, ${row.member_id}, ${row.tier_key}, ${row.note}, ${row.created_at}, ${row.updated_at})
      on conflict (user_id, member_id) do update set tier_key = excluded.tier_key, note = excluded.note, updated_at = excluded.updated_at`,
});

const deletePresence = statement<{ userId: string; memberId?: string }, { member_id: string }>({
  name: 'front_delete_presence',
  area: AREA,
  variants: {
    'every presence of the account': { userId: EXAMPLE_UUID },
    "one member's": { userId: EXAMPLE_UUID, memberId: EXAMPLE_UUID },
  },
  build: ({ userId, memberId }) =>
    sql`delete from front_tier_presence where user_id = ${userId}${memberId === undefined ? sql.empty : sql` and member_id = ${memberId}`}
      returning member_id`,
});

const listTiers = statement<{ userId: string }, CustomTierRow>({
  name: 'front_list_tiers',
  area: AREA,
  variants: { 'the account': { userId: EXAMPLE_UUID } },
  build: ({ userId }) =>
    sql`select * from front_custom_tiers where user_id = ${userId} order by created_at asc, id asc`,
});

const findTier = statement<{ userId: string; id: string }, CustomTierRow>({
  name: 'front_find_tier',
  area: AREA,
  variants: { 'the tier': { userId: EXAMPLE_UUID, id: EXAMPLE_UUID } },
  build: ({ userId, id }) => sql`select * from front_custom_tiers where id = ${id} and user_id = ${userId}`,
});

const countTiers = statement<{ userId: string }, { n: number }>({
  name: 'front_count_tiers',
  area: AREA,
  variants: { 'the account': { userId: EXAMPLE_UUID } },
  build: ({ userId }) => sql`select count(*) as n from front_custom_tiers where user_id = ${userId}`,
});

const insertTier = statement<{ row: CustomTierRow }, never>({
  name: 'front_insert_tier',
  area: AREA,
  variants: {
    'a tier': { row: { id: EXAMPLE_UUID, user_id: EXAMPLE_UUID, display_name: '', created_at: 0, updated_at: 0 } },
  },
  build: ({ row }) =>
    sql`insert into front_custom_tiers (id, user_id, display_name, created_at, updated_at)
      values (${row.id}, ${row.user_id}, ${row.display_name}, ${row.created_at}, ${row.updated_at})`,
});

/** The tier and every presence row that uses it, in one statement; no row when it is not the account's. */
const deleteTier = statement<{ userId: string; id: string }, { id: string }>({
  name: 'front_delete_tier',
  area: AREA,
  variants: { 'the tier': { userId: EXAMPLE_UUID, id: EXAMPLE_UUID } },
  build: ({ userId, id }) =>
    sql`with tier as (delete from front_custom_tiers where id = ${id} and user_id = ${userId} returning id),
        presence as (delete from front_tier_presence p using tier where p.user_id = ${userId} and p.tier_key = tier.id::text)
      select id from tier`,
});

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
    await lock(trx, { userId });
  },

  /**
   * Open sessions in front order, members in the trash included: callers drop those with the
   * member rows they read anyway. (Joining members here lets the planner hash the account's
   * whole member list to filter a handful of open sessions.)
   */
  openSessions(db: Knex, userId: string): Promise<FrontSessionRow[]> {
    return openSessions(db, { userId });
  },

  /** The current front: its open sessions with their members and the tier presence (the front_now statement). */
  frontNow(db: Knex, userId: string): Promise<FrontNowRow[]> {
    return frontNow(db, { userId });
  },

  async findOpenByMember(db: Knex, userId: string, memberId: string): Promise<FrontSessionRow | undefined> {
    return (await openOfMember(db, { userId, memberId }))[0];
  },

  /** startFronting's statement (see start): writes nothing unless the verdict allows it. */
  async start(db: Knex, input: StartInput): Promise<FrontWriteVerdict> {
    return (await start(db, input))[0]!;
  },

  /** stopFronting's statement (see stop). */
  async stop(
    db: Knex,
    input: { userId: string; memberId: string; now: number; events: readonly PendingEvent[] },
  ): Promise<Pick<FrontWriteVerdict, 'member' | 'changed'>> {
    return (await stop(db, input))[0]!;
  },

  /** One past the last place in the current front order. */
  async nextPosition(db: Knex, userId: string): Promise<number> {
    const max = (await maxPosition(db, { userId }))[0]?.max;
    return max === null || max === undefined ? 0 : max + 1;
  },

  /** Ends the open sessions of the account, or of one member, and takes them out of the order. */
  /** How many sessions it ended. */
  async endOpen(db: Knex, userId: string, now: number, memberId?: string): Promise<number> {
    return (await endOpen(db, { userId, now, memberId })).length;
  },

  /** Positions follow the array; only open sessions of the listed members are touched. */
  async setOrder(db: Knex, userId: string, memberIds: string[], now: number): Promise<void> {
    if (memberIds.length === 0) return;
    await setOrder(db, { userId, memberIds, now });
  },

  /** Live or trashed. */
  async findSession(db: Knex, userId: string, id: string): Promise<FrontSessionRow | undefined> {
    return (await findSession(db, { userId, id }))[0];
  },

  async updateSession(db: Knex, userId: string, id: string, changes: FrontSessionChanges): Promise<FrontSessionRow> {
    const [row] = await updateSession(db, { userId, id, changes });
    return row!;
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
    return (await overlapping(db, { userId, memberId, exceptId, startedAt, endedAt })).length > 0;
  },

  /** A page (`size` + 1 rows) of the time-filtered history, newest first on the (user_id, started_at desc, id desc) index, strictly after the cursor. */
  historyPage(
    db: Knex,
    userId: string,
    filter: HistoryFilter,
    size: number,
    after?: HistoryCursor,
  ): Promise<FrontSessionRow[]> {
    return historyPage(db, { userId, filter, size, after });
  },

  /** The whole history's page (`size` + 1 rows) after the cursor and its count, in one statement (see historyStatement). */
  async historyPageWithCount(
    db: Knex,
    userId: string,
    size: number,
    after?: HistoryCursor,
  ): Promise<{ rows: HistoryPageRow[]; count: number }> {
    const rows = after ? await historyAfter(db, { userId, size, after }) : await historyFirst(db, { userId, size });
    return {
      rows: rows.filter((r): r is { live: number } & HistoryPageRow => r.id !== null),
      count: Number(rows[0]?.live ?? 0),
    };
  },

  async historyCount(db: Knex, userId: string, filter: HistoryFilter): Promise<number> {
    if (filter.startTime === undefined && filter.endTime === undefined) {
      // The whole history: the trigger-maintained counter (migration 0005), O(1) at any size.
      return Number((await historyCounter(db, { userId }))[0]?.live ?? 0);
    }
    return Number((await historyCount(db, { userId, filter }))[0]?.n ?? 0);
  },

  async upsertPresence(db: Knex, row: TierPresenceRow): Promise<void> {
    await upsertPresence(db, { row });
  },

  /** How many presence rows it removed. */
  async deletePresence(db: Knex, userId: string, memberId?: string): Promise<number> {
    return (await deletePresence(db, { userId, memberId })).length;
  },

  listTiers(db: Knex, userId: string): Promise<CustomTierRow[]> {
    return listTiers(db, { userId });
  },

  async findTier(db: Knex, userId: string, id: string): Promise<CustomTierRow | undefined> {
    return (await findTier(db, { userId, id }))[0];
  },

  async countTiers(db: Knex, userId: string): Promise<number> {
    return Number((await countTiers(db, { userId }))[0]?.n ?? 0);
  },

  async insertTier(db: Knex, row: CustomTierRow): Promise<void> {
    await insertTier(db, { row });
  },

  /** Deletes the tier and every presence row that uses it; false when it is not the caller's. */
  async deleteTier(db: Knex, userId: string, id: string): Promise<boolean> {
    return (await deleteTier(db, { userId, id })).length > 0;
  },
};

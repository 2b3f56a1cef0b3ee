/**
 * The SQL of the friend activity routes: the owner's front, history and notes as one friend may
 * see them. Every "may this friend see or change this member" is the member rule of
 * server/access/ (visibleMembersSql and memberLevelSql, never re-implemented here), applied inside
 * the statement, so hidden rows are never loaded; each read is one statement whatever the number of
 * rows. The statements are committed as generated/sql/friendActivity.sql.
 */
import {
  EXAMPLE_ACCESS,
  FRIEND_READ_CACHE,
  grantArray,
  memberLevelSql,
  memberRuleSql,
  okColumn,
  sectionOpenSql,
  visibleMembersSql,
  withFriendAccess,
} from '../../access/index.ts';
import { auditInsertSql, EXAMPLE_AUDIT, type PendingAudit } from '../../audit/index.ts';
import type { FriendAccess, InStatementFriendAccess, PermissionGroup } from '../../core/context.ts';
import type { Knex } from 'knex';
import { type Sql, sql } from '../../db/sql.ts';
import { EXAMPLE_UUID, statement } from '../../db/statements.ts';
import { EXAMPLE_EVENT, keyedExample, notifiedColumn } from '../../events/log.ts';
import {
  CREATE_VERDICT_COLUMNS,
  type CreateVerdict,
  createEntrySql,
  EXAMPLE_NOTE_CREATE,
  type NoteCreate,
} from '../entries/index.ts';
import type { MemberRow } from '../members/index.ts';

/** Spec: the friend notes list considers at most the owner's 500 most recent live notes. */
export const NOTES_WINDOW = 500;
/** Milliseconds in a UTC day, written into the month statement as a constant. */
const DAY = sql.constant('86400000', ['86400000']);
const AREA = 'friendActivity';

export type FriendMemberCols = Pick<MemberRow, 'name' | 'avatar'>;
export type FrontSessionView = FriendMemberCols & {
  id: string;
  member_id: string;
  note: string | null;
  started_at: number;
};
export type FrontPresenceView = FriendMemberCols & {
  member_id: string;
  tier_key: string;
  note: string | null;
  custom_display_name: string | null;
};
export type HistoryView = FriendMemberCols & {
  id: string;
  member_id: string;
  started_at: number;
  ended_at: number | null;
  note: string | null;
};

export interface NoteView {
  id: string;
  title: string | null;
  content: string;
  created_at: number;
  updated_at: number;
  members: Array<{ id: string; name: string }>;
  can_write: boolean;
}

export interface NoteForWrite {
  id: string;
  member_id: string | null;
  member_ids: string[] | null;
  visible: boolean;
  can_write: boolean;
}

/**
 * A note's links as one friend sees them, as a subquery of one row over the links
 * (`entry_members`) of the note `entry` (a constant column): `members`, its readable linked
 * members as a JSON array of `[id, name, position]` in no particular order (sortByPosition puts
 * them in link order: an ordered aggregate would cost a sort per note; arrays rather than objects
 * save building and parsing a key per field, about 5% of the list's statement); `visible`, the
 * note is visible: one of its links is readable, or, with `memberId`, the link to that member is;
 * `can_write`, every link is readable and its member's own buckets grant member_notes read_write.
 * A link is **readable** when its member is a live member of the owner's that visibleMembers
 * passes with member_notes at read (memberLevelSql ≥ 1; writable: = 2). The single definition of
 * both rules: the list and the single-note checks of PATCH and DELETE read them here; the list's
 * one-link notes read their member through the same linkedMemberSql. Each link's member is read
 * once, its own buckets with it (bucket_ids).
 */
function noteLinksSql(access: FriendAccess | InStatementFriendAccess, entry: string, memberId?: string): Sql {
  const only = memberId === undefined ? sql.empty : sql` and k.id = ${memberId}::uuid`;
  return sql`select coalesce(json_agg(json_build_array(k.id, k.name, k.position)) filter (where k.level >= 1), '[]'::json) as members,
        coalesce(bool_or(k.level >= 1${only}), false) as visible,
        coalesce(bool_and(coalesce(k.level = 2, false)), true) as can_write
      from entry_members em
      left join lateral (${linkedMemberSql(access, 'em.member_id', { columns: sql`, em.position` })}) k on true
      where em.entry_id = ${sql.id(entry)}`;
}

/**
 * A note link's member as noteLinksSql decides it: the live member of the owner's in `column` (a
 * constant qualified column), read by primary key behind `offset 0`, with its `id`, `name`, `level`
 * (memberLevelSql with member_notes) and `columns` (each after a comma), where `where` (each after
 * `and`) also holds. No row: the member is gone or in the trash, so the link is not readable.
 */
function linkedMemberSql(
  access: FriendAccess | InStatementFriendAccess,
  column: string,
  { columns = sql.empty, where = sql.empty }: { columns?: Sql; where?: Sql } = {},
): Sql {
  return sql`select lm.id, lm.name, ${memberLevelSql(access, 'lm', 'member_notes')} as level${columns} from members lm
        where lm.id = ${sql.id(column)} and lm.user_id = ${access.ownerId} and lm.deleted_at is null${where} offset 0`;
}

/** One readable link of noteLinksSql's `members`: member id, name, and the link's position. */
type LinkedMember = [id: string, name: string, position: number];

/** noteLinksSql's `members` in link order, without their position. */
function sortByPosition(members: LinkedMember[] | string): NoteView['members'] {
  const list = typeof members === 'string' ? (JSON.parse(members) as LinkedMember[]) : members;
  if (list.length > 1) list.sort((x, y) => x[2] - y[2]);
  return list.map(([id, name]) => ({ id, name }));
}

/** "The member in `column` passes the member rule with `group` at `level`", as a boolean column. */
function memberPasses(access: FriendAccess, column: string, group: PermissionGroup, level: 'read' | 'read_write'): Sql {
  return sql`exists (select 1 from members w where w.id = ${sql.id(column)} and ${visibleMembersSql(access, 'w', group, level)})`;
}

/** A row of the friend front: a session, a presence, or (no friendship, or nothing visible) neither. */
type FriendFrontRow = { ok: boolean } & (
  | ({ kind: 'session' } & FrontSessionView & Record<'tier_key' | 'custom_display_name', null>)
  | ({ kind: 'presence' } & FrontPresenceView & Record<'id' | 'started_at', null>)
  | ({ kind: null } & Record<keyof FrontSessionView | keyof FrontPresenceView, null>)
);

/**
 * The friend's view of the live front in one statement: the open sessions of visible fronters
 * (members_view and front at read) in front order, then the tier presence of visible members in
 * the order it was set, with a custom tier's name; as rows (`kind`), as the owner's front reads
 * them, the ordering keys left out of the select list. The members of both are checked once (the
 * member rule and the avatar's grant from the member's own buckets, memberRuleSql), whatever list
 * they appear in. Always at least one row, which carries `ok`.
 */
const friendFront = statement<{ access: InStatementFriendAccess }, FriendFrontRow>({
  name: 'friend_front',
  area: AREA,
  cache: FRIEND_READ_CACHE,
  variants: { 'friendship read in the statement': { access: EXAMPLE_ACCESS.inStatement } },
  build: ({ access }) =>
    withFriendAccess(
      access,
      sql`open as materialized (
           select s.id, s.member_id, s.note, s.started_at, s.position from front_sessions s
            where s.user_id = ${access.ownerId} and s.ended_at is null and s.deleted_at is null
         ), present as materialized (
           select p.member_id, p.tier_key, p.note, p.created_at, t.display_name as custom_display_name
             from front_tier_presence p left join front_custom_tiers t on t.user_id = p.user_id and t.id::text = p.tier_key
            where p.user_id = ${access.ownerId}
         ), fm as materialized (
           select m.id, m.name, case when mr.section_granted and ${sectionOpenSql(access, 'm.id', 'avatar')} then m.avatar end as avatar
             from members m cross join lateral (${memberRuleSql(access, 'm', 'front', 'read', 'avatar')}) mr
            where m.id in (select member_id from open union select member_id from present)
              and m.user_id = ${access.ownerId} and m.deleted_at is null and mr.visible
         )
       select fa.ok, x.kind, x.id, x.member_id, x.note, x.started_at, x.tier_key, x.custom_display_name, x.name, x.avatar
       from friend_access fa left join (
         select 'session' as kind, s.id, s.member_id, s.note, s.started_at, null::text as tier_key, null::text as custom_display_name,
           m.name, m.avatar, s.position as ord_position, s.started_at as ord_time, s.id as ord_id
           from open s join fm m on m.id = s.member_id
         union all
         select 'presence', null, p.member_id, p.note, null, p.tier_key, p.custom_display_name,
           m.name, m.avatar, null, p.created_at, p.member_id
           from present p join fm m on m.id = p.member_id
       ) x on true
       order by x.kind desc, x.ord_position asc nulls last, x.ord_time asc, x.ord_id asc`,
    ),
});

const friendFronters = statement<{ access: FriendAccess }, { member_id: string; visible: boolean }>({
  name: 'friend_fronters',
  area: AREA,
  variants: { 'resolved friend': { access: EXAMPLE_ACCESS.friend } },
  build: ({ access }) => sql`select s.member_id, ${memberPasses(access, 'm.id', 'front', 'read')} as visible
    from front_sessions s join members m on m.id = s.member_id and m.user_id = s.user_id
    where s.user_id = ${access.ownerId} and s.ended_at is null and s.deleted_at is null and m.deleted_at is null
    order by s.position asc nulls last, s.started_at asc, s.id asc`,
});

const friendMembersForWrite = statement<
  { access: FriendAccess; ids: readonly string[]; group: PermissionGroup; active: boolean },
  { id: string; can_write: boolean }
>({
  name: 'friend_members_for_write',
  area: AREA,
  variants: {
    'archived members too (front: stop, clear presence)': {
      access: EXAMPLE_ACCESS.friend,
      ids: [],
      group: 'front',
      active: false,
    },
    'active members only (front: start, set)': { access: EXAMPLE_ACCESS.friend, ids: [], group: 'front', active: true },
    'notes (member_notes)': { access: EXAMPLE_ACCESS.friend, ids: [], group: 'member_notes', active: false },
  },
  build: ({
    access,
    ids,
    group,
    active,
  }) => sql`select m.id, ${memberPasses(access, 'm.id', group, 'read_write')} as can_write
    from members m
    where m.user_id = ${access.ownerId} and m.id = any (${[...ids]}::uuid[]) and m.deleted_at is null${active ? sql` and m.archived_at is null` : sql.empty}
      and ${visibleMembersSql(access, 'm')}`,
});

const friendFrontWritable = statement<{ access: FriendAccess }, { id: string }>({
  name: 'friend_front_writable_ids',
  area: AREA,
  variants: { 'resolved friend': { access: EXAMPLE_ACCESS.friend } },
  build: ({ access }) => sql`select m.id from members m
    where m.user_id = ${access.ownerId} and m.deleted_at is null and m.archived_at is null
      and ${visibleMembersSql(access, 'm', 'front', 'read_write')}
    order by m.name, m.id`,
});

interface HistoryParams {
  access: InStatementFriendAccess;
  filter: { startTime?: number; endTime?: number };
  size: number;
  after?: { startedAt: number; id: string } | undefined;
}

/** Every combination of the optional filters and the cursor: each is its own text. */
function historyVariants(): Record<string, HistoryParams> {
  const variants: Record<string, HistoryParams> = {};
  for (const start of [false, true])
    for (const end of [false, true])
      for (const cursor of [false, true]) {
        const label = [cursor ? 'after a cursor' : 'first page', start ? 'startTime' : '', end ? 'endTime' : '']
          .filter(Boolean)
          .join(', ');
        variants[label] = {
          access: EXAMPLE_ACCESS.inStatement,
          filter: { ...(start ? { startTime: 0 } : {}), ...(end ? { endTime: 0 } : {}) },
          size: 20,
          ...(cursor ? { after: { startedAt: 0, id: EXAMPLE_UUID } } : {}),
        };
      }
  return variants;
}

const friendHistoryPage = statement<
  HistoryParams,
  HistoryView & { ok: boolean; total: number | string | null; id: string | null }
>({
  name: 'friend_history_page',
  area: AREA,
  cache: FRIEND_READ_CACHE,
  variants: historyVariants(),
  build: ({ access, filter, size, after }) => {
    // The walk's bounds on the bucket's index, then the session's own filters. Each walked row's
    // session and member are read and checked by one lateral subquery that cannot be flattened
    // (offset 0), which also carries the page's columns: as a plain join, a plan may turn the walk
    // round (the visible members first, then each one's whole list); as a per-row filter under
    // `order by … limit`, the walk stays on the index in order and stops at the page.
    const walk: Sql[] = [];
    if (filter.endTime !== undefined) walk.push(sql` and f.started_at <= ${filter.endTime}`);
    // The plain bound on started_at is implied by the row comparison; it is there for the planner,
    // whose estimate of a row comparison alone is far too small.
    if (after)
      walk.push(
        sql` and f.started_at <= ${after.startedAt}::bigint and (f.started_at, f.session_id) < (${after.startedAt}::bigint, ${after.id}::uuid)`,
      );
    const session =
      filter.startTime === undefined
        ? sql`s.deleted_at is null`
        : sql`s.deleted_at is null and (s.ended_at is null or s.ended_at >= ${filter.startTime})`;
    // Without a time filter the spec's count is the owner's live history, which a trigger keeps
    // in front_session_counts (migration 0005): read in the same statement. With one, the caller
    // counts (null here).
    const counted = filter.startTime === undefined && filter.endTime === undefined;
    const total = counted
      ? sql`coalesce((select fc.live from front_session_counts fc where fc.user_id = ${access.ownerId}), 0)`
      : sql`null::bigint`;
    return withFriendAccess(
      access,
      sql`walked as (
         select w.* from unnest(${grantArray(access, 'front', 'read')}) b(id)
         cross join lateral (
           select f.session_id as id, f.started_at, x.member_id, x.ended_at, x.note, x.name, x.avatar, x.avatar_granted from front_session_buckets f
           cross join lateral (
             select s.member_id, s.ended_at, s.note, m.name, m.avatar, mr.section_granted as avatar_granted
             from front_sessions s join members m on m.id = s.member_id cross join lateral (${memberRuleSql(access, 'm', 'front', 'read', 'avatar')}) mr
             where s.id = f.session_id and ${session} and m.user_id = ${access.ownerId} and m.deleted_at is null and mr.visible offset 0) x
           where f.bucket_id = b.id${sql.join(walk, '')}
           order by f.started_at desc, f.session_id desc limit ${size + 1}
         ) w
       ), page as (
         select distinct on (w.started_at, w.id) w.* from walked w order by w.started_at desc, w.id desc limit ${size + 1}
       )
       select c.ok, c.total, p.id, p.member_id, p.started_at, p.ended_at, p.note, p.name, case when p.avatar_granted and ${sectionOpenSql(access, 'p.member_id', 'avatar')} then p.avatar end as avatar
       from (select ${okColumn} as ok, ${total} as total) c
       left join page p on true
       order by p.started_at desc, p.id desc`,
    );
  },
});

interface MonthParams {
  access: FriendAccess;
  range: { start: number; end: number; now: number; maxSessions: number };
}

const friendMonth = statement<
  MonthParams,
  { matched: number | string; day: number | string; member_id: string; ms: number | string; sessions: number | string }
>({
  name: 'friend_front_month',
  area: AREA,
  variants: {
    'resolved friend': { access: EXAMPLE_ACCESS.friend, range: { start: 0, end: 0, now: 0, maxSessions: 1 } },
  },
  build: ({ access, range }) => sql`with c as (
  select s.member_id, greatest(s.started_at, ${range.start}::bigint) as a,
    greatest(s.started_at, ${range.start}::bigint, least(coalesce(s.ended_at, ${range.now}::bigint), ${range.end}::bigint)) as b,
    row_number() over (order by s.started_at desc, s.id desc) as rn
  from front_sessions s join members m on m.id = s.member_id and m.user_id = s.user_id
  where s.user_id = ${access.ownerId} and s.deleted_at is null and m.deleted_at is null
    and ${visibleMembersSql(access, 'm', 'front', 'read')}
    and s.started_at <= ${range.end} and (s.ended_at is null or s.ended_at >= ${range.start})
  order by s.started_at desc, s.id desc
  limit ${range.maxSessions + 1})
select (select count(*) from c) as matched, d.n as day, c.member_id, sum(least(c.b, (d.n + 1) * ${DAY}) - greatest(c.a, d.n * ${DAY})) as ms, count(*) as sessions
from c cross join lateral generate_series(c.a / ${DAY}, greatest(c.a / ${DAY}, (c.b - 1) / ${DAY})) as d(n)
where c.rn <= ${range.maxSessions}
group by d.n, c.member_id
order by d.n, c.member_id`,
});

interface NotesParams {
  access: InStatementFriendAccess;
  limit: number;
  memberId?: string | undefined;
}

const friendNotes = statement<
  NotesParams,
  Omit<NoteView, 'members' | 'id'> & {
    ok: boolean;
    id: string | null;
    members: LinkedMember[] | string | null;
    sole_id: string | null;
    sole_name: string | null;
  }
>({
  name: 'friend_notes',
  area: AREA,
  cache: FRIEND_READ_CACHE,
  variants: {
    'every readable note': { access: EXAMPLE_ACCESS.inStatement, limit: 50 },
    'the notes linking one member': { access: EXAMPLE_ACCESS.inStatement, limit: 50, memberId: EXAMPLE_UUID },
  },
  build: ({ access, limit, memberId }) => {
    const only = memberId === undefined ? sql.empty : sql`and l.member_id = ${memberId}::uuid`;
    const soleOnly = memberId === undefined ? sql.empty : sql` and lm.id = ${memberId}::uuid`;
    // The window's bound: the list's order is (updated_at desc, id asc), so a link is inside when
    // its note is newer than the last one, or as new with an id not after it. No last note: fewer
    // notes than the window, every link is inside.
    return withFriendAccess(
      access,
      sql`last as materialized (
         select e.updated_at, e.id from entries e where e.user_id = ${access.ownerId} and e.deleted_at is null
         order by e.updated_at desc, e.id asc offset ${NOTES_WINDOW - 1} limit 1
       ), page as (
         select distinct on (w.updated_at, w.id) w.*
         from unnest(${grantArray(access, 'member_notes', 'read')}) ub(id)
         cross join lateral (
           select distinct on (l.updated_at, l.entry_id) x.*
           from entry_link_buckets l
           cross join lateral (
             select le.id, le.title, le.content, le.created_at, le.updated_at, n.members, n.sole_id, n.sole_name, n.can_write
             from entries le cross join lateral (
               select null::json as members, s.id as sole_id, s.name as sole_name, s.level >= 1 as visible, s.level = 2 as can_write
               from (${linkedMemberSql(access, 'le.sole_member_id', { where: soleOnly })}) s
               where le.sole_member_id is not null
               union all
               select a.members, null, null, a.visible, a.can_write from (${noteLinksSql(access, 'le.id', memberId)}) a
               where le.sole_member_id is null
             ) n
             where le.id = l.entry_id and le.user_id = ${access.ownerId} and le.deleted_at is null and n.visible
             offset 0
           ) x
           where l.bucket_id = ub.id
             and l.updated_at >= coalesce((select updated_at from last), '-9223372036854775808'::bigint)
             and (l.updated_at > coalesce((select updated_at from last), '-9223372036854775808'::bigint) or l.entry_id <= (select id from last))
             ${only}
           order by l.updated_at desc, l.entry_id asc
           limit ${limit}
         ) w
         order by w.updated_at desc, w.id asc
         limit ${limit}
       )
       select fa.ok, p.* from friend_access fa left join page p on true
       order by p.updated_at desc, p.id asc`,
    );
  },
});

const friendNoteForWrite = statement<{ access: FriendAccess; entryId: string }, NoteForWrite>({
  name: 'friend_note_for_write',
  area: AREA,
  variants: { 'resolved friend': { access: EXAMPLE_ACCESS.friend, entryId: EXAMPLE_UUID } },
  build: ({ access, entryId }) => sql`select e.id, e.member_id, e.member_ids, n.visible, n.can_write
        from entries e cross join lateral (${noteLinksSql(access, 'e.id')}) n where e.id = ${entryId} and e.user_id = ${access.ownerId} and e.deleted_at is null`,
});

/** What the friend note statement decided: the friend's checks, then the note's (CreateVerdict). */
export interface FriendNoteVerdict extends CreateVerdict {
  /** The friendship holds (friend_access). */
  friend: boolean;
  /** Every link is a live member the friend sees (members_view). */
  found: boolean;
  /** Every link grants the friend member_notes read_write. */
  writable: boolean;
}

/** The audit row of a friend's note, with its detail as JSON text. */
export interface FriendNoteAudit {
  row: PendingAudit;
  detail: string;
}

/**
 * A friend's note on the owner's account in one statement (docs/data-access.md, "Writes in one
 * statement"): the friendship and the viewer's grants (friend_access), each link a live member the
 * friend sees with member_notes read_write on it (the member rule, as membersForWrite), then the
 * owner's note create (createEntrySql, gated on those checks: nothing is locked or written
 * otherwise) and its audit row, written with the note.
 */
const friendCreateNote = statement<
  { access: InStatementFriendAccess; note: NoteCreate; audit: FriendNoteAudit },
  FriendNoteVerdict & { notified: unknown }
>({
  name: 'friend_note_create',
  area: AREA,
  variants: {
    'friendship read in the statement': {
      access: EXAMPLE_ACCESS.inStatement,
      note: EXAMPLE_NOTE_CREATE,
      audit: { row: EXAMPLE_AUDIT, detail: '{}' },
    },
    'friendship read in the statement, the request keyed (its response stored under the key)': {
      access: EXAMPLE_ACCESS.inStatement,
      note: { ...EXAMPLE_NOTE_CREATE, events: keyedExample([EXAMPLE_EVENT]) },
      audit: { row: EXAMPLE_AUDIT, detail: '{}' },
    },
  },
  build: ({ access, note, audit }) =>
    withFriendAccess(
      access,
      sql`friend_links as (
         select ${visibleMembersSql(access, 'm', 'member_notes', 'read_write')} as can_write from members m
          where m.user_id = ${access.ownerId} and m.id = any (${[...note.links]}::uuid[]) and m.deleted_at is null
            and ${visibleMembersSql(access, 'm')}
       ), friend_check as (
         select ${okColumn} as friend, count(*) = cardinality(${[...note.links]}::uuid[]) as found,
           coalesce(bool_and(can_write), true) as writable
         from friend_links
       ),
       ${createEntrySql(note, sql`(select friend and found and writable from friend_check)`)},
       audited as (${auditInsertSql(audit.row, sql`${audit.detail}::jsonb`, sql`verdict where ok`)})
       select f.friend, f.found, f.writable, ${CREATE_VERDICT_COLUMNS}, ${notifiedColumn}
       from friend_check f, verdict v`,
    ),
});

export const friendActivityRepo = {
  /**
   * Creates a friend's note with its audit row and events in one statement, or writes nothing (see
   * friendCreateNote); the verdict with `notified` (a keyed create's oneStatement reads it).
   */
  async createNote(
    db: Knex,
    access: InStatementFriendAccess,
    note: NoteCreate,
    audit: FriendNoteAudit,
  ): Promise<FriendNoteVerdict & { notified: unknown }> {
    return (await friendCreateNote(db, { access, note, audit }))[0]!;
  },

  async front(
    db: Knex,
    access: InStatementFriendAccess,
  ): Promise<{ ok: boolean; sessions: FrontSessionView[]; presence: FrontPresenceView[] }> {
    const rows = await friendFront(db, { access });
    if (rows.length === 0) throw new Error('friend front: the statement returned no row');
    const sessions: FrontSessionView[] = [];
    const presence: FrontPresenceView[] = [];
    for (const row of rows) {
      if (row.kind === 'session') sessions.push(row);
      else if (row.kind === 'presence') presence.push(row);
    }
    return { ok: rows[0]!.ok, sessions, presence };
  },

  /** Every open session (members not in the trash) in front order, with whether the friend sees it. */
  fronters(db: Knex, access: FriendAccess): Promise<Array<{ member_id: string; visible: boolean }>> {
    return friendFronters(db, { access });
  },

  /**
   * Of `ids`, the owner's live members visible to the friend (members_view; not archived with
   * `active`), each with whether `group` is read_write on it. Ids missing from the answer are
   * unknown, in the trash, archived (with `active`) or hidden: callers answer 404 for all alike.
   */
  membersForWrite(
    db: Knex,
    access: FriendAccess,
    ids: readonly string[],
    group: PermissionGroup,
    active: boolean,
  ): Promise<Array<{ id: string; can_write: boolean }>> {
    return friendMembersForWrite(db, { access, ids, group, active });
  },

  /** Live, not archived members with front read_write, by name then id. */
  async frontWritableIds(db: Knex, access: FriendAccess): Promise<string[]> {
    return (await friendFrontWritable(db, { access })).map((r) => r.id);
  },

  /**
   * A page (`size` + 1 rows) of the sessions of visible members, newest first, strictly after the
   * cursor, in one statement that also resolves the friendship (`ok`). It walks
   * front_session_buckets (migration 0020: the owner's sessions per bucket of their member, in
   * history order) for each bucket the friend holds that grants front at read: a few index walks
   * in order, like the owner's walk of its own history, whatever share of the owner's members or
   * sessions the friend sees and however deep the cursor. Each walked row's session and member are
   * read by primary key and checked with the engine's rule (visibleMembersSql: members_view and
   * front, the side and sub system narrowing), so the walk only orders candidates; each bucket's
   * walk stops at `size` + 1 visible sessions, and the page is the newest `size` + 1 of those, a
   * session listed under two held buckets counted once. Rows of members the rule hides (a held
   * front bucket whose members lack members_view, or a narrowing side system) are walked past.
   * The avatar is decided for the page's rows only. `total` is the spec's count when there is no
   * time filter (the trigger counter, front_session_counts; else null: the caller counts).
   */
  async historyPage(
    db: Knex,
    access: InStatementFriendAccess,
    filter: { startTime?: number; endTime?: number },
    size: number,
    after?: { startedAt: number; id: string },
  ): Promise<{ ok: boolean; rows: HistoryView[]; total: number | null }> {
    const rows = await friendHistoryPage(db, { access, filter, size, after });
    const first = rows[0];
    return {
      ok: first?.ok === true,
      rows: rows.filter((r) => r.id !== null),
      total: first?.total === null || first?.total === undefined ? null : Number(first.total),
    };
  },

  /**
   * The month aggregation in one statement: the most recent `maxSessions` (+1, to tell truncation)
   * sessions of visible members overlapping [start, end], each clipped to the range (an open one
   * ends at `now`), split over the UTC days it touches; per day and member, the milliseconds and
   * the sessions. `matched` is the number of sessions read (at most maxSessions + 1).
   */
  month(db: Knex, access: FriendAccess, range: MonthParams['range']) {
    return friendMonth(db, { access, range });
  },

  /**
   * Up to `limit` notes the friend may read among the owner's NOTES_WINDOW most recent live notes
   * (newest first), each with its readable linked members (in link order) and whether every
   * linked member is live and writable (noteLinksSql). With `memberId`, only notes linking that
   * member, which must itself be readable. One statement: the window's last note (one index read
   * of the window's keys), then, per held bucket granting member_notes, a walk of
   * entry_link_buckets in the list's order down to that note. Each walked link's note is read and
   * its links decided once, by a lateral subquery that cannot be flattened (offset 0, as in
   * historyPage: as a filter, a plan may read the bucket's whole window and sort it); the note
   * must be visible, and the walk stops at `limit` notes. A note of one link (its row's
   * `sole_member_id`, migration 0039) is decided from that member alone, the rule of noteLinksSql
   * for one link, without reading its links or aggregating them (the other branch of a union
   * whose branches are gated on that column); only notes of several links take noteLinksSql. A
   * note listed under a held bucket and visible through another is still visible, so the walk
   * needs only the list index's own columns (an index-only read; with `memberId`, the link's member
   * too). The walks are merged; the page's rows are the walked ones, so no note is read or decided
   * twice.
   */
  async notes(
    db: Knex,
    access: InStatementFriendAccess,
    limit: number,
    memberId?: string,
  ): Promise<{ ok: boolean; rows: NoteView[] }> {
    const rows = await friendNotes(db, { access, limit, memberId });
    return {
      ok: rows[0]?.ok === true,
      rows: rows
        .filter((r): r is typeof r & { id: string } => r.id !== null)
        .map((r) => ({
          id: r.id,
          title: r.title,
          content: r.content,
          created_at: r.created_at,
          updated_at: r.updated_at,
          members:
            r.sole_id !== null ? [{ id: r.sole_id, name: r.sole_name as string }] : sortByPosition(r.members ?? []),
          can_write: r.can_write,
        })),
    };
  },

  /** A live note of the owner with whether the friend sees it and may write it (noteLinksSql); undefined when unknown or in the trash. */
  async noteForWrite(db: Knex, access: FriendAccess, entryId: string): Promise<NoteForWrite | undefined> {
    const [row] = await friendNoteForWrite(db, { access, entryId });
    return row;
  },
};

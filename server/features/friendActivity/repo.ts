/**
 * The SQL of the friend activity routes: the owner's front, history and notes as one friend may
 * see them. Every "may this friend see or change this member" is `visibleMembers` from
 * server/access/ (never re-implemented here), applied inside the statement, so hidden rows are
 * never loaded; each read is a constant number of statements whatever the number of rows.
 */
import type { Knex } from 'knex';
import {
  friendAccessCte,
  grantArraySql,
  memberLevelSql,
  sectionVisibleSql,
  visibleMembers,
  visibleMembersSql,
} from '../../access/index.ts';
import type { Access, PermissionGroup } from '../../core/context.ts';
import { runBuilt, type SqlText } from '../../db/prepared.ts';
import type { MemberRow } from '../members/index.ts';

const DAY_MS = 86_400_000;
/** Spec: the friend notes list considers at most the owner's 500 most recent live notes. */
export const NOTES_WINDOW = 500;

/** `exists (member <alias>.id is visible with `group` at `level`)`, as a boolean column expression. */
function memberPasses(
  db: Knex,
  access: Access,
  column: string,
  group: PermissionGroup,
  level: 'read' | 'read_write',
): Knex.QueryBuilder {
  return db('members as w')
    .select(db.raw('1'))
    .whereRaw(`w.id = ${column}`)
    .where(visibleMembers(access, 'w', group, level));
}

function joinMember(q: Knex.QueryBuilder, from: string): Knex.QueryBuilder {
  return q.join('members as m', function () {
    this.on('m.id', '=', `${from}.member_id`).andOn('m.user_id', '=', `${from}.user_id`);
  });
}

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
 * both rules: the list and the single-note checks of PATCH and DELETE read them here. Each link's
 * member is read once and its assignments once.
 */
function noteLinksSql(access: Access, entry: string, memberId?: string): SqlText {
  const level = memberLevelSql(access, 'lm', 'member_notes');
  return {
    sql: `select coalesce(json_agg(json_build_array(k.id, k.name, k.position)) filter (where k.level >= 1), '[]'::json) as members,
        coalesce(bool_or(k.level >= 1${memberId === undefined ? '' : ' and k.id = ?::uuid'}), false) as visible,
        coalesce(bool_and(coalesce(k.level = 2, false)), true) as can_write
      from entry_members em
      left join lateral (
        select lm.id, lm.name, em.position, ${level.sql} as level from members lm
        where lm.id = em.member_id and lm.user_id = ? and lm.deleted_at is null offset 0
      ) k on true
      where em.entry_id = ${entry}`,
    bindings: [...(memberId === undefined ? [] : [memberId]), ...level.bindings, access.ownerId],
  };
}

/** One readable link of noteLinksSql's `members`: member id, name, and the link's position. */
type LinkedMember = [id: string, name: string, position: number];

/** noteLinksSql's `members` in link order, without their position. */
function sortByPosition(members: LinkedMember[] | string): NoteView['members'] {
  const list = typeof members === 'string' ? (JSON.parse(members) as LinkedMember[]) : members;
  return list.sort((x, y) => x[2] - y[2]).map(([id, name]) => ({ id, name }));
}

export const friendActivityRepo = {
  /**
   * The friend's view of the live front in one statement: the open sessions of visible fronters
   * (members_view and front at read) in front order, and the tier presence of visible members in
   * the order it was set, with a custom tier's name; each as a JSON array. The members of both are
   * checked once (the engine's predicate and the avatar's), whatever list they appear in.
   */
  async front(
    db: Knex,
    access: Access,
  ): Promise<{ ok: boolean; sessions: FrontSessionView[]; presence: FrontPresenceView[] }> {
    const member = visibleMembersSql(access, 'm', 'front', 'read');
    const avatar = sectionVisibleSql(access, 'm.id', 'avatar');
    const rest = `open as materialized (
           select s.id, s.member_id, s.note, s.started_at, s.position from front_sessions s
            where s.user_id = ? and s.ended_at is null and s.deleted_at is null
         ), present as materialized (
           select p.member_id, p.tier_key, p.note, p.created_at, t.display_name as custom_display_name
             from front_tier_presence p left join front_custom_tiers t on t.user_id = p.user_id and t.id::text = p.tier_key
            where p.user_id = ?
         ), fm as materialized (
           select m.id, m.name, case when ${avatar.sql} then m.avatar end as avatar from members m
            where m.id in (select member_id from open union select member_id from present)
              and m.user_id = ? and m.deleted_at is null and ${member.sql}
         )
       select (select ok from friend_access) as ok,
        (select coalesce(json_agg(x order by x.ord), '[]'::json) from (
           select s.id, s.member_id, s.note, s.started_at, m.name, m.avatar,
                  row_number() over (order by s.position asc nulls last, s.started_at asc, s.id asc) as ord
             from open s join fm m on m.id = s.member_id) x) as sessions,
        (select coalesce(json_agg(y order by y.ord), '[]'::json) from (
           select p.member_id, p.tier_key, p.note, p.custom_display_name, m.name, m.avatar,
                  row_number() over (order by p.created_at, p.member_id) as ord
             from present p join fm m on m.id = p.member_id) y) as presence`;
    const friendship = friendAccessCte(access, rest);
    const [row] = await runBuilt<{
      ok: boolean;
      sessions: FrontSessionView[] | string;
      presence: FrontPresenceView[] | string;
    }>(db, 'friend_front', {
      sql: `with ${friendship.sql}, ${rest}`,
      bindings: [
        ...friendship.bindings,
        access.ownerId,
        access.ownerId,
        ...avatar.bindings,
        access.ownerId,
        ...member.bindings,
      ],
    });
    if (!row) throw new Error('friend front: the statement returned no row');
    const parse = <T>(v: T[] | string): T[] => (typeof v === 'string' ? (JSON.parse(v) as T[]) : v);
    return { ok: row.ok, sessions: parse(row.sessions), presence: parse(row.presence) };
  },

  /** Every open session (members not in the trash) in front order, with whether the friend sees it. */
  fronters(db: Knex, access: Access): Promise<Array<{ member_id: string; visible: boolean }>> {
    const q = joinMember(db('front_sessions as s'), 's')
      .where('s.user_id', access.ownerId)
      .whereNull('s.ended_at')
      .whereNull('s.deleted_at')
      .whereNull('m.deleted_at');
    return runBuilt(
      db,
      'friend_fronters',
      q
        .select('s.member_id', db.raw('exists (?) as visible', [memberPasses(db, access, 'm.id', 'front', 'read')]))
        .orderByRaw('s.position asc nulls last, s.started_at asc, s.id asc'),
    );
  },

  /**
   * Of `ids`, the owner's live members visible to the friend (members_view; not archived with
   * `active`), each with whether `group` is read_write on it. Ids missing from the answer are
   * unknown, in the trash, archived (with `active`) or hidden: callers answer 404 for all alike.
   */
  membersForWrite(
    db: Knex,
    access: Access,
    ids: readonly string[],
    group: PermissionGroup,
    active: boolean,
  ): Promise<Array<{ id: string; can_write: boolean }>> {
    const q = db('members as m')
      .where('m.user_id', access.ownerId)
      .whereIn('m.id', [...ids])
      .whereNull('m.deleted_at')
      .where(visibleMembers(access, 'm'));
    if (active) q.whereNull('m.archived_at');
    return q.select('m.id', db.raw('exists (?) as can_write', [memberPasses(db, access, 'm.id', group, 'read_write')]));
  },

  /** Live, not archived members with front read_write, by name then id. */
  async frontWritableIds(db: Knex, access: Access): Promise<string[]> {
    const rows: Array<{ id: string }> = await db('members as m')
      .where('m.user_id', access.ownerId)
      .whereNull('m.deleted_at')
      .whereNull('m.archived_at')
      .where(visibleMembers(access, 'm', 'front', 'read_write'))
      .select('m.id')
      .orderBy([{ column: 'm.name' }, { column: 'm.id' }]);
    return rows.map((r) => r.id);
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
    access: Access,
    filter: { startTime?: number; endTime?: number },
    size: number,
    after?: { startedAt: number; id: string },
  ): Promise<{ ok: boolean; rows: HistoryView[]; total: number | null }> {
    const buckets = grantArraySql(access, 'front', 'read');
    const member = visibleMembersSql(access, 'm', 'front', 'read');
    const avatar = sectionVisibleSql(access, 'p.member_id', 'avatar');
    // The walk's bounds on the bucket's index, then the session's own filters. Each walked row's
    // session and member are read and checked by one lateral subquery that cannot be flattened
    // (offset 0), which also carries the page's columns: as a plain join, a plan may turn the walk
    // round (the visible members first, then each one's whole list); as a per-row filter under
    // `order by … limit`, the walk stays on the index in order and stops at the page.
    const walk: string[] = [];
    const walkValues: unknown[] = [];
    if (filter.endTime !== undefined) {
      walk.push('f.started_at <= ?');
      walkValues.push(filter.endTime);
    }
    if (after) {
      // The plain bound on started_at is implied by the row comparison; it is there for the
      // planner, whose estimate of a row comparison alone is far too small.
      walk.push('f.started_at <= ?::bigint and (f.started_at, f.session_id) < (?::bigint, ?::uuid)');
      walkValues.push(after.startedAt, after.startedAt, after.id);
    }
    const session: string[] = ['s.deleted_at is null'];
    const sessionValues: unknown[] = [];
    if (filter.startTime !== undefined) {
      session.push('(s.ended_at is null or s.ended_at >= ?)');
      sessionValues.push(filter.startTime);
    }
    // Without a time filter the spec's count is the owner's live history, which a trigger keeps
    // in front_session_counts (migration 0005): read in the same statement. With one, the caller
    // counts (null here).
    const counted = filter.startTime === undefined && filter.endTime === undefined;
    const rest = `walked as (
         select w.* from unnest(${buckets.sql}) b(id)
         cross join lateral (
           select f.session_id as id, f.started_at, x.member_id, x.ended_at, x.note, x.name, x.avatar from front_session_buckets f
           cross join lateral (
             select s.member_id, s.ended_at, s.note, m.name, m.avatar from front_sessions s join members m on m.id = s.member_id
             where s.id = f.session_id and ${session.join(' and ')} and m.user_id = ? and m.deleted_at is null and ${member.sql} offset 0) x
           where f.bucket_id = b.id${walk.map((w) => ` and ${w}`).join('')}
           order by f.started_at desc, f.session_id desc limit ?
         ) w
       ), page as (
         select distinct on (w.started_at, w.id) w.* from walked w order by w.started_at desc, w.id desc limit ?
       )
       select c.ok, c.total, p.id, p.member_id, p.started_at, p.ended_at, p.note, p.name, case when ${avatar.sql} then p.avatar end as avatar
       from (select (select ok from friend_access) as ok, ${counted ? 'coalesce((select fc.live from front_session_counts fc where fc.user_id = ?), 0)' : 'null::bigint'} as total) c
       left join page p on true
       order by p.started_at desc, p.id desc`;
    const friendship = friendAccessCte(access, rest);
    const rows = await runBuilt<HistoryView & { ok: boolean; total: number | string | null; id: string | null }>(
      db,
      'friend_history_page',
      {
        sql: `with ${friendship.sql}, ${rest}`,
        bindings: [
          ...friendship.bindings,
          ...buckets.bindings,
          ...sessionValues,
          access.ownerId,
          ...member.bindings,
          ...walkValues,
          size + 1,
          size + 1,
          ...avatar.bindings,
          ...(counted ? [access.ownerId] : []),
        ],
      },
    );
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
  async month(
    db: Knex,
    access: Access,
    range: { start: number; end: number; now: number; maxSessions: number },
  ): Promise<
    Array<{
      matched: number | string;
      day: number | string;
      member_id: string;
      ms: number | string;
      sessions: number | string;
    }>
  > {
    const sessions = joinMember(db('front_sessions as s'), 's')
      .where('s.user_id', access.ownerId)
      .whereNull('s.deleted_at')
      .whereNull('m.deleted_at')
      .where(visibleMembers(access, 'm', 'front', 'read'))
      .where('s.started_at', '<=', range.end)
      .where((w) => w.whereNull('s.ended_at').orWhere('s.ended_at', '>=', range.start))
      .select(
        's.member_id',
        db.raw('greatest(s.started_at, ?::bigint) as a', [range.start]),
        db.raw('greatest(s.started_at, ?::bigint, least(coalesce(s.ended_at, ?::bigint), ?::bigint)) as b', [
          range.start,
          range.now,
          range.end,
        ]),
        db.raw('row_number() over (order by s.started_at desc, s.id desc) as rn'),
      )
      .orderBy([
        { column: 's.started_at', order: 'desc' },
        { column: 's.id', order: 'desc' },
      ])
      .limit(range.maxSessions + 1);
    const result = await db.raw(
      `with c as (?)
select (select count(*) from c) as matched, d.n as day, c.member_id, sum(least(c.b, (d.n + 1) * ${DAY_MS}) - greatest(c.a, d.n * ${DAY_MS})) as ms, count(*) as sessions
from c cross join lateral generate_series(c.a / ${DAY_MS}, greatest(c.a / ${DAY_MS}, (c.b - 1) / ${DAY_MS})) as d(n)
where c.rn <= ?
group by d.n, c.member_id
order by d.n, c.member_id`,
      [sessions, range.maxSessions],
    );
    return result.rows;
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
   * must be visible, and the walk stops at `limit` notes. A note listed under a held bucket and
   * visible through another is still visible, so the walk needs only the list index's own columns
   * (an index-only read; with `memberId`, the link's member too). The walks are merged; the page's
   * rows are the walked ones, so no note is read or decided twice.
   */
  async notes(db: Knex, access: Access, limit: number, memberId?: string): Promise<{ ok: boolean; rows: NoteView[] }> {
    const buckets = grantArraySql(access, 'member_notes', 'read');
    const links = noteLinksSql(access, 'le.id', memberId);
    const only = memberId === undefined ? '' : 'and l.member_id = ?::uuid';
    // The window's bound: the list's order is (updated_at desc, id asc), so a link is inside when
    // its note is newer than the last one, or as new with an id not after it. No last note: fewer
    // notes than the window, every link is inside.
    const rest = `last as materialized (
         select e.updated_at, e.id from entries e where e.user_id = ? and e.deleted_at is null
         order by e.updated_at desc, e.id asc offset ? limit 1
       ), page as (
         select distinct on (w.updated_at, w.id) w.*
         from unnest(${buckets.sql}) ub(id)
         cross join lateral (
           select distinct on (l.updated_at, l.entry_id) x.*
           from entry_link_buckets l
           cross join lateral (
             select le.id, le.title, le.content, le.created_at, le.updated_at, n.members, n.can_write
             from entries le cross join lateral (${links.sql}) n
             where le.id = l.entry_id and le.user_id = ? and le.deleted_at is null and n.visible
             offset 0
           ) x
           where l.bucket_id = ub.id
             and l.updated_at >= coalesce((select updated_at from last), '-9223372036854775808'::bigint)
             and (l.updated_at > coalesce((select updated_at from last), '-9223372036854775808'::bigint) or l.entry_id <= (select id from last))
             ${only}
           order by l.updated_at desc, l.entry_id asc
           limit ?
         ) w
         order by w.updated_at desc, w.id asc
         limit ?
       )
       select fa.ok, p.* from friend_access fa left join page p on true
       order by p.updated_at desc, p.id asc`;
    const friendship = friendAccessCte(access, rest);
    const query: SqlText = {
      sql: `with ${friendship.sql}, ${rest}`,
      bindings: [
        ...friendship.bindings,
        access.ownerId,
        NOTES_WINDOW - 1,
        ...buckets.bindings,
        ...links.bindings,
        access.ownerId,
        ...(memberId === undefined ? [] : [memberId]),
        limit,
        limit,
      ],
    };
    const rows = await runBuilt<
      Omit<NoteView, 'members' | 'id'> & { ok: boolean; id: string | null; members: LinkedMember[] | string }
    >(db, 'friend_notes', query);
    return {
      ok: rows[0]?.ok === true,
      rows: rows
        .filter((r): r is typeof r & { id: string } => r.id !== null)
        .map(({ ok: _ok, ...r }) => ({ ...r, members: sortByPosition(r.members) })),
    };
  },

  /** A live note of the owner with whether the friend sees it and may write it (noteLinksSql); undefined when unknown or in the trash. */
  async noteForWrite(db: Knex, access: Access, entryId: string): Promise<NoteForWrite | undefined> {
    const links = noteLinksSql(access, 'e.id');
    const [row] = await runBuilt<NoteForWrite>(db, 'friend_note_for_write', {
      sql: `select e.id, e.member_id, e.member_ids, n.visible, n.can_write
        from entries e cross join lateral (${links.sql}) n where e.id = ? and e.user_id = ? and e.deleted_at is null`,
      bindings: [...links.bindings, entryId, access.ownerId],
    });
    return row;
  },
};

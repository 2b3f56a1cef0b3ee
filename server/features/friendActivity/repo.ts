/**
 * The SQL of the friend activity routes: the owner's front, history and notes as one friend may
 * see them. Every "may this friend see or change this member" is `visibleMembers` from
 * server/access/ (never re-implemented here), applied inside the statement, so hidden rows are
 * never loaded; each read is a constant number of statements whatever the number of rows.
 */
import type { Knex } from 'knex';
import { friendAccessCte, sectionVisibleSql, visibleContentSql, visibleMemberRowsSql, visibleMembers, visibleMembersSql } from '../../access/index.ts';
import type { Access, PermissionGroup } from '../../core/context.ts';
import { runBuilt, type SqlText } from '../../db/prepared.ts';
import type { MemberRow } from '../members/index.ts';

const DAY_MS = 86_400_000;
/** Above this many visible members, a friend's history page walks the owner's history instead of merging per member. */
export const FEW_VISIBLE_MEMBERS = 250;
/** Spec: the friend notes list considers at most the owner's 500 most recent live notes. */
export const NOTES_WINDOW = 500;

/**
 * `<alias>.avatar` when the friend may see that member's avatar (member_avatar on the member, and
 * the `avatar` profile section narrowing it), else null; the member itself is already visible.
 */
function avatarColumn(db: Knex, access: Access, alias: string): Knex.Raw {
  const visible = sectionVisibleSql(access, `${alias}.id`, 'avatar');
  return db.raw(`case when ${visible.sql} then ${alias}.avatar else null end as avatar`, visible.bindings as Knex.Value[]);
}

/** `exists (member <alias>.id is visible with `group` at `level`)`, as a boolean column expression. */
function memberPasses(db: Knex, access: Access, column: string, group: PermissionGroup, level: 'read' | 'read_write'): Knex.QueryBuilder {
  return db('members as w').select(db.raw('1')).whereRaw(`w.id = ${column}`).where(visibleMembers(access, 'w', group, level));
}

function joinMember(db: Knex, q: Knex.QueryBuilder, from: string): Knex.QueryBuilder {
  return q.join('members as m', function () {
    this.on('m.id', '=', `${from}.member_id`).andOn('m.user_id', '=', `${from}.user_id`);
  });
}

export type FriendMemberCols = Pick<MemberRow, 'name' | 'avatar'>;
export type FrontSessionView = FriendMemberCols & { id: string; member_id: string; note: string | null; started_at: number };
export type FrontPresenceView = FriendMemberCols & { member_id: string; tier_key: string; note: string | null; custom_display_name: string | null };
export type HistoryView = FriendMemberCols & { id: string; member_id: string; started_at: number; ended_at: number | null; note: string | null };

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
 * A note's two rules for one friend, over its links (`entry_members`), given the SQL of "this
 * link's member is a live member the friend reads notes of" (members_view and member_notes at
 * read) over a link alias: the note is **visible** when one of its links is readable; the friend
 * **can write** it when every link is readable and its member's own buckets grant member_notes
 * read_write (visibleMembers(…, 'member_notes', 'read_write'), the narrowing being in the read
 * already). The list answers "readable" from its visible set, one note's write check with the
 * engine's predicate; the rules are these, once. `entry` is a constant column.
 */
function noteRules(access: Access, readable: (link: string) => SqlText): { visible(entry: string): SqlText; canWrite(entry: string): SqlText } {
  const writable = visibleContentSql(access, { kind: 'member', column: 'ew.member_id' }, 'member_notes', 'read_write');
  return {
    visible: (entry) => {
      const link = readable('em');
      // One index probe of the note's links (offset 0: flattened, the planner may join every
      // visible member's notes against the list's window instead).
      return { sql: `exists (select 1 from entry_members em where em.entry_id = ${entry} and ${link.sql} offset 0)`, bindings: link.bindings };
    },
    canWrite: (entry) => {
      const link = readable('ew');
      return {
        sql: `not exists (select 1 from entry_members ew where ew.entry_id = ${entry} and not (${link.sql} and ${writable.sql}))`,
        bindings: [...link.bindings, ...writable.bindings],
      };
    },
  };
}

export const friendActivityRepo = {
  /**
   * The friend's view of the live front in one statement: the open sessions of visible fronters
   * (members_view and front at read) in front order, and the tier presence of visible members in
   * the order it was set, with a custom tier's name; each as a JSON array.
   */
  async front(db: Knex, access: Access): Promise<{ ok: boolean; sessions: FrontSessionView[]; presence: FrontPresenceView[] }> {
    const friendship = friendAccessCte(access);
    const member = visibleMembersSql(access, 'm', 'front', 'read');
    const avatar = sectionVisibleSql(access, 'm.id', 'avatar');
    const [row] = await runBuilt<{ ok: boolean; sessions: FrontSessionView[] | string; presence: FrontPresenceView[] | string }>(db, 'friend_front', {
      sql: `with ${friendship.sql} select (select ok from friend_access) as ok,
        (select coalesce(json_agg(x order by x.ord), '[]'::json) from (
           select s.id, s.member_id, s.note, s.started_at, m.name, case when ${avatar.sql} then m.avatar end as avatar,
                  row_number() over (order by s.position asc nulls last, s.started_at asc, s.id asc) as ord
             from front_sessions s join members m on m.id = s.member_id and m.user_id = s.user_id
            where s.user_id = ? and s.ended_at is null and s.deleted_at is null and m.deleted_at is null and ${member.sql}) x) as sessions,
        (select coalesce(json_agg(y order by y.ord), '[]'::json) from (
           select p.member_id, p.tier_key, p.note, t.display_name as custom_display_name, m.name, case when ${avatar.sql} then m.avatar end as avatar,
                  row_number() over (order by p.created_at, p.member_id) as ord
             from front_tier_presence p join members m on m.id = p.member_id and m.user_id = p.user_id
             left join front_custom_tiers t on t.user_id = p.user_id and t.id::text = p.tier_key
            where p.user_id = ? and m.deleted_at is null and ${member.sql}) y) as presence`,
      bindings: [...friendship.bindings, ...avatar.bindings, access.ownerId, ...member.bindings, ...avatar.bindings, access.ownerId, ...member.bindings],
    });
    if (!row) throw new Error('friend front: the statement returned no row');
    const parse = <T>(v: T[] | string): T[] => (typeof v === 'string' ? (JSON.parse(v) as T[]) : v);
    return { ok: row.ok, sessions: parse(row.sessions), presence: parse(row.presence) };
  },

  /** Every open session (members not in the trash) in front order, with whether the friend sees it. */
  fronters(db: Knex, access: Access): Promise<Array<{ member_id: string; visible: boolean }>> {
    const q = joinMember(db, db('front_sessions as s'), 's').where('s.user_id', access.ownerId).whereNull('s.ended_at').whereNull('s.deleted_at').whereNull('m.deleted_at');
    return runBuilt(
      db,
      'friend_fronters',
      q.select('s.member_id', db.raw('exists (?) as visible', [memberPasses(db, access, 'm.id', 'front', 'read')])).orderByRaw('s.position asc nulls last, s.started_at asc, s.id asc'),
    );
  },

  /**
   * Of `ids`, the owner's live members visible to the friend (members_view; not archived with
   * `active`), each with whether `group` is read_write on it. Ids missing from the answer are
   * unknown, in the trash, archived (with `active`) or hidden: callers answer 404 for all alike.
   */
  membersForWrite(db: Knex, access: Access, ids: readonly string[], group: PermissionGroup, active: boolean): Promise<Array<{ id: string; can_write: boolean }>> {
    const q = db('members as m').where('m.user_id', access.ownerId).whereIn('m.id', [...ids]).whereNull('m.deleted_at').where(visibleMembers(access, 'm'));
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
   * cursor, in one statement that picks its plan from how many members the friend sees:
   *
   * - **Few** (at most FEW_VISIBLE_MEMBERS, `n` of them): a top-k merge of the visible members'
   *   newest sessions after the cursor, read in order from front_sessions_member_recent. First
   *   each member's newest k = min(size + 1, 2·⌈(size + 1) / n⌉ + 1) (`top`; a member never needs
   *   more than a page); the (size + 1)-th newest of those is
   *   the `bound` of the page. A member whose k-th row is still newer than the bound may have more
   *   sessions above it (`cut`): only those members read on, from their k-th row down to the bound.
   *   Every other member's sessions at or above the bound are all in `top` already, so the page is
   *   exact. When sessions are spread over the members, few are cut, and the statement reads about
   *   n·k rows (3 per member for 100 members and a page of 50) rather than n·(size + 1); at worst
   *   (one member fronts everything) it reads the cut members' pages, as the plain merge did. The
   *   cost follows the number of visible members, whatever share of the owner's history they front
   *   and however deep the cursor.
   * - **Many**: a walk of the owner's history index (user_id, started_at desc, id desc) in order,
   *   each session's member looked up in the visible set (a hashed subplan: coalesce keeps it from
   *   becoming a join the planner could turn round), stopping at the page. With many visible
   *   members the walk skips few rows.
   *
   * The visible members are one materialized CTE from the engine (visibleMemberRowsSql, driven by
   * the viewer's buckets). The count decides at run time (a one-time filter on each branch), so the
   * statement is one prepared statement either way. Only the page's ids are chosen so; its rows are
   * then read by primary key (lateral, offset 0, so a plan never trades the page's lookups for a
   * scan). `total` is the spec's count when there is no time filter (else null: the caller counts).
   */
  async historyPage(
    db: Knex,
    access: Access,
    filter: { startTime?: number; endTime?: number },
    size: number,
    after?: { startedAt: number; id: string },
  ): Promise<{ ok: boolean; rows: HistoryView[]; total: number | null }> {
    const friendship = friendAccessCte(access);
    const visible = visibleMemberRowsSql(access, 'front', 'read', { columns: 'm.id, m.name, m.avatar' });
    // The filters on a session; the walk adds the account, the merge has it from the members.
    const conditions: string[] = ['s.deleted_at is null'];
    const values: unknown[] = [];
    if (filter.endTime !== undefined) {
      conditions.push('s.started_at <= ?');
      values.push(filter.endTime);
    }
    if (filter.startTime !== undefined) {
      conditions.push('(s.ended_at is null or s.ended_at >= ?)');
      values.push(filter.startTime);
    }
    if (after) {
      // The plain bound on started_at is implied by the row comparison; it is there for the
      // planner, whose estimate of a row comparison alone is far too small (it would then read a
      // member's whole remaining history and sort it rather than walk the index to the page).
      conditions.push('s.started_at <= ?::bigint and (s.started_at, s.id) < (?::bigint, ?::uuid)');
      values.push(after.startedAt, after.startedAt, after.id);
    }
    const sessions = db.raw(conditions.join(' and '), values as Knex.Value[]);
    // Without a time filter the spec's count is the owner's live history, which a trigger keeps
    // in front_session_counts (migration 0005): read in the same statement. With one, the caller
    // counts (null here).
    const counted = filter.startTime === undefined && filter.endTime === undefined;
    const total = counted ? db.raw('coalesce((select fc.live from front_session_counts fc where fc.user_id = ?), 0)', [access.ownerId]) : db.raw('null::bigint');
    const page = db.raw(
      `with ${friendship.sql}, vis as materialized (${visible.sql}), few as (
         select count(*) <= ${FEW_VISIBLE_MEMBERS} as yes, least(?::int, 2 * ((?::int + greatest(count(*), 1) - 1) / greatest(count(*), 1)) + 1) as k
         from (select 1 from vis limit ${FEW_VISIBLE_MEMBERS + 1}) x
       ), top as materialized (
         select s.id, s.started_at, s.member_id, s.rn from vis
         cross join lateral (
           select s.*, row_number() over (order by s.started_at desc, s.id desc) as rn from (
             select s.id, s.started_at, s.member_id from front_sessions s
             where s.member_id = vis.id and ?
             order by s.started_at desc, s.id desc limit (select k from few)
           ) s
         ) s
         where (select yes from few)
       ), bound as (
         select t.started_at, t.id from top t order by t.started_at desc, t.id desc offset ? limit 1
       ), cut as (
         select t.member_id, t.started_at, t.id from top t
         where t.rn = (select k from few) and not exists (select 1 from bound b where (t.started_at, t.id) <= (b.started_at, b.id))
       ), page as (
         select id, started_at from top
         union all
         select s.id, s.started_at from cut c
         cross join lateral (
           select s.id, s.started_at from front_sessions s
           where s.member_id = c.member_id and ? and s.started_at <= c.started_at and (s.started_at, s.id) < (c.started_at, c.id)
             and s.started_at >= coalesce((select b.started_at from bound b), -9223372036854775808)
           order by s.started_at desc, s.id desc limit ?
         ) s
         union all
         (select s.id, s.started_at from front_sessions s
          where s.user_id = ? and ? and not (select yes from few) and coalesce(s.member_id in (select id from vis), false)
          order by s.started_at desc, s.id desc limit ?)
       ), found as (
         select s.id, s.member_id, s.started_at, s.ended_at, s.note, m.name, ?
         from (select id from page order by started_at desc, id desc limit ?) p
         cross join lateral (select s.* from front_sessions s where s.id = p.id offset 0) s
         join vis m on m.id = s.member_id
       )
       select c.ok, c.total, f.* from (select (select ok from friend_access) as ok, ? as total) c left join found f on true
       order by f.started_at desc, f.id desc`,
      [
        ...(friendship.bindings as Knex.Value[]),
        ...(visible.bindings as Knex.Value[]),
        size + 1,
        size + 1,
        sessions,
        size,
        sessions,
        size + 1,
        access.ownerId,
        sessions,
        size + 1,
        avatarColumn(db, access, 'm'),
        size + 1,
        total,
      ],
    );
    const rows = await runBuilt<HistoryView & { ok: boolean; total: number | string | null; id: string | null }>(db, 'friend_history_page', page);
    const first = rows[0];
    return { ok: first?.ok === true, rows: rows.filter((r) => r.id !== null), total: first?.total === null || first?.total === undefined ? null : Number(first.total) };
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
  ): Promise<Array<{ matched: number | string; day: number | string; member_id: string; ms: number | string; sessions: number | string }>> {
    const sessions = joinMember(db, db('front_sessions as s'), 's')
      .where('s.user_id', access.ownerId)
      .whereNull('s.deleted_at')
      .whereNull('m.deleted_at')
      .where(visibleMembers(access, 'm', 'front', 'read'))
      .where('s.started_at', '<=', range.end)
      .where((w) => w.whereNull('s.ended_at').orWhere('s.ended_at', '>=', range.start))
      .select(
        's.member_id',
        db.raw('greatest(s.started_at, ?::bigint) as a', [range.start]),
        db.raw('greatest(s.started_at, ?::bigint, least(coalesce(s.ended_at, ?::bigint), ?::bigint)) as b', [range.start, range.now, range.end]),
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
   * linked member is live and writable. With `memberId`, only notes linking that member, which
   * must itself be readable. One statement.
   */
  async notes(db: Knex, access: Access, limit: number, memberId?: string): Promise<{ ok: boolean; rows: NoteView[] }> {
    const friendship = friendAccessCte(access);
    const visible = visibleMemberRowsSql(access, 'member_notes', 'read');
    // A link is readable when its member is in `vis` (live, members_view, member_notes): a hashed
    // lookup (coalesce keeps it a hashed subplan rather than a join the planner could turn round),
    // after one index probe per note of the window.
    const readable = (alias: string) => `coalesce(${alias}.member_id in (select id from vis), false)`;
    const rules = noteRules(access, (link) => ({ sql: readable(link), bindings: [] }));
    const noteVisible = rules.visible('r.id');
    const canWrite = rules.canWrite('e.id');
    const only = memberId === undefined ? '' : `and exists (select 1 from entry_members ef where ef.entry_id = r.id and ef.member_id = ?::uuid and ${readable('ef')})`;
    const query = db.raw(
      `with ${friendship.sql}, vis as materialized (${visible.sql}), page as (
         select r.id, r.updated_at
         from (
           select e.id, e.updated_at from entries e where e.user_id = ? and e.deleted_at is null
           order by e.updated_at desc, e.id asc limit ?
         ) r
         where ${noteVisible.sql} ${only}
         order by r.updated_at desc, r.id asc limit ?
       )
       select fa.ok, n.* from friend_access fa left join (
         select e.id, e.title, e.content, e.created_at, e.updated_at,
           (select coalesce(json_agg(json_build_object('id', m.id, 'name', m.name) order by em.position), '[]'::json)
              from entry_members em join members m on m.id = em.member_id
             where em.entry_id = e.id and ${readable('em')}) as members,
           ${canWrite.sql} as can_write
         from page p
         cross join lateral (select e.* from entries e where e.id = p.id offset 0) e
       ) n on true
       order by n.updated_at desc, n.id asc`,
      [
        ...(friendship.bindings as Knex.Value[]),
        ...(visible.bindings as Knex.Value[]),
        access.ownerId,
        NOTES_WINDOW,
        ...(noteVisible.bindings as Knex.Value[]),
        ...(memberId === undefined ? [] : [memberId]),
        limit,
        ...(canWrite.bindings as Knex.Value[]),
      ],
    );
    const rows = await runBuilt<Omit<NoteView, 'members' | 'id'> & { ok: boolean; id: string | null; members: NoteView['members'] | string }>(db, 'friend_notes', query);
    return {
      ok: rows[0]?.ok === true,
      rows: rows
        .filter((r): r is typeof r & { id: string } => r.id !== null)
        .map(({ ok: _ok, ...r }) => ({ ...r, members: typeof r.members === 'string' ? (JSON.parse(r.members) as NoteView['members']) : r.members })),
    };
  },

  /** A live note of the owner with whether the friend sees it and may write it (noteRules); undefined when unknown or in the trash. */
  async noteForWrite(db: Knex, access: Access, entryId: string): Promise<NoteForWrite | undefined> {
    // One note: each link's member checked by the engine's predicate (a few probes per link).
    const rules = noteRules(access, (link) => {
      const member = visibleMembersSql(access, 'lm', 'member_notes', 'read');
      return { sql: `exists (select 1 from members lm where lm.id = ${link}.member_id and lm.user_id = ${link}.user_id and lm.deleted_at is null and ${member.sql})`, bindings: member.bindings };
    });
    const visible = rules.visible('e.id');
    const canWrite = rules.canWrite('e.id');
    const [row] = await runBuilt<NoteForWrite>(db, 'friend_note_for_write', {
      sql: `select e.id, e.member_id, e.member_ids, ${visible.sql} as visible, ${canWrite.sql} as can_write
        from entries e where e.id = ? and e.user_id = ? and e.deleted_at is null`,
      bindings: [...visible.bindings, ...canWrite.bindings, entryId, access.ownerId],
    });
    return row;
  },
};

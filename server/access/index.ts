/**
 * Access: the only place that answers "may this actor see or change this owner's content, and at
 * what level". Services receive an `Access` (server/core/context.ts) created here and apply its
 * predicates in SQL, so rows a viewer may not see are never loaded (never filtered in JS).
 *
 * The model (docs/privacy.md):
 * - The owner sees and changes everything of its own (`ownAccount`, `onBehalfOf`).
 * - Another account gets anything only through an **accepted** friendship with no block in either
 *   direction (`forFriend`; otherwise null, which friend routes answer with 404).
 * - Each privacy bucket maps every permission group to none, read or read_write. The friend holds
 *   the buckets the owner assigned to it; a piece of content carries its own buckets. The viewer's
 *   level on that content, per group, is the maximum over the buckets in both sets; no common
 *   bucket means `none` for every group (fail closed: content without buckets is seen by no one).
 * - So that lists filter in the database, a friend access carries, per group, the viewer's buckets
 *   that grant at least read and those that grant read_write (`grants`); content is visible at a
 *   level when one of its buckets is in that list: one indexed EXISTS probe per row
 *   (`visibleContent`, `contentVisibleSql`), or one statement for a page of ids (`contentLevels`).
 */
import type { Knex } from 'knex';
import {
  PERMISSION_GROUPS,
  type Access,
  type KeyActor,
  type PermissionGroup,
  type PermissionLevel,
  type PermissionMap,
} from '../core/context.ts';
import { forbidden, notFound } from '../core/errors.ts';
import { prepared } from '../db/prepared.ts';

/** Content kinds that carry privacy buckets (privacy_bucket_assignments.kind, less `friend`). */
export type ContentKind =
  | 'member'
  | 'group'
  | 'directory'
  | 'custom_field'
  | 'profile_section'
  | 'side_system'
  | 'sub_system'
  | 'member_status';
export const PROFILE_SECTIONS = ['avatar', 'displayName', 'pronouns', 'about', 'profileStyle'] as const;
export type ProfileSection = (typeof PROFILE_SECTIONS)[number];

const RANK: Record<PermissionLevel, number> = { none: 0, read: 1, read_write: 2 };

/** Every group at `none`. */
export function noAccess(): PermissionMap {
  return Object.fromEntries(PERMISSION_GROUPS.map((g) => [g, 'none'])) as PermissionMap;
}

/** Every group at `read_write` (the owner's own view). */
export function fullAccess(): PermissionMap {
  return Object.fromEntries(PERMISSION_GROUPS.map((g) => [g, 'read_write'])) as PermissionMap;
}

/** Reads a stored permission map; a missing or unknown value is `none` (fail closed). */
export function permissionMap(stored: unknown): PermissionMap {
  const map = noAccess();
  if (stored && typeof stored === 'object') {
    for (const group of PERMISSION_GROUPS) {
      const value = (stored as Record<string, unknown>)[group];
      if (value === 'read' || value === 'read_write') map[group] = value;
    }
  }
  return map;
}

/** The per-group maximum of several maps (spec: overlapping buckets merge by the maximum level). */
export function mergeMax(maps: Iterable<PermissionMap>): PermissionMap {
  const merged = noAccess();
  for (const map of maps) {
    for (const group of PERMISSION_GROUPS) {
      if (RANK[map[group]] > RANK[merged[group]]) merged[group] = map[group];
    }
  }
  return merged;
}

export function atLeast(level: PermissionLevel, wanted: Exclude<PermissionLevel, 'none'>): boolean {
  return RANK[level] >= RANK[wanted];
}

/** The owner's own routes: the key's account, everything. */
export function ownAccount(actor: KeyActor): Access {
  return { ownerId: actor.accountId, level: 'owner' };
}

/** The operator (admin API) or a background job acting on one account, with the owner's rights. */
export function onBehalfOf(accountId: string): Access {
  return { ownerId: accountId, level: 'owner' };
}

/** Every column of the row but `ok`, with its aggregate over the held buckets `b`. */
const GRANT_COLUMNS: ReadonlyArray<readonly [name: string, sql: string]> = [
  ['bucket_ids', `coalesce(array_agg(b.id) filter (where b.id is not null), '{}')`],
  ...PERMISSION_GROUPS.flatMap((g) => [
    [
      `${g}_read`,
      `coalesce(array_agg(b.id) filter (where b.friend_permissions ->> '${g}' in ('read', 'read_write')), '{}')`,
    ] as const,
    [
      `${g}_read_write`,
      `coalesce(array_agg(b.id) filter (where b.friend_permissions ->> '${g}' = 'read_write'), '{}')`,
    ] as const,
  ]),
];

/**
 * The friendship and the viewer's grants as one row: the one definition of "who is a friend, with
 * which buckets", for forFriend() and for the statements that resolve the access themselves
 * (friendInStatement, as the CTE `friend_access`, with only the columns its statement reads:
 * friendAccessCte). Three bindings: the owner, the viewer, the owner. `ok` is true when both
 * sides' friendship rows are accepted (a block or a pending or revoked request on either side is
 * not); `bucket_ids` are the owner's buckets assigned to the viewer; per permission group,
 * `<group>_read` and `<group>_read_write` are those of them granting at least that level (a
 * missing or unknown level in a bucket's map is none: fail closed, as permissionMap); and `hidden_system_ids` are the owner's side and sub systems that narrow their
 * members away from this friend: those with buckets of their own, none of them a held bucket
 * granting members_view (docs/privacy.md, "Kinds that narrow"). One short range of the owner's
 * system assignments (the partial index privacy_bucket_assignments_systems), not a probe per member
 * nor a scan of every account's system assignments. The arrays are in no particular order (an ordered
 * aggregate per column would cost a sort each).
 *
 * This is the text for the columns `wanted` (all when undefined), with its bindings' count: the
 * grants take the owner and the viewer, `hidden_system_ids` the owner again (and needs
 * `members_view_read`). `ok` is always there.
 */
function friendAccessSql(wanted?: ReadonlySet<string>): { sql: string; bindings: 2 | 3 } {
  const hidden = wanted === undefined || wanted.has('hidden_system_ids');
  const columns = GRANT_COLUMNS.filter(
    ([name]) => wanted === undefined || wanted.has(name) || (hidden && name === 'members_view_read'),
  );
  const grants = `select ${['count(*) > 0 as ok', ...columns.map(([name, sql]) => `${sql} as ${name}`)].join(',\n  ')}
  from friendships o
  join friendships v on v.user_id = o.friend_user_id and v.friend_user_id = o.user_id and v.status = 'accepted'
  left join privacy_bucket_assignments a on a.kind = 'friend' and a.section_key = '' and a.content_id = o.friend_user_id and a.user_id = o.user_id
  left join privacy_buckets b on b.id = a.bucket_id and b.user_id = o.user_id
  where o.user_id = ?::uuid and o.friend_user_id = ?::uuid and o.status = 'accepted'`;
  if (!hidden) return { sql: grants, bindings: 2 };
  return {
    sql: `select g.*, h.ids as hidden_system_ids from (${grants}) g
  cross join lateral (select array(
    select sa.content_id from privacy_bucket_assignments sa
    where sa.user_id = ?::uuid and sa.kind in ('side_system', 'sub_system')
    group by sa.content_id having not bool_or(sa.bucket_id = any (g.members_view_read))) as ids) h`,
    bindings: 3,
  };
}

const FRIEND_ACCESS_SQL = friendAccessSql().sql;

type FriendAccessRow = { ok: boolean; bucket_ids: string[]; hidden_system_ids: string[] } & Record<
  `${PermissionGroup}_${GrantedLevel}`,
  string[]
>;

const accessForFriend = prepared<FriendAccessRow>('access_for_friend', FRIEND_ACCESS_SQL);

/**
 * The viewer's access to the owner's content, or null when the viewer may see nothing of it: no
 * friendship, a pending or revoked one, a block in either direction, or the viewer is the owner
 * (owner routes use ownAccount). One statement (FRIEND_ACCESS_SQL).
 */
export async function forFriend(db: Knex, viewerId: string, ownerId: string): Promise<Access | null> {
  if (viewerId === ownerId) return null;
  const [row] = await accessForFriend(db, [ownerId, viewerId, ownerId]);
  if (!row?.ok) return null;
  const grants = {} as Record<PermissionGroup, { read: string[]; write: string[] }>;
  for (const g of PERMISSION_GROUPS) grants[g] = { read: row[`${g}_read`], write: row[`${g}_read_write`] };
  return {
    ownerId,
    level: 'friend',
    viewerId,
    bucketIds: row.bucket_ids,
    grants,
    hiddenSystemIds: row.hidden_system_ids,
  };
}

/**
 * A friend access resolved inside the statement that uses it, for the hot friend reads: no
 * statement of its own. The engine's SQL text then reads the viewer's buckets from the CTE
 * `friend_access` (friendAccessCte, the same FRIEND_ACCESS_SQL as forFriend), and the statement
 * answers `ok` with its rows; the caller passes that to requireFriendship() before using them, so
 * no friendship answers 404 with the same body as forFriend's null. The viewer as its own owner is
 * refused here already. JS-side questions (levelsOn, viewerCeiling, bucketsGranting,
 * contentLevels) need the grants and throw for this access: routes that ask them use forFriend.
 */
export function friendInStatement(viewerId: string, ownerId: string): Access {
  if (viewerId === ownerId) requireFriendship(false);
  return { ownerId, level: 'friend', viewerId, inStatement: true };
}

/**
 * The CTE `friend_access` a statement built on the engine's SQL text starts its WITH list with
 * (`with ${cte.sql}, …`), and selects `(select ok from friend_access)` from: for an access resolved
 * in the statement, the friendship and the grants (materialized: read once); for one resolved
 * already, the constant `ok`, since its grants are bound values. `uses` is the rest of the
 * statement's text: the CTE then computes only the columns it reads (the engine's text reads each
 * as `(select <column> from friend_access)`), and the hidden systems only when it reads them.
 * Every aggregate of the row is built anew at each execution, so the full row (22 arrays) cost a
 * tenth of the friend front's statement. A column the text reads in another form is missing: an
 * SQL error in every test of that read, never a different answer. Without `uses`, every column.
 */
export function friendAccessCte(access: Access, uses?: string): SqlPredicate {
  if (access.level !== 'friend') throw new Error('friendAccessCte: a friend access only');
  if (!access.inStatement) return { sql: 'friend_access as (select true as ok)', bindings: [] };
  const wanted =
    uses === undefined
      ? undefined
      : new Set([...uses.matchAll(/\(select ([a-z_]+) from friend_access\)/g)].map((m) => m[1]!));
  const row = friendAccessSql(wanted);
  return {
    sql: `friend_access as materialized (${row.sql})`,
    bindings: [access.ownerId, access.viewerId, ...(row.bindings === 3 ? [access.ownerId] : [])],
  };
}

/** The `ok` a statement read from friend_access: anything but true is no friendship, 404 as for an unknown account. */
export function requireFriendship(ok: unknown): asserts ok is true {
  if (ok !== true) requireVisible(null, 'Friend');
}

/** The friend access, or 404 with the same body as an unknown account (a friend route's first step). */
export async function requireFriend(db: Knex, viewerId: string, ownerId: string): Promise<Access> {
  return requireVisible(await forFriend(db, viewerId, ownerId), 'Friend');
}

function grantsOf(access: Access): NonNullable<Access['grants']> {
  if (access.level !== 'friend' || !access.grants) {
    throw new Error(
      access.inStatement
        ? "this friend access's grants are read inside its statement (friend_access): only the engine's SQL text takes it"
        : 'a friend access without grants',
    );
  }
  return access.grants;
}

/**
 * The viewer's buckets granting `group` at `level`, as an SQL uuid[] expression: one binding for a
 * resolved access, the friend_access column for one resolved in the statement. Friend reads that
 * walk the viewer's buckets themselves (the history's walk of front_session_buckets) take them
 * from here.
 */
export function grantArraySql(access: Access, group: PermissionGroup, level: GrantedLevel): SqlPredicate {
  // The cast makes it an array expression: `= any ((select …))` alone is read as ANY (subquery).
  if (access.inStatement) return { sql: `(select ${group}_${level} from friend_access)::uuid[]`, bindings: [] };
  return { sql: '?::uuid[]', bindings: [[...bucketsGranting(access, group, level)]] };
}

/** Every bucket of the owner's the viewer holds, as an array expression (grantArraySql's forms). */
function heldBucketsSql(access: Access): SqlPredicate {
  if (access.inStatement) return { sql: '(select bucket_ids from friend_access)::uuid[]', bindings: [] };
  return { sql: '?::uuid[]', bindings: [[...(access.bucketIds ?? [])]] };
}

/**
 * The viewer's level per group on content carrying `contentBucketIds`: the owner gets everything,
 * a friend the maximum over the buckets both hold (none when they share none).
 */
export function levelsOn(access: Access, contentBucketIds: Iterable<string>): PermissionMap {
  if (access.level === 'owner') return fullAccess();
  const grants = grantsOf(access);
  const held = new Set(contentBucketIds);
  const map = noAccess();
  for (const group of PERMISSION_GROUPS) {
    if (grants[group].write.some((id) => held.has(id))) map[group] = 'read_write';
    else if (grants[group].read.some((id) => held.has(id))) map[group] = 'read';
  }
  return map;
}

/**
 * The viewer's level per group from its buckets alone, whatever the content: the most any piece of
 * content could grant it. The profile card's tabs use it; content reads always use the
 * content's own buckets (levelsOn, visibleContent).
 */
export function viewerCeiling(access: Access): PermissionMap {
  if (access.level === 'owner') return fullAccess();
  const grants = grantsOf(access);
  const map = noAccess();
  for (const group of PERMISSION_GROUPS)
    map[group] = grants[group].write.length > 0 ? 'read_write' : grants[group].read.length > 0 ? 'read' : 'none';
  return map;
}

/** The viewer's buckets that grant `group` at `level` or more (empty for none). */
export function bucketsGranting(
  access: Access,
  group: PermissionGroup,
  level: Exclude<PermissionLevel, 'none'> = 'read',
): readonly string[] {
  const grants = grantsOf(access);
  return level === 'read_write' ? grants[group].write : grants[group].read;
}

export interface ContentRef {
  kind: ContentKind;
  /** The column (qualified) holding the content id, e.g. `m.id`. */
  column: string;
  /** For `profile_section`: the section. */
  section?: ProfileSection;
}

/**
 * The SQL text of "this row's content carries one of the given buckets", with one `?` binding (a
 * uuid array): for one-statement reads (docs/data-access.md) that put the bucket predicate
 * inside their prepared text. `ref.column` must be a constant column name, never input.
 */
export function contentVisibleSql(ref: ContentRef, buckets = '?::uuid[]'): string {
  return `exists (${assignmentsOf(ref)} and pa.bucket_id = any (${buckets}))`;
}

/** The assignments of the row's content (`select 1 … where …`), validated: columns are constants, never input. */
function assignmentsOf(ref: ContentRef): string {
  if (!/^[a-z_][a-z0-9_]*(\.[a-z_][a-z0-9_]*)?$/.test(ref.column)) throw new Error(`not a column: ${ref.column}`);
  const section = ref.kind === 'profile_section' ? ref.section : '';
  if (section === undefined || !(section === '' || (PROFILE_SECTIONS as readonly string[]).includes(section)))
    throw new Error('a profile section needs its key');
  return `select 1 from privacy_bucket_assignments pa where pa.kind = '${ref.kind}' and pa.content_id = ${ref.column} and pa.section_key = '${section}'`;
}

/** SQL text and its bindings, for a predicate that is also written into text statements. */
interface SqlPredicate {
  sql: string;
  bindings: unknown[];
}

type GrantedLevel = Exclude<PermissionLevel, 'none'>;

/**
 * visibleContent() as SQL text and bindings (for statements written as text): the row's content
 * carries a bucket of the friend granting `group` at `level`. For a friend the text is the same
 * whatever the viewer's buckets (they are the one binding; none matches nothing), so a statement
 * built on it is one prepared statement for every friend (server/db/prepared.ts, runBuilt).
 */
export function visibleContentSql(
  access: Access,
  ref: ContentRef,
  group: PermissionGroup,
  level: GrantedLevel = 'read',
): SqlPredicate {
  if (access.level === 'owner') return { sql: 'true', bindings: [] };
  const granting = grantArraySql(access, group, level);
  return { sql: contentVisibleSql(ref, granting.sql), bindings: granting.bindings };
}

/** narrowedBy() as text: the row's content has no bucket of its own, or one the friend holds granting `group` at `level`. */
function narrowedSql(access: Access, ref: ContentRef, group: PermissionGroup, level: GrantedLevel): SqlPredicate {
  if (access.level === 'owner') return { sql: 'true', bindings: [] };
  const visible = visibleContentSql(access, ref, group, level);
  return { sql: `(not exists (${assignmentsOf(ref)}) or ${visible.sql})`, bindings: visible.bindings };
}

function asPredicate(predicate: SqlPredicate): (qb: Knex.QueryBuilder) => void {
  return (qb) => {
    qb.whereRaw(predicate.sql, predicate.bindings as readonly Knex.RawBinding[]);
  };
}

/**
 * A knex predicate for rows of `ref.kind` the access may see at `level` in `group`:
 * `query.where(visibleContent(access, ref, 'members_view'))`. Owner: every row (the caller still
 * filters on the owner's account). Friend: an EXISTS probe of the row's buckets against the
 * viewer's buckets granting that level; none of those → no row at all.
 */
export function visibleContent(
  access: Access,
  ref: ContentRef,
  group: PermissionGroup,
  level: GrantedLevel = 'read',
): (qb: Knex.QueryBuilder) => void {
  if (access.level === 'owner') return () => {};
  return asPredicate(visibleContentSql(access, ref, group, level));
}

/**
 * A knex predicate for content that **narrows** another's visibility (docs/privacy.md, "Kinds that
 * narrow"): a member's profile section, or the side or sub system a member is in. Content of the
 * kind with no buckets of its own does not narrow (true); once it has buckets, the friend must
 * also hold one of them that grants `group` at `level`. It never widens: callers combine it with
 * the member's own visibleContent(). Owner: always true.
 */
export function narrowedBy(
  access: Access,
  ref: ContentRef,
  group: PermissionGroup,
  level: GrantedLevel = 'read',
): (qb: Knex.QueryBuilder) => void {
  if (access.level === 'owner') return () => {};
  return asPredicate(narrowedSql(access, ref, group, level));
}

/**
 * A knex predicate for the owner's members (table alias `alias`) that the access may see, and at
 * `level` in `group` too when that is not `members_view`: the member's own buckets grant
 * members_view (and the group), and neither its side system nor its sub system narrows it away
 * (docs/privacy.md). It does not filter by account, trash or archive: callers add those. Every
 * friend route that shows or acts on a member goes through this one predicate.
 */
export function visibleMembers(
  access: Access,
  alias: string,
  group: PermissionGroup = 'members_view',
  level: GrantedLevel = 'read',
): (qb: Knex.QueryBuilder) => void {
  if (access.level === 'owner') return () => {};
  return asPredicate(visibleMembersSql(access, alias, group, level));
}

/**
 * visibleMembers() as SQL text and its bindings, for statements written as text (one-statement
 * reads, the friend search). `alias` must be a constant table alias, never input.
 */
export function visibleMembersSql(
  access: Access,
  alias: string,
  group: PermissionGroup = 'members_view',
  level: GrantedLevel = 'read',
): SqlPredicate {
  return memberPredicate(access, alias, group, level, false);
}

/**
 * The side and sub system narrowing of visibleMembers' rule for the member row `alias`: neither
 * the member's side system nor its sub system is one of the access's hidden systems
 * (`hidden_system_ids` of FRIEND_ACCESS_SQL: a system with buckets of its own, none of them a held
 * bucket granting members_view). Two array comparisons per row, no index probe.
 */
function systemsAllowSql(access: Access, alias: string): SqlPredicate {
  const hidden = (): SqlPredicate => {
    if (access.inStatement) return { sql: '(select hidden_system_ids from friend_access)::uuid[]', bindings: [] };
    if (access.level !== 'friend' || !access.hiddenSystemIds)
      throw new Error('a friend access without its hidden systems');
    return { sql: '?::uuid[]', bindings: [[...access.hiddenSystemIds]] };
  };
  const side = hidden();
  const sub = hidden();
  return {
    sql: `((${alias}.side_system_id is null or ${alias}.side_system_id <> all (${side.sql})) and (${alias}.sub_system_id is null or ${alias}.sub_system_id <> all (${sub.sql})))`,
    bindings: [...side.bindings, ...sub.bindings],
  };
}

/**
 * The level at which the access sees the member `alias` in `group` by visibleMembers' rule, as an
 * integer SQL expression: 0 none, 1 read, 2 read_write. `level >= 1` is visibleMembersSql(access,
 * alias, group, 'read') and `level = 2` is the same at read_write (the access tests hold the three
 * to each other); one read of the member's own assignments gives both, for a statement that needs
 * both of the same member. The owner: 2. `alias` must be a constant table alias, never input.
 */
export function memberLevelSql(access: Access, alias: string, group: PermissionGroup): SqlPredicate {
  if (access.level === 'owner') return { sql: '2', bindings: [] };
  const member: ContentRef = { kind: 'member', column: `${alias}.id` };
  const view = grantArraySql(access, 'members_view', 'read');
  const read = grantArraySql(access, group, 'read');
  const write = grantArraySql(access, group, 'read_write');
  const systems = systemsAllowSql(access, alias);
  const own = assignmentsOf(member).replace(/^select 1 /, '');
  return {
    sql: `(select case when not coalesce(bool_or(pa.bucket_id = any (${view.sql})), false) then 0
        when not ${systems.sql} then 0
        when bool_or(pa.bucket_id = any (${write.sql})) then 2
        when bool_or(pa.bucket_id = any (${read.sql})) then 1 else 0 end ${own})`,
    bindings: [...view.bindings, ...systems.bindings, ...write.bindings, ...read.bindings],
  };
}

/**
 * visibleMembersSql(), less the probes of the member's own buckets when the caller's rows already
 * come from the members of the viewer's buckets granting members_view and `group`
 * (visibleMemberRowsSql): then only the narrowing is left of the same rule.
 */
function memberPredicate(
  access: Access,
  alias: string,
  group: PermissionGroup,
  level: GrantedLevel,
  fromGrantingBuckets: boolean,
): SqlPredicate {
  if (access.level === 'owner') return { sql: 'true', bindings: [] };
  const member: ContentRef = { kind: 'member', column: `${alias}.id` };
  const parts: SqlPredicate[] = [];
  if (!fromGrantingBuckets) {
    if (group === 'members_view' && level === 'read')
      parts.push(visibleContentSql(access, member, 'members_view', 'read'));
    else {
      // Both grants from one read of the member's own assignments (one index range, not two probes).
      const view = grantArraySql(access, 'members_view', 'read');
      const own = grantArraySql(access, group, level);
      parts.push({
        sql: `exists (${assignmentsOf(member)} having bool_or(pa.bucket_id = any (${view.sql})) and bool_or(pa.bucket_id = any (${own.sql})))`,
        bindings: [...view.bindings, ...own.bindings],
      });
    }
  }
  parts.push(systemsAllowSql(access, alias));
  return { sql: `(${parts.map((p) => p.sql).join(' and ')})`, bindings: parts.flatMap((p) => p.bindings) };
}

/**
 * The owner's live members a friend access may see (visibleMembers' rule, with `group` at
 * `level`), as the SQL text of a subquery selecting `columns` of `members m` (default `m.id`), for
 * a materialized CTE that a friend read then joins or looks its rows up in. It starts from the
 * viewer's buckets (the assignments' bucket index) and reads each of their members by primary key
 * (lateral, offset 0, so no plan trades those lookups for a scan of the owner's members): its cost
 * follows the members in the viewer's buckets, never the size of the owner's account. `active`
 * leaves archived members out. A friend access only (an owner access throws: the owner's reads
 * need no visible set). `columns` is a constant list of `m.` columns, never input; the rows also
 * carry `held_buckets`, each member's held buckets, for memberSectionsSql.
 */
export function visibleMemberRowsSql(
  access: Access,
  group: PermissionGroup = 'members_view',
  level: GrantedLevel = 'read',
  options: { active?: boolean; columns?: string } = {},
): SqlPredicate {
  const columns = options.columns ?? 'm.id';
  if (!/^m\.(\*|[a-z_]+)(, m\.[a-z_]+)*$/.test(columns))
    throw new Error(`visibleMemberRowsSql: not a column list: ${columns}`);
  const archived = options.active ? ' and m.archived_at is null' : '';
  if (access.level === 'owner')
    throw new Error('visibleMemberRowsSql: a friend access only (the owner reads its members directly)');
  // The members of every held bucket, each with the held buckets it is in (`held_buckets`, which
  // memberSectionsSql reads instead of the member's assignments again), kept when one of
  // those grants members_view (and one grants `group` at `level`): then only the narrowing of
  // visibleMembersSql's rule is left to check. One index read per held bucket (lateral, offset 0):
  // `bucket_id = any (…)` is estimated from the number of distinct buckets on the server, and on a
  // server with few of them a generic plan would read the whole assignments table instead.
  const held = heldBucketsSql(access);
  const grants = [
    grantArraySql(access, 'members_view', 'read'),
    ...(group !== 'members_view' || level !== 'read' ? [grantArraySql(access, group, level)] : []),
  ];
  const member = memberPredicate(access, 'm', group, level, true);
  return {
    sql: `select ${columns.replace(/m\./g, 'vm.')}, vb.held_buckets from (
        select va.content_id, array_agg(ub.id) as held_buckets
        from unnest(${held.sql}) ub(id) cross join lateral (select va.content_id from privacy_bucket_assignments va where va.bucket_id = ub.id and va.kind = 'member' and va.section_key = '' offset 0) va
        group by va.content_id having ${grants.map((g) => `bool_or(ub.id = any (${g.sql}))`).join(' and ')}) vb
      cross join lateral (select m.* from members m where m.id = vb.content_id and m.user_id = ? and m.deleted_at is null${archived} and ${member.sql} offset 0) vm`,
    bindings: [...held.bindings, ...grants.flatMap((g) => g.bindings), access.ownerId, ...member.bindings],
  };
}

/** The group whose level decides whether a friend sees a member's profile section. */
export const SECTION_GROUP: Record<ProfileSection, PermissionGroup> = {
  avatar: 'member_avatar',
  displayName: 'member_profile',
  pronouns: 'member_profile',
  about: 'member_profile',
  profileStyle: 'member_profile',
};

/**
 * "The friend sees this member's profile `section`" as SQL text over the member id `column` (a
 * constant qualified column): the member's own buckets grant the section's group (SECTION_GROUP)
 * and the section's buckets, if it has any, include one granting it too (visibleContent() and
 * narrowedBy()). For a few rows (the fronters); memberSectionsSql answers every section of many
 * members at once. Owner: true.
 */
export function sectionVisibleSql(access: Access, column: string, section: ProfileSection): SqlPredicate {
  if (access.level === 'owner') return { sql: 'true', bindings: [] };
  const granting = grantArraySql(access, SECTION_GROUP[section], 'read');
  const member = assignmentsOf({ kind: 'member', column });
  const own = assignmentsOf({ kind: 'profile_section', column, section });
  // Probes per row (offset 0): as plain EXISTS the planner may hash the answer for every member
  // instead, which reads every assignment granted by those buckets for a page of a few rows.
  return {
    sql: `(exists (${member} and pa.bucket_id = any (${granting.sql}) offset 0) and (not exists (${own} offset 0) or exists (${own} and pa.bucket_id = any (${granting.sql}) offset 0)))`,
    bindings: [...granting.bindings, ...granting.bindings],
  };
}

/**
 * For a friend's read of many members (table alias `alias`, already filtered by visibleMembers,
 * whose rows carry `held_buckets`: the held buckets each member is in, as visibleMemberRowsSql and
 * heldBucketsOfMemberSql give them): a join of a derived table `<as>` with one boolean per profile
 * section, `show_avatar`, `show_displayName` …, true when the friend sees that section: the
 * member's own buckets grant the section's group (SECTION_GROUP: `held_buckets && granting`) and
 * the section's buckets, if it has any, include one granting it too: the rule of visibleContent()
 * and narrowedBy() for each section. `source` is the SQL text selecting the ids of the members
 * read (a materialized CTE of the visible members, `select id from vis`): their profile-section
 * assignments are read in one pass on the assignments' primary key (the ids as one array, so the
 * plan reads them by index whatever the table's statistics) and grouped per member, and every
 * section is answered from them; a member without any is narrowed by none. A friend access only
 * (an owner access throws). `alias`, `source` and `as` are constants, never input.
 */
export function memberSectionsSql(access: Access, alias: string, source: string, as = 'sections'): SqlPredicate {
  if (
    !/^[a-z_][a-z0-9_]*$/.test(alias) ||
    !/^[a-z_][a-z0-9_]*$/.test(as) ||
    !/^select [a-z_][a-z0-9_.]* from [a-z_][a-z0-9_]*$/.test(source)
  ) {
    throw new Error('memberSectionsSql: aliases and source are constants');
  }
  if (access.level === 'owner')
    throw new Error('memberSectionsSql: a friend access only (the owner sees every section)');
  const any = (condition: string) => `coalesce(bool_or(${condition}), false)`;
  const narrowing: string[] = [];
  const outer: string[] = [];
  const narrowingBindings: unknown[] = [];
  const outerBindings: unknown[] = [];
  for (const section of PROFILE_SECTIONS) {
    const granting = grantArraySql(access, SECTION_GROUP[section], 'read');
    const inSection = `pa.section_key = '${section}'`;
    narrowing.push(
      `not ${any(inSection)} or ${any(`${inSection} and pa.bucket_id = any (${granting.sql})`)} as "open_${section}"`,
    );
    narrowingBindings.push(...granting.bindings);
    outer.push(
      `coalesce(${alias}.held_buckets && ${granting.sql}, false) and coalesce(${as}n."open_${section}", true) as "show_${section}"`,
    );
    outerBindings.push(...granting.bindings);
  }
  return {
    sql: `left join (select pa.content_id as member_id, ${narrowing.join(', ')} from privacy_bucket_assignments pa where pa.kind = 'profile_section' and pa.content_id = any (array(${source})) group by pa.content_id) ${as}n on ${as}n.member_id = ${alias}.id
        cross join lateral (select ${outer.join(', ')}) ${as}`,
    bindings: [...narrowingBindings, ...outerBindings],
  };
}

/**
 * The held buckets the member `alias` is in (its own assignments, kind `member`, among the
 * buckets the viewer holds), as a uuid[] expression: the `held_buckets` of visibleMemberRowsSql,
 * for reads that start from a few members (one member, a folder's) and then need
 * memberSectionsSql. `alias` must be a constant table alias, never input.
 */
export function heldBucketsOfMemberSql(access: Access, alias: string): SqlPredicate {
  if (access.level === 'owner') throw new Error('heldBucketsOfMemberSql: a friend access only');
  const held = heldBucketsSql(access);
  return {
    sql: `array(${assignmentsOf({ kind: 'member', column: `${alias}.id` }).replace(/^select 1 /, 'select pa.bucket_id ')} and pa.bucket_id = any (${held.sql}))`,
    bindings: held.bindings,
  };
}

/**
 * The access's level per group on each of `ids` (content of one kind, the owner's), in one
 * statement however many ids: a page of 100 members costs one query, not one per member. Ids the
 * viewer shares no bucket with map to noAccess(); the owner gets fullAccess() without a query.
 */
export async function contentLevels(
  db: Knex,
  access: Access,
  kind: ContentKind,
  ids: readonly string[],
  section?: ProfileSection,
): Promise<Map<string, PermissionMap>> {
  const result = new Map<string, PermissionMap>();
  if (access.level === 'owner') {
    for (const id of ids) result.set(id, fullAccess());
    return result;
  }
  const held = new Map<string, string[]>();
  const viewerBuckets = access.bucketIds ?? [];
  if (ids.length > 0 && viewerBuckets.length > 0) {
    const rows: Array<{ content_id: string; bucket_id: string }> = await db('privacy_bucket_assignments')
      .select('content_id', 'bucket_id')
      .where({ kind, section_key: kind === 'profile_section' ? (section ?? '') : '', user_id: access.ownerId })
      .whereIn('content_id', [...ids])
      .whereIn('bucket_id', [...viewerBuckets]);
    for (const row of rows) held.set(row.content_id, [...(held.get(row.content_id) ?? []), row.bucket_id]);
  }
  for (const id of ids) result.set(id, levelsOn(access, held.get(id) ?? []));
  return result;
}

/**
 * The rule every friend route follows: what the viewer may not see does not exist for it (404,
 * the same answer as for an unknown id), so a response never reveals hidden content.
 */
export function requireVisible<T>(value: T | null | undefined, what: string): T {
  if (value === null || value === undefined) throw notFound(`${what} not found`);
  return value;
}

/**
 * The owner's rights for a friend write that the caller has already authorised through this module
 * (a `read_write` check with visibleMembers or visibleContent): the owner's own services then carry
 * the write out, and the audit record goes to the owner's account with the friend's key as actor.
 * Only a friend access can be delegated, and only friend write routes call this.
 */
export function delegatedWrite(access: Access): Access {
  if (access.level !== 'friend') throw new Error('delegatedWrite: only a checked friend access is delegated');
  return { ownerId: access.ownerId, level: 'owner' };
}

/** Writes are the owner's alone unless a friend route checks a read_write grant itself. */
export function assertCanWrite(access: Access): void {
  if (access.level !== 'owner') throw forbidden("Only the owner may change this account's content");
}

export interface VisibleRowsOptions {
  /** The table alias or name whose `user_id` column holds the owner (default: unqualified). */
  table?: string;
}

/**
 * The account whose rows a one-statement read (docs/data-access.md) may return, for an owner
 * access; such statements filter on `user_id` alone, so a friend access is refused here: friend
 * reads add contentVisibleSql() to their statement instead.
 */
export function ownerRowsOf(access: Access): string {
  if (access.level !== 'owner')
    throw new Error('ownerRowsOf: a friend read must filter by buckets (contentVisibleSql)');
  return access.ownerId;
}

/**
 * A knex predicate for the owner's rows of a table that has a `user_id` column:
 * `query.where(visibleRows(access))`. A friend access is refused: which of the owner's rows a
 * friend sees depends on the content kind and permission group (visibleContent), so no friend
 * read can run unfiltered by mistake.
 */
export function visibleRows(access: Access, options: VisibleRowsOptions = {}): (qb: Knex.QueryBuilder) => void {
  const column = options.table ? `${options.table}.user_id` : 'user_id';
  if (access.level !== 'owner') throw new Error('visibleRows: a friend read must filter by buckets (visibleContent)');
  return (qb) => {
    qb.where(column, access.ownerId);
  };
}

/**
 * The privacy rules in SQL: one fragment (server/db/sql.ts) per rule, which repos put into their
 * statements, so rows a viewer may not see are never loaded. Each takes the Access it filters for
 * and binds its values where it writes them. A friend access resolved in the statement
 * (InStatementFriendAccess) reads the viewer's buckets from the CTE `friend_access` (withFriendAccess);
 * a resolved one (FriendAccess) binds them. The owner passes everything (`true`). The rules: policy.ts
 * and docs/privacy.md.
 */
import type { Knex } from 'knex';
import {
  type Access,
  type FriendAccess,
  type InStatementFriendAccess,
  type OwnerAccess,
  PERMISSION_GROUPS,
  type PermissionGroup,
  type PermissionMap,
  type ResolvedAccess,
} from '../core/context.ts';
import { type Sql, sql } from '../db/sql.ts';
import { EXAMPLE_UUID, statement } from '../db/statements.ts';
import {
  CONTENT_KINDS,
  type ContentKind,
  fullAccess,
  type GrantedLevel,
  levelsOn,
  PROFILE_SECTIONS,
  type ProfileSection,
  SECTION_GROUP,
} from './policy.ts';

type AnyFriend = FriendAccess | InStatementFriendAccess;

/** Example accesses for statements' variants (the text depends on the kind of access, never on its values). */
export const EXAMPLE_ACCESS = {
  owner: { level: 'owner', ownerId: EXAMPLE_UUID },
  friend: {
    level: 'friend',
    inStatement: false,
    ownerId: EXAMPLE_UUID,
    viewerId: EXAMPLE_UUID,
    bucketIds: [],
    grants: Object.fromEntries(
      PERMISSION_GROUPS.map((g) => [g, { read: [], write: [] }]),
    ) as unknown as FriendAccess['grants'],
    hiddenSystemIds: [],
  },
  inStatement: { level: 'friend', inStatement: true, ownerId: EXAMPLE_UUID, viewerId: EXAMPLE_UUID },
} as const satisfies { owner: OwnerAccess; friend: FriendAccess; inStatement: InStatementFriendAccess };

/** A column of the friendship row: `ok`, `bucket_ids`, `<group>_read`, `<group>_read_write`, `hidden_system_ids`. */
export type FriendAccessColumn = 'ok' | 'bucket_ids' | 'hidden_system_ids' | `${PermissionGroup}_${GrantedLevel}`;

const MARK = 'friend_access.';

/**
 * `(select <column> from friend_access)`, marked with the column, so withFriendAccess computes
 * exactly the columns a statement's fragments read.
 */
function friendColumn(column: FriendAccessColumn, asArray = false): Sql {
  const read = asArray
    ? sql`(select ${sql.id(column)} from friend_access)::uuid[]`
    : sql`(select ${sql.id(column)} from friend_access)`;
  return sql.mark(read, MARK + column);
}

/** Every column of the row but `ok`: the columns of friend_grants. */
const GRANT_COLUMNS: readonly FriendAccessColumn[] = [
  'bucket_ids',
  ...PERMISSION_GROUPS.flatMap((g) => [`${g}_read` as const, `${g}_read_write` as const]),
  'hidden_system_ids',
];

/**
 * The friendship and the viewer's grants as one row: the one read of "who is a friend, with which
 * buckets", for forFriend() and for the statements that resolve the access themselves (as the CTE
 * `friend_access`, withFriendAccess). One primary-key read of friend_grants, which triggers keep
 * in the transaction of every change to the friendships, the friend's bucket assignments, the
 * buckets' permission maps and the systems' assignments (migration 0037, where the rule is
 * written), so a revoke or a bucket taken away takes effect with its commit. `ok` is true when the
 * row exists: both sides' friendship rows are accepted (a block or a pending or revoked request on
 * either side is not). `bucket_ids` are the owner's buckets assigned to the viewer; per permission
 * group, `<group>_read` and `<group>_read_write` are those of them granting at least that level (a
 * missing or unknown level in a bucket's map is none: fail closed, as permissionMap); and
 * `hidden_system_ids` are the owner's side and sub systems that narrow their members away from
 * this friend: those with buckets of their own, none of them a held bucket granting members_view
 * (docs/privacy.md, "Kinds that narrow"). Without a friendship every array is empty. The arrays
 * are in no particular order.
 *
 * Only the columns `wanted` (all when undefined) are read.
 */
export function friendAccessRow(ownerId: string, viewerId: string, wanted?: ReadonlySet<FriendAccessColumn>): Sql {
  const columns = GRANT_COLUMNS.filter((name) => wanted === undefined || wanted.has(name));
  const select = sql.join(
    [
      sql`g.owner_id is not null as ok`,
      ...columns.map((name) => sql`coalesce(g.${sql.id(name)}, '{}') as ${sql.id(name)}`),
    ],
    ',\n  ',
  );
  return sql`select ${select}
  from (select 1) as one left join friend_grants g on g.owner_id = ${ownerId}::uuid and g.viewer_id = ${viewerId}::uuid`;
}

type FriendAccessRow = { ok: boolean } & Record<Exclude<FriendAccessColumn, 'ok'>, string[]>;

/** The friendship row with every column (friendAccessRow): what forFriend resolves an access from. */
export const readFriendAccess = statement<{ ownerId: string; viewerId: string }, FriendAccessRow>({
  name: 'access_for_friend',
  area: 'access',
  build: ({ ownerId, viewerId }) => friendAccessRow(ownerId, viewerId),
  variants: { 'every column': { ownerId: EXAMPLE_UUID, viewerId: EXAMPLE_UUID } },
});

/**
 * `with friend_access as …, <body>`: a statement built on the predicates, which starts its WITH
 * list with the CTE `friend_access` and selects `(select ok from friend_access)` (okColumn) with its
 * rows. For an access resolved in the statement, the friendship and the grants (materialized: read
 * once), reading only the columns the body's fragments read (their marks); for one resolved
 * already, the constant `ok`, since its grants are bound values. The caller passes `ok` to
 * requireFriendship() before using the rows. `body` continues the WITH list (`x as (…), … select …`).
 */
export function withFriendAccess(access: AnyFriend, body: Sql): Sql {
  if (!access.inStatement) return sql`with friend_access as (select true as ok), ${body}`;
  const wanted = new Set(
    [...body.marks].filter((m) => m.startsWith(MARK)).map((m) => m.slice(MARK.length) as FriendAccessColumn),
  );
  return sql`with friend_access as materialized (${friendAccessRow(access.ownerId, access.viewerId, wanted)}), ${body}`;
}

/**
 * How many (owner, viewer, page) parameters each hot friend read keeps its built statement for
 * (StatementDefinition.cache): their text is built from these predicates, which costs 10 to 40 µs
 * a request. An entry is the prepared statement and its few values.
 */
export const FRIEND_READ_CACHE = 512;

/** `(select ok from friend_access)`: whether the statement's friendship holds (withFriendAccess). */
export const okColumn: Sql = friendColumn('ok');

/**
 * The viewer's buckets granting `group` at `level`, as a uuid[] expression: a bound value for a
 * resolved access, the friend_access column for one resolved in the statement. Friend reads that
 * walk the viewer's buckets themselves (the history's walk of front_session_buckets) take them here.
 */
export function grantArray(access: AnyFriend, group: PermissionGroup, level: GrantedLevel): Sql {
  // The cast makes it an array expression: `= any ((select …))` alone is read as ANY (subquery).
  if (access.inStatement) return friendColumn(`${group}_${level}`, true);
  const granted = level === 'read_write' ? access.grants[group].write : access.grants[group].read;
  return sql`${[...granted]}::uuid[]`;
}

/** The permission groups of the profile sections, each once (SECTION_GROUP). */
const SECTION_GROUPS = [...new Set(PROFILE_SECTIONS.map((s) => SECTION_GROUP[s]))];
const GRANTS_COLUMNS = SECTION_GROUPS.map((group) => `"grants_${group}"`);
/** The column of a member row saying that one of the member's own buckets grants `group` at read. */
const grantsColumn = (group: PermissionGroup): Sql => sql.constant(`"grants_${group}"`, GRANTS_COLUMNS);

/**
 * The section grants of a member row of `alias` (`alias."grants_member_avatar", …`): what
 * memberSectionsSql reads of each member, as visibleMemberRowsSql and sectionGrantsOfMemberSql give
 * them. `alias` is a constant table alias.
 */
export function sectionGrantColumns(alias: string): Sql {
  return sql.join(
    SECTION_GROUPS.map((g) => sql`${sql.id(alias)}.${grantsColumn(g)}`),
    ', ',
  );
}

/** The hidden systems of the access (friendAccessRow's `hidden_system_ids`), as an array expression. */
function hiddenSystems(access: AnyFriend): Sql {
  if (access.inStatement) return friendColumn('hidden_system_ids', true);
  return sql`${[...access.hiddenSystemIds]}::uuid[]`;
}

export interface ContentRef {
  kind: ContentKind;
  /** The column (qualified) holding the content id, e.g. `m.id`: a constant, checked by sql.id. */
  column: string;
  /** For `profile_section`: the section. */
  section?: ProfileSection;
}

/** The assignments of the row's content, as `select 1 from … where …` (the rest of it for callers that select otherwise). */
function assignmentsWhere(ref: ContentRef): Sql {
  const section = ref.kind === 'profile_section' ? ref.section : '';
  if (section === undefined || !(section === '' || (PROFILE_SECTIONS as readonly string[]).includes(section)))
    throw new Error('a profile section needs its key');
  const kind = sql.constant(ref.kind, CONTENT_KINDS);
  const key = sql.constant(section, ['', ...PROFILE_SECTIONS]);
  return sql`from privacy_bucket_assignments pa where pa.kind = '${kind}' and pa.content_id = ${sql.id(ref.column)} and pa.section_key = '${key}'`;
}

function assignmentsOf(ref: ContentRef): Sql {
  return sql`select 1 ${assignmentsWhere(ref)}`;
}

/** "This row's content carries one of `buckets`" (a uuid[] expression). */
export function contentVisible(ref: ContentRef, buckets: Sql): Sql {
  return sql`exists (${assignmentsOf(ref)} and pa.bucket_id = any (${buckets}))`;
}

/**
 * The row's content carries a bucket of the friend's granting `group` at `level`. For a friend the
 * text is the same whatever the viewer's buckets (they are one bound value; none matches nothing),
 * so a statement built on it is one prepared statement for every friend.
 */
export function visibleContentSql(
  access: Access,
  ref: ContentRef,
  group: PermissionGroup,
  level: GrantedLevel = 'read',
): Sql {
  if (access.level === 'owner') return sql`true`;
  return contentVisible(ref, grantArray(access, group, level));
}

/**
 * The rule for content that **narrows** another's visibility (docs/privacy.md, "Kinds that
 * narrow"): a member's profile section, or the side or sub system a member is in. Content of the
 * kind with no buckets of its own does not narrow (true); once it has buckets, the friend must
 * also hold one of them that grants `group` at `level`. It never widens: callers combine it with
 * the member's own visibleContentSql(). Owner: always true.
 */
export function narrowedSql(
  access: Access,
  ref: ContentRef,
  group: PermissionGroup,
  level: GrantedLevel = 'read',
): Sql {
  if (access.level === 'owner') return sql`true`;
  return sql`(not exists (${assignmentsOf(ref)}) or ${visibleContentSql(access, ref, group, level)})`;
}

/**
 * "One of the member row `alias`'s own buckets is one of `buckets`" (a uuid[] expression): its
 * bucket_ids, which triggers keep equal to the bucket ids of its `member` assignments (migration
 * 0038), so the member rule reads no assignment per row.
 */
function ownBucketIn(alias: string, buckets: Sql): Sql {
  return sql`${sql.id(`${alias}.bucket_ids`)} && ${buckets}`;
}

/**
 * The side and sub system narrowing of the member rule for the member row `alias`: neither the
 * member's side system nor its sub system is one of the access's hidden systems. Two array
 * comparisons per row, no index probe.
 */
function systemsAllow(access: AnyFriend, alias: string): Sql {
  const side = sql.id(`${alias}.side_system_id`);
  const sub = sql.id(`${alias}.sub_system_id`);
  return sql`((${side} is null or ${side} <> all (${hiddenSystems(access)})) and (${sub} is null or ${sub} <> all (${hiddenSystems(access)})))`;
}

/**
 * The member rule over the member row `alias`: its own buckets (ownBucketIn) grant members_view and
 * `group` at `level`, and no hidden system narrows it. Without the members_view half when the
 * caller's rows already come from the viewer's buckets granting it (visibleMemberRowsSql).
 */
function memberPredicate(
  access: AnyFriend,
  alias: string,
  group: PermissionGroup,
  level: GrantedLevel,
  fromViewingBuckets: boolean,
): Sql {
  const parts: Sql[] = [];
  if (!fromViewingBuckets) parts.push(ownBucketIn(alias, grantArray(access, 'members_view', 'read')));
  if (group !== 'members_view' || level !== 'read') parts.push(ownBucketIn(alias, grantArray(access, group, level)));
  parts.push(systemsAllow(access, alias));
  return sql`(${sql.join(parts, ' and ')})`;
}

/**
 * The owner's members (table alias `alias`) that the access may see, and at `level` in `group` too
 * when that is not `members_view`: the member's own buckets grant members_view (and the group), and
 * neither its side system nor its sub system narrows it away (docs/privacy.md). It does not filter
 * by account, trash or archive: callers add those. Every friend route that shows or acts on a
 * member goes through this one predicate. `alias` is a constant table alias.
 */
export function visibleMembersSql(
  access: Access,
  alias: string,
  group: PermissionGroup = 'members_view',
  level: GrantedLevel = 'read',
): Sql {
  if (access.level === 'owner') return sql`true`;
  return memberPredicate(access, alias, group, level, false);
}

/**
 * The level at which the access sees the member `alias` in `group` by the member rule, as an
 * integer SQL expression: 0 none, 1 read, 2 read_write. `level >= 1` is visibleMembersSql(access,
 * alias, group, 'read') and `level = 2` is the same at read_write (the access tests hold the three
 * to each other); one expression gives both, for a statement that needs both of the same member.
 * The owner: 2.
 */
export function memberLevelSql(access: Access, alias: string, group: PermissionGroup): Sql {
  if (access.level === 'owner') return sql`2`;
  return sql`(case when not ${ownBucketIn(alias, grantArray(access, 'members_view', 'read'))} then 0
        when not ${systemsAllow(access, alias)} then 0
        when ${ownBucketIn(alias, grantArray(access, group, 'read_write'))} then 2
        when ${ownBucketIn(alias, grantArray(access, group, 'read'))} then 1 else 0 end)`;
}

/**
 * The owner's live members a friend access may see (the member rule, with `group` at `level`), as a
 * subquery selecting `columns` of `members m` (default `m.id`) and the member's section grants
 * (sectionGrantColumns, for memberSectionsSql), for a friend read to select from or join. It starts
 * from the viewer's buckets granting members_view (the assignments' bucket index), each member
 * once, and reads each by primary key (lateral, offset 0, so no plan trades those lookups for a
 * scan of the owner's members), where the rest of the rule and the section grants are decided from
 * the row's own buckets (bucket_ids): its cost follows the members in those buckets, never the size
 * of the owner's account. `active` leaves archived members out. `columns` are `m.` columns.
 */
export function visibleMemberRowsSql(
  access: AnyFriend,
  group: PermissionGroup = 'members_view',
  level: GrantedLevel = 'read',
  options: { active?: boolean; columns?: readonly string[] } = {},
): Sql {
  const columns = sql.join(
    (options.columns ?? ['id']).map((c) => (c === '*' ? sql`vm.*` : sql.id(`vm.${c}`))),
    ', ',
  );
  const archived = options.active ? sql` and m.archived_at is null` : sql.empty;
  // One index read per granting bucket (lateral, offset 0): `bucket_id = any (…)` is estimated
  // from the number of distinct buckets on the server, and on a server with few of them a generic
  // plan would read the whole assignments table instead. The grants are computed in the member's
  // read (offset 0), once per row: pulled up, they would be computed again at every use.
  return sql`select ${columns}, ${sectionGrantColumns('vm')} from (
        select distinct va.content_id from unnest(${grantArray(access, 'members_view', 'read')}) u(id)
        cross join lateral (select va.content_id from privacy_bucket_assignments va where va.bucket_id = u.id and va.kind = 'member' and va.section_key = '' offset 0) va) vb
      cross join lateral (select m.*, ${sectionGrantsSql(access, 'm')} from members m where m.id = vb.content_id and m.user_id = ${access.ownerId} and m.deleted_at is null${archived} and ${memberPredicate(access, 'm', group, level, true)} offset 0) vm`;
}

/**
 * "The section's own buckets, if it has any, include one of the friend's granting its group"
 * (SECTION_GROUP) over the member id `column` (a constant qualified column): the narrowing half of
 * the section rule, one probe of the section's assignments per row (a scalar subquery, which the
 * planner cannot hash for every member). No buckets of its own: null, so true (it does not
 * narrow); buckets none of which is a granting one of the friend's: false. Owner: true.
 */
export function sectionOpenSql(access: Access, column: string, section: ProfileSection): Sql {
  if (access.level === 'owner') return sql`true`;
  const granting = grantArray(access, SECTION_GROUP[section], 'read');
  const own = assignmentsWhere({ kind: 'profile_section', column, section });
  // Asked once per statement first (an uncorrelated subquery): an owner who gives no member's
  // section buckets of its own narrows nothing, and then no row is probed.
  return sql`(not ${sectionsInUse(access, section)} or coalesce((select bool_or(pa.bucket_id = any (${granting})) ${own}), true))`;
}

/**
 * "The owner gives some member's `section` (any section, without one) buckets of its own": one
 * probe of the owner's profile-section assignments (migration 0034's partial index), for the
 * narrowing of the section rule to skip its per-row probes when nothing can narrow.
 */
function sectionsInUse(access: AnyFriend, section?: ProfileSection): Sql {
  const key =
    section === undefined ? sql.empty : sql` and su.section_key = '${sql.constant(section, PROFILE_SECTIONS)}'`;
  return sql`exists (select 1 from privacy_bucket_assignments su where su.user_id = ${access.ownerId}::uuid and su.kind = 'profile_section'${key})`;
}

/**
 * "The friend sees this member's profile `section`" over the member id `column` (a constant
 * qualified column): the member's own buckets grant the section's group (SECTION_GROUP) and the
 * section's buckets, if it has any, include one granting it too (sectionOpenSql). For a few rows;
 * memberSectionsSql answers every section of many members at once, and memberRuleSql the first
 * half together with the member rule. Owner: true.
 */
export function sectionVisibleSql(access: Access, column: string, section: ProfileSection): Sql {
  if (access.level === 'owner') return sql`true`;
  const granting = grantArray(access, SECTION_GROUP[section], 'read');
  const member = assignmentsOf({ kind: 'member', column });
  // A probe per row (offset 0): as plain EXISTS the planner may hash the answer for every member
  // instead, which reads every assignment granted by those buckets for a page of a few rows.
  return sql`(exists (${member} and pa.bucket_id = any (${granting}) offset 0) and ${sectionOpenSql(access, column, section)})`;
}

/**
 * The member rule and the member's own grant of a profile section, for reads that show a section
 * (the avatar) of the members the rule lets through: a subquery of one row over the member row `alias`, for a lateral join, with the boolean
 * columns `visible` (visibleMembersSql(access, alias, group, level)) and `section_granted` (the
 * member's own buckets grant the section's group at read: the first half of sectionVisibleSql; the
 * caller adds sectionOpenSql before showing it). Owner: both true.
 */
export function memberRuleSql(
  access: Access,
  alias: string,
  group: PermissionGroup,
  level: GrantedLevel,
  section: ProfileSection,
): Sql {
  if (access.level === 'owner') return sql`select true as visible, true as section_granted`;
  return sql`select ${memberPredicate(access, alias, group, level, false)} as visible,
        ${ownBucketIn(alias, grantArray(access, SECTION_GROUP[section], 'read'))} as section_granted`;
}

/**
 * For a friend's read of many members (table alias `alias`, already filtered by the member rule,
 * whose rows carry the section grants, sectionGrantColumns, as visibleMemberRowsSql and
 * sectionGrantsOfMemberSql give them): a join of a derived table `<as>` with one boolean per profile
 * section, `show_avatar`, `show_displayName` …, true when the friend sees that section: the
 * member's own buckets grant the section's group (its grants column) and the section's buckets, if
 * it has any, include one granting it too. `source` selects the ids of the members read (`select id from vis`): their
 * profile-section assignments are read in one pass on the assignments' primary key (the ids as one
 * array, so the plan reads them by index whatever the table's statistics) and grouped per member,
 * and every section is answered from them; a member without any is narrowed by none.
 */
export function memberSectionsSql(access: AnyFriend, alias: string, source: Sql, as = 'sections'): Sql {
  const any = (condition: Sql) => sql`coalesce(bool_or(${condition}), false)`;
  const narrowing: Sql[] = [];
  const outer: Sql[] = [];
  const row = sql.id(alias);
  const n = sql.id(`${as}n`);
  for (const section of PROFILE_SECTIONS) {
    const granting = grantArray(access, SECTION_GROUP[section], 'read');
    const key = sql.constant(section, PROFILE_SECTIONS);
    const inSection = sql`pa.section_key = '${key}'`;
    const open = sql.constant(`"open_${section}"`, OPEN_COLUMNS);
    const show = sql.constant(`"show_${section}"`, SHOW_COLUMNS);
    narrowing.push(
      sql`not ${any(inSection)} or ${any(sql`${inSection} and pa.bucket_id = any (${granting})`)} as ${open}`,
    );
    outer.push(
      sql`coalesce(${row}.${grantsColumn(SECTION_GROUP[section])}, false) and coalesce(${n}.${open}, true) as ${show}`,
    );
  }
  return sql`left join (select pa.content_id as member_id, ${sql.join(narrowing, ', ')} from privacy_bucket_assignments pa where pa.kind = 'profile_section' and pa.content_id = any (array(${source})) and ${sectionsInUse(access)} group by pa.content_id) ${n} on ${n}.member_id = ${row}.id
        cross join lateral (select ${sql.join(outer, ', ')}) ${sql.id(as)}`;
}

const OPEN_COLUMNS = PROFILE_SECTIONS.map((s) => `"open_${s}"`);
const SHOW_COLUMNS = PROFILE_SECTIONS.map((s) => `"show_${s}"`);

/**
 * The section grants of the member `alias` (one of its own buckets grants the group at read, for
 * each group of the profile sections), from its bucket_ids: a one-row subquery for
 * a lateral join whose columns (sectionGrantColumns) are what visibleMemberRowsSql's rows carry,
 * for reads that start from a few members (one member, a folder's) and then need memberSectionsSql.
 */
export function sectionGrantsOfMemberSql(access: AnyFriend, alias: string): Sql {
  return sql`select ${sectionGrantsSql(access, alias)}`;
}

/** The section grant columns (sectionGrantColumns) of the member row `alias`, as a select list. */
function sectionGrantsSql(access: AnyFriend, alias: string): Sql {
  return sql.join(
    SECTION_GROUPS.map((g) => sql`${ownBucketIn(alias, grantArray(access, g, 'read'))} as ${grantsColumn(g)}`),
    ', ',
  );
}

/**
 * The access's level per group on each of `ids` (content of one kind, the owner's), in one
 * statement however many ids: a page of 100 members costs one query, not one per member. Ids the
 * viewer shares no bucket with map to noAccess(); the owner gets fullAccess() without a query.
 */
export async function contentLevels(
  db: Knex,
  access: ResolvedAccess,
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
  if (ids.length > 0 && access.bucketIds.length > 0) {
    const rows = await heldAssignments(db, {
      ownerId: access.ownerId,
      kind,
      sectionKey: kind === 'profile_section' ? (section ?? '') : '',
      ids: [...ids],
      bucketIds: [...access.bucketIds],
    });
    for (const row of rows) held.set(row.content_id, [...(held.get(row.content_id) ?? []), row.bucket_id]);
  }
  for (const id of ids) result.set(id, levelsOn(access, held.get(id) ?? []));
  return result;
}

/** Which of `bucketIds` each of `ids` (content of one kind) is assigned to. */
const heldAssignments = statement<
  { ownerId: string; kind: ContentKind; sectionKey: string; ids: string[]; bucketIds: string[] },
  { content_id: string; bucket_id: string }
>({
  name: 'access_held_assignments',
  area: 'access',
  variants: {
    'ids and held buckets': {
      ownerId: EXAMPLE_UUID,
      kind: 'member',
      sectionKey: '',
      ids: [EXAMPLE_UUID],
      bucketIds: [EXAMPLE_UUID],
    },
  },
  build: ({ ownerId, kind, sectionKey, ids, bucketIds }) =>
    sql`select content_id, bucket_id from privacy_bucket_assignments
      where kind = ${kind}::text and section_key = ${sectionKey}::text and user_id = ${ownerId}::uuid
        and content_id = any(${ids}::uuid[]) and bucket_id = any(${bucketIds}::uuid[])`,
});

/**
 * The account whose rows a one-statement read (docs/data-access.md) may return, for an owner
 * access; such statements filter on `user_id` alone, so a friend access is refused here: friend
 * reads add the bucket predicates to their statement instead.
 */
export function ownerRowsOf(access: Access): string {
  if (access.level !== 'owner') throw new Error('ownerRowsOf: a friend read must filter by buckets (contentVisible)');
  return access.ownerId;
}

/**
 * SQL of the friends area: friendship rows (one per side, migration 0012), the account fields the
 * lists and cards show, suggestions, and the search over a friend's content. Every list is one
 * statement whatever its length; what a friend may see is decided in SQL through server/access/.
 * Every statement is a named statement built with the sql tag, committed as generated/sql/friends.sql.
 */
import { randomUUID } from 'node:crypto';
import type { Knex } from 'knex';
import { EXAMPLE_ACCESS, visibleContentSql, visibleMembersSql } from '../../access/index.ts';
import { grantsReadSql } from '../../access/grants.ts';
import type { FriendAccess } from '../../core/context.ts';
import { type Keyset, keysetAfterSql, keysetOrderSql } from '../../core/keyset.ts';
import { type Sql, sql } from '../../db/sql.ts';
import { EXAMPLE_UUID, statement } from '../../db/statements.ts';
import { type AccountCardRow, accountCardColumns } from './accountCard.ts';

const AREA = 'friends';

export type FriendshipStatus = 'pending' | 'accepted' | 'blocked' | 'revoked';
export type Direction = 'outgoing' | 'incoming';

export interface FriendshipRow {
  id: string;
  user_id: string;
  friend_user_id: string;
  status: FriendshipStatus;
  direction: Direction | null;
  block_reason: string | null;
  created_at: number;
  accepted_at: number | null;
  updated_at: number;
}

/** An account's fields that the friend profile card and the account's own friend-facing profile show. */
export interface AccountProfileRow extends AccountCardRow {
  id: string;
  username: string;
  pronouns: string | null;
  status: string | null;
  timezone: string | null;
  country: string | null;
  about_markdown: string | null;
  banner_url: string | null;
  appear_in_suggestions: boolean;
  updated_at: number;
}

/** A row of the caller's friend list, with the other account's fields (private ones already masked). */
export interface FriendListDbRow extends AccountCardRow {
  id: string;
  friend_user_id: string;
  status: FriendshipStatus;
  direction: Direction | null;
  created_at: number;
  accepted_at: number | null;
  username: string;
  friend_pronouns: string | null;
  friend_status: string | null;
  friend_banner_url: string | null;
  bucket_ids: string[];
}

export interface SuggestionDbRow extends AccountCardRow {
  id: string;
  mutual: number;
  username: string;
}

/** The account card's columns of the accounts row `alias` (./accountCard.ts). */
function accountCardSql(alias: string): Sql {
  return sql.join(
    accountCardColumns(alias).map((column) => sql.id(column)),
    ', ',
  );
}

/** The columns of AccountProfileRow, of the accounts row `a`. */
const PROFILE_COLUMNS = sql`a.id, a.username, ${accountCardSql('a')}, a.pronouns, a.status, a.timezone, a.country, a.about_markdown, a.banner_url, a.appear_in_suggestions, a.updated_at`;

const accountById = statement<{ id: string }, AccountProfileRow>({
  name: 'friends_account',
  area: AREA,
  variants: { 'one account': { id: EXAMPLE_UUID } },
  build: ({ id }) => sql`select ${PROFILE_COLUMNS} from accounts a where a.id = ${id} limit 1`,
});

export async function findAccount(db: Knex, id: string): Promise<AccountProfileRow | undefined> {
  const [row] = await accountById(db, { id });
  return row;
}

const accountByUsername = statement<{ username: string }, { id: string; username: string }>({
  name: 'friends_account_by_username',
  area: AREA,
  variants: { 'a username, any case': { username: 'example' } },
  build: ({ username }) =>
    sql`select a.id, a.username from accounts a where lower(a.username) = lower(${username}::text) limit 1`,
});

export async function findAccountByUsername(
  db: Knex,
  username: string,
): Promise<{ id: string; username: string } | undefined> {
  const [row] = await accountByUsername(db, { username });
  return row;
}

const lockAccounts = statement<{ a: string; b: string }, { id: string }>({
  name: 'friends_lock_pair',
  area: AREA,
  variants: { 'two accounts': { a: EXAMPLE_UUID, b: EXAMPLE_UUID } },
  build: ({ a, b }) => sql`select a.id from accounts a where a.id in (${a}, ${b}) order by a.id for update`,
});

/**
 * Locks both accounts (in id order, so two requests about the same pair never deadlock) for the
 * rest of the transaction: friendship writes about one pair run one at a time. Returns the ids
 * that exist.
 */
export async function lockPair(db: Knex.Transaction, a: string, b: string): Promise<string[]> {
  return (await lockAccounts(db, { a, b })).map((r) => r.id);
}

const pairRows = statement<{ userId: string; otherId: string }, FriendshipRow>({
  name: 'friends_pair',
  area: AREA,
  variants: { 'both sides of a pair': { userId: EXAMPLE_UUID, otherId: EXAMPLE_UUID } },
  build: ({ userId, otherId }) =>
    sql`select f.id, f.user_id, f.friend_user_id, f.status, f.direction, f.block_reason, f.created_at, f.accepted_at, f.updated_at
      from friendships f
     where (f.user_id = ${userId} and f.friend_user_id = ${otherId})
        or (f.user_id = ${otherId} and f.friend_user_id = ${userId})`,
});

/** Both sides' rows of a pair: `mine` is userId's view of otherId, `theirs` the reverse. */
export async function findPair(
  db: Knex,
  userId: string,
  otherId: string,
): Promise<{ mine?: FriendshipRow; theirs?: FriendshipRow }> {
  const rows = await pairRows(db, { userId, otherId });
  return { mine: rows.find((r) => r.user_id === userId), theirs: rows.find((r) => r.user_id === otherId) };
}

export interface RowChange {
  userId: string;
  friendUserId: string;
  status: FriendshipStatus;
  direction?: Direction | null;
  blockReason?: string | null;
  acceptedAt?: number | null;
  /** Start the relationship over: createdAt becomes now (a new request after a revoke, a first block). */
  restart?: boolean;
}

const upsertRow = statement<{ id: string; change: RowChange; now: number }, never>({
  name: 'friends_put_row',
  area: AREA,
  variants: {
    'one side (created_at kept or restarted)': {
      id: EXAMPLE_UUID,
      change: { userId: EXAMPLE_UUID, friendUserId: EXAMPLE_UUID, status: 'pending', restart: true },
      now: 0,
    },
  },
  build: ({ id, change, now }) =>
    sql`insert into friendships (id, user_id, friend_user_id, status, direction, block_reason, created_at, accepted_at, updated_at)
    values (${id}, ${change.userId}, ${change.friendUserId}, ${change.status}, ${change.direction ?? null}, ${change.blockReason ?? null}, ${now}, ${change.acceptedAt ?? null}, ${now})
    on conflict (user_id, friend_user_id) do update set
      status = excluded.status,
      direction = excluded.direction,
      block_reason = excluded.block_reason,
      accepted_at = excluded.accepted_at,
      updated_at = excluded.updated_at,
      created_at = case when ${change.restart === true}::boolean then excluded.created_at else friendships.created_at end`,
});

/** Writes one side's row: inserts it, or updates the existing one (the row id never changes). */
export async function putRow(db: Knex, change: RowChange, now: number): Promise<void> {
  await upsertRow(db, { id: randomUUID(), change, now });
}

const revokeOne = statement<{ userId: string; friendUserId: string; now: number }, never>({
  name: 'friends_revoke_row',
  area: AREA,
  variants: { 'one side': { userId: EXAMPLE_UUID, friendUserId: EXAMPLE_UUID, now: 0 } },
  build: ({ userId, friendUserId, now }) =>
    sql`update friendships
       set status = 'revoked', direction = null, block_reason = null, accepted_at = null, updated_at = ${now}
     where user_id = ${userId} and friend_user_id = ${friendUserId}`,
});

/** Sets one existing side's row to revoked (nothing when the row does not exist). */
export async function revokeRow(db: Knex, userId: string, friendUserId: string, now: number): Promise<void> {
  await revokeOne(db, { userId, friendUserId, now });
}

const forgetBuckets = statement<{ a: string; b: string }, never>({
  name: 'friends_forget_buckets',
  area: AREA,
  variants: { 'both sides of a pair': { a: EXAMPLE_UUID, b: EXAMPLE_UUID } },
  build: ({ a, b }) =>
    sql`delete from privacy_bucket_assignments
     where kind = 'friend'
       and ((user_id = ${a} and content_id = ${b}) or (user_id = ${b} and content_id = ${a}))`,
});

/** Removes the buckets each side assigned to the other (a later friendship starts from the defaults). */
export async function forgetFriendBuckets(db: Knex, a: string, b: string): Promise<void> {
  await forgetBuckets(db, { a, b });
}

/**
 * The caller's rows with the other account's fields, those `where` keeps, in `order`. The other's
 * pronouns, status and banner show only when it grants the caller friend_data at read
 * (server/access/grants.ts), decided in the same statement for every row.
 */
function listSql(userId: string, where: Sql, order: Sql): Sql {
  return sql`select f.id, f.friend_user_id, f.status, f.direction, f.created_at, f.accepted_at,
         a.username, ${accountCardSql('a')},
         case when g.shown then a.pronouns end as friend_pronouns,
         case when g.shown then a.status end as friend_status,
         case when g.shown then a.banner_url end as friend_banner_url,
         coalesce((select array_agg(pa.bucket_id::text order by pb.created_at, pb.id)
                     from privacy_bucket_assignments pa
                     join privacy_buckets pb on pb.id = pa.bucket_id and pb.user_id = f.user_id
                    where pa.kind = 'friend' and pa.section_key = '' and pa.user_id = f.user_id and pa.content_id = f.friend_user_id), '{}') as bucket_ids
    from friendships f
    join accounts a on a.id = f.friend_user_id
    cross join lateral (select ${grantsReadSql('friend_data', 'f.friend_user_id', 'f.user_id')} as shown) g
   where f.user_id = ${userId}${where}
   ${order}`;
}

const statusSql = (status: FriendshipStatus | null): Sql =>
  status === null ? sql.empty : sql` and f.status = ${status}`;

/** Which of the caller's rows a list shows: all, those of one status, or the incoming requests. */
export type ListFilter = { kind: 'all' } | { kind: 'status'; status: FriendshipStatus } | { kind: 'incoming' };

const listStatement = statement<{ userId: string; filter: ListFilter }, FriendListDbRow>({
  name: 'friends_list',
  area: AREA,
  variants: {
    'every row': { userId: EXAMPLE_UUID, filter: { kind: 'all' } },
    'one status': { userId: EXAMPLE_UUID, filter: { kind: 'status', status: 'accepted' } },
    'the incoming requests': { userId: EXAMPLE_UUID, filter: { kind: 'incoming' } },
  },
  build: ({ userId, filter }) =>
    listSql(
      userId,
      filter.kind === 'all'
        ? sql.empty
        : filter.kind === 'status'
          ? statusSql(filter.status)
          : sql` and f.status = 'pending' and f.direction = 'incoming'`,
      sql`order by f.created_at, f.id`,
    ),
});

export async function listRows(db: Knex, userId: string, filter: ListFilter): Promise<FriendListDbRow[]> {
  return listStatement(db, { userId, filter });
}

/** Keyset order of the friends page: the friendships_page index (user_id, created_at, id). */
const PAGE_KEYSET: Keyset = {
  columns: [
    { sql: sql`f.created_at`, type: 'bigint' },
    { sql: sql`f.id`, type: 'uuid' },
  ],
  direction: 'asc',
};

export interface PageFilter {
  status: FriendshipStatus | null;
  /** Case-insensitive text the display name or username contains; null for any. */
  query: string | null;
}

/**
 * A page of the caller's rows. The status is a shape of the text (with it, the friendships_list
 * index (user_id, status, created_at, id) walks just that status); the query is one condition
 * whatever its value (null passes every row), as it only filters the joined account.
 */
const pageStatement = statement<
  { userId: string; filter: PageFilter; limit: number; after: [number, string] | null },
  FriendListDbRow
>({
  name: 'friends_page',
  area: AREA,
  variants: {
    'first page': { userId: EXAMPLE_UUID, filter: { status: null, query: 'x' }, limit: 1, after: null },
    'first page, one status': {
      userId: EXAMPLE_UUID,
      filter: { status: 'accepted', query: 'x' },
      limit: 1,
      after: null,
    },
    'after a cursor': {
      userId: EXAMPLE_UUID,
      filter: { status: null, query: 'x' },
      limit: 1,
      after: [0, EXAMPLE_UUID],
    },
    'after a cursor, one status': {
      userId: EXAMPLE_UUID,
      filter: { status: 'accepted', query: 'x' },
      limit: 1,
      after: [0, EXAMPLE_UUID],
    },
  },
  build: ({ userId, filter: { status, query }, limit, after }) =>
    listSql(
      userId,
      sql`${statusSql(status)}
     and (${query}::text is null or strpos(lower(a.display_name), lower(${query}::text)) > 0 or strpos(lower(a.username), lower(${query}::text)) > 0)${
       after === null
         ? sql.empty
         : sql`
     and ${keysetAfterSql(PAGE_KEYSET, after)}`
     }`,
      keysetOrderSql(PAGE_KEYSET, limit),
    ),
});

/** A page of the caller's rows in createdAt order: `limit + 1` rows after the cursor's key (core/keyset.ts). */
export async function pageRows(
  db: Knex,
  userId: string,
  filter: PageFilter,
  limit: number,
  after?: [number, string],
): Promise<FriendListDbRow[]> {
  return pageStatement(db, { userId, filter, limit, after: after ?? null });
}

/**
 * Friends of the caller's accepted friends (accepted both ways at each hop), without the caller,
 * anyone it has a row with in either direction (so any block either way), and accounts that opted
 * out; with the number of mutual friends. One statement.
 */
const suggestionsStatement = statement<{ userId: string; limit: number }, SuggestionDbRow>({
  name: 'friends_suggestions',
  area: AREA,
  variants: { 'an account': { userId: EXAMPLE_UUID, limit: 1 } },
  build: ({ userId: me, limit }) =>
    sql`with mine as (
       select f.friend_user_id as id
         from friendships f
         join friendships r on r.user_id = f.friend_user_id and r.friend_user_id = f.user_id and r.status = 'accepted'
        where f.user_id = ${me} and f.status = 'accepted'
     ), candidates as (
       select g.friend_user_id as id, count(*)::int as mutual
         from mine
         join friendships g on g.user_id = mine.id and g.status = 'accepted'
         join friendships gr on gr.user_id = g.friend_user_id and gr.friend_user_id = g.user_id and gr.status = 'accepted'
        where g.friend_user_id <> ${me}
          and not exists (select 1 from friendships x where x.user_id = ${me} and x.friend_user_id = g.friend_user_id)
          and not exists (select 1 from friendships y where y.user_id = g.friend_user_id and y.friend_user_id = ${me})
        group by g.friend_user_id
     )
     select a.id, c.mutual, a.username, ${accountCardSql('a')}
       from candidates c
       join accounts a on a.id = c.id
      where a.appear_in_suggestions
      order by c.mutual desc, lower(a.username) collate "C", a.id
      limit ${limit}`,
});

export async function suggestions(db: Knex, userId: string, limit: number): Promise<SuggestionDbRow[]> {
  return suggestionsStatement(db, { userId, limit });
}

export interface ProfileChanges {
  pronouns?: string | null;
  status?: string | null;
  timezone?: string | null;
  country?: string | null;
  about_markdown?: string | null;
  banner_url?: string | null;
  image_url?: string | null;
  appear_in_suggestions?: boolean;
}

const TEXT_FIELDS = [
  'pronouns',
  'status',
  'timezone',
  'country',
  'about_markdown',
  'banner_url',
  'image_url',
] as const satisfies ReadonlyArray<keyof ProfileChanges>;

/**
 * One text for every subset of the fields: each column takes its new value when `changes` has one
 * (null clears it) and keeps its own otherwise.
 */
const updateProfile = statement<{ userId: string; changes: ProfileChanges; now: number }, AccountProfileRow>({
  name: 'friends_update_profile',
  area: AREA,
  variants: { 'any subset of the fields': { userId: EXAMPLE_UUID, changes: { pronouns: 'x' }, now: 0 } },
  build: ({ userId, changes, now }) => {
    const texts = TEXT_FIELDS.map((field) => {
      const column = sql.id(field);
      const value = changes[field];
      return sql`${column} = case when ${value !== undefined}::boolean then ${value ?? null}::text else ${sql.id(`a.${field}`)} end`;
    });
    const appear = changes.appear_in_suggestions;
    return sql`update accounts a
       set ${sql.join(texts, ',\n           ')},
           appear_in_suggestions = case when ${appear !== undefined}::boolean then ${appear ?? null}::boolean else a.appear_in_suggestions end,
           updated_at = ${now}
     where a.id = ${userId}
     returning ${PROFILE_COLUMNS}`;
  },
});

/** Sets the fields `changes` has on the account; its row after the change (undefined when there is no such account). */
export async function updateAccountProfile(
  db: Knex,
  userId: string,
  changes: ProfileChanges,
  now: number,
): Promise<AccountProfileRow | undefined> {
  const [row] = await updateProfile(db, { userId, changes, now });
  return row;
}

// ---- Search over a friend's content -------------------------------------------------------------

/** Bucket ids the viewer holds that grant read on a group (server/access bucketsGranting). */
export interface SearchRows {
  members: Array<{ id: string; name: string }>;
  notes: Array<{ id: string; title: string | null; member_ids: string[] }>;
  groups: Array<{ id: string; kind: 'group' | 'folder'; name: string }>;
}

/**
 * One statement for the three result types. `tsquery` (prefix terms joined with &) filters with the
 * GIN expression indexes of migration 0012; null lists everything visible (the catalog). Members
 * are those the member rule lets the friend see; groups and folders need `groups`; a note needs a
 * live linked member visible with member_notes too, and lists only such members.
 */
const friendSearch = statement<
  {
    access: FriendAccess;
    tsquery: string | null;
    limits: { members: number; notes: number; groups: number };
  },
  { members: unknown; notes: unknown; groups: unknown }
>({
  name: 'friend_search',
  area: AREA,
  variants: {
    'a search': { access: EXAMPLE_ACCESS.friend, tsquery: 'x:*', limits: { members: 1, notes: 1, groups: 1 } },
    'the catalog (everything visible)': {
      access: EXAMPLE_ACCESS.friend,
      tsquery: null,
      limits: { members: 1, notes: 1, groups: 1 },
    },
  },
  build: ({ access, tsquery, limits }) => {
    const match = (expr: Sql) =>
      tsquery === null ? sql.empty : sql`and to_tsvector('simple', ${expr}) @@ to_tsquery('simple', ${tsquery})`;
    const noteMember = (em: string, m: string) =>
      sql`${sql.id(`${m}.id`)} = ${sql.id(`${em}.member_id`)} and ${sql.id(`${m}.user_id`)} = ${access.ownerId} and ${sql.id(`${m}.deleted_at`)} is null and ${visibleMembersSql(access, m, 'member_notes')}`;
    const groups = visibleContentSql(access, { kind: 'group', column: 'd.id' }, 'groups');
    const folders = visibleContentSql(access, { kind: 'directory', column: 'd.id' }, 'groups');
    return sql`select
    (select coalesce(json_agg(json_build_object('id', x.id, 'name', x.name) order by x.k, x.id), '[]'::json)
       from (select m.id, m.name, lower(m.name) collate "C" as k
               from members m
              where m.user_id = ${access.ownerId} and m.deleted_at is null ${match(sql`m.name`)}
                and ${visibleMembersSql(access, 'm')}
              order by k, m.id
              limit ${limits.members}) x) as members,
    (select coalesce(json_agg(json_build_object('id', x.id, 'title', x.title, 'member_ids', x.member_ids) order by x.k, x.id), '[]'::json)
       from (select e.id, e.title, lower(coalesce(e.title, '')) collate "C" as k,
                    (select json_agg(em.member_id order by em.position, em.member_id)
                       from entry_members em, members m
                      where em.entry_id = e.id and ${noteMember('em', 'm')}) as member_ids
               from entries e
              where e.user_id = ${access.ownerId} and e.deleted_at is null ${match(sql`coalesce(e.title, '') || ' ' || e.content`)}
                and exists (select 1 from entry_members em2, members m2 where em2.entry_id = e.id and ${noteMember('em2', 'm2')})
              order by k, e.id
              limit ${limits.notes}) x) as notes,
    (select coalesce(json_agg(json_build_object('id', x.id, 'kind', x.kind, 'name', x.name) order by x.k, x.id), '[]'::json)
       from (select d.id, d.kind, d.name, lower(d.name) collate "C" as k
               from directories d
              where d.user_id = ${access.ownerId} and d.deleted_at is null ${match(sql`d.name`)}
                and ((d.kind = 'group' and ${groups}) or (d.kind = 'folder' and ${folders}))
              order by k, d.id
              limit ${limits.groups}) x) as groups`;
  },
});

export async function searchContent(
  db: Knex,
  access: FriendAccess,
  tsquery: string | null,
  limits: { members: number; notes: number; groups: number },
): Promise<SearchRows> {
  const [row] = await friendSearch(db, { access, tsquery, limits });
  if (!row) throw new Error('friend search: the statement returned no row');
  const parse = <T>(v: unknown): T => (typeof v === 'string' ? JSON.parse(v) : v) as T;
  return { members: parse(row.members), notes: parse(row.notes), groups: parse(row.groups) };
}

/**
 * Members of the access's owner whose name matches `tsquery` (the members_search index) and that
 * the friend may see with members_view at read, by name: GET /friends/search/members.
 */
const searchMembersStatement = statement<
  { access: FriendAccess; tsquery: string; limit: number },
  { id: string; name: string }
>({
  name: 'friends_search_members',
  area: AREA,
  variants: { 'a search': { access: EXAMPLE_ACCESS.friend, tsquery: 'x:*', limit: 1 } },
  build: ({ access, tsquery, limit }) =>
    sql`select m.id, m.name
      from members m
     where m.user_id = ${access.ownerId} and m.deleted_at is null
       and to_tsvector('simple', m.name) @@ to_tsquery('simple', ${tsquery})
       and ${visibleMembersSql(access, 'm')}
     order by lower(m.name) collate "C", m.id
     limit ${limit}`,
});

export async function searchMembers(
  db: Knex,
  access: FriendAccess,
  tsquery: string,
  limit: number,
): Promise<Array<{ id: string; name: string }>> {
  return searchMembersStatement(db, { access, tsquery, limit });
}

/** The accounts `userId` has an accepted friendship with (both sides accepted). */
const acceptedIds = statement<{ userId: string }, { id: string }>({
  name: 'friends_accepted_ids',
  area: AREA,
  variants: { one: { userId: EXAMPLE_UUID } },
  build: ({ userId }) => sql`
    select f.friend_user_id as id from friendships f
    join friendships r on r.user_id = f.friend_user_id and r.friend_user_id = f.user_id and r.status = 'accepted'
    where f.user_id = ${userId} and f.status = 'accepted'`,
});

export async function acceptedIdsOf(db: Knex, userId: string): Promise<string[]> {
  return (await acceptedIds(db, { userId })).map((r) => r.id);
}

/**
 * SQL of the friends area: friendship rows (one per side, migration 0012), the account fields the
 * lists and cards show, suggestions, and the search over a friend's content. Every list is one
 * statement whatever its length; what a friend may see is decided in SQL through server/access/.
 */
import { randomUUID } from 'node:crypto';
import type { Knex } from 'knex';
import { EXAMPLE_ACCESS, visibleContentSql, visibleMembers, visibleMembersSql } from '../../access/index.ts';
import type { Access, FriendAccess } from '../../core/context.ts';
import { type Sql, sql, toKnex } from '../../db/sql.ts';
import { statement } from '../../db/statements.ts';
import { grantsReadSql } from '../../access/grants.ts';
import { keysetPage, type Keyset } from '../../core/keyset.ts';

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

/** An account's fields that friend lists and cards show. */
export interface AccountCardRow {
  id: string;
  username: string;
  display_name: string;
  image_url: string | null;
  pronouns: string | null;
  status: string | null;
  timezone: string | null;
  country: string | null;
  about_markdown: string | null;
  banner_url: string | null;
  is_admin: boolean;
  plan: 'free' | 'pro' | 'pro_plus';
  donor_supporter_unlocked: boolean;
  closed_beta_participant_at: number | null;
  appear_in_suggestions: boolean;
  updated_at: number;
}

/** A row of the caller's friend list, with the other account's fields (private ones already masked). */
export interface FriendListDbRow {
  id: string;
  friend_user_id: string;
  status: FriendshipStatus;
  direction: Direction | null;
  created_at: number;
  accepted_at: number | null;
  username: string;
  display_name: string;
  image_url: string | null;
  friend_pronouns: string | null;
  friend_status: string | null;
  friend_banner_url: string | null;
  is_admin: boolean;
  plan: 'free' | 'pro' | 'pro_plus';
  donor_supporter_unlocked: boolean;
  closed_beta_participant_at: number | null;
  bucket_ids: string[];
}

export interface SuggestionDbRow {
  id: string;
  mutual: number;
  username: string;
  display_name: string;
  image_url: string | null;
  is_admin: boolean;
  plan: 'free' | 'pro' | 'pro_plus';
  donor_supporter_unlocked: boolean;
  closed_beta_participant_at: number | null;
}

const ACCOUNT_COLUMNS = [
  'id',
  'username',
  'display_name',
  'image_url',
  'pronouns',
  'status',
  'timezone',
  'country',
  'about_markdown',
  'banner_url',
  'is_admin',
  'plan',
  'donor_supporter_unlocked',
  'closed_beta_participant_at',
  'appear_in_suggestions',
  'updated_at',
] as const;

export async function findAccount(db: Knex, id: string): Promise<AccountCardRow | undefined> {
  return db('accounts').where({ id }).first(ACCOUNT_COLUMNS);
}

export async function findAccountByUsername(
  db: Knex,
  username: string,
): Promise<{ id: string; username: string } | undefined> {
  return db('accounts').whereRaw('lower(username) = lower(?)', [username]).first('id', 'username');
}

/**
 * Locks both accounts (in id order, so two requests about the same pair never deadlock) for the
 * rest of the transaction: friendship writes about one pair run one at a time. Returns the ids
 * that exist.
 */
export async function lockPair(db: Knex.Transaction, a: string, b: string): Promise<string[]> {
  const rows: Array<{ id: string }> = await db('accounts').whereIn('id', [a, b]).orderBy('id').forUpdate().select('id');
  return rows.map((r) => r.id);
}

/** Both sides' rows of a pair: `mine` is userId's view of otherId, `theirs` the reverse. */
export async function findPair(
  db: Knex,
  userId: string,
  otherId: string,
): Promise<{ mine?: FriendshipRow; theirs?: FriendshipRow }> {
  const rows: FriendshipRow[] = await db('friendships')
    .where({ user_id: userId, friend_user_id: otherId })
    .orWhere({ user_id: otherId, friend_user_id: userId })
    .select();
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

/** Writes one side's row: inserts it, or updates the existing one (the row id never changes). */
export async function putRow(db: Knex, change: RowChange, now: number): Promise<void> {
  const row = {
    id: randomUUID(),
    user_id: change.userId,
    friend_user_id: change.friendUserId,
    status: change.status,
    direction: change.direction ?? null,
    block_reason: change.blockReason ?? null,
    created_at: now,
    accepted_at: change.acceptedAt ?? null,
    updated_at: now,
  };
  const merged = [
    'status',
    'direction',
    'block_reason',
    'accepted_at',
    'updated_at',
    ...(change.restart ? ['created_at'] : []),
  ];
  await db('friendships').insert(row).onConflict(['user_id', 'friend_user_id']).merge(merged);
}

/** Sets one existing side's row to revoked (nothing when the row does not exist). */
export async function revokeRow(db: Knex, userId: string, friendUserId: string, now: number): Promise<void> {
  await db('friendships')
    .where({ user_id: userId, friend_user_id: friendUserId })
    .update({ status: 'revoked', direction: null, block_reason: null, accepted_at: null, updated_at: now });
}

/** Removes the buckets each side assigned to the other (a later friendship starts from the defaults). */
export async function forgetFriendBuckets(db: Knex, a: string, b: string): Promise<void> {
  await db('privacy_bucket_assignments')
    .where({ kind: 'friend' })
    .andWhere((q) => q.where({ user_id: a, content_id: b }).orWhere({ user_id: b, content_id: a }))
    .delete();
}

/** `g.shown`: whether the row's friend grants the caller friend_data at read (grants.ts). */
const SHOWN = toKnex(
  sql`cross join lateral (select ${grantsReadSql('friend_data', 'f.friend_user_id', 'f.user_id')} as shown) g`,
);

/**
 * The caller's rows with the other account's fields. The other's pronouns, status and banner show
 * only when it grants the caller friend_data at read (server/access/grants.ts), decided in the
 * same statement for every row.
 */
function listQuery(db: Knex, userId: string): Knex.QueryBuilder {
  return db('friendships as f')
    .join('accounts as a', 'a.id', 'f.friend_user_id')
    .joinRaw(SHOWN.sql, SHOWN.bindings as Knex.Value[])
    .where('f.user_id', userId)
    .select(
      'f.id',
      'f.friend_user_id',
      'f.status',
      'f.direction',
      'f.created_at',
      'f.accepted_at',
      'a.username',
      'a.display_name',
      'a.image_url',
      'a.is_admin',
      'a.plan',
      'a.donor_supporter_unlocked',
      'a.closed_beta_participant_at',
      db.raw('case when g.shown then a.pronouns end as friend_pronouns'),
      db.raw('case when g.shown then a.status end as friend_status'),
      db.raw('case when g.shown then a.banner_url end as friend_banner_url'),
      db.raw(`coalesce((select array_agg(pa.bucket_id::text order by pb.created_at, pb.id)
                          from privacy_bucket_assignments pa
                          join privacy_buckets pb on pb.id = pa.bucket_id and pb.user_id = f.user_id
                         where pa.kind = 'friend' and pa.section_key = '' and pa.user_id = f.user_id and pa.content_id = f.friend_user_id), '{}') as bucket_ids`),
    );
}

export interface ListFilter {
  status?: FriendshipStatus;
  incomingOnly?: boolean;
  /** Case-insensitive text the display name or username contains. */
  query?: string;
}

function applyFilter(q: Knex.QueryBuilder, filter: ListFilter): Knex.QueryBuilder {
  if (filter.status) q.where('f.status', filter.status);
  if (filter.incomingOnly) q.where({ 'f.status': 'pending', 'f.direction': 'incoming' });
  const text = filter.query;
  if (text !== undefined) {
    q.where((w) =>
      w
        .whereRaw('strpos(lower(a.display_name), lower(?)) > 0', [text])
        .orWhereRaw('strpos(lower(a.username), lower(?)) > 0', [text]),
    );
  }
  return q;
}

export async function listRows(db: Knex, userId: string, filter: ListFilter): Promise<FriendListDbRow[]> {
  return applyFilter(listQuery(db, userId), filter).orderBy([{ column: 'f.created_at' }, { column: 'f.id' }]);
}

/** Keyset order of the friends page: the friendships_page index (user_id, created_at, id). */
const PAGE_KEYSET: Keyset = {
  columns: [
    { sql: sql`f.created_at`, type: 'bigint' },
    { sql: sql`f.id`, type: 'uuid' },
  ],
  direction: 'asc',
};

export async function pageRows(
  db: Knex,
  userId: string,
  filter: ListFilter,
  limit: number,
  after?: [number, string],
): Promise<FriendListDbRow[]> {
  return keysetPage(applyFilter(listQuery(db, userId), filter), PAGE_KEYSET, limit, after);
}

/**
 * Friends of the caller's accepted friends (accepted both ways at each hop), without the caller,
 * anyone it has a row with in either direction (so any block either way), and accounts that opted
 * out; with the number of mutual friends. One statement.
 */
export async function suggestions(db: Knex, userId: string, limit: number): Promise<SuggestionDbRow[]> {
  const { rows } = await db.raw(
    `with mine as (
       select f.friend_user_id as id
         from friendships f
         join friendships r on r.user_id = f.friend_user_id and r.friend_user_id = f.user_id and r.status = 'accepted'
        where f.user_id = :me and f.status = 'accepted'
     ), candidates as (
       select g.friend_user_id as id, count(*)::int as mutual
         from mine
         join friendships g on g.user_id = mine.id and g.status = 'accepted'
         join friendships gr on gr.user_id = g.friend_user_id and gr.friend_user_id = g.user_id and gr.status = 'accepted'
        where g.friend_user_id <> :me
          and not exists (select 1 from friendships x where x.user_id = :me and x.friend_user_id = g.friend_user_id)
          and not exists (select 1 from friendships y where y.user_id = g.friend_user_id and y.friend_user_id = :me)
        group by g.friend_user_id
     )
     select a.id, c.mutual, a.username, a.display_name, a.image_url, a.is_admin, a.plan, a.donor_supporter_unlocked, a.closed_beta_participant_at
       from candidates c
       join accounts a on a.id = c.id
      where a.appear_in_suggestions
      order by c.mutual desc, lower(a.username) collate "C", a.id
      limit :limit`,
    { me: userId, limit },
  );
  return rows as SuggestionDbRow[];
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

export async function updateAccountProfile(
  db: Knex,
  userId: string,
  changes: ProfileChanges,
  now: number,
): Promise<AccountCardRow> {
  const [row] = await db('accounts')
    .where({ id: userId })
    .update({ ...changes, updated_at: now })
    .returning([...ACCOUNT_COLUMNS]);
  return row as AccountCardRow;
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
  area: 'friends',
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
 * the access may see with members_view at read, by name: GET /friends/search/members.
 */
export async function searchMembers(
  db: Knex,
  access: Access,
  tsquery: string,
  limit: number,
): Promise<Array<{ id: string; name: string }>> {
  return db('members as m')
    .where({ 'm.user_id': access.ownerId })
    .whereNull('m.deleted_at')
    .whereRaw("to_tsvector('simple', m.name) @@ to_tsquery('simple', ?)", [tsquery])
    .where(visibleMembers(access, 'm'))
    .orderByRaw('lower(m.name) collate "C", m.id')
    .limit(limit)
    .select('m.id', 'm.name');
}

import type { Knex } from 'knex';
import { EXAMPLE_ACCESS, ownerRowsOf, sectionVisibleSql, visibleMembersSql } from '../../access/index.ts';
import type { Access, FriendAccess } from '../../core/context.ts';
import { keysetAfterSql, keysetOrderSql, type Keyset } from '../../core/keyset.ts';
import { type Sql, sql } from '../../db/sql.ts';
import { EXAMPLE_UUID, statement } from '../../db/statements.ts';
import { activeScopeRowsSql, type ReadScope, writeScopeSql } from '../../access/systemScope.ts';
import type { PendingEvent } from '../../core/context.ts';
import type { MemberRow } from '../../core/members.ts';
import { appendEvents, EXAMPLE_EVENT, keyedExample, notifiedColumn } from '../../events/log.ts';
import { defaultsSql } from '../privacyBuckets/index.ts';

export type MemberChanges = Partial<Omit<MemberRow, 'id' | 'user_id' | 'created_at'>>;

/** Every column of a member row (deleted_at aside: the page reads live members only, so it is null). */
const MEMBER_COLUMNS_TEXT =
  'x.id, x.user_id, x.side_system_id, x.sub_system_id, x.directory_id, x.name, x.display_name, x.pronouns, x.description, x.about_tags, x.profile_style, x.avatar, x.banner, x.archived_at, x.version, x.created_at, x.updated_at, null::bigint as deleted_at';
const MEMBER_COLUMNS = sql.constant(MEMBER_COLUMNS_TEXT, [MEMBER_COLUMNS_TEXT]);
const PAGE_ORDER = sql.constant('x.created_at, x.id', ['x.created_at, x.id']);

/**
 * A page of the live members of the active read scope in (created_at, id) order, in one statement
 * with the scope read from the context row (activeScopeRowsSql): the first page, or the page after
 * a cursor (two statements, each with a constant text).
 */
function activeScopePage(name: string, cursor: boolean) {
  return statement<{ userId: string; size: number; after?: PageCursor }, MemberRow>({
    name,
    area: 'members',
    variants: {
      [cursor ? 'after a cursor' : 'first page']: {
        userId: EXAMPLE_UUID,
        size: 1,
        after: cursor ? { createdAt: 0, id: EXAMPLE_UUID } : undefined,
      },
    },
    build: ({ userId, size, after }) => {
      const extra = after
        ? sql` and (x.created_at, x.id) > (${after.createdAt}::bigint, ${after.id}::uuid)`
        : sql.empty;
      return sql`select m.* from active_system_context c
cross join lateral (${activeScopeRowsSql('members', MEMBER_COLUMNS, PAGE_ORDER, size + 1, extra)}) m
where c.user_id = ${userId}
order by m.created_at, m.id`;
    },
  });
}
const activePageFirst = activeScopePage('members_page_first', false);
const activePageAfter = activeScopePage('members_page_after', true);

const MEMBER_ORDER: Keyset = {
  columns: [
    { sql: sql`created_at`, type: 'bigint' },
    { sql: sql`id`, type: 'uuid' },
  ],
  direction: 'asc',
};

export interface PageCursor {
  createdAt: number;
  id: string;
}

const AREA = 'members';

/**
 * A friend's view of a member's avatar and banner (both are the `avatar` profile section): the
 * member live, not archived and visible to the friend with member_avatar at read (the member rule),
 * and its avatar section not narrowing it away. One statement.
 */
const friendMedia = statement<{ access: FriendAccess; memberId: string }, Pick<MemberRow, 'avatar' | 'banner'>>({
  name: 'members_friend_media',
  area: AREA,
  variants: { "a friend's view": { access: EXAMPLE_ACCESS.friend, memberId: EXAMPLE_UUID } },
  build: ({ access, memberId }) =>
    sql`select m.avatar, m.banner from members m
      where m.id = ${memberId} and m.user_id = ${access.ownerId} and m.deleted_at is null and m.archived_at is null
        and ${visibleMembersSql(access, 'm', 'member_avatar', 'read')} and ${sectionVisibleSql(access, 'm.id', 'avatar')}`,
});

const json = (value: unknown): string | null => (value === null || value === undefined ? null : JSON.stringify(value));

const EXAMPLE_MEMBER: MemberRow = {
  id: EXAMPLE_UUID,
  user_id: EXAMPLE_UUID,
  side_system_id: EXAMPLE_UUID,
  sub_system_id: null,
  directory_id: null,
  name: '',
  display_name: null,
  pronouns: null,
  description: null,
  about_tags: [],
  profile_style: null,
  avatar: null,
  banner: null,
  archived_at: null,
  version: 1,
  created_at: 0,
  updated_at: 0,
  deleted_at: null,
};

/** jsonb columns are written as JSON text so arrays are not taken for Postgres arrays. */
const insertMember = statement<{ row: MemberRow }, never>({
  name: 'members_insert',
  area: AREA,
  variants: { 'a member': { row: EXAMPLE_MEMBER } },
  build: ({ row }) =>
    sql`insert into members (id, user_id, side_system_id, sub_system_id, directory_id, name, display_name, pronouns, description, about_tags, profile_style, avatar, banner, archived_at, version, created_at, updated_at, deleted_at)
      values (${row.id}, ${row.user_id}, ${row.side_system_id}, ${row.sub_system_id}, ${row.directory_id}, ${row.name}, ${row.display_name}, ${row.pronouns}, ${row.description},
        ${json(row.about_tags)}::jsonb, ${json(row.profile_style)}::jsonb, ${json(row.avatar)}::jsonb, ${json(row.banner)}::jsonb,
        ${row.archived_at}, ${row.version}, ${row.created_at}, ${row.updated_at}, ${row.deleted_at})`,
});

const WRITTEN = sql`exists (select 1 from inserted)`;

/** A member to create in the active write scope: the statement decides its side and sub system. */
export type NewMember = Omit<MemberRow, 'side_system_id' | 'sub_system_id'>;

/**
 * A member created in one statement (docs/data-access.md, "Writes in one statement"): the active
 * write scope (writeScopeSql, share-locked), the member, the owner's default buckets for new
 * members and for their profile sections (privacy_defaults_apply's inserts, as CTEs), and
 * `member.created`; nothing when the scope is gone (`scoped` false).
 */
const createMember = statement<
  { row: NewMember; events: readonly PendingEvent[] },
  { scoped: boolean; notified: unknown }
>({
  name: 'members_create',
  area: AREA,
  variants: {
    'a member': { row: EXAMPLE_MEMBER, events: [EXAMPLE_EVENT] },
    'a member, the request keyed (its response stored under the key)': {
      row: EXAMPLE_MEMBER,
      events: keyedExample([EXAMPLE_EVENT]),
    },
  },
  build: ({ row, events }) => sql`with ${writeScopeSql(row.user_id)},
    inserted as (
      insert into members (id, user_id, side_system_id, sub_system_id, directory_id, name, display_name, pronouns, description, about_tags, profile_style, avatar, banner, archived_at, version, created_at, updated_at, deleted_at)
      select ${row.id}, ${row.user_id}, w.side_system_id, w.sub_system_id, ${row.directory_id}, ${row.name}, ${row.display_name}, ${row.pronouns}, ${row.description},
        ${json(row.about_tags)}::jsonb, ${json(row.profile_style)}::jsonb, ${json(row.avatar)}::jsonb, ${json(row.banner)}::jsonb,
        ${row.archived_at}, ${row.version}, ${row.created_at}, ${row.updated_at}, ${row.deleted_at}
      from write_scope w
      returning id
    ),
    member_defaults as (${defaultsSql(row.user_id, 'new_member', [row.id], row.created_at, WRITTEN)}),
    section_defaults as (${defaultsSql(row.user_id, 'new_profile_section', [row.id], row.created_at, WRITTEN)}),
    ${appendEvents(events, WRITTEN)}
    select ${WRITTEN} as scoped, ${notifiedColumn}`,
});

interface FindParams {
  userId: string;
  id: string;
  /** Live only (not in the trash), or trashed too. */
  live: boolean;
  /** FOR UPDATE until the transaction ends. */
  lock: boolean;
}

/** One member of the account, live or trashed too, locked for update or not. */
const findMember = statement<FindParams, MemberRow>({
  name: 'members_find',
  area: AREA,
  variants: {
    live: { userId: EXAMPLE_UUID, id: EXAMPLE_UUID, live: true, lock: false },
    'live, locked for update': { userId: EXAMPLE_UUID, id: EXAMPLE_UUID, live: true, lock: true },
    'live or trashed': { userId: EXAMPLE_UUID, id: EXAMPLE_UUID, live: false, lock: false },
    'live or trashed, locked for update': { userId: EXAMPLE_UUID, id: EXAMPLE_UUID, live: false, lock: true },
  },
  build: ({ userId, id, live, lock }) =>
    sql`select * from members where id = ${id} and user_id = ${userId}${live ? sql` and deleted_at is null` : sql.empty}${lock ? sql` for update` : sql.empty}`,
});

type MemberColumn = keyof MemberChanges & string;
const CASTS = ['uuid', 'text', 'jsonb', 'bigint', 'int'] as const;
/** The columns a change may set, and the cast of their value. */
const CHANGE_COLUMNS: ReadonlyArray<readonly [MemberColumn, (typeof CASTS)[number]]> = [
  ['side_system_id', 'uuid'],
  ['sub_system_id', 'uuid'],
  ['directory_id', 'uuid'],
  ['name', 'text'],
  ['display_name', 'text'],
  ['pronouns', 'text'],
  ['description', 'text'],
  ['about_tags', 'jsonb'],
  ['profile_style', 'jsonb'],
  ['avatar', 'jsonb'],
  ['banner', 'jsonb'],
  ['archived_at', 'bigint'],
  ['version', 'int'],
];

/** `column = case when <given> then <value> else column end`: one text whichever columns a change sets. */
function setIfGiven(changes: MemberChanges, column: MemberColumn, cast: (typeof CASTS)[number]): Sql {
  const given = changes[column] !== undefined;
  const raw = given ? changes[column] : null;
  const value = cast === 'jsonb' ? json(raw) : raw;
  const id = sql.id(column);
  return sql`${id} = case when ${given}::boolean then ${value}::${sql.constant(cast, CASTS)} else ${id} end`;
}

/** A member write (PATCH, media, archive, move): the columns given change, the others stay. */
const updateMember = statement<
  { userId: string; id: string; changes: MemberChanges & { updated_at: number } },
  MemberRow
>({
  name: 'members_update',
  area: AREA,
  variants: { 'any change': { userId: EXAMPLE_UUID, id: EXAMPLE_UUID, changes: { updated_at: 0 } } },
  build: ({ userId, id, changes }) =>
    sql`update members set ${sql.join(
      CHANGE_COLUMNS.map(([column, cast]) => setIfGiven(changes, column, cast)),
      ', ',
    )}, updated_at = ${changes.updated_at}
      where id = ${id} and user_id = ${userId} returning *`,
});

/** Moves the member to the trash (deleted_at set) or out of it (null). */
const setDeleted = statement<{ userId: string; id: string; deletedAt: number | null; now: number }, never>({
  name: 'members_set_deleted',
  area: AREA,
  variants: { 'trash or restore': { userId: EXAMPLE_UUID, id: EXAMPLE_UUID, deletedAt: null, now: 0 } },
  build: ({ userId, id, deletedAt, now }) =>
    sql`update members set deleted_at = ${deletedAt}::bigint, updated_at = ${now} where id = ${id} and user_id = ${userId}`,
});

const SCOPES = {
  'unified view': { sideSystemId: null, subSystemId: null },
  'a side system': { sideSystemId: EXAMPLE_UUID, subSystemId: null },
  'a sub system': { sideSystemId: EXAMPLE_UUID, subSystemId: EXAMPLE_UUID },
} satisfies Record<string, ReadScope>;

/** A page (`size` + 1 rows) of the live members of an explicit read scope, in (created_at, id) order after the cursor. */
const scopePage = statement<{ userId: string; scope: ReadScope; size: number; after?: PageCursor }, MemberRow>({
  name: 'members_scope_page',
  area: AREA,
  variants: Object.fromEntries(
    Object.entries(SCOPES).flatMap(([label, scope]) => [
      [`${label}, first page`, { userId: EXAMPLE_UUID, scope, size: 1 }],
      [`${label}, after a cursor`, { userId: EXAMPLE_UUID, scope, size: 1, after: { createdAt: 0, id: EXAMPLE_UUID } }],
    ]),
  ),
  build: ({ userId, scope, size, after }) => {
    const side = scope.sideSystemId ? sql` and side_system_id = ${scope.sideSystemId}` : sql.empty;
    const sub = scope.subSystemId ? sql` and sub_system_id = ${scope.subSystemId}` : sql.empty;
    const cursor = after ? sql` and ${keysetAfterSql(MEMBER_ORDER, [after.createdAt, after.id])}` : sql.empty;
    return sql`select * from members where user_id = ${userId} and deleted_at is null${side}${sub}${cursor} ${keysetOrderSql(MEMBER_ORDER, size)}`;
  },
});

/** The live members of the account among the ids. */
const liveIds = statement<{ userId: string; ids: string[] }, Pick<MemberRow, 'id' | 'side_system_id' | 'archived_at'>>({
  name: 'members_live_ids',
  area: AREA,
  variants: { 'the ids': { userId: EXAMPLE_UUID, ids: [EXAMPLE_UUID] } },
  build: ({ userId, ids }) =>
    sql`select id, side_system_id, archived_at from members where user_id = ${userId} and id = any (${ids}::uuid[]) and deleted_at is null`,
});

/** The members of the account among the ids, trashed ones too. */
const byIds = statement<{ userId: string; ids: string[] }, MemberRow>({
  name: 'members_by_ids',
  area: AREA,
  variants: { 'the ids': { userId: EXAMPLE_UUID, ids: [EXAMPLE_UUID] } },
  build: ({ userId, ids }) => sql`select * from members where user_id = ${userId} and id = any (${ids}::uuid[])`,
});

export const membersRepo = {
  /** createMember's statement: whether the member was written (`scoped` false: the active scope is gone). */
  async create(
    db: Knex,
    row: NewMember,
    events: readonly PendingEvent[],
  ): Promise<{ scoped: boolean; notified: unknown }> {
    return (await createMember(db, { row, events }))[0]!;
  },

  /** The member's avatar and banner as a friend may see them (friendMedia); undefined when it may not. */
  async friendMedia(
    db: Knex,
    access: FriendAccess,
    memberId: string,
  ): Promise<Pick<MemberRow, 'avatar' | 'banner'> | undefined> {
    return (await friendMedia(db, { access, memberId }))[0];
  },

  async insert(db: Knex, row: MemberRow): Promise<void> {
    await insertMember(db, { row });
  },

  async findLive(db: Knex, userId: string, id: string): Promise<MemberRow | undefined> {
    return (await findMember(db, { userId, id, live: true, lock: false }))[0];
  },

  /** Live or trashed. */
  async findAny(db: Knex, userId: string, id: string): Promise<MemberRow | undefined> {
    return (await findMember(db, { userId, id, live: false, lock: false }))[0];
  },

  /** The member whether trashed or not, locked for update until the transaction ends. */
  async lockAny(trx: Knex.Transaction, userId: string, id: string): Promise<MemberRow | undefined> {
    return (await findMember(trx, { userId, id, live: false, lock: true }))[0];
  },

  async lockLive(trx: Knex.Transaction, userId: string, id: string): Promise<MemberRow | undefined> {
    return (await findMember(trx, { userId, id, live: true, lock: true }))[0];
  },

  async update(
    db: Knex,
    userId: string,
    id: string,
    changes: MemberChanges & { updated_at: number },
  ): Promise<MemberRow> {
    const [row] = await updateMember(db, { userId, id, changes });
    return row!;
  },

  /** To the trash (`deletedAt` a time) or out of it (null). */
  async setDeleted(db: Knex, userId: string, id: string, deletedAt: number | null, now: number): Promise<void> {
    await setDeleted(db, { userId, id, deletedAt, now });
  },

  /** A page (`size` + 1 rows) of the live members of the scope the access may see, in (created_at, id) order after the cursor. */
  page(db: Knex, access: Access, scope: ReadScope, size: number, after?: PageCursor): Promise<MemberRow[]> {
    return scopePage(db, { userId: ownerRowsOf(access), scope, size, after });
  },

  /** A page (`size` + 1 rows) of the active read scope's live members after the cursor, in one statement (see activeScopePage). */
  activeScopePage(db: Knex, userId: string, size: number, after?: PageCursor): Promise<MemberRow[]> {
    return after ? activePageAfter(db, { userId, size, after }) : activePageFirst(db, { userId, size });
  },

  /** Members of this account among the ids (live only), for validating references in one query. */
  liveIds(
    db: Knex,
    userId: string,
    ids: string[],
  ): Promise<Array<Pick<MemberRow, 'id' | 'side_system_id' | 'archived_at'>>> {
    if (ids.length === 0) return Promise.resolve([]);
    return liveIds(db, { userId, ids });
  },

  /** The ids that are not live members of this account (or not in `sideSystemId` when given), in input order. */
  async missingLive(db: Knex, userId: string, ids: string[], sideSystemId?: string): Promise<string[]> {
    const found = await membersRepo.liveIds(db, userId, ids);
    const ok = new Set(
      found.filter((m) => sideSystemId === undefined || m.side_system_id === sideSystemId).map((m) => m.id),
    );
    return ids.filter((id) => !ok.has(id));
  },

  byIds(db: Knex, userId: string, ids: string[]): Promise<MemberRow[]> {
    if (ids.length === 0) return Promise.resolve([]);
    return byIds(db, { userId, ids });
  },
};

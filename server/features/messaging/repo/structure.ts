/**
 * The SQL of messaging's structure: an account's spaces, their categories and channels, their
 * order, and bootstrap (one statement for the whole chat's outline). Committed as
 * generated/sql/messaging.sql.
 */
import type { Knex } from 'knex';
import { type Sql, sql } from '../../../db/sql.ts';
import { EXAMPLE_UUID, statement } from '../../../db/statements.ts';

const AREA = 'messaging';

export interface SpaceRow {
  id: string;
  user_id: string;
  name: string;
  description: string | null;
  side_system_id: string | null;
  icon_key: string | null;
  position: number;
  created_at: number;
  updated_at: number;
  archived_at: number | null;
}

export interface CategoryRow {
  id: string;
  user_id: string;
  space_id: string;
  name: string;
  collapsed: boolean;
  position: number;
  created_at: number;
  updated_at: number;
}

export interface ChannelRow {
  id: string;
  user_id: string;
  space_id: string;
  category_id: string | null;
  name: string;
  topic: string | null;
  channel_type: 'text' | 'media';
  position: number;
  last_seq: number;
  read_seq: number;
  unread_count: number;
  created_at: number;
  updated_at: number;
  archived_at: number | null;
}

/** A live channel as the writes read it: with its space's side system. */
export type LiveChannelRow = ChannelRow & { side_system_id: string | null };

export interface BootstrapRow {
  spaces: unknown;
  categories: unknown;
  channels: unknown;
  last_space_id: string | null;
  last_channel_id: string | null;
}

/** A column of a PATCH: set to `value` when it is given, else kept (one text whatever the request sends). */
const TYPES = ['text', 'uuid', 'boolean'] as const;
function setIfGiven(column: string, value: unknown, type: (typeof TYPES)[number]): Sql {
  const col = sql.id(column);
  return sql`${col} = case when ${value !== undefined}::boolean then ${value ?? null}::${sql.constant(type, TYPES)} else ${col} end`;
}

const FOR_UPDATE = (lock: boolean) => (lock ? sql` for update` : sql.empty);

// ---- spaces ----

const liveSpace = statement<{ userId: string; id: string; lock: boolean }, SpaceRow>({
  name: 'messaging_space_live',
  area: AREA,
  variants: {
    read: { userId: EXAMPLE_UUID, id: EXAMPLE_UUID, lock: false },
    'locked for the transaction': { userId: EXAMPLE_UUID, id: EXAMPLE_UUID, lock: true },
  },
  build: ({ userId, id, lock }) =>
    sql`select * from messaging_spaces where id = ${id} and user_id = ${userId} and archived_at is null limit 1${FOR_UPDATE(lock)}`,
});

const listSpaces = statement<{ userId: string }, SpaceRow>({
  name: 'messaging_spaces_list',
  area: AREA,
  variants: { 'the account': { userId: EXAMPLE_UUID } },
  build: ({ userId }) =>
    sql`select * from messaging_spaces where user_id = ${userId} and archived_at is null order by position, id`,
});

/** One space creation at a time per account: the account row, locked. */
const lockAccount = statement<{ userId: string }, { id: string }>({
  name: 'messaging_account_lock',
  area: AREA,
  variants: { 'the account': { userId: EXAMPLE_UUID } },
  build: ({ userId }) => sql`select id from accounts where id = ${userId} limit 1 for update`,
});

const sideSystemLive = statement<{ userId: string; id: string }, { id: string }>({
  name: 'messaging_side_system_live',
  area: AREA,
  variants: { 'a side system': { userId: EXAMPLE_UUID, id: EXAMPLE_UUID } },
  build: ({ userId, id }) =>
    sql`select id from side_systems where id = ${id} and user_id = ${userId} and deleted_at is null limit 1`,
});

interface CountAndNext {
  count: number;
  next: number;
}

const spaceCountAndNext = statement<{ userId: string }, CountAndNext>({
  name: 'messaging_spaces_count_next',
  area: AREA,
  variants: { 'the account': { userId: EXAMPLE_UUID } },
  build: ({ userId }) => sql`select count(*)::int as count, coalesce(max(position) + 1, 0)::int as next
    from messaging_spaces where user_id = ${userId} and archived_at is null`,
});

const insertSpace = statement<{ row: SpaceRow }, never>({
  name: 'messaging_space_insert',
  area: AREA,
  variants: {
    'a space': {
      row: {
        id: EXAMPLE_UUID,
        user_id: EXAMPLE_UUID,
        name: 'x',
        description: null,
        side_system_id: null,
        icon_key: null,
        position: 0,
        created_at: 0,
        updated_at: 0,
        archived_at: null,
      },
    },
  },
  build: ({ row: r }) => sql`insert into messaging_spaces
    (id, user_id, name, description, side_system_id, icon_key, position, created_at, updated_at, archived_at)
    values (${r.id}, ${r.user_id}, ${r.name}, ${r.description}, ${r.side_system_id}, ${r.icon_key}, ${r.position},
      ${r.created_at}, ${r.updated_at}, ${r.archived_at})`,
});

export interface SpaceChanges {
  name?: string;
  description?: string | null;
  side_system_id?: string | null;
  icon_key?: string | null;
}

const updateSpace = statement<{ userId: string; id: string; changes: SpaceChanges; now: number }, SpaceRow>({
  name: 'messaging_space_update',
  area: AREA,
  variants: { 'the columns given': { userId: EXAMPLE_UUID, id: EXAMPLE_UUID, changes: {}, now: 0 } },
  build: ({ userId, id, changes: c, now }) => sql`update messaging_spaces set
      ${setIfGiven('name', c.name, 'text')},
      ${setIfGiven('description', c.description, 'text')},
      ${setIfGiven('side_system_id', c.side_system_id, 'uuid')},
      ${setIfGiven('icon_key', c.icon_key, 'text')},
      updated_at = ${now}
    where id = ${id} and user_id = ${userId}
    returning *`,
});

const archiveSpace = statement<{ userId: string; id: string; now: number }, { id: string }>({
  name: 'messaging_space_archive',
  area: AREA,
  variants: { 'a space': { userId: EXAMPLE_UUID, id: EXAMPLE_UUID, now: 0 } },
  build: ({ userId, id, now }) => sql`update messaging_spaces set archived_at = ${now}, updated_at = ${now}
    where id = ${id} and user_id = ${userId} and archived_at is null
    returning id`,
});

const liveSpaceIdsLocked = statement<{ userId: string }, { id: string }>({
  name: 'messaging_space_ids_locked',
  area: AREA,
  variants: { 'the account': { userId: EXAMPLE_UUID } },
  build: ({ userId }) =>
    sql`select id from messaging_spaces where user_id = ${userId} and archived_at is null for update`,
});

/** The live space of the account whose icon is `iconKey`. */
const spaceWithIcon = statement<{ userId: string; iconKey: string }, { id: string }>({
  name: 'messaging_space_with_icon',
  area: AREA,
  variants: { 'an icon key': { userId: EXAMPLE_UUID, iconKey: 'x' } },
  build: ({ userId, iconKey }) =>
    sql`select id from messaging_spaces where user_id = ${userId} and icon_key = ${iconKey} and archived_at is null limit 1`,
});

// ---- categories ----

const liveCategory = statement<{ userId: string; id: string }, CategoryRow>({
  name: 'messaging_category_live',
  area: AREA,
  variants: { 'a category': { userId: EXAMPLE_UUID, id: EXAMPLE_UUID } },
  build: ({ userId, id }) => sql`select c.* from messaging_categories c
    join messaging_spaces s on s.id = c.space_id
    where c.id = ${id} and c.user_id = ${userId} and s.archived_at is null
    limit 1`,
});

const listCategories = statement<{ userId: string; spaceId: string }, CategoryRow>({
  name: 'messaging_categories_list',
  area: AREA,
  variants: { 'a space': { userId: EXAMPLE_UUID, spaceId: EXAMPLE_UUID } },
  build: ({ userId, spaceId }) =>
    sql`select * from messaging_categories where user_id = ${userId} and space_id = ${spaceId} order by position, id`,
});

const categoryCountAndNext = statement<{ userId: string; spaceId: string }, CountAndNext>({
  name: 'messaging_categories_count_next',
  area: AREA,
  variants: { 'a space': { userId: EXAMPLE_UUID, spaceId: EXAMPLE_UUID } },
  build: ({ userId, spaceId }) => sql`select count(*)::int as count, coalesce(max(position) + 1, 0)::int as next
    from messaging_categories where user_id = ${userId} and space_id = ${spaceId}`,
});

const insertCategory = statement<{ row: CategoryRow }, never>({
  name: 'messaging_category_insert',
  area: AREA,
  variants: {
    'a category': {
      row: {
        id: EXAMPLE_UUID,
        user_id: EXAMPLE_UUID,
        space_id: EXAMPLE_UUID,
        name: 'x',
        collapsed: false,
        position: 0,
        created_at: 0,
        updated_at: 0,
      },
    },
  },
  build: ({ row: r }) => sql`insert into messaging_categories
    (id, user_id, space_id, name, collapsed, position, created_at, updated_at)
    values (${r.id}, ${r.user_id}, ${r.space_id}, ${r.name}, ${r.collapsed}, ${r.position}, ${r.created_at}, ${r.updated_at})`,
});

export interface CategoryChanges {
  name?: string;
  collapsed?: boolean;
}

const updateCategory = statement<{ userId: string; id: string; changes: CategoryChanges; now: number }, CategoryRow>({
  name: 'messaging_category_update',
  area: AREA,
  variants: { 'the columns given': { userId: EXAMPLE_UUID, id: EXAMPLE_UUID, changes: {}, now: 0 } },
  build: ({ userId, id, changes: c, now }) => sql`update messaging_categories set
      ${setIfGiven('name', c.name, 'text')},
      ${setIfGiven('collapsed', c.collapsed, 'boolean')},
      updated_at = ${now}
    where id = ${id} and user_id = ${userId}
    returning *`,
});

/** A deleted category's channels (archived ones too) become uncategorised and keep their place. */
const uncategoriseChannels = statement<{ userId: string; categoryId: string; now: number }, never>({
  name: 'messaging_channels_uncategorise',
  area: AREA,
  variants: { 'a category': { userId: EXAMPLE_UUID, categoryId: EXAMPLE_UUID, now: 0 } },
  build: ({ userId, categoryId, now }) => sql`update messaging_channels set category_id = null, updated_at = ${now}
    where user_id = ${userId} and category_id = ${categoryId}`,
});

const deleteCategory = statement<{ userId: string; id: string }, never>({
  name: 'messaging_category_delete',
  area: AREA,
  variants: { 'a category': { userId: EXAMPLE_UUID, id: EXAMPLE_UUID } },
  build: ({ userId, id }) => sql`delete from messaging_categories where id = ${id} and user_id = ${userId}`,
});

const categoryIds = statement<{ userId: string; spaceId: string }, { id: string }>({
  name: 'messaging_category_ids',
  area: AREA,
  variants: { 'a space': { userId: EXAMPLE_UUID, spaceId: EXAMPLE_UUID } },
  build: ({ userId, spaceId }) =>
    sql`select id from messaging_categories where user_id = ${userId} and space_id = ${spaceId}`,
});

const categoryOfSpace = statement<{ userId: string; spaceId: string; categoryId: string }, { id: string }>({
  name: 'messaging_category_of_space',
  area: AREA,
  variants: { 'a category': { userId: EXAMPLE_UUID, spaceId: EXAMPLE_UUID, categoryId: EXAMPLE_UUID } },
  build: ({ userId, spaceId, categoryId }) => sql`select id from messaging_categories
    where id = ${categoryId} and user_id = ${userId} and space_id = ${spaceId} limit 1`,
});

// ---- channels ----

const liveChannel = statement<{ userId: string; id: string; lock: boolean }, LiveChannelRow>({
  name: 'messaging_channel_live',
  area: AREA,
  variants: {
    read: { userId: EXAMPLE_UUID, id: EXAMPLE_UUID, lock: false },
    'locked for the transaction': { userId: EXAMPLE_UUID, id: EXAMPLE_UUID, lock: true },
  },
  build: ({ userId, id, lock }) => sql`select c.*, s.side_system_id from messaging_channels c
    join messaging_spaces s on s.id = c.space_id
    where c.id = ${id} and c.user_id = ${userId} and c.archived_at is null and s.archived_at is null
    limit 1${lock ? sql` for update of c` : sql.empty}`,
});

const listChannels = statement<{ userId: string; spaceId: string }, ChannelRow>({
  name: 'messaging_channels_list',
  area: AREA,
  variants: { 'a space': { userId: EXAMPLE_UUID, spaceId: EXAMPLE_UUID } },
  build: ({ userId, spaceId }) => sql`select * from messaging_channels
    where user_id = ${userId} and space_id = ${spaceId} and archived_at is null
    order by position, id`,
});

const channelCountAndNext = statement<{ userId: string; spaceId: string }, CountAndNext>({
  name: 'messaging_channels_count_next',
  area: AREA,
  variants: { 'a space': { userId: EXAMPLE_UUID, spaceId: EXAMPLE_UUID } },
  build: ({ userId, spaceId }) => sql`select count(*)::int as count, coalesce(max(position) + 1, 0)::int as next
    from messaging_channels where user_id = ${userId} and space_id = ${spaceId} and archived_at is null`,
});

export type NewChannel = Pick<
  ChannelRow,
  | 'id'
  | 'user_id'
  | 'space_id'
  | 'category_id'
  | 'name'
  | 'topic'
  | 'channel_type'
  | 'position'
  | 'created_at'
  | 'updated_at'
>;

const insertChannel = statement<{ row: NewChannel }, never>({
  name: 'messaging_channel_insert',
  area: AREA,
  variants: {
    'a channel': {
      row: {
        id: EXAMPLE_UUID,
        user_id: EXAMPLE_UUID,
        space_id: EXAMPLE_UUID,
        category_id: null,
        name: 'x',
        topic: null,
        channel_type: 'text',
        position: 0,
        created_at: 0,
        updated_at: 0,
      },
    },
  },
  build: ({ row: r }) => sql`insert into messaging_channels
    (id, user_id, space_id, category_id, name, topic, channel_type, position, created_at, updated_at)
    values (${r.id}, ${r.user_id}, ${r.space_id}, ${r.category_id}, ${r.name}, ${r.topic}, ${r.channel_type},
      ${r.position}, ${r.created_at}, ${r.updated_at})`,
});

export interface ChannelChanges {
  name?: string;
  topic?: string | null;
}

const updateChannel = statement<{ userId: string; id: string; changes: ChannelChanges; now: number }, ChannelRow>({
  name: 'messaging_channel_update',
  area: AREA,
  variants: { 'the columns given': { userId: EXAMPLE_UUID, id: EXAMPLE_UUID, changes: {}, now: 0 } },
  build: ({ userId, id, changes: c, now }) => sql`update messaging_channels set
      ${setIfGiven('name', c.name, 'text')},
      ${setIfGiven('topic', c.topic, 'text')},
      updated_at = ${now}
    where id = ${id} and user_id = ${userId} and archived_at is null
    returning *`,
});

const moveChannel = statement<{ userId: string; id: string; categoryId: string | null; now: number }, ChannelRow>({
  name: 'messaging_channel_move',
  area: AREA,
  variants: { 'a channel': { userId: EXAMPLE_UUID, id: EXAMPLE_UUID, categoryId: null, now: 0 } },
  build: ({ userId, id, categoryId, now }) => sql`update messaging_channels
    set category_id = ${categoryId}::uuid, updated_at = ${now}
    where id = ${id} and user_id = ${userId}
    returning *`,
});

const archiveChannel = statement<{ userId: string; id: string; now: number }, never>({
  name: 'messaging_channel_archive',
  area: AREA,
  variants: { 'a channel': { userId: EXAMPLE_UUID, id: EXAMPLE_UUID, now: 0 } },
  build: ({ userId, id, now }) => sql`update messaging_channels set archived_at = ${now}, updated_at = ${now}
    where id = ${id} and user_id = ${userId}`,
});

const liveChannelIds = statement<{ userId: string; spaceId: string }, { id: string }>({
  name: 'messaging_channel_ids',
  area: AREA,
  variants: { 'a space': { userId: EXAMPLE_UUID, spaceId: EXAMPLE_UUID } },
  build: ({ userId, spaceId }) =>
    sql`select id from messaging_channels where user_id = ${userId} and space_id = ${spaceId} and archived_at is null`,
});

// ---- order ----

type Ordered = 'messaging_spaces' | 'messaging_categories' | 'messaging_channels';
const ORDERED: readonly Ordered[] = ['messaging_spaces', 'messaging_categories', 'messaging_channels'];

/** Positions 0, 1, 2 … in the order of `ordered` (an exact permutation the service checked). */
const applyOrder = statement<{ table: Ordered; userId: string; ordered: readonly string[]; now: number }, never>({
  name: 'messaging_reorder',
  area: AREA,
  variants: Object.fromEntries(ORDERED.map((table) => [table, { table, userId: EXAMPLE_UUID, ordered: [], now: 0 }])),
  build: ({ table, userId, ordered, now }) => sql`update ${sql.constant(table, ORDERED)} t
    set position = v.ord - 1, updated_at = ${now}
    from unnest(${[...ordered]}::uuid[]) with ordinality as v(id, ord)
    where t.id = v.id and t.user_id = ${userId}`,
});

// ---- bootstrap ----

/** Live spaces, their categories, their live channels (with unread counts) and the last viewed route, by index. */
const bootstrap = statement<{ userId: string }, BootstrapRow>({
  name: 'messaging_bootstrap',
  area: AREA,
  variants: { 'the account': { userId: EXAMPLE_UUID } },
  build: ({ userId }) => sql`select
     (select coalesce(json_agg(json_build_object('id', s.id, 'name', s.name, 'description', s.description, 'iconKey', s.icon_key,
        'sideSystemId', s.side_system_id, 'position', s.position, 'createdAt', s.created_at, 'updatedAt', s.updated_at)
        order by s.position, s.id), '[]'::json)
      from messaging_spaces s where s.user_id = ${userId} and s.archived_at is null) as spaces,
     (select coalesce(json_agg(json_build_object('id', c.id, 'spaceId', c.space_id, 'name', c.name, 'collapsed', c.collapsed,
        'position', c.position, 'createdAt', c.created_at, 'updatedAt', c.updated_at)
        order by s.position, s.id, c.position, c.id), '[]'::json)
      from messaging_spaces s join messaging_categories c on c.user_id = s.user_id and c.space_id = s.id
      where s.user_id = ${userId} and s.archived_at is null) as categories,
     (select coalesce(json_agg(json_build_object('id', c.id, 'spaceId', c.space_id, 'categoryId', c.category_id, 'name', c.name,
        'topic', c.topic, 'channelType', c.channel_type, 'position', c.position, 'createdAt', c.created_at, 'updatedAt', c.updated_at,
        'unread', c.unread_count)
        order by s.position, s.id, c.position, c.id), '[]'::json)
      from messaging_spaces s join messaging_channels c on c.user_id = s.user_id and c.space_id = s.id and c.archived_at is null
      where s.user_id = ${userId} and s.archived_at is null) as channels,
     ls.id as last_space_id,
     lc.id as last_channel_id
   from (select ${userId}::uuid as user_id) a
   left join messaging_preferences p on p.user_id = a.user_id
   left join messaging_spaces ls on ls.id = p.last_space_id and ls.user_id = a.user_id and ls.archived_at is null
   left join lateral (
     select c.id from messaging_channels c join messaging_spaces cs on cs.id = c.space_id and cs.archived_at is null
     where c.id = p.last_channel_id and c.user_id = a.user_id and c.archived_at is null limit 1
   ) lc on true`,
});

const first = <Row>(rows: Row[]): Row | null => rows[0] ?? null;

export const structureRepo = {
  findLiveSpace: async (db: Knex, userId: string, id: string, lock = false) =>
    first(await liveSpace(db, { userId, id, lock })),
  listSpaces: (db: Knex, userId: string) => listSpaces(db, { userId }),
  lockAccount: async (db: Knex, userId: string) => void (await lockAccount(db, { userId })),
  async sideSystemIsLive(db: Knex, userId: string, id: string): Promise<boolean> {
    return (await sideSystemLive(db, { userId, id })).length > 0;
  },
  spaceCountAndNext: async (db: Knex, userId: string) => (await spaceCountAndNext(db, { userId }))[0]!,
  insertSpace: async (db: Knex, row: SpaceRow) => void (await insertSpace(db, { row })),
  updateSpace: async (db: Knex, userId: string, id: string, changes: SpaceChanges, now: number) =>
    first(await updateSpace(db, { userId, id, changes, now })),
  /** Whether a live space was archived. */
  async archiveSpace(db: Knex, userId: string, id: string, now: number): Promise<boolean> {
    return (await archiveSpace(db, { userId, id, now })).length > 0;
  },
  liveSpaceIdsLocked: async (db: Knex, userId: string) => (await liveSpaceIdsLocked(db, { userId })).map((r) => r.id),
  async liveSpaceHasIcon(db: Knex, userId: string, iconKey: string): Promise<boolean> {
    return (await spaceWithIcon(db, { userId, iconKey })).length > 0;
  },

  findLiveCategory: async (db: Knex, userId: string, id: string) => first(await liveCategory(db, { userId, id })),
  listCategories: (db: Knex, userId: string, spaceId: string) => listCategories(db, { userId, spaceId }),
  categoryCountAndNext: async (db: Knex, userId: string, spaceId: string) =>
    (await categoryCountAndNext(db, { userId, spaceId }))[0]!,
  insertCategory: async (db: Knex, row: CategoryRow) => void (await insertCategory(db, { row })),
  updateCategory: async (db: Knex, userId: string, id: string, changes: CategoryChanges, now: number) =>
    first(await updateCategory(db, { userId, id, changes, now })),
  uncategoriseChannels: async (db: Knex, userId: string, categoryId: string, now: number) =>
    void (await uncategoriseChannels(db, { userId, categoryId, now })),
  deleteCategory: async (db: Knex, userId: string, id: string) => void (await deleteCategory(db, { userId, id })),
  categoryIds: async (db: Knex, userId: string, spaceId: string) =>
    (await categoryIds(db, { userId, spaceId })).map((r) => r.id),
  async categoryOfSpace(db: Knex, userId: string, spaceId: string, categoryId: string): Promise<boolean> {
    return (await categoryOfSpace(db, { userId, spaceId, categoryId })).length > 0;
  },

  /** A live channel in a live space (locked for the transaction with `lock`), or null. */
  findLiveChannel: async (db: Knex, userId: string, id: string, lock = false) =>
    first(await liveChannel(db, { userId, id, lock })),
  listChannels: (db: Knex, userId: string, spaceId: string) => listChannels(db, { userId, spaceId }),
  channelCountAndNext: async (db: Knex, userId: string, spaceId: string) =>
    (await channelCountAndNext(db, { userId, spaceId }))[0]!,
  insertChannel: async (db: Knex, row: NewChannel) => void (await insertChannel(db, { row })),
  updateChannel: async (db: Knex, userId: string, id: string, changes: ChannelChanges, now: number) =>
    first(await updateChannel(db, { userId, id, changes, now })),
  moveChannel: async (db: Knex, userId: string, id: string, categoryId: string | null, now: number) =>
    first(await moveChannel(db, { userId, id, categoryId, now })),
  archiveChannel: async (db: Knex, userId: string, id: string, now: number) =>
    void (await archiveChannel(db, { userId, id, now })),
  liveChannelIds: async (db: Knex, userId: string, spaceId: string) =>
    (await liveChannelIds(db, { userId, spaceId })).map((r) => r.id),

  applyOrder: async (db: Knex, table: Ordered, userId: string, ordered: readonly string[], now: number) =>
    void (await applyOrder(db, { table, userId, ordered, now })),

  bootstrap: async (db: Knex, userId: string) => first(await bootstrap(db, { userId })),
};

import type { Knex } from 'knex';
import { type ReadScope, writeScopeSql } from '../../access/systemScope.ts';
import type { PendingEvent } from '../../core/context.ts';
import type { MemberRow } from '../../core/members.ts';
import { type Sql, sql } from '../../db/sql.ts';
import { EXAMPLE_UUID, statement } from '../../db/statements.ts';
import { appendEvents, EXAMPLE_EVENT, keyedExample, notifiedColumn } from '../../events/log.ts';
import { defaultsSql } from '../privacyBuckets/index.ts';

const AREA = 'groups';

export type DirectoryKind = 'folder' | 'group';

export interface DirectoryRow {
  id: string;
  user_id: string;
  kind: DirectoryKind;
  side_system_id: string;
  sub_system_id: string | null;
  parent_id: string | null;
  name: string;
  description: string | null;
  color: string | null;
  created_at: number;
  updated_at: number;
  deleted_at: number | null;
}

export interface LayoutRow {
  id: string;
  user_id: string;
  directory_id: string | null;
  name: string;
  item_ids: string[];
  created_at: number;
  updated_at: number;
  deleted_at: number | null;
}

const EXAMPLE_DIRECTORY: DirectoryRow = {
  id: EXAMPLE_UUID,
  user_id: EXAMPLE_UUID,
  kind: 'folder',
  side_system_id: EXAMPLE_UUID,
  sub_system_id: null,
  parent_id: null,
  name: '',
  description: null,
  color: null,
  created_at: 0,
  updated_at: 0,
  deleted_at: null,
};

interface FindParams {
  userId: string;
  id: string;
  kind?: DirectoryKind;
  /** Live only (not in the trash), or trashed too. */
  live: boolean;
  /** FOR UPDATE until the transaction ends. */
  lock?: boolean;
}

const findDirectory = statement<FindParams, DirectoryRow>({
  name: 'groups_find_directory',
  area: AREA,
  variants: {
    'live, of a kind': { userId: EXAMPLE_UUID, id: EXAMPLE_UUID, kind: 'folder', live: true },
    'live, of a kind, locked for update': {
      userId: EXAMPLE_UUID,
      id: EXAMPLE_UUID,
      kind: 'group',
      live: true,
      lock: true,
    },
    'live, either kind': { userId: EXAMPLE_UUID, id: EXAMPLE_UUID, live: true },
    'live or trashed, of a kind': { userId: EXAMPLE_UUID, id: EXAMPLE_UUID, kind: 'folder', live: false },
    'live or trashed, either kind': { userId: EXAMPLE_UUID, id: EXAMPLE_UUID, live: false },
  },
  build: ({ userId, id, kind, live, lock }) =>
    sql`select * from directories where id = ${id} and user_id = ${userId}${kind === undefined ? sql.empty : sql` and kind = ${kind}`}${live ? sql` and deleted_at is null` : sql.empty}${lock ? sql` for update` : sql.empty}`,
});

const insertDirectory = statement<{ row: DirectoryRow }, never>({
  name: 'groups_insert_directory',
  area: AREA,
  variants: { 'a directory': { row: EXAMPLE_DIRECTORY } },
  build: ({ row }) =>
    sql`insert into directories (id, user_id, kind, side_system_id, sub_system_id, parent_id, name, description, color, created_at, updated_at, deleted_at)
      values (${row.id}, ${row.user_id}, ${row.kind}, ${row.side_system_id}, ${row.sub_system_id}, ${row.parent_id}, ${row.name}, ${row.description}, ${row.color}, ${row.created_at}, ${row.updated_at}, ${row.deleted_at})`,
});

const WRITTEN = sql`exists (select 1 from inserted)`;

/** A group or folder to create in the active write scope: the statement decides its side and sub system. */
export type NewDirectory = Omit<DirectoryRow, 'side_system_id' | 'sub_system_id'>;

/**
 * A group or folder created in one statement (docs/data-access.md, "Writes in one statement"): the
 * active write scope (writeScopeSql, share-locked), the row, the owner's default buckets for new
 * groups or folders (privacy_defaults_apply's insert, as a CTE) and `group.created` /
 * `folder.created`; nothing when the scope is gone (`scoped` false). Without a parent or members.
 */
const createDirectory = statement<
  { row: NewDirectory; events: readonly PendingEvent[] },
  { scoped: boolean; notified: unknown }
>({
  name: 'groups_create_directory',
  area: AREA,
  variants: {
    'a group': { row: { ...EXAMPLE_DIRECTORY, kind: 'group' }, events: [EXAMPLE_EVENT] },
    'a folder': { row: { ...EXAMPLE_DIRECTORY, kind: 'folder' }, events: [EXAMPLE_EVENT] },
    'a group or a folder, the request keyed (its response stored under the key)': {
      row: { ...EXAMPLE_DIRECTORY, kind: 'group' },
      events: keyedExample([EXAMPLE_EVENT]),
    },
  },
  build: ({ row, events }) => sql`with ${writeScopeSql(row.user_id)},
    inserted as (
      insert into directories (id, user_id, kind, side_system_id, sub_system_id, parent_id, name, description, color, created_at, updated_at, deleted_at)
      select ${row.id}, ${row.user_id}, ${row.kind}, w.side_system_id, w.sub_system_id, null, ${row.name}, ${row.description}, ${row.color}, ${row.created_at}, ${row.updated_at}, null
      from write_scope w
      returning id
    ),
    defaults as (${defaultsSql(row.user_id, row.kind === 'group' ? 'new_group' : 'new_directory', [row.id], row.created_at, WRITTEN)}),
    ${appendEvents(events, WRITTEN)}
    select ${WRITTEN} as scoped, ${notifiedColumn}`,
});

export type DirectoryChanges = Partial<
  Pick<DirectoryRow, 'name' | 'description' | 'color' | 'parent_id' | 'deleted_at'>
> & {
  updated_at: number;
};

const CASTS = ['text', 'uuid', 'bigint'] as const;
const CHANGE_COLUMNS: ReadonlyArray<readonly [keyof DirectoryChanges & string, (typeof CASTS)[number]]> = [
  ['name', 'text'],
  ['description', 'text'],
  ['color', 'text'],
  ['parent_id', 'uuid'],
  ['deleted_at', 'bigint'],
];

/** `column = case when <given> then <value> else column end`: one text whichever columns a change sets. */
function setIfGiven(
  changes: DirectoryChanges,
  column: keyof DirectoryChanges & string,
  cast: (typeof CASTS)[number],
): Sql {
  const given = changes[column] !== undefined;
  const id = sql.id(column);
  return sql`${id} = case when ${given}::boolean then ${given ? changes[column] : null}::${sql.constant(cast, CASTS)} else ${id} end`;
}

const updateDirectory = statement<{ userId: string; id: string; changes: DirectoryChanges }, DirectoryRow>({
  name: 'groups_update_directory',
  area: AREA,
  variants: { 'any change': { userId: EXAMPLE_UUID, id: EXAMPLE_UUID, changes: { updated_at: 0 } } },
  build: ({ userId, id, changes }) =>
    sql`update directories set ${sql.join(
      CHANGE_COLUMNS.map(([column, cast]) => setIfGiven(changes, column, cast)),
      ', ',
    )}, updated_at = ${changes.updated_at}
      where id = ${id} and user_id = ${userId} returning *`,
});

const allDirectories = statement<{ userId: string }, DirectoryRow>({
  name: 'groups_all_directories',
  area: AREA,
  variants: { 'the account': { userId: EXAMPLE_UUID } },
  build: ({ userId }) => sql`select * from directories where user_id = ${userId} order by name asc, id asc`,
});

const leaveOtherSideGroups = statement<{ userId: string; memberId: string; sideSystemId: string }, never>({
  name: 'groups_leave_other_side_groups',
  area: AREA,
  variants: { 'the member': { userId: EXAMPLE_UUID, memberId: EXAMPLE_UUID, sideSystemId: EXAMPLE_UUID } },
  build: ({ userId, memberId, sideSystemId }) =>
    sql`delete from group_members where member_id = ${memberId} and user_id = ${userId}
      and group_id in (select id from directories where user_id = ${userId} and kind = 'group' and not side_system_id = ${sideSystemId})`,
});

const memberIdsByGroup = statement<{ userId: string; groupIds: string[] }, { group_id: string; member_id: string }>({
  name: 'groups_member_ids',
  area: AREA,
  variants: { 'the groups': { userId: EXAMPLE_UUID, groupIds: [EXAMPLE_UUID] } },
  build: ({ userId, groupIds }) =>
    sql`select group_members.group_id, group_members.member_id from group_members
      inner join members on members.id = group_members.member_id
      where group_members.user_id = ${userId} and group_members.group_id = any (${groupIds}::uuid[]) and members.deleted_at is null
      order by group_members.added_at asc, group_members.member_id asc`,
});

const clearGroup = statement<{ userId: string; groupId: string }, never>({
  name: 'groups_clear_members',
  area: AREA,
  variants: { 'the group': { userId: EXAMPLE_UUID, groupId: EXAMPLE_UUID } },
  build: ({ userId, groupId }) => sql`delete from group_members where group_id = ${groupId} and user_id = ${userId}`,
});

/** The members in the order given, added at `now`, `now + 1` … so the group keeps that order. */
const addMembers = statement<{ userId: string; groupId: string; memberIds: string[]; now: number }, never>({
  name: 'groups_add_members',
  area: AREA,
  variants: { 'the members': { userId: EXAMPLE_UUID, groupId: EXAMPLE_UUID, memberIds: [EXAMPLE_UUID], now: 0 } },
  build: ({ userId, groupId, memberIds, now }) =>
    sql`insert into group_members (group_id, member_id, user_id, added_at)
      select ${groupId}::uuid, m.id, ${userId}::uuid, ${now}::bigint + m.ord - 1
      from unnest(${memberIds}::uuid[]) with ordinality as m (id, ord)`,
});

const listLayouts = statement<{ userId: string; directoryId?: string }, LayoutRow>({
  name: 'groups_list_layouts',
  area: AREA,
  variants: {
    'every layout': { userId: EXAMPLE_UUID },
    "a folder's": { userId: EXAMPLE_UUID, directoryId: EXAMPLE_UUID },
  },
  build: ({ userId, directoryId }) =>
    sql`select * from directory_layouts where user_id = ${userId} and deleted_at is null${directoryId ? sql` and directory_id = ${directoryId}` : sql.empty}
      order by created_at asc, id asc`,
});

const findLayout = statement<{ userId: string; id: string }, LayoutRow>({
  name: 'groups_find_layout',
  area: AREA,
  variants: { 'the layout': { userId: EXAMPLE_UUID, id: EXAMPLE_UUID } },
  build: ({ userId, id }) => sql`select * from directory_layouts where id = ${id} and user_id = ${userId}`,
});

const insertLayout = statement<{ row: LayoutRow }, never>({
  name: 'groups_insert_layout',
  area: AREA,
  variants: {
    'a layout': {
      row: {
        id: EXAMPLE_UUID,
        user_id: EXAMPLE_UUID,
        directory_id: null,
        name: '',
        item_ids: [],
        created_at: 0,
        updated_at: 0,
        deleted_at: null,
      },
    },
  },
  build: ({ row }) =>
    sql`insert into directory_layouts (id, user_id, directory_id, name, item_ids, created_at, updated_at, deleted_at)
      values (${row.id}, ${row.user_id}, ${row.directory_id}, ${row.name}, ${JSON.stringify(row.item_ids)}::jsonb, ${row.created_at}, ${row.updated_at}, ${row.deleted_at})`,
});

const setLayoutDeleted = statement<{ userId: string; id: string; deletedAt: number | null; now: number }, never>({
  name: 'groups_set_layout_deleted',
  area: AREA,
  variants: { 'trash or restore': { userId: EXAMPLE_UUID, id: EXAMPLE_UUID, deletedAt: null, now: 0 } },
  build: ({ userId, id, deletedAt, now }) =>
    sql`update directory_layouts set deleted_at = ${deletedAt}::bigint, updated_at = ${now} where id = ${id} and user_id = ${userId}`,
});

export const directoriesRepo = {
  /** createDirectory's statement: whether the row was written (`scoped` false: the active scope is gone). */
  async create(
    db: Knex,
    row: NewDirectory,
    events: readonly PendingEvent[],
  ): Promise<{ scoped: boolean; notified: unknown }> {
    return (await createDirectory(db, { row, events }))[0]!;
  },

  async findLive(db: Knex, userId: string, id: string, kind?: DirectoryKind): Promise<DirectoryRow | undefined> {
    return (await findDirectory(db, { userId, id, kind, live: true }))[0];
  },

  /** findLive, locking the row FOR UPDATE until the transaction ends (writes to one directory run one at a time). */
  async lockLive(
    trx: Knex.Transaction,
    userId: string,
    id: string,
    kind: DirectoryKind,
  ): Promise<DirectoryRow | undefined> {
    return (await findDirectory(trx, { userId, id, kind, live: true, lock: true }))[0];
  },

  async findAny(db: Knex, userId: string, id: string, kind?: DirectoryKind): Promise<DirectoryRow | undefined> {
    return (await findDirectory(db, { userId, id, kind, live: false }))[0];
  },

  async insert(db: Knex, row: DirectoryRow): Promise<void> {
    await insertDirectory(db, { row });
  },

  async update(db: Knex, userId: string, id: string, changes: DirectoryChanges): Promise<DirectoryRow> {
    const [row] = await updateDirectory(db, { userId, id, changes });
    return row!;
  },

  /** Every directory of the account (trashed included): trees are small and assembled in memory. */
  all(db: Knex, userId: string): Promise<DirectoryRow[]> {
    return allDirectories(db, { userId });
  },

  /** Removes the member from groups outside the given side system (used when a member moves). */
  async dropMemberFromOtherSideGroups(db: Knex, userId: string, memberId: string, sideSystemId: string): Promise<void> {
    await leaveOtherSideGroups(db, { userId, memberId, sideSystemId });
  },
};

export const groupMembersRepo = {
  async memberIdsByGroup(db: Knex, userId: string, groupIds: string[]): Promise<Map<string, string[]>> {
    const map = new Map<string, string[]>();
    if (groupIds.length === 0) return map;
    for (const row of await memberIdsByGroup(db, { userId, groupIds })) {
      const list = map.get(row.group_id) ?? [];
      list.push(row.member_id);
      map.set(row.group_id, list);
    }
    return map;
  },

  async replace(db: Knex, userId: string, groupId: string, memberIds: string[], now: number): Promise<void> {
    await clearGroup(db, { userId, groupId });
    if (memberIds.length) await addMembers(db, { userId, groupId, memberIds, now });
  },
};

export const layoutsRepo = {
  list(db: Knex, userId: string, directoryId?: string): Promise<LayoutRow[]> {
    return listLayouts(db, { userId, directoryId });
  },
  async findAny(db: Knex, userId: string, id: string): Promise<LayoutRow | undefined> {
    return (await findLayout(db, { userId, id }))[0];
  },
  async insert(db: Knex, row: LayoutRow): Promise<void> {
    await insertLayout(db, { row });
  },
  async setDeleted(db: Knex, userId: string, id: string, deletedAt: number | null, now: number): Promise<void> {
    await setLayoutDeleted(db, { userId, id, deletedAt, now });
  },
};

/** `and side_system_id = … [and sub_system_id = …]` for a read scope (nothing for the unified view). */
function scopeSql(scope: ReadScope): Sql {
  const side = scope.sideSystemId ? sql` and side_system_id = ${scope.sideSystemId}` : sql.empty;
  const sub = scope.subSystemId ? sql` and sub_system_id = ${scope.subSystemId}` : sql.empty;
  return sql`${side}${sub}`;
}

const SCOPE_VARIANTS = {
  'unified view': { sideSystemId: null, subSystemId: null },
  'a side system': { sideSystemId: EXAMPLE_UUID, subSystemId: null },
  'a sub system': { sideSystemId: EXAMPLE_UUID, subSystemId: EXAMPLE_UUID },
} satisfies Record<string, ReadScope>;

export type TreeMemberRow = Pick<MemberRow, 'id' | 'name' | 'display_name' | 'archived_at' | 'avatar' | 'directory_id'>;

/** The live members of the scope with what the tree shows of them, by display name. */
const treeMembers = statement<{ userId: string; scope: ReadScope }, TreeMemberRow>({
  name: 'groups_tree_members',
  area: AREA,
  variants: Object.fromEntries(
    Object.entries(SCOPE_VARIANTS).map(([label, scope]) => [label, { userId: EXAMPLE_UUID, scope }]),
  ),
  build: ({ userId, scope }) =>
    sql`select id, name, display_name, archived_at, avatar, directory_id from members
      where user_id = ${userId} and deleted_at is null${scopeSql(scope)}
      order by lower(coalesce(nullif(display_name, ''), name)), id`,
});

/** Which of the ids are live members of the account, with their side system. */
const liveMembers = statement<{ userId: string; ids: string[] }, Pick<MemberRow, 'id' | 'side_system_id'>>({
  name: 'groups_live_members',
  area: AREA,
  variants: { 'the ids': { userId: EXAMPLE_UUID, ids: [EXAMPLE_UUID] } },
  build: ({ userId, ids }) =>
    sql`select id, side_system_id from members where user_id = ${userId} and id = any (${ids}::uuid[]) and deleted_at is null`,
});

/** The members a group may hold and the tree shows: member rows, read here for this area's reads. */
export const groupMemberRowsRepo = {
  tree(db: Knex, userId: string, scope: ReadScope): Promise<TreeMemberRow[]> {
    return treeMembers(db, { userId, scope });
  },

  /** The ids that are not live members of the account in `sideSystemId`, in input order (no query for none). */
  async notInSide(db: Knex, userId: string, ids: string[], sideSystemId: string): Promise<string[]> {
    if (ids.length === 0) return [];
    const found = await liveMembers(db, { userId, ids });
    const ok = new Set(found.filter((m) => m.side_system_id === sideSystemId).map((m) => m.id));
    return ids.filter((id) => !ok.has(id));
  },
};

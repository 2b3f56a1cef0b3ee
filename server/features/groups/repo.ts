import type { Knex } from 'knex';
import type { ReadScope } from '../../access/systemScope.ts';
import type { MemberRow } from '../../core/members.ts';
import { type Sql, sql } from '../../db/sql.ts';
import { EXAMPLE_UUID, statement } from '../../db/statements.ts';

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

export const directoriesRepo = {
  findLive(db: Knex, userId: string, id: string, kind?: DirectoryKind): Promise<DirectoryRow | undefined> {
    const q = db('directories').where({ id, user_id: userId }).whereNull('deleted_at');
    if (kind) q.where({ kind });
    return q.first();
  },

  /** findLive, locking the row FOR UPDATE until the transaction ends (writes to one directory run one at a time). */
  lockLive(trx: Knex.Transaction, userId: string, id: string, kind: DirectoryKind): Promise<DirectoryRow | undefined> {
    return trx('directories').where({ id, user_id: userId, kind }).whereNull('deleted_at').forUpdate().first();
  },

  findAny(db: Knex, userId: string, id: string, kind?: DirectoryKind): Promise<DirectoryRow | undefined> {
    const q = db('directories').where({ id, user_id: userId });
    if (kind) q.where({ kind });
    return q.first();
  },

  async insert(db: Knex, row: DirectoryRow): Promise<void> {
    await db('directories').insert(row);
  },

  async update(db: Knex, userId: string, id: string, changes: Partial<DirectoryRow>): Promise<DirectoryRow> {
    const [row] = await db('directories').where({ id, user_id: userId }).update(changes).returning('*');
    return row as DirectoryRow;
  },

  /** Every directory of the account (trashed included): trees are small and assembled in memory. */
  all(db: Knex, userId: string): Promise<DirectoryRow[]> {
    return db('directories')
      .where({ user_id: userId })
      .orderBy([{ column: 'name' }, { column: 'id' }]);
  },

  /** Removes the member from groups outside the given side system (used when a member moves). */
  async dropMemberFromOtherSideGroups(db: Knex, userId: string, memberId: string, sideSystemId: string): Promise<void> {
    await db('group_members')
      .where({ member_id: memberId, user_id: userId })
      .whereIn(
        'group_id',
        db('directories')
          .select('id')
          .where({ user_id: userId, kind: 'group' })
          .whereNot({ side_system_id: sideSystemId }),
      )
      .delete();
  },
};

export const groupMembersRepo = {
  async memberIdsByGroup(db: Knex, userId: string, groupIds: string[]): Promise<Map<string, string[]>> {
    const map = new Map<string, string[]>();
    if (groupIds.length === 0) return map;
    const rows: Array<{ group_id: string; member_id: string }> = await db('group_members')
      .join('members', 'members.id', 'group_members.member_id')
      .where('group_members.user_id', userId)
      .whereIn('group_members.group_id', groupIds)
      .whereNull('members.deleted_at')
      .select('group_members.group_id', 'group_members.member_id')
      .orderBy([{ column: 'group_members.added_at' }, { column: 'group_members.member_id' }]);
    for (const row of rows) {
      const list = map.get(row.group_id) ?? [];
      list.push(row.member_id);
      map.set(row.group_id, list);
    }
    return map;
  },

  async replace(db: Knex, userId: string, groupId: string, memberIds: string[], now: number): Promise<void> {
    await db('group_members').where({ group_id: groupId, user_id: userId }).delete();
    if (memberIds.length) {
      await db('group_members').insert(
        memberIds.map((memberId, i) => ({
          group_id: groupId,
          member_id: memberId,
          user_id: userId,
          added_at: now + i,
        })),
      );
    }
  },
};

export const layoutsRepo = {
  list(db: Knex, userId: string, directoryId?: string): Promise<LayoutRow[]> {
    const q = db('directory_layouts').where({ user_id: userId }).whereNull('deleted_at');
    if (directoryId) q.where({ directory_id: directoryId });
    return q.orderBy([{ column: 'created_at' }, { column: 'id' }]);
  },
  findAny(db: Knex, userId: string, id: string): Promise<LayoutRow | undefined> {
    return db('directory_layouts').where({ id, user_id: userId }).first();
  },
  async insert(db: Knex, row: LayoutRow): Promise<void> {
    await db('directory_layouts').insert({ ...row, item_ids: JSON.stringify(row.item_ids) });
  },
  async setDeleted(db: Knex, userId: string, id: string, deletedAt: number | null, now: number): Promise<void> {
    await db('directory_layouts').where({ id, user_id: userId }).update({ deleted_at: deletedAt, updated_at: now });
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

import type { Knex } from 'knex';

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

import type { Knex } from 'knex';
import { applyScope, type ReadScope } from '../../access/systemScope.ts';

export interface EntryRow {
  id: string;
  user_id: string;
  side_system_id: string;
  sub_system_id: string | null;
  title: string | null;
  content: string;
  member_id: string | null;
  member_ids: string[] | null;
  created_at: number;
  updated_at: number;
  deleted_at: number | null;
}

export const entriesRepo = {
  find(db: Knex, userId: string, id: string): Promise<EntryRow | undefined> {
    return db('entries').where({ id, user_id: userId }).first();
  },

  lock(trx: Knex.Transaction, userId: string, id: string): Promise<EntryRow | undefined> {
    return trx('entries').where({ id, user_id: userId }).forUpdate().first();
  },

  async insert(db: Knex, row: EntryRow): Promise<void> {
    await db('entries').insert({ ...row, member_ids: row.member_ids ? JSON.stringify(row.member_ids) : null });
  },

  async update(db: Knex, userId: string, id: string, changes: Partial<EntryRow>): Promise<EntryRow> {
    const out: Record<string, unknown> = { ...changes };
    if ('member_ids' in changes) out.member_ids = changes.member_ids ? JSON.stringify(changes.member_ids) : null;
    const [row] = await db('entries').where({ id, user_id: userId }).update(out).returning('*');
    return row as EntryRow;
  },

  /** Replaces the link rows (the union of the legacy link and the list) of one entry. */
  async setLinks(db: Knex, userId: string, entryId: string, memberIds: string[]): Promise<void> {
    await db('entry_members').where({ entry_id: entryId, user_id: userId }).delete();
    if (memberIds.length) {
      await db('entry_members').insert(memberIds.map((memberId, position) => ({ entry_id: entryId, member_id: memberId, user_id: userId, position })));
    }
  },

  /** Active entries of the scope, newest update first then by id. */
  list(db: Knex, userId: string, scope: ReadScope, limit: number, memberId?: string): Promise<EntryRow[]> {
    const q = db('entries').where('entries.user_id', userId).whereNull('entries.deleted_at');
    applyScope(q, scope, 'entries');
    if (memberId) {
      q.whereExists((sub) => sub.select(db.raw('1')).from('entry_members as em').where('em.user_id', userId).where('em.member_id', memberId).whereRaw('em.entry_id = entries.id'));
    }
    return q.select('entries.*').orderBy([{ column: 'entries.updated_at', order: 'desc' }, { column: 'entries.id' }]).limit(limit);
  },

  /** Linked member ids per entry, in link order, for many entries in one query. */
  async linksOf(db: Knex, userId: string, entryIds: string[]): Promise<Map<string, string[]>> {
    const map = new Map<string, string[]>();
    if (entryIds.length === 0) return map;
    const rows: Array<{ entry_id: string; member_id: string }> = await db('entry_members')
      .where({ user_id: userId })
      .whereIn('entry_id', entryIds)
      .orderBy([{ column: 'entry_id' }, { column: 'position' }])
      .select('entry_id', 'member_id');
    for (const row of rows) map.set(row.entry_id, [...(map.get(row.entry_id) ?? []), row.member_id]);
    return map;
  },

  /** Active entries linked to each member (excluding one entry), for the plan's note cap. */
  async activeCounts(db: Knex, userId: string, memberIds: string[], excludeEntryId?: string): Promise<Map<string, number>> {
    const map = new Map<string, number>();
    if (memberIds.length === 0) return map;
    const q = db('entry_members as em')
      .join('entries as e', 'e.id', 'em.entry_id')
      .where('em.user_id', userId)
      .whereIn('em.member_id', memberIds)
      .whereNull('e.deleted_at')
      .groupBy('em.member_id')
      .select('em.member_id')
      .count<Array<{ member_id: string; count: number }>>('* as count');
    if (excludeEntryId) q.whereNot('e.id', excludeEntryId);
    for (const row of await q) map.set(row.member_id, Number(row.count));
    return map;
  },
};

/**
 * Permanent deletion of trashed items, shared by POST /trash/purge, DELETE /entries?permanent and
 * the retention job. All-or-nothing: every item is checked before anything is deleted, and the
 * caller's transaction decides the commit. What depends on an item goes with it through the
 * foreign keys (see the migrations); what only mentions it is cleaned here.
 */
import type { Knex } from 'knex';
import { badRequest } from '../../core/errors.ts';
import type { MediaRef } from '../members/index.ts';

export const TRASH_TYPES = [
  'entry',
  'directory',
  'member',
  'directoryLayout',
  'customFieldDefinition',
  'frontSession',
] as const;
export type TrashType = (typeof TRASH_TYPES)[number];

export const TRASH_TABLES: Record<TrashType, string> = {
  entry: 'entries',
  directory: 'directories',
  member: 'members',
  directoryLayout: 'directory_layouts',
  customFieldDefinition: 'custom_field_definitions',
  frontSession: 'front_sessions',
};

export interface TrashItem {
  type: TrashType;
  id: string;
}

export interface PurgeResult {
  purged: number;
  /** Storage objects that belonged only to purged items; delete them after the commit. */
  objectKeys: string[];
}

export async function purgeItems(trx: Knex.Transaction, userId: string, items: TrashItem[]): Promise<PurgeResult> {
  const byType = new Map<TrashType, Set<string>>();
  for (const item of items) {
    const ids = byType.get(item.type) ?? new Set<string>();
    ids.add(item.id);
    byType.set(item.type, ids);
  }
  const objectKeys: string[] = [];
  // Check everything first: one bad item means nothing is purged.
  const found = new Map<
    TrashType,
    Array<{ id: string; deleted_at: number | null; avatar?: MediaRef | null; banner?: MediaRef | null }>
  >();
  for (const [type, idSet] of byType) {
    const ids = [...idSet];
    const columns = type === 'member' ? ['id', 'deleted_at', 'avatar', 'banner'] : ['id', 'deleted_at'];
    const rows = await trx(TRASH_TABLES[type])
      .where({ user_id: userId })
      .whereIn('id', ids)
      .forUpdate()
      .select(columns);
    const seen = new Map(rows.map((r) => [r.id as string, r]));
    for (const id of ids) {
      const row = seen.get(id);
      if (!row) throw badRequest(`${type} ${id} not found`);
      if (row.deleted_at === null) throw badRequest(`${type} ${id} is not in the trash`);
    }
    found.set(type, rows);
  }
  let purged = 0;
  for (const [type, rows] of found) {
    const ids = rows.map((r) => r.id);
    if (type === 'member') {
      for (const row of rows)
        for (const ref of [row.avatar, row.banner]) if (ref?.source === 'object') objectKeys.push(ref.key);
      // Notes keep existing; the purged members leave their explicit member lists. The notes are
      // found through the link table's (user_id, member_id) index, never by scanning the
      // account's notes; this runs before the delete cascades the link rows away.
      await trx.raw(
        `update entries e set member_ids = e.member_ids - ?::text[]
          where e.user_id = ?
            and e.id in (select em.entry_id from entry_members em where em.user_id = ? and em.member_id = any(?::uuid[]))
            and jsonb_exists_any(e.member_ids, ?::text[])`,
        [ids, userId, userId, ids, ids],
      );
    }
    purged += await trx(TRASH_TABLES[type]).where({ user_id: userId }).whereIn('id', ids).delete();
  }
  return { purged, objectKeys };
}

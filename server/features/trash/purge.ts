/**
 * Permanent deletion of trashed items, shared by POST /trash/purge, DELETE /entries?permanent and
 * the retention job. All-or-nothing: every item is checked before anything is deleted, and the
 * caller's transaction decides the commit. What depends on an item goes with it through the
 * foreign keys (see the migrations); what only mentions it is cleaned here.
 */
import type { Knex } from 'knex';
import { badRequest } from '../../core/errors.ts';
import { type LockedItem, trashRepo, type TrashType } from './repo.ts';

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
    // Ids are compared as stored (lower case), whatever case the caller wrote them in.
    ids.add(item.id.toLowerCase());
    byType.set(item.type, ids);
  }
  const objectKeys: string[] = [];
  // Check everything first: one bad item means nothing is purged.
  const found = new Map<TrashType, LockedItem[]>();
  for (const [type, idSet] of byType) {
    const ids = [...idSet];
    const rows = await trashRepo.lockItems(trx, userId, type, ids);
    const seen = new Map(rows.map((r) => [r.id, r]));
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
      // Notes keep existing; the purged members leave their explicit member lists.
      await trashRepo.unlinkMembers(trx, userId, ids);
    }
    purged += await trashRepo.deleteItems(trx, userId, type, ids);
  }
  return { purged, objectKeys };
}

/** GET /trash, POST /trash/purge and the per-account retention setting. */
import { type EventEntry, inTransaction, oneStatement, ownerOf, type ServiceContext } from '../../core/context.ts';
import type { Knex } from 'knex';
import type { Logger } from 'pino';
import type { components } from '../../../generated/api.d.ts';
import type { ObjectStorage } from '../../storage/types.ts';
import { purgeItems, type TrashItem } from './purge.ts';
import { TRASH_TYPES, type TrashRowRaw, trashRepo, type TrashType } from './repo.ts';

type Schemas = components['schemas'];
export const DAY_MS = 86_400_000;

/** The account's retention in days: its own setting, else the server's default. */
async function retentionDays(db: Knex, userId: string, fallback: number): Promise<number> {
  return (await trashRepo.retentionDays(db, userId)) ?? fallback;
}

/**
 * Readable paths for one page of trash rows: side system (and sub system) name, then the folder
 * chain. One statement fetches only what the page mentions: the folder chains of the page's
 * directories (recursive, up the parents) and the names of the side and sub systems involved,
 * including those of a layout's folder.
 */
async function locator(
  db: Knex,
  userId: string,
  rows: TrashRowRaw[],
): Promise<(row: TrashRowRaw) => string | undefined> {
  const dirIds = [...new Set(rows.map((r) => r.directory_id).filter((id): id is string => id !== null))];
  const sideIds = [...new Set(rows.map((r) => r.side_system_id).filter((id): id is string => id !== null))];
  const subIds = [...new Set(rows.map((r) => r.sub_system_id).filter((id): id is string => id !== null))];
  const parts = await trashRepo.locations(db, userId, { dirIds, sideIds, subIds });
  const sideName = new Map<string, string>();
  const subName = new Map<string, string>();
  // Folder id → its chain of names from the top, and the scope of the folder itself.
  const chains = new Map<string, Array<{ depth: number; name: string }>>();
  const folderScope = new Map<string, { side: string | null; sub: string | null }>();
  for (const part of parts) {
    if (part.kind === 'side') sideName.set(part.id, part.name);
    else if (part.kind === 'sub') subName.set(part.id, part.name);
    else {
      chains.set(part.id, [...(chains.get(part.id) ?? []), { depth: Number(part.depth), name: part.name }]);
      if (Number(part.depth) === 0) folderScope.set(part.id, { side: part.side_system_id, sub: part.sub_system_id });
    }
  }
  const scopePath = (side: string | null, sub: string | null) =>
    [side && sideName.get(side), sub && subName.get(sub)].filter((x): x is string => Boolean(x));
  const folderChain = (id: string | null): string[] =>
    id ? (chains.get(id) ?? []).sort((x, y) => y.depth - x.depth).map((p) => p.name) : [];
  return (row) => {
    switch (row.type) {
      case 'entry':
      case 'member':
      case 'directory': {
        const parts = [...scopePath(row.side_system_id, row.sub_system_id), ...folderChain(row.directory_id)];
        return parts.length ? parts.join(' / ') : undefined;
      }
      case 'directoryLayout': {
        if (!row.directory_id) return 'Top level';
        const scope = folderScope.get(row.directory_id);
        return scope ? [...scopePath(scope.side, scope.sub), ...folderChain(row.directory_id)].join(' / ') : undefined;
      }
      default:
        return undefined;
    }
  };
}

export async function listTrash(
  ctx: ServiceContext,
  query: { type?: TrashType; limit?: number },
): Promise<Schemas['TrashRow'][]> {
  const { db } = ctx;
  const defaultRetentionDays = ctx.config.trashRetentionDays;
  const userId = ownerOf(ctx);
  const limit = query.limit ?? 200;
  const types = query.type ? [query.type] : TRASH_TYPES;
  const rows = await trashRepo.list(db, userId, types, limit);
  if (rows.length === 0) return [];
  const [days, locate] = await Promise.all([
    retentionDays(db, userId, defaultRetentionDays),
    locator(db, userId, rows),
  ]);
  return rows.map((row) => {
    const out: Schemas['TrashRow'] = {
      type: row.type,
      id: row.id,
      name: row.name,
      deletedAt: Number(row.deleted_at),
      purgeAt: Number(row.deleted_at) + days * DAY_MS,
    };
    const location = locate(row);
    if (location) out.originalLocation = location;
    return out;
  });
}

/** Deletes storage objects of purged items; an orphan wastes space but loses nothing, so failures are logged only. */
export async function dropObjects(storage: ObjectStorage | null, keys: string[], log: Logger): Promise<void> {
  if (!storage) return;
  for (const key of keys) {
    try {
      await storage.delete(key);
    } catch (err) {
      log.warn({ err, key }, 'could not delete a purged object');
    }
  }
}

/** The event of an item purged for good (by the route, or by the retention job). */
export function purgedEvent(type: TrashType, id: string): EventEntry {
  switch (type) {
    case 'entry':
      return { type: 'entry.purged', area: 'entries', data: { id } };
    case 'member':
      return { type: 'member.deleted', area: 'members', data: { memberId: id } };
    case 'directory':
    case 'directoryLayout':
      return { type: 'trash.purged', area: 'groups', data: { id, kind: type } };
    case 'customFieldDefinition':
      return { type: 'trash.purged', area: 'customFields', data: { id, kind: type } };
    case 'frontSession':
      return { type: 'trash.purged', area: 'front', data: { id, kind: type } };
  }
}

/** Purges items for good (audited: `trash.purge` with the purged items; one event each). */
export async function purge(ctx: ServiceContext, items: TrashItem[]): Promise<void> {
  if (items.length === 0) return;
  const result = await inTransaction(ctx, async (tx) => {
    const purged = await purgeItems(tx.db, ownerOf(tx), items);
    await tx.audit.record(tx, {
      action: 'trash.purge',
      targetType: 'trash',
      targetId: null,
      detail: { items: items.slice(0, 20), count: items.length },
    });
    const seen = new Map<string, EventEntry>();
    for (const item of items)
      seen.set(`${item.type} ${item.id.toLowerCase()}`, purgedEvent(item.type, item.id.toLowerCase()));
    await tx.events.emitMany(tx, [...seen.values()]);
    return purged;
  });
  await dropObjects(ctx.storage, result.objectKeys, ctx.log);
}

export async function getSettings(ctx: ServiceContext): Promise<Schemas['TrashSettings']> {
  const defaultDays = ctx.config.trashRetentionDays;
  return { retentionDays: await retentionDays(ctx.db, ownerOf(ctx), defaultDays), defaultRetentionDays: defaultDays };
}

/** Sets the account's retention (audited: `trash.settings.update`, the old and new value). */
export async function updateSettings(ctx: ServiceContext, days: number | null): Promise<Schemas['TrashSettings']> {
  const userId = ownerOf(ctx);
  // One statement: the account row locked and updated, and the audit row with the value it replaced.
  const audit = ctx.audit.row(ctx, { action: 'trash.settings.update', targetType: 'account', targetId: userId });
  const stored = await oneStatement(ctx, (db) => trashRepo.setRetentionDays(db, userId, days, audit));
  const defaultDays = ctx.config.trashRetentionDays;
  return { retentionDays: stored ?? defaultDays, defaultRetentionDays: defaultDays };
}

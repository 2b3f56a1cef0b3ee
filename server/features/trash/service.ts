/** GET /trash, POST /trash/purge and the per-account retention setting. */
import { inTransaction, ownerOf, type ServiceContext } from '../../core/context.ts';
import type { Knex } from 'knex';
import type { Logger } from 'pino';
import type { components } from '../../../generated/api.d.ts';
import type { ObjectStorage } from '../../storage/types.ts';
import { purgeItems, TRASH_TYPES, type TrashItem, type TrashType } from './purge.ts';

type Schemas = components['schemas'];
export const DAY_MS = 86_400_000;

/**
 * One SELECT per type with the same named columns (a single one runs alone when `type` is given),
 * each ordered and limited on its own so it can use the table's (user_id, deleted_at) trash index
 * where there is one (entries, directories, members, front_sessions; directory layouts and custom
 * field definitions have none, and an account holds few of them).
 */
const BRANCH: Record<TrashType, string> = {
  entry: `select 'entry' as type, e.id, coalesce(nullif(e.title, ''), left(e.content, 80)) as name, e.deleted_at,
            e.side_system_id, e.sub_system_id, null::uuid as directory_id
          from entries e where e.user_id = ? and e.deleted_at is not null`,
  directory: `select 'directory' as type, d.id, d.name, d.deleted_at, d.side_system_id, d.sub_system_id, d.parent_id as directory_id
          from directories d where d.user_id = ? and d.deleted_at is not null`,
  member: `select 'member' as type, m.id, coalesce(nullif(m.display_name, ''), m.name) as name, m.deleted_at, m.side_system_id, m.sub_system_id, m.directory_id
          from members m where m.user_id = ? and m.deleted_at is not null`,
  directoryLayout: `select 'directoryLayout' as type, l.id, l.name, l.deleted_at, null::uuid as side_system_id, null::uuid as sub_system_id, l.directory_id
          from directory_layouts l where l.user_id = ? and l.deleted_at is not null`,
  customFieldDefinition: `select 'customFieldDefinition' as type, f.id, f.name, f.deleted_at, null::uuid as side_system_id, null::uuid as sub_system_id, null::uuid as directory_id
          from custom_field_definitions f where f.user_id = ? and f.deleted_at is not null`,
  frontSession: `select 'frontSession' as type, s.id,
            coalesce(nullif(m.display_name, ''), m.name) || ' — front session from '
              || to_char(to_timestamp(s.started_at / 1000.0) at time zone 'UTC', 'YYYY-MM-DD HH24:MI') || ' UTC' as name,
            s.deleted_at, s.side_system_id, s.sub_system_id, null::uuid as directory_id
          from front_sessions s join members m on m.id = s.member_id where s.user_id = ? and s.deleted_at is not null`,
};

interface TrashRowRaw {
  type: TrashType;
  id: string;
  name: string;
  deleted_at: number;
  side_system_id: string | null;
  sub_system_id: string | null;
  directory_id: string | null;
}

export async function retentionDays(db: Knex, userId: string, fallback: number): Promise<number> {
  const row = await db('accounts').where({ id: userId }).first('trash_retention_days');
  return row?.trash_retention_days ?? fallback;
}

interface LocationPart {
  kind: 'side' | 'sub' | 'dir';
  id: string;
  name: string;
  depth: number;
  side_system_id: string | null;
  sub_system_id: string | null;
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
  const result = await db.raw<{ rows: LocationPart[] }>(
    `with recursive chain (start_id, id, name, parent_id, side_system_id, sub_system_id, depth) as (
       select d.id, d.id, d.name, d.parent_id, d.side_system_id, d.sub_system_id, 0
         from directories d where d.user_id = ? and d.id = any(?::uuid[])
       union all
       select c.start_id, p.id, p.name, p.parent_id, p.side_system_id, p.sub_system_id, c.depth + 1
         from chain c join directories p on p.user_id = ? and p.id = c.parent_id
        where c.depth < 100
     )
     select 'dir' as kind, start_id as id, name, depth, side_system_id, sub_system_id from chain
     union all
     select 'side', id, name, 0, null, null from side_systems
      where user_id = ? and (id = any(?::uuid[]) or id in (select side_system_id from chain where depth = 0))
     union all
     select 'sub', id, name, 0, null, null from sub_systems
      where user_id = ? and (id = any(?::uuid[]) or id in (select sub_system_id from chain where depth = 0))`,
    [userId, dirIds, userId, userId, sideIds, userId, subIds],
  );
  const sideName = new Map<string, string>();
  const subName = new Map<string, string>();
  // Folder id → its chain of names from the top, and the scope of the folder itself.
  const chains = new Map<string, Array<{ depth: number; name: string }>>();
  const folderScope = new Map<string, { side: string | null; sub: string | null }>();
  for (const part of result.rows) {
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
  const types = query.type ? [query.type] : [...TRASH_TYPES];
  const sql = types.map((t) => `(${BRANCH[t]} order by 4 desc, 2 limit ${limit})`).join(' union all ');
  const result = await db.raw<{ rows: TrashRowRaw[] }>(
    `select * from (${sql}) t order by deleted_at desc, id limit ${limit}`,
    types.map(() => userId),
  );
  const rows = result.rows;
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

/** Purges items for good (audited: `trash.purge` with the purged items). */
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
  await inTransaction(ctx, async (tx) => {
    const before = await tx
      .db('accounts')
      .where({ id: ownerOf(tx) })
      .forUpdate()
      .first('trash_retention_days');
    await tx
      .db('accounts')
      .where({ id: ownerOf(tx) })
      .update({ trash_retention_days: days });
    await tx.audit.record(tx, {
      action: 'trash.settings.update',
      targetType: 'account',
      targetId: ownerOf(tx),
      detail: { retentionDays: { from: before?.trash_retention_days ?? null, to: days } },
    });
  });
  return getSettings(ctx);
}

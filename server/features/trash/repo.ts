/**
 * The SQL of the trash: the trashed rows of every kind (entries, folders and groups, members,
 * folder layouts, custom field definitions, front sessions), their purge and the account's
 * retention setting. The trash reads and deletes rows of other areas' tables by their trash columns
 * (`user_id`, `deleted_at`) only; the statements are its own, committed as generated/sql/trash.sql.
 */
import type { Knex } from 'knex';
import { auditInsertSql, EXAMPLE_AUDIT, type PendingAudit } from '../../audit/index.ts';
import { type Sql, sql } from '../../db/sql.ts';
import { EXAMPLE_UUID, statement } from '../../db/statements.ts';
import type { MediaRef } from '../members/index.ts';

const AREA = 'trash';

export const TRASH_TYPES = [
  'entry',
  'directory',
  'member',
  'directoryLayout',
  'customFieldDefinition',
  'frontSession',
] as const;
export type TrashType = (typeof TRASH_TYPES)[number];

const TRASH_TABLES: Record<TrashType, string> = {
  entry: 'entries',
  directory: 'directories',
  member: 'members',
  directoryLayout: 'directory_layouts',
  customFieldDefinition: 'custom_field_definitions',
  frontSession: 'front_sessions',
};

const table = (type: TrashType): Sql => sql.id(TRASH_TABLES[type]);

/** One variant per type (the table is part of the text), for statements over one type's table. */
function perType<P>(params: (type: TrashType) => P): Record<string, P> {
  return Object.fromEntries(TRASH_TYPES.map((type) => [type, params(type)]));
}

// ---- GET /trash ----

export interface TrashRowRaw {
  type: TrashType;
  id: string;
  name: string;
  deleted_at: number;
  side_system_id: string | null;
  sub_system_id: string | null;
  directory_id: string | null;
}

/**
 * One SELECT per type with the same named columns, each ordered and limited on its own so it can
 * use the table's (user_id, deleted_at) trash index where there is one (entries, directories,
 * members, front_sessions; directory layouts and custom field definitions have none, and an account
 * holds few of them).
 */
function branch(type: TrashType, userId: string): Sql {
  switch (type) {
    case 'entry':
      return sql`select 'entry' as type, e.id, coalesce(nullif(e.title, ''), left(e.content, 80)) as name, e.deleted_at,
            e.side_system_id, e.sub_system_id, null::uuid as directory_id
          from entries e where e.user_id = ${userId} and e.deleted_at is not null`;
    case 'directory':
      return sql`select 'directory' as type, d.id, d.name, d.deleted_at, d.side_system_id, d.sub_system_id, d.parent_id as directory_id
          from directories d where d.user_id = ${userId} and d.deleted_at is not null`;
    case 'member':
      return sql`select 'member' as type, m.id, coalesce(nullif(m.display_name, ''), m.name) as name, m.deleted_at, m.side_system_id, m.sub_system_id, m.directory_id
          from members m where m.user_id = ${userId} and m.deleted_at is not null`;
    case 'directoryLayout':
      return sql`select 'directoryLayout' as type, l.id, l.name, l.deleted_at, null::uuid as side_system_id, null::uuid as sub_system_id, l.directory_id
          from directory_layouts l where l.user_id = ${userId} and l.deleted_at is not null`;
    case 'customFieldDefinition':
      return sql`select 'customFieldDefinition' as type, f.id, f.name, f.deleted_at, null::uuid as side_system_id, null::uuid as sub_system_id, null::uuid as directory_id
          from custom_field_definitions f where f.user_id = ${userId} and f.deleted_at is not null`;
    case 'frontSession':
      return sql`select 'frontSession' as type, s.id,
            coalesce(nullif(m.display_name, ''), m.name) || ' — front session from '
              || to_char(to_timestamp(s.started_at / 1000.0) at time zone 'UTC', 'YYYY-MM-DD HH24:MI') || ' UTC' as name,
            s.deleted_at, s.side_system_id, s.sub_system_id, null::uuid as directory_id
          from front_sessions s join members m on m.id = s.member_id where s.user_id = ${userId} and s.deleted_at is not null`;
  }
}

/** The newest `limit` trashed rows of the account: of every type (one branch each), or of one. */
const trashList = statement<{ userId: string; types: readonly TrashType[]; limit: number }, TrashRowRaw>({
  name: 'trash_list',
  area: AREA,
  variants: {
    'every type': { userId: EXAMPLE_UUID, types: TRASH_TYPES, limit: 200 },
    ...perType((type) => ({ userId: EXAMPLE_UUID, types: [type], limit: 200 })),
  },
  build: ({ userId, types, limit }) => {
    const branches = types.map((t) => sql`(${branch(t, userId)} order by 4 desc, 2 limit ${limit}::int)`);
    return sql`select * from (${sql.join(branches, ' union all ')}) t order by deleted_at desc, id limit ${limit}::int`;
  },
});

export interface LocationPart {
  kind: 'side' | 'sub' | 'dir';
  id: string;
  name: string;
  depth: number;
  side_system_id: string | null;
  sub_system_id: string | null;
}

/**
 * What the paths of one page of trash rows mention, in one statement: the folder chains of the
 * page's folders (recursive, up the parents; `dir` rows, one per folder of a chain with its depth),
 * and the names of the side and sub systems involved, including those of a chain's first folder.
 */
const trashLocations = statement<
  { userId: string; dirIds: readonly string[]; sideIds: readonly string[]; subIds: readonly string[] },
  LocationPart
>({
  name: 'trash_locations',
  area: AREA,
  variants: { 'a page of rows': { userId: EXAMPLE_UUID, dirIds: [], sideIds: [], subIds: [] } },
  build: ({
    userId,
    dirIds,
    sideIds,
    subIds,
  }) => sql`with recursive chain (start_id, id, name, parent_id, side_system_id, sub_system_id, depth) as (
       select d.id, d.id, d.name, d.parent_id, d.side_system_id, d.sub_system_id, 0
         from directories d where d.user_id = ${userId} and d.id = any(${[...dirIds]}::uuid[])
       union all
       select c.start_id, p.id, p.name, p.parent_id, p.side_system_id, p.sub_system_id, c.depth + 1
         from chain c join directories p on p.user_id = ${userId} and p.id = c.parent_id
        where c.depth < 100
     )
     select 'dir' as kind, start_id as id, name, depth, side_system_id, sub_system_id from chain
     union all
     select 'side', id, name, 0, null, null from side_systems
      where user_id = ${userId} and (id = any(${[...sideIds]}::uuid[]) or id in (select side_system_id from chain where depth = 0))
     union all
     select 'sub', id, name, 0, null, null from sub_systems
      where user_id = ${userId} and (id = any(${[...subIds]}::uuid[]) or id in (select sub_system_id from chain where depth = 0))`,
});

// ---- purge ----

export interface LockedItem {
  id: string;
  deleted_at: number | null;
  avatar?: MediaRef | null;
  banner?: MediaRef | null;
}

/** The account's rows of one type among `ids`, locked for the purge (a member with its images). */
const trashLockItems = statement<{ type: TrashType; userId: string; ids: readonly string[] }, LockedItem>({
  name: 'trash_lock_items',
  area: AREA,
  variants: perType((type) => ({ type, userId: EXAMPLE_UUID, ids: [] })),
  build: ({ type, userId, ids }) =>
    sql`select id, deleted_at${type === 'member' ? sql`, avatar, banner` : sql.empty} from ${table(type)}
      where user_id = ${userId} and id = any(${[...ids]}::uuid[])
      for update`,
});

/**
 * The purged members leave the explicit member lists of the notes (which stay). The notes are
 * found through the link table's (user_id, member_id) index, never by scanning the account's
 * notes; this runs before the delete cascades the link rows away.
 */
const trashUnlinkMembers = statement<{ userId: string; memberIds: readonly string[] }, never>({
  name: 'trash_unlink_purged_members',
  area: AREA,
  variants: { 'purged members': { userId: EXAMPLE_UUID, memberIds: [] } },
  build: ({ userId, memberIds }) => sql`update entries e set member_ids = e.member_ids - ${[...memberIds]}::text[]
          where e.user_id = ${userId}
            and e.id in (select em.entry_id from entry_members em where em.user_id = ${userId} and em.member_id = any(${[...memberIds]}::uuid[]))
            and jsonb_exists_any(e.member_ids, ${[...memberIds]}::text[])`,
});

/** Deletes the account's rows of one type among `ids` (what depends on them goes through the foreign keys). */
const trashDeleteItems = statement<{ type: TrashType; userId: string; ids: readonly string[] }, { id: string }>({
  name: 'trash_delete_items',
  area: AREA,
  variants: perType((type) => ({ type, userId: EXAMPLE_UUID, ids: [] })),
  build: ({ type, userId, ids }) =>
    sql`delete from ${table(type)} where user_id = ${userId} and id = any(${[...ids]}::uuid[]) returning id`,
});

// ---- retention ----

/**
 * A batch of one type's trashed rows of every account whose retention has run out (the account's
 * own, else the server's default), oldest first, claimed: rows another pass holds are skipped.
 */
const trashExpired = statement<
  { type: TrashType; defaultDays: number; dayMs: number; now: number; batch: number },
  { id: string; user_id: string }
>({
  name: 'trash_expired',
  area: AREA,
  variants: perType((type) => ({ type, defaultDays: 30, dayMs: 86_400_000, now: 0, batch: 200 })),
  build: ({ type, defaultDays, dayMs, now, batch }) => sql`select x.id, x.user_id from ${table(type)} x
      join accounts a on a.id = x.user_id
      where x.deleted_at is not null
        and x.deleted_at + coalesce(a.trash_retention_days, ${defaultDays}::int) * ${dayMs}::bigint <= ${now}::bigint
      order by x.deleted_at
      limit ${batch}::int
      for update of x skip locked`,
});

const retentionOf = statement<{ userId: string }, { trash_retention_days: number | null }>({
  name: 'trash_retention_days',
  area: AREA,
  variants: { read: { userId: EXAMPLE_UUID } },
  build: ({ userId }) => sql`select trash_retention_days from accounts where id = ${userId} limit 1`,
});

/**
 * The account's retention set in one statement (docs/data-access.md, "Writes in one statement")
 * with its audit row (`trash.settings.update`, the old and new value): the account row is locked
 * first, so the value it replaces (the audit's `from`) is the newest committed one even when
 * another change of it commits while this waits, then updated. Nothing when there is no account.
 */
const setRetention = statement<
  { userId: string; days: number | null; audit: PendingAudit },
  { found: boolean; days: number | null }
>({
  name: 'trash_set_retention_days',
  area: AREA,
  variants: { 'the account': { userId: EXAMPLE_UUID, days: 30, audit: EXAMPLE_AUDIT } },
  build: ({ userId, days, audit }) => sql`with account as (
      select id, trash_retention_days as before from accounts where id = ${userId} for update
    ),
    updated as (
      update accounts a set trash_retention_days = ${days}::int from account l where a.id = l.id
      returning a.trash_retention_days
    ),
    audited as (${auditInsertSql(
      audit,
      sql`jsonb_build_object('retentionDays', jsonb_build_object('from', l.before, 'to', u.trash_retention_days))`,
      sql`account l, updated u`,
    )})
    select exists (select 1 from updated) as found, (select trash_retention_days from updated) as days`,
});

export const trashRepo = {
  list: (db: Knex, userId: string, types: readonly TrashType[], limit: number) =>
    trashList(db, { userId, types, limit }),
  locations: (
    db: Knex,
    userId: string,
    ids: { dirIds: readonly string[]; sideIds: readonly string[]; subIds: readonly string[] },
  ) => trashLocations(db, { userId, ...ids }),
  lockItems: (trx: Knex.Transaction, userId: string, type: TrashType, ids: readonly string[]) =>
    trashLockItems(trx, { type, userId, ids }),
  async unlinkMembers(trx: Knex.Transaction, userId: string, memberIds: readonly string[]): Promise<void> {
    await trashUnlinkMembers(trx, { userId, memberIds });
  },
  /** Deletes the rows; how many were deleted. */
  async deleteItems(trx: Knex.Transaction, userId: string, type: TrashType, ids: readonly string[]): Promise<number> {
    return (await trashDeleteItems(trx, { type, userId, ids })).length;
  },
  expired: (
    trx: Knex.Transaction,
    type: TrashType,
    options: { defaultDays: number; dayMs: number; now: number; batch: number },
  ) => trashExpired(trx, { type, ...options }),
  /** The account's own retention in days (null: the server's default); `undefined` when there is no such account. */
  async retentionDays(db: Knex, userId: string): Promise<number | null | undefined> {
    const [row] = await retentionOf(db, { userId });
    return row?.trash_retention_days;
  },
  /** Sets the account's own retention with its audit row (see setRetention); what it stored, `undefined` without an account. */
  async setRetentionDays(
    db: Knex,
    userId: string,
    days: number | null,
    audit: PendingAudit,
  ): Promise<number | null | undefined> {
    const [row] = await setRetention(db, { userId, days, audit });
    return row?.found ? row.days : undefined;
  },
};

/**
 * The SQL of the native export and import (generated/sql/portability.sql): a page of any exported
 * table as JSON text, and on import one upsert per table and batch, the checks it needs first
 * (which referenced rows exist, which rows the account already has under another key) and the
 * updates of references set once everything is written. The tables and columns come from the
 * catalogue (nativeTables.ts), never from input.
 */
import type { Knex } from 'knex';
import { sql, type Sql } from '../../../db/sql.ts';
import { EXAMPLE_UUID, statement } from '../../../db/statements.ts';
import { EXPORTED_TABLES, type ExportedTable } from '../nativeTables.ts';

const AREA = 'portability';

const TABLE_NAMES = EXPORTED_TABLES.map((t) => t.name);
const tableOf = (name: string): ExportedTable => EXPORTED_TABLES.find((t) => t.name === name)!;
const ident = (table: ExportedTable) => sql.constant(table.name, TABLE_NAMES);
const col = (name: string) => sql.id(`t.${name}`);
const list = (columns: readonly string[], prefix = '') =>
  sql.join(
    columns.map((c) => sql.id(`${prefix}${c}`)),
    ', ',
  );

/** Every text a parameter of a table can take: one variant per table. */
function perTable<P>(tables: readonly ExportedTable[], params: (t: ExportedTable) => P): Record<string, P> {
  return Object.fromEntries(tables.map((t) => [t.name, params(t)]));
}

// ---- Export ----

/** Makes the export transaction one snapshot of the account; first statement of the transaction. */
const snapshot = statement<Record<string, never>, never>({
  name: 'native_export_snapshot',
  area: AREA,
  variants: { one: {} },
  build: () => sql`set transaction isolation level repeatable read, read only`,
});

/**
 * Plans each page with the account's own statistics: a generic plan would be the average account's,
 * which for a large account may read and sort all of its rows for every page.
 */
const customPlans = statement<Record<string, never>, never>({
  name: 'native_export_custom_plans',
  area: AREA,
  variants: { one: {} },
  build: () => sql`set local plan_cache_mode = force_custom_plan`,
});

export interface ExportPageRow {
  /** The row as JSON text, without the omitted and derived columns. */
  line: string;
  /** The sealed text's key id and bytes (base64), for the tables that hold some. */
  sealed_key?: string;
  sealed_data?: string;
  /** The keyset columns of the row, as text: k0, k1, … */
  [key: `k${number}`]: string;
}

function exportSelect(table: ExportedTable): Sql {
  let row = sql`to_jsonb(t)`;
  for (const omitted of [...(table.omit ?? []), ...(table.derived ?? [])]) row = sql`${row} - ${omitted}::text`;
  const sealed =
    table.sealed === 'content'
      ? sql`, t.key_id as sealed_key, encode(t.content_enc, 'base64') as sealed_data`
      : table.sealed === 'data'
        ? sql`, t.key_id as sealed_key, encode(t.data_enc, 'base64') as sealed_data`
        : sql.empty;
  const keys = table.page.map((p, i) => sql`, ${col(p.column)}::text as ${sql.id(`k${i}`)}`);
  return sql`select (${row})::text as line${sealed}${sql.join(keys, '')}`;
}

/** One page of a table's rows of the account, in keyset order; tables of one row at most are read whole. */
const exportPage = statement<
  { table: ExportedTable; userId: string; after: readonly string[] | null; size: number },
  ExportPageRow
>({
  name: 'native_export_page',
  area: AREA,
  variants: Object.fromEntries(
    EXPORTED_TABLES.flatMap((table) =>
      table.page.length === 0
        ? [[table.name, { table, userId: EXAMPLE_UUID, after: null, size: 1 }]]
        : [
            [`${table.name}, first page`, { table, userId: EXAMPLE_UUID, after: null, size: 500 }],
            [
              `${table.name}, next page`,
              { table, userId: EXAMPLE_UUID, after: table.page.map(() => EXAMPLE_UUID), size: 500 },
            ],
          ],
    ),
  ),
  build: ({ table, userId, after, size }) => {
    const owner = sql`${col(table.owner)} = ${userId}`;
    if (table.page.length === 0) return sql`${exportSelect(table)} from ${ident(table)} t where ${owner}`;
    const keys = sql.join(
      table.page.map((p) => col(p.column)),
      ', ',
    );
    const cursor = after
      ? sql` and (${keys}) > (${sql.join(
          table.page.map((p, i) => (p.type === 'uuid' ? sql`${after[i]}::uuid` : sql`${after[i]}::text`)),
          ', ',
        )})`
      : sql.empty;
    return sql`${exportSelect(table)} from ${ident(table)} t where ${owner}${cursor} order by ${keys} limit ${size}`;
  },
});

// ---- Import ----

const WRITTEN = EXPORTED_TABLES.filter((t) => (t.import ?? 'rows') === 'rows');

/**
 * Writes a batch of rows (the table's row type, as JSON): new keys are inserted, rows whose key
 * the account has are updated when they differ, and rows equal to what is stored are left alone.
 * Returns the written rows' keys (as text) and whether each was inserted.
 */
const upsert = statement<
  { table: ExportedTable; userId: string; rows: string },
  { inserted: boolean; [key: `k${number}`]: string }
>({
  name: 'native_import_upsert',
  area: AREA,
  variants: perTable(WRITTEN, (table) => ({ table, userId: EXAMPLE_UUID, rows: '[]' })),
  build: ({ table, userId, rows }) => {
    const columns = list(table.columns);
    const rest = table.columns.filter((c) => !table.key.includes(c));
    const keys = sql.join(
      table.key.map((k, i) => sql`${col(k)}::text as ${sql.id(`k${i}`)}`),
      ', ',
    );
    const onConflict =
      rest.length === 0
        ? sql`do nothing`
        : sql`do update set ${sql.join(
            rest.map((c) => sql`${sql.id(c)} = ${sql.id(`excluded.${c}`)}`),
            ', ',
          )} where t.user_id = ${userId} and (${list(rest, 't.')}) is distinct from (${list(rest, 'excluded.')})`;
    return sql`insert into ${ident(table)} as t (${columns})
      select ${columns} from jsonb_populate_recordset(null::${ident(table)}, ${rows}::jsonb)
      on conflict (${list(table.key)}) ${onConflict}
      returning ${keys}, (xmax = 0) as inserted`;
  },
});

/** What an import may change of the importing account's own row: its profile, never its name, plan or role. */
const ACCOUNT_COLUMNS = [
  'display_name',
  'pronouns',
  'status',
  'timezone',
  'country',
  'about_markdown',
  'banner_url',
  'image_url',
  'trash_retention_days',
  'appear_in_suggestions',
  'updated_at',
];

const updateAccount = statement<{ userId: string; row: string }, { id: string }>({
  name: 'native_import_account',
  area: AREA,
  variants: { one: { userId: EXAMPLE_UUID, row: '{}' } },
  build: ({ userId, row }) => sql`update accounts t set ${sql.join(
    ACCOUNT_COLUMNS.map((c) => sql`${sql.id(c)} = ${sql.id(`r.${c}`)}`),
    ', ',
  )}
    from jsonb_populate_record(null::accounts, ${row}::jsonb) r
    where t.id = ${userId} and (${list(ACCOUNT_COLUMNS, 't.')}) is distinct from (${list(ACCOUNT_COLUMNS, 'r.')})
    returning t.id::text as id`,
});

/** Tables whose rows an import asks about by id: the targets of deferred references, and accounts. */
const LOOKUP_TABLES = [...new Set(EXPORTED_TABLES.flatMap((t) => Object.values(t.deferred ?? {})))].map(tableOf);

/** Which of `ids` are rows of the account in `table`. */
const existingRows = statement<{ table: ExportedTable; userId: string; ids: string[] }, { id: string }>({
  name: 'native_import_existing',
  area: AREA,
  variants: perTable(LOOKUP_TABLES, (table) => ({ table, userId: EXAMPLE_UUID, ids: [] })),
  build: ({ table, userId, ids }) =>
    sql`select id::text as id from ${ident(table)} where user_id = ${userId} and id = any(${ids}::uuid[])`,
});

/** Which of `ids` are accounts of this server. */
const existingAccounts = statement<{ ids: string[] }, { id: string }>({
  name: 'native_import_accounts',
  area: AREA,
  variants: { one: { ids: [] } },
  build: ({ ids }) => sql`select id::text as id from accounts where id = any(${ids}::uuid[])`,
});

const DEFERRED = EXPORTED_TABLES.flatMap((table) =>
  Object.entries(table.deferred ?? {}).map(([column, target]) => ({ table, column, target: tableOf(target) })),
);

/** Sets a deferred reference on rows of the account, where the row it names exists now; the rows set. */
const setDeferred = statement<
  { table: ExportedTable; column: string; target: ExportedTable; userId: string; rows: string },
  { id: string }
>({
  name: 'native_import_deferred',
  area: AREA,
  variants: Object.fromEntries(
    DEFERRED.map((d) => [`${d.table.name}.${d.column}`, { ...d, userId: EXAMPLE_UUID, rows: '[]' }]),
  ),
  build: ({ table, column, target, userId, rows }) => sql`update ${ident(table)} t set ${sql.id(column)} = r.value
    from jsonb_to_recordset(${rows}::jsonb) as r (id uuid, value uuid)
    where t.id = r.id and t.user_id = ${userId} and ${col(column)} is distinct from r.value
      and exists (select 1 from ${ident(target)} x where x.id = r.value and x.user_id = ${userId})
    returning t.id::text as id`,
});

/** The account's oldest live side system: where an archive's oldest one goes. */
const mainSideSystem = statement<{ userId: string }, { id: string }>({
  name: 'native_import_main_side_system',
  area: AREA,
  variants: { one: { userId: EXAMPLE_UUID } },
  build: ({ userId }) =>
    sql`select id::text as id from side_systems where user_id = ${userId} and deleted_at is null order by created_at, id limit 1`,
});

const bucketsBySlug = statement<{ userId: string; slugs: string[] }, { id: string; slug: string }>({
  name: 'native_import_bucket_slugs',
  area: AREA,
  variants: { one: { userId: EXAMPLE_UUID, slugs: [] } },
  build: ({ userId, slugs }) =>
    sql`select id::text as id, slug from privacy_buckets where user_id = ${userId} and slug = any(${slugs}::text[])`,
});

const SINGLETONS = ['appearance_settings', 'terminology_settings'].map(tableOf);

/** The account's row of a table that holds one per account. */
const singletonRow = statement<{ table: ExportedTable; userId: string }, { id: string }>({
  name: 'native_import_singleton',
  area: AREA,
  variants: perTable(SINGLETONS, (table) => ({ table, userId: EXAMPLE_UUID })),
  build: ({ table, userId }) => sql`select id::text as id from ${ident(table)} where user_id = ${userId}`,
});

const overrideScopes = statement<
  { userId: string },
  { id: string; side_system_id: string; sub_system_id: string | null }
>({
  name: 'native_import_terminology_scopes',
  area: AREA,
  variants: { one: { userId: EXAMPLE_UUID } },
  build: ({
    userId,
  }) => sql`select id::text as id, side_system_id::text as side_system_id, sub_system_id::text as sub_system_id
    from terminology_overrides where user_id = ${userId}`,
});

/** The account's own friendships with these accounts. */
const friendshipsWith = statement<{ userId: string; friends: string[] }, { id: string; friend_user_id: string }>({
  name: 'native_import_friendships',
  area: AREA,
  variants: { one: { userId: EXAMPLE_UUID, friends: [] } },
  build: ({ userId, friends }) => sql`select id::text as id, friend_user_id::text as friend_user_id from friendships
    where user_id = ${userId} and friend_user_id = any(${friends}::uuid[])`,
});

/** Client mutation ids the account's other messages already carry (unique per account). */
const takenMutationIds = statement<
  { userId: string; mutationIds: string[]; ids: string[] },
  { client_mutation_id: string }
>({
  name: 'native_import_mutation_ids',
  area: AREA,
  variants: { one: { userId: EXAMPLE_UUID, mutationIds: [], ids: [] } },
  build: ({ userId, mutationIds, ids }) => sql`select client_mutation_id from messaging_messages
    where user_id = ${userId} and client_mutation_id = any(${mutationIds}::text[]) and id <> all(${ids}::uuid[])`,
});

const SEALED_TABLES = EXPORTED_TABLES.filter((t) => t.sealed);

/** The sealed text of rows the account has already (a re-import keeps a ciphertext whose text is unchanged). */
const sealedRows = statement<
  { table: ExportedTable; userId: string; ids: string[] },
  { id: string; key_id: string; data: string }
>({
  name: 'native_import_sealed',
  area: AREA,
  variants: perTable(SEALED_TABLES, (table) => ({ table, userId: EXAMPLE_UUID, ids: [] })),
  build: ({ table, userId, ids }) => {
    const bytes = table.sealed === 'content' ? sql`content_enc` : sql`data_enc`;
    return sql`select id::text as id, key_id, encode(${bytes}, 'base64') as data from ${ident(table)}
      where user_id = ${userId} and id = any(${ids}::uuid[])`;
  },
});

export const nativeRepo = {
  beginSnapshot: async (db: Knex) => {
    await snapshot(db, {});
    await customPlans(db, {});
  },
  exportPage: (db: Knex, table: ExportedTable, userId: string, after: readonly string[] | null, size: number) =>
    exportPage(db, { table, userId, after, size }),
  upsert: (db: Knex, table: ExportedTable, userId: string, rows: readonly object[]) =>
    upsert(db, { table, userId, rows: JSON.stringify(rows) }),
  updateAccount: async (db: Knex, userId: string, row: object) =>
    (await updateAccount(db, { userId, row: JSON.stringify(row) })).length > 0,
  existing: async (db: Knex, table: string, userId: string, ids: string[]): Promise<Set<string>> =>
    ids.length === 0
      ? new Set()
      : new Set((await existingRows(db, { table: tableOf(table), userId, ids })).map((r) => r.id)),
  accounts: async (db: Knex, ids: string[]): Promise<Set<string>> =>
    ids.length === 0 ? new Set() : new Set((await existingAccounts(db, { ids })).map((r) => r.id)),
  setDeferred: async (
    db: Knex,
    table: ExportedTable,
    column: string,
    userId: string,
    rows: Array<{ id: string; value: string }>,
  ): Promise<Set<string>> => {
    const target = tableOf(table.deferred![column]!);
    const set = await setDeferred(db, { table, column, target, userId, rows: JSON.stringify(rows) });
    return new Set(set.map((r) => r.id));
  },
  mainSideSystem: async (db: Knex, userId: string) => (await mainSideSystem(db, { userId }))[0]?.id,
  bucketsBySlug: (db: Knex, userId: string, slugs: string[]) => bucketsBySlug(db, { userId, slugs }),
  singleton: async (db: Knex, table: string, userId: string) =>
    (await singletonRow(db, { table: tableOf(table), userId }))[0]?.id,
  overrideScopes: (db: Knex, userId: string) => overrideScopes(db, { userId }),
  friendshipsWith: (db: Knex, userId: string, friends: string[]) =>
    friends.length === 0 ? Promise.resolve([]) : friendshipsWith(db, { userId, friends }),
  takenMutationIds: async (db: Knex, userId: string, mutationIds: string[], ids: string[]) =>
    mutationIds.length === 0
      ? new Set<string>()
      : new Set((await takenMutationIds(db, { userId, mutationIds, ids })).map((r) => r.client_mutation_id)),
  sealed: (db: Knex, table: ExportedTable, userId: string, ids: string[]) =>
    ids.length === 0 ? Promise.resolve([]) : sealedRows(db, { table, userId, ids }),
};

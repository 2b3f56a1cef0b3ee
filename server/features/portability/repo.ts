/** The SQL of imports: the import rows, the refs that make re-imports idempotent, and the bulk writes of history (generated/sql/portability.sql). */
import type { Knex } from 'knex';
import { sql } from '../../db/sql.ts';
import { EXAMPLE_UUID, statement } from '../../db/statements.ts';
import { type Keyset, keysetAfterSql, keysetOrderSql } from '../../core/keyset.ts';
import type { ImportSource, ImportWarning } from './bundle.ts';

const AREA = 'portability';

export type ImportStatus = 'queued' | 'running' | 'succeeded' | 'failed';

export interface CollectionReport {
  created: number;
  updated: number;
  unchanged: number;
  skipped: number;
  failed: number;
}

export interface ImportRow {
  id: string;
  user_id: string;
  source: ImportSource;
  dry_run: boolean;
  status: ImportStatus;
  object_key: string | null;
  byte_size: number;
  progress_done: number;
  progress_total: number;
  report: Record<string, CollectionReport>;
  warnings: ImportWarning[];
  warnings_omitted: number;
  error: string | null;
  created_at: number;
  started_at: number | null;
  finished_at: number | null;
}

const EXAMPLE_IMPORT: ImportRow = {
  id: EXAMPLE_UUID,
  user_id: EXAMPLE_UUID,
  source: 'pluralkit',
  dry_run: false,
  status: 'queued',
  object_key: 'imports/x',
  byte_size: 0,
  progress_done: 0,
  progress_total: 0,
  report: {},
  warnings: [],
  warnings_omitted: 0,
  error: null,
  created_at: 0,
  started_at: null,
  finished_at: null,
};

const insertImport = statement<{ row: ImportRow }, ImportRow>({
  name: 'import_insert',
  area: AREA,
  variants: { one: { row: EXAMPLE_IMPORT } },
  build: ({ row }) => sql`
    insert into imports (id, user_id, source, dry_run, status, object_key, byte_size, created_at)
    values (${row.id}, ${row.user_id}, ${row.source}, ${row.dry_run}, ${row.status}, ${row.object_key}, ${row.byte_size}, ${row.created_at})
    returning *`,
});

const findImport = statement<{ userId: string; id: string }, ImportRow>({
  name: 'import_find',
  area: AREA,
  variants: { one: { userId: EXAMPLE_UUID, id: EXAMPLE_UUID } },
  build: ({ userId, id }) => sql`select * from imports where user_id = ${userId} and id = ${id}`,
});

const IMPORT_KEYSET: Keyset = {
  columns: [
    { sql: sql`created_at`, type: 'bigint' },
    { sql: sql`id`, type: 'uuid' },
  ],
  direction: 'desc',
};

const pageImports = statement<{ userId: string; after: [number, string] | null; size: number }, ImportRow>({
  name: 'import_page',
  area: AREA,
  variants: {
    first: { userId: EXAMPLE_UUID, after: null, size: 50 },
    next: { userId: EXAMPLE_UUID, after: [0, EXAMPLE_UUID], size: 50 },
  },
  build: ({ userId, after, size }) => sql`
    select * from imports where user_id = ${userId}
    ${after ? sql`and ${keysetAfterSql(IMPORT_KEYSET, after)}` : sql.empty}
    ${keysetOrderSql(IMPORT_KEYSET, size)}`,
});

/**
 * Takes a queued import for this run: queued, or running with a start older than `staleBefore`
 * (its worker died). Returns nothing when another worker has it or it is finished.
 */
const claimImport = statement<{ id: string; now: number; staleBefore: number }, ImportRow>({
  name: 'import_claim',
  area: AREA,
  variants: { one: { id: EXAMPLE_UUID, now: 0, staleBefore: 0 } },
  build: ({ id, now, staleBefore }) => sql`
    update imports set status = 'running', started_at = ${now}
    where id = ${id} and (status = 'queued' or (status = 'running' and started_at < ${staleBefore}))
    returning *`,
});

export interface ImportOutcome {
  status: 'succeeded' | 'failed';
  report: Record<string, CollectionReport>;
  warnings: ImportWarning[];
  warningsOmitted: number;
  error: string | null;
  done: number;
  total: number;
  finishedAt: number;
}

const EXAMPLE_OUTCOME: ImportOutcome = {
  status: 'succeeded',
  report: {},
  warnings: [],
  warningsOmitted: 0,
  error: null,
  done: 0,
  total: 0,
  finishedAt: 0,
};

/** Records the outcome; with `ownedBy` (the run's start), only while the run still owns the import. */
const finishImport = statement<{ id: string; outcome: ImportOutcome; ownedBy: number | null }, ImportRow>({
  name: 'import_finish',
  area: AREA,
  variants: {
    any: { id: EXAMPLE_UUID, outcome: EXAMPLE_OUTCOME, ownedBy: null },
    'still owned': { id: EXAMPLE_UUID, outcome: EXAMPLE_OUTCOME, ownedBy: 0 },
  },
  build: ({ id, outcome: o, ownedBy }) => sql`
    update imports set status = ${o.status}, report = ${JSON.stringify(o.report)}::jsonb,
      warnings = ${JSON.stringify(o.warnings)}::jsonb, warnings_omitted = ${o.warningsOmitted}, error = ${o.error},
      progress_done = ${o.done}, progress_total = ${o.total}, finished_at = ${o.finishedAt}, object_key = null
    where id = ${id}${ownedBy === null ? sql.empty : sql` and status = 'running' and started_at = ${ownedBy}`}
    returning *`,
});

const setProgress = statement<{ id: string; done: number; total: number }, never>({
  name: 'import_progress',
  area: AREA,
  variants: { one: { id: EXAMPLE_UUID, done: 0, total: 0 } },
  build: ({ id, done, total }) =>
    sql`update imports set progress_done = ${done}, progress_total = ${total} where id = ${id} and status = 'running'`,
});

/** Serialises the imports of one account (a transaction-scoped advisory lock). */
const lockAccount = statement<{ userId: string }, never>({
  name: 'import_lock_account',
  area: AREA,
  variants: { one: { userId: EXAMPLE_UUID } },
  build: ({ userId }) => sql`select pg_advisory_xact_lock(hashtextextended(${`import:${userId}`}, 0))`,
});

export interface RefRow {
  collection: string;
  source_id: string;
  local_id: string;
  digest: string;
}

/** The refs of a source, but those of the `except` collections (the streamed ones, read a batch at a time). */
const listRefs = statement<{ userId: string; source: ImportSource; except: string[] }, RefRow>({
  name: 'import_refs_list',
  area: AREA,
  variants: { one: { userId: EXAMPLE_UUID, source: 'pluralkit', except: [] } },
  build: ({ userId, source, except }) => sql`
    select collection, source_id, local_id, digest from import_refs
    where user_id = ${userId} and source = ${source} and collection <> all(${except}::text[])`,
});

/** Records (or moves) refs, a batch of rows as one JSON array. */
const upsertRefs = statement<{ userId: string; source: ImportSource; rows: RefRow[] }, never>({
  name: 'import_refs_upsert',
  area: AREA,
  variants: { one: { userId: EXAMPLE_UUID, source: 'pluralkit', rows: [] } },
  build: ({ userId, source, rows }) => sql`
    insert into import_refs (user_id, source, collection, source_id, local_id, digest)
    select ${userId}, ${source}, r.collection, r.source_id, r.local_id, r.digest
    from jsonb_to_recordset(${JSON.stringify(rows)}::jsonb) as r (collection text, source_id text, local_id uuid, digest text)
    on conflict (user_id, source, collection, source_id)
      do update set local_id = excluded.local_id, digest = excluded.digest`,
});

/** The tables an import ref may point into (fixed names, never from input). */
export const REF_TABLES = [
  'members',
  'directories',
  'custom_field_definitions',
  'privacy_buckets',
  'entries',
  'front_sessions',
  'messaging_spaces',
  'messaging_categories',
  'messaging_channels',
  'messaging_messages',
] as const;
export type RefTable = (typeof REF_TABLES)[number];

/** Which of `ids` still exist in `table` for the account (trashed ones included: they are not re-created). */
const existingIds = statement<{ table: RefTable; userId: string; ids: string[] }, { id: string }>({
  name: 'import_existing_ids',
  area: AREA,
  variants: Object.fromEntries(REF_TABLES.map((table) => [table, { table, userId: EXAMPLE_UUID, ids: [] }])),
  // One primary-key probe per id, whatever the statistics say of a table the import is filling (refsOf).
  build: ({ table, userId, ids }) => sql`
    select t.id from unnest(${ids}::uuid[]) as s (id)
    cross join lateral (
      select id from ${sql.constant(table, REF_TABLES)} where id = s.id and user_id = ${userId} limit 1
    ) t`,
});

/**
 * The refs of some source ids of one collection (whether their local rows still exist is asked
 * apart: existingIds). One index probe per id (the lateral `limit 1` keeps the planner from
 * turning it into a join): the import's own transaction adds refs the statistics do not know of,
 * and a plan that takes the table for small scans every ref of the collection once per batch.
 */
const refsOf = statement<{ userId: string; source: ImportSource; collection: string; sourceIds: string[] }, RefRow>({
  name: 'import_refs_of',
  area: AREA,
  variants: { one: { userId: EXAMPLE_UUID, source: 'simply_plural', collection: 'notes', sourceIds: [] } },
  build: ({ userId, source, collection, sourceIds }) => sql`
    select r.collection, r.source_id, r.local_id, r.digest
    from unnest(${sourceIds}::text[]) as s (id)
    cross join lateral (
      select collection, source_id, local_id, digest from import_refs
      where user_id = ${userId} and source = ${source} and collection = ${collection} and source_id = s.id
      limit 1
    ) r`,
});

export interface SessionRow {
  id: string;
  member_id: string;
  side_system_id: string;
  sub_system_id: string | null;
  started_at: number;
  ended_at: number | null;
  note: string | null;
}

/** Inserts front sessions as history (ended ones) or live ones (open, appended after the current front). */
const insertSessions = statement<{ userId: string; now: number; rows: SessionRow[] }, never>({
  name: 'import_sessions_insert',
  area: AREA,
  variants: { one: { userId: EXAMPLE_UUID, now: 0, rows: [] } },
  build: ({ userId, now, rows }) => sql`
    insert into front_sessions (id, user_id, member_id, side_system_id, sub_system_id, started_at, ended_at, note, position, created_at, updated_at)
    select r.id, ${userId}, r.member_id, r.side_system_id, r.sub_system_id, r.started_at, r.ended_at, r.note,
      case when r.ended_at is null then
        (select coalesce(max(s.position), -1) from front_sessions s where s.user_id = ${userId} and s.ended_at is null and s.deleted_at is null)
          + row_number() over (partition by r.ended_at is null order by r.started_at, r.id)
      end,
      ${now}, ${now}
    from jsonb_to_recordset(${JSON.stringify(rows)}::jsonb)
      as r (id uuid, member_id uuid, side_system_id uuid, sub_system_id uuid, started_at bigint, ended_at bigint, note text)`,
});

/** Corrects sessions an edited export changed (start, end, note); their member stays. */
const updateSessions = statement<{ userId: string; now: number; rows: SessionRow[] }, never>({
  name: 'import_sessions_update',
  area: AREA,
  variants: { one: { userId: EXAMPLE_UUID, now: 0, rows: [] } },
  build: ({ userId, now, rows }) => sql`
    update front_sessions s set started_at = r.started_at, ended_at = r.ended_at, note = r.note, updated_at = ${now}
    from jsonb_to_recordset(${JSON.stringify(rows)}::jsonb) as r (id uuid, started_at bigint, ended_at bigint, note text)
    where s.id = r.id and s.user_id = ${userId}`,
});

/** An imported chat message, sealed (content_enc: hex). */
export interface MessageRow {
  id: string;
  channel_id: string;
  author_member_id: string;
  key_id: string;
  content_enc: string;
  reply_to_id: string | null;
  mention_member_ids: string[];
  created_at: number;
  edited_at: number | null;
}

/**
 * Inserts imported messages with their own times, numbered after each channel's last message in
 * time order, and moves the channels' last (and, when they were read up to it, read) sequence on:
 * imported history arrives read. The channels are locked first, as a send locks its channel.
 */
const insertMessages = statement<{ userId: string; now: number; rows: MessageRow[] }, never>({
  name: 'import_messages_insert',
  area: AREA,
  variants: { one: { userId: EXAMPLE_UUID, now: 0, rows: [] } },
  build: ({ userId, now, rows }) => sql`
    with r as (
      select * from jsonb_to_recordset(${JSON.stringify(rows)}::jsonb) as r (
        id uuid, channel_id uuid, author_member_id uuid, key_id text, content_enc text, reply_to_id uuid,
        mention_member_ids uuid[], created_at bigint, edited_at bigint)
    ),
    c as (
      select id, last_seq from messaging_channels
      where user_id = ${userId} and id in (select channel_id from r)
      for update
    ),
    numbered as (
      select r.*, c.last_seq + row_number() over (partition by r.channel_id order by r.created_at, r.id) as seq
      from r join c on c.id = r.channel_id
    ),
    ins as (
      insert into messaging_messages (id, user_id, channel_id, seq, author_member_id, key_id, content_enc, reply_to_id,
        mention_member_ids, created_at, edited_at)
      select id, ${userId}, channel_id, seq, author_member_id, key_id, decode(content_enc, 'hex'), reply_to_id,
        mention_member_ids, created_at, edited_at
      from numbered
      returning channel_id, seq
    )
    update messaging_channels ch
    set last_seq = m.top, read_seq = case when ch.read_seq = ch.last_seq then m.top else ch.read_seq end, updated_at = ${now}
    from (select channel_id, max(seq) as top from ins group by channel_id) m
    where ch.id = m.channel_id and ch.user_id = ${userId}`,
});

/** Corrects messages an edited export changed (text, mentions, edit time). */
const updateMessages = statement<{ userId: string; rows: MessageRow[] }, never>({
  name: 'import_messages_update',
  area: AREA,
  variants: { one: { userId: EXAMPLE_UUID, rows: [] } },
  build: ({ userId, rows }) => sql`
    update messaging_messages m
    set key_id = r.key_id, content_enc = decode(r.content_enc, 'hex'), mention_member_ids = r.mention_member_ids,
      edited_at = r.edited_at
    from jsonb_to_recordset(${JSON.stringify(rows)}::jsonb)
      as r (id uuid, key_id text, content_enc text, mention_member_ids uuid[], edited_at bigint)
    where m.id = r.id and m.user_id = ${userId}`,
});

/** Members that have a live (open, not trashed) session now. */
const liveMembers = statement<{ userId: string }, { member_id: string }>({
  name: 'import_live_members',
  area: AREA,
  variants: { one: { userId: EXAMPLE_UUID } },
  build: ({ userId }) =>
    sql`select member_id from front_sessions where user_id = ${userId} and ended_at is null and deleted_at is null`,
});

const BATCH = 1000;

async function inBatches<T>(rows: T[], run: (batch: T[]) => Promise<unknown>): Promise<void> {
  for (let i = 0; i < rows.length; i += BATCH) await run(rows.slice(i, i + BATCH));
}

export const importsRepo = {
  insert: async (db: Knex, row: ImportRow) => (await insertImport(db, { row }))[0]!,
  find: async (db: Knex, userId: string, id: string) => (await findImport(db, { userId, id }))[0],
  page: (db: Knex, userId: string, after: [number, string] | null, size: number) =>
    pageImports(db, { userId, after, size }),
  claim: async (db: Knex, id: string, now: number, staleBefore: number) =>
    (await claimImport(db, { id, now, staleBefore }))[0],
  finish: async (db: Knex, id: string, outcome: ImportOutcome, ownedBy: number | null = null) =>
    (await finishImport(db, { id, outcome, ownedBy }))[0],
  lockAccount: async (db: Knex, userId: string) => void (await lockAccount(db, { userId })),
  progress: (db: Knex, id: string, done: number, total: number) => setProgress(db, { id, done, total }),
  refs: (db: Knex, userId: string, source: ImportSource, except: string[]) => listRefs(db, { userId, source, except }),
  /** The refs of some source ids of one collection whose local row still exists in `table` (trashed ones included). */
  liveRefsOf: async (
    db: Knex,
    table: RefTable,
    userId: string,
    source: ImportSource,
    collection: string,
    sourceIds: string[],
  ): Promise<RefRow[]> => {
    const rows = await refsOf(db, { userId, source, collection, sourceIds });
    if (rows.length === 0) return rows;
    const live = await importsRepo.existing(
      db,
      table,
      userId,
      rows.map((r) => r.local_id),
    );
    return rows.filter((r) => live.has(r.local_id));
  },
  saveRefs: (db: Knex, userId: string, source: ImportSource, rows: RefRow[]) =>
    inBatches(rows, (batch) => upsertRefs(db, { userId, source, rows: batch })),
  existing: async (db: Knex, table: RefTable, userId: string, ids: string[]): Promise<Set<string>> => {
    const found = new Set<string>();
    await inBatches(ids, async (batch) => {
      for (const r of await existingIds(db, { table, userId, ids: batch })) found.add(r.id);
    });
    return found;
  },
  insertSessions: (db: Knex, userId: string, now: number, rows: SessionRow[]) =>
    inBatches(rows, (batch) => insertSessions(db, { userId, now, rows: batch })),
  updateSessions: (db: Knex, userId: string, now: number, rows: SessionRow[]) =>
    inBatches(rows, (batch) => updateSessions(db, { userId, now, rows: batch })),
  insertMessages: (db: Knex, userId: string, now: number, rows: MessageRow[]) =>
    inBatches(rows, (batch) => insertMessages(db, { userId, now, rows: batch })),
  updateMessages: (db: Knex, userId: string, rows: MessageRow[]) =>
    inBatches(rows, (batch) => updateMessages(db, { userId, rows: batch })),
  liveMembers: async (db: Knex, userId: string) => new Set((await liveMembers(db, { userId })).map((r) => r.member_id)),
};

/** The SQL of the export rows (generated/sql/portability.sql): create, read, page, claim and finish. */
import type { Knex } from 'knex';
import { type Keyset, keysetAfterSql, keysetOrderSql } from '../../../core/keyset.ts';
import { sql } from '../../../db/sql.ts';
import { EXAMPLE_UUID, statement } from '../../../db/statements.ts';
import type { components } from '../../../../generated/api.d.ts';

const AREA = 'portability';

export type ExportStatus = 'queued' | 'running' | 'succeeded' | 'failed';
export type NativeExportManifest = components['schemas']['NativeExportManifest'];

export interface ExportRow {
  id: string;
  user_id: string;
  status: ExportStatus;
  object_key: string | null;
  size_bytes: number | null;
  manifest: NativeExportManifest | null;
  error: string | null;
  created_at: number;
  started_at: number | null;
  finished_at: number | null;
  expires_at: number | null;
}

const insertExport = statement<{ id: string; userId: string; now: number }, ExportRow>({
  name: 'export_insert',
  area: AREA,
  variants: { one: { id: EXAMPLE_UUID, userId: EXAMPLE_UUID, now: 0 } },
  build: ({ id, userId, now }) =>
    sql`insert into exports (id, user_id, status, created_at) values (${id}, ${userId}, 'queued', ${now}) returning *`,
});

const findExport = statement<{ userId: string; id: string }, ExportRow>({
  name: 'export_find',
  area: AREA,
  variants: { one: { userId: EXAMPLE_UUID, id: EXAMPLE_UUID } },
  build: ({ userId, id }) => sql`select * from exports where user_id = ${userId} and id = ${id}`,
});

const EXPORT_KEYSET: Keyset = {
  columns: [
    { sql: sql`created_at`, type: 'bigint' },
    { sql: sql`id`, type: 'uuid' },
  ],
  direction: 'desc',
};

const pageExports = statement<{ userId: string; after: [number, string] | null; size: number }, ExportRow>({
  name: 'export_page',
  area: AREA,
  variants: {
    first: { userId: EXAMPLE_UUID, after: null, size: 50 },
    next: { userId: EXAMPLE_UUID, after: [0, EXAMPLE_UUID], size: 50 },
  },
  build: ({ userId, after, size }) => sql`
    select * from exports where user_id = ${userId}
    ${after ? sql`and ${keysetAfterSql(EXPORT_KEYSET, after)}` : sql.empty}
    ${keysetOrderSql(EXPORT_KEYSET, size)}`,
});

/** Takes a queued export (or one whose worker died: running since before `staleBefore`) for this run. */
const claimExport = statement<{ id: string; now: number; staleBefore: number }, ExportRow>({
  name: 'export_claim',
  area: AREA,
  variants: { one: { id: EXAMPLE_UUID, now: 0, staleBefore: 0 } },
  build: ({ id, now, staleBefore }) => sql`
    update exports set status = 'running', started_at = ${now}
    where id = ${id} and (status = 'queued' or (status = 'running' and started_at < ${staleBefore}))
    returning *`,
});

export interface ExportOutcome {
  status: 'succeeded' | 'failed';
  objectKey: string | null;
  sizeBytes: number | null;
  manifest: NativeExportManifest | null;
  error: string | null;
  finishedAt: number;
  expiresAt: number | null;
}

const finishExport = statement<{ id: string; outcome: ExportOutcome }, never>({
  name: 'export_finish',
  area: AREA,
  variants: {
    one: {
      id: EXAMPLE_UUID,
      outcome: {
        status: 'failed',
        objectKey: null,
        sizeBytes: null,
        manifest: null,
        error: null,
        finishedAt: 0,
        expiresAt: null,
      },
    },
  },
  build: ({ id, outcome: o }) => sql`
    update exports set status = ${o.status}, object_key = ${o.objectKey}, size_bytes = ${o.sizeBytes},
      manifest = ${o.manifest === null ? null : JSON.stringify(o.manifest)}::jsonb, error = ${o.error},
      finished_at = ${o.finishedAt}, expires_at = ${o.expiresAt}
    where id = ${id}`,
});

export const exportsRepo = {
  insert: async (db: Knex, id: string, userId: string, now: number) =>
    (await insertExport(db, { id, userId, now }))[0]!,
  find: async (db: Knex, userId: string, id: string) => (await findExport(db, { userId, id }))[0],
  page: (db: Knex, userId: string, after: [number, string] | null, size: number) =>
    pageExports(db, { userId, after, size }),
  claim: async (db: Knex, id: string, now: number, staleBefore: number) =>
    (await claimExport(db, { id, now, staleBefore }))[0],
  finish: (db: Knex, id: string, outcome: ExportOutcome) => finishExport(db, { id, outcome }),
};

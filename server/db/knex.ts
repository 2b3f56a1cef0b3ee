/**
 * One knex instance over either PostgreSQL (DATABASE_URL, through `pg`) or embedded PGlite
 * (persisted under DATA_DIR, or in memory for tests). Both parse int8 to number so epoch-ms
 * columns and counts look the same to the code above. knex-pglite was chosen over
 * pglite-socket + pg by measurement (see README and scripts/measure-pglite.ts).
 */
import knexFactory, { type Knex } from 'knex';
import pg from 'pg';
import { appendFileSync, mkdirSync } from 'node:fs';

export type Db = Knex;
export type DatabaseKind = 'postgres' | 'pglite';

export interface Database {
  knex: Knex;
  kind: DatabaseKind;
  close(): Promise<void>;
  /** Embedded only: the whole cluster as an uncompressed tarball (the test suite's migrated template). */
  dumpEmbedded?: () => Promise<Blob>;
}

const INT8_OID = 20;
const NUMERIC_OID = 1700;
// Epoch milliseconds and row counts stay far below 2^53, so Number() is exact.
pg.types.setTypeParser(INT8_OID, (value: string) => Number(value));
pg.types.setTypeParser(NUMERIC_OID, (value: string) => Number(value));

export interface OpenDatabaseOptions {
  databaseUrl?: string | undefined;
  /** Directory for PGlite files; `memory` keeps the embedded database in memory. */
  dataDir?: string | 'memory';
  /** Embedded only: start from this `dumpDataDir()` tarball instead of an empty cluster (test templates). */
  embeddedTemplate?: Blob;
  poolMax?: number;
}

/**
 * knex-pglite derives the result's command from the builder method, and `del` becomes "DEL",
 * which knex's PostgreSQL response handling does not know: `.delete()` would resolve to the raw
 * result instead of the row count it gives on PostgreSQL. Present deletes as "delete".
 */
function embeddedClient(base: typeof import('knex-pglite')): typeof import('knex-pglite') {
  const Base = base as unknown as new (config: unknown) => { processResponse(obj: { method?: string }, runner: unknown): unknown };
  class EmbeddedClient extends Base {
    override processResponse(obj: { method?: string }, runner: unknown): unknown {
      return super.processResponse(obj?.method === 'del' ? { ...obj, method: 'delete' } : obj, runner);
    }
  }
  return EmbeddedClient as unknown as typeof import('knex-pglite');
}

/**
 * Diagnostics for `npm run bench`: with SQL_CAPTURE_FILE set, every statement and its bindings are
 * appended there as JSON lines so the bench can EXPLAIN exactly what the server ran.
 */
function captureSql(knex: Knex): void {
  const file = process.env.SQL_CAPTURE_FILE;
  if (!file) return;
  knex.on('query', (q: { sql: string; bindings?: unknown[] }) => appendFileSync(file, JSON.stringify({ sql: q.sql, bindings: q.bindings ?? [] }) + '\n'));
}

export async function openDatabase(options: OpenDatabaseOptions): Promise<Database> {
  if (options.databaseUrl) {
    const knex = knexFactory({
      client: 'pg',
      connection: options.databaseUrl,
      pool: { min: 0, max: options.poolMax ?? 10 },
    });
    captureSql(knex);
    return { knex, kind: 'postgres', close: () => knex.destroy() };
  }
  const { PGlite, types } = await import('@electric-sql/pglite');
  const { default: ClientPGLite } = await import('knex-pglite');
  let dataDir: string | undefined;
  if (options.dataDir && options.dataDir !== 'memory') {
    mkdirSync(options.dataDir, { recursive: true });
    dataDir = `${options.dataDir}/pglite`;
  }
  const pglite = await PGlite.create(dataDir, {
    ...(options.embeddedTemplate ? { loadDataDir: options.embeddedTemplate } : {}),
    parsers: { [types.INT8]: (v: string) => Number(v), [types.NUMERIC]: (v: string) => Number(v) },
  });
  const knex = knexFactory({ client: embeddedClient(ClientPGLite), connection: { pglite } as never });
  return {
    knex,
    kind: 'pglite',
    dumpEmbedded: () => pglite.dumpDataDir('none'),
    close: async () => {
      await knex.destroy();
      if (!pglite.closed) await pglite.close();
    },
  };
}

/**
 * One knex instance over either PostgreSQL (DATABASE_URL, through `pg`) or embedded PGlite
 * (persisted under DATA_DIR, or in memory for tests). Both parse int8 to number so epoch-ms
 * columns and counts look the same to the code above. knex-pglite was chosen over
 * pglite-socket + pg by measurement (see README and scripts/measure-pglite.ts).
 */
import knexFactory, { type Knex } from 'knex';
import pg from 'pg';
import { appendFileSync, mkdirSync } from 'node:fs';
import type { Logger } from 'pino';
import { acquireDataDirLock } from './dataDirLock.ts';

export type Db = Knex;
export type DatabaseKind = 'postgres' | 'pglite';

export interface Database {
  knex: Knex;
  kind: DatabaseKind;
  close(): Promise<void>;
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
  poolMax?: number;
  /** Who holds the data-directory lock (named in the message another process gets), e.g. `server`, `migrate`. */
  lockPurpose?: string;
  /** Told when a stale lock (left by a crashed process) was replaced. */
  onStaleLock?: (message: string) => void;
  /** Where knex's own warnings go (console without it). */
  logger?: Logger;
}

/**
 * knex prints a failed connection attempt with its stack ("Acquire connection error: …") although
 * the same error also reaches the caller, which reports it (503 for a request, one line at
 * start-up). Those go to debug; anything else knex has to say goes to the log as it is.
 */
function knexLog(logger: Logger | undefined): Knex.Config['log'] {
  const text = (message: unknown) => (typeof message === 'string' ? message : JSON.stringify(message));
  const out = (level: 'warn' | 'error', message: unknown) => (logger ? logger[level]({ component: 'knex' }, text(message)) : console[level](text(message)));
  return {
    warn: (message: unknown) => {
      if (/^Acquire connection error/.test(text(message))) logger?.debug({ component: 'knex' }, text(message).split('\n')[0]!);
      else out('warn', message);
    },
    error: (message: unknown) => out('error', message),
    deprecate: (method: string, alternative: string) => out('warn', `${method} is deprecated, use ${alternative}`),
    debug: (message: unknown) => logger?.debug({ component: 'knex' }, text(message)),
  };
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
      // A black-holed host would otherwise hang each connect for the OS TCP timeout (minutes).
      connection: { connectionString: options.databaseUrl, connectionTimeoutMillis: 10_000 },
      pool: { min: 0, max: options.poolMax ?? 10 },
      log: knexLog(options.logger),
    });
    captureSql(knex);
    return { knex, kind: 'postgres', close: () => knex.destroy() };
  }
  const { PGlite, types } = await import('@electric-sql/pglite');
  const { default: ClientPGLite } = await import('knex-pglite');
  let dataDir: string | undefined;
  let lock: { release(): void } | undefined;
  if (options.dataDir && options.dataDir !== 'memory') {
    mkdirSync(options.dataDir, { recursive: true });
    // Before PGlite touches the files: a second process must not open them at all.
    lock = acquireDataDirLock(options.dataDir, { purpose: options.lockPurpose ?? 'server', onStale: options.onStaleLock });
    dataDir = `${options.dataDir}/pglite`;
  }
  let pglite: InstanceType<typeof PGlite>;
  try {
    pglite = await PGlite.create(dataDir, {
      parsers: { [types.INT8]: (v: string) => Number(v), [types.NUMERIC]: (v: string) => Number(v) },
    });
  } catch (err) {
    lock?.release();
    throw err;
  }
  const knex = knexFactory({ client: embeddedClient(ClientPGLite), connection: { pglite } as never, log: knexLog(options.logger) });
  return {
    knex,
    kind: 'pglite',
    close: async () => {
      try {
        await knex.destroy();
        if (!pglite.closed) await pglite.close();
      } finally {
        lock?.release();
      }
    },
  };
}

/**
 * One knex instance over either PostgreSQL (DATABASE_URL, through `pg`) or embedded PGlite
 * (persisted under DATA_DIR, or in memory for tests). Both parse int8 to number so epoch-ms
 * columns and counts look the same to the code above. knex-pglite was chosen over
 * pglite-socket + pg by measurement (see docs/operations.md, "Why knex-pglite", and scripts/measure-pglite.ts).
 */
import knexFactory, { type Knex } from 'knex';
import pg from 'pg';
import { execFile } from 'node:child_process';
import { appendFileSync, existsSync, mkdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { setFlagsFromString } from 'node:v8';
import type { Logger } from 'pino';
import { acquireDataDirLock, type DataDirLock, type LockRecord } from './dataDirLock.ts';
import { usePreparedPool } from './prepared.ts';

export type Db = Knex;
export type DatabaseKind = 'postgres' | 'pglite';

export interface Database {
  knex: Knex;
  kind: DatabaseKind;
  close(): Promise<void>;
  /** Embedded only: the whole cluster as an uncompressed tarball (the test suite's migrated template). */
  dumpEmbedded?: () => Promise<Blob>;
  /** Embedded on a DATA_DIR only: the record of the lock this process holds on the directory. */
  dataDirLock?: LockRecord;
  /** Embedded on a DATA_DIR only: the directory (PGlite's files are in its `pglite/`). */
  dataDir?: string;
  /**
   * Embedded only: runs `work` holding the single connection, so it starts once the app's open
   * transaction (if any) has ended and no statement runs until it returns (server/db/backup.ts).
   */
  exclusive?: <T>(work: (pglite: EmbeddedConnection) => Promise<T>) => Promise<T>;
  /**
   * Embedded only: LISTEN on `channel` in this process (PostgreSQL's notifications, delivered at
   * commit); resolves to a function that stops listening. On PostgreSQL use ChannelListener (db/listen.ts).
   */
  listen?: (channel: string, onNotify: (payload: string) => void) => Promise<() => Promise<void>>;
}

/** What `exclusive` gives its work: the PGlite instance, to run a statement on while the connection is held. */
export interface EmbeddedConnection {
  query<Row>(text: string, values?: unknown[]): Promise<{ rows: Row[] }>;
}

const INT8_OID = 20;
const NUMERIC_OID = 1700;
// Epoch milliseconds and row counts stay far below 2^53, so Number() is exact. Number itself, not
// a function calling it: pg calls the parser with the text alone, and rows hold several of these.
pg.types.setTypeParser(INT8_OID, Number);
pg.types.setTypeParser(NUMERIC_OID, Number);

export interface OpenDatabaseOptions {
  databaseUrl?: string | undefined;
  /** Directory for PGlite files; `memory` keeps the embedded database in memory. */
  dataDir?: string | 'memory';
  /** Embedded only: start from this `dumpDataDir()` tarball instead of an empty cluster (test templates). */
  embeddedTemplate?: Blob;
  poolMax?: number;
  /** PostgreSQL only: connections of the pool for named prepared statements (see server/db/prepared.ts). */
  readPoolMax?: number;
  /** Who holds the data-directory lock (named in the message another process gets), e.g. `server`, `migrate`. */
  lockPurpose?: string;
  /** Told when a stale lock (left by a crashed process) was replaced. */
  onStaleLock?: (message: string) => void;
  /** Where knex's own warnings go (console without it). */
  logger?: Logger;
  /** PGlite's shared_buffers (PostgreSQL units: 16MB, 131072kB …); see EMBEDDED_SHARED_BUFFERS. */
  embeddedSharedBuffers?: string;
  /** V8 settings for a small footprint (baseline-compiled WebAssembly, tighter heap growth); see EMBEDDED_V8_LOW_MEMORY. */
  embeddedV8LowMemory?: boolean;
  /** Append every statement to this file (SQL_CAPTURE_FILE). */
  sqlCaptureFile?: string | undefined;
}

/** What the embedded database is started with unless configured otherwise. */
export const EMBEDDED_SHARED_BUFFERS_DEFAULT = '16MB';

/**
 * PGlite's own start parameters plus a smaller buffer pool. PostgreSQL's default shared_buffers
 * (128MB) is allocated inside PGlite's WebAssembly memory at start (which grows past its initial
 * 128 MB for it) and stays resident: ~125 MB more RSS for no read throughput the bench can measure,
 * since the data files are read through the operating system's page cache anyway. See
 * bench/results/*-embedded-memory.md for what each setting costs.
 */
function embeddedStartParams(PGlite: { defaultStartParams: string[] }, sharedBuffers: string): string[] {
  return [...PGlite.defaultStartParams, '-c', `shared_buffers=${sharedBuffers}`];
}

/**
 * The embedded server is the small-installation profile, so V8 is set for footprint over peak speed
 * (measured in bench/results/*-embedded-memory.md):
 * - WebAssembly stays on V8's baseline compiler (Liftoff). By default V8 re-compiles hot functions
 *   with its optimising compiler (TurboFan) in the background; for PGlite's 9 MB module that holds
 *   ~50 MB more, for no throughput the API's indexed queries can measure (CPU-heavy queries such as
 *   large scans take 1.1–1.4× as long without it). Read when a module is compiled: set before PGlite
 *   compiles its own.
 * - The JS heap may grow to 1.5× the live size between full collections instead of V8's dynamic
 *   factor (up to 4×): under load the garbage of 32 concurrent requests otherwise takes the heap
 *   from ~60 to ~150 MB. Read at every full collection.
 * Both are process-wide, set at run time (unknown flags are ignored, so a Node upgrade cannot stop
 * the server from starting), and only where the process opens the embedded database. Without
 * them V8 runs as started (its defaults, or flags given on the command line or in NODE_OPTIONS).
 */
function useLowMemoryV8Settings(): void {
  setFlagsFromString('--liftoff-only');
  setFlagsFromString('--heap-growing-percent=50');
}

const run = promisify(execFile);

/**
 * Creates a new embedded database in a short-lived child process. Creating one in-process
 * (PGlite runs initdb in a second PGlite instance and copies the result) leaves ~500 MB resident in
 * the server until V8 happens to run a full collection, which an idle server may not do for a long
 * time, and ~170 MB even after one; the child exits and takes all of it with it.
 */
async function initializeEmbeddedDatabase(pgliteDir: string, startParams: string[]): Promise<void> {
  if (existsSync(join(pgliteDir, 'PG_VERSION'))) return;
  // Run from the project root so the child resolves the same @electric-sql/pglite.
  const projectRoot = resolve(import.meta.dirname, '../..');
  const script = [
    "const { PGlite } = await import('@electric-sql/pglite');",
    'const db = await PGlite.create(process.argv[1], { startParams: JSON.parse(process.argv[2]) });',
    'await db.close();',
  ].join('\n');
  try {
    await run(
      process.execPath,
      ['--input-type=module', '-e', script, resolve(pgliteDir), JSON.stringify(startParams)],
      {
        cwd: projectRoot,
        maxBuffer: 16 * 1024 * 1024,
      },
    );
  } catch (err) {
    const stderr = String((err as { stderr?: string }).stderr ?? '')
      .trim()
      .split('\n')
      .filter(Boolean)
      .pop();
    throw new Error(`creating the embedded database in ${pgliteDir} failed${stderr ? `: ${stderr}` : ''}`, {
      cause: err,
    });
  }
}

/**
 * knex prints a failed connection attempt with its stack ("Acquire connection error: …") although
 * the same error also reaches the caller, which reports it (503 for a request, one line at
 * start-up). Those go to debug; anything else knex has to say goes to the log as it is.
 */
function knexLog(logger: Logger | undefined): Knex.Config['log'] {
  const text = (message: unknown) => (typeof message === 'string' ? message : JSON.stringify(message));
  const out = (level: 'warn' | 'error', message: unknown) =>
    logger ? logger[level]({ component: 'knex' }, text(message)) : console[level](text(message));
  return {
    warn: (message: unknown) => {
      if (/^Acquire connection error/.test(text(message)))
        logger?.debug({ component: 'knex' }, text(message).split('\n')[0]!);
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
  const Base = base as unknown as new (
    config: unknown,
  ) => { processResponse(obj: { method?: string }, runner: unknown): unknown };
  class EmbeddedClient extends Base {
    override processResponse(obj: { method?: string }, runner: unknown): unknown {
      return super.processResponse(obj?.method === 'del' ? { ...obj, method: 'delete' } : obj, runner);
    }
  }
  return EmbeddedClient as unknown as typeof import('knex-pglite');
}

/**
 * Diagnostics for `npm run bench`: with SQL_CAPTURE_FILE set, every statement and its bindings (and
 * the name of a prepared statement) are appended there as JSON lines so the bench can EXPLAIN
 * exactly what the server ran, with the generic plan for a named one.
 */
function captureSql(knex: Knex, file: string | undefined): void {
  if (!file) return;
  knex.on('query', (q: { sql: string; bindings?: unknown[]; options?: { name?: string } }) =>
    appendFileSync(
      file,
      JSON.stringify({ sql: q.sql, bindings: q.bindings ?? [], ...(q.options?.name ? { name: q.options.name } : {}) }) +
        '\n',
    ),
  );
}

export async function openDatabase(options: OpenDatabaseOptions): Promise<Database> {
  if (options.databaseUrl) {
    // A black-holed host would otherwise hang each connect for the OS TCP timeout (minutes).
    // JIT off on every connection: compiling a statement's expressions takes tens of milliseconds
    // on each execution (nothing is cached), and this server's statements run in a few. PostgreSQL
    // compiles when a plan's estimated cost passes jit_above_cost, which a generic plan's guesses
    // (a LIMIT it cannot see, a whole channel of a million messages) easily do: the bench measured
    // the first page of a large channel at 150 ms with JIT and 5 ms without.
    const connection = {
      connectionString: options.databaseUrl,
      connectionTimeoutMillis: 10_000,
      options: '-c jit=off',
    };
    const knex = knexFactory({
      client: 'pg',
      connection,
      pool: { min: 0, max: options.poolMax ?? 10 },
      log: knexLog(options.logger),
    });
    // The named prepared statements run on connections of their own that always use the generic
    // plan (server/db/prepared.ts): no planning per request, and the plan their tests EXPLAIN.
    // Unnamed statements keep PostgreSQL's choice on the main pool. Its events are the main one's.
    const reads = knexFactory({
      client: 'pg',
      connection: { ...connection, options: '-c jit=off -c plan_cache_mode=force_generic_plan' },
      pool: { min: 0, max: options.readPoolMax ?? 10 },
      log: knexLog(options.logger),
    });
    for (const event of ['query', 'query-error', 'query-response'])
      reads.on(event, (...args: unknown[]) => knex.emit(event, ...args));
    usePreparedPool(knex, reads);
    captureSql(knex, options.sqlCaptureFile);
    return {
      knex,
      kind: 'postgres',
      close: async () => {
        await Promise.all([reads.destroy(), knex.destroy()]);
      },
    };
  }
  const { PGlite, types } = await import('@electric-sql/pglite');
  const { default: ClientPGLite } = await import('knex-pglite');
  let dataDir: string | undefined;
  let lock: DataDirLock | undefined;
  let home: string | undefined;
  if (options.dataDir && options.dataDir !== 'memory') {
    home = resolve(options.dataDir);
    mkdirSync(options.dataDir, { recursive: true });
    // Before PGlite touches the files: a second process must not open them at all.
    lock = acquireDataDirLock(options.dataDir, {
      purpose: options.lockPurpose ?? 'server',
      onStale: options.onStaleLock,
    });
    dataDir = `${options.dataDir}/pglite`;
  }
  const startParams = embeddedStartParams(PGlite, options.embeddedSharedBuffers ?? EMBEDDED_SHARED_BUFFERS_DEFAULT);
  if (options.embeddedV8LowMemory ?? true) useLowMemoryV8Settings();
  let pglite: InstanceType<typeof PGlite>;
  try {
    if (dataDir && !options.embeddedTemplate) await initializeEmbeddedDatabase(dataDir, startParams);
    pglite = await PGlite.create(dataDir, {
      startParams,
      ...(options.embeddedTemplate ? { loadDataDir: options.embeddedTemplate } : {}),
      parsers: { [types.INT8]: (v: string) => Number(v), [types.NUMERIC]: (v: string) => Number(v) },
    });
  } catch (err) {
    lock?.release();
    throw err;
  }
  const knex = knexFactory({
    client: embeddedClient(ClientPGLite),
    connection: { pglite } as never,
    log: knexLog(options.logger),
  });
  captureSql(knex, options.sqlCaptureFile);
  return {
    knex,
    kind: 'pglite',
    dumpEmbedded: () => pglite.dumpDataDir('none'),
    ...(lock ? { dataDirLock: lock.record, dataDir: home } : {}),
    exclusive: async (work) => {
      // knex-pglite's pool is this one connection: knex hands it out after a transaction's commit.
      const connection: unknown = await knex.client.acquireConnection();
      try {
        return await work(pglite);
      } finally {
        await knex.client.releaseConnection(connection);
      }
    },
    listen: async (channel, onNotify) => {
      // Holding the one connection, so that LISTEN never lands inside a transaction of the app's.
      const connection: unknown = await knex.client.acquireConnection();
      try {
        const stop = await pglite.listen(channel, onNotify);
        return async () => {
          if (!pglite.closed) await stop();
        };
      } finally {
        await knex.client.releaseConnection(connection);
      }
    },
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

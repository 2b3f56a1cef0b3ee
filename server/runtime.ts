/** Builds the app's dependencies from configuration: database, migrations, stores, admin token. */
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Logger } from 'pino';
import type { Config } from './config.ts';
import { DatabaseAuditSink } from './audit/index.ts';
import { DatabaseEventSink, EVENTS_CHANNEL, eventsRepo, WEBHOOK_QUEUE, WEBHOOKS_QUEUED } from './events/log.ts';
import { EventHub, type Subscribe } from './events/stream.ts';
import { friendViews } from './events/friends.ts';
import { ChannelListener } from './db/listen.ts';
import { backgroundContext, backgroundContextFor } from './context.ts';
import { DataDirLockedError } from './db/dataDirLock.ts';
import { openDatabase, type Database } from './db/knex.ts';
import { EmbeddedMaintenanceJob } from './db/maintenance.ts';
import { migrateLatest } from './db/migrate.ts';
import type { AppDeps, ResponseViolation } from './deps.ts';
import { ApiKeyAuthenticator } from './features/accounts/authenticator.ts';
import { RevocationListener } from './features/accounts/revocations.ts';
import { TrashRetentionJob } from './features/trash/retentionJob.ts';
import { defineLinkPreviews, defineMessageReencryption, queueMessageReencryption } from './features/messaging/index.ts';
import { defineExports, defineImports } from './features/portability/index.ts';
import { defineWebhookDelivery, pruneDeliveries, scheduleWebhookSweep } from './features/webhooks/index.ts';
import { MessageKeysMissingError, resolveMessageKeys } from './crypto/messageCipher.ts';
import { IdempotencyKeys, pruneIdempotencyKeys } from './idempotency/index.ts';
import { JobQueue } from './jobs/queue.ts';
import { Metrics } from './metrics.ts';
import { EXAMPLE_STORAGE_SIGNING_KEY } from './fixtures/keys.ts';
import { createObjectStorage } from './storage/index.ts';
import { defineStorageGc, scheduleStorageGc } from './storage/gcJob.ts';
import {
  MemoryRateLimitStore,
  PostgresRateLimitStore,
  RateLimiter,
  RedisRateLimitStore,
  type RateLimitStore,
} from './http/rateLimit.ts';

export interface Runtime {
  deps: AppDeps;
  /** Where the admin token came from, for the start-up banner. */
  adminTokenSource: 'env' | 'generated' | 'data-dir' | 'none';
  /** The durable job queue (also `deps.jobs`); startJobs() starts its worker. */
  jobs: JobQueue;
  /** Purges trashed items past their retention: queue `trash_retention`; tests also run it directly. */
  trashRetention: TrashRetentionJob;
  /** Listens for other instances' key revocations (PostgreSQL only). */
  revocations: RevocationListener | undefined;
  /** VACUUM (ANALYZE) for the embedded database, which has no autovacuum (queue `embedded_maintenance`); undefined on PostgreSQL. */
  maintenance: EmbeddedMaintenanceJob | undefined;
  /** Registers the recurring schedules (retention purge, embedded maintenance) and starts the job worker. */
  startJobs(): Promise<void>;
  /** Ends the open event streams cleanly (shutdown, before the HTTP server closes). */
  endStreams(): Promise<void>;
  close(): Promise<void>;
}

export interface RuntimeOptions {
  logger: Logger;
  /** `memory` keeps the embedded database in memory (tests). */
  embeddedDir?: string | 'memory';
  /** A dump of an already migrated embedded database to start from (tests; see test/helpers/globalSetup.ts). */
  embeddedTemplate?: Blob;
  clock?: () => number;
  onResponseViolation?: (violation: ResponseViolation) => void;
  rateLimitStore?: 'memory' | 'postgres' | 'redis';
}

/**
 * A dependency the server cannot start without is missing or misconfigured. The message is one
 * line an operator can act on (which setting, which address, what went wrong), so main.ts prints it
 * without a stack trace.
 */
export class StartupError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'StartupError';
  }
}

/** scheme://[user@]host:port/path of a connection URL, never its password or query. */
export function describeUrl(raw: string, defaultPort?: number): string {
  try {
    const url = new URL(raw);
    const user = url.username ? `${decodeURIComponent(url.username)}@` : '';
    const port = url.port || (defaultPort ? String(defaultPort) : '');
    return `${url.protocol}//${user}${url.hostname}${port ? `:${port}` : ''}${url.pathname === '/' ? '' : url.pathname}`;
  } catch {
    return `${raw.split(':')[0] ?? 'an'} URL that cannot be parsed`;
  }
}

/** The cause's message on one line (AggregateErrors from dual-stack connects carry theirs inside). */
function reason(err: unknown): string {
  if (err instanceof AggregateError && err.errors.length > 0) return reason(err.errors[0]);
  const text = err instanceof Error ? err.message || (err as NodeJS.ErrnoException).code || err.name : String(err);
  return text.replace(/\s+/g, ' ').trim();
}

const REDIS_CONNECT_TIMEOUT_MS = 5_000;

async function connectRedis(url: string, logger: Logger): Promise<RedisRateLimitStore> {
  const { Redis } = await import('ioredis');
  const where = describeUrl(url, 6379);
  const redis = new Redis(url, {
    lazyConnect: true,
    maxRetriesPerRequest: 2,
    connectTimeout: REDIS_CONNECT_TIMEOUT_MS,
  });
  // Without a listener ioredis prints every connection error with a stack ("Unhandled error event").
  // One warning per outage; the store's requests fail (and /readyz reports it) until Redis is back.
  let down = false;
  let started = false;
  let lastError: unknown;
  redis.on('error', (err: Error) => {
    lastError = err;
    if (!started || down) return;
    down = true;
    logger.warn({ redis: where, reason: reason(err) }, 'Redis connection lost (REDIS_URL); reconnecting');
  });
  redis.on('ready', () => {
    if (!down) return;
    down = false;
    logger.info({ redis: where }, 'Redis connection restored');
  });
  try {
    await redis.connect();
    await redis.ping();
  } catch (err) {
    redis.disconnect();
    // connect() itself only says "Connection is closed."; the cause arrived as an 'error' event.
    const cause = lastError ?? err;
    throw new StartupError(`Redis at ${where} (REDIS_URL) is not reachable: ${reason(cause)}`, { cause });
  }
  started = true;
  return new RedisRateLimitStore(redis);
}

function rateLimitStoreKind(config: Config, choice: RuntimeOptions['rateLimitStore']): 'memory' | 'postgres' | 'redis' {
  return choice ?? (config.redisUrl ? 'redis' : config.databaseUrl ? 'postgres' : 'memory');
}

function createLocalRateLimitStore(
  kind: 'memory' | 'postgres',
  config: Config,
  db: Database,
  clock: () => number,
): RateLimitStore {
  if (kind === 'postgres') return new PostgresRateLimitStore(db.knex, { clock, limit: config.rateLimitPerMinute });
  return new MemoryRateLimitStore();
}

/** ADMIN_TOKEN, or for the embedded default a token generated once and kept in DATA_DIR. */
function resolveAdminToken(
  config: Config,
  embeddedDir: string | 'memory' | undefined,
): { token: string | undefined; source: Runtime['adminTokenSource'] } {
  if (config.adminToken) return { token: config.adminToken, source: 'env' };
  if (config.databaseUrl || !embeddedDir || embeddedDir === 'memory') return { token: undefined, source: 'none' };
  const file = join(embeddedDir, 'admin-token');
  if (existsSync(file)) return { token: readFileSync(file, 'utf8').trim(), source: 'data-dir' };
  mkdirSync(embeddedDir, { recursive: true });
  const token = 'adm_' + randomBytes(32).toString('base64url');
  writeFileSync(file, token + '\n', { mode: 0o600 });
  return { token, source: 'generated' };
}

export async function createRuntime(configured: Config, options: RuntimeOptions): Promise<Runtime> {
  const embeddedDir = options.embeddedDir ?? configured.dataDir;
  // Message text is never stored in clear: no key, no start (server/crypto/messageCipher.ts). With
  // DATABASE_URL (or keys given) that is settled before anything is opened; the key an embedded
  // DATA_DIR generates for itself is read or created only once the database holds the directory's
  // lock, so two simultaneous first starts cannot race on its file.
  const withKeys = (from: Config): Config => {
    try {
      return {
        ...from,
        messageEncryptionKeys: resolveMessageKeys(from.messageEncryptionKeys, {
          databaseUrl: from.databaseUrl,
          dataDir: embeddedDir,
        }),
      };
    } catch (err) {
      if (err instanceof MessageKeysMissingError) throw new StartupError(err.message, { cause: err });
      throw err;
    }
  };
  const keysFromDataDir =
    !configured.databaseUrl && embeddedDir !== 'memory' && configured.messageEncryptionKeys.length === 0;
  let config: Config = keysFromDataDir ? configured : withKeys(configured);
  const databaseError = (err: unknown) => {
    if (err instanceof DataDirLockedError || err instanceof StartupError) return err;
    const what = config.databaseUrl
      ? `the database at ${describeUrl(config.databaseUrl, 5432)} (DATABASE_URL)`
      : embeddedDir === 'memory'
        ? 'the in-memory embedded database'
        : `the embedded database in ${embeddedDir} (DATA_DIR)`;
    return new StartupError(`Cannot use ${what}: ${reason(err)}`, { cause: err });
  };
  // Redis first: it fails in seconds, while opening (and on a first start, creating) the embedded
  // database takes longer and would be wasted.
  const storeKind = rateLimitStoreKind(config, options.rateLimitStore);
  const redisStore =
    storeKind === 'redis' ? await connectRedis(config.redisUrl ?? 'redis://127.0.0.1:6379', options.logger) : undefined;
  let db: Database;
  try {
    db = await openDatabase({
      databaseUrl: config.databaseUrl,
      dataDir: embeddedDir,
      embeddedTemplate: options.embeddedTemplate,
      poolMax: config.dbPoolMax,
      readPoolMax: config.dbReadPoolMax,
      lockPurpose: 'server',
      onStaleLock: (message) => options.logger.warn(message),
      logger: options.logger,
      embeddedSharedBuffers: config.embeddedSharedBuffers,
      embeddedV8LowMemory: config.embeddedV8LowMemory,
      sqlCaptureFile: config.sqlCaptureFile,
    });
  } catch (err) {
    await redisStore?.close().catch(() => undefined);
    throw databaseError(err);
  }
  if (keysFromDataDir) {
    try {
      config = withKeys(configured);
    } catch (err) {
      await db.close().catch(() => undefined);
      await redisStore?.close().catch(() => undefined);
      throw err;
    }
  }
  try {
    await migrateLatest(db.knex);
  } catch (err) {
    await db.close().catch(() => undefined);
    await redisStore?.close().catch(() => undefined);
    throw databaseError(err);
  }
  const clock = options.clock ?? Date.now;
  const store =
    redisStore ?? createLocalRateLimitStore(storeKind === 'postgres' ? 'postgres' : 'memory', config, db, clock);
  const apiKeys = new ApiKeyAuthenticator(db.knex, { ttlMs: config.apiKeyCacheTtlMs, clock, logger: options.logger });
  // Other instances' revocations (PostgreSQL only: the embedded database serves one process).
  const revocations = config.databaseUrl
    ? new RevocationListener(config.databaseUrl, apiKeys, options.logger)
    : undefined;
  await revocations?.start();
  const admin = resolveAdminToken(config, embeddedDir);
  const metrics = new Metrics({ db: db.knex });
  const jobs = new JobQueue(db.knex, { clock, logger: options.logger, metrics, pollMs: config.jobPollIntervalMs });
  const deps: AppDeps = {
    config,
    db,
    logger: options.logger,
    clock,
    apiKeys,
    rateLimiter: new RateLimiter(store, config.rateLimitPerMinute),
    adminToken: admin.token,
    // The filesystem backend's URL-signing key is kept in the data directory unless STORAGE_SIGNING_KEY is set;
    // fixture mode signs with the published example key, so that the storage examples' signatures verify.
    storage: createObjectStorage(
      config.seedExamples ? { ...config, storageSigningKey: EXAMPLE_STORAGE_SIGNING_KEY } : config,
      { clock, signingKeyDir: embeddedDir === 'memory' ? undefined : embeddedDir },
    ),
    metrics,
    jobs,
    audit: new DatabaseAuditSink(),
    events: new DatabaseEventSink(),
    idempotency: new IdempotencyKeys(() => deps.config.messageEncryptionKeys, config.idempotencyTtlHours * 3_600_000),
    eventHub: new EventHub(db.knex, {
      heartbeatMs: config.eventsHeartbeatSeconds * 1000,
      maxPerKey: config.eventsMaxStreamsPerKey,
      logger: options.logger,
      // An append that queued webhook deliveries says so: the delivery jobs are claimed at once.
      subscribe: subscribeToEvents(config, db, options.logger, (payload) => {
        if (payload === WEBHOOKS_QUEUED) jobs.wake(WEBHOOK_QUEUE);
      }),
      friends: friendViews(() => backgroundContext({ ...deps, db: db.knex }, { kind: 'system', job: 'event_stream' })),
    }),
    onResponseViolation: options.onResponseViolation,
  };
  await deps.eventHub!.start();
  // Events past EVENT_RETENTION_HOURS (docs/events.md), and webhook deliveries ended as long ago.
  jobs.define(
    'event_prune',
    async () => {
      const before = clock() - config.eventRetentionHours * 3_600_000;
      await eventsRepo.prune(db.knex, before);
      await pruneDeliveries(db.knex, before);
    },
    { maxAttempts: 3 },
  );
  // Idempotency keys past IDEMPOTENCY_TTL_HOURS (docs/api.md, "Safe retries").
  jobs.define('idempotency_prune', async () => void (await pruneIdempotencyKeys(db.knex, clock())), {
    maxAttempts: 3,
  });
  // Webhook deliveries, queued with their events (docs/webhooks.md).
  defineWebhookDelivery(
    jobs,
    { db: db.knex, config: () => deps.config, clock, logger: options.logger },
    config.webhookConcurrency,
  );
  const trashRetention = new TrashRetentionJob(db.knex, deps.storage, {
    defaultRetentionDays: config.trashRetentionDays,
    clock,
    logger: options.logger,
    context: (accountId, trx, now) => ({
      ...backgroundContextFor({ ...deps, db: db.knex }, { kind: 'system', job: 'trash_retention' }, accountId),
      db: trx,
      now,
    }),
  });
  const maintenance = db.kind === 'pglite' ? new EmbeddedMaintenanceJob(db.knex, options.logger) : undefined;
  // Each recurring pass is one job at a time (concurrency 1 per process; the schedule's key keeps a
  // second one from being queued while one is pending or running). A failed pass is retried with
  // backoff like any job; the next slot of the schedule comes regardless.
  jobs.define('trash_retention', async () => void (await trashRetention.runOnce()), { maxAttempts: 3 });
  if (maintenance) jobs.define('embedded_maintenance', () => maintenance.runOnce(), { maxAttempts: 1 });
  // A context taken when the job runs: the running server's settings (its keyring) and the time of the run.
  defineMessageReencryption(jobs, () =>
    backgroundContext({ ...deps, db: db.knex }, { kind: 'system', job: 'message_reencrypt' }),
  );
  // Link previews of messages: fetched, parsed and their images re-hosted off the request path.
  defineLinkPreviews(jobs, {
    db: db.knex,
    config: () => deps.config,
    storage: deps.storage,
    clock,
    logger: options.logger,
  });
  // Imports from other apps: one transaction per import; progress through the pool where there is one besides it.
  defineImports(jobs, () => backgroundContext({ ...deps, db: db.knex }, { kind: 'system', job: 'import' }), {
    progressDb: db.kind === 'pglite' ? null : db.knex,
    clock,
  });
  // Native exports: the account's archive written to object storage, off the request path.
  defineExports(jobs, () => backgroundContext({ ...deps, db: db.knex }, { kind: 'system', job: 'export' }), clock);
  defineStorageGc(jobs, {
    db: db.knex,
    storage: deps.storage,
    clock,
    logger: options.logger,
    graceMs: config.storageGcGraceMs,
  });
  return {
    deps,
    adminTokenSource: admin.source,
    jobs,
    trashRetention,
    revocations,
    maintenance,
    startJobs: async () => {
      const now = clock();
      // An interval of 0 turns a recurring job off, also for the schedule an earlier start stored.
      const recurring = (name: string, everyMs: number, firstRunAfter: number) =>
        everyMs > 0 ? jobs.schedule(name, name, everyMs, firstRunAfter) : jobs.unschedule(name);
      await recurring('trash_retention', config.trashPurgeIntervalMs, now);
      await recurring('event_prune', config.eventPruneIntervalMs, now + config.eventPruneIntervalMs);
      await recurring('idempotency_prune', config.idempotencyPruneIntervalMs, now + config.idempotencyPruneIntervalMs);
      await scheduleWebhookSweep(jobs, config.webhookSweepIntervalMs, now);
      // The first pass a second after start-up: a fresh database has no statistics yet.
      if (maintenance) await recurring('embedded_maintenance', config.embeddedMaintenanceIntervalMs, now + 1_000);
      // Expired staged uploads and unreferenced re-hosted note images (server/storage/gc.ts).
      await scheduleStorageGc(jobs, {
        enabled: deps.storage !== null,
        intervalMs: config.storageGcIntervalMs,
        firstRunAfter: now + config.storageGcIntervalMs,
      });
      // Rows still under an older message key after a rotation (MESSAGE_ENCRYPTION_KEYS).
      await queueMessageReencryption(jobs, db.knex, deps.config);
      jobs.start();
    },
    endStreams: async () => {
      await deps.eventHub?.close();
    },
    close: async () => {
      await deps.eventHub?.close();
      await jobs.stop();
      await revocations?.close();
      await apiKeys.close();
      await deps.rateLimiter.close();
      await db.close();
    },
  };
}

/** How the event hub hears of appends: LISTEN on PostgreSQL (every instance), PGlite's own listen embedded. */
function subscribeToEvents(
  config: Config,
  db: Database,
  logger: Logger,
  alsoOnNotify: (payload: string) => void,
): Subscribe {
  return async (handlers) => {
    const onConnected = () => handlers.onConnected();
    const onNotify = (payload: string) => {
      handlers.onNotify(payload);
      alsoOnNotify(payload);
    };
    if (config.databaseUrl) {
      const listener = new ChannelListener(
        config.databaseUrl,
        EVENTS_CHANNEL,
        { onNotify, onConnected },
        logger,
        'event-log',
      );
      await listener.start();
      return () => listener.close();
    }
    if (!db.listen) throw new Error('the embedded database cannot listen');
    return db.listen(EVENTS_CHANNEL, onNotify);
  };
}

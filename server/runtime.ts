/** Builds the app's dependencies from configuration: database, migrations, stores, admin token. */
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Logger } from 'pino';
import type { Config } from './config.ts';
import { openDatabase, type Database } from './db/knex.ts';
import { EmbeddedMaintenanceJob } from './db/maintenance.ts';
import { migrateLatest } from './db/migrate.ts';
import type { AppDeps, ResponseViolation } from './deps.ts';
import { ApiKeyAuthenticator } from './features/accounts/authenticator.ts';
import { RevocationListener } from './features/accounts/revocations.ts';
import { TrashRetentionJob } from './features/trash/retentionJob.ts';
import { Metrics } from './metrics.ts';
import { createObjectStorage } from './storage/index.ts';
import { MemoryRateLimitStore, PostgresRateLimitStore, RateLimiter, RedisRateLimitStore, type RateLimitStore } from './http/rateLimit.ts';

export interface Runtime {
  deps: AppDeps;
  /** Where the admin token came from, for the start-up banner. */
  adminTokenSource: 'env' | 'generated' | 'data-dir' | 'none';
  /** Purges trashed items past their retention; main.ts starts it, tests run it on demand. */
  trashRetention: TrashRetentionJob;
  /** Listens for other instances' key revocations (PostgreSQL only). */
  revocations: RevocationListener | undefined;
  /** VACUUM (ANALYZE) for the embedded database, which has no autovacuum; undefined on PostgreSQL. */
  maintenance: EmbeddedMaintenanceJob | undefined;
  /** Starts the background jobs (retention purge, embedded maintenance) on their configured intervals. */
  startJobs(): void;
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

async function createRateLimitStore(config: Config, db: Database, choice: RuntimeOptions['rateLimitStore'], clock: () => number): Promise<RateLimitStore> {
  const kind = choice ?? (config.redisUrl ? 'redis' : db.kind === 'postgres' ? 'postgres' : 'memory');
  if (kind === 'redis') {
    const { Redis } = await import('ioredis');
    const redis = new Redis(config.redisUrl ?? 'redis://127.0.0.1:6379', { lazyConnect: true, maxRetriesPerRequest: 2 });
    await redis.connect();
    return new RedisRateLimitStore(redis);
  }
  if (kind === 'postgres') return new PostgresRateLimitStore(db.knex, { clock, limit: config.rateLimitPerMinute });
  return new MemoryRateLimitStore();
}

/** ADMIN_TOKEN, or for the embedded default a token generated once and kept in DATA_DIR. */
function resolveAdminToken(config: Config, embeddedDir: string | 'memory' | undefined): { token: string | undefined; source: Runtime['adminTokenSource'] } {
  if (config.adminToken) return { token: config.adminToken, source: 'env' };
  if (config.databaseUrl || !embeddedDir || embeddedDir === 'memory') return { token: undefined, source: 'none' };
  const file = join(embeddedDir, 'admin-token');
  if (existsSync(file)) return { token: readFileSync(file, 'utf8').trim(), source: 'data-dir' };
  mkdirSync(embeddedDir, { recursive: true });
  const token = 'adm_' + randomBytes(32).toString('base64url');
  writeFileSync(file, token + '\n', { mode: 0o600 });
  return { token, source: 'generated' };
}

export async function createRuntime(config: Config, options: RuntimeOptions): Promise<Runtime> {
  const embeddedDir = options.embeddedDir ?? config.dataDir;
  const db = await openDatabase({
    databaseUrl: config.databaseUrl,
    dataDir: embeddedDir,
    embeddedTemplate: options.embeddedTemplate,
    poolMax: config.dbPoolMax,
  });
  try {
    await migrateLatest(db.knex);
  } catch (err) {
    await db.close();
    throw err;
  }
  const clock = options.clock ?? Date.now;
  const store = await createRateLimitStore(config, db, options.rateLimitStore, clock);
  const apiKeys = new ApiKeyAuthenticator(db.knex, { ttlMs: config.apiKeyCacheTtlMs, clock, logger: options.logger });
  // Other instances' revocations (PostgreSQL only: the embedded database serves one process).
  const revocations = config.databaseUrl ? new RevocationListener(config.databaseUrl, apiKeys, options.logger) : undefined;
  await revocations?.start();
  const admin = resolveAdminToken(config, embeddedDir);
  const deps: AppDeps = {
    config,
    db,
    logger: options.logger,
    clock,
    apiKeys,
    rateLimiter: new RateLimiter(store, config.rateLimitPerMinute),
    adminToken: admin.token,
    storage: createObjectStorage(config),
    metrics: new Metrics({ db: db.knex }),
    onResponseViolation: options.onResponseViolation,
  };
  const trashRetention = new TrashRetentionJob(db.knex, deps.storage, {
    defaultRetentionDays: config.trashRetentionDays,
    clock,
    logger: options.logger,
  }).reportTo(deps.metrics, 'trash_retention');
  const maintenance = db.kind === 'pglite' ? new EmbeddedMaintenanceJob(db.knex, options.logger).reportTo(deps.metrics, 'embedded_maintenance') : undefined;
  return {
    deps,
    adminTokenSource: admin.source,
    trashRetention,
    revocations,
    maintenance,
    startJobs: () => {
      trashRetention.start(config.trashPurgeIntervalMs);
      maintenance?.start(config.embeddedMaintenanceIntervalMs);
    },
    close: async () => {
      await trashRetention.stop();
      await maintenance?.stop();
      await revocations?.close();
      await apiKeys.close();
      await deps.rateLimiter.close();
      await db.close();
    },
  };
}

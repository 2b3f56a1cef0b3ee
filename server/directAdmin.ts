/**
 * `npm run admin -- --direct`: the admin API served inside the CLI's own process, on DATABASE_URL,
 * for a PostgreSQL installation whose server runs without ADMIN_TOKEN (its admin API answers 503):
 * the first account and key without restarting it. Requests go through the very app the server
 * runs — contract validation, the admin handlers, the accounts services with their transactions
 * and audit rows — over an in-memory connection (server/http/inProcess.ts), so answers, refusals
 * and audit records are the API's own; only the transport differs. The admin token is random and
 * exists only in this process. Revocations and deletions reach running servers as they do from the
 * API (PostgreSQL NOTIFY at commit).
 */
import { randomBytes } from 'node:crypto';
import type { Logger } from 'pino';
import { createApp } from './app.ts';
import { DatabaseAuditSink } from './audit/index.ts';
import { DatabaseEventSink } from './events/log.ts';
import type { Config } from './config.ts';
import { openDatabase } from './db/knex.ts';
import { pendingMigrations } from './db/migrate.ts';
import type { AppDeps } from './deps.ts';
import { ApiKeyAuthenticator } from './features/accounts/authenticator.ts';
import { inProcessFetch } from './http/inProcess.ts';
import { MemoryRateLimitStore, RateLimiter } from './http/rateLimit.ts';
import { IdempotencyKeys } from './idempotency/index.ts';
import { JobQueue } from './jobs/queue.ts';
import { Metrics } from './metrics.ts';
import { describeUrl, StartupError } from './runtime.ts';
import { createObjectStorage } from './storage/index.ts';

export interface DirectAdmin {
  /** Reaches the in-process app (any URL; only the path and query count). */
  fetch: typeof globalThis.fetch;
  /** The admin token the in-process app accepts. */
  token: string;
  close(): Promise<void>;
}

/**
 * Opens DATABASE_URL and the app on it. Refuses (StartupError, one line naming the setting) without
 * DATABASE_URL, when the database cannot be reached, or when its schema is not this version's
 * (pending migrations: it never migrates by itself).
 */
export async function openDirectAdmin(config: Config, logger: Logger): Promise<DirectAdmin> {
  if (!config.databaseUrl) {
    throw new StartupError(
      '--direct works on the PostgreSQL database of DATABASE_URL, which is not set; the embedded default keeps its admin token in DATA_DIR/admin-token (run without --direct)',
    );
  }
  const database = `database at ${describeUrl(config.databaseUrl, 5432)} (DATABASE_URL)`;
  const db = await openDatabase({ databaseUrl: config.databaseUrl, poolMax: 2, readPoolMax: 1, logger });
  try {
    const pending = await pendingMigrations(db.knex);
    if (pending > 0) {
      throw new StartupError(
        `The ${database} has ${pending} pending migration${pending === 1 ? '' : 's'}: run npm run db:migrate (or start the server) first`,
      );
    }
  } catch (err) {
    await db.close().catch(() => undefined);
    if (err instanceof StartupError) throw err;
    const reason = err instanceof Error ? err.message || (err as NodeJS.ErrnoException).code : String(err);
    throw new StartupError(`Cannot use the ${database}: ${reason}`, { cause: err });
  }
  const clock = Date.now;
  const token = `adm_${randomBytes(32).toString('base64url')}`;
  const apiKeys = new ApiKeyAuthenticator(db.knex, { ttlMs: 0, clock, logger });
  const rateLimiter = new RateLimiter(new MemoryRateLimitStore(), config.rateLimitPerMinute);
  const deps: AppDeps = {
    config,
    db,
    logger,
    clock,
    apiKeys,
    rateLimiter,
    adminToken: token,
    // The server's object storage (same settings), so delete-account removes the account's media too.
    // No signing-key directory: nothing is signed here, and nothing is written to DATA_DIR.
    storage: createObjectStorage(config, { clock }),
    metrics: new Metrics({ collectProcessMetrics: false }),
    jobs: new JobQueue(db.knex, { clock, logger }),
    audit: new DatabaseAuditSink(),
    events: new DatabaseEventSink(),
    // Admin operations take no Idempotency-Key; the store is there for the app's shape.
    idempotency: new IdempotencyKeys(() => config.messageEncryptionKeys, config.idempotencyTtlHours * 3_600_000),
    // The direct admin serves no event streams.
    eventHub: null,
  };
  return {
    fetch: inProcessFetch(createApp(deps)),
    token,
    close: async () => {
      await apiKeys.close();
      await rateLimiter.close();
      await db.close();
    },
  };
}

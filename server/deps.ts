/** Everything the app needs from the outside world, built by main.ts (or the test harness). */
import type { Logger } from 'pino';
import type { AuditSink, EventSink } from './core/context.ts';
import type { EventHub } from './events/stream.ts';
import type { Config } from './config.ts';
import type { Database } from './db/knex.ts';
import type { ApiKeyAuthenticator } from './features/accounts/authenticator.ts';
import type { RateLimiter } from './http/rateLimit.ts';
import type { IdempotencyKeys } from './idempotency/index.ts';
import type { JobQueue } from './jobs/queue.ts';
import type { Metrics } from './metrics.ts';
import type { ObjectStorage } from './storage/types.ts';

export interface ResponseViolation {
  method: string;
  path: string;
  status: number;
  message: string;
}

export interface AppDeps {
  config: Config;
  db: Database;
  logger: Logger;
  /** Current time in epoch ms; injectable so tests can move time. */
  clock: () => number;
  apiKeys: ApiKeyAuthenticator;
  rateLimiter: RateLimiter;
  /** Object storage for media; null when the operator configured none (OBJECT_STORAGE=none). */
  storage: ObjectStorage | null;
  /** Operator token for /admin/v1; undefined disables the admin API (every call is 503 PRECONDITION_FAILED). */
  adminToken: string | undefined;
  /** Prometheus metrics served by GET /metrics. */
  metrics: Metrics;
  /** The durable job queue: enqueue with the caller's transaction so a job commits with its write. */
  jobs: JobQueue;
  /** Where audited actions are recorded (in the action's own transaction). */
  audit: AuditSink;
  /** The event log (in the change's own transaction). */
  events: EventSink;
  /** Responses stored under POSTs' Idempotency-Key (server/idempotency/). */
  idempotency: IdempotencyKeys;
  /** The open event streams of this process (GET /api/v1/events); null where none are served. */
  eventHub: EventHub | null;
  /** Called when a response breaks the contract (validated in development and tests). */
  onResponseViolation?: (violation: ResponseViolation) => void;
}

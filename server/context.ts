/**
 * Service contexts for work outside an HTTP request: start-up seeding, background jobs, the
 * bench. Requests get theirs from the pipeline (server/http/pipeline.ts); both carry the same
 * shared services, so a service behaves the same whoever calls it.
 */
import type { Knex } from 'knex';
import type { Logger } from 'pino';
import { onBehalfOf } from './access/index.ts';
import { DatabaseAuditSink } from './audit/index.ts';
import type { Config } from './config.ts';
import type { Actor, AuditSink, EventSink, JobEnqueuer, ServerContext, ServiceContext } from './core/context.ts';
import { DatabaseEventSink } from './events/log.ts';
import { JobQueue } from './jobs/queue.ts';
import type { ObjectStorage } from './storage/types.ts';

export interface ContextParts {
  db: Knex;
  config: Config;
  logger: Logger;
  storage?: ObjectStorage | null;
  /** Defaults to a queue handle on `db` (enqueue only). */
  jobs?: JobEnqueuer;
  audit?: AuditSink;
  events?: EventSink;
  clock?: () => number;
}

/** A context acting on the server as a whole (no account), e.g. creating one. */
export function backgroundContext(parts: ContextParts, actor: Actor): ServerContext {
  const clock = parts.clock ?? Date.now;
  return {
    actor,
    db: parts.db,
    now: clock(),
    config: parts.config,
    log: parts.logger,
    storage: parts.storage ?? null,
    audit: parts.audit ?? new DatabaseAuditSink(),
    events: parts.events ?? new DatabaseEventSink(),
    jobs: parts.jobs ?? new JobQueue(parts.db, { clock, logger: parts.logger }),
  };
}

/** A context acting for one account with the owner's rights (a job working on that account's data). */
export function backgroundContextFor(parts: ContextParts, actor: Actor, accountId: string): ServiceContext {
  return { ...backgroundContext(parts, actor), access: onBehalfOf(accountId) };
}

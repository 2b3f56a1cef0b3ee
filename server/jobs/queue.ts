/**
 * A durable job queue on the application's own database (PostgreSQL or the embedded PGlite), in
 * the `jobs` and `job_schedules` tables (migration 0009).
 *
 * - Enqueue takes the caller's knex handle: inside a transaction, the job commits or rolls back
 *   with the write that asked for it.
 * - A worker claims due jobs with FOR UPDATE SKIP LOCKED and a lease (`locked_until`): several
 *   instances never take the same job, and a job whose worker died is claimed again once its lease
 *   has run out. Delivery is therefore at-least-once: handlers must be idempotent (or finish within
 *   their lease).
 * - A failed attempt goes back to pending after an exponential backoff (base · 2^(attempt−1),
 *   capped); after `maxAttempts` it is dead-lettered (state `dead`, last error kept) and counted.
 * - Completed jobs are deleted; dead ones stay for an operator to look at.
 * - Recurring jobs: every instance ticks the schedules; one UPDATE … RETURNING advances each due
 *   schedule to its next slot after now (missed slots are skipped, not replayed) and enqueues its
 *   job, so exactly one instance wins each slot; a schedule's job that is still pending or running
 *   is not enqueued again.
 *
 * Every statement goes through knex: on the embedded database (one connection) the queue waits
 * behind the application's transactions instead of slipping into them. Times are epoch ms from
 * the injectable clock.
 *
 * Why not pg-boss or graphile-worker: pg-boss 11+ needs Node 22, its 10.x line works on PGlite only
 * through an adapter over knex internals, and it keeps its own self-migrating schema and the
 * database's clock; graphile-worker needs a pg Pool (PGlite only behind pglite-socket, where
 * NOTIFY and session state are shared and a rolled-back enqueue ran). See docs/architecture.md.
 */
import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import type { Knex } from 'knex';
import type { Logger } from 'pino';

export interface JobMetrics {
  jobRun(job: string, outcome: 'success' | 'failure', seconds: number): void;
  jobDead?(job: string): void;
}

export interface Job<P = unknown> {
  id: string;
  queue: string;
  payload: P;
  /** This attempt's number, from 1. */
  attempt: number;
  maxAttempts: number;
}

export type JobHandler<P = unknown> = (job: Job<P>) => Promise<void>;

export interface QueueDefinition {
  /** Jobs of this queue run at the same time in one process. */
  concurrency?: number;
  /** Attempts before a job is dead-lettered (default for enqueues that do not say). */
  maxAttempts?: number;
  /** How long a claimed job is this worker's; past it, another worker may take it again. */
  leaseMs?: number;
}

export interface EnqueueOptions {
  /** Not before this time (epoch ms); now by default. */
  runAfter?: number;
  maxAttempts?: number;
  /** While a job with this key is pending or running in the queue, enqueueing it again does nothing. */
  key?: string;
}

export interface JobQueueOptions {
  clock: () => number;
  logger: Logger;
  metrics?: JobMetrics;
  /** How often an idle worker looks for due jobs and ticks the schedules. */
  pollMs?: number;
  backoffBaseMs?: number;
  backoffCapMs?: number;
  /** Identifies this worker in `locked_by` (host, pid and a random part by default). */
  workerId?: string;
}

interface Registered {
  handler: JobHandler;
  concurrency: number;
  maxAttempts: number;
  leaseMs: number;
  running: number;
}

interface ClaimedRow {
  id: string;
  queue: string;
  payload: unknown;
  attempts: number;
  max_attempts: number;
}

const DEFAULTS = {
  concurrency: 1,
  maxAttempts: 5,
  leaseMs: 5 * 60_000,
  pollMs: 1000,
  backoffBaseMs: 1000,
  backoffCapMs: 3_600_000,
};
const MAX_ERROR_LENGTH = 2000;

function rowsOf<T>(result: unknown): T[] {
  return ((result as { rows?: T[] }).rows ?? (result as T[])) as T[];
}

export class JobQueue {
  private readonly queues = new Map<string, Registered>();
  private readonly workerId: string;
  private readonly inFlight = new Set<Promise<void>>();
  private timer: NodeJS.Timeout | undefined;
  private polling: Promise<number> | undefined;
  /** Not polling on its own (before start(), after stop()). */
  private stopped = true;
  /** stop() was called: claim nothing more. */
  private closing = false;

  constructor(
    private readonly db: Knex,
    private readonly options: JobQueueOptions,
  ) {
    this.workerId = options.workerId ?? `${hostname()}:${process.pid}:${randomUUID().slice(0, 8)}`;
  }

  /** The handler of a queue; a process only claims jobs of the queues it defines. */
  define<P>(queue: string, handler: JobHandler<P>, definition: QueueDefinition = {}): this {
    if (this.queues.has(queue)) throw new Error(`queue ${queue} is already defined`);
    this.queues.set(queue, {
      handler: handler as JobHandler,
      concurrency: definition.concurrency ?? DEFAULTS.concurrency,
      maxAttempts: definition.maxAttempts ?? DEFAULTS.maxAttempts,
      leaseMs: definition.leaseMs ?? DEFAULTS.leaseMs,
      running: 0,
    });
    return this;
  }

  /**
   * Adds a job with `db` — pass the caller's transaction so the job exists exactly when the write
   * that asked for it commits. Returns the job id, or null when a job with the same key is
   * already pending or running.
   */
  async enqueue(db: Knex, queue: string, payload: unknown, options: EnqueueOptions = {}): Promise<string | null> {
    const now = this.options.clock();
    const id = randomUUID();
    const row = {
      id,
      queue,
      payload: JSON.stringify(payload ?? null),
      key: options.key ?? null,
      state: 'pending',
      attempts: 0,
      max_attempts: options.maxAttempts ?? this.queues.get(queue)?.maxAttempts ?? DEFAULTS.maxAttempts,
      run_after: options.runAfter ?? now,
      created_at: now,
      updated_at: now,
    };
    if (options.key === undefined) {
      await db('jobs').insert(row);
      return id;
    }
    const inserted = await db('jobs')
      .insert(row)
      .onConflict(db.raw(`(queue, key) where key is not null and state in ('pending', 'running')`))
      .ignore()
      .returning('id');
    return inserted.length > 0 ? id : null;
  }

  /**
   * A recurring job: `queue` gets a job every `everyMs`, the first at `firstRunAfter` (now).
   * Idempotent across instances and restarts: an existing schedule keeps its next slot, unless the
   * interval was shortened so far that the slot lies more than one new interval away.
   */
  async schedule(name: string, queue: string, everyMs: number, firstRunAfter?: number): Promise<void> {
    if (!Number.isSafeInteger(everyMs) || everyMs <= 0)
      throw new RangeError(`schedule ${name}: everyMs must be a positive integer`);
    const next = firstRunAfter ?? this.options.clock();
    await this.db('job_schedules')
      .insert({ name, queue, every_ms: everyMs, next_run_after: next })
      .onConflict('name')
      .merge({
        queue,
        every_ms: everyMs,
        next_run_after: this.db.raw('least(job_schedules.next_run_after, excluded.next_run_after + excluded.every_ms)'),
      });
  }

  /** Removes a recurring job (an operator turned it off); jobs it already queued still run. */
  async unschedule(name: string): Promise<void> {
    await this.db('job_schedules').where({ name }).delete();
  }

  /** Starts polling; stop() waits for the jobs in flight. */
  start(): void {
    if (!this.stopped) return;
    this.stopped = false;
    this.closing = false;
    const loop = () => {
      if (this.stopped) return;
      this.poll()
        .catch((err) => this.options.logger.error({ err }, 'job queue poll failed'))
        .finally(() => {
          if (!this.stopped) {
            this.timer = setTimeout(loop, this.options.pollMs ?? DEFAULTS.pollMs);
            this.timer.unref();
          }
        });
    };
    loop();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.closing = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    await this.polling?.catch(() => undefined);
    await Promise.allSettled([...this.inFlight]);
  }

  /**
   * Ticks the schedules, dead-letters expired last attempts, then claims and runs due jobs until
   * none is left (or every queue is at its concurrency). Returns how many jobs it started. Tests
   * call it directly; start() calls it on every poll.
   */
  runDue(): Promise<number> {
    return this.poll(true);
  }

  private poll(waitForJobs = false): Promise<number> {
    this.polling ??= this.pollOnce(waitForJobs).finally(() => {
      this.polling = undefined;
    });
    return this.polling;
  }

  private async pollOnce(waitForJobs: boolean): Promise<number> {
    if (this.queues.size === 0) return 0;
    await this.tickSchedules();
    await this.reapExpired();
    let started = 0;
    for (;;) {
      const claimed = await this.claimAll();
      started += claimed;
      if (!waitForJobs) return started;
      await Promise.allSettled([...this.inFlight]);
      if (claimed === 0) return started;
    }
  }

  private async tickSchedules(): Promise<void> {
    const now = this.options.clock();
    const queues = [...this.queues.keys()];
    // One statement: each due schedule moves to its next slot and enqueues its job; of several
    // instances ticking at once, the row lock lets exactly one advance a slot.
    await this.db.raw(
      `with due as (
         update job_schedules
            set next_run_after = next_run_after + every_ms * (floor((?::bigint - next_run_after) / every_ms)::bigint + 1)
          where next_run_after <= ? and queue = any(?::text[])
         returning name, queue
       )
       insert into jobs (id, queue, payload, key, state, attempts, max_attempts, run_after, created_at, updated_at)
       select gen_random_uuid(), due.queue, jsonb_build_object('schedule', due.name), 'schedule:' || due.name, 'pending', 0, ?, ?, ?, ?
         from due
       on conflict (queue, key) where key is not null and state in ('pending', 'running') do nothing`,
      [now, now, queues, DEFAULTS.maxAttempts, now, now, now],
    );
  }

  private async reapExpired(): Promise<void> {
    const now = this.options.clock();
    const dead = rowsOf<{ queue: string }>(
      await this.db.raw(
        `update jobs set state = 'dead', last_error = coalesce(last_error, 'lease expired'), locked_by = null, locked_until = null, updated_at = ?
          where state = 'running' and locked_until < ? and attempts >= max_attempts
          returning queue`,
        [now, now],
      ),
    );
    for (const row of dead) this.options.metrics?.jobDead?.(row.queue);
  }

  /** Claims what each queue has room for; returns how many jobs were started. */
  private async claimAll(): Promise<number> {
    let started = 0;
    for (const [queue, registered] of this.queues) {
      const room = registered.concurrency - registered.running;
      if (room <= 0 || this.closing) continue;
      const now = this.options.clock();
      const claimed = rowsOf<ClaimedRow>(
        await this.db.raw(
          `with next as (
             select id from jobs
              where queue = ?
                and ((state = 'pending' and run_after <= ?) or (state = 'running' and locked_until < ? and attempts < max_attempts))
              order by run_after, id
              limit ?
              for update skip locked
           )
           update jobs j
              set state = 'running', attempts = j.attempts + 1, locked_by = ?, locked_until = ?, updated_at = ?
             from next
            where j.id = next.id
           returning j.id, j.queue, j.payload, j.attempts, j.max_attempts`,
          [queue, now, now, room, this.workerId, now + registered.leaseMs, now],
        ),
      );
      for (const row of claimed) this.run(registered, row);
      started += claimed.length;
    }
    return started;
  }

  private run(registered: Registered, row: ClaimedRow): void {
    registered.running++;
    const started = process.hrtime.bigint();
    const job: Job = {
      id: row.id,
      queue: row.queue,
      payload: row.payload,
      attempt: row.attempts,
      maxAttempts: row.max_attempts,
    };
    const seconds = () => Number(process.hrtime.bigint() - started) / 1e9;
    const task = (async () => {
      try {
        await registered.handler(job);
        await this.db('jobs').where({ id: row.id, locked_by: this.workerId, state: 'running' }).delete();
        this.options.metrics?.jobRun(row.queue, 'success', seconds());
      } catch (err) {
        this.options.metrics?.jobRun(row.queue, 'failure', seconds());
        await this.fail(row, err).catch((e) =>
          this.options.logger.error({ err: e, jobId: row.id }, 'could not record a failed job'),
        );
      }
    })().finally(() => {
      registered.running--;
      this.inFlight.delete(task);
    });
    this.inFlight.add(task);
  }

  private async fail(row: ClaimedRow, err: unknown): Promise<void> {
    const now = this.options.clock();
    const message = (err instanceof Error ? err.message : String(err)).slice(0, MAX_ERROR_LENGTH);
    const base = this.options.backoffBaseMs ?? DEFAULTS.backoffBaseMs;
    const cap = this.options.backoffCapMs ?? DEFAULTS.backoffCapMs;
    const delay = Math.min(base * 2 ** (row.attempts - 1), cap);
    const dead = row.attempts >= row.max_attempts;
    const updated = await this.db('jobs')
      .where({ id: row.id, locked_by: this.workerId, state: 'running' })
      .update({
        state: dead ? 'dead' : 'pending',
        run_after: now + delay,
        last_error: message,
        locked_by: null,
        locked_until: null,
        updated_at: now,
      });
    const level = dead ? 'error' : 'warn';
    this.options.logger[level](
      { err, jobId: row.id, queue: row.queue, attempt: row.attempts, maxAttempts: row.max_attempts },
      dead ? 'job failed for good (dead-lettered)' : 'job failed; will retry',
    );
    if (dead && Number(updated) > 0) this.options.metrics?.jobDead?.(row.queue);
  }
}

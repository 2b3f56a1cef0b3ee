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
 * Every statement is a named statement (server/db/statements.ts, committed as
 * generated/sql/jobs.sql) run on knex's connections: on the embedded database (one connection) the
 * queue waits behind the application's transactions instead of slipping into them. Times are
 * epoch ms from the injectable clock.
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
import { type Sql, sql } from '../db/sql.ts';
import { EXAMPLE_UUID, statement } from '../db/statements.ts';

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
  name: string;
  handler: JobHandler;
  concurrency: number;
  maxAttempts: number;
  leaseMs: number;
  running: number;
  /** A claim in flight (one at a time per queue, so room is never counted twice). */
  claiming?: Promise<number>;
  /** Asked to claim while a claim was in flight: claim once more after it. */
  again?: boolean;
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

const AREA = 'jobs';
/** Names the partial unique index jobs_key: a key pending or running in its queue. */
const ON_KEY = sql`on conflict (queue, key) where key is not null and state in ('pending', 'running') do nothing`;

/**
 * For a statement that queues jobs as part of its own work (an event's webhook deliveries, in the
 * event's transaction): inserts one job of `queue` per distinct row of `rows` (a query yielding
 * `payload jsonb` and `key text`), due at `now`, skipping a key already pending or running.
 */
export function enqueueRows(queue: string, rows: Sql, now: Sql, maxAttempts = DEFAULTS.maxAttempts): Sql {
  return sql`insert into jobs (id, queue, payload, key, state, attempts, max_attempts, run_after, created_at, updated_at)
    select gen_random_uuid(), ${queue}::text, r.payload, r.key, 'pending', 0, ${maxAttempts}::int, ${now}, ${now}, ${now}
      from (select distinct on (key) payload, key from (${rows}) q) r
    ${ON_KEY}`;
}

interface JobInsert {
  id: string;
  queue: string;
  /** JSON text. */
  payload: string;
  key: string | null;
  max_attempts: number;
  run_after: number;
  now: number;
}

/** Adds a pending job, unless its key is pending or running in the queue already (then no row). */
const insertJob = statement<{ job: JobInsert }, { id: string }>({
  name: 'jobs_enqueue',
  area: AREA,
  variants: {
    'a job, with or without a key': {
      job: { id: EXAMPLE_UUID, queue: 'q', payload: 'null', key: null, max_attempts: 5, run_after: 0, now: 0 },
    },
  },
  build: ({
    job: j,
  }) => sql`insert into jobs (id, queue, payload, key, state, attempts, max_attempts, run_after, created_at, updated_at)
    values (${j.id}::uuid, ${j.queue}::text, ${j.payload}::jsonb, ${j.key}::text, 'pending', 0, ${j.max_attempts}::int, ${j.run_after}::bigint, ${j.now}::bigint, ${j.now}::bigint)
    ${ON_KEY}
    returning id`,
});

/** Creates or updates a schedule; an existing one keeps its slot unless that lies more than one new interval away. */
const upsertSchedule = statement<{ name: string; queue: string; everyMs: number; next: number }, never>({
  name: 'jobs_schedule',
  area: AREA,
  variants: { 'one schedule': { name: 's', queue: 'q', everyMs: 1, next: 0 } },
  build: ({ name, queue, everyMs, next }) => sql`insert into job_schedules (name, queue, every_ms, next_run_after)
    values (${name}::text, ${queue}::text, ${everyMs}::bigint, ${next}::bigint)
    on conflict (name) do update set
      queue = excluded.queue,
      every_ms = excluded.every_ms,
      next_run_after = least(job_schedules.next_run_after, excluded.next_run_after + excluded.every_ms)`,
});

const deleteSchedule = statement<{ name: string }, never>({
  name: 'jobs_unschedule',
  area: AREA,
  variants: { 'one schedule': { name: 's' } },
  build: ({ name }) => sql`delete from job_schedules where name = ${name}::text`,
});

/**
 * Each due schedule of `queues` moves to its next slot after now and enqueues its job (not when
 * that job is still pending or running); of several instances ticking at once, the row lock lets
 * exactly one advance a slot.
 */
const tickSchedules = statement<{ now: number; queues: readonly string[]; maxAttempts: number }, never>({
  name: 'jobs_tick_schedules',
  area: AREA,
  variants: { 'the defined queues': { now: 0, queues: [], maxAttempts: 5 } },
  build: ({ now, queues, maxAttempts }) => sql`with due as (
         update job_schedules
            set next_run_after = next_run_after + every_ms * (floor((${now}::bigint - next_run_after) / every_ms)::bigint + 1)
          where next_run_after <= ${now}::bigint and queue = any(${[...queues]}::text[])
         returning name, queue
       )
       insert into jobs (id, queue, payload, key, state, attempts, max_attempts, run_after, created_at, updated_at)
       select gen_random_uuid(), due.queue, jsonb_build_object('schedule', due.name), 'schedule:' || due.name, 'pending', 0, ${maxAttempts}::int, ${now}::bigint, ${now}::bigint, ${now}::bigint
         from due
       ${ON_KEY}`,
});

/** Dead-letters the running jobs whose lease ran out on their last attempt; their queues. */
const reapExpired = statement<{ now: number }, { queue: string }>({
  name: 'jobs_reap_expired',
  area: AREA,
  variants: { now: { now: 0 } },
  build: ({
    now,
  }) => sql`update jobs set state = 'dead', last_error = coalesce(last_error, 'lease expired'), locked_by = null, locked_until = null, updated_at = ${now}::bigint
          where state = 'running' and locked_until < ${now}::bigint and attempts >= max_attempts
          returning queue`,
});

/** Claims up to `room` due jobs of the queue (pending and due, or running with an expired lease and attempts left). */
const claimJobs = statement<
  { queue: string; now: number; room: number; workerId: string; lockedUntil: number },
  ClaimedRow
>({
  name: 'jobs_claim',
  area: AREA,
  variants: { 'one queue': { queue: 'q', now: 0, room: 1, workerId: 'w', lockedUntil: 0 } },
  build: ({ queue, now, room, workerId, lockedUntil }) => sql`with next as (
             select id from jobs
              where queue = ${queue}::text
                and ((state = 'pending' and run_after <= ${now}::bigint) or (state = 'running' and locked_until < ${now}::bigint and attempts < max_attempts))
              order by run_after, seq
              limit ${room}::int
              for update skip locked
           )
           update jobs j
              set state = 'running', attempts = j.attempts + 1, locked_by = ${workerId}::text, locked_until = ${lockedUntil}::bigint, updated_at = ${now}::bigint
             from next
            where j.id = next.id
           returning j.id, j.queue, j.payload, j.attempts, j.max_attempts`,
});

/** Deletes a finished job this worker still holds. */
const completeJob = statement<{ id: string; workerId: string }, never>({
  name: 'jobs_complete',
  area: AREA,
  variants: { 'one job': { id: EXAMPLE_UUID, workerId: 'w' } },
  build: ({ id, workerId }) =>
    sql`delete from jobs where id = ${id}::uuid and locked_by = ${workerId}::text and state = 'running'`,
});

/** Records a failed attempt of a job this worker still holds: back to pending after a delay, or dead; the ids updated. */
const failJob = statement<
  { id: string; workerId: string; state: 'dead' | 'pending'; runAfter: number; error: string; now: number },
  { id: string }
>({
  name: 'jobs_fail',
  area: AREA,
  variants: { 'one job': { id: EXAMPLE_UUID, workerId: 'w', state: 'pending', runAfter: 0, error: '', now: 0 } },
  build: ({ id, workerId, state, runAfter, error, now }) => sql`update jobs
    set state = ${state}::text, run_after = ${runAfter}::bigint, last_error = ${error}::text, locked_by = null, locked_until = null, updated_at = ${now}::bigint
    where id = ${id}::uuid and locked_by = ${workerId}::text and state = 'running'
    returning id`,
});

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
      name: queue,
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
    const inserted = await insertJob(db, {
      job: {
        id,
        queue,
        payload: JSON.stringify(payload ?? null),
        key: options.key ?? null,
        max_attempts: options.maxAttempts ?? this.queues.get(queue)?.maxAttempts ?? DEFAULTS.maxAttempts,
        run_after: options.runAfter ?? now,
        now,
      },
    });
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
    await upsertSchedule(this.db, { name, queue, everyMs, next });
  }

  /** Removes a recurring job (an operator turned it off); jobs it already queued still run. */
  async unschedule(name: string): Promise<void> {
    await deleteSchedule(this.db, { name });
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
    await tickSchedules(this.db, { now, queues, maxAttempts: DEFAULTS.maxAttempts });
  }

  private async reapExpired(): Promise<void> {
    const now = this.options.clock();
    const dead = await reapExpired(this.db, { now });
    for (const row of dead) this.options.metrics?.jobDead?.(row.queue);
  }

  /** Claims what each queue has room for; returns how many jobs were started. */
  private async claimAll(): Promise<number> {
    let started = 0;
    for (const registered of this.queues.values()) started += await this.claim(registered);
    return started;
  }

  /** Claims what one queue has room for, one claim at a time per queue; how many jobs were started. */
  private claim(registered: Registered): Promise<number> {
    if (registered.claiming) {
      registered.again = true;
      return registered.claiming;
    }
    registered.claiming = (async () => {
      let started = 0;
      do {
        registered.again = false;
        const room = registered.concurrency - registered.running;
        if (room <= 0 || this.closing) break;
        const now = this.options.clock();
        const claimed = await claimJobs(this.db, {
          queue: registered.name,
          now,
          room,
          workerId: this.workerId,
          lockedUntil: now + registered.leaseMs,
        });
        for (const row of claimed) this.run(registered, row);
        started += claimed.length;
      } while (registered.again);
      return started;
    })().finally(() => {
      registered.claiming = undefined;
    });
    return registered.claiming;
  }

  /**
   * Claims due jobs of `queue` now rather than at the next poll: a job was just queued (a
   * notification said so) or one of the queue's jobs ended. Does nothing unless polling (start()).
   */
  wake(queue: string): void {
    const registered = this.queues.get(queue);
    if (!registered || this.stopped || this.closing) return;
    this.claim(registered).catch((err) => this.options.logger.error({ err, queue }, 'job claim failed'));
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
        await completeJob(this.db, { id: row.id, workerId: this.workerId });
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
      // The room it leaves is taken at once, not at the next poll.
      this.wake(registered.name);
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
    const updated = await failJob(this.db, {
      id: row.id,
      workerId: this.workerId,
      state: dead ? 'dead' : 'pending',
      runAfter: now + delay,
      error: message,
      now,
    });
    const level = dead ? 'error' : 'warn';
    this.options.logger[level](
      { err, jobId: row.id, queue: row.queue, attempt: row.attempts, maxAttempts: row.max_attempts },
      dead ? 'job failed for good (dead-lettered)' : 'job failed; will retry',
    );
    if (dead && updated.length > 0) this.options.metrics?.jobDead?.(row.queue);
  }
}

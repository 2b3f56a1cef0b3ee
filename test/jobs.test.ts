/** The durable job queue (server/jobs/queue.ts) on the test database: PGlite, or PostgreSQL when DATABASE_URL is set. */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { openDatabase } from '../server/db/knex.ts';
import { migrateLatest } from '../server/db/migrate.ts';
import { JobQueue, type Job } from '../server/jobs/queue.ts';
import { createLogger } from '../server/logger.ts';
import { useServer } from './helpers/server.ts';

const server = useServer();
const logger = createLogger('silent');
const knex = () => server.deps.db.knex;

function queueAt(
  clock: { now: number },
  extra: Partial<ConstructorParameters<typeof JobQueue>[1]> = {},
  db = knex(),
): JobQueue {
  return new JobQueue(db, { clock: () => clock.now, logger, backoffBaseMs: 1000, backoffCapMs: 60_000, ...extra });
}

const state = async (id: string) =>
  knex()('jobs').where({ id }).first('state', 'attempts', 'run_after', 'last_error', 'locked_by');
let queueCounter = 0;
const uniqueQueue = (name: string) => `${name}_${++queueCounter}_${Date.now()}`;

describe('enqueue', () => {
  it('a job enqueued in a transaction that rolls back never runs; one that commits runs once', async () => {
    const clock = { now: 1_000_000 };
    const queue = uniqueQueue('mail');
    const ran: unknown[] = [];
    const q = queueAt(clock).define(queue, async (job) => void ran.push(job.payload));
    await knex()
      .transaction(async (trx) => {
        await q.enqueue(trx, queue, { n: 'rolled back' });
        throw new Error('the write failed');
      })
      .catch(() => undefined);
    await knex().transaction(async (trx) => {
      await q.enqueue(trx, queue, { n: 'committed' });
    });
    expect(await q.runDue()).toBe(1);
    expect(ran).toEqual([{ n: 'committed' }]);
    expect(await q.runDue()).toBe(0);
    expect(await knex()('jobs').where({ queue }).count({ n: '*' }).first()).toEqual({ n: 0 });
  });

  it('waits for runAfter, and a key that is pending or running is not enqueued twice', async () => {
    const clock = { now: 2_000_000 };
    const queue = uniqueQueue('later');
    const ran: string[] = [];
    const q = queueAt(clock).define<{ n: string }>(queue, async (job) => void ran.push(job.payload.n));
    await q.enqueue(knex(), queue, { n: 'later' }, { runAfter: clock.now + 5000 });
    expect(await q.enqueue(knex(), queue, { n: 'keyed' }, { key: 'k1' })).toEqual(expect.any(String));
    expect(await q.enqueue(knex(), queue, { n: 'keyed again' }, { key: 'k1' })).toBeNull();
    await q.runDue();
    expect(ran).toEqual(['keyed']);
    // Once done, the key may be used again.
    expect(await q.enqueue(knex(), queue, { n: 'keyed later' }, { key: 'k1' })).toEqual(expect.any(String));
    clock.now += 5000;
    await q.runDue();
    expect(ran.sort()).toEqual(['keyed', 'keyed later', 'later']);
  });
});

describe('failures', () => {
  it('retry after 1 s, 2 s, 4 s (exponential backoff), then are dead-lettered with the last error', async () => {
    const clock = { now: 3_000_000 };
    const queue = uniqueQueue('flaky');
    const attempts: number[] = [];
    const dead: string[] = [];
    const runs: string[] = [];
    const q = queueAt(clock, {
      metrics: { jobRun: (_job, outcome) => void runs.push(outcome), jobDead: (job) => void dead.push(job) },
    }).define(
      queue,
      async (job: Job) => {
        attempts.push(job.attempt);
        throw new Error(`boom ${job.attempt}`);
      },
      { maxAttempts: 4 },
    );
    const id = (await q.enqueue(knex(), queue, {}))!;
    const start = clock.now;
    await q.runDue();
    expect(await state(id)).toMatchObject({
      state: 'pending',
      attempts: 1,
      run_after: start + 1000,
      last_error: 'boom 1',
      locked_by: null,
    });
    for (const [wait, attempt] of [
      [1000, 2],
      [2000, 3],
      [4000, 4],
    ] as const) {
      clock.now += wait - 1;
      expect(await q.runDue(), `attempt ${attempt} not before its time`).toBe(0);
      clock.now += 1;
      expect(await q.runDue()).toBe(1);
      expect(attempts.at(-1)).toBe(attempt);
    }
    expect(await state(id)).toMatchObject({ state: 'dead', attempts: 4, last_error: 'boom 4' });
    clock.now += 3_600_000;
    expect(await q.runDue()).toBe(0); // dead jobs are never run again
    expect(attempts).toEqual([1, 2, 3, 4]);
    expect(dead).toEqual([queue]);
    expect(runs).toEqual(['failure', 'failure', 'failure', 'failure']);
  });

  it('a job whose worker died is taken again once its lease runs out; its last attempt is dead-lettered', async () => {
    const clock = { now: 4_000_000 };
    const queue = uniqueQueue('lease');
    const hung = queueAt(clock, { workerId: 'dies' }).define(queue, () => new Promise<void>(() => {}), {
      leaseMs: 1000,
      maxAttempts: 2,
    });
    const id = (await hung.enqueue(knex(), queue, {}))!;
    await claimOnly(hung); // its job never settles: do not wait for it
    expect(await state(id)).toMatchObject({ state: 'running', attempts: 1, locked_by: 'dies' });
    const ran: number[] = [];
    const other = queueAt(clock, { workerId: 'takes-over' }).define(
      queue,
      () => new Promise<void>(() => void ran.push(1)),
      { leaseMs: 1000 },
    );
    clock.now += 1000;
    expect(await claimOnly(other)).toBe(0); // the lease runs until locked_until
    clock.now += 1;
    expect(await claimOnly(other)).toBe(1);
    expect(await state(id)).toMatchObject({ state: 'running', attempts: 2, locked_by: 'takes-over' });
    clock.now += 1001;
    await claimOnly(other);
    expect(await state(id)).toMatchObject({ state: 'dead', attempts: 2, last_error: 'lease expired' });
  });
});

/** One poll that does not wait for the jobs it starts (some of these handlers never finish). */
async function claimOnly(q: JobQueue): Promise<number> {
  return (q as unknown as { poll(wait: boolean): Promise<number> }).poll(false);
}

describe('several workers', () => {
  it('never run one job twice: two queues on the same database drain 60 jobs, each exactly once', async () => {
    const clock = { now: 5_000_000 };
    const queue = uniqueQueue('bulk');
    const seen = new Map<string, string[]>();
    const handler = (worker: string) => async (job: Job) => {
      await new Promise((r) => setTimeout(r, 2));
      seen.set(job.id, [...(seen.get(job.id) ?? []), worker]);
    };
    const a = queueAt(clock, { workerId: 'a' }).define(queue, handler('a'), { concurrency: 4 });
    const b = queueAt(clock, { workerId: 'b' }).define(queue, handler('b'), { concurrency: 4 });
    const ids: string[] = [];
    for (let i = 0; i < 60; i++) ids.push((await a.enqueue(knex(), queue, { i }))!);
    await Promise.all([a.runDue(), b.runDue()]);
    expect([...seen.keys()].sort()).toEqual([...ids].sort());
    for (const [id, workers] of seen) expect(workers, id).toHaveLength(1);
    expect(await knex()('jobs').where({ queue }).count({ n: '*' }).first()).toEqual({ n: 0 });
  });

  it('a schedule enqueues one job per slot whichever instances tick, skips missed slots and never piles up', async () => {
    const clock = { now: 6_000_000 };
    const queue = uniqueQueue('every_minute');
    const runs: number[] = [];
    const make = () => queueAt(clock).define(queue, async () => void runs.push(clock.now));
    const [a, b, c] = [make(), make(), make()];
    await a.schedule(queue, queue, 60_000);
    await b.schedule(queue, queue, 60_000); // the same schedule declared by another instance
    await Promise.all([a.runDue(), b.runDue(), c.runDue()]);
    expect(runs).toEqual([6_000_000]);
    clock.now += 59_999;
    await Promise.all([a.runDue(), b.runDue()]);
    expect(runs).toHaveLength(1);
    clock.now += 1;
    await Promise.all([a.runDue(), b.runDue(), c.runDue()]);
    expect(runs).toEqual([6_000_000, 6_060_000]);
    // Ten minutes of downtime: one run now, and the next slot keeps the schedule's phase.
    clock.now += 600_000 + 5;
    await a.runDue();
    expect(runs).toHaveLength(3);
    const next = await knex()('job_schedules').where({ name: queue }).first('next_run_after');
    expect(Number(next.next_run_after)).toBe(6_000_000 + 12 * 60_000);
  });

  it('a restart keeps the next slot; a shortened interval pulls it in; unschedule stops it', async () => {
    const clock = { now: 7_000_000 };
    const queue = uniqueQueue('daily');
    const runs: number[] = [];
    const q = queueAt(clock).define(queue, async () => void runs.push(clock.now));
    const nextSlot = async () =>
      Number((await knex()('job_schedules').where({ name: queue }).first('next_run_after')).next_run_after);
    await q.schedule(queue, queue, 86_400_000, clock.now);
    await q.runDue();
    expect(runs).toHaveLength(1);
    expect(await nextSlot()).toBe(7_000_000 + 86_400_000);
    // A restart declares the schedule again (firstRunAfter = now): the stored slot stands.
    clock.now += 1000;
    await queueAt(clock)
      .define(queue, async () => undefined)
      .schedule(queue, queue, 86_400_000, clock.now);
    expect(await nextSlot()).toBe(7_000_000 + 86_400_000);
    // The operator shortens the interval to a minute: the next run is at most a minute away.
    await q.schedule(queue, queue, 60_000, clock.now);
    expect(await nextSlot()).toBe(clock.now + 60_000);
    clock.now += 60_000;
    await q.runDue();
    expect(runs).toHaveLength(2);
    await q.unschedule(queue);
    clock.now += 3_600_000;
    await q.runDue();
    expect(runs).toHaveLength(2);
    await expect(q.schedule(queue, queue, 0)).rejects.toThrow(RangeError);
  });
});

describe('durability', () => {
  it('a job survives a restart of the embedded database', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'ada-jobs-'));
    try {
      const clock = { now: 7_000_000 };
      const first = await openDatabase({ dataDir: dir });
      await migrateLatest(first.knex);
      const before = queueAt(clock, {}, first.knex).define('restart', async () => {});
      const id = await before.enqueue(first.knex, 'restart', { kept: true });
      await first.close();

      const second = await openDatabase({ dataDir: dir });
      try {
        const ran: unknown[] = [];
        const after = queueAt(clock, {}, second.knex).define(
          'restart',
          async (job) => void ran.push([job.id, job.payload]),
        );
        expect(await after.runDue()).toBe(1);
        expect(ran).toEqual([[id, { kept: true }]]);
      } finally {
        await second.close();
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 120_000);

  it('start() polls on its own and stop() waits for the job in flight', async () => {
    const queue = uniqueQueue('polled');
    let finished = false;
    const q = new JobQueue(knex(), { clock: Date.now, logger, pollMs: 20 }).define(queue, async () => {
      await new Promise((r) => setTimeout(r, 100));
      finished = true;
    });
    await q.enqueue(knex(), queue, {});
    q.start();
    for (let i = 0; i < 200 && !(await knex()('jobs').where({ queue, state: 'running' }).first()); i++)
      await new Promise((r) => setTimeout(r, 10));
    await q.stop();
    expect(finished).toBe(true);
    expect(await knex()('jobs').where({ queue }).first()).toBeUndefined();
  });

  it('wake() claims a job queued after the last poll at once, and a finished job leaves its room to the next at once', async () => {
    const queue = uniqueQueue('woken');
    const ran: number[] = [];
    // Polls once at start, then not for a minute: only wake() and finishing jobs can claim.
    const q = new JobQueue(knex(), { clock: Date.now, logger, pollMs: 60_000 }).define<{ n: number }>(
      queue,
      async (job) => {
        await new Promise((r) => setTimeout(r, 50));
        ran.push(job.payload.n);
      },
      { concurrency: 1 },
    );
    q.start();
    await new Promise((r) => setTimeout(r, 100));
    try {
      await q.enqueue(knex(), queue, { n: 1 });
      await q.enqueue(knex(), queue, { n: 2 });
      await q.enqueue(knex(), queue, { n: 3 });
      expect(ran).toEqual([]);
      q.wake(queue);
      for (let i = 0; i < 200 && ran.length < 3; i++) await new Promise((r) => setTimeout(r, 10));
      // One at a time (concurrency 1): the second and third were claimed as the one before finished.
      expect(ran).toEqual([1, 2, 3]);
    } finally {
      await q.stop();
    }
    // Stopped: wake() claims nothing.
    await q.enqueue(knex(), queue, { n: 4 });
    q.wake(queue);
    await new Promise((r) => setTimeout(r, 100));
    expect(ran).toEqual([1, 2, 3]);
  });
});

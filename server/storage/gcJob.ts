/**
 * Storage garbage collection (gc.ts) as a recurring job of the durable queue (server/jobs/queue.ts):
 * one schedule shared by every instance, so exactly one of them runs each pass. runtime.ts defines
 * the queue at start-up and (re)schedules it when the jobs start.
 */
import type { Knex } from 'knex';
import type { Logger } from 'pino';
import type { JobQueue } from '../jobs/queue.ts';
import { collectGarbage } from './gc.ts';
import type { ObjectStorage } from './types.ts';

export const STORAGE_GC_QUEUE = 'storage_gc';

export interface StorageGcJobDeps {
  db: Knex;
  storage: ObjectStorage | null;
  clock: () => number;
  logger: Logger;
  /** STORAGE_GC_GRACE_MS */
  graceMs: number;
}

/** The queue's handler: one pass at the job's time. Nothing to do without storage. */
export function defineStorageGc(queue: JobQueue, deps: StorageGcJobDeps): void {
  const { storage } = deps;
  queue.define(
    STORAGE_GC_QUEUE,
    async () => {
      if (!storage) return;
      await collectGarbage({ db: deps.db, storage, now: deps.clock(), log: deps.logger, graceMs: deps.graceMs });
    },
    // A pass over a large bucket may take minutes: a long lease, so no other worker starts it again meanwhile.
    { maxAttempts: 3, leaseMs: 30 * 60_000 },
  );
}

/** Every `intervalMs` from `firstRunAfter`; 0 (or no storage) removes the schedule an earlier start stored. */
export async function scheduleStorageGc(
  queue: JobQueue,
  options: { enabled: boolean; intervalMs: number; firstRunAfter: number },
): Promise<void> {
  if (options.enabled && options.intervalMs > 0)
    await queue.schedule(STORAGE_GC_QUEUE, STORAGE_GC_QUEUE, options.intervalMs, options.firstRunAfter);
  else await queue.unschedule(STORAGE_GC_QUEUE);
}

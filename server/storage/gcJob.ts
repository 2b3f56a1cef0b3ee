/**
 * Storage garbage collection (gc.ts) as a recurring job of the durable queue (server/jobs/queue.ts):
 * one schedule shared by every instance, so exactly one of them runs each pass. runtime.ts calls
 * scheduleStorageGc once its queue exists.
 */
import type { Knex } from 'knex';
import type { Logger } from 'pino';
import type { JobQueue } from '../jobs/queue.ts';
import { collectGarbage } from './gc.ts';
import type { ObjectStorage } from './types.ts';

export const STORAGE_GC_QUEUE = 'storage-gc';

export interface StorageGcJobDeps {
  db: Knex;
  storage: ObjectStorage | null;
  clock: () => number;
  logger: Logger;
  /** STORAGE_GC_GRACE_MS */
  graceMs: number;
  /** STORAGE_GC_INTERVAL_MS; 0 schedules nothing (the queue is still defined, for a manual enqueue). */
  intervalMs: number;
}

/** Defines the queue's handler and (when there is storage and an interval) its schedule. */
export async function scheduleStorageGc(queue: JobQueue, deps: StorageGcJobDeps): Promise<void> {
  const { storage } = deps;
  queue.define(
    STORAGE_GC_QUEUE,
    async () => {
      if (!storage) return;
      await collectGarbage({ db: deps.db, storage, now: deps.clock(), log: deps.logger, graceMs: deps.graceMs });
    },
    // A pass over a large bucket may take minutes; a second worker must not start one meanwhile.
    { concurrency: 1, maxAttempts: 3, leaseMs: 30 * 60_000 },
  );
  if (storage && deps.intervalMs > 0) await queue.schedule(STORAGE_GC_QUEUE, STORAGE_GC_QUEUE, deps.intervalMs);
}

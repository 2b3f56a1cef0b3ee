/**
 * Purges trashed items whose retention has run out. The durable job queue runs it on a schedule
 * (queue `trash_retention`, see server/runtime.ts); rows are also claimed with FOR UPDATE SKIP
 * LOCKED inside the purging transaction, so two passes (a scheduled one and a manual one) never
 * work on the same rows and a crash mid-batch leaves them for the next run.
 */
import type { Knex } from 'knex';
import type { Logger } from 'pino';
import { type EventEntry, inTransaction, type ServiceContext } from '../../core/context.ts';
import type { ObjectStorage } from '../../storage/types.ts';
import { purgeItems, type TrashItem } from './purge.ts';
import { TRASH_TYPES, trashRepo } from './repo.ts';
import { DAY_MS, dropObjects, purgedEvent } from './service.ts';

const BATCH = 200;

export class TrashRetentionJob {
  constructor(
    private readonly db: Knex,
    private readonly storage: ObjectStorage | null,
    private readonly options: {
      defaultRetentionDays: number;
      clock: () => number;
      logger: Logger;
      /**
       * The context of one account's purge in the pass's transaction, for its events (one per item,
       * as a purge through the route sends); without it the pass sends none.
       */
      context?: (accountId: string, db: Knex.Transaction, now: number) => ServiceContext;
    },
  ) {}

  /** One pass over every type; returns how many items were purged. */
  async runOnce(): Promise<number> {
    let total = 0;
    for (const type of TRASH_TYPES) {
      for (;;) {
        const now = this.options.clock();
        const { purged, objectKeys, batch } = await inTransaction({ db: this.db }, async (tx) => {
          const expired = await trashRepo.expired(tx.db, type, {
            defaultDays: this.options.defaultRetentionDays,
            dayMs: DAY_MS,
            now,
            batch: BATCH,
          });
          const byUser = new Map<string, TrashItem[]>();
          for (const row of expired)
            byUser.set(row.user_id, [...(byUser.get(row.user_id) ?? []), { type, id: row.id }]);
          let count = 0;
          const keys: string[] = [];
          for (const [userId, items] of byUser) {
            const result = await purgeItems(tx.db, userId, items);
            count += result.purged;
            keys.push(...result.objectKeys);
            const ctx = this.options.context?.(userId, tx.db, now);
            if (ctx)
              await ctx.events.emitMany(
                ctx,
                items.map((item): EventEntry => purgedEvent(item.type, item.id)),
              );
          }
          return { purged: count, objectKeys: keys, batch: expired.length };
        });
        await dropObjects(this.storage, objectKeys, this.options.logger);
        total += purged;
        if (batch < BATCH) break;
      }
    }
    if (total > 0) this.options.logger.info({ purged: total }, 'trash retention purged expired items');
    return total;
  }
}

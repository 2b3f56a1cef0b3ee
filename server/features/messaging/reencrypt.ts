/**
 * Key rotation: rows written under a key other than the primary are rewritten under the primary in
 * batches by the `message_reencrypt` job on the durable queue — message text and link previews (whose
 * links are message text too). Reads work throughout (each row names its key); a batch is one
 * transaction that skips rows another worker holds, and rewriting a row already on the primary never
 * happens (the batch selects by old key id), so a retried job is safe.
 */
import type { Knex } from 'knex';
import type { Config } from '../../config.ts';
import { inTransaction, type ServerContext } from '../../core/context.ts';
import { MessageCipher } from '../../crypto/messageCipher.ts';
import type { JobQueue } from '../../jobs/queue.ts';
import { SEALED, sealedRepo } from './repo/sealed.ts';

const QUEUE = 'message_reencrypt';

/** Rewrites every row under an older key of the ring; returns how many it rewrote. */
export async function reencryptMessages(ctx: ServerContext): Promise<number> {
  const { config } = ctx;
  const cipher = new MessageCipher(config.messageEncryptionKeys);
  let total = 0;
  for (const table of SEALED) {
    for (const oldKey of cipher.olderKeyIds) {
      for (;;) {
        const done = await inTransaction(ctx, async (tx) => {
          const rows = await sealedRepo.batch(tx.db, table, oldKey, config.messageReencryptBatchSize);
          for (const row of rows) {
            const text = cipher.open(row.user_id, row.id, { keyId: row.key_id, data: Buffer.from(row.data) });
            const sealed = cipher.seal(row.user_id, row.id, text);
            await sealedRepo.rewrite(tx.db, table, { id: row.id, oldKeyId: oldKey }, sealed);
          }
          return rows.length;
        });
        total += done;
        if (done < config.messageReencryptBatchSize) break;
      }
    }
  }
  if (total > 0)
    ctx.log.info({ rows: total, primaryKey: cipher.primaryKeyId }, 'messages re-encrypted under the primary key');
  return total;
}

/**
 * The re-encryption job; `context()` is taken when it runs, so it sees the keyring of the running
 * server (its config) and the time of the run.
 */
export function defineMessageReencryption(jobs: JobQueue, context: () => ServerContext): void {
  jobs.define(QUEUE, async () => void (await reencryptMessages(context())), { maxAttempts: 5 });
}

/** Queues the job when some row is under an older key of the ring (one indexed probe per older key and table). */
export async function queueMessageReencryption(jobs: JobQueue, db: Knex, config: Config): Promise<boolean> {
  const cipher = new MessageCipher(config.messageEncryptionKeys);
  for (const table of SEALED) {
    for (const keyId of cipher.olderKeyIds) {
      if (await sealedRepo.anyUnderKey(db, table, keyId)) {
        await jobs.enqueue(db, QUEUE, {}, { key: QUEUE });
        return true;
      }
    }
  }
  return false;
}

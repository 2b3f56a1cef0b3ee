/**
 * Key rotation: rows written under a key other than the primary are rewritten under the primary in
 * batches by the `message_reencrypt` job on the durable queue — message text and link previews (whose
 * links are message text too). Reads work throughout (each row names its key); a batch is one
 * transaction that skips rows another worker holds, and rewriting a row already on the primary never
 * happens (the batch selects by old key id), so a retried job is safe.
 */
import type { Knex } from 'knex';
import type { Logger } from 'pino';
import type { Config } from '../../config.ts';
import { MessageCipher } from '../../crypto/messageCipher.ts';
import type { JobQueue } from '../../jobs/queue.ts';

const QUEUE = 'message_reencrypt';

/** The tables sealed with the message keyring: each row's id is the id bound into its ciphertext. */
const SEALED_TABLES = [
  { table: 'messaging_messages', column: 'content_enc' },
  { table: 'messaging_link_previews', column: 'data_enc' },
] as const;

/** Rewrites every row under an older key of the ring; returns how many it rewrote. */
export async function reencryptMessages(db: Knex, config: Config, logger: Logger): Promise<number> {
  const cipher = new MessageCipher(config.messageEncryptionKeys);
  let total = 0;
  for (const { table, column } of SEALED_TABLES) {
    for (const oldKey of cipher.olderKeyIds) {
      for (;;) {
        const done = await db.transaction(async (trx) => {
          const rows = (await trx(table)
            .where({ key_id: oldKey })
            .limit(config.messageReencryptBatchSize)
            .forUpdate()
            .skipLocked()
            .select('id', 'user_id', 'key_id', `${column} as data`)) as Array<{
            id: string;
            user_id: string;
            key_id: string;
            data: Uint8Array;
          }>;
          for (const row of rows) {
            const text = cipher.open(row.user_id, row.id, { keyId: row.key_id, data: Buffer.from(row.data) });
            const sealed = cipher.seal(row.user_id, row.id, text);
            await trx(table)
              .where({ id: row.id, key_id: oldKey })
              .update({ key_id: sealed.keyId, [column]: sealed.data });
          }
          return rows.length;
        });
        total += done;
        if (done < config.messageReencryptBatchSize) break;
      }
    }
  }
  if (total > 0)
    logger.info({ rows: total, primaryKey: cipher.primaryKeyId }, 'messages re-encrypted under the primary key');
  return total;
}

/** The re-encryption job; `config()` is read when it runs, so it sees the keyring of the running server. */
export function defineMessageReencryption(
  jobs: JobQueue,
  deps: { db: Knex; config: () => Config; logger: Logger },
): void {
  jobs.define(QUEUE, async () => void (await reencryptMessages(deps.db, deps.config(), deps.logger)), {
    maxAttempts: 5,
  });
}

/** Queues the job when some row is under an older key of the ring (one indexed probe per older key and table). */
export async function queueMessageReencryption(jobs: JobQueue, db: Knex, config: Config): Promise<boolean> {
  const cipher = new MessageCipher(config.messageEncryptionKeys);
  for (const { table } of SEALED_TABLES) {
    for (const keyId of cipher.olderKeyIds) {
      if (await db(table).where({ key_id: keyId }).first('id')) {
        await jobs.enqueue(db, QUEUE, {}, { key: QUEUE });
        return true;
      }
    }
  }
  return false;
}

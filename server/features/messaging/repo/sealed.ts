/**
 * The SQL of key rotation: the rows sealed with the message keyring (message text, link previews,
 * webhooks, responses stored under idempotency keys), read and rewritten by key id. Each row's id is the id bound into its ciphertext. Committed as
 * generated/sql/messaging.sql.
 */
import type { Knex } from 'knex';
import { type Sql, sql } from '../../../db/sql.ts';
import { EXAMPLE_UUID, statement } from '../../../db/statements.ts';

const AREA = 'messaging';

/**
 * The tables sealed with the message keyring (a webhook's URL and secrets too: server/features/webhooks/;
 * responses stored under idempotency keys: server/idempotency/).
 */
export const SEALED = ['messages', 'linkPreviews', 'webhooks', 'idempotencyKeys'] as const;
export type SealedTable = (typeof SEALED)[number];

const PLACES: Record<SealedTable, { table: string; column: string }> = {
  messages: { table: 'messaging_messages', column: 'content_enc' },
  linkPreviews: { table: 'messaging_link_previews', column: 'data_enc' },
  webhooks: { table: 'webhooks', column: 'secrets_enc' },
  idempotencyKeys: { table: 'idempotency_keys', column: 'response_enc' },
};
const TABLES = Object.values(PLACES).map((p) => p.table);
const COLUMNS = Object.values(PLACES).map((p) => p.column);
const tableOf = (t: SealedTable): Sql => sql.constant(PLACES[t].table, TABLES);
const columnOf = (t: SealedTable): Sql => sql.constant(PLACES[t].column, COLUMNS);
const eachTable = <P>(params: (table: SealedTable) => P): Record<string, P> =>
  Object.fromEntries(SEALED.map((table) => [table, params(table)]));

export interface SealedRow {
  id: string;
  user_id: string;
  key_id: string;
  data: Uint8Array;
}

/** Up to `limit` rows under `keyId`, locked, skipping rows another worker holds. */
const batch = statement<{ table: SealedTable; keyId: string; limit: number }, SealedRow>({
  name: 'messaging_sealed_batch',
  area: AREA,
  variants: eachTable((table) => ({ table, keyId: 'k', limit: 500 })),
  build: ({ table, keyId, limit }) => sql`select id, user_id, key_id, ${columnOf(table)} as data from ${tableOf(table)}
    where key_id = ${keyId}
    limit ${limit}
    for update skip locked`,
});

/** The row sealed anew, if it is still under the old key. */
const rewrite = statement<{ table: SealedTable; id: string; oldKeyId: string; keyId: string; data: Buffer }, never>({
  name: 'messaging_sealed_rewrite',
  area: AREA,
  variants: eachTable((table) => ({ table, id: EXAMPLE_UUID, oldKeyId: 'k', keyId: 'k', data: Buffer.alloc(0) })),
  build: ({ table, id, oldKeyId, keyId, data }) => sql`update ${tableOf(table)}
    set key_id = ${keyId}, ${columnOf(table)} = ${data}
    where id = ${id} and key_id = ${oldKeyId}`,
});

/** Whether some row is under `keyId` (an indexed probe). */
const underKey = statement<{ table: SealedTable; keyId: string }, { id: string }>({
  name: 'messaging_sealed_under_key',
  area: AREA,
  variants: eachTable((table) => ({ table, keyId: 'k' })),
  build: ({ table, keyId }) => sql`select id from ${tableOf(table)} where key_id = ${keyId} limit 1`,
});

export const sealedRepo = {
  batch: (db: Knex, table: SealedTable, keyId: string, limit: number) => batch(db, { table, keyId, limit }),
  rewrite: async (
    db: Knex,
    table: SealedTable,
    row: { id: string; oldKeyId: string },
    sealed: { keyId: string; data: Buffer },
  ) => void (await rewrite(db, { table, id: row.id, oldKeyId: row.oldKeyId, keyId: sealed.keyId, data: sealed.data })),
  async anyUnderKey(db: Knex, table: SealedTable, keyId: string): Promise<boolean> {
    return (await underKey(db, { table, keyId })).length > 0;
  },
};

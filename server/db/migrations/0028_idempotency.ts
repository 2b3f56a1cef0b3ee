import type { Knex } from 'knex';
import { execScript } from '../sql.ts';

export const name = '0028_idempotency';

/**
 * Idempotency keys (server/idempotency/, docs/api.md "Safe retries"): the response of a POST sent
 * with an `Idempotency-Key`, stored in the transaction of the write it answers, per account,
 * operation and key. The response (status, headers, body) is sealed with the message keyring like
 * message text (`key_id`, `response_enc`, the row's id bound in): it can hold anything a write
 * answers, a webhook's secret included. `fingerprint` is the SHA-256 of the request (method, path,
 * query, body bytes). Rows past `expires_at` are ignored, replaced by a new use of the key, and
 * pruned by a recurring job.
 */
export async function up(knex: Knex): Promise<void> {
  await execScript(
    knex,
    `
    create table idempotency_keys (
      id uuid primary key,
      user_id uuid not null references accounts (id) on delete cascade,
      operation text not null,
      idem_key text not null,
      fingerprint bytea not null,
      key_id text not null,
      response_enc bytea not null,
      created_at bigint not null,
      expires_at bigint not null,
      unique (user_id, operation, idem_key)
    );
    create index idempotency_keys_expiry on idempotency_keys (expires_at);
    create index idempotency_keys_key on idempotency_keys (key_id)
    `,
  );
}

export async function down(knex: Knex): Promise<void> {
  await execScript(knex, 'drop table if exists idempotency_keys');
}

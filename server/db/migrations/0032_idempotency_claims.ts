import type { Knex } from 'knex';

export const name = '0032_idempotency_claims';

/**
 * A key claimed before its request runs (server/idempotency/, docs/api.md "Safe retries"): an
 * operation whose write is one statement claims its key in a statement of its own, as a row
 * without a response (`key_id` and `response_enc` null) that lapses at `expires_at` (the claim's
 * lease), and the write's statement stores the response on that row. `idempotency_held` is how
 * that statement fails whole when it wrote but its claim was no longer there to store the
 * response on (the lease ran out and another request took the key): SQLSTATE IK001.
 */
const UP = [
  'alter table idempotency_keys alter column key_id drop not null',
  'alter table idempotency_keys alter column response_enc drop not null',
  `create function idempotency_held(written bigint, stored bigint) returns boolean language plpgsql as $$
  begin
    if written > 0 and stored = 0 then
      raise exception 'the idempotency key is no longer claimed by this request' using errcode = 'IK001';
    end if;
    return true;
  end $$`,
];

const DOWN = [
  'drop function idempotency_held(bigint, bigint)',
  'delete from idempotency_keys where response_enc is null',
  'alter table idempotency_keys alter column response_enc set not null',
  'alter table idempotency_keys alter column key_id set not null',
];

export async function up(knex: Knex): Promise<void> {
  for (const statement of UP) await knex.raw(statement);
}

export async function down(knex: Knex): Promise<void> {
  for (const statement of DOWN) await knex.raw(statement);
}

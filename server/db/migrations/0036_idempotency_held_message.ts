import type { Knex } from 'knex';

export const name = '0036_idempotency_held_message';

/**
 * `idempotency_held` (migration 0032) now fails a write keyed in its statement whenever another
 * request holds the key (docs/api.md "Safe retries"): a replay, a request racing another, or one
 * whose claim lapsed and was taken. Its message, in PostgreSQL's log, says so; SQLSTATE IK001 and
 * what it checks are unchanged.
 */
const held = (message: string) => `
  create or replace function idempotency_held(written bigint, stored bigint) returns boolean language plpgsql as $$
  begin
    if written > 0 and stored = 0 then
      raise exception '${message}' using errcode = 'IK001';
    end if;
    return true;
  end $$`;

export async function up(knex: Knex): Promise<void> {
  await knex.raw(held('the idempotency key is held by another request: this write is undone'));
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw(held('the idempotency key is no longer claimed by this request'));
}

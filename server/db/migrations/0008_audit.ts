import type { Knex } from 'knex';
import { execScript } from '../sql.ts';

export const name = '0008_audit';

/**
 * The audit log (server/audit/): one row per audited action, written in the transaction of the
 * action itself. Rows go with their account (cascade); the key that acted is kept as a plain id,
 * so revoking or deleting a key does not rewrite history. Read newest first per account.
 */
export async function up(knex: Knex): Promise<void> {
  await execScript(
    knex,
    `
    create table audit_events (
      id uuid primary key,
      user_id uuid not null references accounts (id) on delete cascade,
      actor_kind text not null check (actor_kind in ('key', 'operator', 'system')),
      actor_key_id uuid,
      actor_job text,
      action text not null,
      target_type text not null,
      target_id text,
      detail jsonb not null default '{}'::jsonb,
      created_at bigint not null
    );
    create index audit_events_by_account on audit_events (user_id, created_at desc, id desc)
  `,
  );
}

export async function down(knex: Knex): Promise<void> {
  await execScript(knex, 'drop table audit_events');
}

import type { Knex } from 'knex';
import { execScript } from '../sql.ts';

export const name = '0027_webhooks';

/**
 * Webhooks (server/features/webhooks/, docs/webhooks.md). A webhook's URL and signing secrets are
 * one value sealed with the message keyring (`key_id`, `secrets_enc`; its id bound into the
 * ciphertext), so the re-encryption job rewrites it like message text. `areas` are the scopes the
 * key that set `types` could read: an event is queued only when its area is one of them.
 *
 * A delivery is queued in the transaction of its event (server/events/log.ts), one row per
 * matching enabled webhook; ids follow the event ids, and a webhook's deliveries are sent in id
 * order. `message_id` is the `webhook-id` header: the event id, or `ping_…` for a test ping.
 */
export async function up(knex: Knex): Promise<void> {
  await execScript(
    knex,
    `
    create table webhooks (
      id uuid primary key,
      user_id uuid not null references accounts (id) on delete cascade,
      types text[] not null,
      areas text[] not null,
      description text,
      enabled boolean not null,
      disabled_reason text check (disabled_reason in ('manual', 'gone', 'failing')),
      disabled_at bigint,
      failing_since bigint,
      last_success_at bigint,
      previous_secret_expires_at bigint,
      key_id text not null,
      secrets_enc bytea not null,
      created_at bigint not null,
      updated_at bigint not null
    );
    create index webhooks_by_user on webhooks (user_id, created_at, id);
    create index webhooks_enabled on webhooks (user_id) where enabled;
    create index webhooks_key on webhooks (key_id);
    create table webhook_deliveries (
      id bigint generated always as identity primary key,
      webhook_id uuid not null references webhooks (id) on delete cascade,
      event_id bigint,
      message_id text not null,
      type text not null,
      state text not null check (state in ('pending', 'succeeded', 'failed')),
      attempts int not null default 0,
      status_code int,
      duration_ms int,
      error text,
      last_attempt_at bigint,
      next_attempt_at bigint,
      created_at bigint not null,
      ended_at bigint
    );
    create index webhook_deliveries_by_webhook on webhook_deliveries (webhook_id, id);
    create index webhook_deliveries_pending on webhook_deliveries (webhook_id, id) where state = 'pending';
    create index webhook_deliveries_ended on webhook_deliveries (ended_at) where state <> 'pending'
    `,
  );
}

export async function down(knex: Knex): Promise<void> {
  await execScript(knex, 'drop table if exists webhook_deliveries; drop table if exists webhooks');
}

import type { Knex } from 'knex';
import { execScript } from '../sql.ts';

export const name = '0026_events';

/**
 * The event log (server/events/, docs/events.md): one row per change, written in the transaction
 * of the change. `id` is the stream's cursor; rows are inserted under one lock held to commit, so
 * ids become visible in order and a reader that has seen id n never later finds a smaller one.
 * `area` is the scope a reader needs (`members`, `front`, …). Rows older than
 * EVENT_RETENTION_HOURS are pruned; `events_pruned.through` is the highest id pruned, so a cursor
 * below it is known to have missed events.
 */
export async function up(knex: Knex): Promise<void> {
  await execScript(
    knex,
    `
    create table events (
      id bigint generated always as identity primary key,
      account_id uuid not null references accounts (id) on delete cascade,
      type text not null,
      area text not null,
      occurred_at bigint not null,
      actor jsonb not null,
      data jsonb not null,
      -- Another account the event names (a friendship's other side): deleting that account deletes it too.
      about_account_id uuid references accounts (id) on delete cascade
    );
    create index events_by_account on events (account_id, id);
    create index events_by_time on events (occurred_at);
    create index events_about on events (about_account_id) where about_account_id is not null;
    create table events_pruned (
      singleton boolean primary key default true check (singleton),
      through bigint not null
    );
    insert into events_pruned (through) values (0)
    `,
  );
}

export async function down(knex: Knex): Promise<void> {
  await execScript(knex, 'drop table if exists events_pruned; drop table if exists events');
}

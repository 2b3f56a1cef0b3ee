import type { Knex } from 'knex';
import { execScript } from '../sql.ts';

export const name = '0009_jobs';

/**
 * The durable job queue (server/jobs/queue.ts): jobs survive restarts, are claimed with
 * FOR UPDATE SKIP LOCKED under a lease, retried with backoff and dead-lettered after their last
 * attempt; job_schedules holds the recurring jobs, advanced by whichever instance ticks first.
 * Times are epoch ms from the application clock, not the database's now().
 */
export async function up(knex: Knex): Promise<void> {
  await execScript(
    knex,
    `
    create table jobs (
      id uuid primary key,
      queue text not null,
      payload jsonb not null,
      -- Enqueueing a key that is already pending or running is a no-op.
      key text,
      state text not null default 'pending' check (state in ('pending', 'running', 'dead')),
      attempts integer not null default 0,
      max_attempts integer not null check (max_attempts >= 1),
      run_after bigint not null,
      locked_by text,
      locked_until bigint,
      last_error text,
      created_at bigint not null,
      updated_at bigint not null
    );
    create index jobs_claim on jobs (queue, run_after, id) where state = 'pending';
    create index jobs_lease on jobs (locked_until) where state = 'running';
    create index jobs_dead on jobs (queue, updated_at) where state = 'dead';
    create unique index jobs_key on jobs (queue, key) where key is not null and state in ('pending', 'running');

    create table job_schedules (
      name text primary key,
      queue text not null,
      every_ms bigint not null check (every_ms > 0),
      next_run_after bigint not null
    )
  `,
  );
}

export async function down(knex: Knex): Promise<void> {
  await execScript(
    knex,
    `
    drop table job_schedules;
    drop table jobs
  `,
  );
}

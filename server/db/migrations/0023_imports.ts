import type { Knex } from 'knex';
import { execScript } from '../sql.ts';

export const name = '0023_imports';

/**
 * Imports from other apps (server/features/portability/): one row per import with its status and
 * report, and the refs that make a re-import idempotent: (account, source, source collection,
 * source id) → the local entity it became, with a digest of what the file said, so the same entity
 * in the next file is `unchanged` when the digest matches and updated in place when it does not.
 */
export async function up(knex: Knex): Promise<void> {
  await execScript(
    knex,
    `
    create table imports (
      id uuid primary key,
      user_id uuid not null references accounts (id) on delete cascade,
      source text not null,
      dry_run boolean not null,
      status text not null check (status in ('queued', 'running', 'succeeded', 'failed')),
      object_key text,
      byte_size bigint not null,
      progress_done integer not null default 0,
      progress_total integer not null default 0,
      report jsonb not null default '{}',
      warnings jsonb not null default '[]',
      warnings_omitted integer not null default 0,
      error text,
      created_at bigint not null,
      started_at bigint,
      finished_at bigint
    );
    create index imports_user_page on imports (user_id, created_at desc, id desc);

    create table import_refs (
      user_id uuid not null references accounts (id) on delete cascade,
      source text not null,
      collection text not null,
      source_id text not null,
      local_id uuid not null,
      digest text not null,
      primary key (user_id, source, collection, source_id)
    );
  `,
  );
}

export async function down(knex: Knex): Promise<void> {
  await execScript(knex, 'drop table import_refs; drop table imports');
}

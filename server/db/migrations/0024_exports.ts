import type { Knex } from 'knex';
import { execScript } from '../sql.ts';

export const name = '0024_exports';

/**
 * Native exports (server/features/portability/, docs/portability.md "The native export"): one row
 * per export with its status; the archive lives in object storage under `object_key` until
 * `expires_at` (EXPORT_TTL_HOURS after it was written), when storage garbage collection deletes the
 * object and clears the key. `manifest` is the archive's manifest.json, kept for GET /exports.
 */
export async function up(knex: Knex): Promise<void> {
  await execScript(
    knex,
    `
    create table exports (
      id uuid primary key,
      user_id uuid not null references accounts (id) on delete cascade,
      status text not null check (status in ('queued', 'running', 'succeeded', 'failed')),
      object_key text,
      size_bytes bigint,
      manifest jsonb,
      error text,
      created_at bigint not null,
      started_at bigint,
      finished_at bigint,
      expires_at bigint
    );
    create index exports_user_page on exports (user_id, created_at desc, id desc);
    create index exports_expiry on exports (expires_at, id) where object_key is not null
  `,
  );
}

export async function down(knex: Knex): Promise<void> {
  await execScript(knex, 'drop table exports');
}

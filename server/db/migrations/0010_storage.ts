import type { Knex } from 'knex';
import { execScript } from '../sql.ts';

export const name = '0010_storage';

/**
 * Object storage v2 (server/storage/): staged uploads and the registry of re-hosted note images.
 *
 * - staged_uploads: one row per upload intent. The object lives at object_key (under staging/)
 *   until a feature consumes it (moves it to its final key and deletes the row) or the row expires
 *   and garbage collection deletes both. state: pending (URL handed out) → ready (bytes checked).
 * - note_images: every image re-hosted from a note's markdown into u/<user>/entry-images/<sha256>,
 *   with when it was last stored, so garbage collection can find the ones no note references any
 *   more without listing the bucket. Existing references are registered here; images that were
 *   already orphaned before this migration are not known to it (see docs/storage.md).
 */
export async function up(knex: Knex): Promise<void> {
  await execScript(
    knex,
    `
    create table staged_uploads (
      id uuid primary key,
      user_id uuid not null references accounts (id) on delete cascade,
      purpose text not null,
      object_key text not null unique,
      content_type text not null,
      byte_size bigint not null check (byte_size >= 0),
      metadata jsonb not null default '{}'::jsonb,
      state text not null default 'pending' check (state in ('pending', 'ready')),
      etag text,
      created_at bigint not null,
      completed_at bigint,
      expires_at bigint not null
    );
    create index staged_uploads_expiry on staged_uploads (expires_at, id);
    create index staged_uploads_user on staged_uploads (user_id, created_at);

    create table note_images (
      user_id uuid not null references accounts (id) on delete cascade,
      sha256 text not null check (sha256 ~ '^[0-9a-f]{64}$'),
      stored_at bigint not null,
      primary key (user_id, sha256)
    );

    insert into note_images (user_id, sha256, stored_at)
    select distinct e.user_id, m[1], (extract(epoch from clock_timestamp()) * 1000)::bigint
    from entries e
    cross join lateral regexp_matches(e.content, '/api/v1/entry-images/([0-9a-f]{64})', 'g') as m
    on conflict do nothing
  `,
  );
}

export async function down(knex: Knex): Promise<void> {
  await execScript(
    knex,
    `
    drop table note_images;
    drop table staged_uploads
  `,
  );
}

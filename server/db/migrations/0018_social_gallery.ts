import type { Knex } from 'knex';
import { execScript } from '../sql.ts';

export const name = '0018_social_gallery';

/**
 * The social gallery (docs/social.md §2): images an account uploaded for its custom_badge widgets.
 * The bytes live in object storage at u/<user_id>/social-gallery/<sha256>; a row registers one
 * image of one account, so the same bytes uploaded twice are one image (primary key). custom_badge
 * widgets name images by URL (/api/v1/social/gallery/<sha256>) and may only name rows of their own
 * account. Widgets stored before this migration may name URLs that no gallery holds: they read as
 * before, such a URL answers 404, and their next config change must name gallery images.
 * The list pages newest first by (created_at, sha256) within the account.
 */
export async function up(knex: Knex): Promise<void> {
  await execScript(
    knex,
    `
    create table social_gallery_images (
      user_id uuid not null references accounts (id) on delete cascade,
      sha256 text not null check (sha256 ~ '^[0-9a-f]{64}$'),
      content_type text not null check (content_type in ('image/png', 'image/jpeg', 'image/webp', 'image/gif')),
      byte_size bigint not null check (byte_size > 0),
      created_at bigint not null,
      primary key (user_id, sha256)
    );
    create index social_gallery_images_recent on social_gallery_images (user_id, created_at, sha256)
  `,
  );
}

export async function down(knex: Knex): Promise<void> {
  await execScript(knex, `drop table social_gallery_images`);
}

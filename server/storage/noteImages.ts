/**
 * Images re-hosted from notes' markdown (server/features/entries/rehost.ts): where they are stored,
 * how notes link to them, and the registry (table note_images) garbage collection walks. The image
 * is registered before it is stored, and every re-host of the same bytes refreshes `stored_at`, so
 * the collector's grace period always covers a note that is about to commit with it.
 */
import type { Knex } from 'knex';
import { sql } from '../db/sql.ts';
import { EXAMPLE_UUID, statement } from '../db/statements.ts';

/** How a note's markdown links to a re-hosted image: this prefix, then the sha256 of its bytes. */
export const NOTE_IMAGE_URL_PREFIX = '/api/v1/entry-images/';

/** Same pattern in SQL (regexp_matches) as in notes: the 64 hex digits after the prefix. */
export const NOTE_IMAGE_REFERENCE_SQL_PATTERN = '/api/v1/entry-images/([0-9a-f]{64})';

export function noteImageKey(userId: string, sha256: string): string {
  return `u/${userId}/entry-images/${sha256}`;
}

/** Records (or refreshes) an image about to be stored for `userId`; commit it before storing the object. */
export async function registerNoteImage(db: Knex, userId: string, sha256: string, now: number): Promise<void> {
  await upsertNoteImage(db, { userId, sha256, now });
}

const upsertNoteImage = statement<{ userId: string; sha256: string; now: number }, never>({
  name: 'note_image_register',
  area: 'storage',
  variants: { 'stored or refreshed': { userId: EXAMPLE_UUID, sha256: '0'.repeat(64), now: 0 } },
  build: ({ userId, sha256, now }) =>
    sql`insert into note_images (user_id, sha256, stored_at) values (${userId}::uuid, ${sha256}::text, ${now}::bigint)
      on conflict (user_id, sha256) do update set stored_at = excluded.stored_at`,
});

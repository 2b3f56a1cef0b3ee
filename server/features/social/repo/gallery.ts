/**
 * The SQL of the social gallery (migration 0018): the account's images (social_gallery_images) and
 * the custom_badge widgets that show them.
 */
import type { Knex } from 'knex';
import { type Keyset, keysetAfterSql, keysetOrderSql } from '../../../core/keyset.ts';
import { type Sql, sql } from '../../../db/sql.ts';
import { EXAMPLE_UUID, statement } from '../../../db/statements.ts';
import { AREA } from './shared.ts';

export interface GalleryRow {
  user_id: string;
  sha256: string;
  content_type: string;
  byte_size: number;
  created_at: number;
}

const EXAMPLE_SHA256 = '0'.repeat(64);
const GALLERY_COLUMNS = sql`user_id, sha256, content_type, byte_size, created_at`;

/** The account's images that custom_badge widgets may name, newest first (keyset on created_at, sha256). */
const GALLERY_ORDER: Keyset = {
  columns: [
    { sql: sql`created_at`, type: 'bigint' },
    { sql: sql`sha256`, type: 'text' },
  ],
  direction: 'desc',
};

const galleryPage = statement<{ userId: string; size: number; after?: [number, string] | undefined }, GalleryRow>({
  name: 'social_gallery_page',
  area: AREA,
  variants: {
    'first page': { userId: EXAMPLE_UUID, size: 50 },
    'after a cursor': { userId: EXAMPLE_UUID, size: 50, after: [0, EXAMPLE_SHA256] },
  },
  build: ({ userId, size, after }) => sql`select ${GALLERY_COLUMNS} from social_gallery_images
    where user_id = ${userId}${after === undefined ? sql.empty : sql` and ${keysetAfterSql(GALLERY_ORDER, after)}`}
    ${keysetOrderSql(GALLERY_ORDER, size)}`,
});

/** One image of the account, locked for update when asked (a delete). */
const findImage = statement<{ userId: string; sha256: string; forUpdate: boolean }, GalleryRow>({
  name: 'social_gallery_image',
  area: AREA,
  variants: {
    'a read': { userId: EXAMPLE_UUID, sha256: EXAMPLE_SHA256, forUpdate: false },
    'locked for update (a delete)': { userId: EXAMPLE_UUID, sha256: EXAMPLE_SHA256, forUpdate: true },
  },
  build: ({ userId, sha256, forUpdate }) => sql`select ${GALLERY_COLUMNS} from social_gallery_images
    where user_id = ${userId} and sha256 = ${sha256}${forUpdate ? sql` for update` : sql.empty}`,
});

const countImages = statement<{ userId: string }, { n: number }>({
  name: 'social_gallery_count',
  area: AREA,
  variants: { 'the account': { userId: EXAMPLE_UUID } },
  build: ({ userId }) => sql`select count(*)::int as n from social_gallery_images where user_id = ${userId}`,
});

/** The account row, locked (no key update): concurrent uploads of one account count its images one after the other. */
const lockAccount = statement<{ userId: string }, { id: string }>({
  name: 'social_gallery_lock_account',
  area: AREA,
  variants: { 'the account': { userId: EXAMPLE_UUID } },
  build: ({ userId }) => sql`select id from accounts where id = ${userId} limit 1 for no key update`,
});

const insertImage = statement<{ row: GalleryRow }, never>({
  name: 'social_gallery_insert',
  area: AREA,
  variants: {
    'an image': {
      row: { user_id: EXAMPLE_UUID, sha256: EXAMPLE_SHA256, content_type: 'image/png', byte_size: 1, created_at: 0 },
    },
  },
  build: ({ row: r }) => sql`insert into social_gallery_images (${GALLERY_COLUMNS})
    values (${r.user_id}, ${r.sha256}, ${r.content_type}, ${r.byte_size}, ${r.created_at})`,
});

const deleteImage = statement<{ userId: string; sha256: string }, never>({
  name: 'social_gallery_delete',
  area: AREA,
  variants: { 'an image': { userId: EXAMPLE_UUID, sha256: EXAMPLE_SHA256 } },
  build: ({ userId, sha256 }) =>
    sql`delete from social_gallery_images where user_id = ${userId} and sha256 = ${sha256}`,
});

/** Those of `sha256s` in the account's gallery, share-locked: a concurrent delete waits for the widget write. */
const shareImages = statement<{ userId: string; sha256s: readonly string[] }, { sha256: string }>({
  name: 'social_gallery_share_images',
  area: AREA,
  variants: { 'some images': { userId: EXAMPLE_UUID, sha256s: [] } },
  build: ({ userId, sha256s }) => sql`select sha256 from social_gallery_images
    where user_id = ${userId} and sha256 = any (${[...sha256s]}::text[])
    for share`,
});

/** Condition on a social_widgets row `w`: a custom_badge widget whose imageUrls hold `url`. */
const showsImage = (url: string): Sql =>
  sql`w.type = 'custom_badge' and w.config -> 'imageUrls' @> jsonb_build_array(${url}::text)`;

const badgeShowsImage = statement<{ userId: string; url: string }, { one: number }>({
  name: 'social_badge_shows_image',
  area: AREA,
  variants: { 'an image': { userId: EXAMPLE_UUID, url: '/' } },
  build: ({ userId, url }) =>
    sql`select 1 as one from social_widgets w where w.user_id = ${userId} and ${showsImage(url)} limit 1`,
});

const badgeVisibilities = statement<{ ownerId: string; sha256: string; url: string }, { visibility: string }>({
  name: 'social_badge_visibilities_of_image',
  area: AREA,
  variants: { 'an image': { ownerId: EXAMPLE_UUID, sha256: EXAMPLE_SHA256, url: '/' } },
  build: ({ ownerId, sha256, url }) => sql`select distinct w.visibility from social_widgets w
    join social_gallery_images g on g.user_id = w.user_id and g.sha256 = ${sha256}
    where w.user_id = ${ownerId} and ${showsImage(url)}`,
});

export const galleryRepo = {
  page: (db: Knex, userId: string, size: number, after?: [number, string]) => galleryPage(db, { userId, size, after }),
  async find(db: Knex, userId: string, sha256: string): Promise<GalleryRow | undefined> {
    const [row] = await findImage(db, { userId, sha256, forUpdate: false });
    return row;
  },
  /** The image, locked for update until the transaction ends. */
  async lock(db: Knex, userId: string, sha256: string): Promise<GalleryRow | undefined> {
    const [row] = await findImage(db, { userId, sha256, forUpdate: true });
    return row;
  },
  async count(db: Knex, userId: string): Promise<number> {
    const [row] = await countImages(db, { userId });
    return row?.n ?? 0;
  },
  async lockAccount(db: Knex, userId: string): Promise<void> {
    await lockAccount(db, { userId });
  },
  async insert(db: Knex, row: GalleryRow): Promise<void> {
    await insertImage(db, { row });
  },
  async delete(db: Knex, userId: string, sha256: string): Promise<void> {
    await deleteImage(db, { userId, sha256 });
  },
  /** How many of `sha256s` (distinct) are in the account's gallery, share-locking those. */
  async shareImages(db: Knex, userId: string, sha256s: readonly string[]): Promise<number> {
    return (await shareImages(db, { userId, sha256s })).length;
  },
  /** Whether one of the account's custom_badge widgets shows the image at `url`. */
  async badgeShowsImage(db: Knex, userId: string, url: string): Promise<boolean> {
    return (await badgeShowsImage(db, { userId, url })).length > 0;
  },
  /**
   * The visibilities of the owner's custom_badge widgets that show the owner's gallery image
   * `sha256` at `url` (none when the image is not in the owner's gallery). One statement.
   */
  async badgeVisibilitiesOfImage(db: Knex, ownerId: string, sha256: string, url: string): Promise<string[]> {
    return (await badgeVisibilities(db, { ownerId, sha256, url })).map((r) => r.visibility);
  },
};

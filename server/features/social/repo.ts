/** SQL of the social profile: rows of social_profiles, social_links and social_widgets (migration 0014). */
import type { Knex } from 'knex';
import { keysetPage, type Keyset } from '../../core/keyset.ts';
import { sql } from '../../db/sql.ts';

export interface LinkRow {
  id: string;
  user_id: string;
  platform: string;
  display_name: string;
  handle: string | null;
  url: string | null;
  description: string | null;
  badge: string | null;
  accent_color: string | null;
  avatar_url: string | null;
  visibility: string;
  featured: boolean;
  sort_order: number;
  created_at: number;
  updated_at: number;
}

export interface WidgetRow {
  id: string;
  user_id: string;
  type: string;
  title: string | null;
  config: Record<string, unknown>;
  visibility: string;
  size: string;
  sort_order: number;
  pinned: boolean;
  collapsed: boolean;
  created_at: number;
  updated_at: number;
}

export interface ProfileRow {
  user_id: string;
  theme: Record<string, string> | null;
  updated_at: number;
}

export const links = (db: Knex) => db<LinkRow>('social_links');
export const widgets = (db: Knex) => db<WidgetRow>('social_widgets');
export const profiles = (db: Knex) => db<ProfileRow>('social_profiles');

/** Records a social change of the account: creates its profile row or moves its updated_at. */
export async function touch(db: Knex, userId: string, now: number): Promise<void> {
  await profiles(db)
    .insert({ user_id: userId, theme: null, updated_at: now })
    .onConflict('user_id')
    .merge(['updated_at']);
}

/** One past the largest sort_order of the account's rows (0 for the first). */
export async function nextSortOrder(
  db: Knex,
  table: 'social_links' | 'social_widgets',
  userId: string,
): Promise<number> {
  const row = (await db(table).where({ user_id: userId }).max({ m: 'sort_order' }).first()) as
    | { m: number | null }
    | undefined;
  return row?.m === null || row?.m === undefined ? 0 : Number(row.m) + 1;
}

/** The account's links and widgets in sort order (then creation, then id), only those of the given visibilities when given, and its profile row. */
export async function loadSection(
  db: Knex,
  userId: string,
  visibilities?: string[],
): Promise<{ profile?: ProfileRow; links: LinkRow[]; widgets: WidgetRow[] }> {
  const order = [{ column: 'sort_order' }, { column: 'created_at' }, { column: 'id' }];
  const linkQuery = links(db).where({ user_id: userId }).orderBy(order);
  const widgetQuery = widgets(db).where({ user_id: userId }).orderBy(order);
  if (visibilities) {
    linkQuery.whereIn('visibility', visibilities);
    widgetQuery.whereIn('visibility', visibilities);
  }
  const [profile, linkRows, widgetRows] = await Promise.all([
    profiles(db).where({ user_id: userId }).first(),
    linkQuery,
    widgetQuery,
  ]);
  return { profile, links: linkRows, widgets: widgetRows };
}

// ---- Gallery (migration 0018) -----------------------------------------------------------------

export interface GalleryRow {
  user_id: string;
  sha256: string;
  content_type: string;
  byte_size: number;
  created_at: number;
}

export const galleryImages = (db: Knex) => db<GalleryRow>('social_gallery_images');

/** The account's images that custom_badge widgets may name, newest first (keyset on created_at, sha256). */
const GALLERY_ORDER: Keyset = {
  columns: [
    { sql: sql`created_at`, type: 'bigint' },
    { sql: sql`sha256`, type: 'text' },
  ],
  direction: 'desc',
};

export function galleryPage(db: Knex, userId: string, size: number, after?: [number, string]): Knex.QueryBuilder {
  return keysetPage(
    galleryImages(db).where({ user_id: userId }).select('user_id', 'sha256', 'content_type', 'byte_size', 'created_at'),
    GALLERY_ORDER,
    size,
    after,
  );
}

/** Condition on a social_widgets row (alias `w`): a custom_badge widget whose imageUrls hold `url`. */
function showsImage(q: Knex.QueryBuilder, url: string): Knex.QueryBuilder {
  return q.where('w.type', 'custom_badge').whereRaw(`w.config -> 'imageUrls' @> jsonb_build_array(?::text)`, [url]);
}

/** Whether one of the account's custom_badge widgets shows the image at `url`. */
export async function badgeShowsImage(db: Knex, userId: string, url: string): Promise<boolean> {
  const row = await showsImage(db('social_widgets as w').where('w.user_id', userId), url).first(db.raw('1 as one'));
  return row !== undefined;
}

/**
 * The visibilities of the owner's custom_badge widgets that show the owner's gallery image `sha256`
 * at `url` (none when the image is not in the owner's gallery). One statement.
 */
export async function badgeVisibilitiesOfImage(
  db: Knex,
  ownerId: string,
  sha256: string,
  url: string,
): Promise<string[]> {
  const rows: Array<{ visibility: string }> = await showsImage(
    db('social_widgets as w')
      .join('social_gallery_images as g', function () {
        this.on('g.user_id', '=', 'w.user_id').andOn('g.sha256', '=', db.raw('?', [sha256]));
      })
      .where('w.user_id', ownerId),
    url,
  ).distinct('w.visibility');
  return rows.map((r) => r.visibility);
}

/** SQL of the social profile: rows of social_profiles, social_links and social_widgets (migration 0014). */
import type { Knex } from 'knex';

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
  await profiles(db).insert({ user_id: userId, theme: null, updated_at: now }).onConflict('user_id').merge(['updated_at']);
}

/** One past the largest sort_order of the account's rows (0 for the first). */
export async function nextSortOrder(db: Knex, table: 'social_links' | 'social_widgets', userId: string): Promise<number> {
  const row = (await db(table).where({ user_id: userId }).max({ m: 'sort_order' }).first()) as { m: number | null } | undefined;
  return row?.m === null || row?.m === undefined ? 0 : Number(row.m) + 1;
}

/** The account's links and widgets in sort order (then creation, then id), only those of the given visibilities when given, and its profile row. */
export async function loadSection(db: Knex, userId: string, visibilities?: string[]): Promise<{ profile?: ProfileRow; links: LinkRow[]; widgets: WidgetRow[] }> {
  const order = [{ column: 'sort_order' }, { column: 'created_at' }, { column: 'id' }];
  const linkQuery = links(db).where({ user_id: userId }).orderBy(order);
  const widgetQuery = widgets(db).where({ user_id: userId }).orderBy(order);
  if (visibilities) {
    linkQuery.whereIn('visibility', visibilities);
    widgetQuery.whereIn('visibility', visibilities);
  }
  const [profile, linkRows, widgetRows] = await Promise.all([profiles(db).where({ user_id: userId }).first(), linkQuery, widgetQuery]);
  return { profile, links: linkRows, widgets: widgetRows };
}

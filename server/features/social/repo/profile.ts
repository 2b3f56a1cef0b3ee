/**
 * The SQL of the social profile (migration 0014): the profile row (social_profiles), and the
 * account's links and widgets as a section, and their order. The social area's statements are
 * committed as generated/sql/social.sql.
 */
import type { Knex } from 'knex';
import { type Sql, sql } from '../../../db/sql.ts';
import { EXAMPLE_UUID, statement } from '../../../db/statements.ts';
import { LINK_COLUMNS, type LinkRow } from './links.ts';
import { AREA } from './shared.ts';
import { WIDGET_COLUMNS, type WidgetRow } from './widgets.ts';

export interface ProfileRow {
  user_id: string;
  theme: Record<string, string> | null;
  updated_at: number;
}

/** The tables whose rows an account orders (sort_order). */
export type OrderedTable = 'social_links' | 'social_widgets';
const ORDERED_TABLES: readonly OrderedTable[] = ['social_links', 'social_widgets'];

// ---- Profile row ------------------------------------------------------------------------------

/** Creates the account's profile row or moves its updated_at. */
const touchProfile = statement<{ userId: string; now: number }, never>({
  name: 'social_profile_touch',
  area: AREA,
  variants: { 'the account': { userId: EXAMPLE_UUID, now: 0 } },
  build: ({
    userId,
    now,
  }) => sql`insert into social_profiles (user_id, theme, updated_at) values (${userId}, null, ${now})
    on conflict (user_id) do update set updated_at = excluded.updated_at`,
});

/** The account's profile row, locked for update (serialises the account's social writes). */
const lockProfile = statement<{ userId: string }, Pick<ProfileRow, 'theme'>>({
  name: 'social_profile_lock',
  area: AREA,
  variants: { 'the account': { userId: EXAMPLE_UUID } },
  build: ({ userId }) => sql`select theme from social_profiles where user_id = ${userId} for update`,
});

const setTheme = statement<{ userId: string; theme: string | null }, never>({
  name: 'social_profile_set_theme',
  area: AREA,
  variants: { 'the account': { userId: EXAMPLE_UUID, theme: null } },
  build: ({ userId, theme }) => sql`update social_profiles set theme = ${theme}::jsonb where user_id = ${userId}`,
});

const readProfile = statement<{ userId: string }, ProfileRow>({
  name: 'social_profile',
  area: AREA,
  variants: { 'the account': { userId: EXAMPLE_UUID } },
  build: ({ userId }) => sql`select user_id, theme, updated_at from social_profiles where user_id = ${userId}`,
});

/** One past the largest sort_order of the account's rows (0 for the first). */
const nextSortOrder = statement<{ table: OrderedTable; userId: string }, { next: number }>({
  name: 'social_next_sort_order',
  area: AREA,
  variants: {
    links: { table: 'social_links', userId: EXAMPLE_UUID },
    widgets: { table: 'social_widgets', userId: EXAMPLE_UUID },
  },
  build: ({ table, userId }) =>
    sql`select coalesce(max(sort_order) + 1, 0)::int as next from ${sql.constant(table, ORDERED_TABLES)} where user_id = ${userId}`,
});

// ---- The section (links and widgets in order) --------------------------------------------------

type SectionParams = { userId: string; visibilities?: readonly string[] | undefined };
const SECTION_VARIANTS: Record<string, SectionParams> = {
  'every visibility (the owner)': { userId: EXAMPLE_UUID },
  'the visibilities a friend sees': { userId: EXAMPLE_UUID, visibilities: ['public'] },
};
const onlyVisibilities = (visibilities: readonly string[] | undefined): Sql =>
  visibilities === undefined ? sql.empty : sql` and visibility = any (${[...visibilities]}::text[])`;

const sectionLinks = statement<SectionParams, LinkRow>({
  name: 'social_links_of_owner',
  area: AREA,
  variants: SECTION_VARIANTS,
  build: ({ userId, visibilities }) => sql`select ${LINK_COLUMNS} from social_links
    where user_id = ${userId}${onlyVisibilities(visibilities)}
    order by sort_order, created_at, id`,
});

const sectionWidgets = statement<SectionParams, WidgetRow>({
  name: 'social_widgets_of_owner',
  area: AREA,
  variants: SECTION_VARIANTS,
  build: ({ userId, visibilities }) => sql`select ${WIDGET_COLUMNS} from social_widgets
    where user_id = ${userId}${onlyVisibilities(visibilities)}
    order by sort_order, created_at, id`,
});

// ---- Reorder ----------------------------------------------------------------------------------

const lockOrdered = statement<{ table: OrderedTable; userId: string }, { id: string }>({
  name: 'social_reorder_lock',
  area: AREA,
  variants: {
    links: { table: 'social_links', userId: EXAMPLE_UUID },
    widgets: { table: 'social_widgets', userId: EXAMPLE_UUID },
  },
  build: ({ table, userId }) =>
    sql`select id from ${sql.constant(table, ORDERED_TABLES)} where user_id = ${userId} for update`,
});

/** sort_order = the position in `ids`, in one statement. */
const setOrder = statement<{ table: OrderedTable; userId: string; ids: readonly string[]; now: number }, never>({
  name: 'social_reorder_set',
  area: AREA,
  variants: {
    links: { table: 'social_links', userId: EXAMPLE_UUID, ids: [], now: 0 },
    widgets: { table: 'social_widgets', userId: EXAMPLE_UUID, ids: [], now: 0 },
  },
  build: ({ table, userId, ids, now }) => sql`update ${sql.constant(table, ORDERED_TABLES)} as t
    set sort_order = v.ord - 1, updated_at = ${now}
    from unnest(${[...ids]}::uuid[]) with ordinality as v(id, ord)
    where t.id = v.id and t.user_id = ${userId}`,
});

export const profileRepo = {
  /** Records a social change of the account: creates its profile row or moves its updated_at. */
  async touch(db: Knex, userId: string, now: number): Promise<void> {
    await touchProfile(db, { userId, now });
  },
  /** Locks the account's profile row (one social write at a time) and returns its theme, if the row exists. */
  async lock(db: Knex, userId: string): Promise<Pick<ProfileRow, 'theme'> | undefined> {
    const [row] = await lockProfile(db, { userId });
    return row;
  },
  /** `theme` as JSON text, or null. */
  async setTheme(db: Knex, userId: string, theme: string | null): Promise<void> {
    await setTheme(db, { userId, theme });
  },
  async nextSortOrder(db: Knex, table: OrderedTable, userId: string): Promise<number> {
    const [row] = await nextSortOrder(db, { table, userId });
    return row!.next;
  },
  /** The account's links and widgets in sort order (then creation, then id), only those of the given visibilities when given, and its profile row. */
  async loadSection(
    db: Knex,
    userId: string,
    visibilities?: readonly string[],
  ): Promise<{ profile?: ProfileRow; links: LinkRow[]; widgets: WidgetRow[] }> {
    const [[profile], links, widgets] = await Promise.all([
      readProfile(db, { userId }),
      sectionLinks(db, { userId, visibilities }),
      sectionWidgets(db, { userId, visibilities }),
    ]);
    return { profile, links, widgets };
  },
  /** The ids of the account's rows of `table`, locked for update. */
  lockOrdered: (db: Knex, table: OrderedTable, userId: string) => lockOrdered(db, { table, userId }),
  async setOrder(db: Knex, table: OrderedTable, userId: string, ids: readonly string[], now: number): Promise<void> {
    await setOrder(db, { table, userId, ids, now });
  },
};

/** The SQL of the social links (social_links, migration 0014). */
import type { Knex } from 'knex';
import type { PendingEvent } from '../../../core/context.ts';
import { sql } from '../../../db/sql.ts';
import { EXAMPLE_UUID, statement } from '../../../db/statements.ts';
import { appendEvents, EXAMPLE_EVENT, keyedExample, notifiedColumn } from '../../../events/log.ts';
import { AREA, patchColumn } from './shared.ts';

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

export const LINK_COLUMNS = sql`id, user_id, platform, display_name, handle, url, description, badge, accent_color, avatar_url, visibility, featured, sort_order, created_at, updated_at`;

// ---- Links ------------------------------------------------------------------------------------

const EXAMPLE_LINK: LinkRow = {
  id: EXAMPLE_UUID,
  user_id: EXAMPLE_UUID,
  platform: 'x',
  display_name: 'x',
  handle: null,
  url: null,
  description: null,
  badge: null,
  accent_color: null,
  avatar_url: null,
  visibility: 'private',
  featured: false,
  sort_order: 0,
  created_at: 0,
  updated_at: 0,
};

const insertLink = statement<{ row: LinkRow }, never>({
  name: 'social_link_insert',
  area: AREA,
  variants: { 'a link': { row: EXAMPLE_LINK } },
  build: ({ row: r }) => sql`insert into social_links (${LINK_COLUMNS})
    values (${r.id}, ${r.user_id}, ${r.platform}, ${r.display_name}, ${r.handle}::text, ${r.url}::text,
      ${r.description}::text, ${r.badge}::text, ${r.accent_color}::text, ${r.avatar_url}::text, ${r.visibility},
      ${r.featured}, ${r.sort_order}, ${r.created_at}, ${r.updated_at})`,
});

/** A link to create: without a sort_order (null), it goes one past the account's largest. */
export type NewLink = Omit<LinkRow, 'sort_order'> & { sort_order: number | null };

const WRITTEN = sql`exists (select 1 from inserted)`;

/**
 * A link and its event in one statement (docs/data-access.md, "Writes in one statement"): the
 * profile row touched first (the account's social lock, as profileRepo.touch), then the link. A
 * link without a sort_order takes one past the largest the statement's snapshot holds, which is
 * current only when no social write committed since the snapshot: every one touches the profile
 * row, so the touch is made only if the row is still the version the snapshot saw (its xmin), else
 * nothing is written (`written` false) and the caller takes the transaction. A link with a
 * sort_order needs no such check.
 */
const createLink = statement<
  { row: NewLink; events: readonly PendingEvent[] },
  { written: boolean; notified: unknown }
>({
  name: 'social_link_create',
  area: AREA,
  variants: {
    'a link': { row: { ...EXAMPLE_LINK, sort_order: null }, events: [EXAMPLE_EVENT] },
    'a link, the request keyed (its response stored under the key)': {
      row: { ...EXAMPLE_LINK, sort_order: null },
      events: keyedExample([EXAMPLE_EVENT]),
    },
  },
  build: ({
    row: r,
    events,
  }) => sql`with seen as (select xmin as version from social_profiles where user_id = ${r.user_id}),
    touched as (
      insert into social_profiles as p (user_id, theme, updated_at) values (${r.user_id}, null, ${r.created_at})
      on conflict (user_id) do update set updated_at = excluded.updated_at
        where ${r.sort_order}::int is not null or p.xmin = (select version from seen)
      returning user_id
    ),
    inserted as (
      insert into social_links (${LINK_COLUMNS})
      select ${r.id}, ${r.user_id}, ${r.platform}, ${r.display_name}, ${r.handle}::text, ${r.url}::text,
        ${r.description}::text, ${r.badge}::text, ${r.accent_color}::text, ${r.avatar_url}::text, ${r.visibility},
        ${r.featured}, coalesce(${r.sort_order}::int,
          (select coalesce(max(l.sort_order) + 1, 0)::int from social_links l where l.user_id = ${r.user_id})),
        ${r.created_at}, ${r.updated_at}
      from touched
      returning id
    ),
    ${appendEvents(events, WRITTEN)}
    select ${WRITTEN} as written, ${notifiedColumn}`,
});

/** The columns a link PATCH may set; undefined leaves a column as it is. */
export type LinkChanges = Partial<
  Pick<
    LinkRow,
    | 'platform'
    | 'display_name'
    | 'handle'
    | 'url'
    | 'description'
    | 'badge'
    | 'accent_color'
    | 'avatar_url'
    | 'visibility'
    | 'featured'
    | 'sort_order'
  >
>;

const updateLink = statement<{ userId: string; linkId: string; changes: LinkChanges; now: number }, { id: string }>({
  name: 'social_link_update',
  area: AREA,
  variants: { 'any set of columns': { userId: EXAMPLE_UUID, linkId: EXAMPLE_UUID, changes: {}, now: 0 } },
  build: ({ userId, linkId, changes: c, now }) => sql`update social_links set
      ${patchColumn('platform', 'text', c.platform)},
      ${patchColumn('display_name', 'text', c.display_name)},
      ${patchColumn('handle', 'text', c.handle)},
      ${patchColumn('url', 'text', c.url)},
      ${patchColumn('description', 'text', c.description)},
      ${patchColumn('badge', 'text', c.badge)},
      ${patchColumn('accent_color', 'text', c.accent_color)},
      ${patchColumn('avatar_url', 'text', c.avatar_url)},
      ${patchColumn('visibility', 'text', c.visibility)},
      ${patchColumn('featured', 'boolean', c.featured)},
      ${patchColumn('sort_order', 'int', c.sort_order)},
      updated_at = ${now}
    where id = ${linkId} and user_id = ${userId}
    returning id`,
});

const deleteLink = statement<{ userId: string; linkId: string }, { id: string }>({
  name: 'social_link_delete',
  area: AREA,
  variants: { 'one link': { userId: EXAMPLE_UUID, linkId: EXAMPLE_UUID } },
  build: ({ userId, linkId }) =>
    sql`delete from social_links where id = ${linkId} and user_id = ${userId} returning id`,
});

const countOwnedLinks = statement<{ userId: string; ids: readonly string[] }, { n: number }>({
  name: 'social_links_count_owned',
  area: AREA,
  variants: { 'some ids': { userId: EXAMPLE_UUID, ids: [] } },
  build: ({ userId, ids }) =>
    sql`select count(*)::int as n from social_links where user_id = ${userId} and id = any (${[...ids]}::uuid[])`,
});

/** The identity's fields on the account's link of that platform, where they differ (sync-oauth). */
const syncLink = statement<
  {
    userId: string;
    platform: string;
    handle: string | null;
    url: string | null;
    avatarUrl: string | null;
    now: number;
  },
  { id: string }
>({
  name: 'social_link_sync_identity',
  area: AREA,
  variants: {
    'one platform': { userId: EXAMPLE_UUID, platform: 'x', handle: null, url: null, avatarUrl: null, now: 0 },
  },
  build: ({ userId, platform, handle, url, avatarUrl, now }) => sql`update social_links
    set handle = ${handle}::text, url = ${url}::text, avatar_url = ${avatarUrl}::text, updated_at = ${now}
    where user_id = ${userId} and platform = ${platform}
      and (handle is distinct from ${handle}::text or url is distinct from ${url}::text or avatar_url is distinct from ${avatarUrl}::text)
    returning id`,
});

const linkOfPlatform = statement<{ userId: string; platform: string }, { id: string }>({
  name: 'social_link_of_platform',
  area: AREA,
  variants: { 'one platform': { userId: EXAMPLE_UUID, platform: 'x' } },
  build: ({ userId, platform }) =>
    sql`select id from social_links where user_id = ${userId} and platform = ${platform} limit 1`,
});

export const linksRepo = {
  /** Creates the link with its event in one statement; false when it wrote nothing (see createLink). */
  /** `written` false: the profile changed since the statement's snapshot, and nothing was written (see createLink). */
  async create(
    db: Knex,
    row: NewLink,
    events: readonly PendingEvent[],
  ): Promise<{ written: boolean; notified: unknown }> {
    return (await createLink(db, { row, events }))[0]!;
  },
  async insert(db: Knex, row: LinkRow): Promise<void> {
    await insertLink(db, { row });
  },
  /** Whether the link was there (and is now changed). */
  async update(db: Knex, userId: string, linkId: string, changes: LinkChanges, now: number): Promise<boolean> {
    return (await updateLink(db, { userId, linkId, changes, now })).length > 0;
  },
  /** Whether the link was there (and is now gone). */
  async delete(db: Knex, userId: string, linkId: string): Promise<boolean> {
    return (await deleteLink(db, { userId, linkId })).length > 0;
  },
  /** How many of `ids` are the account's links. */
  async countOwned(db: Knex, userId: string, ids: readonly string[]): Promise<number> {
    const [row] = await countOwnedLinks(db, { userId, ids });
    return row?.n ?? 0;
  },
  /** Sets the identity's fields on the account's link of `platform` where they differ; the number of links changed. */
  async syncIdentity(
    db: Knex,
    userId: string,
    identity: { platform: string; handle: string | null; url: string | null; avatarUrl: string | null },
    now: number,
  ): Promise<number> {
    return (await syncLink(db, { userId, ...identity, now })).length;
  },
  async existsForPlatform(db: Knex, userId: string, platform: string): Promise<boolean> {
    return (await linkOfPlatform(db, { userId, platform })).length > 0;
  },
};

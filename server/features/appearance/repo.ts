/** The SQL of appearance settings, custom colour schemes and custom fonts (generated/sql/appearance.sql). */
import type { Knex } from 'knex';
import type { PendingEvent } from '../../core/context.ts';
import { type Sql, sql } from '../../db/sql.ts';
import { EXAMPLE_UUID, statement } from '../../db/statements.ts';
import { appendEvents, EXAMPLE_EVENT, notifiedColumn } from '../../events/log.ts';

export interface AppearanceRow {
  id: string;
  user_id: string;
  theme_mode: string;
  dark_variant: string | null;
  color_scheme: string;
  custom_color_scheme_id: string | null;
  font_family: string;
  custom_font_id: string | null;
  font_size: string;
  font_scale: number | null;
  font_size_px: number | null;
  amoled_base: boolean | null;
  reduce_motion: boolean;
  member_banner_gradients_enabled: boolean;
  created_at: number;
  updated_at: number;
}

export type AppearanceValues = Omit<AppearanceRow, 'id' | 'user_id' | 'created_at' | 'updated_at'>;

export interface CustomColorSchemeRow {
  id: string;
  user_id: string;
  name: string;
  colors: Record<string, string>;
  created_at: number;
  updated_at: number;
}

export interface CustomFontRow {
  id: string;
  user_id: string;
  name: string;
  source_url: string;
  created_at: number;
  updated_at: number;
}

const AREA = 'appearance';

/** The settings' value columns, in table order. */
const VALUE_COLUMNS = [
  'theme_mode',
  'dark_variant',
  'color_scheme',
  'custom_color_scheme_id',
  'font_family',
  'custom_font_id',
  'font_size',
  'font_scale',
  'font_size_px',
  'amoled_base',
  'reduce_motion',
  'member_banner_gradients_enabled',
] as const satisfies ReadonlyArray<keyof AppearanceValues>;

const EXAMPLE_SETTINGS: AppearanceRow = {
  id: EXAMPLE_UUID,
  user_id: EXAMPLE_UUID,
  theme_mode: 'system',
  dark_variant: null,
  color_scheme: 'default',
  custom_color_scheme_id: null,
  font_family: 'system',
  custom_font_id: null,
  font_size: 'medium',
  font_scale: null,
  font_size_px: null,
  amoled_base: null,
  reduce_motion: false,
  member_banner_gradients_enabled: true,
  created_at: 0,
  updated_at: 0,
};

const findSettings = statement<{ userId: string }, AppearanceRow>({
  name: 'appearance_find',
  area: AREA,
  variants: { 'an account': { userId: EXAMPLE_UUID } },
  build: ({ userId }) => sql`select * from appearance_settings where user_id = ${userId} limit 1`,
});

const COLUMNS = ['id', 'user_id', ...VALUE_COLUMNS, 'created_at', 'updated_at'] as const;

/**
 * Inserts the row (`values (…)` or a `select` of it: `source`); on the account's existing row,
 * overwrites just the columns listed in `changed` (with the inserted row's values, which are the
 * changes) and updated_at. One text whatever the columns: each is kept or taken by a bound flag.
 */
function upsertSql(changed: ReadonlySet<string>, source: Sql): Sql {
  const set = VALUE_COLUMNS.map(
    (c) =>
      sql`${sql.id(c)} = case when ${changed.has(c)}::boolean then ${sql.id(`excluded.${c}`)} else ${sql.id(`s.${c}`)} end`,
  );
  return sql`insert into appearance_settings as s (${sql.join(
    COLUMNS.map((c) => sql.id(c)),
    ', ',
  )})
      ${source}
      on conflict (user_id) do update set ${sql.join(set, ', ')}, updated_at = excluded.updated_at
      returning *`;
}

/** The row's values, in COLUMNS' order. */
const rowValues = (row: AppearanceRow): Sql =>
  sql.join(
    COLUMNS.map((c) => sql`${row[c]}`),
    ', ',
  );

/** Inserts the row, or overwrites the `changed` columns of the account's existing one (upsertSql). */
const upsertSettings = statement<{ row: AppearanceRow; changed: ReadonlySet<string> }, AppearanceRow>({
  name: 'appearance_upsert',
  area: AREA,
  variants: { 'any set of changed columns': { row: EXAMPLE_SETTINGS, changed: new Set() } },
  build: ({ row, changed }) => upsertSql(changed, sql`values (${rowValues(row)})`),
});

/** Why a PATCH was refused (each check holds when the PATCH does not name a font or scheme). */
export interface PatchVerdict {
  ok: boolean;
  /** The account's plan has custom fonts. */
  fonts_allowed: boolean;
  /** The custom font is the account's. */
  font_found: boolean;
  /** The custom colour scheme is the account's. */
  scheme_found: boolean;
}

/**
 * A PATCH in one statement (docs/data-access.md, "Writes in one statement"): the custom font and
 * colour scheme it names (`row`'s ids, null when it names none) must be the account's, key-share
 * locked as their foreign keys lock them, so a delete of one either waits for this write (and then
 * clears it, on delete set null) or has committed and is not found here (a 404, never the foreign
 * key's error); a font needs a plan in `fontPlans`. Only when all of that holds, the upsert
 * (upsertSql) and `appearance.changed`. The answer: the verdict and, when written, the row.
 */
const patchSettings = statement<
  { row: AppearanceRow; changed: ReadonlySet<string>; fontPlans: readonly string[]; events: readonly PendingEvent[] },
  PatchVerdict & Partial<AppearanceRow> & { notified: unknown }
>({
  name: 'appearance_patch',
  area: AREA,
  variants: {
    'any set of changed columns': { row: EXAMPLE_SETTINGS, changed: new Set(), fontPlans: [], events: [EXAMPLE_EVENT] },
  },
  build: ({ row, changed, fontPlans, events }) => sql`with font as (
      select id from custom_fonts where id = ${row.custom_font_id}::uuid and user_id = ${row.user_id} for key share
    ),
    scheme as (
      select id from custom_color_schemes where id = ${row.custom_color_scheme_id}::uuid and user_id = ${row.user_id} for key share
    ),
    checks as (
      select coalesce((select a.plan = any (${[...fontPlans]}::text[]) from accounts a where a.id = ${row.user_id}), false) as fonts_allowed,
        exists (select 1 from font) as font_found, exists (select 1 from scheme) as scheme_found
    ),
    verdict as (
      select c.*, (${row.custom_font_id}::uuid is null or (c.fonts_allowed and c.font_found))
        and (${row.custom_color_scheme_id}::uuid is null or c.scheme_found) as ok
      from checks c
    ),
    saved as (${upsertSql(changed, sql`select ${rowValues(row)} from verdict v where v.ok`)}),
    ${appendEvents(events, sql`(select ok from verdict)`)}
    select v.ok, v.fonts_allowed, v.font_found, v.scheme_found, s.*, ${notifiedColumn}
    from verdict v left join saved s on true`,
});

const listSchemes = statement<{ userId: string }, CustomColorSchemeRow>({
  name: 'appearance_schemes',
  area: AREA,
  variants: { 'an account': { userId: EXAMPLE_UUID } },
  build: ({ userId }) => sql`select id, user_id, name, colors, created_at, updated_at from custom_color_schemes
    where user_id = ${userId} order by created_at, id`,
});

const insertScheme = statement<{ row: CustomColorSchemeRow }, never>({
  name: 'appearance_scheme_insert',
  area: AREA,
  variants: {
    'a scheme': {
      row: { id: EXAMPLE_UUID, user_id: EXAMPLE_UUID, name: 'x', colors: {}, created_at: 0, updated_at: 0 },
    },
  },
  build: ({ row }) => sql`insert into custom_color_schemes (id, user_id, name, colors, created_at, updated_at)
    values (${row.id}, ${row.user_id}, ${row.name}, ${JSON.stringify(row.colors)}::jsonb, ${row.created_at}, ${row.updated_at})`,
});

const deleteScheme = statement<{ userId: string; id: string }, { id: string }>({
  name: 'appearance_scheme_delete',
  area: AREA,
  variants: { 'a scheme': { userId: EXAMPLE_UUID, id: EXAMPLE_UUID } },
  build: ({ userId, id }) =>
    sql`delete from custom_color_schemes where id = ${id} and user_id = ${userId} returning id`,
});

const listFonts = statement<{ userId: string }, CustomFontRow>({
  name: 'appearance_fonts',
  area: AREA,
  variants: { 'an account': { userId: EXAMPLE_UUID } },
  build: ({ userId }) => sql`select id, user_id, name, source_url, created_at, updated_at from custom_fonts
    where user_id = ${userId} order by created_at, id`,
});

const insertFont = statement<{ row: CustomFontRow }, never>({
  name: 'appearance_font_insert',
  area: AREA,
  variants: {
    'a font': {
      row: { id: EXAMPLE_UUID, user_id: EXAMPLE_UUID, name: 'x', source_url: 'x', created_at: 0, updated_at: 0 },
    },
  },
  build: ({ row }) => sql`insert into custom_fonts (id, user_id, name, source_url, created_at, updated_at)
    values (${row.id}, ${row.user_id}, ${row.name}, ${row.source_url}, ${row.created_at}, ${row.updated_at})`,
});

const deleteFont = statement<{ userId: string; id: string }, { id: string }>({
  name: 'appearance_font_delete',
  area: AREA,
  variants: { 'a font': { userId: EXAMPLE_UUID, id: EXAMPLE_UUID } },
  build: ({ userId, id }) => sql`delete from custom_fonts where id = ${id} and user_id = ${userId} returning id`,
});

export const appearanceRepo = {
  async find(db: Knex, userId: string): Promise<AppearanceRow | undefined> {
    return (await findSettings(db, { userId }))[0];
  },

  /** Inserts the row, or on an existing one overwrites just the `changed` columns (with the row's values) and updated_at. */
  async upsert(db: Knex, row: AppearanceRow, changed: ReadonlyArray<keyof AppearanceValues>): Promise<AppearanceRow> {
    const [saved] = await upsertSettings(db, { row, changed: new Set(changed) });
    return saved!;
  },

  /**
   * A PATCH's checks, upsert and events in one statement (see patchSettings): the verdict and,
   * when it was written, the row as saved.
   */
  async patch(
    db: Knex,
    row: AppearanceRow,
    changed: ReadonlyArray<keyof AppearanceValues>,
    fontPlans: readonly string[],
    events: readonly PendingEvent[],
  ): Promise<{ verdict: PatchVerdict; saved: AppearanceRow | undefined }> {
    const [answer] = await patchSettings(db, { row, changed: new Set(changed), fontPlans, events });
    return { verdict: answer!, saved: answer!.ok ? (answer as AppearanceRow) : undefined };
  },

  listSchemes(db: Knex, userId: string): Promise<CustomColorSchemeRow[]> {
    return listSchemes(db, { userId });
  },

  async insertScheme(db: Knex, row: CustomColorSchemeRow): Promise<void> {
    await insertScheme(db, { row });
  },

  async deleteScheme(db: Knex, userId: string, id: string): Promise<boolean> {
    return (await deleteScheme(db, { userId, id })).length > 0;
  },

  listFonts(db: Knex, userId: string): Promise<CustomFontRow[]> {
    return listFonts(db, { userId });
  },

  async insertFont(db: Knex, row: CustomFontRow): Promise<void> {
    await insertFont(db, { row });
  },

  async deleteFont(db: Knex, userId: string, id: string): Promise<boolean> {
    return (await deleteFont(db, { userId, id })).length > 0;
  },
};

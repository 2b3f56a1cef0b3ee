import type { Knex } from 'knex';

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

export const appearanceRepo = {
  find(db: Knex, userId: string): Promise<AppearanceRow | undefined> {
    return db('appearance_settings').where({ user_id: userId }).first();
  },

  /** Inserts the row, or on an existing one overwrites just the given columns. */
  async upsert(
    db: Knex,
    insert: AppearanceRow,
    changes: Partial<AppearanceValues> & { updated_at: number },
  ): Promise<AppearanceRow> {
    const [row] = await db('appearance_settings').insert(insert).onConflict('user_id').merge(changes).returning('*');
    return row as AppearanceRow;
  },

  async schemeExists(db: Knex, userId: string, id: string): Promise<boolean> {
    return (await db('custom_color_schemes').where({ id, user_id: userId }).first('id')) !== undefined;
  },

  async fontExists(db: Knex, userId: string, id: string): Promise<boolean> {
    return (await db('custom_fonts').where({ id, user_id: userId }).first('id')) !== undefined;
  },

  listSchemes(db: Knex, userId: string): Promise<CustomColorSchemeRow[]> {
    return db('custom_color_schemes')
      .where({ user_id: userId })
      .orderBy([{ column: 'created_at' }, { column: 'id' }]);
  },

  async insertScheme(db: Knex, row: CustomColorSchemeRow): Promise<void> {
    await db('custom_color_schemes').insert({ ...row, colors: JSON.stringify(row.colors) });
  },

  async deleteScheme(db: Knex, userId: string, id: string): Promise<boolean> {
    return (await db('custom_color_schemes').where({ id, user_id: userId }).delete().returning('id')).length > 0;
  },

  listFonts(db: Knex, userId: string): Promise<CustomFontRow[]> {
    return db('custom_fonts')
      .where({ user_id: userId })
      .orderBy([{ column: 'created_at' }, { column: 'id' }]);
  },

  async insertFont(db: Knex, row: CustomFontRow): Promise<void> {
    await db('custom_fonts').insert(row);
  },

  async deleteFont(db: Knex, userId: string, id: string): Promise<boolean> {
    return (await db('custom_fonts').where({ id, user_id: userId }).delete().returning('id')).length > 0;
  },
};

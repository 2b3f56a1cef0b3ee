/** Appearance rules: defaults, the colourScheme alias, plan entitlement and ownership of custom ids. */
import { randomUUID } from 'node:crypto';
import type { components } from '../../../generated/api.d.ts';
import { inTransaction, oneStatement, ownerOf, type PresetId, type ServiceContext } from '../../core/context.ts';
import { badRequest, forbidden, notFound } from '../../core/errors.ts';
import { accountPlan, PLANS } from '../accounts/index.ts';
import { appearanceRepo, type AppearanceRow, type AppearanceValues } from './repo.ts';

type AppearanceDocument = components['schemas']['AppearanceDocument'];
type AppearancePatch = components['schemas']['AppearancePatch'];
type CustomColorScheme = components['schemas']['CustomColorScheme'];
type CustomFont = components['schemas']['CustomFont'];

/** Product defaults, also what POST /appearance/reset writes. */
export const APPEARANCE_DEFAULTS: AppearanceValues = {
  theme_mode: 'system',
  dark_variant: 'default',
  color_scheme: 'default',
  custom_color_scheme_id: null,
  font_family: 'system',
  custom_font_id: null,
  font_size: 'medium',
  font_scale: 1,
  font_size_px: 16,
  amoled_base: false,
  reduce_motion: false,
  member_banner_gradients_enabled: true,
};

function toDocument(row: AppearanceRow): AppearanceDocument {
  const doc: AppearanceDocument = {
    _id: row.id,
    _creationTime: row.updated_at,
    userId: row.user_id,
    themeMode: row.theme_mode as AppearanceDocument['themeMode'],
    colorScheme: row.color_scheme,
    customColorSchemeId: row.custom_color_scheme_id,
    fontFamily: row.font_family,
    customFontId: row.custom_font_id,
    fontSize: row.font_size as AppearanceDocument['fontSize'],
    reduceMotion: row.reduce_motion,
    memberBannerGradientsEnabled: row.member_banner_gradients_enabled,
    updatedAt: row.updated_at,
  };
  if (row.dark_variant !== null) doc.darkVariant = row.dark_variant as AppearanceDocument['darkVariant'];
  if (row.font_scale !== null) doc.fontScale = row.font_scale;
  if (row.font_size_px !== null) doc.fontSizePx = row.font_size_px;
  if (row.amoled_base !== null) doc.amoledBase = row.amoled_base;
  return doc;
}

export async function getAppearance(ctx: ServiceContext): Promise<AppearanceDocument> {
  const { db } = ctx;
  const userId = ownerOf(ctx);
  const row = await appearanceRepo.find(db, userId);
  if (!row) throw notFound('Appearance settings not found; PATCH /appearance or POST /appearance/reset creates them');
  return toDocument(row);
}

function changesFrom(patch: AppearancePatch): Partial<AppearanceValues> {
  if (patch.colourScheme !== undefined && patch.colorScheme !== undefined && patch.colourScheme !== patch.colorScheme) {
    throw badRequest('colorScheme and colourScheme are the same setting and disagree; send one of them');
  }
  const colorScheme = patch.colorScheme ?? patch.colourScheme;
  const changes: Partial<AppearanceValues> = {
    theme_mode: patch.themeMode,
    dark_variant: patch.darkVariant,
    color_scheme: colorScheme,
    custom_color_scheme_id: patch.customColorSchemeId,
    font_family: patch.fontFamily,
    custom_font_id: patch.customFontId,
    font_size: patch.fontSize,
    font_scale: patch.fontScale,
    font_size_px: patch.fontSizePx,
    amoled_base: patch.amoledBase,
    reduce_motion: patch.reduceMotion,
    member_banner_gradients_enabled: patch.memberBannerGradientsEnabled,
  };
  return Object.fromEntries(Object.entries(changes).filter(([, v]) => v !== undefined)) as Partial<AppearanceValues>;
}

/** The plans with custom fonts. */
const FONT_PLANS = (Object.keys(PLANS) as Array<keyof typeof PLANS>).filter((plan) => PLANS[plan].customFonts);
const CUSTOM_FONTS_NEED_PRO = 'Custom fonts need the Pro plan or higher';

export async function updateAppearance(ctx: ServiceContext, patch: AppearancePatch): Promise<AppearanceDocument> {
  const { now } = ctx;
  const userId = ownerOf(ctx);
  const changes = changesFrom(patch);
  const insert: AppearanceRow = {
    id: randomUUID(),
    user_id: userId,
    ...APPEARANCE_DEFAULTS,
    ...changes,
    created_at: now,
    updated_at: now,
  };
  const changed = Object.keys(changes) as Array<keyof AppearanceValues>;
  const events = ctx.events.rows(ctx, [
    { type: 'appearance.changed', area: 'appearance', data: { id: userId, fields: Object.keys(patch) } },
  ]);
  // One statement: the custom font and scheme checked, the upsert and the event (appearanceRepo.patch).
  const { verdict, saved } = await oneStatement(ctx, (db) =>
    appearanceRepo.patch(db, insert, changed, FONT_PLANS, events),
  );
  if (saved) return toDocument(saved);
  if (typeof changes.custom_font_id === 'string') {
    if (!verdict.fonts_allowed) throw forbidden(CUSTOM_FONTS_NEED_PRO);
    if (!verdict.font_found) throw notFound('Custom font not found');
  }
  if (typeof changes.custom_color_scheme_id === 'string' && !verdict.scheme_found)
    throw notFound('Custom colour scheme not found');
  throw new Error(`appearance PATCH of ${userId} refused without a reason`);
}

export async function resetAppearance(ctx: ServiceContext): Promise<AppearanceDocument> {
  const { now } = ctx;
  const userId = ownerOf(ctx);
  const insert: AppearanceRow = {
    id: randomUUID(),
    user_id: userId,
    ...APPEARANCE_DEFAULTS,
    created_at: now,
    updated_at: now,
  };
  const every = Object.keys(APPEARANCE_DEFAULTS) as Array<keyof AppearanceValues>;
  return inTransaction(ctx, async (tx) => {
    const doc = toDocument(await appearanceRepo.upsert(tx.db, insert, every));
    await tx.events.emit(tx, { type: 'appearance.changed', area: 'appearance', data: { id: userId } });
    return doc;
  });
}

async function assertCustomFontsAllowed(ctx: ServiceContext): Promise<void> {
  const plan = await accountPlan(ctx);
  if (plan === null || !PLANS[plan].customFonts) throw forbidden(CUSTOM_FONTS_NEED_PRO);
}

export async function listCustomColorSchemes(ctx: ServiceContext): Promise<CustomColorScheme[]> {
  const { db } = ctx;
  const userId = ownerOf(ctx);
  const rows = await appearanceRepo.listSchemes(db, userId);
  return rows.map((r) => ({
    _id: r.id,
    name: r.name,
    colors: r.colors,
    createdAt: r.created_at,
    updatedAt: r.updated_at,
  }));
}

/** A custom colour scheme or font was added or deleted: an appearance change naming the list. */
function customChanged(tx: ServiceContext, userId: string, list: 'customColorSchemes' | 'customFonts'): Promise<void> {
  return tx.events.emit(tx, { type: 'appearance.changed', area: 'appearance', data: { id: userId, fields: [list] } });
}

export async function createCustomColorScheme(
  ctx: ServiceContext,
  input: PresetId & { name: string; colors: Record<string, string> },
): Promise<{ id: string }> {
  const { now } = ctx;
  const userId = ownerOf(ctx);
  const id = input.id ?? randomUUID();
  await inTransaction(ctx, async (tx) => {
    await appearanceRepo.insertScheme(tx.db, {
      id,
      user_id: userId,
      name: input.name,
      colors: input.colors,
      created_at: now,
      updated_at: now,
    });
    await customChanged(tx, userId, 'customColorSchemes');
  });
  return { id };
}

export async function deleteCustomColorScheme(ctx: ServiceContext, id: string): Promise<void> {
  const userId = ownerOf(ctx);
  await inTransaction(ctx, async (tx) => {
    if (!(await appearanceRepo.deleteScheme(tx.db, userId, id))) throw notFound('Custom colour scheme not found');
    await customChanged(tx, userId, 'customColorSchemes');
  });
}

export async function listCustomFonts(ctx: ServiceContext): Promise<CustomFont[]> {
  const { db } = ctx;
  const userId = ownerOf(ctx);
  const rows = await appearanceRepo.listFonts(db, userId);
  return rows.map((r) => ({
    _id: r.id,
    name: r.name,
    sourceUrl: r.source_url,
    createdAt: r.created_at,
    updatedAt: r.updated_at,
  }));
}

export async function createCustomFont(
  ctx: ServiceContext,
  input: PresetId & { name: string; sourceUrl: string },
): Promise<{ id: string }> {
  const { now } = ctx;
  const userId = ownerOf(ctx);
  await assertCustomFontsAllowed(ctx);
  const id = input.id ?? randomUUID();
  await inTransaction(ctx, async (tx) => {
    await appearanceRepo.insertFont(tx.db, {
      id,
      user_id: userId,
      name: input.name,
      source_url: input.sourceUrl,
      created_at: now,
      updated_at: now,
    });
    await customChanged(tx, userId, 'customFonts');
  });
  return { id };
}

export async function deleteCustomFont(ctx: ServiceContext, id: string): Promise<void> {
  const userId = ownerOf(ctx);
  await inTransaction(ctx, async (tx) => {
    if (!(await appearanceRepo.deleteFont(tx.db, userId, id))) throw notFound('Custom font not found');
    await customChanged(tx, userId, 'customFonts');
  });
}

/**
 * The owner's social profile: theme, links, widgets and their order (docs/social.md). Every write
 * moves the section's updatedAt (profileRepo.touch) in the same transaction.
 */
import { randomUUID } from 'node:crypto';
import type { Knex } from 'knex';
import type { components } from '../../../generated/api.d.ts';
import {
  type FriendContext,
  inTransaction,
  oneStatement,
  ownerOf,
  type PresetId,
  type ServiceContext,
  StaleAnswer,
} from '../../core/context.ts';
import { badRequest, conflict, notFound } from '../../core/errors.ts';
import { findLiveMember } from '../members/index.ts';
import { checkBadgeImages, tagForViewer } from './gallery.ts';
import { toSection } from './present.ts';
import { type LinkChanges, type LinkRow, linksRepo } from './repo/links.ts';
import { pollRepo } from './repo/poll.ts';
import { guestbookRepo } from './repo/guestbook.ts';
import { type OrderedTable, profileRepo } from './repo/profile.ts';
import { type WidgetChanges, type WidgetRow, widgetsRepo } from './repo/widgets.ts';
import { shareMutualFriend, visibleSet } from './visibility.ts';

type Schemas = components['schemas'];
type Config = Schemas['SocialWidgetConfig'];

const LINK_NOT_FOUND = 'Link not found';
const WIDGET_NOT_FOUND = 'Widget not found';

/** The event of a change to the social section: what changed, and the link or widget (else the account). */
function sectionChanged(
  tx: ServiceContext,
  kind: 'theme' | 'link' | 'widget' | 'order' | 'gallery',
  id: string,
): Promise<void> {
  return tx.events.emit(tx, { type: 'social_profile.changed', area: 'social', data: { id, kind } });
}

export async function getSection(ctx: ServiceContext): Promise<Schemas['SocialSection']> {
  const userId = ownerOf(ctx);
  const { profile, links, widgets } = await profileRepo.loadSection(ctx.db, userId);
  return toSection(userId, profile, links, widgets);
}

export async function updateTheme(ctx: ServiceContext, input: Schemas['UpdateSocialRequest']): Promise<void> {
  const userId = ownerOf(ctx);
  await inTransaction(ctx, async (tx) => {
    await profileRepo.touch(tx.db, userId, tx.now);
    const row = await profileRepo.lock(tx.db, userId);
    const theme = input.theme === null ? null : { ...(row?.theme ?? {}), ...input.theme };
    await profileRepo.setTheme(tx.db, userId, theme === null ? null : JSON.stringify(theme));
    await sectionChanged(tx, 'theme', userId);
  });
}

// ---- Links ------------------------------------------------------------------------------------

export async function createLink(
  ctx: ServiceContext,
  input: Schemas['CreateSocialLinkRequest'] & PresetId,
): Promise<Schemas['SocialLinkId']> {
  const userId = ownerOf(ctx);
  const fields = {
    id: input.id ?? randomUUID(),
    user_id: userId,
    platform: input.platform,
    display_name: input.displayName,
    handle: input.handle ?? null,
    url: input.url ?? null,
    description: input.description ?? null,
    badge: input.badge ?? null,
    accent_color: input.accentColor ?? null,
    avatar_url: input.avatarUrl ?? null,
    visibility: input.visibility,
    featured: input.featured ?? false,
    created_at: ctx.now,
    updated_at: ctx.now,
  };
  const events = ctx.events.rows(ctx, [
    { type: 'social_profile.changed', area: 'social', data: { id: fields.id, kind: 'link' } },
  ]);
  // One statement (linksRepo.create), unless another social write of the account committed since
  // its snapshot (its next sort_order would be stale): then the transaction below. A keyed request
  // stores its answer under the key in that statement, and otherwise runs again in a transaction.
  const created = await oneStatement(
    ctx,
    (db) => linksRepo.create(db, { ...fields, sort_order: input.sortOrder ?? null }, events),
    { body: { linkId: fields.id } },
  );
  if (created.written) return { linkId: fields.id };
  if (ctx.keyed) throw new StaleAnswer();
  return inTransaction(ctx, async (tx) => {
    await profileRepo.touch(tx.db, userId, tx.now);
    await profileRepo.lock(tx.db, userId); // serialises sort_order assignment
    const row: LinkRow = {
      ...fields,
      sort_order: input.sortOrder ?? (await profileRepo.nextSortOrder(tx.db, 'social_links', userId)),
    };
    await linksRepo.insert(tx.db, row);
    await sectionChanged(tx, 'link', row.id);
    return { linkId: row.id };
  });
}

export async function updateLink(
  ctx: ServiceContext,
  linkId: string,
  input: Schemas['UpdateSocialLinkRequest'],
): Promise<Schemas['SocialLinkId']> {
  const userId = ownerOf(ctx);
  return inTransaction(ctx, async (tx) => {
    const changes: LinkChanges = {
      platform: input.platform,
      display_name: input.displayName,
      handle: input.handle,
      url: input.url,
      description: input.description,
      badge: input.badge,
      accent_color: input.accentColor,
      avatar_url: input.avatarUrl,
      visibility: input.visibility,
      featured: input.featured,
      sort_order: input.sortOrder,
    };
    if (!(await linksRepo.update(tx.db, userId, linkId, changes, tx.now))) throw notFound(LINK_NOT_FOUND);
    await profileRepo.touch(tx.db, userId, tx.now);
    await sectionChanged(tx, 'link', linkId);
    return { linkId };
  });
}

export async function deleteLink(ctx: ServiceContext, linkId: string): Promise<void> {
  const userId = ownerOf(ctx);
  await inTransaction(ctx, async (tx) => {
    if (!(await linksRepo.delete(tx.db, userId, linkId))) throw notFound(LINK_NOT_FOUND);
    await profileRepo.touch(tx.db, userId, tx.now);
    await sectionChanged(tx, 'link', linkId);
  });
}

// ---- Widgets ----------------------------------------------------------------------------------

/** Rules of a config the schema cannot state: badge images are in the caller's gallery, link ids are the caller's, a music member is a live member. */
async function checkConfig(db: Knex, userId: string, config: Config): Promise<void> {
  if (config.kind === 'link_collection' && config.linkIds.length > 0) {
    if ((await linksRepo.countOwned(db, userId, config.linkIds)) !== config.linkIds.length)
      throw badRequest('linkIds must be ids of your own links');
  }
  if (config.kind === 'custom_badge') await checkBadgeImages(db, userId, config.imageUrls);
  if (config.kind === 'music' && config.memberId !== undefined) {
    if (!(await findLiveMember(db, userId, config.memberId)))
      throw badRequest('memberId must be one of your live members');
  }
}

/** The stored config: defaults of optional booleans written out, so reads show them. */
function normalise(config: Config): Config {
  if (config.kind === 'guestbook') return { ...config, allowAnonymous: config.allowAnonymous ?? false };
  if (config.kind === 'poll') return { ...config, allowMultipleSelections: config.allowMultipleSelections ?? false };
  return config;
}

function checkKind(type: string, config: Config): void {
  if (type !== config.kind) throw badRequest('type must equal config.kind');
}

export async function createWidget(
  ctx: ServiceContext,
  input: Schemas['CreateSocialWidgetRequest'],
): Promise<Schemas['SocialWidgetId']> {
  const userId = ownerOf(ctx);
  checkKind(input.type, input.config);
  return inTransaction(ctx, async (tx) => {
    await checkConfig(tx.db, userId, input.config);
    await profileRepo.touch(tx.db, userId, tx.now);
    await profileRepo.lock(tx.db, userId);
    const row: WidgetRow = {
      id: input.id ?? randomUUID(),
      user_id: userId,
      type: input.type,
      title: input.title ?? null,
      config: normalise(input.config) as Record<string, unknown>,
      visibility: input.visibility,
      size: input.size,
      sort_order: input.sortOrder ?? (await profileRepo.nextSortOrder(tx.db, 'social_widgets', userId)),
      pinned: input.pinned ?? false,
      collapsed: input.collapsed ?? false,
      created_at: tx.now,
      updated_at: tx.now,
    };
    if (!(await widgetsRepo.insert(tx.db, row))) throw conflict('A widget with this id already exists');
    await sectionChanged(tx, 'widget', row.id);
    return { widgetId: row.id };
  });
}

/**
 * Ballots after a poll's options change: each chosen option keeps its vote at the new index of the
 * same text; options that disappeared lose theirs; a ballot left empty, or with several options on
 * a poll that is now single-choice, is removed.
 */
function remapBallot(indices: number[], before: string[], after: string[], multiple: boolean): number[] | null {
  const next = [...new Set(indices.map((i) => after.indexOf(before[i] ?? '')).filter((i) => i >= 0))].sort(
    (a, b) => a - b,
  );
  if (next.length === 0 || (!multiple && next.length > 1)) return null;
  return next;
}

async function remapBallots(db: Knex, widgetId: string, before: Config, after: Config, now: number): Promise<void> {
  if (before.kind !== 'poll') return;
  if (after.kind !== 'poll') {
    await pollRepo.deleteBallots(db, widgetId);
    return;
  }
  const multiple = after.allowMultipleSelections ?? false;
  const same = before.options.length === after.options.length && before.options.every((o, i) => o === after.options[i]);
  if (same && (multiple || !(before.allowMultipleSelections ?? false))) return;
  const ballots = await pollRepo.ballots(db, widgetId);
  const kept = ballots
    .map((b) => ({ ...b, option_indices: remapBallot(b.option_indices, before.options, after.options, multiple) }))
    .filter((b): b is typeof b & { option_indices: number[] } => b.option_indices !== null);
  await pollRepo.deleteBallots(db, widgetId);
  if (kept.length > 0) await pollRepo.insertBallots(db, widgetId, kept, now);
}

export async function updateWidget(
  ctx: ServiceContext,
  widgetId: string,
  input: Schemas['UpdateSocialWidgetRequest'],
): Promise<Schemas['SocialWidgetId']> {
  const userId = ownerOf(ctx);
  return inTransaction(ctx, async (tx) => {
    const row = await widgetsRepo.find(tx.db, userId, widgetId, { lock: 'update' });
    if (!row) throw notFound(WIDGET_NOT_FOUND);
    const before = row.config as Config;
    const config = input.config ?? before;
    checkKind(input.type ?? row.type, config);
    const changes: WidgetChanges = {
      title: input.title,
      visibility: input.visibility,
      size: input.size,
      pinned: input.pinned,
      collapsed: input.collapsed,
      sort_order: input.sortOrder,
    };
    if (input.config !== undefined) {
      await checkConfig(tx.db, userId, input.config);
      changes.config = JSON.stringify(normalise(input.config));
      changes.type = input.config.kind;
      await remapBallots(tx.db, widgetId, before, normalise(input.config), tx.now);
      if (before.kind === 'guestbook' && input.config.kind !== 'guestbook')
        await guestbookRepo.deleteOfWidget(tx.db, widgetId);
    }
    await widgetsRepo.update(tx.db, userId, widgetId, changes, tx.now);
    await profileRepo.touch(tx.db, userId, tx.now);
    await sectionChanged(tx, 'widget', widgetId);
    return { widgetId };
  });
}

export async function deleteWidget(ctx: ServiceContext, widgetId: string): Promise<void> {
  const userId = ownerOf(ctx);
  await inTransaction(ctx, async (tx) => {
    // A poll's ballots and a guestbook's messages go with it (on delete cascade).
    if (!(await widgetsRepo.delete(tx.db, userId, widgetId))) throw notFound(WIDGET_NOT_FOUND);
    await profileRepo.touch(tx.db, userId, tx.now);
    await sectionChanged(tx, 'widget', widgetId);
  });
}

// ---- Reorder ----------------------------------------------------------------------------------

async function reorderTable(
  db: Knex,
  table: OrderedTable,
  userId: string,
  ids: string[],
  what: string,
  now: number,
): Promise<void> {
  const existing = await profileRepo.lockOrdered(db, table, userId);
  const given = new Set(ids);
  const permutation =
    given.size === ids.length && ids.length === existing.length && existing.every((r) => given.has(r.id));
  if (!permutation)
    throw badRequest(`${what} must list every one of your ${what === 'linkIds' ? 'links' : 'widgets'} exactly once`);
  if (ids.length === 0) return;
  // One statement: sort_order = position in the array.
  await profileRepo.setOrder(db, table, userId, ids, now);
}

export async function reorder(ctx: ServiceContext, input: Schemas['ReorderSocialRequest']): Promise<void> {
  const userId = ownerOf(ctx);
  await inTransaction(ctx, async (tx) => {
    if (input.linkIds) await reorderTable(tx.db, 'social_links', userId, input.linkIds, 'linkIds', tx.now);
    if (input.widgetIds) await reorderTable(tx.db, 'social_widgets', userId, input.widgetIds, 'widgetIds', tx.now);
    await profileRepo.touch(tx.db, userId, tx.now);
    await sectionChanged(tx, 'order', userId);
  });
}

// ---- Friend view ------------------------------------------------------------------------------

/** The friend's section filtered for the viewer by visibility (ctx is a friend context). */
export async function getFriendSection(ctx: FriendContext): Promise<Schemas['SocialSection']> {
  const ownerId = ownerOf(ctx);
  const mutual = await shareMutualFriend(ctx.db, ownerId, ctx.access.viewerId);
  const { profile, links, widgets } = await profileRepo.loadSection(ctx.db, ownerId, visibleSet(mutual));
  // Badge images are fetched with the viewer's key: their URLs name the owner (GET /social/gallery/{sha256}).
  const viewed = widgets.map((w) =>
    w.type === 'custom_badge'
      ? {
          ...w,
          config: { ...w.config, imageUrls: tagForViewer((w.config as { imageUrls: string[] }).imageUrls, ownerId) },
        }
      : w,
  );
  return toSection(ownerId, profile, links, viewed);
}

/** Spaces, categories and channels: the structure of an account's chat, and bootstrap (docs/messaging.md). */
import { randomUUID } from 'node:crypto';
import type { Knex } from 'knex';
import type { components } from '../../../generated/api.d.ts';
import { inTransaction, ownerOf, type PresetId, type ServiceContext } from '../../core/context.ts';
import { badRequest, notFound, unavailable } from '../../core/errors.ts';
import { copyIcon, dropIcon, iconRefOf, iconUrl, takeIcon } from './icons.ts';
import { jsonValue } from './repo/json.ts';
import {
  type CategoryChanges,
  type CategoryRow,
  type ChannelChanges,
  type ChannelRow,
  type LiveChannelRow,
  type SpaceChanges,
  type SpaceRow,
  structureRepo,
} from './repo/structure.ts';

type Schemas = components['schemas'];
export type Space = Schemas['MessagingSpace'];
export type Category = Schemas['MessagingCategory'];
export type Channel = Schemas['MessagingChannel'];

/** Live spaces per account, categories per space, live channels per space. */
export const LIMITS = { spaces: 100, categories: 200, channels: 500 } as const;

const toSpace = (r: SpaceRow, icon: string | null): Space => ({
  id: r.id,
  name: r.name,
  description: r.description,
  iconUrl: icon,
  iconStorageRef: iconRefOf(r.icon_key),
  sideSystemId: r.side_system_id,
  position: r.position,
  createdAt: r.created_at,
  updatedAt: r.updated_at,
});
const toCategory = (r: CategoryRow): Category => ({
  id: r.id,
  spaceId: r.space_id,
  name: r.name,
  collapsed: r.collapsed,
  position: r.position,
  createdAt: r.created_at,
  updatedAt: r.updated_at,
});
const toChannel = (r: ChannelRow): Channel => ({
  id: r.id,
  spaceId: r.space_id,
  categoryId: r.category_id,
  name: r.name,
  topic: r.topic,
  channelType: r.channel_type,
  position: r.position,
  createdAt: r.created_at,
  updatedAt: r.updated_at,
});

/** A live space of the account (locked for the transaction with `lock`), else 404. */
async function liveSpace(db: Knex, userId: string, id: string, lock = false): Promise<SpaceRow> {
  const row = await structureRepo.findLiveSpace(db, userId, id, lock);
  if (!row) throw notFound('Space not found');
  return row;
}

/** A category whose space is live, else 404. */
async function liveCategory(db: Knex, userId: string, id: string): Promise<CategoryRow> {
  const row = await structureRepo.findLiveCategory(db, userId, id);
  if (!row) throw notFound('Category not found');
  return row;
}

/**
 * A live channel in a live space, else 404 (archived channels and the channels of archived spaces
 * are hidden like unknown ids). `lock` takes the channel row for the transaction: every write that
 * moves the channel's sequence or read state takes it first, so those writes run one at a time.
 */
export async function liveChannel(db: Knex, userId: string, id: string, lock = false): Promise<LiveChannelRow> {
  const row = await structureRepo.findLiveChannel(db, userId, id, lock);
  if (!row) throw notFound('Channel not found');
  return row;
}

async function assertSideSystem(db: Knex, userId: string, id: string | null | undefined): Promise<void> {
  if (id === null || id === undefined) return;
  if (!(await structureRepo.sideSystemIsLive(db, userId, id)))
    throw badRequest('sideSystemId is not a live side system of this account');
}

/** Positions from an exact permutation of `current`, else 400 (nothing changes). */
function assertPermutation(ordered: readonly string[], current: readonly string[], message: string): void {
  const set = new Set(current);
  ordered = ordered.map((id) => id.toLowerCase());
  if (
    ordered.length !== current.length ||
    new Set(ordered).size !== ordered.length ||
    !ordered.every((id) => set.has(id))
  )
    throw badRequest(message);
}

// ---- spaces ----

export async function listSpaces(ctx: ServiceContext): Promise<Space[]> {
  const rows = await structureRepo.listSpaces(ctx.db, ownerOf(ctx));
  return Promise.all(rows.map(async (r) => toSpace(r, await iconUrl(ctx, r.icon_key))));
}

/** An icon given by staging id or by reference, not both; either needs object storage (503). */
function assertIconInput(ctx: ServiceContext, input: { iconStagingId?: string | null; iconStorageRef?: string }): void {
  if (input.iconStagingId !== undefined && input.iconStorageRef !== undefined)
    throw badRequest('Send iconStagingId or iconStorageRef, not both');
  if ((typeof input.iconStagingId === 'string' || input.iconStorageRef !== undefined) && !ctx.storage)
    throw unavailable('Object storage is not configured on this server');
}

/** Runs a space write that may copy an icon; when the write fails, the copy it made is deleted again. */
async function withIconCopy<T>(
  ctx: ServiceContext,
  write: (copy: (ref: string, tx: ServiceContext & { db: Knex.Transaction }) => Promise<string>) => Promise<T>,
): Promise<T> {
  let copied: string | null = null;
  try {
    return await write(async (ref, tx) => (copied = await copyIcon(tx, ref)));
  } catch (err) {
    await dropIcon(ctx, copied);
    throw err;
  }
}

export async function createSpace(
  ctx: ServiceContext,
  input: Schemas['CreateMessagingSpaceRequest'] & PresetId,
): Promise<Space> {
  const userId = ownerOf(ctx);
  assertIconInput(ctx, input);
  return withIconCopy(ctx, (copy) =>
    inTransaction(ctx, async (tx) => {
      // One space creation at a time per account: the limit and the next position hold.
      await structureRepo.lockAccount(tx.db, userId);
      await assertSideSystem(tx.db, userId, input.sideSystemId);
      const { count, next } = await structureRepo.spaceCountAndNext(tx.db, userId);
      if (count >= LIMITS.spaces) throw badRequest(`An account has at most ${LIMITS.spaces} spaces`);
      const row: SpaceRow = {
        id: input.id ?? randomUUID(),
        user_id: userId,
        name: input.name.trim() || input.name,
        description: input.description ?? null,
        side_system_id: input.sideSystemId ?? null,
        icon_key:
          input.iconStagingId !== undefined
            ? await takeIcon(tx, input.iconStagingId)
            : input.iconStorageRef !== undefined
              ? await copy(input.iconStorageRef, tx)
              : null,
        position: next,
        created_at: tx.now,
        updated_at: tx.now,
        archived_at: null,
      };
      await structureRepo.insertSpace(tx.db, row);
      await changed(tx, 'space.created', row.id);
      return toSpace(row, await iconUrl(tx, row.icon_key));
    }),
  );
}

export async function updateSpace(
  ctx: ServiceContext,
  id: string,
  input: Schemas['UpdateMessagingSpaceRequest'],
): Promise<Space> {
  const userId = ownerOf(ctx);
  assertIconInput(ctx, input);
  const { space, replaced } = await withIconCopy(ctx, (copy) =>
    inTransaction(ctx, async (tx) => {
      const before = await liveSpace(tx.db, userId, id, true);
      await assertSideSystem(tx.db, userId, input.sideSystemId);
      const changes: SpaceChanges = {};
      if (input.name !== undefined) changes.name = input.name.trim() || input.name;
      if (input.description !== undefined) changes.description = input.description;
      if (input.sideSystemId !== undefined) changes.side_system_id = input.sideSystemId;
      if (input.iconStagingId !== undefined)
        changes.icon_key = input.iconStagingId === null ? null : await takeIcon(tx, input.iconStagingId);
      // Naming the space's own icon changes nothing; another icon of the account is copied.
      if (input.iconStorageRef !== undefined && input.iconStorageRef.toLowerCase() !== iconRefOf(before.icon_key))
        changes.icon_key = await copy(input.iconStorageRef, tx);
      const row = (await structureRepo.updateSpace(tx.db, userId, id, changes, tx.now))!;
      const replaced = changes.icon_key !== undefined && before.icon_key !== changes.icon_key ? before.icon_key : null;
      await changed(tx, 'space.updated', row.id, { fields: Object.keys(input) });
      return { space: toSpace(row, await iconUrl(tx, row.icon_key)), replaced };
    }),
  );
  // The old icon's object goes once the new reference has committed.
  await dropIcon(ctx, replaced);
  return space;
}

export async function archiveSpace(ctx: ServiceContext, id: string): Promise<void> {
  await inTransaction(ctx, async (tx) => {
    const space = await structureRepo.archiveSpace(tx.db, ownerOf(tx), id, tx.now);
    if (!space) throw notFound('Space not found');
    await changed(tx, 'space.archived', id.toLowerCase());
  });
}

export async function reorderSpaces(ctx: ServiceContext, ordered: string[]): Promise<void> {
  const userId = ownerOf(ctx);
  await inTransaction(ctx, async (tx) => {
    assertPermutation(
      ordered,
      await structureRepo.liveSpaceIdsLocked(tx.db, userId),
      'orderedSpaceIds must list every live space of the account exactly once',
    );
    await structureRepo.applyOrder(tx.db, 'messaging_spaces', userId, ordered, tx.now);
    await changed(tx, 'space.reordered', userId);
  });
}

/** Appends a structure event of the chat (docs/events.md). */
function changed(
  tx: ServiceContext,
  type: Schemas['ChangeEvent']['type'],
  id: string,
  extra: { fields?: string[] } = {},
): Promise<void> {
  return tx.events.emit(tx, { type, area: 'messaging', data: { id, ...extra } });
}

// ---- categories ----

export async function listCategories(ctx: ServiceContext, spaceId: string): Promise<Category[]> {
  const userId = ownerOf(ctx);
  await liveSpace(ctx.db, userId, spaceId);
  return (await structureRepo.listCategories(ctx.db, userId, spaceId)).map(toCategory);
}

export async function createCategory(
  ctx: ServiceContext,
  spaceId: string,
  name: string,
  preset: PresetId = {},
): Promise<Category> {
  const userId = ownerOf(ctx);
  return inTransaction(ctx, async (tx) => {
    await liveSpace(tx.db, userId, spaceId, true);
    const { count, next } = await structureRepo.categoryCountAndNext(tx.db, userId, spaceId);
    if (count >= LIMITS.categories) throw badRequest(`A space has at most ${LIMITS.categories} categories`);
    const row: CategoryRow = {
      id: preset.id ?? randomUUID(),
      user_id: userId,
      space_id: spaceId,
      name: name.trim() || name,
      collapsed: false,
      position: next,
      created_at: tx.now,
      updated_at: tx.now,
    };
    await structureRepo.insertCategory(tx.db, row);
    await changed(tx, 'category.created', row.id);
    return toCategory(row);
  });
}

export async function updateCategory(
  ctx: ServiceContext,
  id: string,
  changes: { name?: string; collapsed?: boolean },
): Promise<Category> {
  const userId = ownerOf(ctx);
  await liveCategory(ctx.db, userId, id);
  const update: CategoryChanges = {};
  if (changes.name !== undefined) update.name = changes.name.trim() || changes.name;
  if (changes.collapsed !== undefined) update.collapsed = changes.collapsed;
  return inTransaction(ctx, async (tx) => {
    const row = await structureRepo.updateCategory(tx.db, userId, id, update, tx.now);
    if (!row) throw notFound('Category not found');
    await changed(tx, 'category.updated', row.id, { fields: Object.keys(changes) });
    return toCategory(row);
  });
}

export async function deleteCategory(ctx: ServiceContext, id: string): Promise<void> {
  const userId = ownerOf(ctx);
  await inTransaction(ctx, async (tx) => {
    const category = await liveCategory(tx.db, userId, id);
    await liveSpace(tx.db, userId, category.space_id, true);
    // Its channels (archived ones too) become uncategorised and keep their place.
    await structureRepo.uncategoriseChannels(tx.db, userId, id, tx.now);
    await structureRepo.deleteCategory(tx.db, userId, id);
    await changed(tx, 'category.deleted', category.id);
  });
}

export async function reorderCategories(ctx: ServiceContext, spaceId: string, ordered: string[]): Promise<void> {
  const userId = ownerOf(ctx);
  await inTransaction(ctx, async (tx) => {
    await liveSpace(tx.db, userId, spaceId, true);
    assertPermutation(
      ordered,
      await structureRepo.categoryIds(tx.db, userId, spaceId),
      'orderedCategoryIds must list every category of the space exactly once',
    );
    await structureRepo.applyOrder(tx.db, 'messaging_categories', userId, ordered, tx.now);
    await changed(tx, 'category.reordered', spaceId.toLowerCase());
  });
}

// ---- channels ----

async function assertCategoryOfSpace(
  db: Knex,
  userId: string,
  spaceId: string,
  categoryId: string | null | undefined,
): Promise<void> {
  if (categoryId === null || categoryId === undefined) return;
  if (!(await structureRepo.categoryOfSpace(db, userId, spaceId, categoryId)))
    throw badRequest('categoryId is not a category of this space');
}

export async function listChannels(ctx: ServiceContext, spaceId: string): Promise<Channel[]> {
  const userId = ownerOf(ctx);
  await liveSpace(ctx.db, userId, spaceId);
  return (await structureRepo.listChannels(ctx.db, userId, spaceId)).map(toChannel);
}

export async function createChannel(
  ctx: ServiceContext,
  spaceId: string,
  input: Schemas['CreateMessagingChannelRequest'] & PresetId,
): Promise<Channel> {
  const userId = ownerOf(ctx);
  return inTransaction(ctx, async (tx) => {
    await liveSpace(tx.db, userId, spaceId, true);
    await assertCategoryOfSpace(tx.db, userId, spaceId, input.categoryId);
    const { count, next } = await structureRepo.channelCountAndNext(tx.db, userId, spaceId);
    if (count >= LIMITS.channels) throw badRequest(`A space has at most ${LIMITS.channels} channels`);
    const row = {
      id: input.id ?? randomUUID(),
      user_id: userId,
      space_id: spaceId,
      category_id: input.categoryId ?? null,
      name: input.name.trim() || input.name,
      topic: input.topic ?? null,
      channel_type: input.channelType ?? 'text',
      position: next,
      created_at: tx.now,
      updated_at: tx.now,
    };
    await structureRepo.insertChannel(tx.db, row);
    await changed(tx, 'channel.created', row.id);
    return toChannel({ ...row, last_seq: 0, read_seq: 0, unread_count: 0, archived_at: null });
  });
}

export async function updateChannel(
  ctx: ServiceContext,
  id: string,
  input: Schemas['UpdateMessagingChannelRequest'],
): Promise<Channel> {
  const userId = ownerOf(ctx);
  await liveChannel(ctx.db, userId, id);
  const changes: ChannelChanges = {};
  if (input.name !== undefined) changes.name = input.name.trim() || input.name;
  if (input.topic !== undefined) changes.topic = input.topic;
  return inTransaction(ctx, async (tx) => {
    const row = await structureRepo.updateChannel(tx.db, userId, id, changes, tx.now);
    if (!row) throw notFound('Channel not found');
    await changed(tx, 'channel.updated', row.id, { fields: Object.keys(input) });
    return toChannel(row);
  });
}

export async function moveChannel(ctx: ServiceContext, id: string, categoryId: string | null): Promise<Channel> {
  const userId = ownerOf(ctx);
  return inTransaction(ctx, async (tx) => {
    const channel = await liveChannel(tx.db, userId, id, true);
    await assertCategoryOfSpace(tx.db, userId, channel.space_id, categoryId);
    const moved = toChannel((await structureRepo.moveChannel(tx.db, userId, id, categoryId, tx.now))!);
    await changed(tx, 'channel.moved', channel.id);
    return moved;
  });
}

export async function archiveChannel(ctx: ServiceContext, id: string): Promise<void> {
  const userId = ownerOf(ctx);
  await inTransaction(ctx, async (tx) => {
    const channel = await liveChannel(tx.db, userId, id);
    await structureRepo.archiveChannel(tx.db, userId, id, tx.now);
    await changed(tx, 'channel.archived', channel.id);
  });
}

export async function reorderChannels(ctx: ServiceContext, spaceId: string, ordered: string[]): Promise<void> {
  const userId = ownerOf(ctx);
  await inTransaction(ctx, async (tx) => {
    await liveSpace(tx.db, userId, spaceId, true);
    assertPermutation(
      ordered,
      await structureRepo.liveChannelIds(tx.db, userId, spaceId),
      'orderedChannelIds must list every live channel of the space exactly once',
    );
    await structureRepo.applyOrder(tx.db, 'messaging_channels', userId, ordered, tx.now);
    await changed(tx, 'channel.reordered', spaceId.toLowerCase());
  });
}

// ---- bootstrap ----

export async function bootstrap(ctx: ServiceContext): Promise<Schemas['MessagingBootstrap']> {
  const userId = ownerOf(ctx);
  const row = await structureRepo.bootstrap(ctx.db, userId);
  const chans = jsonValue<Array<Channel & { unread: number }>>(row?.channels) ?? [];
  const unreadByChannelId: Record<string, number> = {};
  for (const c of chans) unreadByChannelId[c.id] = c.unread;
  const spaceRows = jsonValue<Array<Space & { iconKey: string | null }>>(row?.spaces) ?? [];
  return {
    spaces: await Promise.all(
      spaceRows.map(async ({ iconKey, ...s }) => ({
        ...s,
        iconUrl: await iconUrl(ctx, iconKey),
        iconStorageRef: iconRefOf(iconKey),
      })),
    ),
    categories: jsonValue<Category[]>(row?.categories) ?? [],
    channels: chans.map(({ unread: _unread, ...c }) => c),
    unreadByChannelId,
    lastSpaceId: row?.last_space_id ?? null,
    lastChannelId: row?.last_channel_id ?? null,
  };
}

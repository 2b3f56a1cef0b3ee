/** Messaging preferences: who to post as, the last viewed route, emoji and GIF picker settings (v1). */
import type { Knex } from 'knex';
import type { components } from '../../../generated/api.d.ts';
import { inTransaction, ownerOf, type ServiceContext } from '../../core/context.ts';
import { badRequest, notFound } from '../../core/errors.ts';
import { memberOptions } from './messages.ts';
import { jsonValue } from './repo/json.ts';
import { messagesRepo } from './repo/messages.ts';
import { preferencesRepo } from './repo/preferences.ts';
import { structureRepo } from './repo/structure.ts';

type Schemas = components['schemas'];

const DEFAULT_EMOJI: Schemas['EmojiPreferences'] = { version: 1, skinTone: 'default', recent: [], favorites: [] };
const DEFAULT_GIF: Schemas['GifPreferences'] = { version: 1, contentFilter: 'medium', locale: null, autoplay: true };

/** `channel_key` of a choice for the whole space. */
const SPACE_WIDE = '';

async function spaceExists(db: Knex, userId: string, spaceId: string): Promise<boolean> {
  return (await structureRepo.findLiveSpace(db, userId, spaceId)) !== null;
}

export async function getChatAs(
  ctx: ServiceContext,
  q: { spaceId: string; channelId?: string },
): Promise<Schemas['ChatAsPreference']> {
  const userId = ownerOf(ctx);
  if (!(await spaceExists(ctx.db, userId, q.spaceId))) throw notFound('Space not found');
  if (q.channelId !== undefined && !(await preferencesRepo.channelOfSpace(ctx.db, userId, q.spaceId, q.channelId)))
    throw notFound('Channel not found');
  const keys = q.channelId !== undefined ? [q.channelId, SPACE_WIDE] : [SPACE_WIDE];
  // The member must still be live and not archived; a stale choice reads as none.
  const rows = await preferencesRepo.chatAs(ctx.db, userId, q.spaceId, keys);
  const channel = rows.find((r) => r.channel_key !== SPACE_WIDE);
  const space = rows.find((r) => r.channel_key === SPACE_WIDE);
  const chosen = channel ?? space;
  return {
    spaceId: q.spaceId,
    channelId: q.channelId ?? null,
    memberId: chosen?.member_id ?? null,
    source: channel ? 'channel' : space ? 'space' : 'none',
  };
}

export async function setChatAs(
  ctx: ServiceContext,
  input: Schemas['SetChatAsRequest'],
): Promise<Schemas['ChatAsPreference']> {
  const userId = ownerOf(ctx);
  const channelId = input.channelId ?? null;
  await inTransaction(ctx, async (tx) => {
    if (!(await spaceExists(tx.db, userId, input.spaceId)))
      throw badRequest('spaceId is not a live space of this account');
    if (channelId !== null && !(await preferencesRepo.channelOfSpace(tx.db, userId, input.spaceId, channelId)))
      throw badRequest('channelId is not a live channel of spaceId');
    if (!(await messagesRepo.memberIsLive(tx.db, userId, input.memberId)))
      throw badRequest('memberId is not a live, non-archived member of this account');
    await preferencesRepo.setChatAs(tx.db, userId, input.spaceId, channelId ?? SPACE_WIDE, input.memberId, tx.now);
  });
  return { spaceId: input.spaceId, channelId, memberId: input.memberId, source: channelId ? 'channel' : 'space' };
}

export function chatAsMembers(ctx: ServiceContext): Promise<Schemas['MessagingMemberOption'][]> {
  return memberOptions(ctx.db, ownerOf(ctx), {});
}

// ---- last viewed route ----

export async function getLastViewed(ctx: ServiceContext): Promise<Schemas['LastViewedRoute']> {
  const userId = ownerOf(ctx);
  const row = await preferencesRepo.lastViewed(ctx.db, userId);
  return { lastSpaceId: row?.space_id ?? null, lastChannelId: row?.channel_space_id ? row.channel_id : null };
}

export async function setLastViewed(
  ctx: ServiceContext,
  input: Schemas['LastViewedRoute'],
): Promise<Schemas['LastViewedRoute']> {
  const userId = ownerOf(ctx);
  const { lastSpaceId, lastChannelId } = input;
  if (lastSpaceId !== null && !(await spaceExists(ctx.db, userId, lastSpaceId)))
    throw badRequest('lastSpaceId is not a live space of this account');
  if (lastChannelId !== null) {
    if (lastSpaceId === null) throw badRequest('lastChannelId needs lastSpaceId');
    if (!(await preferencesRepo.channelOfSpace(ctx.db, userId, lastSpaceId, lastChannelId)))
      throw badRequest('lastChannelId is not a live channel of lastSpaceId');
  }
  await preferencesRepo.upsert(ctx.db, userId, ctx.now, { kind: 'route', lastSpaceId, lastChannelId });
  return { lastSpaceId, lastChannelId };
}

// ---- emoji and GIF settings ----

export async function getEmoji(ctx: ServiceContext): Promise<Schemas['EmojiPreferences']> {
  return (
    jsonValue<Schemas['EmojiPreferences']>((await preferencesRepo.settings(ctx.db, ownerOf(ctx)))?.emoji) ??
    DEFAULT_EMOJI
  );
}

export async function setEmoji(
  ctx: ServiceContext,
  input: Schemas['EmojiPreferences'],
): Promise<Schemas['EmojiPreferences']> {
  await preferencesRepo.upsert(ctx.db, ownerOf(ctx), ctx.now, { kind: 'emoji', json: JSON.stringify(input) });
  return input;
}

export async function getGif(ctx: ServiceContext): Promise<Schemas['GifPreferences']> {
  return (
    jsonValue<Schemas['GifPreferences']>((await preferencesRepo.settings(ctx.db, ownerOf(ctx)))?.gif) ?? DEFAULT_GIF
  );
}

export async function setGif(
  ctx: ServiceContext,
  input: Schemas['GifPreferences'],
): Promise<Schemas['GifPreferences']> {
  await preferencesRepo.upsert(ctx.db, ownerOf(ctx), ctx.now, { kind: 'gif', json: JSON.stringify(input) });
  return input;
}

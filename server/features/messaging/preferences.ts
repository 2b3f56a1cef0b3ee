/** Messaging preferences: who to post as, the last viewed route, emoji and GIF picker settings (v1). */
import type { Knex } from 'knex';
import type { components } from '../../../generated/api.d.ts';
import { inTransaction, ownerOf, type ServiceContext } from '../../core/context.ts';
import { badRequest, notFound } from '../../core/errors.ts';
import { memberOptions } from './messages.ts';
import { jsonValue } from './repo.ts';

type Schemas = components['schemas'];

const DEFAULT_EMOJI: Schemas['EmojiPreferences'] = { version: 1, skinTone: 'default', recent: [], favorites: [] };
const DEFAULT_GIF: Schemas['GifPreferences'] = { version: 1, contentFilter: 'medium', locale: null, autoplay: true };

/** `channel_key` of a choice for the whole space. */
const SPACE_WIDE = '';

async function upsertPreferences(
  db: Knex,
  userId: string,
  now: number,
  changes: Record<string, unknown>,
): Promise<void> {
  await db('messaging_preferences')
    .insert({ user_id: userId, updated_at: now, ...changes })
    .onConflict('user_id')
    .merge({ ...changes, updated_at: now });
}

async function preferencesRow(db: Knex, userId: string) {
  return db('messaging_preferences').where({ user_id: userId }).first('emoji', 'gif');
}

// ---- chat as ----

async function spaceExists(db: Knex, userId: string, spaceId: string): Promise<boolean> {
  return Boolean(
    await db('messaging_spaces').where({ id: spaceId, user_id: userId }).whereNull('archived_at').first('id'),
  );
}

async function channelOfSpace(db: Knex, userId: string, spaceId: string, channelId: string): Promise<boolean> {
  return Boolean(
    await db('messaging_channels')
      .where({ id: channelId, user_id: userId, space_id: spaceId })
      .whereNull('archived_at')
      .first('id'),
  );
}

export async function getChatAs(
  ctx: ServiceContext,
  q: { spaceId: string; channelId?: string },
): Promise<Schemas['ChatAsPreference']> {
  const userId = ownerOf(ctx);
  if (!(await spaceExists(ctx.db, userId, q.spaceId))) throw notFound('Space not found');
  if (q.channelId !== undefined && !(await channelOfSpace(ctx.db, userId, q.spaceId, q.channelId)))
    throw notFound('Channel not found');
  const keys = q.channelId !== undefined ? [q.channelId, SPACE_WIDE] : [SPACE_WIDE];
  // The member must still be live and not archived; a stale choice reads as none.
  const rows = (await ctx
    .db('messaging_chat_as as a')
    .join('members as m', 'm.id', 'a.member_id')
    .where({ 'a.user_id': userId, 'a.space_id': q.spaceId })
    .whereIn('a.channel_key', keys)
    .whereNull('m.deleted_at')
    .whereNull('m.archived_at')
    .select('a.channel_key', 'a.member_id')) as Array<{ channel_key: string; member_id: string }>;
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
    if (channelId !== null && !(await channelOfSpace(tx.db, userId, input.spaceId, channelId)))
      throw badRequest('channelId is not a live channel of spaceId');
    const member = await tx
      .db('members')
      .where({ id: input.memberId, user_id: userId })
      .whereNull('deleted_at')
      .whereNull('archived_at')
      .first('id');
    if (!member) throw badRequest('memberId is not a live, non-archived member of this account');
    await tx
      .db('messaging_chat_as')
      .insert({
        user_id: userId,
        space_id: input.spaceId,
        channel_key: channelId ?? SPACE_WIDE,
        member_id: input.memberId,
        updated_at: tx.now,
      })
      .onConflict(['user_id', 'space_id', 'channel_key'])
      .merge(['member_id', 'updated_at']);
  });
  return { spaceId: input.spaceId, channelId, memberId: input.memberId, source: channelId ? 'channel' : 'space' };
}

export function chatAsMembers(ctx: ServiceContext): Promise<Schemas['MessagingMemberOption'][]> {
  return memberOptions(ctx.db, ownerOf(ctx), {});
}

// ---- last viewed route ----

export async function getLastViewed(ctx: ServiceContext): Promise<Schemas['LastViewedRoute']> {
  const userId = ownerOf(ctx);
  const row = (await ctx
    .db('messaging_preferences as p')
    .leftJoin('messaging_spaces as s', function () {
      this.on('s.id', 'p.last_space_id').andOn('s.user_id', 'p.user_id').andOnNull('s.archived_at');
    })
    .leftJoin('messaging_channels as c', function () {
      this.on('c.id', 'p.last_channel_id').andOn('c.user_id', 'p.user_id').andOnNull('c.archived_at');
    })
    .leftJoin('messaging_spaces as cs', function () {
      this.on('cs.id', 'c.space_id').andOnNull('cs.archived_at');
    })
    .where('p.user_id', userId)
    .first('s.id as space_id', 'cs.id as channel_space_id', 'c.id as channel_id')) as
    | { space_id: string | null; channel_space_id: string | null; channel_id: string | null }
    | undefined;
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
    if (!(await channelOfSpace(ctx.db, userId, lastSpaceId, lastChannelId)))
      throw badRequest('lastChannelId is not a live channel of lastSpaceId');
  }
  await upsertPreferences(ctx.db, userId, ctx.now, { last_space_id: lastSpaceId, last_channel_id: lastChannelId });
  return { lastSpaceId, lastChannelId };
}

// ---- emoji and GIF settings ----

export async function getEmoji(ctx: ServiceContext): Promise<Schemas['EmojiPreferences']> {
  return jsonValue<Schemas['EmojiPreferences']>((await preferencesRow(ctx.db, ownerOf(ctx)))?.emoji) ?? DEFAULT_EMOJI;
}

export async function setEmoji(
  ctx: ServiceContext,
  input: Schemas['EmojiPreferences'],
): Promise<Schemas['EmojiPreferences']> {
  await upsertPreferences(ctx.db, ownerOf(ctx), ctx.now, { emoji: JSON.stringify(input) });
  return input;
}

export async function getGif(ctx: ServiceContext): Promise<Schemas['GifPreferences']> {
  return jsonValue<Schemas['GifPreferences']>((await preferencesRow(ctx.db, ownerOf(ctx)))?.gif) ?? DEFAULT_GIF;
}

export async function setGif(
  ctx: ServiceContext,
  input: Schemas['GifPreferences'],
): Promise<Schemas['GifPreferences']> {
  await upsertPreferences(ctx.db, ownerOf(ctx), ctx.now, { gif: JSON.stringify(input) });
  return input;
}

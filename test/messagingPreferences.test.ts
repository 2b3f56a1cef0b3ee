import { describe, expect, it } from 'vitest';
import type { ApiClient } from '../client/index.ts';
import { createMember, UNKNOWN_ID } from './helpers/fixtures.ts';
import { useServer } from './helpers/server.ts';

const server = useServer();

async function setup(api: ApiClient) {
  const s = (await api.POST('/api/v1/messaging/spaces', { body: { name: 'S' } })).data!;
  const c = (
    await api.POST('/api/v1/messaging/spaces/{spaceId}/channels', {
      params: { path: { spaceId: s.id } },
      body: { name: 'c' },
    })
  ).data!;
  return { spaceId: s.id, channelId: c.id };
}

describe('chat as', () => {
  it('space-wide and per-channel choices, fallback, stale members read as none, validation', async () => {
    const { api } = await server.user();
    const other = await server.user();
    const a = await createMember(api, 'Alpha');
    const b = await createMember(api, 'Beta');
    const theirs = await createMember(other.api, 'Theirs');
    const { spaceId, channelId } = await setup(api);
    const get = (query: { spaceId: string; channelId?: string }) =>
      api.GET('/api/v1/messaging/preferences/chat-as', { params: { query } });
    expect((await get({ spaceId })).data).toEqual({ spaceId, channelId: null, memberId: null, source: 'none' });
    expect((await api.PUT('/api/v1/messaging/preferences/chat-as', { body: { spaceId, memberId: a } })).data).toEqual({
      spaceId,
      channelId: null,
      memberId: a,
      source: 'space',
    });
    expect((await get({ spaceId, channelId })).data).toEqual({ spaceId, channelId, memberId: a, source: 'space' });
    await api.PUT('/api/v1/messaging/preferences/chat-as', { body: { spaceId, channelId, memberId: b } });
    expect((await get({ spaceId, channelId })).data).toEqual({ spaceId, channelId, memberId: b, source: 'channel' });
    expect((await get({ spaceId })).data!.memberId).toBe(a);
    await api.DELETE('/api/v1/members/{memberId}', { params: { path: { memberId: b } } });
    expect((await get({ spaceId, channelId })).data).toEqual({ spaceId, channelId, memberId: a, source: 'space' });
    for (const body of [
      { spaceId, memberId: theirs },
      { spaceId, memberId: b },
      { spaceId: UNKNOWN_ID, memberId: a },
      { spaceId, channelId: UNKNOWN_ID, memberId: a },
      { spaceId, memberId: a, extra: 1 },
    ]) {
      const res = await api.PUT('/api/v1/messaging/preferences/chat-as', { body: body as never });
      expect(res.response.status, JSON.stringify(body)).toBe(400);
      expect(JSON.stringify(res.error)).not.toContain(theirs);
    }
    expect((await get({ spaceId: UNKNOWN_ID })).error).toEqual({ code: 'NOT_FOUND', message: 'Space not found' });
    expect((await get({ spaceId, channelId: UNKNOWN_ID })).error).toEqual({
      code: 'NOT_FOUND',
      message: 'Channel not found',
    });
    const members = (await api.GET('/api/v1/messaging/preferences/chat-as-members')).data!;
    expect(members).toEqual([{ memberId: a, name: 'Alpha', displayName: '', avatarUrl: null }]);
  });
});

describe('last viewed route', () => {
  it('stores nullable ids that must be the caller’s live space and one of its channels', async () => {
    const { api } = await server.user();
    const other = await server.user();
    const { spaceId, channelId } = await setup(api);
    const theirs = await setup(other.api);
    const second = await setup(api);
    expect((await api.GET('/api/v1/messaging/preferences/last-viewed-route')).data).toEqual({
      lastSpaceId: null,
      lastChannelId: null,
    });
    expect(
      (
        await api.PUT('/api/v1/messaging/preferences/last-viewed-route', {
          body: { lastSpaceId: spaceId, lastChannelId: channelId },
        })
      ).data,
    ).toEqual({ lastSpaceId: spaceId, lastChannelId: channelId });
    expect((await api.GET('/api/v1/messaging/preferences/last-viewed-route')).data).toEqual({
      lastSpaceId: spaceId,
      lastChannelId: channelId,
    });
    for (const body of [
      { lastSpaceId: theirs.spaceId, lastChannelId: null },
      { lastSpaceId: spaceId, lastChannelId: theirs.channelId },
      { lastSpaceId: spaceId, lastChannelId: second.channelId },
      { lastSpaceId: null, lastChannelId: channelId },
      { lastSpaceId: spaceId },
    ]) {
      const res = await api.PUT('/api/v1/messaging/preferences/last-viewed-route', { body: body as never });
      expect(res.response.status, JSON.stringify(body)).toBe(400);
      expect(JSON.stringify(res.error)).not.toContain(theirs.spaceId);
    }
    await api.DELETE('/api/v1/messaging/spaces/{spaceId}', { params: { path: { spaceId } } });
    expect((await api.GET('/api/v1/messaging/preferences/last-viewed-route')).data).toEqual({
      lastSpaceId: null,
      lastChannelId: null,
    });
    expect(
      (
        await api.PUT('/api/v1/messaging/preferences/last-viewed-route', {
          body: { lastSpaceId: null, lastChannelId: null },
        })
      ).response.status,
    ).toBe(200);
  });
});

describe('emoji and GIF settings', () => {
  it('defaults, full replace, strict v1 schemas', async () => {
    const { api } = await server.user();
    expect((await api.GET('/api/v1/messaging/preferences/emoji')).data).toEqual({
      version: 1,
      skinTone: 'default',
      recent: [],
      favorites: [],
    });
    expect((await api.GET('/api/v1/messaging/preferences/gif')).data).toEqual({
      version: 1,
      contentFilter: 'medium',
      locale: null,
      autoplay: true,
    });
    const emoji = { version: 1 as const, skinTone: 'medium' as const, recent: ['👍'], favorites: [':x:'] };
    expect((await api.PUT('/api/v1/messaging/preferences/emoji', { body: emoji })).data).toEqual(emoji);
    expect((await api.GET('/api/v1/messaging/preferences/emoji')).data).toEqual(emoji);
    const gif = { version: 1 as const, contentFilter: 'high' as const, locale: 'de_DE', autoplay: false };
    expect((await api.PUT('/api/v1/messaging/preferences/gif', { body: gif })).data).toEqual(gif);
    expect((await api.GET('/api/v1/messaging/preferences/gif')).data).toEqual(gif);
    expect((await api.GET('/api/v1/messaging/preferences/emoji')).data).toEqual(emoji);
    for (const body of [
      { ...emoji, version: 2 },
      { ...emoji, skinTone: 'blue' },
      { ...emoji, extra: true },
      { ...emoji, recent: Array(51).fill('a') },
      { ...emoji, favorites: ['a', 'a'] },
      { version: 1, skinTone: 'default', recent: [] },
    ]) {
      expect(
        (await api.PUT('/api/v1/messaging/preferences/emoji', { body: body as never })).response.status,
        JSON.stringify(body),
      ).toBe(400);
    }
    for (const body of [
      { ...gif, contentFilter: 'none' },
      { ...gif, locale: 'english' },
      { ...gif, provider: 'tenor' },
    ]) {
      expect(
        (await api.PUT('/api/v1/messaging/preferences/gif', { body: body as never })).response.status,
        JSON.stringify(body),
      ).toBe(400);
    }
  });
});

import { describe, expect, it } from 'vitest';
import type { ApiClient, components } from '../client/index.ts';
import { captureStatements } from './helpers/plans.ts';
import { createSide, UNKNOWN_ID } from './helpers/fixtures.ts';
import { useServer } from './helpers/server.ts';

let now = 1_800_000_000_000;
const server = useServer({ clock: () => now });

async function space(api: ApiClient, name = 'Space', extra: Record<string, unknown> = {}) {
  const res = await api.POST('/api/v1/messaging/spaces', { body: { name, ...extra } });
  expect(res.response.status, JSON.stringify(res.error)).toBe(201);
  return res.data!;
}
async function category(api: ApiClient, spaceId: string, name = 'Cat') {
  const res = await api.POST('/api/v1/messaging/spaces/{spaceId}/categories', {
    params: { path: { spaceId } },
    body: { name },
  });
  expect(res.response.status, JSON.stringify(res.error)).toBe(201);
  return res.data!;
}
async function channel(
  api: ApiClient,
  spaceId: string,
  body: { name?: string; categoryId?: string | null; topic?: string; channelType?: 'text' | 'media' } = {},
) {
  const res = await api.POST('/api/v1/messaging/spaces/{spaceId}/channels', {
    params: { path: { spaceId } },
    body: { name: 'chan', ...body },
  });
  expect(res.response.status, JSON.stringify(res.error)).toBe(201);
  return res.data!;
}
const sp = (spaceId: string) => ({ params: { path: { spaceId } } });
const ch = (channelId: string) => ({ params: { path: { channelId } } });
const ca = (categoryId: string) => ({ params: { path: { categoryId } } });

describe('spaces', () => {
  it('create (with and without a side system), list in order, update, archive', async () => {
    const { api } = await server.user();
    const side = await createSide(api, 'Other side');
    const a = await space(api, 'Home', { description: 'Flat' });
    expect(a).toEqual({
      id: a.id,
      name: 'Home',
      description: 'Flat',
      iconUrl: null,
      iconStorageRef: null,
      sideSystemId: null,
      position: 0,
      createdAt: now,
      updatedAt: now,
    });
    const b = await space(api, 'Work', { sideSystemId: side });
    expect(b.sideSystemId).toBe(side);
    expect(b.position).toBe(1);
    expect((await api.GET('/api/v1/messaging/spaces')).data!.map((s) => s.id)).toEqual([a.id, b.id]);
    now += 5;
    const upd = await api.PATCH('/api/v1/messaging/spaces/{spaceId}', {
      ...sp(b.id),
      body: { name: 'Job', sideSystemId: null, description: null },
    });
    expect(upd.data).toEqual({ ...b, name: 'Job', sideSystemId: null, description: null, updatedAt: now });
    expect((await api.DELETE('/api/v1/messaging/spaces/{spaceId}', sp(a.id))).response.status).toBe(204);
    expect((await api.GET('/api/v1/messaging/spaces')).data!.map((s) => s.id)).toEqual([b.id]);
    // Archived: 404 everywhere by id.
    expect((await api.DELETE('/api/v1/messaging/spaces/{spaceId}', sp(a.id))).response.status).toBe(404);
    expect(
      (await api.PATCH('/api/v1/messaging/spaces/{spaceId}', { ...sp(a.id), body: { name: 'x' } })).response.status,
    ).toBe(404);
    expect((await api.GET('/api/v1/messaging/spaces/{spaceId}/channels', sp(a.id))).response.status).toBe(404);
    expect((await api.GET('/api/v1/messaging/spaces/{spaceId}/categories', sp(a.id))).response.status).toBe(404);
  });

  it('sideSystemId must be a live side system of the caller; strict bodies; name limits', async () => {
    const { api } = await server.user();
    const other = await server.user();
    const theirSide = await createSide(other.api);
    const mySide = await createSide(api);
    await api.DELETE('/api/v1/systems/side-systems/{sideSystemId}', { params: { path: { sideSystemId: mySide } } });
    for (const body of [
      { name: 'x', sideSystemId: theirSide },
      { name: 'x', sideSystemId: UNKNOWN_ID },
      { name: 'x', sideSystemId: mySide },
      { name: '' },
      { name: 'x'.repeat(81) },
      { name: 'x', iconStagingId: UNKNOWN_ID },
      { name: 'x', description: 'd'.repeat(501) },
    ]) {
      const res = await api.POST('/api/v1/messaging/spaces', { body: body as never });
      expect(res.response.status, JSON.stringify(body)).toBe(400);
      expect(JSON.stringify(res.error)).not.toContain(theirSide);
    }
    expect((await api.GET('/api/v1/messaging/spaces')).data).toEqual([]);
    const s = await space(api);
    expect(
      (await api.PATCH('/api/v1/messaging/spaces/{spaceId}', { ...sp(s.id), body: {} as never })).response.status,
    ).toBe(400);
  });

  it('reorder takes an exact permutation, else 400 and nothing changes', async () => {
    const { api } = await server.user();
    const other = await server.user();
    const [a, b, c] = [await space(api, 'a'), await space(api, 'b'), await space(api, 'c')];
    const theirs = await space(other.api);
    await api.DELETE('/api/v1/messaging/spaces/{spaceId}', sp(c.id));
    for (const ids of [[a.id], [a.id, b.id, c.id], [a.id, theirs.id], [a.id, a.id], [b.id, a.id, UNKNOWN_ID]]) {
      expect(
        (await api.POST('/api/v1/messaging/spaces/reorder', { body: { orderedSpaceIds: ids } })).response.status,
        JSON.stringify(ids),
      ).toBe(400);
    }
    expect((await api.GET('/api/v1/messaging/spaces')).data!.map((s) => s.id)).toEqual([a.id, b.id]);
    expect(
      (await api.POST('/api/v1/messaging/spaces/reorder', { body: { orderedSpaceIds: [b.id.toUpperCase(), a.id] } }))
        .response.status,
    ).toBe(204);
    expect((await api.GET('/api/v1/messaging/spaces')).data!.map((s) => [s.id, s.position])).toEqual([
      [b.id, 0],
      [a.id, 1],
    ]);
    expect((await other.api.GET('/api/v1/messaging/spaces')).data!.map((s) => s.id)).toEqual([theirs.id]);
  });

  it("another account's space is 404 and never shown", async () => {
    const { api } = await server.user();
    const other = await server.user();
    const theirs = await space(other.api, 'Secret space');
    for (const res of [
      await api.PATCH('/api/v1/messaging/spaces/{spaceId}', { ...sp(theirs.id), body: { name: 'x' } }),
      await api.DELETE('/api/v1/messaging/spaces/{spaceId}', sp(theirs.id)),
      await api.GET('/api/v1/messaging/spaces/{spaceId}/channels', sp(theirs.id)),
      await api.POST('/api/v1/messaging/spaces/{spaceId}/channels', { ...sp(theirs.id), body: { name: 'x' } }),
      await api.POST('/api/v1/messaging/spaces/{spaceId}/categories', { ...sp(theirs.id), body: { name: 'x' } }),
      await api.POST('/api/v1/messaging/spaces/{spaceId}/categories/reorder', {
        ...sp(theirs.id),
        body: { orderedCategoryIds: [] },
      }),
      await api.POST('/api/v1/messaging/spaces/{spaceId}/channels/reorder', {
        ...sp(theirs.id),
        body: { orderedChannelIds: [] },
      }),
    ]) {
      expect(res.response.status).toBe(404);
      expect(res.error).toEqual({ code: 'NOT_FOUND', message: 'Space not found' });
    }
    const mine = await api.GET('/api/v1/messaging/spaces');
    expect(JSON.stringify(mine.data)).not.toContain(theirs.id);
    expect(JSON.stringify((await api.GET('/api/v1/messaging/bootstrap')).data)).not.toContain(theirs.id);
  });
});

describe('categories and channels', () => {
  it('create, rename, collapse, reorder; delete moves channels to uncategorised', async () => {
    const { api } = await server.user();
    const s = await space(api);
    const c1 = await category(api, s.id, 'One');
    const c2 = await category(api, s.id, 'Two');
    expect(c1).toEqual({
      id: c1.id,
      spaceId: s.id,
      name: 'One',
      collapsed: false,
      position: 0,
      createdAt: now,
      updatedAt: now,
    });
    expect(
      (await api.PATCH('/api/v1/messaging/categories/{categoryId}', { ...ca(c1.id), body: { name: 'Uno' } })).data!
        .name,
    ).toBe('Uno');
    expect(
      (
        await api.PATCH('/api/v1/messaging/categories/{categoryId}/collapsed', {
          ...ca(c1.id),
          body: { collapsed: true },
        })
      ).data!.collapsed,
    ).toBe(true);
    for (const ids of [[c1.id], [c1.id, c1.id], [c2.id, c1.id, UNKNOWN_ID]]) {
      expect(
        (
          await api.POST('/api/v1/messaging/spaces/{spaceId}/categories/reorder', {
            ...sp(s.id),
            body: { orderedCategoryIds: ids },
          })
        ).response.status,
      ).toBe(400);
    }
    expect(
      (
        await api.POST('/api/v1/messaging/spaces/{spaceId}/categories/reorder', {
          ...sp(s.id),
          body: { orderedCategoryIds: [c2.id, c1.id] },
        })
      ).response.status,
    ).toBe(204);
    expect(
      (await api.GET('/api/v1/messaging/spaces/{spaceId}/categories', sp(s.id))).data!.map((c) => [
        c.name,
        c.position,
        c.collapsed,
      ]),
    ).toEqual([
      ['Two', 0, false],
      ['Uno', 1, true],
    ]);

    const x = await channel(api, s.id, { name: 'x', categoryId: c1.id, topic: 'T' });
    const y = await channel(api, s.id, { name: 'y', channelType: 'media' });
    expect(x).toEqual({
      id: x.id,
      spaceId: s.id,
      categoryId: c1.id,
      name: 'x',
      topic: 'T',
      channelType: 'text',
      position: 0,
      createdAt: now,
      updatedAt: now,
    });
    expect(y.categoryId).toBeNull();
    expect(y.channelType).toBe('media');
    expect((await api.DELETE('/api/v1/messaging/categories/{categoryId}', ca(c1.id))).response.status).toBe(204);
    expect((await api.DELETE('/api/v1/messaging/categories/{categoryId}', ca(c1.id))).response.status).toBe(404);
    expect(
      (await api.GET('/api/v1/messaging/spaces/{spaceId}/channels', sp(s.id))).data!.map((c) => [
        c.name,
        c.categoryId,
        c.position,
      ]),
    ).toEqual([
      ['x', null, 0],
      ['y', null, 1],
    ]);
    expect((await api.GET('/api/v1/messaging/spaces/{spaceId}/categories', sp(s.id))).data!.map((c) => c.id)).toEqual([
      c2.id,
    ]);
  });

  it('channel: update, move within the space only, reorder, archive (404 by id afterwards)', async () => {
    const { api } = await server.user();
    const s = await space(api);
    const s2 = await space(api, 'Other');
    const c = await category(api, s.id);
    const foreignCat = await category(api, s2.id);
    const a = await channel(api, s.id, { name: 'a' });
    const b = await channel(api, s.id, { name: 'b' });
    expect(
      (
        await api.POST('/api/v1/messaging/spaces/{spaceId}/channels', {
          ...sp(s.id),
          body: { name: 'z', categoryId: foreignCat.id },
        })
      ).response.status,
    ).toBe(400);
    const upd = await api.PATCH('/api/v1/messaging/channels/{channelId}', {
      ...ch(a.id),
      body: { name: 'aa', topic: null },
    });
    expect([upd.data!.name, upd.data!.topic]).toEqual(['aa', null]);
    expect(
      (
        await api.PATCH('/api/v1/messaging/channels/{channelId}/move', {
          ...ch(a.id),
          body: { categoryId: foreignCat.id },
        })
      ).response.status,
    ).toBe(400);
    expect(
      (
        await api.PATCH('/api/v1/messaging/channels/{channelId}/move', {
          ...ch(a.id),
          body: { categoryId: UNKNOWN_ID },
        })
      ).response.status,
    ).toBe(400);
    expect(
      (await api.PATCH('/api/v1/messaging/channels/{channelId}/move', { ...ch(a.id), body: { categoryId: c.id } }))
        .data!.categoryId,
    ).toBe(c.id);
    expect(
      (await api.PATCH('/api/v1/messaging/channels/{channelId}/move', { ...ch(a.id), body: { categoryId: null } }))
        .data!.categoryId,
    ).toBeNull();
    expect(
      (
        await api.POST('/api/v1/messaging/spaces/{spaceId}/channels/reorder', {
          ...sp(s.id),
          body: { orderedChannelIds: [b.id] },
        })
      ).response.status,
    ).toBe(400);
    expect(
      (
        await api.POST('/api/v1/messaging/spaces/{spaceId}/channels/reorder', {
          ...sp(s.id),
          body: { orderedChannelIds: [b.id, a.id] },
        })
      ).response.status,
    ).toBe(204);
    expect((await api.GET('/api/v1/messaging/spaces/{spaceId}/channels', sp(s.id))).data!.map((x) => x.id)).toEqual([
      b.id,
      a.id,
    ]);
    expect((await api.DELETE('/api/v1/messaging/channels/{channelId}', ch(b.id))).response.status).toBe(204);
    for (const res of [
      await api.DELETE('/api/v1/messaging/channels/{channelId}', ch(b.id)),
      await api.PATCH('/api/v1/messaging/channels/{channelId}', { ...ch(b.id), body: { name: 'q' } }),
      await api.GET('/api/v1/messaging/channels/{channelId}/messages', ch(b.id)),
      await api.GET('/api/v1/messaging/channels/{channelId}/pins', ch(b.id)),
    ])
      expect(res.error).toEqual({ code: 'NOT_FOUND', message: 'Channel not found' });
    // The archived channel leaves the permutation.
    expect(
      (
        await api.POST('/api/v1/messaging/spaces/{spaceId}/channels/reorder', {
          ...sp(s.id),
          body: { orderedChannelIds: [a.id] },
        })
      ).response.status,
    ).toBe(204);
    // A channel of an archived space is 404 too.
    await api.DELETE('/api/v1/messaging/spaces/{spaceId}', sp(s.id));
    expect((await api.GET('/api/v1/messaging/channels/{channelId}/messages', ch(a.id))).response.status).toBe(404);
  });

  it("another account's category and channel are 404", async () => {
    const { api } = await server.user();
    const other = await server.user();
    const s = await space(other.api);
    const c = await category(other.api, s.id);
    const x = await channel(other.api, s.id);
    const mine = await space(api);
    for (const res of [
      await api.PATCH('/api/v1/messaging/categories/{categoryId}', { ...ca(c.id), body: { name: 'x' } }),
      await api.PATCH('/api/v1/messaging/categories/{categoryId}/collapsed', {
        ...ca(c.id),
        body: { collapsed: true },
      }),
      await api.DELETE('/api/v1/messaging/categories/{categoryId}', ca(c.id)),
    ])
      expect(res.error).toEqual({ code: 'NOT_FOUND', message: 'Category not found' });
    for (const res of [
      await api.PATCH('/api/v1/messaging/channels/{channelId}', { ...ch(x.id), body: { name: 'x' } }),
      await api.PATCH('/api/v1/messaging/channels/{channelId}/move', { ...ch(x.id), body: { categoryId: null } }),
      await api.DELETE('/api/v1/messaging/channels/{channelId}', ch(x.id)),
    ])
      expect(res.error).toEqual({ code: 'NOT_FOUND', message: 'Channel not found' });
    const res = await api.POST('/api/v1/messaging/spaces/{spaceId}/channels', {
      ...sp(mine.id),
      body: { name: 'x', categoryId: c.id },
    });
    expect(res.response.status).toBe(400);
    expect(JSON.stringify(res.error)).not.toContain(c.id);
  });
});

describe('bootstrap', () => {
  it('spaces, categories, channels, unread counts and the last viewed route in one statement', async () => {
    const { api } = await server.user();
    const empty = await api.GET('/api/v1/messaging/bootstrap');
    expect(empty.data).toEqual({
      spaces: [],
      categories: [],
      channels: [],
      unreadByChannelId: {},
      lastSpaceId: null,
      lastChannelId: null,
    });
    const s1 = await space(api, 'one');
    const s2 = await space(api, 'two');
    const archived = await space(api, 'gone');
    const cat = await category(api, s2.id);
    const chans = [];
    for (let i = 0; i < 30; i++)
      chans.push(
        await channel(api, i % 2 ? s1.id : s2.id, {
          name: `c${i}`,
          ...(i % 3 === 0 && i % 2 === 0 ? { categoryId: cat.id } : {}),
        }),
      );
    await channel(api, archived.id, { name: 'hidden' });
    await api.DELETE('/api/v1/messaging/spaces/{spaceId}', sp(archived.id));
    await api.DELETE('/api/v1/messaging/channels/{channelId}', ch(chans[0]!.id));
    await api.PUT('/api/v1/messaging/preferences/last-viewed-route', {
      body: { lastSpaceId: s1.id, lastChannelId: chans[1]!.id },
    });
    await api.GET('/api/v1/messaging/bootstrap'); // warm the key cache
    let body: components['schemas']['MessagingBootstrap'] | undefined;
    const statements = await captureStatements(server.deps.db.knex, /messaging_/, async () => {
      body = (await api.GET('/api/v1/messaging/bootstrap')).data;
    });
    expect(statements).toHaveLength(1);
    expect(body!.spaces.map((s) => s.id)).toEqual([s1.id, s2.id]);
    expect(body!.categories.map((c) => c.id)).toEqual([cat.id]);
    const live = chans.slice(1);
    const expected = [...live.filter((_, i) => (i + 1) % 2 === 1), ...live.filter((_, i) => (i + 1) % 2 === 0)];
    expect(body!.channels).toEqual(expected);
    expect(body!.unreadByChannelId).toEqual(Object.fromEntries(live.map((c) => [c.id, 0])));
    expect([body!.lastSpaceId, body!.lastChannelId]).toEqual([s1.id, chans[1]!.id]);
    expect(JSON.stringify(body)).not.toContain(archived.id);
    // The last viewed channel archived: null.
    await api.DELETE('/api/v1/messaging/channels/{channelId}', ch(chans[1]!.id));
    const after = (await api.GET('/api/v1/messaging/bootstrap')).data!;
    expect([after.lastSpaceId, after.lastChannelId]).toEqual([s1.id, null]);
  });
});

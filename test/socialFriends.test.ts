import { describe, expect, it } from 'vitest';
import { UNKNOWN_ID } from './helpers/fixtures.ts';
import { befriend, expectNoneOf, relate, RELATIONSHIPS } from './helpers/friends.ts';
import { useServer, type TestUser } from './helpers/server.ts';

const server = useServer();
const VISIBILITIES = ['public', 'logged_in', 'friends_only', 'mutuals_only', 'private'] as const;

/** One link and one widget per visibility, each with a recognisable name. */
async function plant(owner: TestUser): Promise<Record<string, { link: string; widget: string }>> {
  const out: Record<string, { link: string; widget: string }> = {};
  for (const v of VISIBILITIES) {
    const link = (
      await owner.api.POST('/api/v1/social/links', {
        body: { platform: 'custom', displayName: `link-${v}`, visibility: v } as never,
      })
    ).data!.linkId;
    const widget = (
      await owner.api.POST('/api/v1/social/widgets', {
        body: {
          type: 'status',
          config: { kind: 'status', statusText: `widget-${v}` },
          visibility: v,
          size: 'small',
        } as never,
      })
    ).data!.widgetId;
    out[v] = { link, widget };
  }
  await owner.api.PATCH('/api/v1/social', { body: { theme: { accentColor: '#123456' } } });
  return out;
}

const friendSocial = (viewer: TestUser, owner: TestUser) =>
  viewer.api.GET('/api/v1/friends/{friendUserId}/social', { params: { path: { friendUserId: owner.userId } } });

describe('GET /friends/{friendUserId}/social', () => {
  it('relationship matrix: only an accepted friendship sees the section; every other case is the same 404 with nothing leaked', async () => {
    for (const relationship of RELATIONSHIPS) {
      const owner = await server.user();
      const viewer = await server.user();
      const planted = await plant(owner);
      await relate(owner, viewer, relationship);
      const res = await friendSocial(viewer, owner);
      if (relationship === 'accepted') {
        expect(res.response.status, relationship).toBe(200);
        continue;
      }
      expect(res.response.status, relationship).toBe(404);
      expect(res.error, relationship).toEqual({ code: 'NOT_FOUND', message: 'Friend not found' });
      expectNoneOf(
        res.error,
        Object.values(planted)
          .flatMap((p) => [p.link, p.widget])
          .concat(['link-', 'widget-', '#123456']),
      );
    }
    const u = await server.user();
    const unknown = await u.api.GET('/api/v1/friends/{friendUserId}/social', {
      params: { path: { friendUserId: UNKNOWN_ID } },
    });
    expect(unknown.error).toEqual({ code: 'NOT_FOUND', message: 'Friend not found' });
    expect(
      (await u.api.GET('/api/v1/friends/{friendUserId}/social', { params: { path: { friendUserId: u.userId } } }))
        .response.status,
    ).toBe(404);
  });

  it('an accepted friend sees public, logged_in and friends_only; mutuals_only only with a mutual friend; private never', async () => {
    const owner = await server.user();
    const viewer = await server.user();
    const planted = await plant(owner);
    await befriend(owner, viewer);
    const seen = (body: unknown) => {
      const b = body as { links: Array<{ id: string }>; widgets: Array<{ id: string }> };
      return { links: b.links.map((l) => l.id), widgets: b.widgets.map((w) => w.id) };
    };
    const plain = await friendSocial(viewer, owner);
    expect(plain.data).toMatchObject({ userId: owner.userId, musicConnections: [], theme: { accentColor: '#123456' } });
    const base = ['public', 'logged_in', 'friends_only'] as const;
    expect(seen(plain.data)).toEqual({
      links: base.map((v) => planted[v]!.link),
      widgets: base.map((v) => planted[v]!.widget),
    });
    expectNoneOf(plain.data, [
      planted.mutuals_only!.link,
      planted.mutuals_only!.widget,
      planted.private!.link,
      planted.private!.widget,
      'link-private',
      'widget-private',
      'link-mutuals_only',
      'widget-mutuals_only',
    ]);

    // A third account friends with only one of them is not a mutual friend; pending is not enough either.
    const third = await server.user();
    await befriend(owner, third);
    await relate(viewer, third, 'pending_outgoing');
    expect(seen((await friendSocial(viewer, owner)).data).links).toHaveLength(3);
    // Accepted on both sides: now mutual.
    const fourth = await server.user();
    await befriend(owner, fourth);
    await befriend(viewer, fourth);
    const mutual = await friendSocial(viewer, owner);
    const withMutual = [...base, 'mutuals_only'] as const;
    expect(seen(mutual.data)).toEqual({
      links: withMutual.map((v) => planted[v]!.link),
      widgets: withMutual.map((v) => planted[v]!.widget),
    });
    expectNoneOf(mutual.data, [planted.private!.link, planted.private!.widget, 'link-private', 'widget-private']);
    // The mutual friend blocks the viewer: no longer mutual.
    expect(
      (
        await fourth.api.POST('/api/v1/friends/{friendUserId}/block', {
          params: { path: { friendUserId: viewer.userId } },
        })
      ).response.status,
    ).toBe(204);
    expect(seen((await friendSocial(viewer, owner)).data).links).toHaveLength(3);
  });

  it('a block either way after friendship hides the section (404)', async () => {
    for (const relationship of ['blocked_by_owner', 'blocked_by_viewer'] as const) {
      const owner = await server.user();
      const viewer = await server.user();
      await plant(owner);
      await relate(owner, viewer, relationship);
      expect((await friendSocial(viewer, owner)).response.status).toBe(404);
    }
  });
});

import { describe, expect, it } from 'vitest';
import { UNKNOWN_ID } from './helpers/fixtures.ts';
import { useServer, type TestUser } from './helpers/server.ts';

const server = useServer();

async function register(u: TestUser, body: Record<string, unknown>): Promise<number> {
  return (
    await server.admin.POST('/admin/v1/accounts/{userId}/identities', {
      params: { path: { userId: u.userId } },
      body: body as never,
    })
  ).response.status;
}

const sync = (u: TestUser) => u.api.POST('/api/v1/social/sync-oauth');

describe('sync-oauth with operator-registered identities', () => {
  it('inserts missing platform links (private), updates avatar, handle and url of existing ones; twice inserts nothing', async () => {
    const u = await server.user();
    expect((await sync(u)).data).toEqual({ inserted: 0, updated: 0 });
    const existing = (
      await u.api.POST('/api/v1/social/links', {
        body: { platform: 'github', displayName: 'My code', handle: 'old', visibility: 'public' } as never,
      })
    ).data!.linkId;
    expect(
      await register(u, {
        provider: 'github',
        externalUserId: '1',
        handle: 'alex-codes',
        url: 'https://github.com/alex-codes',
        avatarUrl: 'https://a.example.org/1.png',
      }),
    ).toBe(204);
    expect(
      await register(u, {
        provider: 'twitch',
        externalUserId: '2',
        handle: 'alexplays',
        url: 'https://twitch.tv/alexplays',
      }),
    ).toBe(204);
    const first = await sync(u);
    expect(first.response.status).toBe(200);
    expect(first.data).toEqual({ inserted: 1, updated: 1 });
    const links = (await u.api.GET('/api/v1/social')).data!.links;
    expect(links.find((l) => l.id === existing)).toMatchObject({
      displayName: 'My code',
      handle: 'alex-codes',
      url: 'https://github.com/alex-codes',
      avatarUrl: 'https://a.example.org/1.png',
      visibility: 'public',
    });
    expect(links.find((l) => l.platform === 'twitch')).toMatchObject({
      displayName: 'alexplays',
      handle: 'alexplays',
      url: 'https://twitch.tv/alexplays',
      avatarUrl: null,
      visibility: 'private',
      featured: false,
      sortOrder: 1,
    });
    expect((await sync(u)).data).toEqual({ inserted: 0, updated: 0 });
    expect((await u.api.GET('/api/v1/social')).data!.links).toHaveLength(2);
    // Re-registering a provider replaces it; the next sync updates.
    expect(await register(u, { provider: 'twitch', externalUserId: '2', handle: 'alexstreams' })).toBe(204);
    expect((await sync(u)).data).toEqual({ inserted: 0, updated: 1 });
    expect((await u.api.GET('/api/v1/social')).data!.links.find((l) => l.platform === 'twitch')).toMatchObject({
      handle: 'alexstreams',
      url: null,
    });
    // Another account's identities are not this one's.
    const other = await server.user();
    expect((await sync(other)).data).toEqual({ inserted: 0, updated: 0 });
  });

  it('registration validates the provider and fields; unknown account 404; needs the admin token; sync needs social read_write', async () => {
    const u = await server.user();
    for (const body of [
      { provider: 'spotify', externalUserId: '1' },
      { provider: 'github' },
      { provider: 'github', externalUserId: '' },
      { provider: 'github', externalUserId: 'x'.repeat(129) },
      { provider: 'github', externalUserId: '1', url: 'ftp://x' },
      { provider: 'github', externalUserId: '1', handle: 'x'.repeat(121) },
      { provider: 'github', externalUserId: '1', extra: 1 },
    ]) {
      expect(await register(u, body), JSON.stringify(body)).toBe(400);
    }
    expect(await register(u, { provider: 'github', externalUserId: 'x'.repeat(128), handle: 'x'.repeat(120) })).toBe(
      204,
    );
    const unknown = await server.admin.POST('/admin/v1/accounts/{userId}/identities', {
      params: { path: { userId: UNKNOWN_ID } },
      body: { provider: 'github', externalUserId: '1' },
    });
    expect(unknown.response.status).toBe(404);
    const asUser = await u.api.POST('/admin/v1/accounts/{userId}/identities', {
      params: { path: { userId: u.userId } },
      body: { provider: 'github', externalUserId: '1' },
    });
    expect(asUser.response.status).toBe(401);
    const reader = await server.user({ scopes: { social: 'read' } });
    expect((await sync(reader)).response.status).toBe(403);
  });
});

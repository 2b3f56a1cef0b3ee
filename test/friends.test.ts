/**
 * Friendships (the 14 Friends routes), the friend-facing account profile: requests, accepts,
 * revokes, blocks and their 409s and 404s, the lists with their privacy masking, suggestions, the
 * profile card over the relationship matrix, and search over a friend's shared content.
 * Privacy buckets are set up straight in the tables here (their routes are another area's).
 */
import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { contentLevels, forFriend, mergeMax, permissionMap } from '../server/access/index.ts';
import type { PermissionGroup, PermissionLevel } from '../server/core/context.ts';
import { createEntry, createFolder, createGroup, createMember, UNKNOWN_ID } from './helpers/fixtures.ts';
import { captureStatements, explain, planNodes } from './helpers/plans.ts';
import { bearer, jsonHeaders, useServer, type TestUser } from './helpers/server.ts';

let now = 1_800_000_000_000;
const server = useServer({ clock: () => now });
const knex = () => server.deps.db.knex;

const id = (friendUserId: string) => ({ params: { path: { friendUserId } } });

async function request(from: TestUser, to: TestUser | string): Promise<number> {
  const target = typeof to === 'string' ? to : to.userId;
  return (await from.api.POST('/api/v1/friends/{friendUserId}/request', id(target))).response.status;
}
async function accept(by: TestUser, requester: TestUser | string): Promise<number> {
  const requesterUserId = typeof requester === 'string' ? requester : requester.userId;
  return (
    await by.api.POST('/api/v1/friends/requests/{requesterUserId}/accept', { params: { path: { requesterUserId } } })
  ).response.status;
}
async function revoke(by: TestUser, other: TestUser | string): Promise<number> {
  return (
    await by.api.POST('/api/v1/friends/{friendUserId}/revoke', id(typeof other === 'string' ? other : other.userId))
  ).response.status;
}
async function block(by: TestUser, other: TestUser | string, reason?: string): Promise<number> {
  const res = await by.api.POST('/api/v1/friends/{friendUserId}/block', {
    ...id(typeof other === 'string' ? other : other.userId),
    ...(reason !== undefined ? { body: { reason } } : {}),
  });
  return res.response.status;
}
async function befriend(a: TestUser, b: TestUser): Promise<void> {
  expect(await request(a, b)).toBe(204);
  expect(await accept(b, a)).toBe(204);
}
async function list(u: TestUser) {
  const res = await u.api.GET('/api/v1/friends');
  expect(res.response.status).toBe(200);
  return res.data!;
}
const rowOf = async (u: TestUser, other: TestUser) => (await list(u)).find((r) => r.friendUserId === other.userId);
/** The raw response of a GET, for byte-for-byte comparisons of 404 bodies. */
async function raw(u: TestUser, path: string): Promise<{ status: number; text: string }> {
  const res = await server.fetch(path, { headers: bearer(u.apiKey) });
  return { status: res.status, text: await res.text() };
}
const card = (viewer: TestUser, ownerId: string) => raw(viewer, `/api/v1/friends/${ownerId}`);

type Perms = Partial<Record<PermissionGroup, PermissionLevel>>;
async function bucket(ownerId: string, perms: Perms): Promise<string> {
  const bucketId = randomUUID();
  await knex()('privacy_buckets').insert({
    id: bucketId,
    user_id: ownerId,
    slug: `u_${bucketId.slice(0, 8)}`,
    builtin: false,
    name: 'Test',
    description: '',
    friend_permissions: JSON.stringify(perms),
    created_at: now,
    updated_at: now,
  });
  return bucketId;
}
/** Replaces the buckets `ownerId` gave to a piece of content (or, kind friend, to a friend). */
async function assign(ownerId: string, kind: string, contentId: string, bucketIds: string[]): Promise<void> {
  await knex()('privacy_bucket_assignments').where({ user_id: ownerId, kind, content_id: contentId }).delete();
  if (bucketIds.length > 0) {
    await knex()('privacy_bucket_assignments').insert(
      bucketIds.map((bucketId) => ({
        user_id: ownerId,
        bucket_id: bucketId,
        kind,
        content_id: contentId,
        section_key: '',
        created_at: now,
      })),
    );
  }
}
const friendBuckets = async (ownerId: string, friendId: string): Promise<string[]> =>
  (
    await knex()('privacy_bucket_assignments')
      .where({ user_id: ownerId, kind: 'friend', content_id: friendId })
      .select('bucket_id')
  ).map((r) => r.bucket_id as string);
const presetId = async (ownerId: string, slug: string): Promise<string> =>
  (await knex()('privacy_buckets').where({ user_id: ownerId, slug }).first('id')).id as string;

async function withProfile(u: TestUser): Promise<void> {
  const res = await u.api.PATCH('/api/v1/friends/profile', {
    body: {
      pronouns: 'they/them',
      status: 'Secret status',
      timezone: 'Europe/Berlin',
      country: 'DE',
      aboutMarkdown: 'Hidden about',
      bannerUrl: '/media/banners/x.png',
      imageUrl: 'https://images.example.invalid/x.png',
    },
  });
  expect(res.response.status).toBe(200);
}

describe('requests and accepts', () => {
  it('request → pending both ways; accept → accepted both ways with acceptedAt, presets and the new_friend defaults on each side', async () => {
    const a = await server.user();
    const b = await server.user();
    const requestedAt = ++now;
    expect(await request(a, b)).toBe(204);
    expect(await rowOf(a, b)).toMatchObject({
      status: 'pending',
      direction: 'outgoing',
      createdAt: requestedAt,
      acceptedAt: null,
      privacyBucketIds: [],
      username: b.username,
    });
    expect(await rowOf(b, a)).toMatchObject({
      status: 'pending',
      direction: 'incoming',
      createdAt: requestedAt,
      acceptedAt: null,
    });
    const incoming = await b.api.GET('/api/v1/friends/requests');
    expect(incoming.data!.map((r) => r.friendUserId)).toEqual([a.userId]);
    expect((await a.api.GET('/api/v1/friends/requests')).data).toEqual([]);

    const acceptedAt = ++now;
    expect(await accept(b, a)).toBe(204);
    const aRow = await rowOf(a, b);
    const bRow = await rowOf(b, a);
    expect(aRow).toMatchObject({ status: 'accepted', direction: null, createdAt: requestedAt, acceptedAt });
    expect(bRow).toMatchObject({ status: 'accepted', direction: null, createdAt: requestedAt, acceptedAt });
    // Each side holds its own public_friends preset (the first new_friend default) for the other.
    expect(aRow!.privacyBucketIds).toEqual([await presetId(a.userId, 'public_friends')]);
    expect(bRow!.privacyBucketIds).toEqual([await presetId(b.userId, 'public_friends')]);
    expect((await b.api.GET('/api/v1/friends/requests')).data).toEqual([]);
    expect(await knex()('privacy_buckets').where({ user_id: a.userId }).count({ n: '*' })).toEqual([{ n: 2 }]);
  });

  it('by username: 201 with the canonical username, regardless of case; unknown 404; yourself 400; invalid 400', async () => {
    const a = await server.user();
    const b = await server.user();
    const res = await a.api.POST('/api/v1/friends/request-by-username', {
      body: { username: b.username.toUpperCase() },
    });
    expect(res.response.status).toBe(201);
    expect(res.data).toEqual({ friendUserId: b.userId, username: b.username });
    expect((await rowOf(b, a))?.status).toBe('pending');
    const unknown = await a.api.POST('/api/v1/friends/request-by-username', {
      body: { username: 'nobody_here_at_all' },
    });
    expect(unknown.response.status).toBe(404);
    expect(unknown.error).toEqual({ code: 'NOT_FOUND', message: 'Friend not found' });
    const self = await a.api.POST('/api/v1/friends/request-by-username', { body: { username: a.username } });
    expect(self.response.status).toBe(400);
    expect(self.error?.message).toBe('You cannot send a friend request to yourself');
    for (const body of [{}, { username: 'x' }, { username: 'has space' }, { username: b.username, extra: 1 }]) {
      expect(
        (await a.api.POST('/api/v1/friends/request-by-username', { body: body as never })).response.status,
        JSON.stringify(body),
      ).toBe(400);
    }
  });

  it('yourself → 400; unknown account → 404; duplicate, already friends, blocked by you → 409 with the contract messages', async () => {
    const a = await server.user();
    const b = await server.user();
    const c = await server.user();
    expect(await request(a, a)).toBe(400);
    const unknown = await a.api.POST('/api/v1/friends/{friendUserId}/request', id(UNKNOWN_ID));
    expect(unknown.response.status).toBe(404);
    expect(unknown.error).toEqual({ code: 'NOT_FOUND', message: 'Friend not found' });
    expect(await request(a, b)).toBe(204);
    const dup = await a.api.POST('/api/v1/friends/{friendUserId}/request', id(b.userId));
    expect(dup.response.status).toBe(409);
    expect(dup.error).toEqual({ code: 'CONFLICT', message: 'A friend request to this account is already pending' });
    expect(await accept(b, a)).toBe(204);
    const again = await a.api.POST('/api/v1/friends/{friendUserId}/request', id(b.userId));
    expect(again.error).toEqual({ code: 'CONFLICT', message: 'You are already friends with this account' });
    expect((await b.api.POST('/api/v1/friends/{friendUserId}/request', id(a.userId))).response.status).toBe(409);
    expect(await block(a, c)).toBe(204);
    const blocked = await a.api.POST('/api/v1/friends/{friendUserId}/request', id(c.userId));
    expect(blocked.response.status).toBe(409);
    expect(blocked.error).toEqual({
      code: 'CONFLICT',
      message: 'You have blocked this account; revoke the block before sending a request',
    });
    expect((await rowOf(a, c))?.status).toBe('blocked');
  });

  it('a request to someone who already asked the caller accepts both (by id and by username)', async () => {
    const a = await server.user();
    const b = await server.user();
    const c = await server.user();
    expect(await request(a, b)).toBe(204);
    expect(await request(b, a)).toBe(204);
    expect((await rowOf(a, b))?.status).toBe('accepted');
    expect(await rowOf(b, a)).toMatchObject({ status: 'accepted', acceptedAt: now });
    expect(await friendBuckets(a.userId, b.userId)).toHaveLength(1);
    expect(await friendBuckets(b.userId, a.userId)).toHaveLength(1);
    expect(await request(c, a)).toBe(204);
    const res = await a.api.POST('/api/v1/friends/request-by-username', { body: { username: c.username } });
    expect(res.response.status).toBe(201);
    expect(res.data).toEqual({ friendUserId: c.userId, username: c.username });
    expect((await rowOf(c, a))?.status).toBe('accepted');
  });

  it('accept: no row → 404; accepted, own outgoing, blocked and revoked rows → 409; unknown → 404', async () => {
    const a = await server.user();
    const b = await server.user();
    const none = await a.api.POST('/api/v1/friends/requests/{requesterUserId}/accept', {
      params: { path: { requesterUserId: b.userId } },
    });
    expect(none.response.status).toBe(404);
    expect(none.error).toEqual({ code: 'NOT_FOUND', message: 'Friend not found' });
    expect(await accept(a, UNKNOWN_ID)).toBe(404);
    expect(await accept(a, a)).toBe(404);
    expect(await request(a, b)).toBe(204);
    const own = await a.api.POST('/api/v1/friends/requests/{requesterUserId}/accept', {
      params: { path: { requesterUserId: b.userId } },
    });
    expect(own.response.status).toBe(409);
    expect(own.error).toEqual({
      code: 'CONFLICT',
      message: 'There is no incoming request to accept: the friendship is your own outgoing request',
    });
    expect(await accept(b, a)).toBe(204);
    const accepted = await b.api.POST('/api/v1/friends/requests/{requesterUserId}/accept', {
      params: { path: { requesterUserId: a.userId } },
    });
    expect(accepted.error).toEqual({
      code: 'CONFLICT',
      message: 'There is no incoming request to accept: the friendship is accepted',
    });
    expect(await revoke(a, b)).toBe(204);
    expect(await accept(b, a)).toBe(409);
    expect(await block(b, a)).toBe(204);
    const blocked = await b.api.POST('/api/v1/friends/requests/{requesterUserId}/accept', {
      params: { path: { requesterUserId: a.userId } },
    });
    expect(blocked.error).toEqual({
      code: 'CONFLICT',
      message: 'There is no incoming request to accept: the friendship is blocked by you',
    });
  });

  it('requesting someone who blocked you answers like a fresh request and reveals nothing; the blocker gets no request', async () => {
    const a = await server.user();
    const b = await server.user();
    const fresh = await server.user();
    expect(await block(b, a)).toBe(204);
    expect(await knex()('friendships').where({ user_id: a.userId })).toEqual([]);
    const blockedAnswer = await a.api.POST('/api/v1/friends/request-by-username', { body: { username: b.username } });
    const freshAnswer = await a.api.POST('/api/v1/friends/request-by-username', { body: { username: fresh.username } });
    expect(blockedAnswer.response.status).toBe(201);
    expect(freshAnswer.response.status).toBe(201);
    expect(Object.keys(blockedAnswer.data!)).toEqual(Object.keys(freshAnswer.data!));
    expect(await rowOf(a, b)).toMatchObject({ status: 'pending', direction: 'outgoing' });
    expect(await rowOf(a, fresh)).toMatchObject({ status: 'pending', direction: 'outgoing' });
    // The blocker's side: still only its block, and no incoming request.
    expect((await list(b)).map((r) => [r.friendUserId, r.status])).toEqual([[a.userId, 'blocked']]);
    expect((await b.api.GET('/api/v1/friends/requests')).data).toEqual([]);
    // A second request is a duplicate, exactly as with anyone else.
    expect(await request(a, b)).toBe(409);
    expect(await request(a, fresh)).toBe(409);
    // The blocker lifts its block: both rows end revoked, and the two can start over.
    expect(await revoke(b, a)).toBe(204);
    expect((await rowOf(a, b))?.status).toBe('revoked');
    expect((await rowOf(b, a))?.status).toBe('revoked');
    await befriend(a, b);
  });

  it('concurrent requests between the same two accounts end accepted both ways, never duplicated', async () => {
    const a = await server.user();
    const b = await server.user();
    const statuses = await Promise.all([request(a, b), request(b, a)]);
    expect(statuses).toEqual([204, 204]);
    expect((await rowOf(a, b))?.status).toBe('accepted');
    expect((await rowOf(b, a))?.status).toBe('accepted');
    expect(await knex()('friendships').whereIn('user_id', [a.userId, b.userId]).count({ n: '*' })).toEqual([{ n: 2 }]);
  });
});

describe('revoke and block', () => {
  it('revoke ends an accepted friendship on both sides and removes both sides’ buckets; a new request starts over', async () => {
    const a = await server.user();
    const b = await server.user();
    await befriend(a, b);
    const firstId = (await rowOf(a, b))!.id;
    expect(await revoke(a, b)).toBe(204);
    expect(await rowOf(a, b)).toMatchObject({
      status: 'revoked',
      direction: null,
      acceptedAt: null,
      privacyBucketIds: [],
    });
    expect(await rowOf(b, a)).toMatchObject({ status: 'revoked', acceptedAt: null, privacyBucketIds: [] });
    expect(await friendBuckets(a.userId, b.userId)).toEqual([]);
    expect(await friendBuckets(b.userId, a.userId)).toEqual([]);
    expect(await revoke(a, b)).toBe(204); // revoked again: nothing changes
    const restartedAt = ++now;
    expect(await request(b, a)).toBe(204);
    expect(await rowOf(a, b)).toMatchObject({
      id: firstId,
      status: 'pending',
      direction: 'incoming',
      createdAt: restartedAt,
    });
    expect(await accept(a, b)).toBe(204);
    expect((await rowOf(a, b))?.privacyBucketIds).toEqual([await presetId(a.userId, 'public_friends')]);
  });

  it('revoke cancels an outgoing request and declines an incoming one; no row or unknown → 404', async () => {
    const a = await server.user();
    const b = await server.user();
    const c = await server.user();
    expect(await request(a, b)).toBe(204);
    expect(await revoke(a, b)).toBe(204);
    expect((await rowOf(b, a))?.status).toBe('revoked');
    expect((await b.api.GET('/api/v1/friends/requests')).data).toEqual([]);
    expect(await request(c, a)).toBe(204);
    expect(await revoke(a, c)).toBe(204);
    expect((await rowOf(c, a))?.status).toBe('revoked');
    const none = await a.api.POST('/api/v1/friends/{friendUserId}/revoke', id(UNKNOWN_ID));
    expect(none.error).toEqual({ code: 'NOT_FOUND', message: 'Friend not found' });
    const fresh = await server.user();
    expect(await revoke(a, fresh)).toBe(404);
    expect(await revoke(a, a)).toBe(404);
  });

  it('block: the caller’s row blocked with its reason, the other’s revoked, buckets gone, listed as blocked; again replaces the reason', async () => {
    const a = await server.user();
    const b = await server.user();
    await befriend(a, b);
    expect(await block(a, b, 'Too loud')).toBe(204);
    expect(await rowOf(a, b)).toMatchObject({
      status: 'blocked',
      direction: null,
      acceptedAt: null,
      privacyBucketIds: [],
    });
    expect(await rowOf(b, a)).toMatchObject({ status: 'revoked', privacyBucketIds: [] });
    expect(
      await knex()('friendships').where({ user_id: a.userId, friend_user_id: b.userId }).first('block_reason'),
    ).toEqual({ block_reason: 'Too loud' });
    expect(await friendBuckets(a.userId, b.userId)).toEqual([]);
    expect(await friendBuckets(b.userId, a.userId)).toEqual([]);
    expect(
      (await a.api.GET('/api/v1/friends', { params: { query: { status: 'blocked' } } })).data!.map(
        (r) => r.friendUserId,
      ),
    ).toEqual([b.userId]);
    // The reason is the blocker's own note: never in what the blocked account reads.
    expect(JSON.stringify(await list(b))).not.toContain('Too loud');
    expect(await block(a, b)).toBe(204);
    expect(
      await knex()('friendships').where({ user_id: a.userId, friend_user_id: b.userId }).first('block_reason'),
    ).toEqual({ block_reason: null });
  });

  it('block removes pending requests either way; mutual blocks stay until each side lifts its own', async () => {
    const a = await server.user();
    const b = await server.user();
    const c = await server.user();
    expect(await request(a, b)).toBe(204);
    expect(await block(b, a)).toBe(204);
    expect((await rowOf(a, b))?.status).toBe('revoked');
    expect((await b.api.GET('/api/v1/friends/requests')).data).toEqual([]);
    expect(await request(c, a)).toBe(204);
    expect(await block(c, a)).toBe(204); // blocking the account one asked
    expect((await a.api.GET('/api/v1/friends/requests')).data).toEqual([]);
    expect(await block(a, b)).toBe(204);
    expect((await rowOf(a, b))?.status).toBe('blocked');
    expect((await rowOf(b, a))?.status).toBe('blocked');
    expect(await revoke(a, b)).toBe(204);
    expect((await rowOf(a, b))?.status).toBe('revoked');
    expect((await rowOf(b, a))?.status).toBe('blocked'); // the other side's block stays
    expect(await card(a, b.userId)).toMatchObject({ status: 404 });
  });

  it('block and block-by-username need no friendship; yourself 400, unknown 404, reason over 280 → 400', async () => {
    const a = await server.user();
    const b = await server.user();
    const res = await a.api.POST('/api/v1/friends/block-by-username', {
      body: { username: b.username.toUpperCase(), reason: 'x'.repeat(280) },
    });
    expect(res.response.status).toBe(200);
    expect(res.data).toEqual({ username: b.username });
    expect(await rowOf(a, b)).toMatchObject({ status: 'blocked', createdAt: now });
    expect(await rowOf(b, a)).toBeUndefined();
    expect(
      (await a.api.POST('/api/v1/friends/block-by-username', { body: { username: 'nobody_known_here' } })).response
        .status,
    ).toBe(404);
    const self = await a.api.POST('/api/v1/friends/block-by-username', { body: { username: a.username } });
    expect(self.response.status).toBe(400);
    expect(self.error?.message).toBe('You cannot block yourself');
    expect(await block(a, a)).toBe(400);
    expect(await block(a, UNKNOWN_ID)).toBe(404);
    expect(await block(a, b, 'x'.repeat(281))).toBe(400);
    expect(
      (
        await a.api.POST('/api/v1/friends/block-by-username', {
          body: { username: b.username, reason: 'x'.repeat(281) },
        })
      ).response.status,
    ).toBe(400);
    const extra = await server.fetch(`/api/v1/friends/${b.userId}/block`, {
      method: 'POST',
      headers: jsonHeaders(a.apiKey),
      body: JSON.stringify({ why: 'x' }),
    });
    expect(extra.status).toBe(400);
  });

  it('friendship writes are audited on the caller’s account only', async () => {
    const a = await server.user();
    const b = await server.user();
    await befriend(a, b);
    now += 1;
    await block(a, b);
    const actions = async (u: TestUser) =>
      await knex()('audit_events')
        .where({ user_id: u.userId, actor_kind: 'key' })
        .orderBy('created_at')
        .select('action', 'target_id', 'actor_key_id');
    expect(await actions(a)).toEqual([
      { action: 'friendship.request', target_id: b.userId, actor_key_id: a.keyId },
      { action: 'friendship.block', target_id: b.userId, actor_key_id: a.keyId },
    ]);
    expect(await actions(b)).toEqual([{ action: 'friendship.accept', target_id: a.userId, actor_key_id: b.keyId }]);
  });
});

describe('lists', () => {
  it('a friend’s pronouns, status and banner show only with friend_data ≥ read granted by that friend', async () => {
    const viewer = await server.user();
    const f = await server.user();
    await withProfile(f);
    expect(await request(viewer, f)).toBe(204);
    const pending = await rowOf(viewer, f);
    expect(pending).toMatchObject({
      friendPronouns: '',
      friendStatus: '',
      friendBannerUrl: '',
      imageUrl: 'https://images.example.invalid/x.png',
    });
    expect(JSON.stringify(await list(viewer))).not.toContain('Secret status');
    expect(await accept(f, viewer)).toBe(204);
    // public_friends grants friend_data read.
    expect(await rowOf(viewer, f)).toMatchObject({
      friendPronouns: 'they/them',
      friendStatus: 'Secret status',
      friendBannerUrl: '/media/banners/x.png',
    });
    // The friend's bucket for the viewer grants friend_data none → hidden again.
    const noData = await bucket(f.userId, { members_view: 'read', friend_data: 'none' });
    await assign(f.userId, 'friend', viewer.userId, [noData]);
    expect(await rowOf(viewer, f)).toMatchObject({ friendPronouns: '', friendStatus: '', friendBannerUrl: '' });
    // What the viewer assigned to the friend does not matter, only what the friend assigned.
    expect((await rowOf(f, viewer))?.privacyBucketIds).toHaveLength(1);
    await assign(f.userId, 'friend', viewer.userId, [noData, await bucket(f.userId, { friend_data: 'read_write' })]);
    expect(await rowOf(viewer, f)).toMatchObject({ friendStatus: 'Secret status' });
    // No bucket at all → nothing.
    await assign(f.userId, 'friend', viewer.userId, []);
    expect(JSON.stringify(await list(viewer))).not.toContain('Secret status');
    // A block either way hides it even with buckets.
    await assign(f.userId, 'friend', viewer.userId, [await presetId(f.userId, 'public_friends')]);
    expect(await block(viewer, f)).toBe(204);
    expect(JSON.stringify(await list(viewer))).not.toContain('Secret status');
  });

  it('GET /friends orders by createdAt and filters by status; the list costs one statement however long', async () => {
    const me = await server.user();
    const others = [await server.user(), await server.user(), await server.user()];
    for (const o of others) {
      now += 10;
      expect(await request(me, o)).toBe(204);
    }
    expect(await accept(others[1]!, me)).toBe(204);
    expect((await list(me)).map((r) => r.friendUserId)).toEqual(others.map((o) => o.userId));
    const accepted = await me.api.GET('/api/v1/friends', { params: { query: { status: 'accepted' } } });
    expect(accepted.data!.map((r) => r.friendUserId)).toEqual([others[1]!.userId]);
    expect(
      (await me.api.GET('/api/v1/friends', { params: { query: { status: 'nope' as never } } })).response.status,
    ).toBe(400);
    const statements = await captureStatements(knex(), /friendships/, () => me.api.GET('/api/v1/friends'));
    expect(statements).toHaveLength(1);
  });

  it('GET /friends/page: keyset pages, query on display name or username, status; bad cursor and limits → 400', async () => {
    const me = await server.user();
    const names = ['Alpha Lantern', 'beta', 'Gamma LANTERN', 'delta', 'epsilon'];
    const friends: TestUser[] = [];
    for (const displayName of names) {
      const u = await server.user({ account: { displayName } });
      friends.push(u);
      now += 1;
      expect(await request(me, u)).toBe(204);
    }
    const page = (query: Record<string, unknown>) =>
      me.api.GET('/api/v1/friends/page', { params: { query: query as never } });
    const seen: string[] = [];
    let cursor: string | undefined;
    let pages = 0;
    do {
      const res = await page({ limit: 2, ...(cursor ? { cursor } : {}) });
      expect(res.response.status).toBe(200);
      seen.push(...res.data!.items.map((r) => r.friendUserId));
      cursor = res.data!.nextCursor ?? undefined;
      pages++;
    } while (cursor);
    expect(pages).toBe(3);
    expect(seen).toEqual(friends.map((f) => f.userId));
    const lantern = await page({ limit: 10, query: 'lantern' });
    expect(lantern.data!.items.map((r) => r.name)).toEqual(['Alpha Lantern', 'Gamma LANTERN']);
    expect(lantern.data!.nextCursor).toBeNull();
    const byUsername = await page({ limit: 10, query: friends[3]!.username.toUpperCase() });
    expect(byUsername.data!.items.map((r) => r.friendUserId)).toEqual([friends[3]!.userId]);
    expect(await accept(friends[4]!, me)).toBe(204);
    expect((await page({ limit: 10, status: 'accepted' })).data!.items.map((r) => r.friendUserId)).toEqual([
      friends[4]!.userId,
    ]);
    expect((await page({ limit: 10, status: 'pending', query: 'lantern' })).data!.items).toHaveLength(2);
    for (const bad of [
      {},
      { limit: 0 },
      { limit: 201 },
      { limit: 5, cursor: 'not-a-cursor' },
      { limit: 5, cursor: Buffer.from('["x"]').toString('base64url') },
    ]) {
      const res = await page(bad);
      expect(res.response.status, JSON.stringify(bad)).toBe(400);
    }
    expect((await page({ limit: 5, cursor: 'bm9wZQ' })).error?.message).toBe(
      'cursor is invalid; pass the nextCursor of the previous page',
    );
    expect((await page({ limit: 200 })).data!.items).toHaveLength(5);
  });

  it('GET /friends/requests lists incoming pending only, with the requester as friendUserId', async () => {
    const me = await server.user();
    const asker = await server.user();
    const asked = await server.user();
    expect(await request(asker, me)).toBe(204);
    expect(await request(me, asked)).toBe(204);
    const res = await me.api.GET('/api/v1/friends/requests');
    expect(res.data).toEqual([
      expect.objectContaining({
        friendUserId: asker.userId,
        status: 'pending',
        direction: 'incoming',
        username: asker.username,
      }),
    ]);
  });
});

describe('suggestions', () => {
  it('friends of accepted friends, ordered by mutual friends then username; excluding related, blocked either way, opted-out and pending hops', async () => {
    const me = await server.user();
    const f1 = await server.user();
    const f2 = await server.user();
    const [c2, c1, optedOut, blocker, blockedByMe, pendingWithMe, onlyPendingHop] = [
      await server.user({ account: { username: `sz_two_${process.pid}` } }),
      await server.user({ account: { username: `sa_one_${process.pid}` } }),
      await server.user(),
      await server.user(),
      await server.user(),
      await server.user(),
      await server.user(),
    ];
    const c1b = await server.user({ account: { username: `sb_one_${process.pid}` } });
    await withProfile(c2);
    await befriend(me, f1);
    await befriend(me, f2);
    await befriend(f1, c2);
    await befriend(f2, c2);
    await befriend(f1, c1b);
    await befriend(f2, c1);
    await befriend(f1, optedOut);
    await befriend(f1, blocker);
    await befriend(f1, blockedByMe);
    await befriend(f1, pendingWithMe);
    expect(await request(f1, onlyPendingHop)).toBe(204);
    expect(
      (await optedOut.api.PATCH('/api/v1/friends/profile', { body: { appearInSuggestions: false } })).response.status,
    ).toBe(200);
    expect(await block(blocker, me)).toBe(204);
    expect(await block(me, blockedByMe)).toBe(204);
    expect(await request(pendingWithMe, me)).toBe(204);
    const res = await me.api.GET('/api/v1/friends/suggestions');
    expect(res.response.status).toBe(200);
    expect(res.data!.map((s) => [s.friendUserId, s.mutualFriendCount])).toEqual([
      [c2.userId, 2],
      [c1.userId, 1],
      [c1b.userId, 1],
    ]);
    expect(res.data![0]).toMatchObject({
      username: c2.username,
      imageUrl: 'https://images.example.invalid/x.png',
      friendPronouns: '',
      friendStatus: '',
      friendBannerUrl: '',
      planKey: 'pro',
      isAdmin: false,
    });
    expect(JSON.stringify(res.data)).not.toContain('Secret status');
    for (const hidden of [optedOut, blocker, blockedByMe, pendingWithMe, onlyPendingHop, f1, f2, me])
      expect(JSON.stringify(res.data)).not.toContain(hidden.userId);
    expect(
      (await me.api.GET('/api/v1/friends/suggestions', { params: { query: { limit: 1 } } })).data!.map(
        (s) => s.friendUserId,
      ),
    ).toEqual([c2.userId]);
    for (const limit of [0, 51])
      expect((await me.api.GET('/api/v1/friends/suggestions', { params: { query: { limit } } })).response.status).toBe(
        400,
      );
    const statements = await captureStatements(knex(), /friendships/, () => me.api.GET('/api/v1/friends/suggestions'));
    expect(statements).toHaveLength(1);
  });
});

describe('profile card', { timeout: 120_000 }, () => {
  it('over the relationship matrix: only an accepted friendship without a block shows it; everything else is the same 404 body', async () => {
    const owner = await server.user();
    await withProfile(owner);
    const unknown = await raw(owner, `/api/v1/friends/${UNKNOWN_ID}`);
    expect(unknown.status).toBe(404);
    expect(JSON.parse(unknown.text)).toEqual({ code: 'NOT_FOUND', message: 'Friend not found' });
    const expectHidden = async (viewer: TestUser, label: string) => {
      const res = await card(viewer, owner.userId);
      expect(res.status, label).toBe(404);
      expect(res.text, label).toBe(unknown.text);
      expect(res.text).not.toContain(owner.userId);
      expect(res.text).not.toContain('Secret status');
    };
    const stranger = await server.user();
    await expectHidden(stranger, 'none');
    const asked = await server.user();
    expect(await request(owner, asked)).toBe(204);
    await expectHidden(asked, 'pending, owner asked');
    const asker = await server.user();
    expect(await request(asker, owner)).toBe(204);
    await expectHidden(asker, 'pending, viewer asked');
    const blockedByOwner = await server.user();
    await befriend(owner, blockedByOwner);
    expect(await block(owner, blockedByOwner)).toBe(204);
    await expectHidden(blockedByOwner, 'blocked by the owner');
    const blockedOwner = await server.user();
    await befriend(owner, blockedOwner);
    expect(await block(blockedOwner, owner)).toBe(204);
    await expectHidden(blockedOwner, 'viewer blocked the owner');
    const revoked = await server.user();
    await befriend(owner, revoked);
    expect(await revoke(revoked, owner)).toBe(204);
    await expectHidden(revoked, 'revoked');
    await expectHidden(owner, 'self');

    const friend = await server.user();
    await befriend(owner, friend);
    const shown = await friend.api.GET('/api/v1/friends/{friendUserId}', id(owner.userId));
    expect(shown.data).toEqual({
      friendUserId: owner.userId,
      name: owner.username,
      username: owner.username,
      imageUrl: 'https://images.example.invalid/x.png',
      displayName: owner.username,
      friendPronouns: 'they/them',
      friendStatus: 'Secret status',
      friendTimezone: 'Europe/Berlin',
      friendCountry: 'DE',
      friendAboutMarkdown: 'Hidden about',
      friendBannerUrl: '/media/banners/x.png',
      isAdmin: false,
      planKey: 'pro',
      donorSupporterUnlocked: false,
      closedBetaParticipantAt: null,
      friendProfileTabs: { members: true, membersDirectory: true, frontHistory: true, notes: false },
    });

    const tabsWith = async (perms: Perms[]) => {
      const ids = [];
      for (const p of perms) ids.push(await bucket(owner.userId, p));
      await assign(owner.userId, 'friend', friend.userId, ids);
      return (await friend.api.GET('/api/v1/friends/{friendUserId}', id(owner.userId))).data!;
    };
    // Accepted but no bucket: the card, with nothing private and no tabs.
    const bare = await tabsWith([]);
    expect(bare).toMatchObject({
      displayName: owner.username,
      imageUrl: 'https://images.example.invalid/x.png',
      friendPronouns: '',
      friendStatus: '',
      friendTimezone: null,
      friendCountry: null,
      friendAboutMarkdown: null,
      friendBannerUrl: '',
    });
    expect(bare.friendProfileTabs).toEqual({
      members: false,
      membersDirectory: false,
      frontHistory: false,
      notes: false,
    });
    expect(JSON.stringify(bare)).not.toContain('Hidden about');
    // Overlap at none, read and read_write; several buckets merge by the maximum.
    expect((await tabsWith([{ members_view: 'none', friend_data: 'none' }])).friendProfileTabs).toEqual({
      members: false,
      membersDirectory: false,
      frontHistory: false,
      notes: false,
    });
    const read = await tabsWith([{ members_view: 'read', member_notes: 'read', friend_data: 'read' }]);
    expect(read.friendProfileTabs).toEqual({
      members: true,
      membersDirectory: false,
      frontHistory: false,
      notes: true,
    });
    expect(read.friendAboutMarkdown).toBe('Hidden about');
    const merged = await tabsWith([{ groups: 'read_write' }, { front: 'read_write', friend_data: 'read_write' }]);
    expect(merged.friendProfileTabs).toEqual({
      members: false,
      membersDirectory: true,
      frontHistory: true,
      notes: false,
    });
    expect(merged.friendTimezone).toBe('Europe/Berlin');
  });
});

describe('search over a friend’s content', { timeout: 120_000 }, () => {
  async function setup() {
    const owner = await server.user();
    const viewer = await server.user();
    await befriend(owner, viewer);
    const b = await bucket(owner.userId, { members_view: 'read', member_notes: 'read', groups: 'read' });
    const membersOnly = await bucket(owner.userId, { members_view: 'read' });
    const other = await bucket(owner.userId, { members_view: 'read', member_notes: 'read', groups: 'read' }); // not the viewer's
    await assign(owner.userId, 'friend', viewer.userId, [b, membersOnly]);
    const robin = await createMember(owner.api, 'Robin Hood');
    const robert = await createMember(owner.api, 'Robert Hidden');
    const rowan = await createMember(owner.api, 'Rowan Notesless');
    const trashed = await createMember(owner.api, 'Robyn Trashed');
    await assign(owner.userId, 'member', robin, [b]);
    await assign(owner.userId, 'member', robert, [other]);
    // rowan is seen through membersOnly (members_view, no member_notes): its notes stay hidden.
    await assign(owner.userId, 'member', rowan, [membersOnly]);
    await assign(owner.userId, 'member', trashed, [b]);
    await owner.api.DELETE('/api/v1/members/{memberId}', { params: { path: { memberId: trashed } } });
    const noteBoth = await createEntry(owner.api, 'robin went to the market', {
      title: 'Market day',
      memberIds: [robin, robert],
    });
    const noteHidden = await createEntry(owner.api, 'robert private market plans', {
      title: 'Secret market',
      memberIds: [robert],
    });
    const noteRowan = await createEntry(owner.api, 'rowan market notes', { title: 'Rowan market', memberIds: [rowan] });
    const noteNoMember = await createEntry(owner.api, 'market without anyone', { title: 'Loose market' });
    const group = await createGroup(owner.api, 'Robins Group');
    const hiddenGroup = await createGroup(owner.api, 'Robins Hidden Group');
    const folder = await createFolder(owner.api, 'Robins Folder');
    await assign(owner.userId, 'group', group, [b]);
    await assign(owner.userId, 'group', hiddenGroup, [other]);
    await assign(owner.userId, 'directory', folder, [b]);
    return {
      owner,
      viewer,
      robin,
      robert,
      rowan,
      trashed,
      noteBoth,
      noteHidden,
      noteRowan,
      noteNoMember,
      group,
      hiddenGroup,
      folder,
    };
  }

  it('search: prefix words, visible items only, note members filtered; hidden ids never appear', async () => {
    const s = await setup();
    const search = (q: string, extra: Record<string, unknown> = {}) =>
      s.viewer.api.GET('/api/v1/friends/search', {
        params: { query: { ownerUserId: s.owner.userId, q, ...extra } as never },
      });
    const rob = await search('ROB');
    expect(rob.response.status).toBe(200);
    expect(rob.data).toEqual({
      members: [{ type: 'member', id: s.robin, name: 'Robin Hood' }],
      // The note's text starts a word with "rob"; robert's own note stays hidden.
      notes: [{ type: 'note', id: s.noteBoth, title: 'Market day', memberIds: [s.robin] }],
      groups: [
        { type: 'folder', id: s.folder, name: 'Robins Folder' },
        { type: 'group', id: s.group, name: 'Robins Group' },
      ],
    });
    const market = await search('mark');
    expect(market.data!.notes).toEqual([{ type: 'note', id: s.noteBoth, title: 'Market day', memberIds: [s.robin] }]);
    const text = JSON.stringify(market.data);
    for (const hidden of [s.robert, s.noteHidden, s.noteRowan, s.noteNoMember, s.hiddenGroup, s.trashed])
      expect(text).not.toContain(hidden);
    expect(text).not.toContain('Secret market');
    // Every word must match as a prefix.
    expect((await search('robin hoo')).data!.members.map((m) => m.id)).toEqual([s.robin]);
    expect((await search('robin hidden')).data!.members).toEqual([]);
    expect((await search('obin')).data!.members).toEqual([]);
    // No word at all: empty, not an error.
    const noWord = await search('!!! ...');
    expect(noWord.response.status, JSON.stringify(noWord.error)).toBe(200);
    expect(noWord.data).toEqual({ members: [], notes: [], groups: [] });
    expect((await search('rob', { limitPerType: 1 })).data!.groups).toHaveLength(1);
    for (const bad of [
      { q: '' },
      { q: 'x'.repeat(101) },
      { q: 'rob', limitPerType: 0 },
      { q: 'rob', limitPerType: 51 },
    ]) {
      const res = await s.viewer.api.GET('/api/v1/friends/search', {
        params: { query: { ownerUserId: s.owner.userId, ...bad } as never },
      });
      expect(res.response.status, JSON.stringify(bad)).toBe(400);
    }
    expect(
      (await s.viewer.api.GET('/api/v1/friends/search', { params: { query: { q: 'rob' } as never } })).response.status,
    ).toBe(400);
  });

  it('a side system the friend shares no bucket with hides its members and their notes from search, catalog and members search', async () => {
    const s = await setup();
    const side = (await knex()('members').where('id', s.robin).first('side_system_id')).side_system_id as string;
    const other = await bucket(s.owner.userId, { members_view: 'read', member_notes: 'read' }); // not the viewer's
    await assign(s.owner.userId, 'side_system', side, [other]);
    const search = await s.viewer.api.GET('/api/v1/friends/search', {
      params: { query: { ownerUserId: s.owner.userId, q: 'rob' } },
    });
    expect(search.response.status).toBe(200);
    expect(search.data!.members).toEqual([]);
    expect(search.data!.notes).toEqual([]);
    const catalog = await s.viewer.api.GET('/api/v1/friends/search/catalog', {
      params: { query: { ownerUserId: s.owner.userId } },
    });
    const members = await s.viewer.api.GET('/api/v1/friends/search/members', {
      params: { query: { ownerUserId: s.owner.userId, q: 'robin' } },
    });
    expect(members.data).toEqual([]);
    for (const body of [search.data, catalog.data, members.data]) {
      const text = JSON.stringify(body);
      for (const hidden of [s.robin, s.rowan, s.noteBoth, s.noteRowan, 'Robin Hood', 'Market day'])
        expect(text).not.toContain(hidden);
    }
    // Sharing the side system's bucket with the friend brings them back.
    await assign(s.owner.userId, 'side_system', side, [
      other,
      (await knex()('privacy_bucket_assignments').where({ kind: 'member', content_id: s.robin }).first('bucket_id'))
        .bucket_id as string,
    ]);
    const back = await s.viewer.api.GET('/api/v1/friends/search/members', {
      params: { query: { ownerUserId: s.owner.userId, q: 'robin' } },
    });
    expect(back.data!.map((m) => m.id)).toEqual([s.robin]);
  });

  it('catalog and members search follow the same rules; statements stay constant', async () => {
    const s = await setup();
    const catalog = await s.viewer.api.GET('/api/v1/friends/search/catalog', {
      params: { query: { ownerUserId: s.owner.userId } },
    });
    expect(catalog.data).toEqual({
      members: [
        { type: 'member', id: s.robin, name: 'Robin Hood' },
        { type: 'member', id: s.rowan, name: 'Rowan Notesless' },
      ],
      notes: [{ type: 'note', id: s.noteBoth, title: 'Market day', memberIds: [s.robin] }],
      groups: [
        { type: 'folder', id: s.folder, name: 'Robins Folder' },
        { type: 'group', id: s.group, name: 'Robins Group' },
      ],
    });
    for (const hidden of [s.robert, s.noteHidden, s.noteRowan, s.hiddenGroup, s.trashed])
      expect(JSON.stringify(catalog.data)).not.toContain(hidden);
    const members = await s.viewer.api.GET('/api/v1/friends/search/members', {
      params: { query: { ownerUserId: s.owner.userId, q: 'ro' } },
    });
    expect(members.data).toEqual([
      { type: 'member', id: s.robin, name: 'Robin Hood' },
      { type: 'member', id: s.rowan, name: 'Rowan Notesless' },
    ]);
    expect(
      (
        await s.viewer.api.GET('/api/v1/friends/search/members', {
          params: { query: { ownerUserId: s.owner.userId, q: 'ro', limit: 1 } },
        })
      ).data,
    ).toHaveLength(1);
    for (const limit of [0, 51]) {
      expect(
        (
          await s.viewer.api.GET('/api/v1/friends/search/members', {
            params: { query: { ownerUserId: s.owner.userId, q: 'ro', limit } },
          })
        ).response.status,
      ).toBe(400);
    }
    const count = async () =>
      (
        await captureStatements(knex(), /members|entries|directories|friendships/, () =>
          s.viewer.api.GET('/api/v1/friends/search/catalog', { params: { query: { ownerUserId: s.owner.userId } } }),
        )
      ).length;
    const before = await count();
    for (let i = 0; i < 5; i++)
      await assign(s.owner.userId, 'member', await createMember(s.owner.api, `Extra ${i}`), [
        (
          await knex()('privacy_bucket_assignments')
            .where({ user_id: s.owner.userId, kind: 'member', content_id: s.robin })
            .first('bucket_id')
        ).bucket_id,
      ]);
    expect(
      (await s.viewer.api.GET('/api/v1/friends/search/catalog', { params: { query: { ownerUserId: s.owner.userId } } }))
        .data!.members,
    ).toHaveLength(7);
    expect(await count()).toBe(before);
    expect(before).toBe(2); // the friendship check and the one search statement
  });

  it('agrees with the access engine: search shows what contentLevels grants, the tabs are the mergeMax of the viewer’s buckets', async () => {
    const s = await setup();
    const access = (await forFriend(knex(), s.viewer.userId, s.owner.userId))!;
    const ids = [s.robin, s.robert, s.rowan];
    const levels = await contentLevels(knex(), access, 'member', ids);
    const catalog = (
      await s.viewer.api.GET('/api/v1/friends/search/catalog', { params: { query: { ownerUserId: s.owner.userId } } })
    ).data!;
    expect(catalog.members.map((m) => m.id).sort()).toEqual(
      ids.filter((m) => levels.get(m)!.members_view !== 'none').sort(),
    );
    expect(ids.map((m) => levels.get(m)!.member_notes)).toEqual(['read', 'none', 'none']);
    const maps = (
      await knex()('privacy_buckets')
        .whereIn('id', [...access.bucketIds!])
        .select('friend_permissions')
    ).map((r) => permissionMap(r.friend_permissions));
    const max = mergeMax(maps);
    const tabs = (await s.viewer.api.GET('/api/v1/friends/{friendUserId}', id(s.owner.userId))).data!.friendProfileTabs;
    expect(tabs).toEqual({
      members: max.members_view !== 'none',
      membersDirectory: max.groups !== 'none',
      frontHistory: max.front !== 'none',
      notes: max.member_notes !== 'none',
    });
    expect(tabs).toEqual({ members: true, membersDirectory: true, frontHistory: false, notes: true });
  });

  it('matches through the GIN expression indexes of migration 0012 (members_search, entries_search, directories_search)', async () => {
    const s = await setup();
    // A large account whose content the viewer may all see (through the bucket robin carries), none
    // of it matching: reading it all would cost more than the index.
    const shared = (
      await knex()('privacy_bucket_assignments')
        .where({ user_id: s.owner.userId, kind: 'member', content_id: s.robin })
        .first('bucket_id')
    ).bucket_id as string;
    const side = (await knex()('members').where({ id: s.robin }).first('side_system_id')).side_system_id as string;
    const n = 3000;
    await knex().raw(
      `insert into members (id, user_id, side_system_id, name, created_at, updated_at) select gen_random_uuid(), ?, ?, 'Filler ' || i, ?, ? from generate_series(1, ?) i`,
      [s.owner.userId, side, now, now, n],
    );
    await knex().raw(
      `insert into entries (id, user_id, side_system_id, title, content, created_at, updated_at) select gen_random_uuid(), ?, ?, 'Filler ' || i, 'nothing here ' || i, ?, ? from generate_series(1, ?) i`,
      [s.owner.userId, side, now, now, n],
    );
    await knex().raw(
      `insert into directories (id, user_id, kind, side_system_id, name, created_at, updated_at) select gen_random_uuid(), ?, 'group', ?, 'Filler ' || i, ?, ? from generate_series(1, ?) i`,
      [s.owner.userId, side, now, now, n],
    );
    await knex().raw(
      `insert into privacy_bucket_assignments (user_id, bucket_id, kind, content_id, created_at)
       select user_id, ?::uuid, case when kind = 'group' then 'group' else 'directory' end, id, ?::bigint from directories where user_id = ? and name like 'Filler %'
       union all select user_id, ?::uuid, 'member', id, ?::bigint from members where user_id = ? and name like 'Filler %'`,
      [shared, now, s.owner.userId, shared, now, s.owner.userId],
    );
    await knex().raw('analyze members, entries, directories, privacy_bucket_assignments');
    const [statement] = await captureStatements(knex(), /to_tsquery/, () =>
      s.viewer.api.GET('/api/v1/friends/search', { params: { query: { ownerUserId: s.owner.userId, q: 'rob' } } }),
    );
    const indexes = planNodes(await explain(knex(), statement!)).map((node) => node['Index Name']);
    expect(indexes).toEqual(expect.arrayContaining(['members_search', 'entries_search', 'directories_search']));
  });

  it('a viewer without overlap sees nothing; non-friends, blocked, pending, self and unknown get the same 404', async () => {
    const s = await setup();
    await assign(s.owner.userId, 'friend', s.viewer.userId, []);
    const empty = await s.viewer.api.GET('/api/v1/friends/search/catalog', {
      params: { query: { ownerUserId: s.owner.userId } },
    });
    expect(empty.data).toEqual({ members: [], notes: [], groups: [] });
    const base = await raw(s.viewer, `/api/v1/friends/search?ownerUserId=${UNKNOWN_ID}&q=rob`);
    expect(base.status).toBe(404);
    const stranger = await server.user();
    const pending = await server.user();
    expect(await request(pending, s.owner)).toBe(204);
    const blocked = await server.user();
    await befriend(s.owner, blocked);
    expect(await block(s.owner, blocked)).toBe(204);
    for (const [viewer, label] of [
      [stranger, 'stranger'],
      [pending, 'pending'],
      [blocked, 'blocked'],
      [s.owner, 'self'],
    ] as const) {
      for (const path of [
        `/api/v1/friends/search?ownerUserId=${s.owner.userId}&q=rob`,
        `/api/v1/friends/search/catalog?ownerUserId=${s.owner.userId}`,
        `/api/v1/friends/search/members?ownerUserId=${s.owner.userId}&q=rob`,
      ]) {
        const res = await raw(viewer, path);
        expect(res.status, `${label} ${path}`).toBe(404);
        expect(res.text).toBe(base.text);
        for (const hidden of [s.robin, s.group, s.noteBoth]) expect(res.text).not.toContain(hidden);
      }
    }
  });
});

describe('imageUrl, friendPronouns, friendStatus and friendBannerUrl are strings, never null', () => {
  const TEXT_FIELDS = ['imageUrl', 'friendPronouns', 'friendStatus', 'friendBannerUrl'] as const;
  const textFields = (row: Partial<Record<(typeof TEXT_FIELDS)[number], unknown>> | undefined) =>
    Object.fromEntries(TEXT_FIELDS.map((k) => [k, row?.[k]]));
  const EMPTY = { imageUrl: '', friendPronouns: '', friendStatus: '', friendBannerUrl: '' };
  const SET = {
    imageUrl: 'https://images.example.invalid/x.png',
    friendPronouns: 'they/them',
    friendStatus: 'Secret status',
    friendBannerUrl: '/media/banners/x.png',
  };

  it('a friend that set none of them gets "" in the friend list rows (list, page, requests), the suggestion rows and the profile card', async () => {
    const me = await server.user();
    const plain = await server.user();
    // Accepted both ways under the public_friends preset, which grants friend_data read: the
    // fields are shown, and empty.
    await befriend(me, plain);
    expect(textFields(await rowOf(me, plain))).toEqual(EMPTY);
    const page = await me.api.GET('/api/v1/friends/page', { params: { query: { limit: 10 } } });
    expect(page.response.status).toBe(200);
    expect(textFields(page.data!.items.find((r) => r.friendUserId === plain.userId))).toEqual(EMPTY);
    const shownCard = await me.api.GET('/api/v1/friends/{friendUserId}', id(plain.userId));
    expect(shownCard.response.status).toBe(200);
    expect(textFields(shownCard.data)).toEqual(EMPTY);

    const asker = await server.user();
    expect(await request(asker, me)).toBe(204);
    const requests = await me.api.GET('/api/v1/friends/requests');
    expect(requests.response.status).toBe(200);
    expect(textFields(requests.data!.find((r) => r.friendUserId === asker.userId))).toEqual(EMPTY);

    const friendOfPlain = await server.user();
    await befriend(plain, friendOfPlain);
    const suggestions = await me.api.GET('/api/v1/friends/suggestions');
    expect(suggestions.response.status).toBe(200);
    expect(suggestions.data!.map((r) => r.friendUserId)).toEqual([friendOfPlain.userId]);
    expect(textFields(suggestions.data![0])).toEqual(EMPTY);
  });

  it('set values come through where they are shown, and "" again once cleared', async () => {
    const me = await server.user();
    const f = await server.user();
    await withProfile(f);
    await befriend(me, f);
    expect(textFields(await rowOf(me, f))).toEqual(SET);
    const page = await me.api.GET('/api/v1/friends/page', { params: { query: { limit: 10 } } });
    expect(textFields(page.data!.items.find((r) => r.friendUserId === f.userId))).toEqual(SET);
    expect(textFields((await me.api.GET('/api/v1/friends/{friendUserId}', id(f.userId))).data)).toEqual(SET);
    // A suggestion shows its image; the friend-data fields are never shown to a non-friend.
    const other = await server.user();
    const hop = await server.user();
    await befriend(other, hop);
    await befriend(hop, f);
    const suggested = (await other.api.GET('/api/v1/friends/suggestions')).data!;
    expect(suggested.map((r) => r.friendUserId)).toEqual([f.userId]);
    expect(textFields(suggested[0])).toEqual({
      ...EMPTY,
      imageUrl: SET.imageUrl,
    });

    const cleared = await f.api.PATCH('/api/v1/friends/profile', {
      body: { pronouns: null, status: null, bannerUrl: null, imageUrl: null },
    });
    expect(cleared.response.status).toBe(200);
    expect(textFields(await rowOf(me, f))).toEqual(EMPTY);
    expect(textFields((await me.api.GET('/api/v1/friends/{friendUserId}', id(f.userId))).data)).toEqual(EMPTY);
    expect(textFields((await other.api.GET('/api/v1/friends/suggestions')).data![0])).toEqual(EMPTY);
  });
});

describe('the account’s friend-facing profile', () => {
  it('GET and PATCH: partial, null clears, validated', async () => {
    const u = await server.user();
    const initial = await u.api.GET('/api/v1/friends/profile');
    expect(initial.data).toMatchObject({
      userId: u.userId,
      username: u.username,
      pronouns: null,
      appearInSuggestions: true,
    });
    now += 5;
    const res = await u.api.PATCH('/api/v1/friends/profile', {
      body: {
        pronouns: 'she/her',
        timezone: 'America/New_York',
        country: 'US',
        appearInSuggestions: false,
        aboutMarkdown: 'a'.repeat(10000),
      },
    });
    expect(res.response.status).toBe(200);
    expect(res.data).toMatchObject({
      pronouns: 'she/her',
      timezone: 'America/New_York',
      country: 'US',
      appearInSuggestions: false,
      updatedAt: now,
      status: null,
    });
    const cleared = await u.api.PATCH('/api/v1/friends/profile', {
      body: { pronouns: null, bannerUrl: '/media/b.png', timezone: 'europe/berlin' },
    });
    expect(cleared.data).toMatchObject({ pronouns: null, timezone: 'Europe/Berlin', bannerUrl: '/media/b.png' });
    expect((await u.api.PATCH('/api/v1/friends/profile', { body: { timezone: null } })).data).toMatchObject({
      timezone: null,
    });
    expect((await u.api.PATCH('/api/v1/friends/profile', { body: { timezone: 'Europe/Berlin' } })).data).toMatchObject({
      timezone: 'Europe/Berlin',
    });
    expect((await u.api.GET('/api/v1/friends/profile')).data).toEqual(cleared.data);
    const bad = [
      {},
      { timezone: 'Mars/Olympus' },
      { timezone: '+01:00' },
      { country: 'de' },
      { country: 'DEU' },
      { pronouns: 'x'.repeat(101) },
      { status: 'x'.repeat(281) },
      { aboutMarkdown: 'x'.repeat(10001) },
      { imageUrl: 'javascript:alert(1)' },
      { imageUrl: `https://x.example/${'a'.repeat(2048)}` },
      { displayName: 'nope' },
      { appearInSuggestions: 'yes' },
    ];
    for (const body of bad)
      expect(
        (await u.api.PATCH('/api/v1/friends/profile', { body: body as never })).response.status,
        JSON.stringify(body),
      ).toBe(400);
    const tz = await u.api.PATCH('/api/v1/friends/profile', { body: { timezone: 'Mars/Olympus' } });
    expect(tz.error).toEqual({
      code: 'BAD_REQUEST',
      message: 'timezone must be an IANA time zone name such as Europe/Berlin',
    });
    expect((await u.api.GET('/api/v1/friends/profile')).data).toEqual(cleared.data);
  });

  it('needs the friends scope (read for GET, read_write for PATCH)', async () => {
    const u = await server.user({ scopes: { friends: 'read' } });
    expect((await u.api.GET('/api/v1/friends/profile')).response.status).toBe(200);
    const res = await u.api.PATCH('/api/v1/friends/profile', { body: { status: 'x' } });
    expect(res.response.status).toBe(403);
    expect(res.error?.message).toBe('Missing API key scope: friends requires read_write');
    const none = await server.user({ scopes: { members: 'read' } });
    expect((await none.api.GET('/api/v1/friends')).response.status).toBe(403);
  });
});

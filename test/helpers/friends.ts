/**
 * Friendships and sharing for friend-route tests, through the public API: the relationship matrix
 * of the privacy tests (none, pending each way, accepted with or without a shared bucket, blocked
 * each way, revoked), buckets with given permissions, and assigning buckets to friends and content.
 */
import { expect } from 'vitest';
import type { PermissionGroup, PermissionLevel } from '../../server/core/context.ts';
import type { TestServer, TestUser } from './server.ts';

export type Perms = Partial<Record<PermissionGroup, PermissionLevel>>;

/** Every relationship a viewer can have with an owner, as the privacy matrices name them. */
export const RELATIONSHIPS = [
  'none',
  'pending_outgoing',
  'pending_incoming',
  'accepted',
  'blocked_by_owner',
  'blocked_by_viewer',
  'revoked',
] as const;
export type Relationship = (typeof RELATIONSHIPS)[number];

const path = (friendUserId: string) => ({ params: { path: { friendUserId } } });

export async function requestFriend(from: TestUser, to: TestUser): Promise<void> {
  const res = await from.api.POST('/api/v1/friends/{friendUserId}/request', path(to.userId));
  expect(res.response.status, JSON.stringify(res.error)).toBe(204);
}

export async function acceptFriend(by: TestUser, requester: TestUser): Promise<void> {
  const res = await by.api.POST('/api/v1/friends/requests/{requesterUserId}/accept', {
    params: { path: { requesterUserId: requester.userId } },
  });
  expect(res.response.status, JSON.stringify(res.error)).toBe(204);
}

export async function befriend(owner: TestUser, viewer: TestUser): Promise<void> {
  await requestFriend(viewer, owner);
  await acceptFriend(owner, viewer);
}

/** Puts `viewer` in the given relationship with `owner` (both start unrelated). */
export async function relate(owner: TestUser, viewer: TestUser, relationship: Relationship): Promise<void> {
  switch (relationship) {
    case 'none':
      return;
    case 'pending_outgoing':
      return requestFriend(viewer, owner);
    case 'pending_incoming':
      return requestFriend(owner, viewer);
    case 'accepted':
      return befriend(owner, viewer);
    case 'blocked_by_owner':
    case 'blocked_by_viewer': {
      await befriend(owner, viewer);
      const [by, other] = relationship === 'blocked_by_owner' ? [owner, viewer] : [viewer, owner];
      const res = await by.api.POST('/api/v1/friends/{friendUserId}/block', path(other.userId));
      expect(res.response.status, JSON.stringify(res.error)).toBe(204);
      return;
    }
    case 'revoked': {
      await befriend(owner, viewer);
      const res = await owner.api.POST('/api/v1/friends/{friendUserId}/revoke', path(viewer.userId));
      expect(res.response.status, JSON.stringify(res.error)).toBe(204);
      return;
    }
  }
}

/** A custom bucket of `owner` whose groups are `none` except those given. */
export async function createBucket(owner: TestUser, perms: Perms, name = 'Test bucket'): Promise<string> {
  const none = Object.fromEntries(
    [
      'members_view',
      'member_profile',
      'member_avatar',
      'member_notes',
      'member_custom_fields',
      'member_statuses',
      'member_relationships',
      'groups',
      'front',
      'friend_data',
    ].map((g) => [g, 'none']),
  );
  const res = await owner.api.POST('/api/v1/privacy-buckets', {
    body: { name, friendPermissions: { ...none, ...perms } },
  });
  expect(res.response.status, JSON.stringify(res.error)).toBe(201);
  return res.data!._id;
}

/** Replaces the buckets `owner` gives the friend `viewer`. */
export async function giveFriend(owner: TestUser, viewer: TestUser, bucketIds: string[]): Promise<void> {
  const res = await owner.api.PUT('/api/v1/privacy-buckets/assignments/friends/{friendUserId}', {
    params: { path: { friendUserId: viewer.userId } },
    body: { bucketIds },
  });
  expect(res.response.status, JSON.stringify(res.error)).toBe(204);
}

/** Replaces a member's buckets. */
export async function shareMember(owner: TestUser, memberId: string, bucketIds: string[]): Promise<void> {
  const res = await owner.api.PUT('/api/v1/privacy-buckets/assignments/members/{memberId}', {
    params: { path: { memberId } },
    body: { bucketIds },
  });
  expect(res.response.status, JSON.stringify(res.error)).toBe(204);
}

/**
 * An owner and a viewer who are accepted friends sharing one bucket with `perms` (the viewer holds
 * only that bucket): the usual starting point of a friend-route test.
 */
export async function friendsSharing(
  server: TestServer,
  perms: Perms,
): Promise<{ owner: TestUser; viewer: TestUser; bucketId: string }> {
  const owner = await server.user();
  const viewer = await server.user();
  await befriend(owner, viewer);
  const bucketId = await createBucket(owner, perms);
  await giveFriend(owner, viewer, [bucketId]);
  return { owner, viewer, bucketId };
}

/** Fails when any of `hidden` (ids, names, texts) appears anywhere in `body`. */
export function expectNoneOf(body: unknown, hidden: readonly string[]): void {
  const text = typeof body === 'string' ? body : JSON.stringify(body ?? null);
  for (const value of hidden) expect(text, `hidden value ${value} leaked`).not.toContain(value);
}

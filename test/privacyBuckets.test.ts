/** Privacy buckets: the buckets, their defaults, reverse lists, bulk changes and the assignment routes. */
import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import type { ApiClient } from '../client/index.ts';
import {
  activeSide,
  createFolder,
  createGroup,
  createMember,
  createSide,
  createSub,
  UNKNOWN_ID,
} from './helpers/fixtures.ts';
import { captureStatements, REQUEST_WORK } from './helpers/plans.ts';
import { bearer, useServer, type TestUser } from './helpers/server.ts';

let now = 1_800_000_000_000;
const server = useServer({ clock: () => now });
const knex = () => server.deps.db.knex;

const FULL = {
  members_view: 'read_write',
  member_profile: 'read_write',
  member_avatar: 'read_write',
  member_notes: 'read_write',
  member_custom_fields: 'read_write',
  member_statuses: 'read_write',
  member_relationships: 'read_write',
  groups: 'read_write',
  front: 'read_write',
  friend_data: 'read_write',
} as const;

async function bucket(api: ApiClient, name = 'Close friends', extra: Record<string, unknown> = {}): Promise<string> {
  const { data, error, response } = await api.POST('/api/v1/privacy-buckets', { body: { name, ...extra } });
  expect(response.status, JSON.stringify(error)).toBe(201);
  return data!._id;
}

async function customField(api: ApiClient, name = 'Role'): Promise<string> {
  const { data, response } = await api.POST('/api/v1/custom-fields', { body: { name, type: 'text' } });
  expect(response.status).toBe(201);
  return data!.id;
}

async function status(api: ApiClient, name = 'Resting'): Promise<string> {
  const { data, response } = await api.POST('/api/v1/member-statuses', { body: { name, color: '#90A4AE' } });
  expect(response.status).toBe(201);
  return data!.id;
}

/** A friendship as the friends area stores it: one row per side. */
async function befriend(
  a: TestUser,
  b: TestUser,
  state: 'accepted' | 'pending' | 'revoked' | 'blocked',
): Promise<void> {
  const row = (userId: string, friendUserId: string, side: 'outgoing' | 'incoming') => ({
    id: randomUUID(),
    user_id: userId,
    friend_user_id: friendUserId,
    status: state,
    direction: state === 'pending' ? side : null,
    created_at: now,
    updated_at: now,
    accepted_at: state === 'accepted' ? now : null,
  });
  await knex()('friendships').insert([row(a.userId, b.userId, 'outgoing'), row(b.userId, a.userId, 'incoming')]);
}

async function assignmentRows(where: Record<string, unknown>): Promise<number> {
  const row = await knex()('privacy_bucket_assignments').where(where).count<{ c: string | number }[]>('* as c').first();
  return Number(row!.c);
}

async function memberBuckets(api: ApiClient, memberId: string): Promise<string[]> {
  const { data, response } = await api.GET('/api/v1/privacy-buckets/assignments/members/{memberId}', {
    params: { path: { memberId } },
  });
  expect(response.status).toBe(200);
  return data!.bucketIds;
}

/** The body of a 404 says nothing of what it hides. */
function expectHidden(res: { response: Response; error?: unknown; data?: unknown }, ...hidden: string[]): void {
  expect(res.response.status).toBe(404);
  const text = JSON.stringify(res.error ?? res.data ?? null);
  for (const h of hidden) expect(text).not.toContain(h);
}

describe('the bucket list and presets', () => {
  it('the first list creates the presets (oldest first), sets new_friend to public_friends and no content default; later lists add nothing', async () => {
    const { api } = await server.user();
    const first = await api.GET('/api/v1/privacy-buckets');
    expect(first.response.status).toBe(200);
    expect(first.data!.map((b) => b.slug)).toEqual(['public_friends', 'trusted_friend']);
    const [friends, trusted] = first.data!;
    expect(friends).toMatchObject({ name: 'Friends', builtin: true, icon: 'users', iconColorPreset: 'blue' });
    expect(friends!.friendPermissions).toEqual({
      members_view: 'read',
      member_profile: 'read',
      member_avatar: 'read',
      member_notes: 'none',
      member_custom_fields: 'none',
      member_statuses: 'read',
      member_relationships: 'none',
      groups: 'read',
      front: 'read',
      friend_data: 'read',
    });
    expect(trusted).toMatchObject({ name: 'Trusted friends', builtin: true });
    expect(trusted!.friendPermissions).toMatchObject({
      member_notes: 'read_write',
      front: 'read_write',
      member_custom_fields: 'read_write',
    });
    expect(friends!.createdAt).toBeLessThan(trusted!.createdAt);

    expect(
      (await api.GET('/api/v1/privacy-buckets/defaults/{kind}', { params: { path: { kind: 'new_friend' } } })).data,
    ).toEqual({ kind: 'new_friend', bucketIds: [friends!._id] });
    for (const kind of [
      'new_member',
      'new_group',
      'new_directory',
      'new_custom_field',
      'new_profile_section',
    ] as const) {
      expect((await api.GET('/api/v1/privacy-buckets/defaults/{kind}', { params: { path: { kind } } })).data).toEqual({
        kind,
        bucketIds: [],
      });
    }

    now += 1000;
    const custom = await bucket(api, 'Work');
    now += 1000;
    const custom2 = await bucket(api, 'Art club');
    const again = await api.GET('/api/v1/privacy-buckets');
    expect(again.data!.map((b) => b._id)).toEqual([friends!._id, trusted!._id, custom, custom2]);
  });

  it('concurrent first lists never duplicate a preset or the new_friend default', async () => {
    const user = await server.user();
    const lists = await Promise.all(Array.from({ length: 8 }, () => user.api.GET('/api/v1/privacy-buckets')));
    for (const l of lists) expect(l.response.status).toBe(200);
    const ids = new Set(lists.flatMap((l) => l.data!.map((b) => b._id)));
    expect(ids.size).toBe(2);
    const rows: Array<{ slug: string; n: string | number }> = await knex()('privacy_buckets')
      .where({ user_id: user.userId })
      .groupBy('slug')
      .select('slug')
      .count('* as n');
    expect(rows.map((r) => [r.slug, Number(r.n)]).sort()).toEqual([
      ['public_friends', 1],
      ['trusted_friend', 1],
    ]);
    const defaults = await knex()('privacy_bucket_defaults').where({ user_id: user.userId });
    expect(defaults).toHaveLength(1);
  });

  it('needs the privacyBuckets scope: 403 without it', async () => {
    const { api } = await server.user({ scopes: { members: 'read_write' } });
    const res = await api.GET('/api/v1/privacy-buckets');
    expect(res.response.status).toBe(403);
    expect(res.error).toEqual({ code: 'FORBIDDEN', message: 'Missing API key scope: privacyBuckets requires read' });
    const readOnly = await server.user({ scopes: { privacyBuckets: 'read' } });
    const write = await readOnly.api.POST('/api/v1/privacy-buckets', { body: { name: 'x' } });
    expect(write.error).toEqual({
      code: 'FORBIDDEN',
      message: 'Missing API key scope: privacyBuckets requires read_write',
    });
  });
});

describe('create, get, update and delete a bucket', () => {
  it('create: trimmed name, u_ slug, full friend access by default, a partial map merged over it', async () => {
    const { api } = await server.user();
    const plain = await api.POST('/api/v1/privacy-buckets', { body: { name: '  Work friends  ' } });
    expect(plain.response.status).toBe(201);
    expect(plain.data).toEqual({
      _id: expect.any(String),
      name: 'Work friends',
      description: '',
      icon: null,
      iconColorPreset: null,
      slug: expect.stringMatching(/^u_[0-9a-f]{16}$/),
      builtin: false,
      friendPermissions: FULL,
      createdAt: now,
      updatedAt: now,
    });
    const full = await api.POST('/api/v1/privacy-buckets', {
      body: {
        name: 'Close',
        description: 'd',
        icon: 'heart',
        iconColorPreset: 'pink',
        friendPermissions: { member_notes: 'none', front: 'read' },
      },
    });
    expect(full.data).toMatchObject({
      name: 'Close',
      description: 'd',
      icon: 'heart',
      iconColorPreset: 'pink',
      friendPermissions: { ...FULL, member_notes: 'none', front: 'read' },
    });
    expect(full.data!.slug).not.toBe(plain.data!.slug);
    expect(
      (await api.GET('/api/v1/privacy-buckets/{bucketId}', { params: { path: { bucketId: full.data!._id } } })).data,
    ).toEqual(full.data);
  });

  it('create limits: name 1–80 and not blank, description at most 500, strict body and map', async () => {
    const { api } = await server.user();
    expect(
      (await api.POST('/api/v1/privacy-buckets', { body: { name: 'x'.repeat(80), description: 'd'.repeat(500) } }))
        .response.status,
    ).toBe(201);
    const bad: unknown[] = [
      { name: '' },
      { name: 'x'.repeat(81) },
      { name: '   ' },
      { name: 'ok', description: 'd'.repeat(501) },
      {},
      { name: 'ok', colour: 'red' },
      { name: 'ok', friendPermissions: { everything: 'read' } },
      { name: 'ok', friendPermissions: { front: 'write' } },
      { name: 'ok', icon: '' },
    ];
    for (const body of bad) {
      const res = await api.POST('/api/v1/privacy-buckets', { body: body as never });
      expect(res.response.status, JSON.stringify(body)).toBe(400);
      expect(res.error!.code).toBe('BAD_REQUEST');
    }
  });

  it('update: partial fields, a partial permission map merges, null clears the icon; empty body 400', async () => {
    const { api } = await server.user();
    const id = await bucket(api, 'Close', {
      icon: 'heart',
      iconColorPreset: 'pink',
      friendPermissions: { member_notes: 'none' },
    });
    const created = now;
    now += 50;
    const path = { params: { path: { bucketId: id } } };
    const res = await api.PATCH('/api/v1/privacy-buckets/{bucketId}', {
      ...path,
      body: { name: ' Inner ', icon: null, friendPermissions: { front: 'none', groups: 'read' } },
    });
    expect(res.response.status).toBe(200);
    expect(res.data).toMatchObject({
      _id: id,
      name: 'Inner',
      icon: null,
      iconColorPreset: 'pink',
      description: '',
      createdAt: created,
      updatedAt: now,
      friendPermissions: { ...FULL, member_notes: 'none', front: 'none', groups: 'read' },
    });
    const again = await api.PATCH('/api/v1/privacy-buckets/{bucketId}', {
      ...path,
      body: { friendPermissions: { member_notes: 'read' }, description: 'x' },
    });
    expect(again.data!.friendPermissions).toEqual({ ...FULL, member_notes: 'read', front: 'none', groups: 'read' });
    expect(again.data!.description).toBe('x');
    for (const body of [
      {},
      { name: '' },
      { name: 'x'.repeat(81) },
      { description: 'd'.repeat(501) },
      { slug: 'u_mine' },
      { builtin: false },
    ]) {
      expect(
        (await api.PATCH('/api/v1/privacy-buckets/{bucketId}', { ...path, body: body as never })).response.status,
        JSON.stringify(body),
      ).toBe(400);
    }
  });

  it('built-ins may be renamed and re-permissioned (the slug stays) but not deleted', async () => {
    const { api } = await server.user();
    const friends = (await api.GET('/api/v1/privacy-buckets')).data![0]!;
    const path = { params: { path: { bucketId: friends._id } } };
    const res = await api.PATCH('/api/v1/privacy-buckets/{bucketId}', {
      ...path,
      body: { name: 'Everyone', friendPermissions: { front: 'none' } },
    });
    expect(res.data).toMatchObject({
      name: 'Everyone',
      slug: 'public_friends',
      builtin: true,
      friendPermissions: { ...friends.friendPermissions, front: 'none' },
    });
    const del = await api.DELETE('/api/v1/privacy-buckets/{bucketId}', path);
    expect(del.response.status).toBe(400);
    expect(del.error).toEqual({ code: 'BAD_REQUEST', message: 'Built-in privacy buckets cannot be deleted' });
    expect((await api.GET('/api/v1/privacy-buckets/{bucketId}', path)).response.status).toBe(200);
  });

  it('unknown ids and another account’s bucket are 404 on every bucket route, revealing nothing', async () => {
    const { api } = await server.user();
    const other = await server.user();
    const theirs = await bucket(other.api, 'Their secret bucket');
    for (const bucketId of [theirs, UNKNOWN_ID]) {
      const path = { params: { path: { bucketId } } };
      expectHidden(await api.GET('/api/v1/privacy-buckets/{bucketId}', path), theirs, 'Their secret');
      expectHidden(
        await api.PATCH('/api/v1/privacy-buckets/{bucketId}', { ...path, body: { name: 'Mine now' } }),
        theirs,
        'Their secret',
      );
      expectHidden(await api.DELETE('/api/v1/privacy-buckets/{bucketId}', path), theirs);
      expectHidden(await api.GET('/api/v1/privacy-buckets/{bucketId}/members', path), theirs);
      expectHidden(await api.GET('/api/v1/privacy-buckets/{bucketId}/groups', path), theirs);
      expectHidden(await api.GET('/api/v1/privacy-buckets/{bucketId}/directories', path), theirs);
    }
    const res = await api.GET('/api/v1/privacy-buckets/{bucketId}', { params: { path: { bucketId: theirs } } });
    expect(res.error).toEqual({ code: 'NOT_FOUND', message: 'Privacy bucket not found' });
    expect(
      (await other.api.GET('/api/v1/privacy-buckets/{bucketId}', { params: { path: { bucketId: theirs } } })).data!
        .name,
    ).toBe('Their secret bucket');
    expect((await api.GET('/api/v1/privacy-buckets')).data!.map((b) => b._id)).not.toContain(theirs);
  });

  it('deleting a custom bucket removes its assignments and its default entries, and nothing else', async () => {
    const user = await server.user();
    const friend = await server.user();
    const { api } = user;
    const gone = await bucket(api, 'Gone');
    const kept = await bucket(api, 'Kept');
    await befriend(user, friend, 'accepted');
    const m = await createMember(api);
    const g = await createGroup(api);
    const body = { bucketIds: [gone, kept] };
    await api.PUT('/api/v1/privacy-buckets/defaults/{kind}', { params: { path: { kind: 'new_member' } }, body });
    await api.PUT('/api/v1/privacy-buckets/defaults/{kind}', {
      params: { path: { kind: 'new_group' } },
      body: { bucketIds: [gone] },
    });
    await api.PUT('/api/v1/privacy-buckets/assignments/members/{memberId}', {
      params: { path: { memberId: m } },
      body,
    });
    await api.PUT('/api/v1/privacy-buckets/assignments/profile-sections/{memberId}/{sectionKey}', {
      params: { path: { memberId: m, sectionKey: 'about' } },
      body,
    });
    await api.PUT('/api/v1/privacy-buckets/assignments/groups/{groupId}', {
      params: { path: { groupId: g } },
      body: { bucketIds: [gone] },
    });
    await api.PUT('/api/v1/privacy-buckets/assignments/friends/{friendUserId}', {
      params: { path: { friendUserId: friend.userId } },
      body,
    });
    expect(await assignmentRows({ bucket_id: gone })).toBe(4);

    expect(
      (await api.DELETE('/api/v1/privacy-buckets/{bucketId}', { params: { path: { bucketId: gone } } })).response
        .status,
    ).toBe(204);
    expect(
      (await api.GET('/api/v1/privacy-buckets/{bucketId}', { params: { path: { bucketId: gone } } })).response.status,
    ).toBe(404);
    expect(await assignmentRows({ bucket_id: gone })).toBe(0);
    expect(await knex()('privacy_bucket_defaults').where({ bucket_id: gone })).toEqual([]);
    expect(await memberBuckets(api, m)).toEqual([kept]);
    expect(
      (
        await api.GET('/api/v1/privacy-buckets/assignments/friends/{friendUserId}', {
          params: { path: { friendUserId: friend.userId } },
        })
      ).data!.bucketIds,
    ).toEqual([kept]);
    expect(
      (await api.GET('/api/v1/privacy-buckets/assignments/groups/{groupId}', { params: { path: { groupId: g } } }))
        .data!.bucketIds,
    ).toEqual([]);
    expect(
      (await api.GET('/api/v1/privacy-buckets/defaults/{kind}', { params: { path: { kind: 'new_member' } } })).data!
        .bucketIds,
    ).toEqual([kept]);
    expect(
      (await api.GET('/api/v1/privacy-buckets/defaults/{kind}', { params: { path: { kind: 'new_group' } } })).data!
        .bucketIds,
    ).toEqual([]);
  });
});

describe('POST /privacy-buckets cost', () => {
  it('creates a bucket in one statement: the row and privacy_bucket.created', async () => {
    const { api, userId } = await server.user();
    await api.POST('/api/v1/privacy-buckets', { body: { name: 'Warm-up' } }); // warms the key cache
    const knex = server.deps.db.knex;
    let status = 0;
    let body: unknown;
    const statements = await captureStatements(knex, REQUEST_WORK, async () => {
      const created = await api.POST('/api/v1/privacy-buckets', {
        body: { name: 'Close', friendPermissions: { front: 'read' } },
      });
      status = created.response.status;
      body = created.data;
    });
    expect(statements.map((st) => st.sql.trim().split(/\s+/).slice(0, 3).join(' '))).toEqual(['with inserted as']);
    expect(status).toBe(201);
    const id = (body as { _id: string })._id;
    expect(body).toEqual({
      _id: id,
      name: 'Close',
      description: '',
      icon: null,
      iconColorPreset: null,
      slug: expect.stringMatching(/^u_[0-9a-f]{16}$/),
      builtin: false,
      friendPermissions: { ...FULL, front: 'read' },
      createdAt: now,
      updatedAt: now,
    });
    const { rows: events } = await knex.raw<{ rows: unknown[] }>(
      `select 1 from events where account_id = ? and type = 'privacy_bucket.created' and data->>'id' = ?`,
      [userId, id],
    );
    expect(events).toHaveLength(1);
  });
});

describe('defaults', () => {
  it('PUT replaces the set (oldest bucket first on GET); foreign ids 400 and nothing changes; kind and body are validated', async () => {
    const { api } = await server.user();
    const other = await server.user();
    const b1 = await bucket(api, 'One');
    now += 1;
    const b2 = await bucket(api, 'Two');
    const theirs = await bucket(other.api, 'Theirs');
    const path = { params: { path: { kind: 'new_group' as const } } };
    expect(
      (await api.PUT('/api/v1/privacy-buckets/defaults/{kind}', { ...path, body: { bucketIds: [b2, b1] } })).response
        .status,
    ).toBe(204);
    expect((await api.GET('/api/v1/privacy-buckets/defaults/{kind}', path)).data).toEqual({
      kind: 'new_group',
      bucketIds: [b1, b2],
    });
    await api.PUT('/api/v1/privacy-buckets/defaults/{kind}', { ...path, body: { bucketIds: [b2] } });
    expect((await api.GET('/api/v1/privacy-buckets/defaults/{kind}', path)).data!.bucketIds).toEqual([b2]);

    for (const bucketIds of [[b1, theirs], [UNKNOWN_ID]]) {
      const res = await api.PUT('/api/v1/privacy-buckets/defaults/{kind}', { ...path, body: { bucketIds } });
      expect(res.response.status).toBe(400);
      expect(res.error!.message).toBe(`bucketIds: not a privacy bucket of this account: ${bucketIds.at(-1)}`);
    }
    expect((await api.GET('/api/v1/privacy-buckets/defaults/{kind}', path)).data!.bucketIds).toEqual([b2]);
    for (const body of [
      { bucketIds: [] },
      { bucketIds: [b1, b1] },
      {},
      { bucketIds: ['nope'] },
      { bucketIds: [b1], extra: 1 },
    ]) {
      expect(
        (await api.PUT('/api/v1/privacy-buckets/defaults/{kind}', { ...path, body: body as never })).response.status,
        JSON.stringify(body),
      ).toBe(400);
    }
    for (const kind of ['new_note', 'members', 'NEW_MEMBER']) {
      expect(
        (await api.GET('/api/v1/privacy-buckets/defaults/{kind}', { params: { path: { kind: kind as never } } }))
          .response.status,
      ).toBe(400);
      expect(
        (
          await api.PUT('/api/v1/privacy-buckets/defaults/{kind}', {
            params: { path: { kind: kind as never } },
            body: { bucketIds: [b1] },
          })
        ).response.status,
      ).toBe(400);
    }
  });

  it('new members (and their five profile sections), groups, folders and custom fields get the defaults of their kind', async () => {
    const { api } = await server.user();
    const b1 = await bucket(api, 'One');
    now += 1;
    const b2 = await bucket(api, 'Two');
    const put = (
      kind: 'new_member' | 'new_group' | 'new_directory' | 'new_custom_field' | 'new_profile_section',
      bucketIds: string[],
    ) => api.PUT('/api/v1/privacy-buckets/defaults/{kind}', { params: { path: { kind } }, body: { bucketIds } });
    await put('new_member', [b1]);
    await put('new_profile_section', [b2]);
    await put('new_group', [b1, b2]);
    await put('new_directory', [b2]);
    await put('new_custom_field', [b1]);

    const m = await createMember(api);
    const g = await createGroup(api);
    const f = await createFolder(api);
    const field = await customField(api);
    expect(await memberBuckets(api, m)).toEqual([b1]);
    for (const sectionKey of ['avatar', 'displayName', 'pronouns', 'about', 'profileStyle'] as const) {
      const res = await api.GET('/api/v1/privacy-buckets/assignments/profile-sections/{memberId}/{sectionKey}', {
        params: { path: { memberId: m, sectionKey } },
      });
      expect(res.data).toEqual({ memberId: m, sectionKey, bucketIds: [b2] });
    }
    expect(
      (await api.GET('/api/v1/privacy-buckets/assignments/groups/{groupId}', { params: { path: { groupId: g } } }))
        .data,
    ).toEqual({ groupId: g, bucketIds: [b1, b2] });
    expect(
      (
        await api.GET('/api/v1/privacy-buckets/assignments/directories/{directoryId}', {
          params: { path: { directoryId: f } },
        })
      ).data,
    ).toEqual({ directoryId: f, bucketIds: [b2] });
    expect(
      (
        await api.GET('/api/v1/privacy-buckets/assignments/custom-fields/{fieldDefinitionId}', {
          params: { path: { fieldDefinitionId: field } },
        })
      ).data,
    ).toEqual({
      fieldDefinitionId: field,
      bucketIds: [b1],
    });
    // Changing a default later does not touch what exists.
    await put('new_member', [b2]);
    expect(await memberBuckets(api, m)).toEqual([b1]);
    expect(await memberBuckets(api, await createMember(api))).toEqual([b2]);
  });

  it('without defaults new content carries no bucket (seen by no friend)', async () => {
    const { api } = await server.user();
    await api.GET('/api/v1/privacy-buckets'); // presets exist; only new_friend has a default
    const m = await createMember(api);
    const g = await createGroup(api);
    const f = await createFolder(api);
    const field = await customField(api);
    expect(await memberBuckets(api, m)).toEqual([]);
    expect(await assignmentRows({ content_id: m })).toBe(0);
    for (const id of [g, f, field]) expect(await assignmentRows({ content_id: id })).toBe(0);
  });
});

describe('reverse lists', () => {
  it('members, groups and folders carrying a bucket: live ones, in creation order, not through profile sections', async () => {
    const { api } = await server.user();
    const b = await bucket(api);
    const members: string[] = [];
    for (let i = 0; i < 3; i++) {
      now += 1;
      members.push(await createMember(api, `M${i}`));
    }
    const sectionOnly = await createMember(api, 'Section only');
    const groups: string[] = [];
    for (const name of ['G1', 'G2']) {
      now += 1; // distinct creation times: the list is in creation order
      groups.push(await createGroup(api, name));
    }
    const folder = await createFolder(api, 'F1');
    const bulk = (path: '/api/v1/privacy-buckets/bulk/members', ids: string[]) =>
      api.POST(path, { body: { bucketId: b, mode: 'add', memberIds: ids } });
    await bulk('/api/v1/privacy-buckets/bulk/members', [members[2]!, members[0]!, members[1]!]);
    await api.PUT('/api/v1/privacy-buckets/assignments/profile-sections/{memberId}/{sectionKey}', {
      params: { path: { memberId: sectionOnly, sectionKey: 'avatar' } },
      body: { bucketIds: [b] },
    });
    await api.POST('/api/v1/privacy-buckets/bulk/groups', { body: { bucketId: b, mode: 'add', groupIds: groups } });
    await api.POST('/api/v1/privacy-buckets/bulk/directories', {
      body: { bucketId: b, mode: 'add', directoryIds: [folder] },
    });
    const path = { params: { path: { bucketId: b } } };
    expect((await api.GET('/api/v1/privacy-buckets/{bucketId}/members', path)).data).toEqual({
      bucketId: b,
      memberIds: members,
    });
    expect((await api.GET('/api/v1/privacy-buckets/{bucketId}/groups', path)).data).toEqual({
      bucketId: b,
      groupIds: groups,
    });
    expect((await api.GET('/api/v1/privacy-buckets/{bucketId}/directories', path)).data).toEqual({
      bucketId: b,
      directoryIds: [folder],
    });

    // Trashed content leaves the lists (and comes back with a restore).
    expect(
      (await api.DELETE('/api/v1/members/{memberId}', { params: { path: { memberId: members[1]! } } })).response.status,
    ).toBe(204);
    expect(
      (await api.DELETE('/api/v1/groups/{groupId}', { params: { path: { groupId: groups[0]! } } })).response.status,
    ).toBe(204);
    expect((await api.GET('/api/v1/privacy-buckets/{bucketId}/members', path)).data!.memberIds).toEqual([
      members[0],
      members[2],
    ]);
    expect((await api.GET('/api/v1/privacy-buckets/{bucketId}/groups', path)).data!.groupIds).toEqual([groups[1]]);

    const empty = await bucket(api, 'Empty');
    for (const [route, key] of [
      ['members', 'memberIds'],
      ['groups', 'groupIds'],
      ['directories', 'directoryIds'],
    ] as const) {
      const res = await api.GET(`/api/v1/privacy-buckets/{bucketId}/${route}`, {
        params: { path: { bucketId: empty } },
      });
      expect(res.data).toEqual({ bucketId: empty, [key]: [] });
    }
  });

  it('a path that is neither a bucket id nor a kind is a 400', async () => {
    const { apiKey } = await server.user();
    const res = await server.fetch('/api/v1/privacy-buckets/defaults/members', { headers: bearer(apiKey) });
    expect(res.status).toBe(400);
    expect(((await res.json()) as { code: string }).code).toBe('BAD_REQUEST');
  });
});

describe('bulk', () => {
  it('members: add is idempotent, remove takes only the named ones, removing a missing assignment is fine', async () => {
    const { api } = await server.user();
    const b = await bucket(api);
    now += 1;
    const other = await bucket(api, 'Other');
    const [m1, m2, m3] = [await createMember(api, 'A'), await createMember(api, 'B'), await createMember(api, 'C')];
    await api.PUT('/api/v1/privacy-buckets/assignments/members/{memberId}', {
      params: { path: { memberId: m1 } },
      body: { bucketIds: [other] },
    });
    const send = (mode: 'add' | 'remove', memberIds: string[]) =>
      api.POST('/api/v1/privacy-buckets/bulk/members', { body: { bucketId: b, mode, memberIds } });
    expect((await send('add', [m1, m2])).response.status).toBe(204);
    expect((await send('add', [m1, m2, m3])).response.status).toBe(204);
    expect(await memberBuckets(api, m1)).toEqual([b, other]);
    expect(await assignmentRows({ bucket_id: b })).toBe(3);
    expect((await send('remove', [m1, m3])).response.status).toBe(204);
    expect((await send('remove', [m1])).response.status).toBe(204);
    expect(await memberBuckets(api, m1)).toEqual([other]);
    expect(await memberBuckets(api, m2)).toEqual([b]);
    expect(await memberBuckets(api, m3)).toEqual([]);
  });

  it('groups and folders: add and remove, each only of its own kind', async () => {
    const { api } = await server.user();
    const b = await bucket(api);
    const g = await createGroup(api);
    const f = await createFolder(api);
    expect(
      (await api.POST('/api/v1/privacy-buckets/bulk/groups', { body: { bucketId: b, mode: 'add', groupIds: [g] } }))
        .response.status,
    ).toBe(204);
    expect(
      (
        await api.POST('/api/v1/privacy-buckets/bulk/directories', {
          body: { bucketId: b, mode: 'add', directoryIds: [f] },
        })
      ).response.status,
    ).toBe(204);
    const asFolder = await api.POST('/api/v1/privacy-buckets/bulk/directories', {
      body: { bucketId: b, mode: 'add', directoryIds: [g] },
    });
    expect(asFolder.response.status).toBe(400);
    expect(asFolder.error!.message).toBe(`directoryIds: not a folder of this account: ${g}`);
    const asGroup = await api.POST('/api/v1/privacy-buckets/bulk/groups', {
      body: { bucketId: b, mode: 'add', groupIds: [f] },
    });
    expect(asGroup.error!.message).toBe(`groupIds: not a group of this account: ${f}`);
    expect(
      (await api.GET('/api/v1/privacy-buckets/{bucketId}/groups', { params: { path: { bucketId: b } } })).data!
        .groupIds,
    ).toEqual([g]);
    expect(
      (await api.POST('/api/v1/privacy-buckets/bulk/groups', { body: { bucketId: b, mode: 'remove', groupIds: [g] } }))
        .response.status,
    ).toBe(204);
    expect(
      (
        await api.POST('/api/v1/privacy-buckets/bulk/directories', {
          body: { bucketId: b, mode: 'remove', directoryIds: [f] },
        })
      ).response.status,
    ).toBe(204);
    expect(await assignmentRows({ bucket_id: b })).toBe(0);
  });

  it('friends: accepted and pending friendships only', async () => {
    const user = await server.user();
    const [accepted, pending, revoked, blocked, stranger] = await Promise.all(
      Array.from({ length: 5 }, () => server.user()),
    );
    await befriend(user, accepted!, 'accepted');
    await befriend(user, pending!, 'pending');
    await befriend(user, revoked!, 'revoked');
    await befriend(user, blocked!, 'blocked');
    const b = await bucket(user.api);
    const send = (mode: 'add' | 'remove', friendUserIds: string[]) =>
      user.api.POST('/api/v1/privacy-buckets/bulk/friends', { body: { bucketId: b, mode, friendUserIds } });
    expect((await send('add', [accepted!.userId, pending!.userId])).response.status).toBe(204);
    for (const bad of [revoked!, blocked!, stranger!]) {
      const res = await send('add', [accepted!.userId, bad.userId]);
      expect(res.response.status).toBe(400);
      expect(res.error!.message).toBe(`friendUserIds: not a friend of this account: ${bad.userId}`);
    }
    expect(await assignmentRows({ bucket_id: b, kind: 'friend' })).toBe(2);
    const get = (friendUserId: string) =>
      user.api.GET('/api/v1/privacy-buckets/assignments/friends/{friendUserId}', {
        params: { path: { friendUserId } },
      });
    expect((await get(pending!.userId)).data).toEqual({ friendUserId: pending!.userId, bucketIds: [b] });
    expect((await send('remove', [pending!.userId])).response.status).toBe(204);
    expect((await get(pending!.userId)).data!.bucketIds).toEqual([]);
    expect((await get(accepted!.userId)).data!.bucketIds).toEqual([b]);
  });

  it('one foreign or trashed id, or a foreign bucket, is a 400 naming it, and nothing changes', async () => {
    const { api } = await server.user();
    const other = await server.user();
    const b = await bucket(api);
    const theirBucket = await bucket(other.api, 'Theirs');
    const mine = [await createMember(api, 'A'), await createMember(api, 'B')];
    const trashed = await createMember(api, 'T');
    await api.DELETE('/api/v1/members/{memberId}', { params: { path: { memberId: trashed } } });
    const theirs = await createMember(other.api, 'Theirs');
    await api.POST('/api/v1/privacy-buckets/bulk/members', {
      body: { bucketId: b, mode: 'add', memberIds: [mine[0]!] },
    });
    for (const [mode, foreign] of [
      ['add', theirs],
      ['add', trashed],
      ['add', UNKNOWN_ID],
      ['remove', theirs],
    ] as const) {
      const res = await api.POST('/api/v1/privacy-buckets/bulk/members', {
        body: { bucketId: b, mode, memberIds: [...mine, foreign] },
      });
      expect(res.response.status).toBe(400);
      expect(res.error).toEqual({
        code: 'BAD_REQUEST',
        message: `memberIds: not a member of this account: ${foreign}`,
      });
    }
    const two = await api.POST('/api/v1/privacy-buckets/bulk/members', {
      body: { bucketId: b, mode: 'add', memberIds: [theirs, mine[1]!, UNKNOWN_ID] },
    });
    expect(two.error!.message).toBe(`memberIds: not a member of this account: ${theirs} (and 1 more)`);
    const foreignBucket = await api.POST('/api/v1/privacy-buckets/bulk/members', {
      body: { bucketId: theirBucket, mode: 'add', memberIds: mine },
    });
    expect(foreignBucket.response.status).toBe(400);
    expect(foreignBucket.error!.message).toBe(`bucketId: not a privacy bucket of this account: ${theirBucket}`);
    expect(await assignmentRows({ bucket_id: b })).toBe(1);
    expect(await memberBuckets(api, mine[0]!)).toEqual([b]);
    expect(await assignmentRows({ bucket_id: theirBucket })).toBe(0);
  });

  it('limits: 1–250 unique ids, a known mode, a strict body', async () => {
    const { api } = await server.user();
    const b = await bucket(api);
    const ids = (n: number) => Array.from({ length: n }, () => randomUUID());
    const m = await createMember(api);
    // 250 ids pass the contract (and are then refused as not the caller's); 251 do not.
    const at250 = await api.POST('/api/v1/privacy-buckets/bulk/members', {
      body: { bucketId: b, mode: 'add', memberIds: ids(250) },
    });
    expect(at250.response.status).toBe(400);
    expect(at250.error!.message).toMatch(/^memberIds: not a member of this account: .* \(and 249 more\)$/);
    const cases: Array<[string, Record<string, unknown>]> = [
      ['/api/v1/privacy-buckets/bulk/members', { bucketId: b, mode: 'add', memberIds: [] }],
      ['/api/v1/privacy-buckets/bulk/members', { bucketId: b, mode: 'add', memberIds: ids(251) }],
      ['/api/v1/privacy-buckets/bulk/friends', { bucketId: b, mode: 'add', friendUserIds: [] }],
      ['/api/v1/privacy-buckets/bulk/friends', { bucketId: b, mode: 'add', friendUserIds: ids(251) }],
      ['/api/v1/privacy-buckets/bulk/groups', { bucketId: b, mode: 'add', groupIds: ids(251) }],
      ['/api/v1/privacy-buckets/bulk/directories', { bucketId: b, mode: 'add', directoryIds: [] }],
      ['/api/v1/privacy-buckets/bulk/members', { bucketId: b, mode: 'toggle', memberIds: [m] }],
      ['/api/v1/privacy-buckets/bulk/members', { bucketId: b, memberIds: [m] }],
      ['/api/v1/privacy-buckets/bulk/members', { bucketId: b, mode: 'add', memberIds: [m, m] }],
      ['/api/v1/privacy-buckets/bulk/members', { bucketId: b, mode: 'add', memberIds: [m], groupIds: [] }],
      ['/api/v1/privacy-buckets/bulk/members', { mode: 'add', memberIds: [m] }],
    ];
    for (const [path, body] of cases) {
      const res = await api.POST(path as '/api/v1/privacy-buckets/bulk/members', { body: body as never });
      expect(res.response.status, `${path} ${JSON.stringify(body).slice(0, 80)}`).toBe(400);
      expect(res.error!.message).not.toMatch(/not a member of this account/);
    }
    const too = await api.POST('/api/v1/privacy-buckets/bulk/members', {
      body: { bucketId: b, mode: 'add', memberIds: ids(251) },
    });
    expect(too.error!.message).toBe('memberIds must NOT have more than 250 items');
    expect(await assignmentRows({ bucket_id: b })).toBe(0);
  });

  it('costs the same number of statements for 2 ids as for 40', async () => {
    const { api } = await server.user();
    const b = await bucket(api);
    const members: string[] = [];
    for (let i = 0; i < 40; i++) members.push(await createMember(api, `M${i}`));
    const count = async (mode: 'add' | 'remove', ids: string[]) =>
      (
        await captureStatements(knex(), REQUEST_WORK, async () => {
          expect(
            (await api.POST('/api/v1/privacy-buckets/bulk/members', { body: { bucketId: b, mode, memberIds: ids } }))
              .response.status,
          ).toBe(204);
        })
      ).length;
    await count('add', members.slice(0, 1)); // warms the key cache
    const small = await count('add', members.slice(0, 2));
    expect(await count('add', members)).toBe(small);
    expect(await count('remove', members)).toBe(small);
    expect(small).toBeLessThanOrEqual(6); // begin, the bucket, the members, the insert, their events (one statement), commit
  });
});

describe('assignments', { timeout: 120_000 }, () => {
  /** One route of each kind: a resource of the caller, of another account, and how to trash it (if it can be). */
  type Kind = {
    name: string;
    get: (
      api: ApiClient,
      id: string,
    ) => Promise<{ response: Response; data?: { bucketIds: string[] } & Record<string, unknown>; error?: unknown }>;
    put: (api: ApiClient, id: string, bucketIds: string[]) => Promise<{ response: Response; error?: unknown }>;
    key: Record<string, string>;
    make: (user: TestUser) => Promise<string>;
    trash?: (api: ApiClient, id: string) => Promise<void>;
  };
  const p = (obj: Record<string, string>) => ({ params: { path: obj as never } });
  const kinds: Kind[] = [
    {
      name: 'members',
      get: (api, id) => api.GET('/api/v1/privacy-buckets/assignments/members/{memberId}', p({ memberId: id })),
      put: (api, id, bucketIds) =>
        api.PUT('/api/v1/privacy-buckets/assignments/members/{memberId}', {
          ...p({ memberId: id }),
          body: { bucketIds },
        }),
      key: { memberId: '' },
      make: (u) => createMember(u.api, 'Secret member'),
      trash: async (api, id) => void (await api.DELETE('/api/v1/members/{memberId}', p({ memberId: id }))),
    },
    {
      name: 'profile sections',
      get: (api, id) =>
        api.GET(
          '/api/v1/privacy-buckets/assignments/profile-sections/{memberId}/{sectionKey}',
          p({ memberId: id, sectionKey: 'pronouns' }),
        ),
      put: (api, id, bucketIds) =>
        api.PUT('/api/v1/privacy-buckets/assignments/profile-sections/{memberId}/{sectionKey}', {
          ...p({ memberId: id, sectionKey: 'pronouns' }),
          body: { bucketIds },
        }),
      key: { memberId: '', sectionKey: 'pronouns' },
      make: (u) => createMember(u.api, 'Secret member'),
      trash: async (api, id) => void (await api.DELETE('/api/v1/members/{memberId}', p({ memberId: id }))),
    },
    {
      name: 'groups',
      get: (api, id) => api.GET('/api/v1/privacy-buckets/assignments/groups/{groupId}', p({ groupId: id })),
      put: (api, id, bucketIds) =>
        api.PUT('/api/v1/privacy-buckets/assignments/groups/{groupId}', { ...p({ groupId: id }), body: { bucketIds } }),
      key: { groupId: '' },
      make: (u) => createGroup(u.api, 'Secret group'),
      trash: async (api, id) => void (await api.DELETE('/api/v1/groups/{groupId}', p({ groupId: id }))),
    },
    {
      name: 'directories',
      get: (api, id) =>
        api.GET('/api/v1/privacy-buckets/assignments/directories/{directoryId}', p({ directoryId: id })),
      put: (api, id, bucketIds) =>
        api.PUT('/api/v1/privacy-buckets/assignments/directories/{directoryId}', {
          ...p({ directoryId: id }),
          body: { bucketIds },
        }),
      key: { directoryId: '' },
      make: (u) => createFolder(u.api, 'Secret folder'),
      trash: async (api, id) => void (await api.DELETE('/api/v1/folders/{folderId}', p({ folderId: id }))),
    },
    {
      name: 'custom fields',
      get: (api, id) =>
        api.GET('/api/v1/privacy-buckets/assignments/custom-fields/{fieldDefinitionId}', p({ fieldDefinitionId: id })),
      put: (api, id, bucketIds) =>
        api.PUT('/api/v1/privacy-buckets/assignments/custom-fields/{fieldDefinitionId}', {
          ...p({ fieldDefinitionId: id }),
          body: { bucketIds },
        }),
      key: { fieldDefinitionId: '' },
      make: (u) => customField(u.api, 'Secret field'),
      trash: async (api, id) => void (await api.DELETE('/api/v1/custom-fields/{fieldId}', p({ fieldId: id }))),
    },
    {
      name: 'side systems',
      get: (api, id) =>
        api.GET('/api/v1/privacy-buckets/assignments/side-systems/{sideSystemId}', p({ sideSystemId: id })),
      put: (api, id, bucketIds) =>
        api.PUT('/api/v1/privacy-buckets/assignments/side-systems/{sideSystemId}', {
          ...p({ sideSystemId: id }),
          body: { bucketIds },
        }),
      key: { sideSystemId: '' },
      make: (u) => createSide(u.api, 'Secret side'),
      trash: async (api, id) => {
        expect(
          (await api.DELETE('/api/v1/systems/side-systems/{sideSystemId}', p({ sideSystemId: id }))).response.status,
        ).toBe(200);
      },
    },
    {
      name: 'sub systems',
      get: (api, id) =>
        api.GET('/api/v1/privacy-buckets/assignments/sub-systems/{subSystemId}', p({ subSystemId: id })),
      put: (api, id, bucketIds) =>
        api.PUT('/api/v1/privacy-buckets/assignments/sub-systems/{subSystemId}', {
          ...p({ subSystemId: id }),
          body: { bucketIds },
        }),
      key: { subSystemId: '' },
      make: async (u) =>
        createSub(u.api, await activeSide(u.api), await createMember(u.api, 'Linked'), { name: 'Secret sub' }),
      trash: async (api, id) => {
        expect(
          (await api.DELETE('/api/v1/systems/sub-systems/{subSystemId}', p({ subSystemId: id }))).response.status,
        ).toBe(200);
      },
    },
    {
      name: 'member statuses',
      get: (api, id) => api.GET('/api/v1/member-statuses/{definitionId}/privacy-buckets', p({ definitionId: id })),
      put: (api, id, bucketIds) =>
        api.PUT('/api/v1/member-statuses/{definitionId}/privacy-buckets', {
          ...p({ definitionId: id }),
          body: { bucketIds },
        }),
      key: { definitionId: '' },
      make: (u) => status(u.api, 'Secret status'),
    },
  ];

  for (const kind of kinds) {
    it(`${kind.name}: GET, PUT replaces the set, foreign buckets 400 and nothing changes; unknown, foreign${kind.trash ? ', trashed' : ''} → 404`, async () => {
      const user = await server.user();
      const other = await server.user();
      const { api } = user;
      const b1 = await bucket(api, 'One');
      now += 1;
      const b2 = await bucket(api, 'Two');
      const theirBucket = await bucket(other.api, 'Theirs');
      const id = await kind.make(user);
      const idKey = Object.keys(kind.key)[0]!;
      const expected = (bucketIds: string[]) => ({ ...kind.key, [idKey]: id, bucketIds });

      expect((await kind.get(api, id)).data).toEqual(expected([]));
      expect((await kind.put(api, id, [b2, b1])).response.status).toBe(204);
      expect((await kind.get(api, id)).data).toEqual(expected([b1, b2]));
      expect((await kind.put(api, id, [b2])).response.status).toBe(204);
      expect((await kind.get(api, id)).data).toEqual(expected([b2]));

      const foreign = await kind.put(api, id, [b1, theirBucket]);
      expect(foreign.response.status).toBe(400);
      expect(foreign.error).toEqual({
        code: 'BAD_REQUEST',
        message: `bucketIds: not a privacy bucket of this account: ${theirBucket}`,
      });
      for (const body of [[], [b1, b1]]) expect((await kind.put(api, id, body)).response.status).toBe(400);
      expect((await kind.get(api, id)).data).toEqual(expected([b2]));

      const theirs = await kind.make(other);
      expect((await kind.put(other.api, theirs, [theirBucket])).response.status).toBe(204);
      for (const hidden of [theirs, UNKNOWN_ID]) {
        expectHidden(await kind.get(api, hidden), hidden, theirBucket, 'Secret');
        expectHidden(await kind.put(api, hidden, [b1]), hidden, theirBucket);
      }
      expect((await kind.get(other.api, theirs)).data!.bucketIds).toEqual([theirBucket]);

      if (kind.trash) {
        await kind.trash(api, id);
        expectHidden(await kind.get(api, id), b2);
        expectHidden(await kind.put(api, id, [b1]), b2);
      }
    });
  }

  it('concurrent replacements of one target’s buckets run one after the other: every PUT answers 204 and the set is one of them, never a mix', async () => {
    for (const kind of kinds) {
      const owner = await server.user();
      const target = await kind.make(owner);
      const sets = [[await bucket(owner.api, 'A')], [await bucket(owner.api, 'B')], [await bucket(owner.api, 'C')]];
      const results = await Promise.all(Array.from({ length: 9 }, (_, i) => kind.put(owner.api, target, sets[i % 3]!)));
      expect(
        results.map((r) => r.response.status),
        kind.name,
      ).toEqual(Array(9).fill(204));
      const final = (await kind.get(owner.api, target)).data!.bucketIds;
      expect(
        sets.map((set) => JSON.stringify(set)),
        kind.name,
      ).toContain(JSON.stringify(final));
    }
    const owner = await server.user();
    const sets = [[await bucket(owner.api, 'A')], [await bucket(owner.api, 'B')]];
    const puts = await Promise.all(
      Array.from({ length: 8 }, (_, i) =>
        owner.api.PUT('/api/v1/privacy-buckets/defaults/{kind}', {
          params: { path: { kind: 'new_member' } },
          body: { bucketIds: sets[i % 2]! },
        }),
      ),
    );
    expect(puts.map((r) => r.response.status)).toEqual(Array(8).fill(204));
    const { data } = await owner.api.GET('/api/v1/privacy-buckets/defaults/{kind}', {
      params: { path: { kind: 'new_member' } },
    });
    expect(sets.map((set) => JSON.stringify(set))).toContain(JSON.stringify(data!.bucketIds));
  });

  it('concurrent bulk changes of overlapping members, and a bucket deleted meanwhile, all answer; each member’s bucket_ids ends as its assignments', async () => {
    const owner = await server.user();
    const members = await Promise.all(Array.from({ length: 6 }, (_, i) => createMember(owner.api, `M${i}`)));
    const buckets = [await bucket(owner.api, 'A'), await bucket(owner.api, 'B'), await bucket(owner.api, 'C')];
    const gone = await bucket(owner.api, 'Deleted meanwhile');
    await owner.api.POST('/api/v1/privacy-buckets/bulk/members', {
      body: { bucketId: gone, mode: 'add', memberIds: members },
    });
    // Each request names members in its own order; adds and removes on the same members at once.
    const requests = Array.from({ length: 12 }, (_, i) =>
      owner.api.POST('/api/v1/privacy-buckets/bulk/members', {
        body: {
          bucketId: buckets[i % 3]!,
          mode: i % 4 === 3 ? 'remove' : 'add',
          memberIds: i % 2 === 0 ? members.slice(i % 3) : [...members].reverse().slice(i % 2),
        },
      }),
    );
    const deleted = owner.api.DELETE('/api/v1/privacy-buckets/{bucketId}', { params: { path: { bucketId: gone } } });
    const results = await Promise.all([...requests, deleted]);
    expect(results.map((r) => r.response.status)).toEqual(Array(13).fill(204));
    const kept = await server.deps.db.knex('members').whereIn('id', members).select('id', 'bucket_ids');
    const live = await server.deps.db
      .knex('privacy_bucket_assignments')
      .where({ kind: 'member', section_key: '' })
      .whereIn('content_id', members)
      .select('content_id', 'bucket_id');
    for (const row of kept)
      expect([...row.bucket_ids].sort(), row.id).toEqual(
        live
          .filter((a) => a.content_id === row.id)
          .map((a) => a.bucket_id as string)
          .sort(),
      );
  });

  it('friends: accepted and pending friendships; none, revoked or blocked → 404', async () => {
    const user = await server.user();
    const [accepted, pending, revoked, blocked, stranger] = await Promise.all(
      Array.from({ length: 5 }, () => server.user()),
    );
    await befriend(user, accepted!, 'accepted');
    await befriend(pending!, user, 'pending'); // an incoming request
    await befriend(user, revoked!, 'revoked');
    await befriend(user, blocked!, 'blocked');
    const b = await bucket(user.api);
    const path = (friendUserId: string) => ({ params: { path: { friendUserId } } });
    for (const friend of [accepted!, pending!]) {
      expect(
        (await user.api.GET('/api/v1/privacy-buckets/assignments/friends/{friendUserId}', path(friend.userId))).data,
      ).toEqual({ friendUserId: friend.userId, bucketIds: [] });
      expect(
        (
          await user.api.PUT('/api/v1/privacy-buckets/assignments/friends/{friendUserId}', {
            ...path(friend.userId),
            body: { bucketIds: [b] },
          })
        ).response.status,
      ).toBe(204);
      expect(
        (await user.api.GET('/api/v1/privacy-buckets/assignments/friends/{friendUserId}', path(friend.userId))).data!
          .bucketIds,
      ).toEqual([b]);
    }
    for (const friend of [revoked!, blocked!, stranger!]) {
      const get = await user.api.GET('/api/v1/privacy-buckets/assignments/friends/{friendUserId}', path(friend.userId));
      expectHidden(get, friend.userId);
      expect(get.error).toEqual({ code: 'NOT_FOUND', message: 'Friend not found' });
      expectHidden(
        await user.api.PUT('/api/v1/privacy-buckets/assignments/friends/{friendUserId}', {
          ...path(friend.userId),
          body: { bucketIds: [b] },
        }),
        friend.userId,
      );
    }
    // What the friend assigned on its side is its own: the accepted friend sees none of the user's buckets as its own.
    const theirView = await accepted!.api.GET(
      '/api/v1/privacy-buckets/assignments/friends/{friendUserId}',
      path(user.userId),
    );
    expect(theirView.data).toEqual({ friendUserId: user.userId, bucketIds: [] });
  });

  it('profile sections are separate from each other and from the member; other section keys are 400', async () => {
    const { api } = await server.user();
    const b1 = await bucket(api, 'One');
    now += 1;
    const b2 = await bucket(api, 'Two');
    const m = await createMember(api);
    const section = (sectionKey: string) => ({ params: { path: { memberId: m, sectionKey: sectionKey as 'avatar' } } });
    await api.PUT('/api/v1/privacy-buckets/assignments/profile-sections/{memberId}/{sectionKey}', {
      ...section('avatar'),
      body: { bucketIds: [b1] },
    });
    await api.PUT('/api/v1/privacy-buckets/assignments/profile-sections/{memberId}/{sectionKey}', {
      ...section('about'),
      body: { bucketIds: [b2] },
    });
    await api.PUT('/api/v1/privacy-buckets/assignments/members/{memberId}', {
      params: { path: { memberId: m } },
      body: { bucketIds: [b1, b2] },
    });
    const got = async (k: string) =>
      (await api.GET('/api/v1/privacy-buckets/assignments/profile-sections/{memberId}/{sectionKey}', section(k))).data!
        .bucketIds;
    expect(await got('avatar')).toEqual([b1]);
    expect(await got('about')).toEqual([b2]);
    expect(await got('displayName')).toEqual([]);
    expect(await memberBuckets(api, m)).toEqual([b1, b2]);
    for (const bad of ['banner', 'Avatar', 'display_name', '']) {
      const res = await api.GET(
        '/api/v1/privacy-buckets/assignments/profile-sections/{memberId}/{sectionKey}',
        section(bad),
      );
      expect(res.response.status, bad).toBe(bad === '' ? 404 : 400);
      const put = await api.PUT('/api/v1/privacy-buckets/assignments/profile-sections/{memberId}/{sectionKey}', {
        ...section(bad),
        body: { bucketIds: [b1] },
      });
      expect(put.response.status, bad).toBe(bad === '' ? 404 : 400);
    }
  });

  it('a group is not a folder and a folder is not a group', async () => {
    const { api } = await server.user();
    const b = await bucket(api);
    const g = await createGroup(api);
    const f = await createFolder(api);
    const asFolder = await api.PUT('/api/v1/privacy-buckets/assignments/directories/{directoryId}', {
      params: { path: { directoryId: g } },
      body: { bucketIds: [b] },
    });
    expect(asFolder.error).toEqual({ code: 'NOT_FOUND', message: 'Folder not found' });
    const asGroup = await api.GET('/api/v1/privacy-buckets/assignments/groups/{groupId}', {
      params: { path: { groupId: f } },
    });
    expect(asGroup.error).toEqual({ code: 'NOT_FOUND', message: 'Group not found' });
  });

  it('member-status buckets take the memberStatuses scope, not privacyBuckets', async () => {
    const owner = await server.user();
    const b = await bucket(owner.api);
    const s = await status(owner.api);
    const statusesOnly = await server.createKey(owner.userId, { memberStatuses: 'read_write' });
    const bucketsOnly = await server.createKey(owner.userId, { privacyBuckets: 'read_write' });
    const path = { params: { path: { definitionId: s } } };
    const withStatuses = server.client(statusesOnly.apiKey);
    expect(
      (
        await withStatuses.PUT('/api/v1/member-statuses/{definitionId}/privacy-buckets', {
          ...path,
          body: { bucketIds: [b] },
        })
      ).response.status,
    ).toBe(204);
    expect((await withStatuses.GET('/api/v1/member-statuses/{definitionId}/privacy-buckets', path)).data).toEqual({
      definitionId: s,
      bucketIds: [b],
    });
    const refused = await server
      .client(bucketsOnly.apiKey)
      .PUT('/api/v1/member-statuses/{definitionId}/privacy-buckets', { ...path, body: { bucketIds: [b] } });
    expect(refused.response.status).toBe(403);
    expect(refused.error!.message).toBe('Missing API key scope: memberStatuses requires read_write');
    // Deleting the definition takes its assignments with it.
    await owner.api.DELETE('/api/v1/member-statuses/{statusId}', { params: { path: { statusId: s } } });
    expect(await assignmentRows({ content_id: s })).toBe(0);
  });

  it('PUT costs the same number of statements for 1 bucket as for 12', async () => {
    const { api } = await server.user();
    const buckets: string[] = [];
    for (let i = 0; i < 12; i++) buckets.push(await bucket(api, `B${i}`));
    const m = await createMember(api);
    const count = async (bucketIds: string[]) =>
      (
        await captureStatements(knex(), REQUEST_WORK, async () => {
          expect(
            (
              await api.PUT('/api/v1/privacy-buckets/assignments/members/{memberId}', {
                params: { path: { memberId: m } },
                body: { bucketIds },
              })
            ).response.status,
          ).toBe(204);
        })
      ).length;
    await count(buckets.slice(0, 1)); // warms the key cache
    const one = await count(buckets.slice(0, 1));
    expect(await count(buckets)).toBe(one);
    expect(one).toBeLessThanOrEqual(7); // begin, the member, the buckets, delete, insert, its event, commit
  });

  it('purging a member removes its assignment rows, profile sections included', async () => {
    const { api } = await server.user();
    const b = await bucket(api);
    const m = await createMember(api);
    const kept = await createMember(api, 'Kept');
    await api.PUT('/api/v1/privacy-buckets/assignments/members/{memberId}', {
      params: { path: { memberId: m } },
      body: { bucketIds: [b] },
    });
    await api.PUT('/api/v1/privacy-buckets/assignments/members/{memberId}', {
      params: { path: { memberId: kept } },
      body: { bucketIds: [b] },
    });
    for (const sectionKey of ['avatar', 'about'] as const) {
      await api.PUT('/api/v1/privacy-buckets/assignments/profile-sections/{memberId}/{sectionKey}', {
        params: { path: { memberId: m, sectionKey } },
        body: { bucketIds: [b] },
      });
    }
    expect(await assignmentRows({ content_id: m })).toBe(3);
    await api.DELETE('/api/v1/members/{memberId}', { params: { path: { memberId: m } } });
    expect(await assignmentRows({ content_id: m })).toBe(3); // the trash keeps them (a restore brings them back)
    expect(
      (await api.POST('/api/v1/trash/purge', { body: { items: [{ type: 'member', id: m }] } })).response.status,
    ).toBe(204);
    expect(await assignmentRows({ content_id: m })).toBe(0);
    expect(await assignmentRows({ content_id: kept })).toBe(1);
  });
});

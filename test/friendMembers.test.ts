/**
 * Friend-scoped data, members side: the 8 friend member routes and the friend branch of
 * GET /members/{memberId}/media, over the relationship matrix and, for an accepted friend, over the
 * route's permission group (no shared bucket, shared at none, read, read_write). Every refusal and
 * every hidden item is checked against unique canary strings planted in the owner's hidden content.
 */
import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import type { PermissionGroup } from '../server/core/context.ts';
import { createEntry, createMember, startFronting, UNKNOWN_ID } from './helpers/fixtures.ts';
import {
  befriend,
  createBucket,
  expectNoneOf,
  friendsSharing,
  giveFriend,
  relate,
  RELATIONSHIPS,
  shareMember,
  type Perms,
} from './helpers/friends.ts';
import { PNG } from './helpers/images.ts';
import { captureStatements } from './helpers/plans.ts';
import { bearer, jsonHeaders, useServer, type TestUser } from './helpers/server.ts';

const server = useServer();

const canary = (label: string) => `${label}-${randomUUID()}`;

async function call(
  u: TestUser,
  path: string,
  init: RequestInit = {},
): Promise<{ status: number; text: string; json: unknown }> {
  const res = await server.fetch(path, {
    ...init,
    headers: { ...(init.body !== undefined ? jsonHeaders(u.apiKey) : bearer(u.apiKey)), ...(init.headers ?? {}) },
  });
  const text = await res.text();
  let json: unknown = null;
  try {
    json = text ? JSON.parse(text) : null;
  } catch {
    json = null;
  }
  return { status: res.status, text, json };
}

async function put(u: TestUser, path: string, bucketIds: string[]): Promise<void> {
  const res = await call(u, path, { method: 'PUT', body: JSON.stringify({ bucketIds }) });
  expect(res.status, `${path} ${res.text}`).toBe(204);
}

async function uploadAvatar(owner: TestUser, memberId: string): Promise<string> {
  const res = await server.fetch(`/api/v1/members/${memberId}/media?kind=avatar`, {
    method: 'PUT',
    headers: { ...bearer(owner.apiKey), 'Content-Type': 'image/png' },
    body: new Uint8Array(PNG),
  });
  expect(res.status).toBe(200);
  return ((await res.json()) as { avatarUrl: string }).avatarUrl;
}

/**
 * The owner's content: a shared member (in a folder, a group, with a status and a field value), and
 * hidden content of every kind (a hidden member, folder, subtree under the hidden folder, group,
 * status, field) carrying only a bucket the viewer does not hold, each with canary strings.
 */
async function plant(owner: TestUser, shareWith: string, hiddenBucket: string) {
  const c = {
    name: canary('visible-name'),
    displayName: canary('dn'),
    pronouns: canary('pr'),
    description: canary('about'),
    hiddenName: canary('hidden-member'),
    hiddenDisplay: canary('hidden-dn'),
    hiddenFolder: canary('hidden-folder'),
    hiddenSub: canary('hidden-subfolder'),
    hiddenGroup: canary('hidden-group'),
    hiddenStatus: canary('hidden-status'),
    hiddenField: canary('hidden-field'),
    hiddenValue: canary('hidden-value'),
    value: canary('value'),
  };
  const folder = (await owner.api.POST('/api/v1/folders', { body: { name: 'Shared folder' } })).data!.id;
  const hiddenFolder = (await owner.api.POST('/api/v1/folders', { body: { name: c.hiddenFolder } })).data!.id;
  const hiddenSub = (await owner.api.POST('/api/v1/folders', { body: { name: c.hiddenSub, parentId: hiddenFolder } }))
    .data!.id;
  const member = await createMember(owner.api, c.name, {
    displayName: c.displayName,
    pronouns: c.pronouns,
    description: c.description,
    directoryId: folder,
  });
  const hidden = await createMember(owner.api, c.hiddenName, { displayName: c.hiddenDisplay, directoryId: folder });
  const group = (await owner.api.POST('/api/v1/groups', { body: { name: 'Shared group', parentId: folder } })).data!.id;
  const hiddenGroup = (await owner.api.POST('/api/v1/groups', { body: { name: c.hiddenGroup } })).data!.id;
  const groupUnderHidden = (
    await owner.api.POST('/api/v1/groups', { body: { name: canary('group-under-hidden'), parentId: hiddenSub } })
  ).data!.id;
  for (const g of [group, hiddenGroup]) {
    const res = await call(owner, `/api/v1/groups/${g}/members`, {
      method: 'PUT',
      body: JSON.stringify({ memberIds: [member, hidden] }),
    });
    expect([200, 204], res.text).toContain(res.status);
  }
  const status = (await owner.api.POST('/api/v1/member-statuses', { body: { name: 'Resting', color: '#000001' } }))
    .data!.id;
  const hiddenStatus = (
    await owner.api.POST('/api/v1/member-statuses', { body: { name: c.hiddenStatus, color: '#000002' } })
  ).data!.id;
  for (const [m, s] of [
    [member, status],
    [member, hiddenStatus],
    [hidden, status],
  ] as const) {
    expect((await call(owner, `/api/v1/members/${m}/statuses/${s}`, { method: 'PUT' })).status).toBe(204);
  }
  const field = (await owner.api.POST('/api/v1/custom-fields', { body: { name: 'Role', type: 'text' } })).data!.id;
  const hiddenField = (await owner.api.POST('/api/v1/custom-fields', { body: { name: c.hiddenField, type: 'text' } }))
    .data!.id;
  const setValue = async (m: string, f: string, value: string) =>
    expect(
      (await call(owner, `/api/v1/members/${m}/custom-fields/${f}`, { method: 'PUT', body: JSON.stringify({ value }) }))
        .status,
    ).toBe(200);
  await setValue(member, field, c.value);
  await setValue(member, hiddenField, c.hiddenValue);
  await setValue(hidden, field, c.hiddenValue);
  const avatarUrl = await uploadAvatar(owner, member);
  await uploadAvatar(owner, hidden);

  await shareMember(owner, member, [shareWith]);
  await shareMember(owner, hidden, [hiddenBucket]);
  await put(owner, `/api/v1/privacy-buckets/assignments/directories/${folder}`, [shareWith]);
  await put(owner, `/api/v1/privacy-buckets/assignments/directories/${hiddenFolder}`, [hiddenBucket]);
  await put(owner, `/api/v1/privacy-buckets/assignments/directories/${hiddenSub}`, [shareWith]); // shared, but under a hidden folder
  await put(owner, `/api/v1/privacy-buckets/assignments/groups/${group}`, [shareWith]);
  await put(owner, `/api/v1/privacy-buckets/assignments/groups/${hiddenGroup}`, [hiddenBucket]);
  await put(owner, `/api/v1/privacy-buckets/assignments/groups/${groupUnderHidden}`, [shareWith]);
  await put(owner, `/api/v1/member-statuses/${status}/privacy-buckets`, [shareWith]);
  await put(owner, `/api/v1/member-statuses/${hiddenStatus}/privacy-buckets`, [hiddenBucket]);
  await put(owner, `/api/v1/privacy-buckets/assignments/custom-fields/${field}`, [shareWith]);
  await put(owner, `/api/v1/privacy-buckets/assignments/custom-fields/${hiddenField}`, [hiddenBucket]);
  const hiddenTexts = [
    hidden,
    c.hiddenName,
    c.hiddenDisplay,
    hiddenFolder,
    c.hiddenFolder,
    hiddenSub,
    c.hiddenSub,
    hiddenGroup,
    c.hiddenGroup,
    groupUnderHidden,
    hiddenStatus,
    c.hiddenStatus,
    hiddenField,
    c.hiddenField,
    c.hiddenValue,
  ];
  return {
    c,
    member,
    hidden,
    folder,
    hiddenFolder,
    hiddenSub,
    group,
    status,
    field,
    hiddenField,
    avatarUrl,
    hiddenTexts,
  };
}

const ALL_READ: Perms = {
  members_view: 'read',
  member_profile: 'read',
  member_avatar: 'read',
  member_custom_fields: 'read_write',
  member_statuses: 'read',
  groups: 'read',
};

/** Every read route of this half for one owner, as the viewer calls them. */
function readRoutes(ownerId: string, w: { member: string; folder: string }): string[] {
  const f = `/api/v1/friends/${ownerId}`;
  return [
    `${f}/members`,
    `${f}/members/${w.member}`,
    `${f}/groups`,
    `${f}/groups/folder`,
    `${f}/groups/folder?folderId=${w.folder}`,
    `${f}/member-statuses`,
    `${f}/member-statuses/members/${w.member}`,
    `${f}/custom-fields?memberId=${w.member}`,
  ];
}

describe('relationship matrix', { timeout: 120_000 }, () => {
  it.each(RELATIONSHIPS)('%s', async (relationship) => {
    const owner = await server.user();
    const viewer = await server.user();
    const bucket = await createBucket(owner, ALL_READ);
    const other = await createBucket(owner, ALL_READ, 'Other');
    const w = await plant(owner, bucket, other);
    await relate(owner, viewer, relationship);
    if (relationship === 'accepted') await giveFriend(owner, viewer, [bucket]);
    const visibleTexts = [w.member, w.c.name, w.c.value, w.folder, w.status];
    for (const path of readRoutes(owner.userId, w)) {
      const res = await call(viewer, path);
      if (relationship === 'accepted') {
        expect(res.status, path).toBe(200);
      } else {
        expect(res.status, path).toBe(404);
        expect(res.json, path).toEqual({ code: 'NOT_FOUND', message: 'Friend not found' });
        expectNoneOf(res.text, visibleTexts);
      }
      expectNoneOf(res.text, w.hiddenTexts);
    }
    const write = await call(viewer, `/api/v1/friends/${owner.userId}/custom-fields/${w.field}/value`, {
      method: 'PUT',
      body: JSON.stringify({ memberId: w.member, value: 'changed' }),
    });
    const media = await call(viewer, `${w.avatarUrl}&ownerUserId=${owner.userId}`);
    if (relationship === 'accepted') {
      expect(write.status, write.text).toBe(204);
      expect(media.status).toBe(200);
    } else {
      expect(write.status).toBe(404);
      expect(write.json).toEqual({ code: 'NOT_FOUND', message: 'Friend not found' });
      expect(media).toEqual({ status: 404, text: '', json: null });
      const values = await owner.api.GET('/api/v1/members/{memberId}/custom-fields', {
        params: { path: { memberId: w.member } },
      });
      expect(values.data!.find((v) => v.fieldId === w.field)!.value).toBe(w.c.value);
    }
  });

  it("the caller's own id is not a friend (404), except on the member-status routes", async () => {
    const owner = await server.user();
    const bucket = await createBucket(owner, ALL_READ);
    const w = await plant(owner, bucket, await createBucket(owner, ALL_READ, 'Other'));
    for (const path of readRoutes(owner.userId, w).filter((p) => !p.includes('member-statuses'))) {
      expect((await call(owner, path)).json, path).toEqual({ code: 'NOT_FOUND', message: 'Friend not found' });
    }
    const own = await call(owner, `/api/v1/friends/${owner.userId}/member-statuses`);
    expect(own.status).toBe(200);
    expect((own.json as Array<{ statusId: string }>).map((r) => r.statusId).sort()).toHaveLength(3);
    const one = await call(owner, `/api/v1/friends/${owner.userId}/member-statuses/members/${w.hidden}`);
    expect(one.status).toBe(200);
    expect(one.json).toEqual([expect.objectContaining({ memberId: w.hidden, statusId: w.status })]);
    expect((await call(owner, `/api/v1/friends/${owner.userId}/member-statuses/members/${UNKNOWN_ID}`)).json).toEqual({
      code: 'NOT_FOUND',
      message: 'Member not found',
    });
    // Own media through ownerUserId = own id is the owner route.
    expect((await call(owner, `${w.avatarUrl}&ownerUserId=${owner.userId}`)).status).toBe(200);
  });
});

type Mode = 'no_overlap' | 'none' | 'read' | 'read_write';
const MODES: Mode[] = ['no_overlap', 'none', 'read', 'read_write'];

/**
 * An accepted friend holding one bucket V: `members_view` read plus `group` at `mode` (no_overlap:
 * everything at read_write, but the owner's content holds another bucket only).
 */
async function worldFor(group: PermissionGroup, mode: Mode) {
  const base: Perms = {
    members_view: 'read',
    member_profile: 'read',
    member_avatar: 'read',
    member_statuses: 'read',
    member_custom_fields: 'read',
    groups: 'read',
  };
  const perms: Perms = mode === 'no_overlap' ? { ...ALL_READ, [group]: 'read_write' } : { ...base, [group]: mode };
  const { owner, viewer, bucketId } = await friendsSharing(server, perms);
  const other = await createBucket(owner, ALL_READ, 'Other');
  const w = await plant(owner, mode === 'no_overlap' ? other : bucketId, other);
  return { owner, viewer, w };
}

describe('permission matrix (accepted friend)', { timeout: 120_000 }, () => {
  it.each(MODES)('GET /members and /members/{id} (members_view) — %s', async (mode) => {
    const { owner, viewer, w } = await worldFor('members_view', mode);
    const list = await call(viewer, `/api/v1/friends/${owner.userId}/members`);
    expect(list.status).toBe(200);
    const one = await call(viewer, `/api/v1/friends/${owner.userId}/members/${w.member}`);
    if (mode === 'read' || mode === 'read_write') {
      expect((list.json as Array<{ _id: string }>).map((m) => m._id)).toEqual([w.member]);
      expect(one.status).toBe(200);
    } else {
      expect(list.json).toEqual([]);
      expect(one.json).toEqual({ code: 'NOT_FOUND', message: 'Member not found' });
      expectNoneOf(list.text + one.text, [w.c.name, w.c.displayName, w.c.value]);
    }
    expectNoneOf(list.text + one.text, w.hiddenTexts);
    expect((await call(viewer, `/api/v1/friends/${owner.userId}/members/${w.hidden}`)).json).toEqual({
      code: 'NOT_FOUND',
      message: 'Member not found',
    });
    expect((await call(viewer, `/api/v1/friends/${owner.userId}/members/${UNKNOWN_ID}`)).json).toEqual({
      code: 'NOT_FOUND',
      message: 'Member not found',
    });
  });

  it.each(MODES)(
    'GET /members/{id} needs member_profile (members.profile.read); the list redacts it — %s',
    async (mode) => {
      const { owner, viewer, w } = await worldFor('member_profile', mode);
      const one = await call(viewer, `/api/v1/friends/${owner.userId}/members/${w.member}`);
      const list = await call(viewer, `/api/v1/friends/${owner.userId}/members`);
      if (mode === 'read' || mode === 'read_write') {
        expect(one.status).toBe(200);
        expect(one.json).toMatchObject({
          _id: w.member,
          ownerUserId: owner.userId,
          name: w.c.name,
          displayName: w.c.displayName,
          pronouns: w.c.pronouns,
          description: w.c.description,
          aboutTags: [],
        });
        expect((list.json as unknown[])[0]).toEqual(one.json);
      } else {
        expect(one.json).toEqual({ code: 'NOT_FOUND', message: 'Member not found' });
        expectNoneOf(one.text, [w.c.name, w.c.displayName]);
        if (mode === 'none') {
          // Visible in the list (members_view) with every member_profile section redacted to null.
          expect(list.json).toEqual([
            expect.objectContaining({
              _id: w.member,
              name: w.c.name,
              displayName: null,
              pronouns: null,
              description: null,
              aboutTags: null,
              profileStyle: null,
            }),
          ]);
          expectNoneOf(list.text, [w.c.displayName, w.c.pronouns, w.c.description]);
        } else {
          expect(list.json).toEqual([]);
        }
      }
      expectNoneOf(one.text + list.text, w.hiddenTexts);
    },
  );

  it.each(MODES)('avatar section and the media route (member_avatar) — %s', async (mode) => {
    const { owner, viewer, w } = await worldFor('member_avatar', mode);
    const list = await call(viewer, `/api/v1/friends/${owner.userId}/members`);
    const friendUrl = `${w.avatarUrl}&ownerUserId=${owner.userId}`;
    const media = await server.fetch(friendUrl, { headers: bearer(viewer.apiKey) });
    const unknown = await call(viewer, `/api/v1/members/${UNKNOWN_ID}/media?kind=avatar&ownerUserId=${owner.userId}`);
    expect(unknown).toEqual({ status: 404, text: '', json: null });
    const hidden = await call(viewer, `/api/v1/members/${w.hidden}/media?kind=avatar&ownerUserId=${owner.userId}`);
    expect(hidden).toEqual({ status: 404, text: '', json: null });
    if (mode === 'read' || mode === 'read_write') {
      expect((list.json as Array<{ avatarUrl: string | null }>)[0]!.avatarUrl).toBe(friendUrl);
      expect(media.status).toBe(200);
      expect(Buffer.from(await media.arrayBuffer()).equals(PNG)).toBe(true);
    } else {
      if (mode === 'none')
        expect((list.json as Array<{ avatarUrl: string | null; backgroundUrl: null }>)[0]).toMatchObject({
          avatarUrl: null,
          backgroundUrl: null,
        });
      expect(media.status).toBe(404);
      expect(await media.text()).toBe('');
    }
  });

  it.each(MODES)('GET /groups and /groups/folder (groups) — %s', async (mode) => {
    const { owner, viewer, w } = await worldFor('groups', mode);
    const tree = await call(viewer, `/api/v1/friends/${owner.userId}/groups`);
    const folder = await call(viewer, `/api/v1/friends/${owner.userId}/groups/folder?folderId=${w.folder}`);
    const root = await call(viewer, `/api/v1/friends/${owner.userId}/groups/folder?folderId=null`);
    const rootOmitted = await call(viewer, `/api/v1/friends/${owner.userId}/groups/folder`);
    expect(tree.status).toBe(200);
    expect(root.status).toBe(200);
    expect(rootOmitted.json).toEqual(root.json);
    if (mode === 'read' || mode === 'read_write') {
      expect(tree.json).toEqual({
        folders: [{ id: w.folder, parentId: null, name: 'Shared folder', description: null, color: null }],
        groups: [
          {
            id: w.group,
            parentId: w.folder,
            name: 'Shared group',
            description: null,
            color: null,
            memberIds: [w.member],
          },
        ],
      });
      expect(folder.json).toEqual({
        folder: { id: w.folder, parentId: null, name: 'Shared folder', description: null, color: null },
        subfolders: [],
        members: [
          {
            id: w.member,
            name: w.c.name,
            displayName: w.c.displayName,
            avatarUrl: `${w.avatarUrl}&ownerUserId=${owner.userId}`,
          },
        ],
      });
      expect(root.json).toEqual({
        folder: null,
        subfolders: [{ id: w.folder, parentId: null, name: 'Shared folder', description: null, color: null }],
        members: [],
      });
    } else {
      expect(tree.json).toEqual({ folders: [], groups: [] });
      expect(folder.json).toEqual({ code: 'NOT_FOUND', message: 'Folder not found' });
      expect(root.json).toEqual({ folder: null, subfolders: [], members: [] });
    }
    // A hidden folder, a shared folder under it, a group's id and an unknown id: one body.
    for (const id of [w.hiddenFolder, w.hiddenSub, w.group, UNKNOWN_ID]) {
      const res = await call(viewer, `/api/v1/friends/${owner.userId}/groups/folder?folderId=${id}`);
      expect(res.json).toEqual({ code: 'NOT_FOUND', message: 'Folder not found' });
    }
    expectNoneOf(tree.text + folder.text + root.text, w.hiddenTexts);
  });

  it.each(MODES)('GET /member-statuses and /member-statuses/members/{id} (member_statuses) — %s', async (mode) => {
    const { owner, viewer, w } = await worldFor('member_statuses', mode);
    const all = await call(viewer, `/api/v1/friends/${owner.userId}/member-statuses`);
    const one = await call(viewer, `/api/v1/friends/${owner.userId}/member-statuses/members/${w.member}`);
    expect(all.status).toBe(200);
    if (mode === 'read' || mode === 'read_write') {
      const row = {
        memberId: w.member,
        statusId: w.status,
        name: 'Resting',
        color: '#000001',
        icon: null,
        assignedAt: expect.any(Number),
      };
      expect(all.json).toEqual([row]);
      expect(one.json).toEqual([row]);
    } else {
      expect(all.json).toEqual([]);
      expect(one.json).toEqual({ code: 'NOT_FOUND', message: 'Member not found' });
    }
    expect((await call(viewer, `/api/v1/friends/${owner.userId}/member-statuses/members/${w.hidden}`)).json).toEqual({
      code: 'NOT_FOUND',
      message: 'Member not found',
    });
    expectNoneOf(all.text + one.text, w.hiddenTexts);
  });

  it.each(MODES)('GET /custom-fields and PUT /custom-fields/{id}/value (member_custom_fields) — %s', async (mode) => {
    const { owner, viewer, w } = await worldFor('member_custom_fields', mode);
    const read = await call(viewer, `/api/v1/friends/${owner.userId}/custom-fields?memberId=${w.member}`);
    const write = await call(viewer, `/api/v1/friends/${owner.userId}/custom-fields/${w.field}/value`, {
      method: 'PUT',
      body: JSON.stringify({ memberId: w.member, value: 'friend wrote' }),
    });
    const values = await owner.api.GET('/api/v1/members/{memberId}/custom-fields', {
      params: { path: { memberId: w.member } },
    });
    const stored = values.data!.find((v) => v.fieldId === w.field)!.value;
    const audit = await owner.api.GET('/api/v1/audit', { params: { query: { actionPrefix: 'friend_write' } } });
    if (mode === 'no_overlap') {
      expect(read.json).toEqual({ code: 'NOT_FOUND', message: 'Member not found' });
      expect(write.json).toEqual({ code: 'NOT_FOUND', message: 'Member not found' });
    } else if (mode === 'none') {
      expect(read.json).toEqual({ fields: [], emptyHint: 'none_visible' });
      expect(write.json).toEqual({ code: 'NOT_FOUND', message: 'Custom field not found' });
    } else if (mode === 'read') {
      expect(read.json).toEqual({
        fields: [{ id: w.field, name: 'Role', type: 'text', value: w.c.value, viewerCanWrite: false }],
        emptyHint: null,
      });
      expect(write.json).toEqual({
        code: 'FORBIDDEN',
        message: 'Your buckets do not allow changing this custom field value',
      });
    } else {
      expect(read.json).toEqual({
        fields: [{ id: w.field, name: 'Role', type: 'text', value: w.c.value, viewerCanWrite: true }],
        emptyHint: null,
      });
      expect(write.status).toBe(204);
    }
    if (mode === 'read_write') {
      expect(stored).toBe('friend wrote');
      expect(audit.data!.items).toEqual([
        expect.objectContaining({
          action: 'friend_write.custom_field.set_value',
          targetType: 'member',
          targetId: w.member,
          detail: { friendUserId: viewer.userId, fieldId: w.field },
        }),
      ]);
    } else {
      expect(stored).toBe(w.c.value);
      expect(audit.data!.items).toEqual([]);
      if (mode !== 'read') expectNoneOf(read.text + write.text, mode === 'none' ? [w.c.value] : [w.c.value, w.c.name]);
    }
    // Hidden field and hidden member: 404 and nothing changes.
    const hiddenField = await call(viewer, `/api/v1/friends/${owner.userId}/custom-fields/${w.hiddenField}/value`, {
      method: 'PUT',
      body: JSON.stringify({ memberId: w.member, value: 'x' }),
    });
    expect(hiddenField.json).toEqual(
      mode === 'no_overlap'
        ? { code: 'NOT_FOUND', message: 'Member not found' }
        : { code: 'NOT_FOUND', message: 'Custom field not found' },
    );
    const hiddenMember = await call(viewer, `/api/v1/friends/${owner.userId}/custom-fields/${w.field}/value`, {
      method: 'PUT',
      body: JSON.stringify({ memberId: w.hidden, value: 'x' }),
    });
    expect(hiddenMember.json).toEqual({ code: 'NOT_FOUND', message: 'Member not found' });
    const hiddenRead = await call(viewer, `/api/v1/friends/${owner.userId}/custom-fields?memberId=${w.hidden}`);
    expect(hiddenRead.json).toEqual({ code: 'NOT_FOUND', message: 'Member not found' });
    const after = await owner.api.GET('/api/v1/members/{memberId}/custom-fields', {
      params: { path: { memberId: w.member } },
    });
    expect(after.data!.find((v) => v.fieldId === w.hiddenField)!.value).toBe(w.c.hiddenValue);
    expectNoneOf(read.text + write.text + hiddenField.text + hiddenMember.text + hiddenRead.text, w.hiddenTexts);
  });
});

describe('section narrowing, archive, trash', { timeout: 120_000 }, () => {
  it("a section's own buckets narrow it; archived and trashed members are not shown", async () => {
    const { owner, viewer, bucketId } = await friendsSharing(server, ALL_READ);
    const other = await createBucket(owner, ALL_READ, 'Other');
    const secret = canary('pronouns');
    const m = await createMember(owner.api, 'Kit', { displayName: 'Kit D', pronouns: secret });
    await shareMember(owner, m, [bucketId]);
    await put(owner, `/api/v1/privacy-buckets/assignments/profile-sections/${m}/pronouns`, [other]);
    await put(owner, `/api/v1/privacy-buckets/assignments/profile-sections/${m}/displayName`, [bucketId]);
    const one = await call(viewer, `/api/v1/friends/${owner.userId}/members/${m}`);
    expect(one.json).toMatchObject({ displayName: 'Kit D', pronouns: null, description: '', aboutTags: [] });
    expectNoneOf(one.text, [secret]);

    const archived = await createMember(owner.api, canary('archived'));
    await shareMember(owner, archived, [bucketId]);
    expect(
      (
        await owner.api.PATCH('/api/v1/members/{memberId}', {
          params: { path: { memberId: archived } },
          body: { archived: true },
        })
      ).response.status,
    ).toBe(200);
    const trashed = await createMember(owner.api, canary('trashed'));
    await shareMember(owner, trashed, [bucketId]);
    expect(
      (await owner.api.DELETE('/api/v1/members/{memberId}', { params: { path: { memberId: trashed } } })).response
        .status,
    ).toBe(204);
    const list = await call(viewer, `/api/v1/friends/${owner.userId}/members`);
    expect((list.json as Array<{ _id: string }>).map((x) => x._id)).toEqual([m]);
    for (const id of [archived, trashed]) {
      expect((await call(viewer, `/api/v1/friends/${owner.userId}/members/${id}`)).json).toEqual({
        code: 'NOT_FOUND',
        message: 'Member not found',
      });
      expect((await call(viewer, `/api/v1/friends/${owner.userId}/custom-fields?memberId=${id}`)).json).toEqual({
        code: 'NOT_FOUND',
        message: 'Member not found',
      });
    }
  });

  it('the list answers every section as the one-member read does, with section grants from held buckets that do not grant members_view', async () => {
    const owner = await server.user();
    const viewer = await server.user();
    await relate(owner, viewer, 'accepted');
    const view = await createBucket(owner, { members_view: 'read' }, 'View only');
    const profile = await createBucket(owner, { member_profile: 'read', member_avatar: 'read' }, 'Profile only');
    const notHeld = await createBucket(owner, ALL_READ, 'Not held');
    await giveFriend(owner, viewer, [view, profile]);
    const make = async (label: string, buckets: string[]) => {
      const id = await createMember(owner.api, label, {
        displayName: `${label} D`,
        pronouns: `${label} P`,
        description: `${label} A`,
      });
      await shareMember(owner, id, buckets);
      return id;
    };
    const both = await make('Both', [view, profile]);
    const viewOnly = await make('ViewOnly', [view]);
    const narrowedAway = await make('NarrowedAway', [view, profile]);
    await put(owner, `/api/v1/privacy-buckets/assignments/profile-sections/${narrowedAway}/pronouns`, [notHeld]);
    const narrowedIn = await make('NarrowedIn', [view, profile]);
    await put(owner, `/api/v1/privacy-buckets/assignments/profile-sections/${narrowedIn}/displayName`, [
      profile,
      notHeld,
    ]);
    const unheld = await make('Unheld', [view, notHeld]);
    const profileOnly = await make('ProfileOnly', [profile]);
    // Shown sections of a member without those texts are '' (hidden ones are null).
    const blank = await createMember(owner.api, 'Blank');
    await shareMember(owner, blank, [view, profile]);
    const list = (await call(viewer, `/api/v1/friends/${owner.userId}/members`)).json as Array<{
      _id: string;
      displayName: string | null;
      pronouns: string | null;
    }>;
    expect(list.map((m) => m._id).sort()).toEqual([both, viewOnly, narrowedAway, narrowedIn, unheld, blank].sort());
    expect(list.map((m) => m._id)).not.toContain(profileOnly);
    const byId = new Map(list.map((m) => [m._id, m]));
    expect(byId.get(both)).toMatchObject({ displayName: 'Both D', pronouns: 'Both P' });
    expect(byId.get(viewOnly)).toMatchObject({ displayName: null, pronouns: null });
    expect(byId.get(narrowedAway)).toMatchObject({ displayName: 'NarrowedAway D', pronouns: null });
    expect(byId.get(narrowedIn)).toMatchObject({ displayName: 'NarrowedIn D', pronouns: 'NarrowedIn P' });
    expect(byId.get(unheld)).toMatchObject({ displayName: null, pronouns: null });
    expect(byId.get(blank)).toMatchObject({ displayName: '', pronouns: '', description: '', aboutTags: [] });
    // The one-member read (its own statement) needs member_profile on the member: the same object where it answers.
    for (const item of list) {
      const one = await call(viewer, `/api/v1/friends/${owner.userId}/members/${item._id}`);
      if (item._id === viewOnly || item._id === unheld) expect(one.status, item._id).toBe(404);
      else expect(item, item._id).toEqual(one.json);
    }
  });

  it('a side system with buckets of its own hides its members', async () => {
    const { owner, viewer, bucketId } = await friendsSharing(server, ALL_READ);
    const other = await createBucket(owner, ALL_READ, 'Other');
    const m = await createMember(owner.api, canary('in-side'));
    await shareMember(owner, m, [bucketId]);
    const side = (await owner.api.GET('/api/v1/systems')).data!.active.sideSystemId;
    await put(owner, `/api/v1/privacy-buckets/assignments/side-systems/${side}`, [other]);
    expect((await call(viewer, `/api/v1/friends/${owner.userId}/members`)).json).toEqual([]);
    expect((await call(viewer, `/api/v1/friends/${owner.userId}/members/${m}`)).status).toBe(404);
  });

  it('emptyHint is no_definitions without live definitions; multiselect values and validation go through the owner service', async () => {
    const { owner, viewer, bucketId } = await friendsSharing(server, { ...ALL_READ });
    const m = await createMember(owner.api, 'Sam');
    await shareMember(owner, m, [bucketId]);
    expect((await call(viewer, `/api/v1/friends/${owner.userId}/custom-fields?memberId=${m}`)).json).toEqual({
      fields: [],
      emptyHint: 'no_definitions',
    });
    const f = (
      await owner.api.POST('/api/v1/custom-fields', {
        body: { name: 'Roles', type: 'multiselect', options: ['Host', 'Caretaker'] },
      })
    ).data!.id;
    await put(owner, `/api/v1/privacy-buckets/assignments/custom-fields/${f}`, [bucketId]);
    expect((await call(viewer, `/api/v1/friends/${owner.userId}/custom-fields?memberId=${m}`)).json).toEqual({
      fields: [{ id: f, name: 'Roles', type: 'multiselect', value: [], viewerCanWrite: true }],
      emptyHint: null,
    });
    const url = `/api/v1/friends/${owner.userId}/custom-fields/${f}/value`;
    const bad = await call(viewer, url, { method: 'PUT', body: JSON.stringify({ memberId: m, value: ['Nope'] }) });
    expect(bad.json).toEqual({ code: 'BAD_REQUEST', message: 'value contains unknown options: Nope' });
    expect(
      (await owner.api.GET('/api/v1/audit', { params: { query: { actionPrefix: 'friend_write' } } })).data!.items,
    ).toEqual([]);
    for (const body of [
      { memberId: m },
      { value: 'x' },
      { memberId: m, value: null },
      { memberId: m, value: 'x', extra: 1 },
      { memberId: 'nope', value: 'x' },
    ]) {
      expect(
        (await call(viewer, url, { method: 'PUT', body: JSON.stringify(body) })).status,
        JSON.stringify(body),
      ).toBe(400);
    }
    expect(
      (await call(viewer, url, { method: 'PUT', body: JSON.stringify({ memberId: m, value: ['Host'] }) })).status,
    ).toBe(204);
    expect((await call(viewer, `/api/v1/friends/${owner.userId}/custom-fields?memberId=${m}`)).json).toMatchObject({
      fields: [{ value: ['Host'] }],
    });
    expect((await call(viewer, `/api/v1/friends/${owner.userId}/custom-fields`)).status).toBe(400);
    expect((await call(viewer, `/api/v1/friends/${owner.userId}/groups/folder?folderId=nope`)).status).toBe(400);
  });
});

describe('scopes', () => {
  it('friend routes need friends:read (read_write for the write); media needs the scope of its branch', async () => {
    const { owner, viewer, bucketId } = await friendsSharing(server, ALL_READ);
    const m = await createMember(owner.api, 'Robin');
    await shareMember(owner, m, [bucketId]);
    const avatarUrl = await uploadAvatar(owner, m);
    const friendsOnly = await server.createKey(viewer.userId, { friends: 'read' });
    const membersOnly = await server.createKey(viewer.userId, { members: 'read' });
    const asKey = (apiKey: string) => ({ ...viewer, apiKey });
    expect((await call(asKey(membersOnly.apiKey), `/api/v1/friends/${owner.userId}/members`)).json).toEqual({
      code: 'FORBIDDEN',
      message: 'Missing API key scope: friends requires read',
    });
    expect(
      (
        await call(asKey(friendsOnly.apiKey), `/api/v1/friends/${owner.userId}/custom-fields/${UNKNOWN_ID}/value`, {
          method: 'PUT',
          body: JSON.stringify({ memberId: m, value: 'x' }),
        })
      ).json,
    ).toEqual({
      code: 'FORBIDDEN',
      message: 'Missing API key scope: friends requires read_write',
    });
    const friendUrl = `${avatarUrl}&ownerUserId=${owner.userId}`;
    expect((await call(asKey(friendsOnly.apiKey), friendUrl)).status).toBe(200);
    expect((await call(asKey(membersOnly.apiKey), friendUrl)).json).toEqual({
      code: 'FORBIDDEN',
      message: 'Missing API key scope: friends requires read',
    });
    // The owner's own media with only friends:read: refused (members:read is its scope).
    const ownerFriendsOnly = await server.createKey(owner.userId, { friends: 'read' });
    expect((await call({ ...owner, apiKey: ownerFriendsOnly.apiKey }, avatarUrl)).json).toEqual({
      code: 'FORBIDDEN',
      message: 'Missing API key scope: members requires read',
    });
    const none = await server.createKey(viewer.userId, { entries: 'read' });
    expect((await call(asKey(none.apiKey), friendUrl)).json).toEqual({
      code: 'FORBIDDEN',
      message: 'Missing API key scope: members requires read',
    });
  });
});

describe('hidden sections never leave the database', { timeout: 120_000 }, () => {
  it('the member list statement itself returns null for a hidden section, not the value to be dropped later', async () => {
    const { owner, viewer, bucketId } = await friendsSharing(server, { members_view: 'read', member_profile: 'read' });
    const pronouns = canary('pronouns');
    const about = canary('about');
    const member = await createMember(owner.api, 'Sectioned', { pronouns, description: about });
    await shareMember(owner, member, [bucketId]);
    const notHeld = await createBucket(owner, { member_profile: 'read' });
    for (const section of ['pronouns', 'about'])
      await put(owner, `/api/v1/privacy-buckets/assignments/profile-sections/${member}/${section}`, [notHeld]);
    const statements = await captureStatements(server.deps.db.knex, /\bmembers\b/, async () => {
      const res = await call(viewer, `/api/v1/friends/${owner.userId}/members`);
      expect(res.status).toBe(200);
      expect(res.json).toEqual([
        expect.objectContaining({ _id: member, pronouns: null, description: null, aboutTags: null }),
      ]);
      expectNoneOf(res.text, [pronouns, about]);
    });
    expect(statements.length).toBeGreaterThan(0);
    for (const statement of statements) {
      const ordered: unknown[] = [];
      const sql = statement.sql.replace(
        /\$(\d+)/g,
        (_m, n: string) => (ordered.push(statement.bindings[Number(n) - 1]), '?'),
      );
      const { rows } = await server.deps.db.knex.raw(sql, ordered as never);
      expectNoneOf(rows, [pronouns, about]);
    }
  });
});

describe('the statement cache of the hot friend reads', () => {
  it('two friends of one owner reading in turn each see their own; a bucket change and a revoke show on the next read', async () => {
    const owner = await server.user();
    const [a, b] = [await server.user(), await server.user()];
    await befriend(owner, a);
    await befriend(owner, b);
    const perms: Perms = { members_view: 'read', front: 'read', member_notes: 'read' };
    const [forA, forB] = [await createBucket(owner, perms, 'For A'), await createBucket(owner, perms, 'For B')];
    await giveFriend(owner, a, [forA]);
    await giveFriend(owner, b, [forB]);
    const [seenByA, seenByB] = [canary('A'), canary('B')];
    const ids = {
      [seenByA]: await createMember(owner.api, seenByA),
      [seenByB]: await createMember(owner.api, seenByB),
    };
    await shareMember(owner, ids[seenByA]!, [forA]);
    await shareMember(owner, ids[seenByB]!, [forB]);
    for (const name of [seenByA, seenByB]) {
      await startFronting(owner.api, ids[name]!);
      await createEntry(owner.api, `note of ${name}`, { memberIds: [ids[name]!] });
    }
    const reads = ['members', 'front', 'front/history?limit=50', 'entries?limit=50'];
    const expectSees = async (viewer: TestUser, sees: string[], hidden: string[]) => {
      for (const read of reads) {
        const res = await call(viewer, `/api/v1/friends/${owner.userId}/${read}`);
        expect(res.status, read).toBe(200);
        for (const name of sees) expect(res.text, `${read} shows ${name}`).toContain(name);
        expectNoneOf(res.text, hidden);
      }
    };
    for (let round = 0; round < 3; round++) {
      await expectSees(a, [seenByA], [seenByB, ids[seenByB]!]);
      await expectSees(b, [seenByB], [seenByA, ids[seenByA]!]);
    }
    // The cache keeps statements, never what they read: A's member moves to B's bucket.
    await put(owner, `/api/v1/privacy-buckets/assignments/members/${ids[seenByA]}`, [forB]);
    await expectSees(a, [], [seenByA, seenByB, ids[seenByA]!, ids[seenByB]!]);
    await expectSees(b, [seenByA, seenByB], []);
    const revoked = await call(owner, `/api/v1/friends/${a.userId}/revoke`, { method: 'POST' });
    expect(revoked.status).toBe(204);
    for (const read of reads) expect((await call(a, `/api/v1/friends/${owner.userId}/${read}`)).status, read).toBe(404);
    await expectSees(b, [seenByA, seenByB], []);
  });
});

describe('statements per request', () => {
  it('the member list and the tree cost a constant number of statements whatever the number of rows', async () => {
    const { owner, viewer, bucketId } = await friendsSharing(server, ALL_READ);
    const counts: number[] = [];
    for (const n of [1, 6]) {
      while (
        (await owner.api.GET('/api/v1/members/page', { params: { query: { limit: 100 } } })).data!.items.length < n
      ) {
        const m = await createMember(owner.api, 'M');
        await shareMember(owner, m, [bucketId]);
        const g = (await owner.api.POST('/api/v1/groups', { body: { name: 'G' } })).data!.id;
        await put(owner, `/api/v1/privacy-buckets/assignments/groups/${g}`, [bucketId]);
        await call(owner, `/api/v1/groups/${g}/members`, { method: 'PUT', body: JSON.stringify({ memberIds: [m] }) });
      }
      const seen = await captureStatements(
        server.deps.db.knex,
        /members|directories|member_status|custom_field/,
        async () => {
          expect((await call(viewer, `/api/v1/friends/${owner.userId}/members`)).status).toBe(200);
          expect((await call(viewer, `/api/v1/friends/${owner.userId}/groups`)).status).toBe(200);
          expect((await call(viewer, `/api/v1/friends/${owner.userId}/member-statuses`)).status).toBe(200);
        },
      );
      // The friendship itself: its own statement for the tree and the statuses (forFriend), inside
      // the list's one statement (friend_access).
      const access = seen.filter((st) => /^select g\.owner_id is not null as ok,/.test(st.sql));
      expect(access).toHaveLength(2);
      counts.push(seen.length - access.length);
    }
    expect(counts[0]).toBe(counts[1]);
    expect(counts[0]).toBeLessThanOrEqual(4);
  });
});

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
import { jsonHeaders, useServer } from './helpers/server.ts';
import { codeAndMessage } from './helpers/errors.ts';

const server = useServer();
const folderPath = (folderId: string) => ({ params: { path: { folderId } } });
const groupPath = (groupId: string) => ({ params: { path: { groupId } } });

describe('GET /groups tree', () => {
  it('lists folders flat (a subfolder after its parent, with its parentId), members and groups under their own folder, the rest at the root', async () => {
    const { api } = await server.user();
    const top = await createFolder(api, 'Top');
    const inner = await createFolder(api, 'Inner', { parentId: top });
    const a = await createMember(api, 'A', { directoryId: top });
    const b = await createMember(api, 'B', { directoryId: inner });
    const c = await createMember(api, 'C');
    const g = await createGroup(api, 'G', { parentId: top, memberIds: [a, c], color: '#abcdef' });
    const rootGroup = await createGroup(api, 'Root group');
    const { data, response } = await api.GET('/api/v1/groups');
    expect(response.status).toBe(200);
    expect(data!.members.map((m) => m.id)).toEqual([c]);
    expect(data!.members[0]).toEqual({ id: c, name: 'C', displayName: '', archived: false, avatarUrl: null });
    expect(data!.groups.map((x) => x._id)).toEqual([rootGroup]);
    expect(data!.folders.map((f) => [f._id, f.parentId])).toEqual([
      [top, null],
      [inner, top],
    ]);
    const [topNode, innerNode] = data!.folders;
    expect(topNode).toMatchObject({ _id: top, name: 'Top', parentId: null });
    expect(topNode).not.toHaveProperty('folders');
    expect(topNode!.members.map((m) => m.id)).toEqual([a]);
    expect(topNode!.groups).toEqual([
      expect.objectContaining({ _id: g, color: '#ABCDEF', parentId: top, memberIds: [a, c] }),
    ]);
    expect(innerNode).toMatchObject({ _id: inner, name: 'Inner', parentId: top });
    expect(innerNode).not.toHaveProperty('folders');
    expect(innerNode!.members.map((m) => m.id)).toEqual([b]);
    expect(innerNode!.groups).toEqual([]);
  });

  it('orders the flat folder list depth first: each folder right before its subtree, siblings by name', async () => {
    const { api } = await server.user();
    // Created out of order so that neither creation order nor a plain sort by name gives the answer.
    const bRoot = await createFolder(api, 'B root');
    const aRoot = await createFolder(api, 'A root');
    const zChild = await createFolder(api, 'Z child', { parentId: aRoot });
    const mChild = await createFolder(api, 'M child', { parentId: aRoot });
    const deep = await createFolder(api, 'Deep', { parentId: mChild });
    const bChild = await createFolder(api, 'Child of B', { parentId: bRoot });
    const inDeep = await createMember(api, 'In deep', { directoryId: deep });
    const inZ = await createMember(api, 'In Z', { directoryId: zChild });
    const deepGroup = await createGroup(api, 'Deep group', { parentId: deep, memberIds: [inDeep] });
    const bGroup = await createGroup(api, 'B group', { parentId: bChild });

    const { data } = await api.GET('/api/v1/groups');
    expect(data!.folders.map((f) => [f.name, f.parentId])).toEqual([
      ['A root', null],
      ['M child', aRoot],
      ['Deep', mChild],
      ['Z child', aRoot],
      ['B root', null],
      ['Child of B', bRoot],
    ]);
    const byId = new Map(data!.folders.map((f) => [f._id, f]));
    expect(byId.get(deep)!.members.map((m) => m.id)).toEqual([inDeep]);
    expect(byId.get(deep)!.groups.map((x) => x._id)).toEqual([deepGroup]);
    expect(byId.get(zChild)!.members.map((m) => m.id)).toEqual([inZ]);
    expect(byId.get(bChild)!.groups.map((x) => x._id)).toEqual([bGroup]);
    for (const id of [aRoot, mChild, bRoot]) {
      expect(byId.get(id)!.members).toEqual([]);
      expect(byId.get(id)!.groups).toEqual([]);
    }
    // Every parent comes before its children, so one pass in order rebuilds the tree.
    const seen = new Set<string>();
    for (const f of data!.folders) {
      if (f.parentId !== null) expect(seen.has(f.parentId), f.name).toBe(true);
      seen.add(f._id);
    }
  });

  it('a folder whose parent is outside the requested scope is a root of the list, keeping its parentId', async () => {
    const { api } = await server.user();
    const side = await activeSide(api);
    const sub = await createSub(api, side, await createMember(api, 'Host'));
    const parent = await createFolder(api, 'Side parent');
    const child = await createFolder(api, 'Sub child', { parentId: parent, subSystemId: sub });
    const grandchild = await createFolder(api, 'Sub grandchild', { parentId: child, subSystemId: sub });
    const { data } = await api.GET('/api/v1/groups', { params: { query: { subSystemId: sub } } });
    expect(data!.folders.map((f) => [f._id, f.parentId])).toEqual([
      [child, parent],
      [grandchild, child],
    ]);
    const whole = await api.GET('/api/v1/groups', { params: { query: { sideSystemId: side } } });
    expect(whole.data!.folders.map((f) => [f._id, f.parentId])).toEqual([
      [parent, null],
      [child, parent],
      [grandchild, child],
    ]);
  });

  it('shows only the scope: other side systems are not listed', async () => {
    const { api } = await server.user();
    const side = await createSide(api);
    await createFolder(api, 'Other side', { sideSystemId: side });
    await createGroup(api, 'Other side group', { sideSystemId: side });
    const mine = await createFolder(api, 'Mine');
    const { data } = await api.GET('/api/v1/groups');
    expect(data!.folders.map((f) => f._id)).toEqual([mine]);
    expect(data!.groups).toEqual([]);
    const other = await api.GET('/api/v1/groups', { params: { query: { sideSystemId: side } } });
    expect(other.data!.folders.map((f) => f.name)).toEqual(['Other side']);
    expect(other.data!.groups.map((f) => f.name)).toEqual(['Other side group']);
  });
});

describe('folders', () => {
  it('rename, move and clear the description with PATCH', async () => {
    const { api } = await server.user();
    const a = await createFolder(api, 'A', { description: 'first' });
    const b = await createFolder(api, 'B');
    const res = await api.PATCH('/api/v1/folders/{folderId}', {
      ...folderPath(b),
      body: { name: 'B2', parentId: a, description: null },
    });
    expect(res.response.status).toBe(200);
    expect(res.data).toMatchObject({ _id: b, name: 'B2', parentId: a, description: null });
    const back = await api.PATCH('/api/v1/folders/{folderId}', { ...folderPath(b), body: { parentId: null } });
    expect(back.data?.parentId).toBeNull();
  });

  it('refuses moving a folder under itself or its own descendant (400)', async () => {
    const { api } = await server.user();
    const a = await createFolder(api, 'A');
    const b = await createFolder(api, 'B', { parentId: a });
    const c = await createFolder(api, 'C', { parentId: b });
    for (const parentId of [a, b, c]) {
      const res = await api.PATCH('/api/v1/folders/{folderId}', { ...folderPath(a), body: { parentId } });
      expect(res.response.status).toBe(400);
      expect(res.error?.message).toBe('Cannot move a folder into itself or one of its subfolders');
    }
    const tree = await api.GET('/api/v1/groups');
    expect(tree.data!.folders.map((f) => [f._id, f.parentId])).toEqual([
      [a, null],
      [b, a],
      [c, b],
    ]);
  });

  it('checks parents: unknown → 404, another side system → 400, a group is not a folder', async () => {
    const { api } = await server.user();
    const other = await server.user();
    const folder = await createFolder(api);
    expect((await api.POST('/api/v1/folders', { body: { name: 'x', parentId: UNKNOWN_ID } })).response.status).toBe(
      404,
    );
    expect(
      (await api.POST('/api/v1/folders', { body: { name: 'x', parentId: await createFolder(other.api) } })).response
        .status,
    ).toBe(404);
    const elsewhere = await createFolder(api, 'E', { sideSystemId: await createSide(api) });
    expect(
      (await api.PATCH('/api/v1/folders/{folderId}', { ...folderPath(folder), body: { parentId: elsewhere } })).response
        .status,
    ).toBe(400);
    const group = await createGroup(api);
    expect((await api.POST('/api/v1/folders', { body: { name: 'x', parentId: group } })).response.status).toBe(404);
    expect(
      (await api.PATCH('/api/v1/folders/{folderId}', { ...folderPath(group), body: { name: 'x' } })).response.status,
    ).toBe(404);
    expect(
      (await api.PATCH('/api/v1/groups/{groupId}', { ...groupPath(folder), body: { name: 'x' } })).response.status,
    ).toBe(404);
  });

  it('DELETE moves the folder and its subtree to the trash; its members show at the root; restore brings it all back', async () => {
    const { api } = await server.user();
    const top = await createFolder(api, 'Top');
    const inner = await createFolder(api, 'Inner', { parentId: top });
    const m = await createMember(api, 'M', { directoryId: inner });
    const g = await createGroup(api, 'G', { parentId: inner });
    expect((await api.DELETE('/api/v1/folders/{folderId}', folderPath(top))).response.status).toBe(204);
    const hidden = await api.GET('/api/v1/groups');
    expect(hidden.data!.folders).toEqual([]);
    expect(hidden.data!.groups).toEqual([]);
    expect(hidden.data!.members.map((x) => x.id)).toEqual([m]);
    expect(
      (await api.PATCH('/api/v1/folders/{folderId}', { ...folderPath(top), body: { name: 'x' } })).response.status,
    ).toBe(404);
    expect((await api.DELETE('/api/v1/folders/{folderId}', folderPath(top))).response.status).toBe(404);

    expect((await api.POST('/api/v1/folders/{folderId}/restore', folderPath(top))).response.status).toBe(204);
    const back = await api.GET('/api/v1/groups');
    expect(back.data!.folders.map((f) => [f._id, f.parentId])).toEqual([
      [top, null],
      [inner, top],
    ]);
    expect(back.data!.folders[0]!.members).toEqual([]);
    expect(back.data!.folders[1]!.members.map((x) => x.id)).toEqual([m]);
    expect(back.data!.folders[1]!.groups.map((x) => x._id)).toEqual([g]);
    const twice = await api.POST('/api/v1/folders/{folderId}/restore', folderPath(top));
    expect(twice.response.status).toBe(400);
    expect(twice.error?.message).toBe('Folder is not in the trash');
    expect((await api.POST('/api/v1/folders/{folderId}/restore', folderPath(UNKNOWN_ID))).response.status).toBe(404);
  });

  it('restoring a folder whose parent is still in the trash puts it at the root', async () => {
    const { api } = await server.user();
    const top = await createFolder(api, 'Top');
    const inner = await createFolder(api, 'Inner', { parentId: top });
    await api.DELETE('/api/v1/folders/{folderId}', folderPath(inner));
    await api.DELETE('/api/v1/folders/{folderId}', folderPath(top));
    await api.POST('/api/v1/folders/{folderId}/restore', folderPath(inner));
    const { data } = await api.GET('/api/v1/groups');
    expect(data!.folders.map((f) => [f._id, f.parentId])).toEqual([[inner, null]]);
  });
});

describe('groups', () => {
  it('replaces members with PUT, only with live members of the same side system', async () => {
    const { api } = await server.user();
    const other = await server.user();
    const a = await createMember(api, 'A');
    const b = await createMember(api, 'B');
    const g = await createGroup(api, 'G', { memberIds: [a] });
    expect(
      (await api.PUT('/api/v1/groups/{groupId}/members', { ...groupPath(g), body: { memberIds: [b, a] } })).response
        .status,
    ).toBe(204);
    let tree = await api.GET('/api/v1/groups');
    expect(tree.data!.groups[0]!.memberIds).toEqual([b, a]);

    const foreign = await createMember(other.api, 'X');
    const elsewhere = await createMember(api, 'E', { sideSystemId: await createSide(api) });
    const trashed = await createMember(api, 'T');
    await api.DELETE('/api/v1/members/{memberId}', { params: { path: { memberId: trashed } } });
    for (const bad of [foreign, elsewhere, trashed, UNKNOWN_ID]) {
      const res = await api.PUT('/api/v1/groups/{groupId}/members', { ...groupPath(g), body: { memberIds: [a, bad] } });
      expect(res.response.status).toBe(400);
      expect(res.error?.message).toContain(bad);
    }
    expect((await api.POST('/api/v1/groups', { body: { name: 'x', memberIds: [foreign] } })).response.status).toBe(400);
    tree = await api.GET('/api/v1/groups');
    expect(tree.data!.groups.map((x) => x.memberIds)).toEqual([[b, a]]);
  });

  it('the same PUT sent several times at once: every one succeeds, none is a 500 (found by npm run fuzz)', async () => {
    // Two transactions each deleted the group's rows and then inserted the same pairs; the second
    // failed on the primary key (PostgreSQL only: the embedded database runs one at a time).
    const { api } = await server.user();
    const a = await createMember(api, 'A');
    const b = await createMember(api, 'B');
    const g = await createGroup(api, 'G');
    for (const memberIds of [[a], [a, b], [b, a]]) {
      const answers = await Promise.all(
        Array.from({ length: 6 }, () =>
          api.PUT('/api/v1/groups/{groupId}/members', { ...groupPath(g), body: { memberIds } }),
        ),
      );
      expect(answers.map((x) => x.response.status)).toEqual(Array(6).fill(204));
      const tree = await api.GET('/api/v1/groups');
      expect(tree.data!.groups[0]!.memberIds).toEqual(memberIds);
    }
  });

  it('does not list trashed members in memberIds', async () => {
    const { api } = await server.user();
    const a = await createMember(api, 'A');
    const b = await createMember(api, 'B');
    const g = await createGroup(api, 'G', { memberIds: [a, b] });
    await api.DELETE('/api/v1/members/{memberId}', { params: { path: { memberId: a } } });
    const res = await api.PATCH('/api/v1/groups/{groupId}', { ...groupPath(g), body: { name: 'G2' } });
    expect(res.data).toMatchObject({ name: 'G2', memberIds: [b] });
  });

  it('rename, recolour, move into a folder, trash and restore', async () => {
    const { api } = await server.user();
    const folder = await createFolder(api);
    const g = await createGroup(api, 'G', { color: '#000000' });
    const moved = await api.PATCH('/api/v1/groups/{groupId}', {
      ...groupPath(g),
      body: { parentId: folder, color: null, description: 'd' },
    });
    expect(moved.data).toMatchObject({ parentId: folder, color: null, description: 'd' });
    expect((await api.DELETE('/api/v1/groups/{groupId}', groupPath(g))).response.status).toBe(204);
    expect((await api.GET('/api/v1/groups')).data!.folders[0]!.groups).toEqual([]);
    expect(
      (await api.PUT('/api/v1/groups/{groupId}/members', { ...groupPath(g), body: { memberIds: [] } })).response.status,
    ).toBe(404);
    expect((await api.POST('/api/v1/groups/{groupId}/restore', groupPath(g))).response.status).toBe(204);
    expect((await api.GET('/api/v1/groups')).data!.folders[0]!.groups.map((x) => x._id)).toEqual([g]);
    expect((await api.POST('/api/v1/groups/{groupId}/restore', groupPath(g))).response.status).toBe(400);
  });
});

describe('directory layouts', () => {
  it('are saved per folder (or the root), listed, trashed and restored', async () => {
    const { api } = await server.user();
    const folder = await createFolder(api);
    const m = await createMember(api, 'M', { directoryId: folder });
    const created = await api.POST('/api/v1/directory-layouts', {
      body: { directoryId: folder, name: 'By role', itemIds: [m] },
    });
    expect(created.response.status).toBe(201);
    const root = await api.POST('/api/v1/directory-layouts', {
      body: { directoryId: null, name: 'Root', itemIds: [folder] },
    });
    const all = await api.GET('/api/v1/directory-layouts');
    expect(all.data!.map((l) => l._id)).toEqual([created.data!.id, root.data!.id]);
    const one = await api.GET('/api/v1/directory-layouts', { params: { query: { directoryId: folder } } });
    expect(one.data).toEqual([
      expect.objectContaining({ _id: created.data!.id, directoryId: folder, name: 'By role', itemIds: [m] }),
    ]);

    const path = { params: { path: { layoutId: created.data!.id } } };
    expect((await api.DELETE('/api/v1/directory-layouts/{layoutId}', path)).response.status).toBe(204);
    expect((await api.GET('/api/v1/directory-layouts')).data!.map((l) => l._id)).toEqual([root.data!.id]);
    expect((await api.DELETE('/api/v1/directory-layouts/{layoutId}', path)).response.status).toBe(404);
    expect((await api.POST('/api/v1/directory-layouts/{layoutId}/restore', path)).response.status).toBe(204);
    expect((await api.POST('/api/v1/directory-layouts/{layoutId}/restore', path)).response.status).toBe(400);
    expect((await api.GET('/api/v1/directory-layouts')).data).toHaveLength(2);
  });

  it('needs an existing folder of the caller', async () => {
    const { api } = await server.user();
    const other = await server.user();
    const theirs = await createFolder(other.api);
    expect(
      (await api.POST('/api/v1/directory-layouts', { body: { directoryId: theirs, name: 'x', itemIds: [] } })).response
        .status,
    ).toBe(404);
    const dup = await api.POST('/api/v1/directory-layouts', {
      body: { directoryId: null, name: 'x', itemIds: [UNKNOWN_ID, UNKNOWN_ID] },
    });
    expect(dup.response.status).toBe(400);
  });
});

describe('strict bodies', () => {
  const CASES: Array<[Record<string, unknown>, string]> = [
    [{ bogus: 1 }, "Unknown field 'bogus'"],
    [{ name: '' }, 'name must NOT have fewer than 1 characters'],
    [{ name: 'x'.repeat(81) }, 'name must NOT have more than 80 characters'],
  ];
  interface Route {
    route: string;
    method: 'POST' | 'PATCH';
    /** The path to call, creating what it needs first. */
    path: (api: ApiClient) => Promise<string>;
    /** A valid body the case is merged into. */
    base: Record<string, unknown>;
  }
  const ROUTES: Route[] = [
    { route: 'POST /folders', method: 'POST', path: async () => '/api/v1/folders', base: { name: 'ok' } },
    {
      route: 'PATCH /folders/{folderId}',
      method: 'PATCH',
      path: async (api) => `/api/v1/folders/${await createFolder(api, 'Before')}`,
      base: {},
    },
    { route: 'POST /groups', method: 'POST', path: async () => '/api/v1/groups', base: { name: 'ok' } },
    {
      route: 'PATCH /groups/{groupId}',
      method: 'PATCH',
      path: async (api) => `/api/v1/groups/${await createGroup(api, 'Before')}`,
      base: {},
    },
    {
      route: 'POST /directory-layouts',
      method: 'POST',
      path: async () => '/api/v1/directory-layouts',
      base: { directoryId: null, name: 'ok', itemIds: [] },
    },
  ];

  describe.each(ROUTES)('$route', ({ method, path, base }) => {
    it.each(CASES)('refuses %j with 400 and writes nothing', async (extra, message) => {
      const { api, apiKey } = await server.user();
      const res = await server.fetch(await path(api), {
        method,
        headers: jsonHeaders(apiKey),
        body: JSON.stringify({ ...base, ...extra }),
      });
      expect(res.status).toBe(400);
      expect(codeAndMessage(await res.json())).toEqual({ code: 'BAD_REQUEST', message });
      const tree = (await api.GET('/api/v1/groups')).data!;
      expect([...tree.folders, ...tree.groups].map((d) => d.name)).toEqual(method === 'PATCH' ? ['Before'] : []);
      expect((await api.GET('/api/v1/directory-layouts')).data).toEqual([]);
    });
  });
});

describe('POST /groups and POST /folders cost', () => {
  it('creates a top-level group or folder without members in one statement, with its default buckets and event', async () => {
    const { api, userId } = await server.user();
    const bucket = (await api.POST('/api/v1/privacy-buckets', { body: { name: 'Close' } })).data!._id;
    for (const kind of ['new_group', 'new_directory'] as const)
      await api.PUT('/api/v1/privacy-buckets/defaults/{kind}', {
        params: { path: { kind } },
        body: { bucketIds: [bucket] },
      });
    await api.POST('/api/v1/groups', { body: { name: 'Warm-up' } }); // warms the key cache
    const knex = server.deps.db.knex;
    const ids: string[] = [];
    for (const path of ['/api/v1/groups', '/api/v1/folders'] as const) {
      const statements = await captureStatements(knex, REQUEST_WORK, async () => {
        const res = await api.POST(path, { body: { name: 'One' } });
        expect(res.response.status, JSON.stringify(res.error)).toBe(201);
        ids.push(res.data!.id);
      });
      expect(
        statements.map((st) => st.sql.trim().split(/\s+/).slice(0, 3).join(' ')),
        path,
      ).toEqual(['with write_context as']);
    }
    const { rows } = await knex.raw<{ rows: Array<{ kind: string }> }>(
      'select kind from privacy_bucket_assignments where user_id = ? and bucket_id = ? and content_id = any (?::uuid[]) order by kind',
      [userId, bucket, ids],
    );
    expect(rows.map((r) => r.kind)).toEqual(['directory', 'group']);
    const { rows: events } = await knex.raw<{ rows: Array<{ type: string }> }>(
      `select type from events where account_id = ? and data->>'id' = any (?::text[]) order by id`,
      [userId, ids],
    );
    expect(events.map((e) => e.type)).toEqual(['group.created', 'folder.created']);
  });
});

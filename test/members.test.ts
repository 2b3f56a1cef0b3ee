import { describe, expect, it } from 'vitest';
import { activeSide, createFolder, createGroup, createMember, createSide, UNKNOWN_ID } from './helpers/fixtures.ts';
import { useServer, bearer, jsonHeaders } from './helpers/server.ts';

let now = 1_800_000_000_000;
const server = useServer({ clock: () => now });
const memberPath = (memberId: string) => ({ params: { path: { memberId } } });

describe('POST /members', () => {
  it('creates with the fixed strict body and answers 201 { id }', async () => {
    const { api, userId } = await server.user();
    const side = await activeSide(api);
    const folder = await createFolder(api);
    now += 10;
    const res = await api.POST('/api/v1/members', {
      body: { name: ' Robin ', displayName: 'Robin 🌿', pronouns: 'she/they', description: 'Gatekeeper', aboutTags: ['gatekeeper'], directoryId: folder },
    });
    expect(res.response.status).toBe(201);
    expect(Object.keys(res.data!)).toEqual(['id']);
    const got = await api.GET('/api/v1/members/{memberId}', memberPath(res.data!.id));
    expect(got.data).toEqual({
      _id: res.data!.id,
      userId,
      sideSystemId: side,
      subSystemId: null,
      directoryId: folder,
      name: 'Robin',
      displayName: 'Robin 🌿',
      pronouns: 'she/they',
      description: 'Gatekeeper',
      avatarUrl: null,
      backgroundUrl: null,
      aboutTags: ['gatekeeper'],
      profileStyle: null,
      archivedAt: null,
      createdAt: now,
      updatedAt: now,
      version: 1,
    });
  });

  it.each([
    [{}, 'name is required'],
    [{ name: '' }, 'name must NOT have fewer than 1 characters'],
    [{ name: 'x'.repeat(81) }, 'name must NOT have more than 80 characters'],
    [{ name: 'ok', nickname: 'x' }, "Unknown field 'nickname'"],
    [{ name: 'ok', aboutTags: ['a', 'a'] }, 'aboutTags must NOT have duplicate items (items ## 1 and 0 are identical)'],
    [{ name: 'ok', directoryId: 'nope' }, 'directoryId must be a valid UUID'],
  ])('refuses %j with 400', async (body, message) => {
    const { apiKey } = await server.user();
    const res = await server.fetch('/api/v1/members', { method: 'POST', headers: jsonHeaders(apiKey), body: JSON.stringify(body) });
    expect(res.status).toBe(400);
    expect(await res.json()).toEqual({ code: 'BAD_REQUEST', message });
  });

  it('checks the folder and the target system belong to the caller', async () => {
    const { api } = await server.user();
    const other = await server.user();
    const theirFolder = await createFolder(other.api);
    expect((await api.POST('/api/v1/members', { body: { name: 'x', directoryId: theirFolder } })).response.status).toBe(404);
    const side = await createSide(api);
    const folderInOtherSide = await createFolder(api, 'F', { sideSystemId: side });
    const mismatch = await api.POST('/api/v1/members', { body: { name: 'x', directoryId: folderInOtherSide } });
    expect(mismatch.response.status).toBe(400);
    expect((await api.POST('/api/v1/members', { body: { name: 'x', sideSystemId: await activeSide(other.api) } })).response.status).toBe(404);
  });
});

describe('GET /members/{memberId}', () => {
  it('is 404 for another account, 404 for an unknown id and 400 for a malformed one', async () => {
    const a = await server.user();
    const b = await server.user();
    const id = await createMember(a.api);
    expect((await b.api.GET('/api/v1/members/{memberId}', memberPath(id))).response.status).toBe(404);
    expect((await a.api.GET('/api/v1/members/{memberId}', memberPath(UNKNOWN_ID))).response.status).toBe(404);
    const bad = await a.api.GET('/api/v1/members/{memberId}', memberPath('not-a-uuid'));
    expect(bad.response.status).toBe(400);
    expect(bad.error?.message).toBe('memberId must be a valid UUID');
  });
});

describe('PATCH /members/{memberId}', () => {
  it('updates only the given fields and bumps the version; null and "" clear optional text', async () => {
    const { api } = await server.user();
    const id = await createMember(api, 'Robin', { displayName: 'R', pronouns: 'she/her' });
    now += 1000;
    const res = await api.PATCH('/api/v1/members/{memberId}', {
      ...memberPath(id),
      body: { displayName: null, pronouns: '', aboutTags: ['a', 'b'], profileStyle: { accent: '#FF0000' }, description: 'new' },
    });
    expect(res.response.status).toBe(200);
    expect(res.data).toMatchObject({ name: 'Robin', displayName: '', pronouns: '', aboutTags: ['a', 'b'], profileStyle: { accent: '#FF0000' }, description: 'new', version: 2, updatedAt: now });
  });

  it('refuses an empty change set, including one with only expectedVersion', async () => {
    const { api } = await server.user();
    const id = await createMember(api);
    for (const body of [{}, { expectedVersion: 1 }]) {
      const res = await api.PATCH('/api/v1/members/{memberId}', { ...memberPath(id), body });
      expect(res.response.status).toBe(400);
      expect(res.error?.code).toBe('BAD_REQUEST');
    }
  });

  it('answers 409 CONFLICT for a stale expectedVersion and changes nothing', async () => {
    const { api } = await server.user();
    const id = await createMember(api, 'Robin');
    const first = await api.PATCH('/api/v1/members/{memberId}', { ...memberPath(id), body: { name: 'Robyn', expectedVersion: 1 } });
    expect(first.data?.version).toBe(2);
    const stale = await api.PATCH('/api/v1/members/{memberId}', { ...memberPath(id), body: { name: 'Robert', expectedVersion: 1 } });
    expect(stale.response.status).toBe(409);
    expect(stale.error?.code).toBe('CONFLICT');
    expect((await api.GET('/api/v1/members/{memberId}', memberPath(id))).data).toMatchObject({ name: 'Robyn', version: 2 });
  });

  it('lets exactly one of two concurrent writers with the same expectedVersion win', async () => {
    const { api } = await server.user();
    const id = await createMember(api);
    const results = await Promise.all(
      ['One', 'Two'].map((name) => api.PATCH('/api/v1/members/{memberId}', { ...memberPath(id), body: { name, expectedVersion: 1 } })),
    );
    expect(results.map((r) => r.response.status).sort()).toEqual([200, 409]);
  });

  it('archives and unarchives', async () => {
    const { api } = await server.user();
    const id = await createMember(api);
    now += 5;
    const archived = await api.PATCH('/api/v1/members/{memberId}', { ...memberPath(id), body: { archived: true } });
    expect(archived.data?.archivedAt).toBe(now);
    const again = await api.PATCH('/api/v1/members/{memberId}', { ...memberPath(id), body: { archived: true } });
    expect(again.data?.archivedAt).toBe(now); // the original archive time is kept
    const back = await api.PATCH('/api/v1/members/{memberId}', { ...memberPath(id), body: { archived: false } });
    expect(back.data?.archivedAt).toBeNull();
  });

  it('moves the member to another system scope, leaving its old folder and groups; 404 for a foreign target', async () => {
    const { api } = await server.user();
    const other = await server.user();
    const folder = await createFolder(api);
    const id = await createMember(api, 'Mover', { directoryId: folder });
    const group = await createGroup(api, 'Old group', { memberIds: [id] });
    const side = await createSide(api);
    const foreign = await api.PATCH('/api/v1/members/{memberId}', { ...memberPath(id), body: { moveToSystemScope: { sideSystemId: await activeSide(other.api) } } });
    expect(foreign.response.status).toBe(404);
    const moved = await api.PATCH('/api/v1/members/{memberId}', { ...memberPath(id), body: { moveToSystemScope: { sideSystemId: side, subSystemId: null } } });
    expect(moved.response.status).toBe(200);
    expect(moved.data).toMatchObject({ sideSystemId: side, subSystemId: null, directoryId: null });
    const tree = await api.GET('/api/v1/groups');
    const oldGroup = tree.data!.groups.find((g) => g._id === group)!;
    expect(oldGroup.memberIds).toEqual([]);
  });

  it('sets and clears the folder; a folder of another side system is refused', async () => {
    const { api } = await server.user();
    const id = await createMember(api);
    const folder = await createFolder(api);
    expect((await api.PATCH('/api/v1/members/{memberId}', { ...memberPath(id), body: { directoryId: folder } })).data?.directoryId).toBe(folder);
    expect((await api.PATCH('/api/v1/members/{memberId}', { ...memberPath(id), body: { directoryId: null } })).data?.directoryId).toBeNull();
    const otherSideFolder = await createFolder(api, 'x', { sideSystemId: await createSide(api) });
    expect((await api.PATCH('/api/v1/members/{memberId}', { ...memberPath(id), body: { directoryId: otherSideFolder } })).response.status).toBe(400);
  });
});

describe('trash', () => {
  it('DELETE moves to the trash: reads answer 404, lists skip it; restore brings it back', async () => {
    const { api } = await server.user();
    const id = await createMember(api, 'Robin');
    expect((await api.DELETE('/api/v1/members/{memberId}', memberPath(id))).response.status).toBe(204);
    expect((await api.GET('/api/v1/members/{memberId}', memberPath(id))).response.status).toBe(404);
    expect((await api.PATCH('/api/v1/members/{memberId}', { ...memberPath(id), body: { name: 'x' } })).response.status).toBe(404);
    expect((await api.GET('/api/v1/members/page', { params: { query: { limit: 10 } } })).data!.items).toEqual([]);
    expect((await api.DELETE('/api/v1/members/{memberId}', memberPath(id))).response.status).toBe(404);
    const row = await server.deps.db.knex('members').where({ id }).first();
    expect(row.deleted_at).toEqual(expect.any(Number));

    expect((await api.POST('/api/v1/members/{memberId}/restore', memberPath(id))).response.status).toBe(204);
    expect((await api.GET('/api/v1/members/{memberId}', memberPath(id))).data?.name).toBe('Robin');
    const again = await api.POST('/api/v1/members/{memberId}/restore', memberPath(id));
    expect(again.response.status).toBe(400);
    expect(again.error?.message).toBe('Member is not in the trash');
    expect((await api.POST('/api/v1/members/{memberId}/restore', memberPath(UNKNOWN_ID))).response.status).toBe(404);
  });
});

describe('GET /members (deprecated)', () => {
  it('sends exactly the four deprecation headers and caps the list at 100', async () => {
    const { api, apiKey } = await server.user();
    const ids: string[] = [];
    for (let i = 0; i < 103; i++) {
      now += 1;
      ids.push(await createMember(api, `M${i}`));
    }
    const res = await server.fetch('/api/v1/members', { headers: bearer(apiKey) });
    expect(res.status).toBe(200);
    expect(res.headers.get('deprecation')).toBe('true');
    expect(res.headers.get('sunset')).toBe('Sat, 21 Nov 2026 00:00:00 GMT');
    expect(res.headers.get('link')).toBe('</api/v1/members/page>; rel=successor-version');
    const warning = res.headers.get('warning')!;
    expect(warning).toMatch(/^299 /);
    expect(warning).toContain('100');
    expect(warning).toContain('GET /api/v1/members/page');
    const body = (await res.json()) as Array<{ _id: string }>;
    expect(body.map((m) => m._id)).toEqual(ids.slice(0, 100));
    const page = await server.fetch('/api/v1/members/page?limit=1', { headers: bearer(apiKey) });
    expect(page.headers.get('deprecation')).toBeNull();
  });
});

describe('GET /members/page', () => {
  it('requires limit 1–200', async () => {
    const { apiKey } = await server.user();
    for (const [query, message] of [
      ['', 'limit is required'],
      ['?limit=0', 'limit must be >= 1'],
      ['?limit=201', 'limit must be <= 200'],
      ['?limit=abc', 'limit must be integer'],
    ] as const) {
      const res = await server.fetch(`/api/v1/members/page${query}`, { headers: bearer(apiKey) });
      expect(res.status, query).toBe(400);
      expect((await res.json()).message, query).toBe(message);
    }
    expect((await server.fetch('/api/v1/members/page?limit=200', { headers: bearer(apiKey) })).status).toBe(200);
  });

  it('walks every live member once, in creation order, archived included; nextCursor is null at the end', async () => {
    const { api } = await server.user();
    const ids: string[] = [];
    for (let i = 0; i < 7; i++) ids.push(await createMember(api, `P${i}`)); // same timestamp: the id breaks ties
    await api.PATCH('/api/v1/members/{memberId}', { ...memberPath(ids[2]!), body: { archived: true } });
    await api.DELETE('/api/v1/members/{memberId}', memberPath(ids[4]!));
    const seen: string[] = [];
    let cursor: string | undefined;
    let pages = 0;
    do {
      const { data } = await api.GET('/api/v1/members/page', { params: { query: { limit: 2, ...(cursor ? { cursor } : {}) } } });
      expect(data!.items.length).toBeLessThanOrEqual(2);
      seen.push(...data!.items.map((m) => m._id));
      cursor = data!.nextCursor ?? undefined;
      pages++;
    } while (cursor);
    expect(pages).toBe(3);
    const expected = ids.filter((id) => id !== ids[4]).sort();
    expect([...seen].sort()).toEqual(expected);
    expect(new Set(seen).size).toBe(seen.length);
  });

  it('refuses a malformed cursor', async () => {
    const { api } = await server.user();
    const res = await api.GET('/api/v1/members/page', { params: { query: { limit: 5, cursor: 'garbage' } } });
    expect(res.response.status).toBe(400);
    expect(res.error?.message).toBe('cursor is invalid; pass the nextCursor of the previous page');
  });
});

import { describe, expect, it } from 'vitest';
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
import { useServer, bearer, jsonHeaders } from './helpers/server.ts';
import { codeAndMessage } from './helpers/errors.ts';

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
      body: {
        name: ' Robin ',
        displayName: 'Robin 🌿',
        pronouns: 'she/they',
        description: 'Gatekeeper',
        aboutTags: ['gatekeeper'],
        directoryId: folder,
      },
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
    const res = await server.fetch('/api/v1/members', {
      method: 'POST',
      headers: jsonHeaders(apiKey),
      body: JSON.stringify(body),
    });
    expect(res.status).toBe(400);
    expect(codeAndMessage(await res.json())).toEqual({ code: 'BAD_REQUEST', message });
  });

  it('checks the folder and the target system belong to the caller', async () => {
    const { api } = await server.user();
    const other = await server.user();
    const theirFolder = await createFolder(other.api);
    expect((await api.POST('/api/v1/members', { body: { name: 'x', directoryId: theirFolder } })).response.status).toBe(
      404,
    );
    const side = await createSide(api);
    const folderInOtherSide = await createFolder(api, 'F', { sideSystemId: side });
    const mismatch = await api.POST('/api/v1/members', { body: { name: 'x', directoryId: folderInOtherSide } });
    expect(mismatch.response.status).toBe(400);
    expect(
      (await api.POST('/api/v1/members', { body: { name: 'x', sideSystemId: await activeSide(other.api) } })).response
        .status,
    ).toBe(404);
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
      body: {
        displayName: null,
        pronouns: '',
        aboutTags: ['a', 'b'],
        profileStyle: { accent: '#FF0000' },
        description: 'new',
      },
    });
    expect(res.response.status).toBe(200);
    expect(res.data).toMatchObject({
      name: 'Robin',
      displayName: '',
      pronouns: '',
      aboutTags: ['a', 'b'],
      profileStyle: { accent: '#FF0000' },
      description: 'new',
      version: 2,
      updatedAt: now,
    });
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
    const first = await api.PATCH('/api/v1/members/{memberId}', {
      ...memberPath(id),
      body: { name: 'Robyn', expectedVersion: 1 },
    });
    expect(first.data?.version).toBe(2);
    const stale = await api.PATCH('/api/v1/members/{memberId}', {
      ...memberPath(id),
      body: { name: 'Robert', expectedVersion: 1 },
    });
    expect(stale.response.status).toBe(409);
    expect(stale.error?.code).toBe('CONFLICT');
    expect((await api.GET('/api/v1/members/{memberId}', memberPath(id))).data).toMatchObject({
      name: 'Robyn',
      version: 2,
    });
  });

  it('lets exactly one of two concurrent writers with the same expectedVersion win', async () => {
    const { api } = await server.user();
    const id = await createMember(api);
    const results = await Promise.all(
      ['One', 'Two'].map((name) =>
        api.PATCH('/api/v1/members/{memberId}', { ...memberPath(id), body: { name, expectedVersion: 1 } }),
      ),
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
    const foreign = await api.PATCH('/api/v1/members/{memberId}', {
      ...memberPath(id),
      body: { moveToSystemScope: { sideSystemId: await activeSide(other.api) } },
    });
    expect(foreign.response.status).toBe(404);
    const moved = await api.PATCH('/api/v1/members/{memberId}', {
      ...memberPath(id),
      body: { moveToSystemScope: { sideSystemId: side, subSystemId: null } },
    });
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
    expect(
      (await api.PATCH('/api/v1/members/{memberId}', { ...memberPath(id), body: { directoryId: folder } })).data
        ?.directoryId,
    ).toBe(folder);
    expect(
      (await api.PATCH('/api/v1/members/{memberId}', { ...memberPath(id), body: { directoryId: null } })).data
        ?.directoryId,
    ).toBeNull();
    const otherSideFolder = await createFolder(api, 'x', { sideSystemId: await createSide(api) });
    expect(
      (await api.PATCH('/api/v1/members/{memberId}', { ...memberPath(id), body: { directoryId: otherSideFolder } }))
        .response.status,
    ).toBe(400);
  });
});

describe('PATCH /members/{memberId}: strict body', () => {
  it.each([
    [{ bogus: 1 }, "Unknown field 'bogus'"],
    [{ name: '' }, 'name must NOT have fewer than 1 characters'],
    [{ name: 'x'.repeat(81) }, 'name must NOT have more than 80 characters'],
    [{ moveToSystemScope: { sideSystemId: UNKNOWN_ID, bogus: 1 } }, "Unknown field 'moveToSystemScope.bogus'"],
  ])('refuses %j with 400 and changes nothing', async (body, message) => {
    const { api, apiKey } = await server.user();
    const id = await createMember(api, 'Robin');
    const res = await server.fetch(`/api/v1/members/${id}`, {
      method: 'PATCH',
      headers: jsonHeaders(apiKey),
      body: JSON.stringify(body),
    });
    expect(res.status).toBe(400);
    expect(codeAndMessage(await res.json())).toEqual({ code: 'BAD_REQUEST', message });
    expect((await api.GET('/api/v1/members/{memberId}', memberPath(id))).data).toMatchObject({
      name: 'Robin',
      version: 1,
    });
  });
});

describe('PATCH /members/{memberId} moveToSystemScope', () => {
  const move = (
    api: Awaited<ReturnType<typeof server.user>>['api'],
    memberId: string,
    target: { sideSystemId: string; subSystemId?: string | null },
  ) => api.PATCH('/api/v1/members/{memberId}', { ...memberPath(memberId), body: { moveToSystemScope: target } });

  it('refuses to take the linked member of a live sub system out of its side system; relinking first lets it go', async () => {
    const { api } = await server.user();
    const main = await activeSide(api);
    const s2 = await createSide(api, 'S2');
    const linked = await createMember(api, 'Host');
    const other = await createMember(api, 'Other');
    const sub = await createSub(api, main, linked, { name: 'Littles' });

    const refused = await move(api, linked, { sideSystemId: s2 });
    expect(refused.response.status).toBe(400);
    expect(refused.error).toEqual({
      code: 'BAD_REQUEST',
      message: "Member is the linked member of sub system 'Littles'; link another member first",
    });
    expect((await api.GET('/api/v1/members/{memberId}', memberPath(linked))).data).toMatchObject({
      sideSystemId: main,
      subSystemId: null,
      version: 1,
    });
    expect((await api.GET('/api/v1/systems')).data!.subSystems).toEqual([
      expect.objectContaining({ _id: sub, linkedMemberId: linked }),
    ]);

    // Staying in the side system is fine, into the sub system or back out of it.
    expect((await move(api, linked, { sideSystemId: main, subSystemId: sub })).data).toMatchObject({
      sideSystemId: main,
      subSystemId: sub,
    });
    expect((await move(api, linked, { sideSystemId: main, subSystemId: null })).data).toMatchObject({
      sideSystemId: main,
      subSystemId: null,
    });

    const relinked = await api.PATCH('/api/v1/systems/sub-systems/{subSystemId}', {
      params: { path: { subSystemId: sub } },
      body: { linkedMemberId: other },
    });
    expect(relinked.response.status).toBe(200);
    const moved = await move(api, linked, { sideSystemId: s2 });
    expect(moved.response.status).toBe(200);
    expect(moved.data).toMatchObject({ sideSystemId: s2, subSystemId: null });
  });

  it('names every live sub system that links the member, and ignores deleted ones', async () => {
    const { api } = await server.user();
    const main = await activeSide(api);
    const s2 = await createSide(api, 'S2');
    const linked = await createMember(api, 'Host');
    const a = await createSub(api, main, linked, { name: 'A' });
    await createSub(api, main, linked, { name: 'B' });
    const both = await move(api, linked, { sideSystemId: s2 });
    expect(both.error?.message).toBe("Member is the linked member of sub systems 'A', 'B'; link other members first");
    const gone = await createMember(api, 'Gone host');
    const deletedSub = await createSub(api, main, gone, { name: 'Deleted' });
    expect(
      (await api.DELETE('/api/v1/systems/sub-systems/{subSystemId}', { params: { path: { subSystemId: deletedSub } } }))
        .response.status,
    ).toBe(200);
    expect((await move(api, gone, { sideSystemId: s2 })).response.status).toBe(200);
    expect((await api.GET('/api/v1/systems')).data!.subSystems.map((s) => s._id)).toContain(a);
  });

  it('a move racing a sub system link to the same member never leaves the link pointing across side systems', async () => {
    const { api } = await server.user();
    const main = await activeSide(api);
    const s2 = await createSide(api, 'S2');
    for (let round = 0; round < 6; round++) {
      const member = await createMember(api, `Racer ${round}`);
      const [moved, linked] = await Promise.all([
        move(api, member, { sideSystemId: s2 }),
        api.POST('/api/v1/systems/sub-systems', {
          body: { sideSystemId: main, linkedMemberId: member, name: `Race ${round}` },
        }),
      ]);
      const statuses = `round ${round}: move ${moved.response.status}, link ${linked.response.status}`;
      // Exactly one wins; the loser is refused with 400 (the link by the side-system rule, the move by the link).
      const won = moved.response.status === 200 ? moved : linked;
      const lost = won === moved ? linked : moved;
      expect(won.response.status, statuses).toBe(won === moved ? 200 : 201);
      expect(lost.response.status, statuses).toBe(400);
      const now = (await api.GET('/api/v1/members/{memberId}', memberPath(member))).data!;
      const subs = (await api.GET('/api/v1/systems')).data!.subSystems.filter((s) => s.linkedMemberId === member);
      for (const sub of subs) expect(sub.sideSystemId, statuses).toBe(now.sideSystemId);
    }
  });

  it('moves into a sub system: the member gets subSystemId and leaves and joins the sub system listings', async () => {
    const { api } = await server.user();
    const main = await activeSide(api);
    const side = await createSide(api);
    const host = await createMember(api, 'Host', { sideSystemId: side });
    const sub = await createSub(api, side, host, { name: 'One' });
    const sub2 = await createSub(api, side, host, { name: 'Two' });
    const mover = await createMember(api, 'Mover');
    const page = async (query: { sideSystemId?: string; subSystemId?: string } = {}) =>
      (await api.GET('/api/v1/members/page', { params: { query: { limit: 50, ...query } } }))
        .data!.items.map((m) => m._id)
        .sort();

    expect(await page({ subSystemId: sub })).toEqual([]);
    const intoSub = await move(api, mover, { sideSystemId: side, subSystemId: sub });
    expect(intoSub.response.status).toBe(200);
    expect(intoSub.data).toMatchObject({ sideSystemId: side, subSystemId: sub, version: 2 });
    expect(await page({ subSystemId: sub })).toEqual([mover]);
    expect(await page({ subSystemId: sub2 })).toEqual([]);
    expect(await page({ sideSystemId: side })).toEqual([host, mover].sort());
    expect(await page()).not.toContain(mover); // the active (main) side system no longer lists it

    expect((await move(api, mover, { sideSystemId: side, subSystemId: sub2 })).data).toMatchObject({
      sideSystemId: side,
      subSystemId: sub2,
    });
    expect(await page({ subSystemId: sub })).toEqual([]);
    expect(await page({ subSystemId: sub2 })).toEqual([mover]);

    expect((await move(api, mover, { sideSystemId: side, subSystemId: null })).data).toMatchObject({
      sideSystemId: side,
      subSystemId: null,
    });
    expect(await page({ subSystemId: sub2 })).toEqual([]);
    expect(await page({ sideSystemId: side })).toEqual([host, mover].sort());

    expect((await move(api, mover, { sideSystemId: main })).data).toMatchObject({
      sideSystemId: main,
      subSystemId: null,
    });
    expect(await page()).toContain(mover);
  });

  it('answers 404 for a foreign sub system, an unknown one, and one outside the given side system, and leaves the member where it was', async () => {
    const { api } = await server.user();
    const other = await server.user();
    const main = await activeSide(api);
    const side = await createSide(api);
    const host = await createMember(api, 'Host', { sideSystemId: side });
    const sub = await createSub(api, side, host);
    const theirHost = await createMember(other.api, 'Theirs');
    const theirSub = await createSub(other.api, await activeSide(other.api), theirHost);
    const mover = await createMember(api, 'Mover');
    for (const target of [
      { sideSystemId: side, subSystemId: theirSub },
      { sideSystemId: await activeSide(other.api), subSystemId: theirSub },
      { sideSystemId: side, subSystemId: UNKNOWN_ID },
      { sideSystemId: main, subSystemId: sub },
    ]) {
      const res = await move(api, mover, target);
      expect(res.response.status, JSON.stringify(target)).toBe(404);
      expect(res.error?.code).toBe('NOT_FOUND');
    }
    expect((await api.GET('/api/v1/members/{memberId}', memberPath(mover))).data).toMatchObject({
      sideSystemId: main,
      subSystemId: null,
      version: 1,
    });
  });
});

describe('trash', () => {
  it('DELETE moves to the trash: reads answer 404, lists skip it; restore brings it back', async () => {
    const { api } = await server.user();
    const id = await createMember(api, 'Robin');
    expect((await api.DELETE('/api/v1/members/{memberId}', memberPath(id))).response.status).toBe(204);
    expect((await api.GET('/api/v1/members/{memberId}', memberPath(id))).response.status).toBe(404);
    expect(
      (await api.PATCH('/api/v1/members/{memberId}', { ...memberPath(id), body: { name: 'x' } })).response.status,
    ).toBe(404);
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
      ['?limit=abc', 'limit must be an integer written in decimal digits'],
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
      const { data } = await api.GET('/api/v1/members/page', {
        params: { query: { limit: 2, ...(cursor ? { cursor } : {}) } },
      });
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

describe('POST /members cost', () => {
  it('creates a member in the active scope in one statement: the member, its default buckets and member.created', async () => {
    const { api, userId } = await server.user();
    const bucket = await api.POST('/api/v1/privacy-buckets', { body: { name: 'Close' } });
    expect(bucket.response.status, JSON.stringify(bucket.error)).toBe(201);
    const bucketId = bucket.data!._id;
    for (const kind of ['new_member', 'new_profile_section'] as const)
      await api.PUT('/api/v1/privacy-buckets/defaults/{kind}', {
        params: { path: { kind } },
        body: { bucketIds: [bucketId] },
      });
    await api.POST('/api/v1/members', { body: { name: 'Warm-up' } }); // warms the key cache
    const knex = server.deps.db.knex;
    let id = '';
    const statements = await captureStatements(knex, REQUEST_WORK, async () => {
      id = (await api.POST('/api/v1/members', { body: { name: 'One' } })).data!.id;
    });
    expect(statements.map((st) => st.sql.trim().split(/\s+/).slice(0, 3).join(' '))).toEqual(['with write_context as']);
    const { rows } = await knex.raw<{ rows: Array<{ section_key: string }> }>(
      'select section_key from privacy_bucket_assignments where user_id = ? and content_id = ? and bucket_id = ? order by section_key',
      [userId, id, bucketId],
    );
    expect(rows.map((r) => r.section_key)).toEqual(['', 'about', 'avatar', 'displayName', 'profileStyle', 'pronouns']);
    const { rows: events } = await knex.raw<{ rows: unknown[] }>(
      `select 1 from events where account_id = ? and type = 'member.created' and data->>'memberId' = ?`,
      [userId, id],
    );
    expect(events).toHaveLength(1);
  });
});

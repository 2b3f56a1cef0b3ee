import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../server/config.ts';
import { createMember, createSide, UNKNOWN_ID } from './helpers/fixtures.ts';
import { GIF, PNG } from './helpers/images.ts';
import { startLoopbackServer, type LoopbackServer } from './helpers/imageServer.ts';
import { bothPlans, captureStatements, largeSeqScans, planNodes, REQUEST_WORK } from './helpers/plans.ts';
import { bearer, TestServer, useServer } from './helpers/server.ts';
import { codeAndMessage } from './helpers/errors.ts';

let now = 1_800_000_000_000;
const server = useServer({
  clock: () => now,
  env: { FETCH_ALLOW_PRIVATE: 'true', NOTE_CAP_PRO: '3', NOTE_CAP_FREE: '1', NOTE_CAP_PRO_PLUS: '2' },
});
const entryPath = (entryId: string) => ({ params: { path: { entryId } } });
type Api = Awaited<ReturnType<typeof server.user>>['api'];

async function createEntry(api: Api, body: Record<string, unknown>): Promise<string> {
  const res = await api.POST('/api/v1/entries', { body: body as never });
  expect(res.response.status, JSON.stringify(res.error)).toBe(201);
  return res.data!.id;
}

let images: LoopbackServer;
beforeAll(async () => {
  images = await startLoopbackServer({
    '/a.png': { type: 'image/png', body: PNG },
    '/b.gif': { type: 'image/gif', body: GIF },
    '/text.png': { type: 'image/png', body: 'not an image at all' },
    ...Object.fromEntries(Array.from({ length: 21 }, (_, i) => [`/many/${i}.png`, { type: 'image/png', body: PNG }])),
  });
});
afterAll(() => images.close());

describe('create and read', () => {
  it('creates with a strict body and answers 201 { id }; detail carries memberId and memberIds', async () => {
    const { api } = await server.user();
    const a = await createMember(api, 'A');
    const b = await createMember(api, 'B', { displayName: 'Bee' });
    now += 1;
    const res = await api.POST('/api/v1/entries', {
      body: { title: 'T', content: 'Hello', memberId: b, memberIds: [a, b] },
    });
    expect(res.response.status).toBe(201);
    expect(Object.keys(res.data!)).toEqual(['id']);
    const { data } = await api.GET('/api/v1/entries/{entryId}', entryPath(res.data!.id));
    const summaryB = { id: b, name: 'B', displayName: 'Bee', archived: false, avatarUrl: null };
    const summaryA = { id: a, name: 'A', displayName: '', archived: false, avatarUrl: null };
    expect(data).toEqual({
      _id: res.data!.id,
      title: 'T',
      content: 'Hello',
      createdAt: now,
      updatedAt: now,
      member: summaryB,
      members: [summaryB, summaryA],
      memberId: b,
      memberIds: [a, b],
    });
  });

  it.each([
    [{}, 'content is required'],
    [{ content: '' }, 'content must NOT have fewer than 1 characters'],
    [{ content: 'x', tags: [] }, "Unknown field 'tags'"],
    [{ content: 'x', memberIds: ['nope'] }, 'memberIds[0] must be a valid UUID'],
  ])('refuses %j with 400', async (body, message) => {
    const { api } = await server.user();
    const res = await api.POST('/api/v1/entries', { body: body as never });
    expect(res.response.status).toBe(400);
    expect(codeAndMessage(res.error)).toEqual({ code: 'BAD_REQUEST', message });
  });

  it("refuses links to members that are not the caller's live members", async () => {
    const { api } = await server.user();
    const other = await server.user();
    const theirs = await createMember(other.api);
    const trashed = await createMember(api);
    await api.DELETE('/api/v1/members/{memberId}', { params: { path: { memberId: trashed } } });
    for (const body of [
      { content: 'x', memberId: theirs },
      { content: 'x', memberIds: [trashed] },
      { content: 'x', memberIds: [UNKNOWN_ID] },
    ]) {
      const res = await api.POST('/api/v1/entries', { body });
      expect(res.response.status).toBe(400);
      expect(res.error?.message).toMatch(/^Linked members must be your live members/);
    }
  });

  it("GET is 400 for a malformed id and 404 for unknown or another account's notes", async () => {
    const { api } = await server.user();
    const other = await server.user();
    const id = await createEntry(other.api, { content: 'theirs' });
    expect((await api.GET('/api/v1/entries/{entryId}', entryPath('x'))).response.status).toBe(400);
    expect((await api.GET('/api/v1/entries/{entryId}', entryPath(UNKNOWN_ID))).response.status).toBe(404);
    expect((await api.GET('/api/v1/entries/{entryId}', entryPath(id))).response.status).toBe(404);
    expect((await api.DELETE('/api/v1/entries/{entryId}', entryPath(id))).response.status).toBe(404);
  });

  it('PATCH, DELETE and restore are 400 for a malformed id; DELETE of an unknown id is 404', async () => {
    const { api } = await server.user();
    const bad = [
      await api.PATCH('/api/v1/entries/{entryId}', { ...entryPath('not-a-uuid'), body: { title: 'x' } }),
      await api.DELETE('/api/v1/entries/{entryId}', entryPath('not-a-uuid')),
      await api.DELETE('/api/v1/entries/{entryId}', {
        params: { path: { entryId: 'not-a-uuid' }, query: { permanent: 'true' } },
      }),
      await api.POST('/api/v1/entries/{entryId}/restore', entryPath('not-a-uuid')),
    ];
    for (const res of bad) {
      expect(res.response.status).toBe(400);
      expect(res.error).toEqual({
        code: 'BAD_REQUEST',
        message: 'entryId must be a valid UUID',
        details: [{ in: 'path', pointer: 'entryId', rule: 'pattern', message: 'entryId must be a valid UUID' }],
      });
    }
    for (const permanent of [undefined, 'true'] as const) {
      const res = await api.DELETE('/api/v1/entries/{entryId}', {
        params: { path: { entryId: UNKNOWN_ID }, query: permanent ? { permanent } : {} },
      });
      expect(res.response.status).toBe(404);
      expect(res.error?.code).toBe('NOT_FOUND');
    }
  });

  it("another account's notes, active or trashed, are 404 on every route and stay untouched", async () => {
    const { api } = await server.user();
    const other = await server.user();
    const m = await createMember(other.api, 'Theirs');
    const active = await createEntry(other.api, { title: 'Mine', content: 'private', memberIds: [m] });
    const trashed = await createEntry(other.api, { content: 'binned' });
    expect((await other.api.DELETE('/api/v1/entries/{entryId}', entryPath(trashed))).response.status).toBe(204);
    const before = (await other.api.GET('/api/v1/entries/{entryId}', entryPath(active))).data;
    const trashedRow = await server.deps.db.knex('entries').where({ id: trashed }).first();
    now += 1000;

    for (const id of [active, trashed]) {
      const attempts = [
        await api.GET('/api/v1/entries/{entryId}', entryPath(id)),
        await api.PATCH('/api/v1/entries/{entryId}', {
          ...entryPath(id),
          body: { title: 'hijacked', content: 'overwritten' },
        }),
        await api.DELETE('/api/v1/entries/{entryId}', entryPath(id)),
        await api.DELETE('/api/v1/entries/{entryId}', {
          params: { path: { entryId: id }, query: { permanent: 'true' } },
        }),
        await api.POST('/api/v1/entries/{entryId}/restore', entryPath(id)),
      ];
      for (const res of attempts) {
        expect(res.response.status).toBe(404);
        expect(res.error).toEqual({ code: 'NOT_FOUND', message: 'Entry not found' });
      }
    }

    expect((await other.api.GET('/api/v1/entries/{entryId}', entryPath(active))).data).toEqual(before);
    expect(await server.deps.db.knex('entries').where({ id: trashed }).first()).toEqual(trashedRow);
    expect((await other.api.GET('/api/v1/trash')).data!.map((r) => r.id)).toEqual([trashed]);
  });
});

describe('GET /entries', () => {
  it('lists active notes newest updatedAt first, then by id, with member and members; memberId filters', async () => {
    const { api } = await server.user();
    const m = await createMember(api, 'M');
    now += 10;
    const first = await createEntry(api, { content: 'first', memberIds: [m] });
    const tieA = await createEntry(api, { content: 'tie a' });
    const tieB = await createEntry(api, { content: 'tie b' });
    now += 10;
    const latest = await createEntry(api, { content: 'latest' });
    const trashed = await createEntry(api, { content: 'trashed' });
    await api.DELETE('/api/v1/entries/{entryId}', entryPath(trashed));
    now += 10;
    await api.PATCH('/api/v1/entries/{entryId}', { ...entryPath(first), body: { title: 'bumped' } });
    const { data } = await api.GET('/api/v1/entries');
    expect(data!.map((e) => e._id)).toEqual([first, latest, ...[tieA, tieB].sort()]);
    expect(data![0]).toMatchObject({ member: { id: m, name: 'M' }, members: [{ id: m }] });
    expect(data![1]).toMatchObject({ member: null, members: [] });
    expect(data![0]).not.toHaveProperty('memberIds');
    const filtered = await api.GET('/api/v1/entries', { params: { query: { memberId: m } } });
    expect(filtered.data!.map((e) => e._id)).toEqual([first]);
  });

  it('takes limit 1–100, default 50', async () => {
    const { api, apiKey } = await server.user();
    for (let i = 0; i < 101; i++) await createEntry(api, { content: `n${i}` });
    expect((await api.GET('/api/v1/entries')).data).toHaveLength(50);
    expect((await api.GET('/api/v1/entries', { params: { query: { limit: 51 } } })).data).toHaveLength(51);
    expect((await api.GET('/api/v1/entries', { params: { query: { limit: 1 } } })).data).toHaveLength(1);
    const max = await api.GET('/api/v1/entries', { params: { query: { limit: 100 } } });
    expect(max.response.status).toBe(200);
    expect(max.data).toHaveLength(100);
    for (const [q, message] of [
      ['limit=0', 'limit must be >= 1'],
      ['limit=101', 'limit must be <= 100'],
      ['memberId=x', 'memberId must be a valid UUID'],
    ]) {
      const res = await server.fetch(`/api/v1/entries?${q}`, { headers: bearer(apiKey) });
      expect(res.status).toBe(400);
      expect((await res.json()).message).toBe(message);
    }
  });

  it('reads and writes the active system scope; unified view lists all', async () => {
    const { api } = await server.user();
    const side = await createSide(api);
    const mainNote = await createEntry(api, { content: 'main' });
    await api.PATCH('/api/v1/systems/active', { body: { sideSystemId: side } });
    const sideNote = await createEntry(api, { content: 'side' });
    expect((await api.GET('/api/v1/entries')).data!.map((e) => e._id)).toEqual([sideNote]);
    await api.PATCH('/api/v1/systems/unified-view', { body: { enabled: true } });
    expect((await api.GET('/api/v1/entries')).data!.map((e) => e._id).sort()).toEqual([mainNote, sideNote].sort());
    const row = await server.deps.db.knex('entries').where({ id: sideNote }).first();
    expect(row.side_system_id).toBe(side);
  });
  it('costs one statement in every scope and with memberId, walking an index in order (custom and generic plans)', async () => {
    const { api, userId } = await server.user();
    const other = await server.user();
    const knex = server.deps.db.knex;
    const [a, b] = [await createMember(api, 'A'), await createMember(api, 'B', { displayName: 'Bee' })];
    const main = (await knex('active_system_context').where({ user_id: userId }).first()).side_system_id as string;
    const side = await createSide(api);
    // 3,000 notes in the main side system (every third linked to A then B), 5 in the second, and
    // 3,000 of another account, straight into the tables; then statistics, as a running server has.
    const seed = (user: string, sideSystem: string, n: number, offset: number) =>
      knex.raw(
        `insert into entries (id, user_id, side_system_id, content, created_at, updated_at)
         select gen_random_uuid(), ?, ?, 'Note ' || g, ?::bigint - g, ?::bigint - g - ?::bigint from generate_series(1, ?) g`,
        [user, sideSystem, now, now, offset, n],
      );
    await seed(userId, main, 3000, 0);
    await seed(userId, side, 5, 10_000);
    const theirs = (await knex('active_system_context').where({ user_id: other.userId }).first())
      .side_system_id as string;
    await seed(other.userId, theirs, 3000, 0);
    await knex.raw(
      `insert into entry_members (entry_id, member_id, user_id, position)
       select e.id, m.id, e.user_id, case when m.id = ? then 0 else 1 end
       from (select id, user_id, row_number() over (order by updated_at desc) r from entries where user_id = ?) e, members m
       where e.r % 3 = 0 and m.id in (?, ?)`,
      [a, userId, a, b],
    );
    // The other account links each of its notes to one of 100 members: most links are not the caller's.
    const theirMember = await createMember(other.api, 'Theirs');
    await knex.raw(
      `insert into members (id, user_id, side_system_id, name, created_at, updated_at)
       select gen_random_uuid(), m.user_id, m.side_system_id, 'Seed ' || g, ?::bigint, ?::bigint from members m, generate_series(1, 99) g where m.id = ?`,
      [now, now, theirMember],
    );
    await knex.raw(
      `insert into entry_members (entry_id, member_id, user_id, position)
       select e.id, m.id, e.user_id, 0
       from (select id, user_id, row_number() over (order by id) % 100 r from entries where user_id = ?) e
       join (select id, row_number() over (order by id) % 100 r from members where user_id = ?) m on m.r = e.r`,
      [other.userId, other.userId],
    );
    if (server.runtime.maintenance) await server.runtime.maintenance.runOnce();
    else await knex.raw('analyze entries, entry_members, members, active_system_context');

    const limit = 20;
    const check = async (
      label: string,
      query: { memberId?: string },
      expected: (notes: Array<{ _id: string; members: Array<{ id: string }> }>) => void,
    ) => {
      await api.GET('/api/v1/entries', { params: { query: { limit, ...query } } }); // warm the key cache
      let notes: Array<{ _id: string; members: Array<{ id: string }> }> = [];
      const statements = await captureStatements(
        knex,
        /\b(entries|entry_members|members|active_system_context)\b/,
        async () => {
          notes = (await api.GET('/api/v1/entries', { params: { query: { limit, ...query } } })).data!;
        },
      );
      expect(statements, label).toHaveLength(1);
      expected(notes);
      for (const { kind, plan } of await bothPlans(knex, statements[0]!)) {
        const at = `${label}, ${kind} plan: ${JSON.stringify(plan)}`;
        expect(largeSeqScans(plan), at).toEqual([]);
        // At most a page of notes is read and sorted, or (memberId) the member's links.
        const notesRead = planNodes(plan)
          .filter((n) => n['Relation Name'] === 'entries')
          .reduce((sum, n) => sum + (n['Actual Rows'] ?? 0) * (n['Actual Loops'] ?? 1), 0);
        expect(notesRead, at).toBeLessThanOrEqual(query.memberId ? 1001 : limit * 2);
      }
    };
    await check('active side system', {}, (notes) => {
      expect(notes).toHaveLength(limit);
      expect(notes.filter((n) => n.members.length > 0)).toHaveLength(Math.floor(limit / 3));
    });
    await check('one member', { memberId: b }, (notes) =>
      expect(notes.every((n) => n.members.some((m) => m.id === b))).toBe(true),
    );
    await api.PATCH('/api/v1/systems/active', { body: { sideSystemId: side } });
    await check('second side system', {}, (notes) => expect(notes).toHaveLength(5));
    await api.PATCH('/api/v1/systems/unified-view', { body: { enabled: true } });
    await check('unified view', {}, (notes) => expect(notes).toHaveLength(limit));
  });
});

describe('member ids in upper case', () => {
  it('link the same members as in lower case, once each', async () => {
    const { api } = await server.user();
    const m = await createMember(api);
    const res = await api.POST('/api/v1/entries', {
      body: { content: 'shouting', memberId: m.toUpperCase(), memberIds: [m, m.toUpperCase()] },
    });
    expect(res.response.status, JSON.stringify(res.error)).toBe(201);
    const { data } = await api.GET('/api/v1/entries/{entryId}', entryPath(res.data!.id));
    expect(data!.members.map((x) => x.id)).toEqual([m]);
  });
});

describe('POST /entries cost', () => {
  it('creates a note without external images in one statement', async () => {
    const { api } = await server.user();
    const members = [await createMember(api, 'A'), await createMember(api, 'B')];
    await createEntry(api, { content: 'warm-up', memberIds: members }); // warms the key cache
    const knex = server.deps.db.knex;
    const statements = await captureStatements(knex, REQUEST_WORK, async () => {
      await createEntry(api, { content: 'No images here', memberIds: members });
    });
    // One statement, outside any transaction (docs/data-access.md, "Writes in one statement"): the
    // scope, the members share-locked and checked, their cap counters, the note, its links, its event.
    expect(
      statements.map((st) => st.sql.split(/\s+/).slice(0, 3).join(' ')),
      JSON.stringify(statements.map((st) => st.sql)),
    ).toEqual(['with write_context as']);
    expect(statements[0]!.sql).toMatch(/insert into entries[\s\S]*insert into entry_members[\s\S]*insert into events/);
  });
});

describe('PATCH /entries/{entryId}', () => {
  it('updates the given fields; memberId null clears the legacy single link', async () => {
    const { api } = await server.user();
    const a = await createMember(api, 'A');
    const b = await createMember(api, 'B');
    const id = await createEntry(api, { content: 'c', memberId: a, memberIds: [b] });
    now += 100;
    const res = await api.PATCH('/api/v1/entries/{entryId}', {
      ...entryPath(id),
      body: { memberId: null, title: 'New', content: 'd' },
    });
    expect(res.response.status).toBe(200);
    expect(res.data).toMatchObject({
      title: 'New',
      content: 'd',
      memberId: null,
      memberIds: [b],
      members: [{ id: b }],
      member: { id: b },
      updatedAt: now,
    });
    const relinked = await api.PATCH('/api/v1/entries/{entryId}', { ...entryPath(id), body: { memberIds: [a, b] } });
    expect(relinked.data).toMatchObject({ memberId: null, memberIds: [a, b], members: [{ id: a }, { id: b }] });
    const untitled = await api.PATCH('/api/v1/entries/{entryId}', { ...entryPath(id), body: { title: null } });
    expect(untitled.data?.title).toBeNull();
  });

  it('refuses an empty body, unknown keys and unknown members', async () => {
    const { api } = await server.user();
    const id = await createEntry(api, { content: 'c' });
    for (const body of [{}, { colour: 'x' }, { memberIds: [UNKNOWN_ID] }]) {
      const res = await api.PATCH('/api/v1/entries/{entryId}', { ...entryPath(id), body: body as never });
      expect(res.response.status, JSON.stringify(body)).toBe(400);
    }
    expect(
      (await api.PATCH('/api/v1/entries/{entryId}', { ...entryPath(UNKNOWN_ID), body: { title: 'x' } })).response
        .status,
    ).toBe(404);
  });
});

describe('entry lifecycle table', () => {
  const del = (api: Api, id: string, permanent?: string) =>
    api.DELETE('/api/v1/entries/{entryId}', {
      params: { path: { entryId: id }, query: permanent === undefined ? {} : { permanent: permanent as 'true' } },
    });
  const exists = async (id: string) => (await server.deps.db.knex('entries').where({ id }).first()) !== undefined;

  it('active → DELETE → trashed; GET answers 404', async () => {
    const { api } = await server.user();
    const id = await createEntry(api, { content: 'c' });
    expect((await del(api, id)).response.status).toBe(204);
    expect((await api.GET('/api/v1/entries/{entryId}', entryPath(id))).response.status).toBe(404);
    expect(await exists(id)).toBe(true);
  });

  it.each(['true', '1', 'yes'])('active → DELETE permanent=%s → purged at once', async (permanent) => {
    const { api } = await server.user();
    const id = await createEntry(api, { content: 'c' });
    expect((await del(api, id, permanent)).response.status).toBe(204);
    expect(await exists(id)).toBe(false);
    expect((await api.POST('/api/v1/entries/{entryId}/restore', entryPath(id))).response.status).toBe(404);
  });

  it('trashed → DELETE permanent=true → purged', async () => {
    const { api } = await server.user();
    const id = await createEntry(api, { content: 'c' });
    await del(api, id);
    expect((await del(api, id, 'true')).response.status).toBe(204);
    expect(await exists(id)).toBe(false);
  });

  it("trashed → DELETE without permanent → 400 'already in trash'", async () => {
    const { api } = await server.user();
    const id = await createEntry(api, { content: 'c' });
    await del(api, id);
    const res = await del(api, id);
    expect(res.response.status).toBe(400);
    expect(res.error?.message).toContain('already in trash');
    const soft = await del(api, id, 'false');
    expect(soft.response.status).toBe(400);
  });

  it('permanent takes only the documented values', async () => {
    const { api } = await server.user();
    const id = await createEntry(api, { content: 'c' });
    expect((await del(api, id, 'maybe')).response.status).toBe(400);
    expect((await del(api, id, 'no')).response.status).toBe(204);
    expect(await exists(id)).toBe(true);
  });

  it('trashed → POST restore → active (204)', async () => {
    const { api } = await server.user();
    const id = await createEntry(api, { content: 'c' });
    await del(api, id);
    expect((await api.POST('/api/v1/entries/{entryId}/restore', entryPath(id))).response.status).toBe(204);
    expect((await api.GET('/api/v1/entries/{entryId}', entryPath(id))).data?.content).toBe('c');
  });

  it("active → POST restore → 400 'not in trash'; unknown → 404", async () => {
    const { api } = await server.user();
    const id = await createEntry(api, { content: 'c' });
    const res = await api.POST('/api/v1/entries/{entryId}/restore', entryPath(id));
    expect(res.response.status).toBe(400);
    expect(res.error?.message).toContain('not in trash');
    expect((await api.POST('/api/v1/entries/{entryId}/restore', entryPath(UNKNOWN_ID))).response.status).toBe(404);
  });

  it('trashed → PATCH → 400 (restore first)', async () => {
    const { api } = await server.user();
    const id = await createEntry(api, { content: 'c' });
    await del(api, id);
    const res = await api.PATCH('/api/v1/entries/{entryId}', { ...entryPath(id), body: { title: 'x' } });
    expect(res.response.status).toBe(400);
    expect(res.error?.message).toContain('restore');
  });
});

describe('note cap (NOTE_CAP_PRO=3, NOTE_CAP_FREE=1, NOTE_CAP_PRO_PLUS=2 in this file)', () => {
  it('403 NOTE_LIMIT_REACHED on create once a member holds the cap', async () => {
    const { api } = await server.user();
    const m = await createMember(api);
    for (let i = 0; i < 3; i++) await createEntry(api, { content: `n${i}`, memberIds: [m] });
    const res = await api.POST('/api/v1/entries', { body: { content: 'one too many', memberId: m } });
    expect(res.response.status).toBe(403);
    expect(res.error?.code).toBe('NOTE_LIMIT_REACHED');
    expect(res.error?.message).toContain('3');
    await createEntry(api, { content: 'unlinked notes are not capped' });
  });

  it('follows the plan: Free allows 1 here', async () => {
    const { api } = await server.user({ account: { plan: 'free' } });
    const m = await createMember(api);
    await createEntry(api, { content: 'a', memberId: m });
    expect((await api.POST('/api/v1/entries', { body: { content: 'b', memberId: m } })).error?.code).toBe(
      'NOTE_LIMIT_REACHED',
    );
  });

  it("follows the plan: Pro+ allows 2 here (its own setting, not Pro's or Free's)", async () => {
    const { api } = await server.user({ account: { plan: 'pro_plus' } });
    const m = await createMember(api);
    await createEntry(api, { content: 'a', memberId: m });
    await createEntry(api, { content: 'b', memberIds: [m] });
    const res = await api.POST('/api/v1/entries', { body: { content: 'c', memberId: m } });
    expect(res.response.status).toBe(403);
    expect(res.error).toEqual({
      code: 'NOTE_LIMIT_REACHED',
      message: `Note limit of 2 per member on the Pro+ plan reached for member ${m}`,
    });
    expect((await api.GET('/api/v1/entries', { params: { query: { memberId: m } } })).data).toHaveLength(2);
  });

  it('defaults to 100 (Free), 1000 (Pro) and 10000 (Pro+) when NOTE_CAP_* are unset', async () => {
    expect(loadConfig({}).noteCaps).toEqual({ free: 100, pro: 1000, pro_plus: 10_000 });
    expect(loadConfig({ NOTE_CAP_FREE: '', NOTE_CAP_PRO: '', NOTE_CAP_PRO_PLUS: '' }).noteCaps).toEqual({
      free: 100,
      pro: 1000,
      pro_plus: 10_000,
    });
    // And over HTTP: a server started without NOTE_CAP_* stops a Free member at 100 notes.
    const defaults = await new TestServer().start({ clock: () => now });
    try {
      expect(defaults.deps.config.noteCaps).toEqual({ free: 100, pro: 1000, pro_plus: 10_000 });
      const { api } = await defaults.user({ account: { plan: 'free' } });
      const m = await createMember(api);
      for (let i = 0; i < 100; i++) await createEntry(api, { content: `n${i}`, memberId: m });
      const res = await api.POST('/api/v1/entries', { body: { content: 'one too many', memberId: m } });
      expect(res.response.status).toBe(403);
      expect(res.error?.code).toBe('NOTE_LIMIT_REACHED');
      expect(res.error?.message).toContain('Note limit of 100 per member on the Free plan');
      expect(defaults.violations).toEqual([]);
    } finally {
      await defaults.close();
    }
  });

  it('restore that would exceed the cap → 400; trashed notes do not count', async () => {
    const { api } = await server.user();
    const m = await createMember(api);
    const ids = [];
    for (let i = 0; i < 3; i++) ids.push(await createEntry(api, { content: `n${i}`, memberIds: [m] }));
    await api.DELETE('/api/v1/entries/{entryId}', entryPath(ids[0]!));
    await createEntry(api, { content: 'fills the freed slot', memberIds: [m] });
    const res = await api.POST('/api/v1/entries/{entryId}/restore', entryPath(ids[0]!));
    expect(res.response.status).toBe(400);
    expect(res.error?.code).toBe('BAD_REQUEST');
    expect((await api.GET('/api/v1/entries/{entryId}', entryPath(ids[0]!))).response.status).toBe(404);
  });

  it('PATCH linking a member at the cap → 400', async () => {
    const { api } = await server.user();
    const m = await createMember(api);
    for (let i = 0; i < 3; i++) await createEntry(api, { content: `n${i}`, memberIds: [m] });
    const free = await createEntry(api, { content: 'free' });
    const res = await api.PATCH('/api/v1/entries/{entryId}', { ...entryPath(free), body: { memberIds: [m] } });
    expect(res.response.status).toBe(400);
  });

  it('holds under concurrent creates', async () => {
    const { api } = await server.user();
    const m = await createMember(api);
    const results = await Promise.all(
      Array.from({ length: 6 }, (_, i) => api.POST('/api/v1/entries', { body: { content: `c${i}`, memberId: m } })),
    );
    expect(results.filter((r) => r.response.status === 201)).toHaveLength(3);
    expect(results.filter((r) => r.error?.code === 'NOTE_LIMIT_REACHED')).toHaveLength(3);
  });

  it('holds when notes for two members, a link by PATCH and a restore race for the last slots', async () => {
    const { api } = await server.user();
    const [a, b] = [await createMember(api, 'A'), await createMember(api, 'B')];
    const trashed = await createEntry(api, { content: 'trashed', memberIds: [a] });
    await api.DELETE('/api/v1/entries/{entryId}', entryPath(trashed));
    const loose = await createEntry(api, { content: 'loose' });
    await createEntry(api, { content: 'first', memberIds: [a] });
    // Two slots left for A, three for B; twelve writes at once want them.
    const results = await Promise.all([
      ...Array.from({ length: 5 }, (_, i) => api.POST('/api/v1/entries', { body: { content: `a${i}`, memberId: a } })),
      ...Array.from({ length: 5 }, (_, i) =>
        api.POST('/api/v1/entries', { body: { content: `ab${i}`, memberIds: [b, a] } }),
      ),
      api.PATCH('/api/v1/entries/{entryId}', { ...entryPath(loose), body: { memberIds: [a] } }),
      api.POST('/api/v1/entries/{entryId}/restore', entryPath(trashed)),
    ]);
    for (const r of results) expect([200, 201, 400, 403]).toContain(r.response.status);
    const linkedTo = async (m: string) =>
      (await api.GET('/api/v1/entries', { params: { query: { memberId: m, limit: 100 } } })).data!.length;
    expect(await linkedTo(a)).toBe(3);
    expect(await linkedTo(b)).toBeLessThanOrEqual(3);
    // Every refusal is the cap's (or, for PATCH and restore, its 400): nothing else went wrong.
    expect(results.filter((r) => r.response.status === 403).every((r) => r.error?.code === 'NOTE_LIMIT_REACHED')).toBe(
      true,
    );
  });

  it('counts live links exactly through every path that changes them (the counter rows of migration 0029)', async () => {
    const { api, userId } = await server.user();
    const [a, b, c] = [await createMember(api, 'A'), await createMember(api, 'B'), await createMember(api, 'C')];
    const knex = server.deps.db.knex;
    const check = async () => {
      const { rows } = await knex.raw<{ rows: Array<{ member_id: string; live: number; actual: string }> }>(
        `select c.member_id, c.live, (select count(*) from entry_members em join entries e on e.id = em.entry_id
           where em.member_id = c.member_id and e.deleted_at is null) as actual
         from member_note_counts c join members m on m.id = c.member_id where m.user_id = ?`,
        [userId],
      );
      expect(rows).toHaveLength(3);
      for (const r of rows) expect(Number(r.live), r.member_id).toBe(Number(r.actual));
      return new Map(rows.map((r) => [r.member_id, Number(r.live)]));
    };
    const one = await createEntry(api, { content: '1', memberIds: [a, b] });
    const two = await createEntry(api, { content: '2', memberId: a, memberIds: [c] });
    expect((await check()).get(a)).toBe(2);
    await api.PATCH('/api/v1/entries/{entryId}', { ...entryPath(one), body: { memberIds: [c] } });
    expect((await check()).get(b)).toBe(0);
    await api.DELETE('/api/v1/entries/{entryId}', entryPath(two));
    expect((await check()).get(a)).toBe(0);
    await api.POST('/api/v1/entries/{entryId}/restore', entryPath(two));
    expect((await check()).get(a)).toBe(1);
    // Purged while live: its links go with it.
    const purge = (entryId: string) =>
      api.DELETE('/api/v1/entries/{entryId}', { params: { path: { entryId }, query: { permanent: 'true' } } });
    await purge(two);
    expect((await check()).get(c)).toBe(1);
    await api.DELETE('/api/v1/entries/{entryId}', entryPath(one));
    await purge(one);
    expect([...(await check()).values()]).toEqual([0, 0, 0]);
  });
});

describe('external markdown images', () => {
  it('are re-hosted into storage and the content rewritten; the stored image is served with ETag/304', async () => {
    const { api, apiKey } = await server.user();
    const content = `Look ![a cat](${images.url('/a.png')} "Cat") and again ![same](${images.url('/a.png')}) and ![gif](<${images.url('/b.gif')}>)`;
    const id = await createEntry(api, { content });
    const { data } = await api.GET('/api/v1/entries/{entryId}', entryPath(id));
    const stored = [...data!.content.matchAll(/\/api\/v1\/entry-images\/([0-9a-f]{64})/g)].map((m) => m[0]);
    expect(stored).toHaveLength(3);
    expect(data!.content).not.toContain('127.0.0.1');
    expect(data!.content).toContain(`![a cat](${stored[0]} "Cat")`);
    expect(stored[0]).toBe(stored[1]);
    const img = await server.fetch(stored[0]!, { headers: bearer(apiKey) });
    expect(img.status).toBe(200);
    expect(img.headers.get('content-type')).toBe('image/png');
    expect(Buffer.from(await img.arrayBuffer()).equals(PNG)).toBe(true);
    const cached = await server.fetch(stored[0]!, {
      headers: { ...bearer(apiKey), 'If-None-Match': img.headers.get('etag')! },
    });
    expect(cached.status).toBe(304);
    const other = await server.user();
    expect((await server.fetch(stored[0]!, { headers: bearer(other.apiKey) })).status).toBe(404);
  });

  it('are re-hosted on PATCH too; images already stored are left alone', async () => {
    const { api } = await server.user();
    const id = await createEntry(api, { content: 'plain' });
    const res = await api.PATCH('/api/v1/entries/{entryId}', {
      ...entryPath(id),
      body: { content: `![x](${images.url('/b.gif')})` },
    });
    expect(res.data?.content).toMatch(/^!\[x\]\(\/api\/v1\/entry-images\/[0-9a-f]{64}\)$/);
    const hits = images.hits.length;
    const again = await api.PATCH('/api/v1/entries/{entryId}', {
      ...entryPath(id),
      body: { content: res.data!.content + ' more' },
    });
    expect(again.response.status).toBe(200);
    expect(images.hits.length).toBe(hits);
  });

  it('refuse content that is not an image, or a URL that fails, with 400 and nothing saved', async () => {
    const { api } = await server.user();
    for (const path of ['/text.png', '/missing.png']) {
      const res = await api.POST('/api/v1/entries', { body: { content: `![x](${images.url(path)})` } });
      expect(res.response.status).toBe(400);
      expect(res.error?.message).toContain(images.url(path));
    }
    expect((await api.GET('/api/v1/entries')).data).toEqual([]);
  });

  it('at most 20 distinct external images per note: 20 pass, 21 → 400 with nothing fetched or saved', async () => {
    const { api } = await server.user();
    const md = (n: number) =>
      Array.from({ length: n }, (_, i) => `![i${i}](${images.url(`/many/${i}.png`)})`).join('\n');
    // Repeats of one URL count once: 20 distinct images in 21 references are accepted.
    const twenty = await api.POST('/api/v1/entries', {
      body: { content: `${md(20)}\n![again](${images.url('/many/0.png')})` },
    });
    expect(twenty.response.status).toBe(201);
    const saved = (await api.GET('/api/v1/entries/{entryId}', entryPath(twenty.data!.id))).data!.content;
    expect(saved.match(/\/api\/v1\/entry-images\/[0-9a-f]{64}/g)).toHaveLength(21);
    expect(saved).not.toContain('127.0.0.1');

    const hits = images.hits.length;
    const over = await api.POST('/api/v1/entries', { body: { content: md(21) } });
    expect(over.response.status).toBe(400);
    expect(over.error).toEqual({ code: 'BAD_REQUEST', message: 'A note may embed at most 20 external images' });
    expect(images.hits.length).toBe(hits);
    expect((await api.GET('/api/v1/entries')).data!.map((e) => e._id)).toEqual([twenty.data!.id]);

    const patched = await api.PATCH('/api/v1/entries/{entryId}', {
      ...entryPath(twenty.data!.id),
      body: { content: md(21) },
    });
    expect(patched.response.status).toBe(400);
    expect(patched.error?.message).toBe('A note may embed at most 20 external images');
    expect((await api.GET('/api/v1/entries/{entryId}', entryPath(twenty.data!.id))).data!.content).toBe(saved);
    expect(images.hits.length).toBe(hits);
  });

  it('checks links and the note cap before fetching any image (POST 403, PATCH 400), so a refused note costs no download', async () => {
    const { api } = await server.user();
    const m = await createMember(api);
    for (let i = 0; i < 3; i++) await createEntry(api, { content: `n${i}`, memberIds: [m] });
    const hits = images.hits.length;
    const created = await api.POST('/api/v1/entries', {
      body: { content: `![x](${images.url('/a.png')})`, memberIds: [m] },
    });
    expect(created.response.status).toBe(403);
    expect(created.error?.code).toBe('NOTE_LIMIT_REACHED');
    const free = await createEntry(api, { content: 'free' });
    const patched = await api.PATCH('/api/v1/entries/{entryId}', {
      ...entryPath(free),
      body: { content: `![x](${images.url('/b.gif')})`, memberIds: [m] },
    });
    expect(patched.response.status).toBe(400);
    expect(patched.error?.message).toMatch(/^Note limit of 3 per member/);
    const foreign = await api.POST('/api/v1/entries', {
      body: { content: `![x](${images.url('/a.png')})`, memberIds: [UNKNOWN_ID] },
    });
    expect(foreign.response.status).toBe(400);
    expect(images.hits.length).toBe(hits);
  });

  it("fetches a note's images several at a time (NOTE_IMAGE_FETCH_CONCURRENCY, default 4)", async () => {
    // Every fetch waits at the gate: the first is answered only once four are waiting, so the
    // concurrency seen does not depend on how fast the machine is.
    const waiting: Array<() => void> = [];
    const slow = await startLoopbackServer(
      {},
      { '/slow/': { type: 'image/png', body: PNG, gate: () => new Promise((r) => waiting.push(r)) } },
    );
    try {
      const { api } = await server.user();
      const content = Array.from({ length: 8 }, (_, i) => `![s${i}](${slow.url(`/slow/${i}.png`)})`).join('\n');
      const posted = api.POST('/api/v1/entries', { body: { content } });
      for (let i = 0; i < 1000 && waiting.length < 4; i++) await new Promise((r) => setTimeout(r, 10));
      for (let answered = 0, i = 0; answered < 8 && i < 2000; i++) {
        if (waiting.length > answered) waiting[answered++]!();
        else await new Promise((r) => setTimeout(r, 5));
      }
      const res = await posted;
      expect(res.response.status).toBe(201);
      expect(slow.hits).toHaveLength(8);
      expect(slow.maxInFlight).toBe(4);
    } finally {
      await slow.close();
    }
  });

  it('bounds the whole note with NOTE_IMAGES_TIMEOUT_MS: images that never answer → 400, nothing saved', async () => {
    const stuck = await startLoopbackServer({}, { '/stuck/': { type: 'image/png', body: PNG, hang: true } });
    const s = await new TestServer().start({
      env: { FETCH_ALLOW_PRIVATE: 'true', FETCH_TIMEOUT_MS: '60000', NOTE_IMAGES_TIMEOUT_MS: '300' },
    });
    try {
      const { api } = await s.user();
      const content = Array.from({ length: 6 }, (_, i) => `![s${i}](${stuck.url(`/stuck/${i}.png`)})`).join('\n');
      const res = await api.POST('/api/v1/entries', { body: { content } });
      expect(res.response.status).toBe(400);
      expect(res.error).toEqual({ code: 'BAD_REQUEST', message: "Could not re-host the note's images within 300 ms" });
      expect((await api.GET('/api/v1/entries')).data).toEqual([]);
      // Four were asked for at once; the deadline cancelled them before the rest were started.
      expect(stuck.hits).toHaveLength(4);
    } finally {
      await s.close();
      await stuck.close();
    }
  });

  it('go through the guarded fetcher: private addresses are refused unless allowed', async () => {
    const guarded = await new TestServer().start({ env: { FETCH_ALLOW_PRIVATE: 'false' } });
    try {
      const { api } = await guarded.user();
      const res = await api.POST('/api/v1/entries', { body: { content: `![x](${images.url('/a.png')})` } });
      expect(res.response.status).toBe(400);
      expect(res.error?.message).toContain('private address');
    } finally {
      await guarded.close();
    }
  });

  it('503 PRECONDITION_FAILED when object storage is not configured', async () => {
    const bare = await new TestServer().start({ env: { OBJECT_STORAGE: 'none', FETCH_ALLOW_PRIVATE: 'true' } });
    try {
      const { api } = await bare.user();
      const res = await api.POST('/api/v1/entries', { body: { content: `![x](${images.url('/a.png')})` } });
      expect(res.response.status).toBe(503);
      expect(res.error?.code).toBe('PRECONDITION_FAILED');
      const created = await api.POST('/api/v1/entries', {
        body: { title: 'T', content: 'no images, no storage needed' },
      });
      expect(created.response.status).toBe(201);
      expect((await api.GET('/api/v1/entries')).data!.map((e) => e._id)).toEqual([created.data!.id]);

      const id = created.data!.id;
      const before = (await api.GET('/api/v1/entries/{entryId}', entryPath(id))).data;
      const hits = images.hits.length;
      const patched = await api.PATCH('/api/v1/entries/{entryId}', {
        ...entryPath(id),
        body: { title: 'New', content: `now with ![x](${images.url('/a.png')})` },
      });
      expect(patched.response.status).toBe(503);
      expect(patched.error).toEqual({
        code: 'PRECONDITION_FAILED',
        message: 'Object storage is not configured; notes with external images cannot be saved',
      });
      expect((await api.GET('/api/v1/entries/{entryId}', entryPath(id))).data).toEqual(before);
      expect(images.hits.length).toBe(hits);
      // Edits that leave the content alone, or carry no external image, still work.
      expect(
        (await api.PATCH('/api/v1/entries/{entryId}', { ...entryPath(id), body: { title: 'Renamed' } })).data?.title,
      ).toBe('Renamed');
      expect(bare.violations).toEqual([]);
    } finally {
      await bare.close();
    }
  });
});

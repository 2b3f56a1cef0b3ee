import { describe, expect, it } from 'vitest';
import type { ApiClient } from '../client/index.ts';
import {
  activeSide,
  createEntry,
  createFolder,
  createGroup,
  createMember,
  createSide,
  createSub,
  setActive,
  startFronting,
  UNKNOWN_ID,
} from './helpers/fixtures.ts';
import { captureStatements, explain, planNodes, REQUEST_WORK } from './helpers/plans.ts';
import { useServer } from './helpers/server.ts';
import { codeAndMessage } from './helpers/errors.ts';
import { untilWaitingForLock } from './helpers/db.ts';

const server = useServer();

/** The field rules shared by side and sub systems (POST bodies; PATCH sends the same minus name:'ok'). */
const FIELD_RULES: Array<[Record<string, unknown>, string]> = [
  [{ name: '' }, 'name must NOT have fewer than 1 characters'],
  [{ name: '   ' }, 'name must match pattern "\\S"'],
  [{ name: 'x'.repeat(81) }, 'name must NOT have more than 80 characters'],
  [{ name: 'ok', description: 'd'.repeat(281) }, 'description must NOT have more than 280 characters'],
  [{ name: 'ok', tagCode: 'abc' }, 'tagCode must match pattern "^[A-Z0-9]{1,4}$"'],
  [{ name: 'ok', tagCode: 'ABCDE' }, 'tagCode must match pattern "^[A-Z0-9]{1,4}$"'],
  [{ name: 'ok', tagColor: 'red' }, 'tagColor must match pattern "^#[0-9A-Fa-f]{6}$"'],
  [{ name: 'ok', tagColor: '#12345' }, 'tagColor must match pattern "^#[0-9A-Fa-f]{6}$"'],
  [{ name: 'ok', colour: '#123456' }, "Unknown field 'colour'"],
];

const delSide = (api: ApiClient, sideSystemId: string) =>
  api.DELETE('/api/v1/systems/side-systems/{sideSystemId}', { params: { path: { sideSystemId } } });
const delSub = (api: ApiClient, subSystemId: string) =>
  api.DELETE('/api/v1/systems/sub-systems/{subSystemId}', { params: { path: { subSystemId } } });

async function purge(api: ApiClient, type: 'entry' | 'frontSession', id: string): Promise<void> {
  const res = await api.POST('/api/v1/trash/purge', { body: { items: [{ type, id }] } });
  expect(res.response.status, JSON.stringify(res.error)).toBe(204);
}

/** Ends the member's session and moves it to the trash: the session row still exists. */
async function endAndTrashSession(api: ApiClient, memberId: string, sessionId: string): Promise<void> {
  expect(
    (await api.DELETE('/api/v1/front/members/{memberId}', { params: { path: { memberId } } })).response.status,
  ).toBe(204);
  expect(
    (await api.DELETE('/api/v1/front/sessions/{sessionId}', { params: { path: { sessionId } } })).response.status,
  ).toBe(204);
}

describe('every account', () => {
  it('starts with one active side system and no sub systems', async () => {
    const { api, userId } = await server.user();
    const { data, response } = await api.GET('/api/v1/systems');
    expect(response.status).toBe(200);
    expect(data!.sideSystems).toHaveLength(1);
    expect(data!.sideSystems[0]).toMatchObject({ userId, name: 'Main system' });
    expect(data!.subSystems).toEqual([]);
    expect(data!.active).toMatchObject({
      sideSystemId: data!.sideSystems[0]!._id,
      subSystemId: null,
      isUnifiedView: false,
    });
  });
});

describe('side systems', () => {
  it('creates with all fields, without becoming active, and updates partially; null clears', async () => {
    const { api, userId } = await server.user();
    const main = await activeSide(api);
    const created = await api.POST('/api/v1/systems/side-systems', {
      body: { name: 'Work', description: 'Work front', icon: 'briefcase', tagCode: 'WRK1', tagColor: '#26a69a' },
    });
    expect(created.response.status).toBe(201);
    expect(created.data).toMatchObject({
      userId,
      name: 'Work',
      description: 'Work front',
      icon: 'briefcase',
      tagCode: 'WRK1',
      tagColor: '#26A69A',
    });
    expect(await activeSide(api)).toBe(main);
    const id = created.data!._id;
    const updated = await api.PATCH('/api/v1/systems/side-systems/{sideSystemId}', {
      params: { path: { sideSystemId: id } },
      body: { name: 'Office', tagCode: null },
    });
    expect(updated.data).toMatchObject({ name: 'Office', description: 'Work front', tagColor: '#26A69A' });
    expect(updated.data).not.toHaveProperty('tagCode');
    const cleared = await api.PATCH('/api/v1/systems/side-systems/{sideSystemId}', {
      params: { path: { sideSystemId: id } },
      body: { tagColor: null },
    });
    expect(cleared.response.status).toBe(200);
    expect(cleared.data).not.toHaveProperty('tagColor');
    expect(cleared.data).toMatchObject({ name: 'Office' });
  });

  it('creates one in one statement: the row and side_system.created', async () => {
    const { api, userId } = await server.user();
    await activeSide(api); // warms the key cache
    const knex = server.deps.db.knex;
    let id = '';
    const statements = await captureStatements(knex, REQUEST_WORK, async () => {
      const res = await api.POST('/api/v1/systems/side-systems', { body: { name: 'One', tagColor: '#26a69a' } });
      expect(res.response.status).toBe(201);
      id = res.data!._id;
    });
    // One statement, outside any transaction (docs/data-access.md, "Writes in one statement").
    expect(
      statements.map((st) => st.sql.trim().split(/\s+/).slice(0, 3).join(' ')),
      JSON.stringify(statements.map((st) => st.sql)),
    ).toEqual(['with inserted as']);
    expect(statements[0]!.sql).toMatch(/insert into side_systems[\s\S]*insert into events/);
    const { rows } = await knex.raw<{ rows: Array<{ type: string; data: unknown }> }>(
      `select type, data from events where account_id = ? and type like 'side_system.%' order by id`,
      [userId],
    );
    expect(rows).toEqual([{ type: 'side_system.created', data: { id } }]);
    expect((await api.GET('/api/v1/systems')).data!.sideSystems.find((s) => s._id === id)).toMatchObject({
      name: 'One',
      tagColor: '#26A69A',
    });
  });

  it('a keyed create runs its statement in the request transaction, once: the replay writes nothing more', async () => {
    const { api, userId } = await server.user();
    const send = () =>
      api.POST('/api/v1/systems/side-systems', {
        params: { header: { 'Idempotency-Key': 'side-once' } },
        body: { name: 'Keyed' },
      });
    const first = await send();
    expect(first.response.status).toBe(201);
    expect((await send()).data).toEqual(first.data);
    expect((await api.GET('/api/v1/systems')).data!.sideSystems.filter((s) => s.name === 'Keyed')).toHaveLength(1);
    const { rows } = await server.deps.db.knex.raw<{ rows: Array<{ data: unknown }> }>(
      `select data from events where account_id = ? and type = 'side_system.created'`,
      [userId],
    );
    expect(rows).toEqual([{ data: { id: first.data!._id } }]);
  });

  it.each(FIELD_RULES)('refuses %j with 400', async (body, message) => {
    const { api } = await server.user();
    const res = await api.POST('/api/v1/systems/side-systems', { body: body as never });
    expect(res.response.status).toBe(400);
    expect(codeAndMessage(res.error)).toEqual({ code: 'BAD_REQUEST', message });
  });

  it('accepts the limits: 80-char name, 280-char description, 4-char tag', async () => {
    const { api } = await server.user();
    const res = await api.POST('/api/v1/systems/side-systems', {
      body: { name: 'x'.repeat(80), description: 'd'.repeat(280), tagCode: 'AB12' },
    });
    expect(res.response.status).toBe(201);
  });

  it('applies the field rules on PATCH too, and 404s for foreign or unknown ids', async () => {
    const a = await server.user();
    const b = await server.user();
    const id = await createSide(a.api);
    const bad = await a.api.PATCH('/api/v1/systems/side-systems/{sideSystemId}', {
      params: { path: { sideSystemId: id } },
      body: { tagCode: 'toolong' },
    });
    expect(bad.response.status).toBe(400);
    const empty = await a.api.PATCH('/api/v1/systems/side-systems/{sideSystemId}', {
      params: { path: { sideSystemId: id } },
      body: {},
    });
    expect(empty.response.status).toBe(400);
    const foreign = await b.api.PATCH('/api/v1/systems/side-systems/{sideSystemId}', {
      params: { path: { sideSystemId: id } },
      body: { name: 'x' },
    });
    expect(foreign.response.status).toBe(404);
    const unknown = await a.api.PATCH('/api/v1/systems/side-systems/{sideSystemId}', {
      params: { path: { sideSystemId: UNKNOWN_ID } },
      body: { name: 'x' },
    });
    expect(unknown.response.status).toBe(404);
  });

  describe('DELETE', () => {
    const del = (api: ApiClient, id: string) =>
      api.DELETE('/api/v1/systems/side-systems/{sideSystemId}', { params: { path: { sideSystemId: id } } });

    it('refuses the last side system', async () => {
      const { api } = await server.user();
      const res = await del(api, await activeSide(api));
      expect(res.response.status).toBe(400);
      expect(res.error?.message).toBe('Cannot delete the last side system');
    });

    it('refuses while it has sub systems', async () => {
      const { api } = await server.user();
      const side = await createSide(api);
      const member = await createMember(api, 'Host', { sideSystemId: side });
      await createSub(api, side, member);
      const res = await del(api, side);
      expect(res.response.status).toBe(400);
      expect(res.error?.message).toContain('sub system');
    });

    it('refuses while it holds members, including trashed ones', async () => {
      const { api } = await server.user();
      const side = await createSide(api);
      const member = await createMember(api, 'Host', { sideSystemId: side });
      expect((await del(api, side)).error?.message).toContain('members');
      await api.DELETE('/api/v1/members/{memberId}', { params: { path: { memberId: member } } });
      const trashed = await del(api, side);
      expect(trashed.response.status).toBe(400);
      expect(trashed.error?.message).toContain('members');
    });

    it('refuses while it holds groups or folders', async () => {
      const { api } = await server.user();
      const side = await createSide(api);
      await createFolder(api, 'F', { sideSystemId: side });
      const res = await del(api, side);
      expect(res.response.status).toBe(400);
      expect(res.error?.message).toContain('groups or folders');
      const side2 = await createSide(api);
      await createGroup(api, 'G', { sideSystemId: side2 });
      expect((await del(api, side2)).error?.message).toContain('groups or folders');
    });

    it('soft-deletes an empty one: 200 { success: true }, gone from reads, 404 afterwards', async () => {
      const { api } = await server.user();
      const side = await createSide(api);
      const res = await del(api, side);
      expect(res.response.status).toBe(200);
      expect(res.data).toEqual({ success: true });
      const { data } = await api.GET('/api/v1/systems');
      expect(data!.sideSystems.map((s) => s._id)).not.toContain(side);
      expect((await del(api, side)).response.status).toBe(404);
      const row = await server.deps.db.knex('side_systems').where({ id: side }).first();
      expect(row.deleted_at).toEqual(expect.any(Number));
    });

    it('moves the active scope to another side system when the active one is deleted', async () => {
      const { api } = await server.user();
      const main = await activeSide(api);
      const side = await createSide(api);
      await api.PATCH('/api/v1/systems/active', { body: { sideSystemId: side } });
      expect(await activeSide(api)).toBe(side);
      await del(api, side);
      const { data } = await api.GET('/api/v1/systems');
      expect(data!.active).toMatchObject({ sideSystemId: main, subSystemId: null });
    });
  });
});

describe('sub systems', () => {
  it('creates one linked to a member of the same side system', async () => {
    const { api, userId } = await server.user();
    const side = await activeSide(api);
    const member = await createMember(api, 'Host');
    const res = await api.POST('/api/v1/systems/sub-systems', {
      body: {
        sideSystemId: side,
        linkedMemberId: member,
        name: 'Littles',
        description: 'small ones',
        icon: 'star',
        tagCode: 'LIL',
        tagColor: '#FFB74D',
      },
    });
    expect(res.response.status).toBe(201);
    expect(res.data).toMatchObject({
      userId,
      sideSystemId: side,
      linkedMemberId: member,
      parentSubSystemId: null,
      name: 'Littles',
      tagCode: 'LIL',
    });
    expect((await api.GET('/api/v1/systems')).data!.subSystems.map((s) => s._id)).toEqual([res.data!._id]);
    const cleared = await api.PATCH('/api/v1/systems/sub-systems/{subSystemId}', {
      params: { path: { subSystemId: res.data!._id } },
      body: { tagColor: null },
    });
    expect(cleared.response.status).toBe(200);
    expect(cleared.data).not.toHaveProperty('tagColor');
    expect(cleared.data).toMatchObject({ name: 'Littles', tagCode: 'LIL' });
  });

  it('refuses a linked member from another side system or account, and a parent from another side system', async () => {
    const { api } = await server.user();
    const other = await server.user();
    const main = await activeSide(api);
    const side = await createSide(api);
    const inMain = await createMember(api, 'Main member');
    const inSide = await createMember(api, 'Side member', { sideSystemId: side });
    const foreign = await createMember(other.api, 'Theirs');
    for (const linkedMemberId of [inMain, foreign]) {
      const res = await api.POST('/api/v1/systems/sub-systems', {
        body: { sideSystemId: side, linkedMemberId, name: 'x' },
      });
      expect(res.response.status).toBe(400);
      expect(res.error?.message).toBe('linkedMemberId must be a member of the same side system');
    }
    const mainSub = await createSub(api, main, inMain);
    const res = await api.POST('/api/v1/systems/sub-systems', {
      body: { sideSystemId: side, linkedMemberId: inSide, name: 'x', parentSubSystemId: mainSub },
    });
    expect(res.response.status).toBe(400);
    expect(res.error?.message).toBe('parentSubSystemId must be a sub system of the same side system');
    const unknownSide = await api.POST('/api/v1/systems/sub-systems', {
      body: { sideSystemId: UNKNOWN_ID, linkedMemberId: inSide, name: 'x' },
    });
    expect(unknownSide.response.status).toBe(404);
    const missing = await api.POST('/api/v1/systems/sub-systems', { body: { sideSystemId: side, name: 'x' } as never });
    expect(missing.response.status).toBe(400);
  });

  it('PATCH changes the parent, refusing self-parenting and cycles, and re-links within the side system only', async () => {
    const { api } = await server.user();
    const side = await activeSide(api);
    const m1 = await createMember(api, 'A');
    const m2 = await createMember(api, 'B');
    const a = await createSub(api, side, m1);
    const b = await createSub(api, side, m1, { parentSubSystemId: a });
    const c = await createSub(api, side, m1, { parentSubSystemId: b });
    const patch = (id: string, body: Record<string, unknown>) =>
      api.PATCH('/api/v1/systems/sub-systems/{subSystemId}', { params: { path: { subSystemId: id } }, body });
    expect((await patch(a, { parentSubSystemId: a })).error?.message).toBe('parentSubSystemId would create a cycle');
    const cycle = await patch(a, { parentSubSystemId: c });
    expect(cycle.response.status).toBe(400);
    expect(cycle.error?.message).toBe('parentSubSystemId would create a cycle');
    const ok = await patch(c, { parentSubSystemId: a, linkedMemberId: m2, name: 'C2' });
    expect(ok.response.status).toBe(200);
    expect(ok.data).toMatchObject({ parentSubSystemId: a, linkedMemberId: m2, name: 'C2' });
    const root = await patch(c, { parentSubSystemId: null });
    expect(root.data?.parentSubSystemId).toBeNull();
    const otherSide = await createSide(api);
    const elsewhere = await createMember(api, 'Elsewhere', { sideSystemId: otherSide });
    expect((await patch(c, { linkedMemberId: elsewhere })).response.status).toBe(400);
    expect((await patch(UNKNOWN_ID, { name: 'x' })).response.status).toBe(404);
  });

  it('DELETE refuses while data or child sub systems reference it, then clears the active sub selection', async () => {
    const { api } = await server.user();
    const side = await activeSide(api);
    const host = await createMember(api, 'Host');
    const sub = await createSub(api, side, host);
    const child = await createSub(api, side, host, { parentSubSystemId: sub });
    const del = (id: string) =>
      api.DELETE('/api/v1/systems/sub-systems/{subSystemId}', { params: { path: { subSystemId: id } } });
    const withChild = await del(sub);
    expect(withChild.response.status).toBe(400);
    expect(withChild.error?.message).toContain('child sub system');
    expect((await del(child)).data).toEqual({ success: true });

    const inSub = await createMember(api, 'Inside', { subSystemId: sub });
    expect((await del(sub)).error?.message).toContain('members');
    await api.PATCH('/api/v1/members/{memberId}', {
      params: { path: { memberId: inSub } },
      body: { moveToSystemScope: { sideSystemId: side } },
    });
    const group = await createGroup(api, 'G', { subSystemId: sub });
    expect((await del(sub)).error?.message).toContain('groups or folders');
    await api.DELETE('/api/v1/groups/{groupId}', { params: { path: { groupId: group } } });
    expect((await del(sub)).response.status).toBe(400); // a trashed group still sits in it
    await server.deps.db.knex('directories').where({ id: group }).delete();

    await api.PATCH('/api/v1/systems/active', { body: { sideSystemId: side, subSystemId: sub } });
    const res = await del(sub);
    expect(res.response.status).toBe(200);
    const { data } = await api.GET('/api/v1/systems');
    expect(data!.active).toMatchObject({ sideSystemId: side, subSystemId: null });
    expect(data!.subSystems.map((s) => s._id)).not.toContain(sub);
    expect((await del(sub)).response.status).toBe(404);
  });
});

describe('active scope', () => {
  it('PATCH /systems/active sets side and sub and turns unified view off', async () => {
    const { api } = await server.user();
    const side = await createSide(api);
    const host = await createMember(api, 'Host', { sideSystemId: side });
    const sub = await createSub(api, side, host);
    await api.PATCH('/api/v1/systems/unified-view', { body: { enabled: true } });
    const res = await api.PATCH('/api/v1/systems/active', { body: { sideSystemId: side, subSystemId: sub } });
    expect(res.response.status).toBe(200);
    expect(res.data).toMatchObject({ sideSystemId: side, subSystemId: sub, isUnifiedView: false });
    const sideOnly = await api.PATCH('/api/v1/systems/active', { body: { sideSystemId: side, subSystemId: null } });
    expect(sideOnly.data).toMatchObject({ sideSystemId: side, subSystemId: null });
  });

  it('PATCH /systems/active answers 404 for an unknown or foreign side, or a sub outside that side', async () => {
    const { api } = await server.user();
    const other = await server.user();
    const main = await activeSide(api);
    const side = await createSide(api);
    const host = await createMember(api, 'Host', { sideSystemId: side });
    const sub = await createSub(api, side, host);
    for (const body of [
      { sideSystemId: UNKNOWN_ID },
      { sideSystemId: await activeSide(other.api) },
      { sideSystemId: main, subSystemId: sub },
      { sideSystemId: main, subSystemId: UNKNOWN_ID },
    ]) {
      const res = await api.PATCH('/api/v1/systems/active', { body });
      expect(res.response.status, JSON.stringify(body)).toBe(404);
    }
    expect(await activeSide(api)).toBe(main);
  });

  it('unified view merges reads and keeps the stored side/sub for writes', async () => {
    const { api } = await server.user();
    const main = await activeSide(api);
    const side = await createSide(api);
    const inMain = await createMember(api, 'Main one');
    const inSide = await createMember(api, 'Side one', { sideSystemId: side });
    const page = async (query: Record<string, string> = {}) =>
      (await api.GET('/api/v1/members/page', { params: { query: { limit: 50, ...query } } })).data!.items.map(
        (m) => m._id,
      );
    expect(await page()).toEqual([inMain]);

    const on = await api.PATCH('/api/v1/systems/unified-view', { body: { enabled: true } });
    expect(on.data).toMatchObject({ sideSystemId: main, subSystemId: null, isUnifiedView: true });
    expect((await page()).sort()).toEqual([inMain, inSide].sort());
    const written = await createMember(api, 'Written while unified');
    expect(
      (await api.GET('/api/v1/members/{memberId}', { params: { path: { memberId: written } } })).data!.sideSystemId,
    ).toBe(main);
    const tree = await api.GET('/api/v1/groups');
    expect(tree.data!.members.map((m) => m.id).sort()).toEqual([inMain, inSide, written].sort());

    const off = await api.PATCH('/api/v1/systems/unified-view', { body: { enabled: false } });
    expect(off.data).toMatchObject({ sideSystemId: main, isUnifiedView: false });
    expect((await page()).sort()).toEqual([inMain, written].sort());
  });

  it('scoped reads: explicit sideSystemId/subSystemId, the active side and sub otherwise; new data goes to the active side/sub', async () => {
    const { api } = await server.user();
    const other = await server.user();
    const side = await createSide(api);
    const host = await createMember(api, 'Host', { sideSystemId: side });
    const sub = await createSub(api, side, host);
    const inSub = await createMember(api, 'In sub', { subSystemId: sub });
    const list = async (query: Record<string, string>) => {
      const res = await api.GET('/api/v1/members', { params: { query } });
      return res.data!.map((m) => m._id);
    };
    expect((await list({ sideSystemId: side })).sort()).toEqual([host, inSub].sort());
    expect(await list({ subSystemId: sub })).toEqual([inSub]);
    expect(await list({ sideSystemId: side, subSystemId: sub })).toEqual([inSub]);
    const folder = await createFolder(api, 'Sub folder', { subSystemId: sub });
    const tree = await api.GET('/api/v1/groups', { params: { query: { subSystemId: sub } } });
    expect(tree.data!.folders.map((f) => f._id)).toEqual([folder]);
    expect(tree.data!.members.map((m) => m.id)).toEqual([inSub]);

    for (const query of [
      { sideSystemId: UNKNOWN_ID },
      { subSystemId: UNKNOWN_ID },
      { sideSystemId: await activeSide(other.api) },
      { sideSystemId: await activeSide(api), subSystemId: sub },
    ]) {
      expect((await api.GET('/api/v1/members', { params: { query } })).response.status, JSON.stringify(query)).toBe(
        404,
      );
      expect((await api.GET('/api/v1/groups', { params: { query } })).response.status, JSON.stringify(query)).toBe(404);
    }

    const mainNote = (await api.POST('/api/v1/entries', { body: { content: 'in the main side system' } })).data!.id;
    await api.PATCH('/api/v1/systems/active', { body: { sideSystemId: side, subSystemId: sub } });
    const created = await createMember(api, 'New');
    const member = (await api.GET('/api/v1/members/{memberId}', { params: { path: { memberId: created } } })).data!;
    expect(member).toMatchObject({ sideSystemId: side, subSystemId: sub });
    expect((await list({})).sort()).toEqual([inSub, created].sort());
    // The one-statement reads take the same scope from the context row: the active sub system, then
    // its side system, then the unified view.
    const subNote = (await api.POST('/api/v1/entries', { body: { content: 'in the sub system' } })).data!.id;
    const page = async () =>
      (await api.GET('/api/v1/members/page', { params: { query: { limit: 100 } } }))
        .data!.items.map((m) => m._id)
        .sort();
    const notes = async () => (await api.GET('/api/v1/entries')).data!.map((e) => e._id).sort();
    expect(await page()).toEqual([inSub, created].sort());
    expect(await notes()).toEqual([subNote]);
    await api.PATCH('/api/v1/systems/active', { body: { sideSystemId: side, subSystemId: null } });
    expect(await page()).toEqual([host, inSub, created].sort());
    expect(await notes()).toEqual([subNote]);
    await api.PATCH('/api/v1/systems/unified-view', { body: { enabled: true } });
    expect(await notes()).toEqual([mainNote, subNote].sort());
    expect(await page()).toEqual(expect.arrayContaining([host, inSub, created]));
    await api.PATCH('/api/v1/systems/active', { body: { sideSystemId: side, subSystemId: sub } });
    const group = await createGroup(api, 'New group');
    const groupRow = await server.deps.db.knex('directories').where({ id: group }).first();
    expect(groupRow).toMatchObject({ side_system_id: side, sub_system_id: sub });
  });
});

describe('assignable members', () => {
  it('lists active, non-archived, non-trashed members of that side system as { _id, name } preferring the display name', async () => {
    const { api } = await server.user();
    const side = await createSide(api);
    const plain = await createMember(api, 'Zed', { sideSystemId: side });
    const named = await createMember(api, 'robin', { sideSystemId: side, displayName: 'Alba' });
    const archived = await createMember(api, 'Archived', { sideSystemId: side });
    await api.PATCH('/api/v1/members/{memberId}', {
      params: { path: { memberId: archived } },
      body: { archived: true },
    });
    const trashed = await createMember(api, 'Trashed', { sideSystemId: side });
    await api.DELETE('/api/v1/members/{memberId}', { params: { path: { memberId: trashed } } });
    await createMember(api, 'Elsewhere');
    const res = await api.GET('/api/v1/systems/side-systems/{sideSystemId}/assignable-members', {
      params: { path: { sideSystemId: side } },
    });
    expect(res.response.status).toBe(200);
    expect(res.data).toEqual([
      { _id: named, name: 'Alba' },
      { _id: plain, name: 'Zed' },
    ]);
    const unknown = await api.GET('/api/v1/systems/side-systems/{sideSystemId}/assignable-members', {
      params: { path: { sideSystemId: UNKNOWN_ID } },
    });
    expect(unknown.response.status).toBe(404);
  });
});

describe('sub systems: the side-system field rules apply', () => {
  it.each(FIELD_RULES)('POST refuses %j with 400', async (fields, message) => {
    const { api } = await server.user();
    const side = await activeSide(api);
    const host = await createMember(api, 'Host');
    const res = await api.POST('/api/v1/systems/sub-systems', {
      body: { sideSystemId: side, linkedMemberId: host, ...fields } as never,
    });
    expect(res.response.status).toBe(400);
    expect(codeAndMessage(res.error)).toEqual({ code: 'BAD_REQUEST', message });
    expect((await api.GET('/api/v1/systems')).data!.subSystems).toEqual([]);
  });

  it.each(FIELD_RULES)('PATCH refuses %j with 400 and changes nothing', async (fields, message) => {
    const { api } = await server.user();
    const side = await activeSide(api);
    const host = await createMember(api, 'Host');
    const sub = await createSub(api, side, host, { name: 'Before' });
    const { name, ...rest } = fields;
    // Keep a valid name out of the PATCH so the rule under test is the only one broken.
    const body = name === 'ok' ? rest : fields;
    const res = await api.PATCH('/api/v1/systems/sub-systems/{subSystemId}', {
      params: { path: { subSystemId: sub } },
      body: body as never,
    });
    expect(res.response.status).toBe(400);
    expect(res.error?.code).toBe('BAD_REQUEST');
    // tagColor is `oneOf: [HexColor, null]` on PATCH, so the validator appends the null branch's complaints.
    expect(res.error?.message.split('; ')[0]).toBe(message);
    const { data } = await api.GET('/api/v1/systems');
    expect(data!.subSystems).toEqual([expect.objectContaining({ _id: sub, name: 'Before' })]);
  });

  it('accepts the limits on POST and PATCH: 80-char name, 280-char description, 4-char tag', async () => {
    const { api } = await server.user();
    const side = await activeSide(api);
    const host = await createMember(api, 'Host');
    const created = await api.POST('/api/v1/systems/sub-systems', {
      body: {
        sideSystemId: side,
        linkedMemberId: host,
        name: 'x'.repeat(80),
        description: 'd'.repeat(280),
        tagCode: 'AB12',
        tagColor: '#abcdef',
      },
    });
    expect(created.response.status).toBe(201);
    expect(created.data).toMatchObject({ tagCode: 'AB12', tagColor: '#ABCDEF' });
    const updated = await api.PATCH('/api/v1/systems/sub-systems/{subSystemId}', {
      params: { path: { subSystemId: created.data!._id } },
      body: { name: 'y'.repeat(80), description: null, tagCode: 'Z9' },
    });
    expect(updated.response.status).toBe(200);
    expect(updated.data).toMatchObject({ name: 'y'.repeat(80), tagCode: 'Z9' });
    expect(updated.data).not.toHaveProperty('description');
  });
});

describe('DELETE is blocked by notes and front data, trashed ones included', () => {
  it('side system: a note, then the same note in the trash; deletable once it is purged', async () => {
    const { api } = await server.user();
    const main = await activeSide(api);
    const side = await createSide(api);
    await setActive(api, side);
    const note = await createEntry(api, 'Written in the side system');
    await setActive(api, main);
    const blocked = await delSide(api, side);
    expect(blocked.response.status).toBe(400);
    expect(blocked.error).toEqual({
      code: 'BAD_REQUEST',
      message: 'Side system still holds notes (trashed items included); move or purge them first',
    });

    expect(
      (await api.DELETE('/api/v1/entries/{entryId}', { params: { path: { entryId: note } } })).response.status,
    ).toBe(204);
    const trashed = await delSide(api, side);
    expect(trashed.response.status).toBe(400);
    expect(trashed.error?.message).toContain('notes');

    await purge(api, 'entry', note);
    expect((await delSide(api, side)).data).toEqual({ success: true });
  });

  it('side system: an open front session, then an ended and trashed one; deletable once it is purged', async () => {
    const { api } = await server.user();
    const main = await activeSide(api);
    const side = await createSide(api);
    const member = await createMember(api, 'Lives in main'); // so only the front data sits in the side system
    await setActive(api, side);
    const session = await startFronting(api, member);
    await setActive(api, main);
    const open = await delSide(api, side);
    expect(open.response.status).toBe(400);
    expect(open.error).toEqual({
      code: 'BAD_REQUEST',
      message: 'Side system still holds front data (trashed items included); move or purge them first',
    });

    await endAndTrashSession(api, member, session);
    const trashed = await delSide(api, side);
    expect(trashed.response.status).toBe(400);
    expect(trashed.error?.message).toContain('front data');

    await purge(api, 'frontSession', session);
    expect((await delSide(api, side)).data).toEqual({ success: true });
  });

  it('side system: the message names every kind of data still held', async () => {
    const { api } = await server.user();
    const side = await createSide(api);
    await setActive(api, side);
    const member = await createMember(api, 'Inside');
    await createFolder(api, 'Folder');
    await createEntry(api);
    await startFronting(api, member);
    const res = await delSide(api, side);
    expect(res.response.status).toBe(400);
    expect(res.error?.message).toBe(
      'Side system still holds members, groups or folders, notes, front data (trashed items included); move or purge them first',
    );
  });

  it('sub system: a note (also in the trash), then front data; deletable once both are purged', async () => {
    const { api } = await server.user();
    const side = await activeSide(api);
    const host = await createMember(api, 'Host'); // in the side system, not in the sub system
    const sub = await createSub(api, side, host);
    await setActive(api, side, sub);
    const note = await createEntry(api, 'Written in the sub system');
    const blocked = await delSub(api, sub);
    expect(blocked.response.status).toBe(400);
    expect(blocked.error).toEqual({
      code: 'BAD_REQUEST',
      message: 'Sub system is still referenced by notes (trashed items included)',
    });
    await api.DELETE('/api/v1/entries/{entryId}', { params: { path: { entryId: note } } });
    const trashedNote = await delSub(api, sub);
    expect(trashedNote.response.status).toBe(400);
    expect(trashedNote.error?.message).toContain('notes');
    await purge(api, 'entry', note);

    const session = await startFronting(api, host);
    const front = await delSub(api, sub);
    expect(front.response.status).toBe(400);
    expect(front.error).toEqual({
      code: 'BAD_REQUEST',
      message: 'Sub system is still referenced by front data (trashed items included)',
    });
    await endAndTrashSession(api, host, session);
    const trashedSession = await delSub(api, sub);
    expect(trashedSession.response.status).toBe(400);
    expect(trashedSession.error?.message).toContain('front data');
    await purge(api, 'frontSession', session);

    expect((await delSub(api, sub)).data).toEqual({ success: true });
    expect((await api.GET('/api/v1/systems')).data!.active).toMatchObject({ sideSystemId: side, subSystemId: null });
  });
});

const ROUNDS_LOCK_ORDER = 10;

describe('deletes racing writes', () => {
  // On PostgreSQL the requests really overlap (each round sends a DELETE and several creates at
  // once, to widen the window); embedded, they serialise. Either way the DELETE may only succeed
  // when every create failed, and a refused DELETE names the members the creates placed.
  const ROUNDS = 10;
  const WRITERS = 3;

  async function race(
    api: ApiClient,
    round: number,
    target: { sideSystemId: string } | { subSystemId: string },
    del: () => ReturnType<typeof delSide>,
  ): Promise<void> {
    const [deleted, ...created] = await Promise.all([
      del(),
      ...Array.from({ length: WRITERS }, (_, i) =>
        api.POST('/api/v1/members', { body: { name: `Racer ${round}.${i}`, ...target } }),
      ),
    ]);
    const statuses = `round ${round}: delete ${deleted.response.status}, creates ${created.map((c) => c.response.status).join(' ')}`;
    const column = 'sideSystemId' in target ? 'side_system_id' : 'sub_system_id';
    const live = await server.deps.db
      .knex('members')
      .where({ [column]: Object.values(target)[0] })
      .whereNull('deleted_at')
      .pluck('id');
    if (deleted.response.status === 200) {
      expect(
        created.map((c) => c.response.status),
        statuses,
      ).toEqual(Array(WRITERS).fill(404));
      expect(live, statuses).toEqual([]);
    } else {
      expect(deleted.response.status, statuses).toBe(400);
      expect(deleted.error?.message, statuses).toContain('members');
      expect(
        created.map((c) => c.response.status),
        statuses,
      ).toEqual(Array(WRITERS).fill(201));
      expect(live.sort(), statuses).toEqual(created.map((c) => c.data!.id).sort());
    }
  }

  it('members created with an explicit sideSystemId never land in a side system deleted at the same time', async () => {
    const { api } = await server.user();
    for (let round = 0; round < ROUNDS; round++) {
      const side = await createSide(api, `Race ${round}`);
      await race(api, round, { sideSystemId: side }, () => delSide(api, side));
    }
  });

  it('members created with an explicit subSystemId never land in a sub system deleted at the same time', async () => {
    const { api } = await server.user();
    const side = await activeSide(api);
    const host = await createMember(api, 'Host');
    for (let round = 0; round < ROUNDS; round++) {
      const sub = await createSub(api, side, host, { name: `Race ${round}` });
      await race(api, round, { subSystemId: sub }, () => delSub(api, sub));
    }
  });

  it('a note written into the active side system while it is deleted lands in the side system that stays active', async () => {
    const { api } = await server.user();
    const main = await activeSide(api);
    for (let round = 0; round < ROUNDS; round++) {
      const side = await createSide(api, `Race ${round}`);
      await setActive(api, side);
      const [created, deleted] = await Promise.all([
        api.POST('/api/v1/entries', { body: { content: `note ${round}` } }),
        delSide(api, side),
      ]);
      const statuses = `round ${round}: create ${created.response.status}, delete ${deleted.response.status}`;
      expect(created.response.status, statuses).toBe(201); // the note always has somewhere to go
      const row = await server.deps.db.knex('entries').where({ id: created.data!.id }).first();
      if (deleted.response.status === 200) {
        expect(row.side_system_id, statuses).toBe(main);
      } else {
        expect(deleted.error?.message, statuses).toContain('notes');
        expect(row.side_system_id, statuses).toBe(side);
        await setActive(api, main);
      }
    }
  });
});

describe('writers that lock the same rows in one order', () => {
  it('notes for a member and sub systems linking that member, sent together, all succeed (no deadlock)', async () => {
    // A note locks the active scope, then its members (note cap); a sub-system write must take the
    // same order, or PostgreSQL aborts one of the two as a deadlock (a 500 for a valid request).
    const { api } = await server.user();
    const side = await activeSide(api);
    const host = await createMember(api, 'Host');
    for (let round = 0; round < ROUNDS_LOCK_ORDER; round++) {
      const results = await Promise.all([
        api.POST('/api/v1/entries', { body: { content: `note ${round}.a`, memberIds: [host] } }),
        api.POST('/api/v1/systems/sub-systems', {
          body: { name: `Sub ${round}.a`, sideSystemId: side, linkedMemberId: host },
        }),
        api.POST('/api/v1/entries', { body: { content: `note ${round}.b`, memberIds: [host] } }),
        api.POST('/api/v1/systems/sub-systems', {
          body: { name: `Sub ${round}.b`, sideSystemId: side, linkedMemberId: host },
        }),
      ]);
      expect(
        results.map((r) => r.response.status),
        `round ${round}`,
      ).toEqual([201, 201, 201, 201]);
    }
  });
});

describe('scoped reads and writes under an active sub system or unified view', () => {
  it('GET /groups without a query shows only the active sub system', async () => {
    const { api } = await server.user();
    const side = await activeSide(api);
    const host = await createMember(api, 'Host');
    const sub = await createSub(api, side, host);
    const sideFolder = await createFolder(api, 'Side folder');
    const sideGroup = await createGroup(api, 'Side group');
    await setActive(api, side, sub);
    const subFolder = await createFolder(api, 'Sub folder');
    const subGroup = await createGroup(api, 'Sub group');
    const inSub = await createMember(api, 'In sub');

    const tree = (await api.GET('/api/v1/groups')).data!;
    expect(tree.folders.map((f) => f._id)).toEqual([subFolder]);
    expect(tree.groups.map((g) => g._id)).toEqual([subGroup]);
    expect(tree.members.map((m) => m.id)).toEqual([inSub]);

    await setActive(api, side);
    const whole = (await api.GET('/api/v1/groups')).data!;
    expect(whole.folders.map((f) => f._id).sort()).toEqual([sideFolder, subFolder].sort());
    expect(whole.groups.map((g) => g._id).sort()).toEqual([sideGroup, subGroup].sort());
    expect(whole.members.map((m) => m.id).sort()).toEqual([host, inSub].sort());
  });

  it('deprecated GET /members merges every side system under unified view; an explicit query still narrows', async () => {
    const { api } = await server.user();
    const side = await createSide(api);
    const inMain = await createMember(api, 'Main one');
    const inSide = await createMember(api, 'Side one', { sideSystemId: side });
    const list = async (query: Record<string, string> = {}) =>
      (await api.GET('/api/v1/members', { params: { query } })).data!.map((m) => m._id).sort();
    expect(await list()).toEqual([inMain]);
    await api.PATCH('/api/v1/systems/unified-view', { body: { enabled: true } });
    expect(await list()).toEqual([inMain, inSide].sort());
    expect(await list({ sideSystemId: side })).toEqual([inSide]);
  });

  it('GET /groups under unified view includes folders and groups of every side system', async () => {
    const { api } = await server.user();
    const side = await createSide(api);
    const mainFolder = await createFolder(api, 'Main folder');
    const mainGroup = await createGroup(api, 'Main group');
    const sideFolder = await createFolder(api, 'Side folder', { sideSystemId: side });
    const sideGroup = await createGroup(api, 'Side group', { sideSystemId: side });
    const before = (await api.GET('/api/v1/groups')).data!;
    expect(before.folders.map((f) => f._id)).toEqual([mainFolder]);
    await api.PATCH('/api/v1/systems/unified-view', { body: { enabled: true } });
    const merged = (await api.GET('/api/v1/groups')).data!;
    expect(merged.folders.map((f) => f._id).sort()).toEqual([mainFolder, sideFolder].sort());
    expect(merged.groups.map((g) => g._id).sort()).toEqual([mainGroup, sideGroup].sort());
  });

  it('a note and a front session written with an active sub system are placed in it', async () => {
    const { api } = await server.user();
    const side = await activeSide(api);
    const host = await createMember(api, 'Host');
    const sub = await createSub(api, side, host, { name: 'One' });
    const otherSub = await createSub(api, side, host, { name: 'Two' });
    await setActive(api, side, sub);
    const note = await createEntry(api, 'In the sub system');
    const session = await startFronting(api, host);
    const knex = server.deps.db.knex;
    expect(await knex('entries').where({ id: note }).first()).toMatchObject({
      side_system_id: side,
      sub_system_id: sub,
    });
    expect(await knex('front_sessions').where({ id: session }).first()).toMatchObject({
      side_system_id: side,
      sub_system_id: sub,
    });

    const listed = async () => (await api.GET('/api/v1/entries')).data!.map((e) => e._id);
    expect(await listed()).toEqual([note]);
    await setActive(api, side, otherSub);
    expect(await listed()).toEqual([]);
    await setActive(api, side);
    expect(await listed()).toEqual([note]);
  });
});

describe.runIf(Boolean(process.env.DATABASE_URL))(
  'PATCH racing the delete of the same side system (PostgreSQL)',
  () => {
    it('a side system deleted while the PATCH waits for its row is a 404 and is not changed', async () => {
      const { api, userId } = await server.user();
      const side = await createSide(api, 'Before');
      const knex = server.deps.db.knex;
      const trx = await knex.transaction();
      try {
        await trx('side_systems').where({ id: side }).forUpdate().first();
        const patched = api.PATCH('/api/v1/systems/side-systems/{sideSystemId}', {
          params: { path: { sideSystemId: side } },
          body: { name: 'After' },
        });
        // Wait until the PATCH is blocked on the row lock this transaction holds.
        await untilWaitingForLock(knex, 'the PATCH');
        await trx('side_systems').where({ id: side }).update({ deleted_at: 1, updated_at: 1 });
        await trx.commit();
        const res = await patched;
        expect(res.response.status).toBe(404);
        expect(res.error).toEqual({ code: 'NOT_FOUND', message: 'Side system not found' });
        expect(await knex('side_systems').where({ id: side, user_id: userId }).first('name', 'deleted_at')).toEqual({
          name: 'Before',
          deleted_at: 1,
        });
      } finally {
        if (!trx.isCompleted()) await trx.rollback();
      }
    });
  },
);

describe('system checks cost a fixed number of indexed statements', () => {
  it('deleting a side system asks every table at once, on indexes, with trashed rows counted', async () => {
    const { api, userId } = await server.user();
    const main = await activeSide(api);
    const empty = await createSide(api, 'Empty');
    const knex = server.deps.db.knex;
    // 3,000 members (half trashed) and notes in the main side system, so a scan would show.
    await knex.raw(
      `insert into members (id, user_id, side_system_id, name, created_at, updated_at, deleted_at)
       select gen_random_uuid(), ?, ?, 'm' || g, 1, 1, case when g % 2 = 0 then 1 end from generate_series(1, 3000) g`,
      [userId, main],
    );
    await knex.raw(
      `insert into entries (id, user_id, side_system_id, content, created_at, updated_at, deleted_at)
       select gen_random_uuid(), ?, ?, 'n', 1, 1, case when g % 2 = 0 then 1 end from generate_series(1, 3000) g`,
      [userId, main],
    );
    await knex.raw(
      `insert into directories (id, user_id, kind, side_system_id, name, created_at, updated_at)
       select gen_random_uuid(), ?, 'folder', ?, 'f' || g, 1, 1 from generate_series(1, 3000) g`,
      [userId, main],
    );
    const fronter = await createMember(api, 'Fronter');
    await knex.raw(
      `insert into front_sessions (id, user_id, member_id, side_system_id, started_at, ended_at, created_at, updated_at)
       select gen_random_uuid(), ?, ?, ?, g * 1000, g * 1000 + 500, 1, 1 from generate_series(1, 3000) g`,
      [userId, fronter, main],
    );
    if (server.runtime.maintenance) await server.runtime.maintenance.runOnce();
    else await knex.raw('analyze members, entries, directories, front_sessions');
    let status = 0;
    const statements = await captureStatements(knex, /exists \(select 1 from \w+ where user_id = /, async () => {
      status = (await delSide(api, empty)).response.status;
    });
    expect(status).toBe(200);
    expect(statements).toHaveLength(1);
    const nodes = planNodes(await explain(knex, statements[0]!));
    expect(nodes.filter((n) => n['Node Type'] === 'Seq Scan').map((n) => n['Relation Name'])).toEqual([]);
    // Trashed rows still hold the main side system.
    await knex('front_sessions').where({ user_id: userId }).delete();
    await knex('directories').where({ user_id: userId, side_system_id: main }).delete();
    await knex('members')
      .where({ user_id: userId, side_system_id: main })
      .whereNull('deleted_at')
      .update({ deleted_at: 1 });
    await knex('entries').where({ user_id: userId, side_system_id: main }).delete();
    const other = await createSide(api, 'Other');
    await api.PATCH('/api/v1/systems/active', { body: { sideSystemId: other } });
    const blocked = await delSide(api, main);
    expect(blocked.response.status).toBe(400);
    expect(blocked.error?.message).toBe(
      'Side system still holds members (trashed items included); move or purge them first',
    );
  });

  it('a cycle in a deep sub-system chain is found with one recursive query', async () => {
    const { api } = await server.user();
    const side = await activeSide(api);
    const member = await createMember(api);
    const chain = [await createSub(api, side, member)];
    for (let i = 1; i < 25; i++) chain.push(await createSub(api, side, member, { parentSubSystemId: chain[i - 1] }));
    const knex = server.deps.db.knex;
    let res: Awaited<ReturnType<ApiClient['PATCH']>> | undefined;
    const statements = await captureStatements(knex, /sub_systems/, async () => {
      res = await api.PATCH('/api/v1/systems/sub-systems/{subSystemId}', {
        params: { path: { subSystemId: chain[0]! } },
        body: { parentSubSystemId: chain[24]! },
      });
    });
    expect(res!.response.status).toBe(400);
    expect(res!.error?.message).toBe('parentSubSystemId would create a cycle');
    expect(statements.filter((s) => /with recursive/.test(s.sql))).toHaveLength(1);
    expect(statements.length).toBeLessThanOrEqual(3);
    // A move that closes no cycle is accepted.
    const ok = await api.PATCH('/api/v1/systems/sub-systems/{subSystemId}', {
      params: { path: { subSystemId: chain[24]! } },
      body: { parentSubSystemId: chain[0]! },
    });
    expect(ok.response.status).toBe(200);
  });
});

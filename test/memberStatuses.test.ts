import { describe, expect, it } from 'vitest';
import { createMember, UNKNOWN_ID } from './helpers/fixtures.ts';
import { captureStatements, REQUEST_WORK } from './helpers/plans.ts';
import { useServer } from './helpers/server.ts';

let now = 1_800_000_000_000;
const server = useServer({ clock: () => now });

describe('member status definitions', () => {
  it('create, list, update (null removes the icon) and delete', async () => {
    const { api } = await server.user();
    const created = await api.POST('/api/v1/member-statuses', {
      body: { name: 'Resting', color: '#90a4ae', icon: 'bed' },
    });
    expect(created.response.status).toBe(201);
    const id = created.data!.id;
    expect((await api.GET('/api/v1/member-statuses')).data).toEqual([
      { _id: id, name: 'Resting', color: '#90A4AE', icon: 'bed', createdAt: now, updatedAt: now },
    ]);
    now += 10;
    const updated = await api.PATCH('/api/v1/member-statuses/{statusId}', {
      params: { path: { statusId: id } },
      body: { name: 'Asleep', icon: null },
    });
    expect(updated.data).toEqual({
      _id: id,
      name: 'Asleep',
      color: '#90A4AE',
      icon: null,
      createdAt: now - 10,
      updatedAt: now,
    });
    expect(
      (await api.DELETE('/api/v1/member-statuses/{statusId}', { params: { path: { statusId: id } } })).response.status,
    ).toBe(204);
    expect((await api.GET('/api/v1/member-statuses')).data).toEqual([]);
    expect(
      (await api.DELETE('/api/v1/member-statuses/{statusId}', { params: { path: { statusId: id } } })).response.status,
    ).toBe(404);
  });

  it('validates the body', async () => {
    const { api } = await server.user();
    for (const body of [
      { name: 'x' },
      { name: 'x', color: 'grey' },
      { name: '', color: '#000000' },
      { name: 'x', color: '#000000', emoji: '💤' },
    ]) {
      expect(
        (await api.POST('/api/v1/member-statuses', { body: body as never })).response.status,
        JSON.stringify(body),
      ).toBe(400);
    }
  });
});

describe('assignments', () => {
  it('assign (idempotent, keeps the first time), list, clear; deleting the definition clears it everywhere', async () => {
    const { api } = await server.user();
    const m = await createMember(api);
    const s1 = (await api.POST('/api/v1/member-statuses', { body: { name: 'A', color: '#000001' } })).data!.id;
    const s2 = (await api.POST('/api/v1/member-statuses', { body: { name: 'B', color: '#000002' } })).data!.id;
    const path = (statusId: string) => ({ params: { path: { memberId: m, statusId } } });
    const first = now;
    expect((await api.PUT('/api/v1/members/{memberId}/statuses/{statusId}', path(s1))).response.status).toBe(204);
    now += 100;
    await api.PUT('/api/v1/members/{memberId}/statuses/{statusId}', path(s2));
    await api.PUT('/api/v1/members/{memberId}/statuses/{statusId}', path(s1));
    const list = await api.GET('/api/v1/members/{memberId}/statuses', { params: { path: { memberId: m } } });
    expect(list.data).toEqual([
      { statusId: s1, name: 'A', color: '#000001', icon: null, assignedAt: first },
      { statusId: s2, name: 'B', color: '#000002', icon: null, assignedAt: now },
    ]);
    expect((await api.DELETE('/api/v1/members/{memberId}/statuses/{statusId}', path(s1))).response.status).toBe(204);
    expect((await api.DELETE('/api/v1/members/{memberId}/statuses/{statusId}', path(s1))).response.status).toBe(204);
    await api.DELETE('/api/v1/member-statuses/{statusId}', { params: { path: { statusId: s2 } } });
    expect((await api.GET('/api/v1/members/{memberId}/statuses', { params: { path: { memberId: m } } })).data).toEqual(
      [],
    );
  });

  it('404 for foreign or unknown members and statuses', async () => {
    const { api } = await server.user();
    const other = await server.user();
    const m = await createMember(api);
    const theirStatus = (await other.api.POST('/api/v1/member-statuses', { body: { name: 'T', color: '#000000' } }))
      .data!.id;
    const mine = (await api.POST('/api/v1/member-statuses', { body: { name: 'M', color: '#000000' } })).data!.id;
    const theirMember = await createMember(other.api);
    for (const [memberId, statusId] of [
      [m, theirStatus],
      [theirMember, mine],
      [UNKNOWN_ID, mine],
      [m, UNKNOWN_ID],
    ] as const) {
      expect(
        (await api.PUT('/api/v1/members/{memberId}/statuses/{statusId}', { params: { path: { memberId, statusId } } }))
          .response.status,
      ).toBe(404);
    }
    expect(
      (
        await other.api.PATCH('/api/v1/member-statuses/{statusId}', {
          params: { path: { statusId: mine } },
          body: { name: 'x' },
        })
      ).response.status,
    ).toBe(404);
  });
});

describe('POST /member-statuses cost', () => {
  it('creates a status in one statement: the row and member_status.created', async () => {
    const { api, userId } = await server.user();
    await api.POST('/api/v1/member-statuses', { body: { name: 'Warm-up', color: '#000000' } }); // warms the key cache
    const knex = server.deps.db.knex;
    let id = '';
    const statements = await captureStatements(knex, REQUEST_WORK, async () => {
      const created = await api.POST('/api/v1/member-statuses', { body: { name: 'Resting', color: '#90a4ae' } });
      expect(created.response.status).toBe(201);
      id = created.data!.id;
    });
    expect(statements.map((st) => st.sql.trim().split(/\s+/).slice(0, 3).join(' '))).toEqual(['with inserted as']);
    const { rows: events } = await knex.raw<{ rows: unknown[] }>(
      `select 1 from events where account_id = ? and type = 'member_status.created' and data->>'id' = ?`,
      [userId, id],
    );
    expect(events).toHaveLength(1);
    expect((await api.GET('/api/v1/member-statuses')).data!.map((s) => s._id)).toContain(id);
  });
});

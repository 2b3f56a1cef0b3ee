import { describe, expect, it } from 'vitest';
import type { ApiClient, components, operations } from '../client/index.ts';
import { endMemberFront } from '../server/features/front/service.ts';
import { activeSide, createMember, createSide, UNKNOWN_ID } from './helpers/fixtures.ts';
import { captureStatements, explain, planNodes, type PlanNode } from './helpers/plans.ts';
import { jsonHeaders, useServer, type TestUser } from './helpers/server.ts';
import { codeAndMessage } from './helpers/errors.ts';

type HistoryQuery = NonNullable<operations['getFrontHistory']['parameters']['query']>;
type HistoryItem = components['schemas']['FrontHistoryItem'];

let now = 1_800_000_000_000;
const server = useServer({ clock: () => now });

/** Queries that read front or member data (auth and rate-limit bookkeeping are not counted). */
const FRONT_DATA_SQL = /\b(front_sessions|front_session_counts|front_tier_presence|front_custom_tiers|members)\b/;
const memberPath = (memberId: string) => ({ params: { path: { memberId } } });
const sessionPath = (sessionId: string) => ({ params: { path: { sessionId } } });

async function getFront(api: ApiClient) {
  const res = await api.GET('/api/v1/front');
  expect(res.response.status).toBe(200);
  return res.data!;
}

async function start(
  api: ApiClient,
  memberId: string,
  extra: { note?: string; createdBy?: string } = {},
): Promise<void> {
  const res = await api.POST('/api/v1/front/members', { body: { memberId, ...extra } });
  expect(res.response.status, JSON.stringify(res.error)).toBe(204);
}

async function stop(api: ApiClient, memberId: string): Promise<void> {
  const res = await api.DELETE('/api/v1/front/members/{memberId}', memberPath(memberId));
  expect(res.response.status, JSON.stringify(res.error)).toBe(204);
}

async function history(api: ApiClient, query: HistoryQuery = {}) {
  const res = await api.GET('/api/v1/front/history', { params: { query } });
  expect(res.response.status, JSON.stringify(res.error)).toBe(200);
  return res.data!;
}

/** The id of the member's open session, read from GET /front. */
async function openSessionId(api: ApiClient, memberId: string): Promise<string> {
  const session = (await getFront(api)).activeSessions.find((s) => s.memberId === memberId);
  expect(session, `open session of ${memberId}`).toBeDefined();
  return session!._id;
}

/** A closed session of the member from startedAt to endedAt, made through the API. Returns its id. */
async function pastSession(api: ApiClient, memberId: string, startedAt: number, endedAt: number): Promise<string> {
  const saved = now;
  now = startedAt;
  await start(api, memberId);
  now = endedAt;
  await stop(api, memberId);
  now = saved;
  const items = (await history(api, { startTime: startedAt, endTime: startedAt, limit: 100 })).items;
  const item = items.find(
    (i) => i.session.memberId === memberId && i.session.startedAt === startedAt && i.session.endedAt === endedAt,
  );
  expect(item).toBeDefined();
  return item!.session._id;
}

async function expectBadRequest(
  promise: Promise<{ response: Response; error?: { code: string; message: string } }>,
  message?: string | RegExp,
): Promise<void> {
  const res = await promise;
  expect(res.response.status, JSON.stringify(res.error)).toBe(400);
  expect(res.error?.code).toBe('BAD_REQUEST');
  if (typeof message === 'string') expect(res.error?.message).toBe(message);
  else if (message) expect(res.error?.message).toMatch(message);
}

async function rawRequest(
  user: TestUser,
  method: string,
  path: string,
  body: unknown,
): Promise<{ status: number; body: { code: string; message: string } }> {
  const res = await server.fetch(path, { method, headers: jsonHeaders(user.apiKey), body: JSON.stringify(body) });
  return { status: res.status, body: await res.json() };
}

async function members(api: ApiClient, count: number, prefix = 'M'): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < count; i++) ids.push(await createMember(api, `${prefix}${i}`));
  return ids;
}

describe('POST /front/members', () => {
  it('starts a session at the current time, last in the order; the first member is primary', async () => {
    const { api, userId } = await server.user();
    const [a, b, c] = await members(api, 3);
    expect(await getFront(api)).toEqual({
      memberIds: [],
      members: [],
      activeSessions: [],
      primaryMemberId: null,
      primaryNote: null,
      tieredPresence: [],
    });

    now += 1000;
    const tA = now;
    await start(api, a!, { note: 'morning' });
    now += 1000;
    const tB = now;
    await start(api, b!);
    now += 1000;
    await start(api, c!, { note: 'listening' });

    const state = await getFront(api);
    expect(state.memberIds).toEqual([a, b, c]);
    expect(state.primaryMemberId).toBe(a);
    expect(state.primaryNote).toBe('morning');
    const fullMembers = await Promise.all(
      [a!, b!, c!].map(async (id) => (await api.GET('/api/v1/members/{memberId}', memberPath(id))).data),
    );
    expect(state.members).toEqual(fullMembers);
    expect(state.activeSessions).toEqual([
      { _id: expect.any(String), userId, memberId: a, startedAt: tA, note: 'morning' },
      { _id: expect.any(String), userId, memberId: b, startedAt: tB },
      { _id: expect.any(String), userId, memberId: c, startedAt: now, note: 'listening' },
    ]);
    expect('note' in state.activeSessions[1]!).toBe(false);
  });

  it('is a no-op when the member is already fronting: same session, start time, note and place', async () => {
    const { api } = await server.user();
    const [a, b] = await members(api, 2);
    await start(api, a!, { note: 'first' });
    now += 10;
    await start(api, b!);
    const before = await getFront(api);
    now += 5000;
    await start(api, a!, { note: 'second' });
    expect(await getFront(api)).toEqual(before);
    expect((await history(api)).count).toBe(2);
  });

  it('stamps new sessions with the active side/sub system, but the front spans every system', async () => {
    const { api } = await server.user();
    const home = await activeSide(api);
    const a = await createMember(api, 'Home member');
    const other = await createSide(api, 'Other');
    const b = await createMember(api, 'Other member', { sideSystemId: other });
    await start(api, a);
    expect((await api.PATCH('/api/v1/systems/active', { body: { sideSystemId: other } })).response.status).toBe(200);
    await start(api, b);
    const rows = await server.deps.db
      .knex('front_sessions')
      .whereIn('member_id', [a, b])
      .select('member_id', 'side_system_id', 'sub_system_id');
    expect(rows.find((r) => r.member_id === a)).toMatchObject({ side_system_id: home, sub_system_id: null });
    expect(rows.find((r) => r.member_id === b)).toMatchObject({ side_system_id: other, sub_system_id: null });
    // Not narrowed by the active scope, whichever side is active.
    expect((await getFront(api)).memberIds).toEqual([a, b]);
    await api.PATCH('/api/v1/systems/active', { body: { sideSystemId: home } });
    expect((await getFront(api)).memberIds).toEqual([a, b]);
    expect((await history(api)).count).toBe(2);
  });

  it("records createdBy when it is one of the caller's members", async () => {
    const { api } = await server.user();
    const [a, logger] = await members(api, 2);
    await start(api, a!, { createdBy: logger! });
    const row = await server.deps.db.knex('front_sessions').where({ member_id: a }).first();
    expect(row.created_by).toBe(logger);
  });

  it('refuses unknown, foreign, archived and trashed members, and a bad createdBy, with 400 and changes nothing', async () => {
    const { api } = await server.user();
    const other = await server.user();
    const [ok, archived, trashed] = await members(api, 3);
    const foreign = await createMember(other.api);
    await api.PATCH('/api/v1/members/{memberId}', { ...memberPath(archived!), body: { archived: true } });
    await api.DELETE('/api/v1/members/{memberId}', memberPath(trashed!));

    await expectBadRequest(
      api.POST('/api/v1/front/members', { body: { memberId: UNKNOWN_ID } }),
      'memberId is not one of your members',
    );
    await expectBadRequest(
      api.POST('/api/v1/front/members', { body: { memberId: foreign } }),
      'memberId is not one of your members',
    );
    await expectBadRequest(
      api.POST('/api/v1/front/members', { body: { memberId: trashed! } }),
      'memberId is not one of your members',
    );
    await expectBadRequest(api.POST('/api/v1/front/members', { body: { memberId: archived! } }), /archived/);
    for (const createdBy of [UNKNOWN_ID, foreign, trashed!]) {
      await expectBadRequest(
        api.POST('/api/v1/front/members', { body: { memberId: ok!, createdBy } }),
        'createdBy is not one of your members',
      );
    }
    expect((await getFront(api)).memberIds).toEqual([]);
    expect((await history(api)).count).toBe(0);
    // The other account's front is untouched too.
    expect((await getFront(other.api)).memberIds).toEqual([]);
  });

  it.each([
    [{}, 'memberId is required'],
    [{ memberId: 'nope' }, 'memberId must be a valid UUID'],
    [{ memberId: UNKNOWN_ID, extra: 1 }, "Unknown field 'extra'"],
    [{ memberId: UNKNOWN_ID, note: 'x'.repeat(1001) }, 'note must NOT have more than 1000 characters'],
    [{ memberId: UNKNOWN_ID, createdBy: 'nope' }, 'createdBy must be a valid UUID'],
  ])('validates the strict body %j', async (body, message) => {
    const user = await server.user();
    const res = await rawRequest(user, 'POST', '/api/v1/front/members', body);
    expect(res.status).toBe(400);
    expect(codeAndMessage(res.body)).toEqual({ code: 'BAD_REQUEST', message });
  });

  it('accepts a 1000-character note', async () => {
    const { api } = await server.user();
    const a = await createMember(api);
    await start(api, a, { note: 'n'.repeat(1000) });
    expect((await getFront(api)).primaryNote).toBe('n'.repeat(1000));
  });

  it('opens exactly one session when the same member is started concurrently; every call is a 204', async () => {
    const { api } = await server.user();
    const a = await createMember(api);
    const results = await Promise.all(
      Array.from({ length: 6 }, () => api.POST('/api/v1/front/members', { body: { memberId: a } })),
    );
    expect(results.map((r) => r.response.status)).toEqual([204, 204, 204, 204, 204, 204]);
    expect((await getFront(api)).memberIds).toEqual([a]);
    expect((await history(api)).count).toBe(1);
    const open = await server.deps.db.knex('front_sessions').where({ member_id: a }).whereNull('ended_at');
    expect(open).toHaveLength(1);
  });

  it('gives concurrently started members distinct places in the order', async () => {
    const { api, userId } = await server.user();
    const ids = await members(api, 5);
    await Promise.all(ids.map((memberId) => api.POST('/api/v1/front/members', { body: { memberId } })));
    const state = await getFront(api);
    expect([...state.memberIds].sort()).toEqual([...ids].sort());
    const positions = (await server.deps.db.knex('front_sessions').where({ user_id: userId }).select('position')).map(
      (r) => r.position,
    );
    expect(new Set(positions).size).toBe(5);
  });
});

describe('trashing and restoring members while their front changes', () => {
  // The history count is kept by triggers (migration 0005); a member trashed or restored while a
  // session of it is being opened must not leave the counter off by one for good.
  it('keeps the history count equal to the live sessions when trash and start race, and restores race with session writes', async () => {
    const { api, userId } = await server.user();
    const ids = await members(api, 12);
    const knex = server.deps.db.knex;
    const liveRows = async () =>
      Number(
        (
          await knex('front_sessions as s')
            .join('members as m', 'm.id', 's.member_id')
            .where('s.user_id', userId)
            .whereNull('s.deleted_at')
            .whereNull('m.deleted_at')
            .count({ n: '*' })
            .first()
        )?.n ?? 0,
      );
    for (const id of ids) {
      const [trashed, started] = await Promise.all([
        api.DELETE('/api/v1/members/{memberId}', { params: { path: { memberId: id } } }),
        api.POST('/api/v1/front/members', { body: { memberId: id } }),
      ]);
      expect(trashed.response.status).toBe(204);
      expect([204, 400]).toContain(started.response.status);
    }
    expect((await history(api)).count).toBe(await liveRows());
    // Restores racing the restore of a trashed session of the same member.
    for (const id of ids) {
      const session = await knex('front_sessions').where({ user_id: userId, member_id: id }).first('id');
      if (session)
        await api.DELETE('/api/v1/front/sessions/{sessionId}', { params: { path: { sessionId: session.id } } });
      const [restored, sessionBack] = await Promise.all([
        api.POST('/api/v1/members/{memberId}/restore', { params: { path: { memberId: id } } }),
        session
          ? api.POST('/api/v1/front/sessions/{sessionId}/restore', { params: { path: { sessionId: session.id } } })
          : Promise.resolve(undefined),
      ]);
      expect(restored.response.status).toBe(204);
      if (sessionBack) expect(sessionBack.response.status).toBe(204);
    }
    expect((await history(api)).count).toBe(await liveRows());
    const counter = await knex('front_session_counts').where({ user_id: userId }).first('live');
    expect(Number(counter?.live ?? 0)).toBe(await liveRows());
  });
});

describe('DELETE /front/members/{memberId}', () => {
  it('ends the session at the current time and takes the member out of the order', async () => {
    const { api } = await server.user();
    const [a, b, c] = await members(api, 3);
    for (const id of [a!, b!, c!]) await start(api, id, { note: `note ${id}` });
    const startedAt = now;
    now += 60_000;
    await stop(api, a!);
    const state = await getFront(api);
    expect(state.memberIds).toEqual([b, c]);
    expect(state.primaryMemberId).toBe(b);
    expect(state.primaryNote).toBe(`note ${b}`);
    const ended = (await history(api)).items.find((i) => i.session.memberId === a)!;
    expect(ended.session.endedAt).toBe(now);
    expect(ended.durationMs).toBe(now - startedAt);
    const row = await server.deps.db.knex('front_sessions').where({ id: ended.session._id }).first();
    expect(row.position).toBeNull();
  });

  it('is a no-op for a member who is not fronting', async () => {
    const { api } = await server.user();
    const [a, b] = await members(api, 2);
    await start(api, a!);
    now += 10;
    await stop(api, a!);
    const before = await history(api);
    now += 10;
    await stop(api, a!);
    await stop(api, b!);
    expect(await history(api)).toEqual(before);
  });

  it('answers 400 for an unknown, foreign or malformed member id', async () => {
    const { api } = await server.user();
    const other = await server.user();
    const foreign = await createMember(other.api);
    await start(other.api, foreign);
    await expectBadRequest(
      api.DELETE('/api/v1/front/members/{memberId}', memberPath(UNKNOWN_ID)),
      'memberId is not one of your members',
    );
    await expectBadRequest(
      api.DELETE('/api/v1/front/members/{memberId}', memberPath(foreign)),
      'memberId is not one of your members',
    );
    await expectBadRequest(
      api.DELETE('/api/v1/front/members/{memberId}', memberPath('nope')),
      'memberId must be a valid UUID',
    );
    expect((await getFront(other.api)).memberIds).toEqual([foreign]);
  });

  it('leaves tier presence alone', async () => {
    const { api } = await server.user();
    const [a, b] = await members(api, 2);
    await start(api, a!);
    await start(api, b!);
    expect(
      (await api.POST('/api/v1/front/tier-presence', { body: { memberId: b!, tierKey: 'coFront' } })).response.status,
    ).toBe(204);
    await stop(api, b!);
    expect((await getFront(api)).tieredPresence).toEqual([
      { memberId: b, tierKey: 'coFront', tierDisplayName: 'Co-front', note: null },
    ]);
  });
});

describe('DELETE /front', () => {
  it('ends every open session, clears the order and all tier presence', async () => {
    const { api } = await server.user();
    const [a, b, c] = await members(api, 3);
    await start(api, a!);
    await start(api, b!);
    await api.POST('/api/v1/front/tier-presence', { body: { memberId: c!, tierKey: 'coConscious' } });
    await api.POST('/api/v1/front/tier-presence', { body: { memberId: b!, tierKey: 'coFront' } });
    now += 1000;
    expect((await api.DELETE('/api/v1/front')).response.status).toBe(204);
    expect(await getFront(api)).toEqual({
      memberIds: [],
      members: [],
      activeSessions: [],
      primaryMemberId: null,
      primaryNote: null,
      tieredPresence: [],
    });
    const items = (await history(api)).items;
    expect(items.map((i) => i.session.endedAt)).toEqual([now, now]);
    // The order starts afresh.
    await start(api, b!);
    await start(api, a!);
    expect((await getFront(api)).memberIds).toEqual([b, a]);
  });

  it('is fine with an empty front and does not touch another account', async () => {
    const { api } = await server.user();
    const other = await server.user();
    const theirs = await createMember(other.api);
    await start(other.api, theirs);
    expect((await api.DELETE('/api/v1/front')).response.status).toBe(204);
    expect((await getFront(other.api)).memberIds).toEqual([theirs]);
  });
});

describe('PATCH /front/order', () => {
  it('reorders members, sessions and the primary; a later start goes last', async () => {
    const { api } = await server.user();
    const [a, b, c, d] = await members(api, 4);
    await start(api, a!, { note: 'A' });
    await start(api, b!, { note: 'B' });
    await start(api, c!);
    const res = await api.PATCH('/api/v1/front/order', { body: { memberIds: [c!, a!, b!] } });
    expect(res.response.status).toBe(204);
    let state = await getFront(api);
    expect(state.memberIds).toEqual([c, a, b]);
    expect(state.members.map((m) => m._id)).toEqual([c, a, b]);
    expect(state.activeSessions.map((s) => s.memberId)).toEqual([c, a, b]);
    expect(state.primaryMemberId).toBe(c);
    expect(state.primaryNote).toBeNull();
    await api.PATCH('/api/v1/front/order', { body: { memberIds: [b!, c!, a!] } });
    state = await getFront(api);
    expect(state.primaryNote).toBe('B');
    await start(api, d!);
    expect((await getFront(api)).memberIds).toEqual([b, c, a, d]);
  });

  it('refuses anything but the exact current front set (missing, extra, repeated, unknown) and keeps the order', async () => {
    const { api } = await server.user();
    const [a, b, c] = await members(api, 3);
    await start(api, a!);
    await start(api, b!);
    const attempts: string[][] = [
      [b!], // missing
      [b!, a!, c!], // extra: not fronting
      [b!, a!, UNKNOWN_ID], // extra: unknown
      [b!, c!], // swapped for a non-fronter
      [],
    ];
    for (const memberIds of attempts) {
      await expectBadRequest(
        api.PATCH('/api/v1/front/order', { body: { memberIds } }),
        /memberIds must list each member fronting now exactly once/,
      );
    }
    await expectBadRequest(
      api.PATCH('/api/v1/front/order', { body: { memberIds: [b!, a!, a!] } }),
      /memberIds must NOT have duplicate items/,
    );
    await expectBadRequest(api.PATCH('/api/v1/front/order', { body: { memberIds: [b!, b!] } }), /duplicate/);
    expect((await getFront(api)).memberIds).toEqual([a, b]);
  });

  it('accepts an empty list for an empty front and validates the strict body', async () => {
    const user = await server.user();
    expect((await user.api.PATCH('/api/v1/front/order', { body: { memberIds: [] } })).response.status).toBe(204);
    expect(await rawRequest(user, 'PATCH', '/api/v1/front/order', { memberIds: [], extra: true })).toEqual({
      status: 400,
      body: {
        code: 'BAD_REQUEST',
        message: "Unknown field 'extra'",
        details: [{ in: 'body', pointer: '/extra', rule: 'additionalProperties', message: "Unknown field 'extra'" }],
      },
    });
    expect((await rawRequest(user, 'PATCH', '/api/v1/front/order', { memberIds: ['nope'] })).status).toBe(400);
    expect((await rawRequest(user, 'PATCH', '/api/v1/front/order', {})).body.message).toBe('memberIds is required');
  });
});

describe('tier presence', () => {
  it('assigns presets and custom tiers with their display names and notes; a second POST replaces', async () => {
    const { api } = await server.user();
    const [a, b, c] = await members(api, 3);
    const tier = await api.POST('/api/v1/front/tiers', { body: { displayName: '  Nearby ' } });
    expect(tier.response.status).toBe(201);
    const tierId = tier.data!.id;

    await start(api, a!);
    now += 1;
    expect(
      (await api.POST('/api/v1/front/tier-presence', { body: { memberId: b!, tierKey: 'coConscious' } })).response
        .status,
    ).toBe(204);
    now += 1;
    expect(
      (await api.POST('/api/v1/front/tier-presence', { body: { memberId: c!, tierKey: tierId, note: 'listening in' } }))
        .response.status,
    ).toBe(204);
    expect((await getFront(api)).tieredPresence).toEqual([
      { memberId: b, tierKey: 'coConscious', tierDisplayName: 'Co-conscious', note: null },
      { memberId: c, tierKey: tierId, tierDisplayName: 'Nearby', note: 'listening in' },
    ]);

    now += 1;
    await api.POST('/api/v1/front/tier-presence', { body: { memberId: b!, tierKey: 'coFront', note: 'sharing' } });
    await api.POST('/api/v1/front/tier-presence', { body: { memberId: c!, tierKey: 'coConscious' } });
    expect((await getFront(api)).tieredPresence).toEqual([
      { memberId: b, tierKey: 'coFront', tierDisplayName: 'Co-front', note: 'sharing' },
      { memberId: c, tierKey: 'coConscious', tierDisplayName: 'Co-conscious', note: null },
    ]);
  });

  it('lets a fronter behind the primary sit in a tier, but not the primary (400)', async () => {
    const { api } = await server.user();
    const [a, b] = await members(api, 2);
    await start(api, a!);
    await start(api, b!);
    await expectBadRequest(
      api.POST('/api/v1/front/tier-presence', { body: { memberId: a!, tierKey: 'coFront' } }),
      'The primary fronter cannot also be in a presence tier',
    );
    expect(
      (await api.POST('/api/v1/front/tier-presence', { body: { memberId: b!, tierKey: 'coFront' } })).response.status,
    ).toBe(204);
    // After a reorder the primary changes, and so does who may be tiered.
    await api.PATCH('/api/v1/front/order', { body: { memberIds: [b!, a!] } });
    expect(
      (await api.POST('/api/v1/front/tier-presence', { body: { memberId: a!, tierKey: 'coFront' } })).response.status,
    ).toBe(204);
    await expectBadRequest(
      api.POST('/api/v1/front/tier-presence', { body: { memberId: b!, tierKey: 'coConscious' } }),
      /primary/,
    );
    // Both rows were written at the same clock time, so compare without relying on their order.
    expect((await getFront(api)).tieredPresence.map((p) => [p.memberId, p.tierKey]).sort()).toEqual(
      [
        [b, 'coFront'],
        [a, 'coFront'],
      ].sort(),
    );
  });

  it("refuses unknown tier keys, another account's custom tier, and unknown, foreign, archived or trashed members", async () => {
    const { api } = await server.user();
    const other = await server.user();
    const [ok, archived, trashed] = await members(api, 3);
    const foreign = await createMember(other.api);
    const theirTier = (await other.api.POST('/api/v1/front/tiers', { body: { displayName: 'Theirs' } })).data!.id;
    await api.PATCH('/api/v1/members/{memberId}', { ...memberPath(archived!), body: { archived: true } });
    await api.DELETE('/api/v1/members/{memberId}', memberPath(trashed!));

    for (const tierKey of ['coHost', 'cofront', theirTier, UNKNOWN_ID]) {
      await expectBadRequest(
        api.POST('/api/v1/front/tier-presence', { body: { memberId: ok!, tierKey } }),
        /^Unknown tierKey/,
      );
    }
    for (const memberId of [UNKNOWN_ID, foreign, trashed!]) {
      await expectBadRequest(
        api.POST('/api/v1/front/tier-presence', { body: { memberId, tierKey: 'coFront' } }),
        'memberId is not one of your members',
      );
    }
    await expectBadRequest(
      api.POST('/api/v1/front/tier-presence', { body: { memberId: archived!, tierKey: 'coFront' } }),
      /archived/,
    );
    expect((await getFront(api)).tieredPresence).toEqual([]);
  });

  it.each([
    [{ memberId: UNKNOWN_ID }, 'tierKey is required'],
    [{ tierKey: 'coFront' }, 'memberId is required'],
    [{ memberId: UNKNOWN_ID, tierKey: '' }, 'tierKey must NOT have fewer than 1 characters'],
    [
      { memberId: UNKNOWN_ID, tierKey: 'coFront', note: 'x'.repeat(1001) },
      'note must NOT have more than 1000 characters',
    ],
    [{ memberId: UNKNOWN_ID, tierKey: 'coFront', tier: 'x' }, "Unknown field 'tier'"],
  ])('validates the strict body %j', async (body, message) => {
    const user = await server.user();
    const res = await rawRequest(user, 'POST', '/api/v1/front/tier-presence', body);
    expect(res.status).toBe(400);
    expect(codeAndMessage(res.body)).toEqual({ code: 'BAD_REQUEST', message });
  });

  it('DELETE /front/tier-presence/{memberId} removes it, is a no-op without one, and 400 for a malformed id', async () => {
    const { api } = await server.user();
    const [a, b] = await members(api, 2);
    await api.POST('/api/v1/front/tier-presence', { body: { memberId: a!, tierKey: 'coFront' } });
    await api.POST('/api/v1/front/tier-presence', { body: { memberId: b!, tierKey: 'coFront' } });
    expect((await api.DELETE('/api/v1/front/tier-presence/{memberId}', memberPath(a!))).response.status).toBe(204);
    expect((await getFront(api)).tieredPresence.map((p) => p.memberId)).toEqual([b]);
    expect((await api.DELETE('/api/v1/front/tier-presence/{memberId}', memberPath(a!))).response.status).toBe(204);
    expect((await api.DELETE('/api/v1/front/tier-presence/{memberId}', memberPath(UNKNOWN_ID))).response.status).toBe(
      204,
    );
    await expectBadRequest(
      api.DELETE('/api/v1/front/tier-presence/{memberId}', memberPath('nope')),
      'memberId must be a valid UUID',
    );
    expect((await getFront(api)).tieredPresence.map((p) => p.memberId)).toEqual([b]);
  });
});

describe('custom tiers', () => {
  it('lists presets then custom tiers oldest first; deleting one removes its presence rows', async () => {
    const { api } = await server.user();
    const [a, b] = await members(api, 2);
    now += 1;
    const first = (await api.POST('/api/v1/front/tiers', { body: { displayName: 'Nearby' } })).data!.id;
    now += 1;
    const second = (await api.POST('/api/v1/front/tiers', { body: { displayName: 'Asleep' } })).data!.id;
    const list = await api.GET('/api/v1/front/tiers');
    expect(list.data).toEqual([
      { key: 'coFront', displayName: 'Co-front', kind: 'preset' },
      { key: 'coConscious', displayName: 'Co-conscious', kind: 'preset' },
      { key: first, displayName: 'Nearby', kind: 'custom' },
      { key: second, displayName: 'Asleep', kind: 'custom' },
    ]);
    await api.POST('/api/v1/front/tier-presence', { body: { memberId: a!, tierKey: first } });
    await api.POST('/api/v1/front/tier-presence', { body: { memberId: b!, tierKey: second } });
    expect(
      (await api.DELETE('/api/v1/front/tiers/{tierId}', { params: { path: { tierId: first } } })).response.status,
    ).toBe(204);
    expect((await getFront(api)).tieredPresence.map((p) => p.tierKey)).toEqual([second]);
    expect((await api.GET('/api/v1/front/tiers')).data!.map((t) => t.key)).toEqual(['coFront', 'coConscious', second]);
    await expectBadRequest(
      api.POST('/api/v1/front/tier-presence', { body: { memberId: a!, tierKey: first } }),
      /^Unknown tierKey/,
    );
  });

  it('deleting a tier by its id in upper case removes its presence rows too', async () => {
    const { api } = await server.user();
    const [a] = await members(api, 1);
    const tier = (await api.POST('/api/v1/front/tiers', { body: { displayName: 'Nearby' } })).data!.id;
    await api.POST('/api/v1/front/tier-presence', { body: { memberId: a!, tierKey: tier } });
    expect((await getFront(api)).tieredPresence.map((p) => p.tierKey)).toEqual([tier]);
    expect(
      (await api.DELETE('/api/v1/front/tiers/{tierId}', { params: { path: { tierId: tier.toUpperCase() } } })).response
        .status,
    ).toBe(204);
    expect((await getFront(api)).tieredPresence).toEqual([]);
  });

  it('answers 404 for an unknown or foreign tier, and another account never sees mine', async () => {
    const { api } = await server.user();
    const other = await server.user();
    const mine = (await api.POST('/api/v1/front/tiers', { body: { displayName: 'Mine' } })).data!.id;
    const del = await other.api.DELETE('/api/v1/front/tiers/{tierId}', { params: { path: { tierId: mine } } });
    expect(del.response.status).toBe(404);
    expect(del.error?.code).toBe('NOT_FOUND');
    expect(
      (await api.DELETE('/api/v1/front/tiers/{tierId}', { params: { path: { tierId: UNKNOWN_ID } } })).response.status,
    ).toBe(404);
    expect((await other.api.GET('/api/v1/front/tiers')).data!.map((t) => t.kind)).toEqual(['preset', 'preset']);
    expect((await api.GET('/api/v1/front/tiers')).data!.map((t) => t.key)).toContain(mine);
  });

  it.each([
    [{}, 'displayName is required'],
    [{ displayName: '' }, 'displayName must NOT have fewer than 1 characters'],
    [{ displayName: '   ' }, 'displayName must match pattern "\\S"'],
    [{ displayName: 'x'.repeat(41) }, 'displayName must NOT have more than 40 characters'],
    [{ displayName: 'ok', key: 'x' }, "Unknown field 'key'"],
  ])('validates the create body %j', async (body, message) => {
    const user = await server.user();
    const res = await rawRequest(user, 'POST', '/api/v1/front/tiers', body);
    expect(res.status).toBe(400);
    expect(codeAndMessage(res.body)).toEqual({ code: 'BAD_REQUEST', message });
  });

  it('accepts a 40-character name and caps an account at 50 custom tiers', async () => {
    const { api } = await server.user();
    expect((await api.POST('/api/v1/front/tiers', { body: { displayName: 'x'.repeat(40) } })).response.status).toBe(
      201,
    );
    for (let i = 1; i < 50; i++)
      expect((await api.POST('/api/v1/front/tiers', { body: { displayName: `T${i}` } })).response.status).toBe(201);
    await expectBadRequest(
      api.POST('/api/v1/front/tiers', { body: { displayName: 'one too many' } }),
      'An account can have at most 50 custom tiers',
    );
  });
});

describe('GET /front/history', () => {
  it('lists newest first with the member summary, durationMs (null while open) and notes', async () => {
    const { api, userId } = await server.user();
    const a = await createMember(api, 'Robin', { displayName: 'Robin 🌿' });
    const b = await createMember(api, 'Sage');
    const t0 = now;
    const s1 = await pastSession(api, a, t0 - 5000, t0 - 3000);
    now = t0;
    await start(api, b, { note: 'on shift' });
    const s2 = await openSessionId(api, b);
    await api.PATCH('/api/v1/members/{memberId}', { ...memberPath(a), body: { archived: true } });

    const page = await history(api);
    expect(page).toEqual({
      items: [
        {
          session: { _id: s2, userId, memberId: b, startedAt: t0, endedAt: null, note: 'on shift' },
          member: { id: b, name: 'Sage', displayName: '', archived: false, avatarUrl: null },
          durationMs: null,
        },
        {
          session: { _id: s1, userId, memberId: a, startedAt: t0 - 5000, endedAt: t0 - 3000 },
          member: { id: a, name: 'Robin', displayName: 'Robin 🌿', archived: true, avatarUrl: null },
          durationMs: 2000,
        },
      ],
      count: 2,
      nextCursor: null,
    });
  });

  it('orders equal start times by id, descending', async () => {
    const { api } = await server.user();
    const ids = await members(api, 4);
    for (const id of ids) await start(api, id); // all at the same instant
    const items = (await history(api)).items;
    const sessionIds = items.map((i) => i.session._id);
    expect(sessionIds).toEqual([...sessionIds].sort().reverse());
    expect(new Set(items.map((i) => i.session.startedAt)).size).toBe(1);
  });

  it('defaults to 20 per page and bounds limit to 1–100', async () => {
    const { api } = await server.user();
    const a = await createMember(api);
    for (let i = 0; i < 25; i++) {
      await start(api, a);
      now += 1;
      await stop(api, a);
    }
    const page = await history(api);
    expect(page.items).toHaveLength(20);
    expect(page.count).toBe(25);
    expect(page.nextCursor).not.toBeNull();
    expect((await history(api, { limit: 1 })).items).toHaveLength(1);
    expect((await history(api, { limit: 100 })).items).toHaveLength(25);
    await expectBadRequest(api.GET('/api/v1/front/history', { params: { query: { limit: 0 } } }), 'limit must be >= 1');
    await expectBadRequest(
      api.GET('/api/v1/front/history', { params: { query: { limit: 101 } } }),
      'limit must be <= 100',
    );
    const res = await server.fetch('/api/v1/front/history?limit=abc', {
      headers: jsonHeaders((await server.user()).apiKey),
    });
    expect(res.status).toBe(400);
  });

  it('selects the sessions overlapping [startTime, endTime], edges included; count follows the filter', async () => {
    const { api } = await server.user();
    const [a, b] = await members(api, 2);
    const base = now;
    const early = await pastSession(api, a!, base + 100, base + 200);
    const middle = await pastSession(api, b!, base + 300, base + 400);
    now = base + 500;
    await start(api, a!);
    const open = await openSessionId(api, a!);
    now = base + 1000;

    const ids = async (query: HistoryQuery) => {
      const page = await history(api, query);
      return { ids: page.items.map((i) => i.session._id), count: page.count };
    };
    expect(await ids({})).toEqual({ ids: [open, middle, early], count: 3 });
    expect(await ids({ startTime: base + 200 })).toEqual({ ids: [open, middle, early], count: 3 }); // ends exactly at startTime
    expect(await ids({ startTime: base + 201 })).toEqual({ ids: [open, middle], count: 2 });
    expect(await ids({ endTime: base + 300 })).toEqual({ ids: [middle, early], count: 2 }); // starts exactly at endTime
    expect(await ids({ endTime: base + 299 })).toEqual({ ids: [early], count: 1 });
    expect(await ids({ startTime: base + 250, endTime: base + 350 })).toEqual({ ids: [middle], count: 1 });
    expect(await ids({ startTime: base + 410, endTime: base + 490 })).toEqual({ ids: [], count: 0 });
    expect(await ids({ startTime: base + 900, endTime: base + 950 })).toEqual({ ids: [open], count: 1 }); // open sessions run on
    expect(await ids({ endTime: base + 99 })).toEqual({ ids: [], count: 0 });
    await expectBadRequest(
      api.GET('/api/v1/front/history', { params: { query: { startTime: base + 2, endTime: base + 1 } } }),
      'startTime must be <= endTime',
    );
  });

  it('needs cursorStartedAt and cursorId together', async () => {
    const { api } = await server.user();
    const message = 'cursorStartedAt and cursorId must be sent together (both from nextCursor) or not at all';
    await expectBadRequest(api.GET('/api/v1/front/history', { params: { query: { cursorStartedAt: now } } }), message);
    await expectBadRequest(api.GET('/api/v1/front/history', { params: { query: { cursorId: UNKNOWN_ID } } }), message);
    await expectBadRequest(
      api.GET('/api/v1/front/history', { params: { query: { cursorStartedAt: now, cursorId: 'nope' } } }),
      'cursorId must be a valid UUID',
    );
    expect((await history(api, { cursorStartedAt: now, cursorId: UNKNOWN_ID })).items).toEqual([]);
  });

  it('walks every session once, in order, across pages with many equal start times; count is the total', async () => {
    const { api } = await server.user();
    const ids = await members(api, 3);
    const base = now;
    // 3 members × 12 zero-length sessions at one instant, plus 9 at distinct earlier instants.
    now = base;
    for (let round = 0; round < 12; round++) {
      for (const id of ids) {
        await start(api, id);
        await stop(api, id);
      }
    }
    for (let i = 1; i <= 9; i++) await pastSession(api, ids[i % 3]!, base - i * 100, base - i * 100 + 50);
    now = base + 10;

    const all = await history(api, { limit: 100 });
    expect(all.count).toBe(45);
    expect(all.items).toHaveLength(45);
    const expected = [...all.items].sort(
      (x, y) => y.session.startedAt - x.session.startedAt || (y.session._id > x.session._id ? 1 : -1),
    );
    expect(all.items.map((i) => i.session._id)).toEqual(expected.map((i) => i.session._id));

    for (const limit of [1, 7, 12, 45]) {
      const walked: HistoryItem[] = [];
      let cursor: { startedAt: number; id: string } | null = null;
      let pages = 0;
      do {
        const page: components['schemas']['FrontHistoryPage'] = await history(api, {
          limit,
          ...(cursor ? { cursorStartedAt: cursor.startedAt, cursorId: cursor.id } : {}),
        });
        expect(page.count).toBe(45);
        expect(page.items.length).toBeLessThanOrEqual(limit);
        walked.push(...page.items);
        cursor = page.nextCursor;
        if (cursor)
          expect(cursor).toEqual({
            startedAt: page.items.at(-1)!.session.startedAt,
            id: page.items.at(-1)!.session._id,
          });
        pages++;
      } while (cursor && pages < 100);
      expect(
        walked.map((i) => i.session._id),
        `limit ${limit}`,
      ).toEqual(all.items.map((i) => i.session._id));
      expect(pages).toBe(Math.ceil(45 / limit));
    }
  });

  it('keeps the time filters while paging, and count stays the filtered total', async () => {
    const { api } = await server.user();
    const a = await createMember(api);
    const base = now;
    for (let i = 0; i < 10; i++) await pastSession(api, a, base + i * 100, base + i * 100 + 50);
    now = base + 5000;
    const query = { startTime: base + 200, endTime: base + 700 }; // sessions 2..7
    const first = await history(api, { ...query, limit: 4 });
    expect(first.count).toBe(6);
    expect(first.items.map((i) => i.session.startedAt)).toEqual([700, 600, 500, 400].map((d) => base + d));
    const second = await history(api, {
      ...query,
      limit: 4,
      cursorStartedAt: first.nextCursor!.startedAt,
      cursorId: first.nextCursor!.id,
    });
    expect(second.count).toBe(6);
    expect(second.items.map((i) => i.session.startedAt)).toEqual([300, 200].map((d) => base + d));
    expect(second.nextCursor).toBeNull();
  });

  it('has no nextCursor when the last page is exactly full', async () => {
    const { api } = await server.user();
    const ids = await members(api, 3);
    for (const id of ids) await start(api, id);
    const page = await history(api, { limit: 3 });
    expect(page.items).toHaveLength(3);
    expect(page.nextCursor).toBeNull();
  });

  it('leaves out sessions in the trash and sessions of trashed members, in items and in count', async () => {
    const { api } = await server.user();
    const [a, b, c] = await members(api, 3);
    const base = now;
    const s1 = await pastSession(api, a!, base + 1, base + 2);
    const s2 = await pastSession(api, b!, base + 3, base + 4);
    const s3 = await pastSession(api, c!, base + 5, base + 6);
    now = base + 100;
    expect((await api.DELETE('/api/v1/front/sessions/{sessionId}', sessionPath(s2))).response.status).toBe(204);
    expect((await api.DELETE('/api/v1/members/{memberId}', memberPath(c!))).response.status).toBe(204);
    let page = await history(api);
    expect(page.items.map((i) => i.session._id)).toEqual([s1]);
    expect(page.count).toBe(1);
    await api.POST('/api/v1/members/{memberId}/restore', memberPath(c!));
    page = await history(api);
    expect(page.items.map((i) => i.session._id)).toEqual([s3, s1]);
    expect(page.count).toBe(2);
  });

  it('reads a page with a fixed number of queries, however many rows and members it holds', async () => {
    const { api } = await server.user();
    const ids = await members(api, 12);
    for (const id of ids) {
      await start(api, id);
      now += 1;
      await stop(api, id);
      await start(api, id);
    }
    const knex = server.deps.db.knex;
    const queriesFor = async (limit: number): Promise<number> => {
      await history(api, { limit }); // warm the key cache
      let n = 0;
      const count = (q: { sql: string }) => {
        if (FRONT_DATA_SQL.test(q.sql)) n++;
      };
      knex.on('query', count);
      try {
        const page = await history(api, { limit });
        expect(page.items).toHaveLength(limit);
      } finally {
        knex.off('query', count);
      }
      return n;
    };
    expect(await queriesFor(1)).toBe(1); // one statement: the page, its members and the count
    expect(await queriesFor(24)).toBe(1);
  });

  it('a page 4,000 sessions deep reads the same rows of the same index as the first page (EXPLAIN ANALYZE)', async () => {
    const { api, userId } = await server.user();
    const other = await server.user();
    const memberId = await createMember(api);
    const theirs = await createMember(other.api);
    const knex = server.deps.db.knex;
    // 5,000 closed sessions a minute apart for the caller and as many for another account, straight into the table.
    const seed = (member: string) =>
      knex.raw(
        `insert into front_sessions (id, user_id, member_id, side_system_id, started_at, ended_at, created_at, updated_at)
         select gen_random_uuid(), m.user_id, m.id, m.side_system_id, ?::bigint - g * 60000, ?::bigint - g * 60000 + 30000, ?::bigint, ?::bigint
         from members m, generate_series(1, 5000) g where m.id = ?`,
        [now, now, now, now, member],
      );
    await seed(memberId);
    await seed(theirs);
    // 300 members of the other account in the trash: a page must not read them (it probes its own sessions' members).
    await knex.raw(
      `insert into members (id, user_id, side_system_id, name, created_at, updated_at, deleted_at)
       select gen_random_uuid(), m.user_id, m.side_system_id, 'Trashed ' || g, ?::bigint, ?::bigint, ?::bigint from members m, generate_series(1, 300) g where m.id = ?`,
      [now, now, now, theirs],
    );
    // Statistics as a running server has them: the embedded maintenance job (PGlite has no
    // autovacuum; without statistics the planner guesses and sorts), or PostgreSQL's autovacuum,
    // which a test cannot wait for.
    if (server.runtime.maintenance) await server.runtime.maintenance.runOnce();
    else await knex.raw('analyze front_sessions, members');

    const limit = 50;
    const plansOf = async (query: HistoryQuery) => {
      await history(api, query); // warm the key cache so the captured statement is the page itself
      const statements = await captureStatements(knex, FRONT_DATA_SQL, async () => {
        expect((await history(api, query)).items).toHaveLength(limit);
      });
      expect(statements, 'one statement for the page').toHaveLength(1);
      // The plan for these values, and the generic plan a prepared statement settles on.
      return [
        await explain(knex, statements[0]!, { analyze: true }),
        await explain(knex, statements[0]!, { analyze: true, generic: true }),
      ];
    };
    const historyScan = (root: PlanNode) => {
      const all = planNodes(root);
      // Sorting the page itself is fine; sorting more than a page means the index was not walked in order.
      for (const sort of all.filter((n) => n['Node Type'] === 'Sort'))
        expect(sort['Actual Rows'], JSON.stringify(root)).toBeLessThanOrEqual(limit + 1);
      // No table is read whole. The planner may rightly scan a table of a few rows: the dozen
      // members here for the anti-join, and the live-session counter (one row per account: two here).
      const tiny = (n: PlanNode) => (n['Actual Rows'] ?? 0) + (n['Rows Removed by Filter'] ?? 0) <= 100;
      const seq = all.filter(
        (n) =>
          n['Node Type'] === 'Seq Scan' &&
          !(['members', 'front_session_counts'].includes(String(n['Relation Name'])) && tiny(n)),
      );
      expect(seq, JSON.stringify(root)).toEqual([]);
      const scan = all.find((n) => n['Index Name'] === 'front_sessions_history');
      expect(scan, JSON.stringify(root)).toBeDefined();
      // Members are probed per session of the page (its own and whether it is trashed), never read wholesale.
      const membersRead = all
        .filter((n) => n['Relation Name'] === 'members')
        .reduce((sum, n) => sum + (n['Actual Rows'] ?? 0) * (n['Actual Loops'] ?? 1), 0);
      expect(membersRead, JSON.stringify(root)).toBeLessThanOrEqual(2 * (limit + 1));
      return scan!;
    };

    const cursorRow = await knex('front_sessions')
      .where({ user_id: userId })
      .orderBy([
        { column: 'started_at', order: 'desc' },
        { column: 'id', order: 'desc' },
      ])
      .offset(3999)
      .first('started_at', 'id');
    for (const query of [{ limit }, { limit, cursorStartedAt: Number(cursorRow.started_at), cursorId: cursorRow.id }]) {
      for (const plan of await plansOf(query)) {
        // The page reads limit + 1 rows (one more tells whether there is a next page), however deep it is.
        expect(historyScan(plan)['Actual Rows']).toBe(limit + 1);
      }
    }
  });

  it("shows only the caller's sessions", async () => {
    const { api } = await server.user();
    const other = await server.user();
    const theirs = await createMember(other.api);
    await start(other.api, theirs);
    expect(await history(api)).toEqual({ items: [], count: 0, nextCursor: null });
  });
});

describe('PATCH /front/sessions/{sessionId}', () => {
  it('corrects times and the note; note null removes it; history shows the change', async () => {
    const { api, userId } = await server.user();
    const a = await createMember(api);
    const base = now;
    const id = await pastSession(api, a, base - 1000, base - 500);
    const res = await api.PATCH('/api/v1/front/sessions/{sessionId}', {
      ...sessionPath(id),
      body: { startedAt: base - 2000, endedAt: base - 100, note: 'fixed' },
    });
    expect(res.response.status).toBe(200);
    expect(res.data).toEqual({
      _id: id,
      userId,
      memberId: a,
      startedAt: base - 2000,
      endedAt: base - 100,
      note: 'fixed',
    });
    const item = (await history(api)).items[0]!;
    expect(item.session).toEqual(res.data);
    expect(item.durationMs).toBe(1900);
    const cleared = await api.PATCH('/api/v1/front/sessions/{sessionId}', { ...sessionPath(id), body: { note: null } });
    expect(cleared.data).toEqual({ _id: id, userId, memberId: a, startedAt: base - 2000, endedAt: base - 100 });
  });

  it('refuses startedAt after endedAt, times in the future, clearing endedAt and empty or unknown bodies', async () => {
    const user = await server.user();
    const { api } = user;
    const a = await createMember(api);
    const base = now;
    const id = await pastSession(api, a, base - 1000, base - 500);
    await expectBadRequest(
      api.PATCH('/api/v1/front/sessions/{sessionId}', { ...sessionPath(id), body: { startedAt: base - 400 } }),
      'startedAt must be <= endedAt',
    );
    await expectBadRequest(
      api.PATCH('/api/v1/front/sessions/{sessionId}', { ...sessionPath(id), body: { endedAt: base - 1001 } }),
      'startedAt must be <= endedAt',
    );
    await expectBadRequest(
      api.PATCH('/api/v1/front/sessions/{sessionId}', { ...sessionPath(id), body: { endedAt: now + 1 } }),
      'endedAt cannot be in the future',
    );
    await expectBadRequest(
      api.PATCH('/api/v1/front/sessions/{sessionId}', {
        ...sessionPath(id),
        body: { startedAt: now + 1, endedAt: now + 2 },
      }),
      'startedAt cannot be in the future',
    );
    const path = `/api/v1/front/sessions/${id}`;
    expect((await rawRequest(user, 'PATCH', path, { endedAt: null })).status).toBe(400);
    const empty = 'Request body must contain at least one field';
    expect(await rawRequest(user, 'PATCH', path, {})).toEqual({
      status: 400,
      body: {
        code: 'BAD_REQUEST',
        message: empty,
        details: [{ in: 'body', pointer: '', rule: 'minProperties', message: empty }],
      },
    });
    const unknown = "Unknown field 'memberId'";
    expect(await rawRequest(user, 'PATCH', path, { memberId: a })).toEqual({
      status: 400,
      body: {
        code: 'BAD_REQUEST',
        message: unknown,
        details: [{ in: 'body', pointer: '/memberId', rule: 'additionalProperties', message: unknown }],
      },
    });
    expect((await rawRequest(user, 'PATCH', path, { note: 'x'.repeat(1001) })).status).toBe(400);
    // Nothing changed, and an instant session (start = end = now) is fine.
    expect((await history(api)).items[0]!.session).toMatchObject({ startedAt: base - 1000, endedAt: base - 500 });
    expect(
      (
        await api.PATCH('/api/v1/front/sessions/{sessionId}', {
          ...sessionPath(id),
          body: { startedAt: now, endedAt: now },
        })
      ).response.status,
    ).toBe(200);
  });

  it('refuses an overlap with another session of the same member; touching ends and other members are fine', async () => {
    const { api } = await server.user();
    const [a, b] = await members(api, 2);
    const base = now;
    const first = await pastSession(api, a!, base - 3000, base - 2000);
    const second = await pastSession(api, a!, base - 1000, base - 500);
    await pastSession(api, b!, base - 3000, base - 100);
    const overlap = 'The session would overlap another front session of the same member';
    await expectBadRequest(
      api.PATCH('/api/v1/front/sessions/{sessionId}', { ...sessionPath(second), body: { startedAt: base - 2001 } }),
      overlap,
    );
    await expectBadRequest(
      api.PATCH('/api/v1/front/sessions/{sessionId}', { ...sessionPath(first), body: { endedAt: base - 999 } }),
      overlap,
    );
    await expectBadRequest(
      api.PATCH('/api/v1/front/sessions/{sessionId}', {
        ...sessionPath(first),
        body: { startedAt: base - 800, endedAt: base - 700 },
      }),
      overlap,
    ); // inside
    await expectBadRequest(
      api.PATCH('/api/v1/front/sessions/{sessionId}', {
        ...sessionPath(first),
        body: { startedAt: base - 3000, endedAt: base - 100 },
      }),
      overlap,
    ); // around
    expect(
      (
        await api.PATCH('/api/v1/front/sessions/{sessionId}', {
          ...sessionPath(second),
          body: { startedAt: base - 2000 },
        })
      ).response.status,
    ).toBe(200);
    expect(
      (await api.PATCH('/api/v1/front/sessions/{sessionId}', { ...sessionPath(first), body: { endedAt: base - 2000 } }))
        .response.status,
    ).toBe(200);
    // An open session of the member runs on forever: nothing may end after it started.
    now = base;
    await start(api, a!);
    const open = await openSessionId(api, a!);
    await expectBadRequest(
      api.PATCH('/api/v1/front/sessions/{sessionId}', { ...sessionPath(open), body: { startedAt: base - 501 } }),
      overlap,
    );
    expect(
      (await api.PATCH('/api/v1/front/sessions/{sessionId}', { ...sessionPath(open), body: { startedAt: base - 500 } }))
        .response.status,
    ).toBe(200);
    // Trashed sessions do not count.
    await api.DELETE('/api/v1/front/sessions/{sessionId}', sessionPath(second));
    expect(
      (
        await api.PATCH('/api/v1/front/sessions/{sessionId}', {
          ...sessionPath(open),
          body: { startedAt: base - 1500 },
        })
      ).response.status,
    ).toBe(200);
  });

  it('ends an open session given an endedAt, and the member leaves the front', async () => {
    const { api } = await server.user();
    const [a, b, c] = await members(api, 3);
    for (const id of [a!, b!, c!]) await start(api, id);
    const startedAt = now;
    const id = await openSessionId(api, a!);
    now += 1000;
    const res = await api.PATCH('/api/v1/front/sessions/{sessionId}', {
      ...sessionPath(id),
      body: { endedAt: now - 400 },
    });
    expect(res.data).toMatchObject({ startedAt, endedAt: now - 400 });
    const state = await getFront(api);
    expect(state.memberIds).toEqual([b, c]);
    expect(state.primaryMemberId).toBe(b);
    // The member can front again from then on.
    await start(api, a!);
    expect((await getFront(api)).memberIds).toEqual([b, c, a]);
  });

  it('keeps an open session open when only its start or note changes', async () => {
    const { api } = await server.user();
    const [a, b] = await members(api, 2);
    await start(api, a!);
    await start(api, b!);
    const id = await openSessionId(api, a!);
    const res = await api.PATCH('/api/v1/front/sessions/{sessionId}', {
      ...sessionPath(id),
      body: { startedAt: now - 60_000, note: 'earlier' },
    });
    expect(res.data).toMatchObject({ startedAt: now - 60_000, endedAt: null, note: 'earlier' });
    const state = await getFront(api);
    expect(state.memberIds).toEqual([a, b]);
    expect(state.primaryNote).toBe('earlier');
  });

  it('answers 404 for unknown or foreign sessions and 400 for a trashed one', async () => {
    const { api } = await server.user();
    const other = await server.user();
    const theirs = await createMember(other.api);
    await start(other.api, theirs);
    const theirSession = await openSessionId(other.api, theirs);
    expect(
      (await api.PATCH('/api/v1/front/sessions/{sessionId}', { ...sessionPath(theirSession), body: { note: 'x' } }))
        .response.status,
    ).toBe(404);
    expect(
      (await api.PATCH('/api/v1/front/sessions/{sessionId}', { ...sessionPath(UNKNOWN_ID), body: { note: 'x' } }))
        .response.status,
    ).toBe(404);
    await expectBadRequest(
      api.PATCH('/api/v1/front/sessions/{sessionId}', { ...sessionPath('nope'), body: { note: 'x' } }),
      'sessionId must be a valid UUID',
    );
    const a = await createMember(api);
    const id = await pastSession(api, a, now - 100, now - 50);
    await api.DELETE('/api/v1/front/sessions/{sessionId}', sessionPath(id));
    await expectBadRequest(
      api.PATCH('/api/v1/front/sessions/{sessionId}', { ...sessionPath(id), body: { note: 'x' } }),
      'Front session is in the trash; restore it first',
    );
    expect((await history(other.api)).items[0]!.session).not.toHaveProperty('note');
  });
});

describe('front session trash', () => {
  it('moves a closed session to the trash and restores it; 400 when already in or not in the trash', async () => {
    const { api } = await server.user();
    const a = await createMember(api);
    const id = await pastSession(api, a, now - 100, now - 50);
    expect((await api.DELETE('/api/v1/front/sessions/{sessionId}', sessionPath(id))).response.status).toBe(204);
    const row = await server.deps.db.knex('front_sessions').where({ id }).first();
    expect(row.deleted_at).toBe(now);
    expect((await history(api)).count).toBe(0);
    await expectBadRequest(
      api.DELETE('/api/v1/front/sessions/{sessionId}', sessionPath(id)),
      'Front session is already in the trash',
    );
    expect((await api.POST('/api/v1/front/sessions/{sessionId}/restore', sessionPath(id))).response.status).toBe(204);
    expect((await history(api)).items.map((i) => i.session._id)).toEqual([id]);
    await expectBadRequest(
      api.POST('/api/v1/front/sessions/{sessionId}/restore', sessionPath(id)),
      'Front session is not in the trash',
    );
  });

  it('takes an open session out of the front; restoring puts the member back, last', async () => {
    const { api } = await server.user();
    const [a, b] = await members(api, 2);
    await start(api, a!, { note: 'A' });
    await start(api, b!);
    const id = await openSessionId(api, a!);
    await api.DELETE('/api/v1/front/sessions/{sessionId}', sessionPath(id));
    let state = await getFront(api);
    expect(state.memberIds).toEqual([b]);
    expect(state.primaryMemberId).toBe(b);
    expect((await history(api)).count).toBe(1);
    expect((await api.POST('/api/v1/front/sessions/{sessionId}/restore', sessionPath(id))).response.status).toBe(204);
    state = await getFront(api);
    expect(state.memberIds).toEqual([b, a]);
    expect(state.activeSessions[1]).toMatchObject({ _id: id, note: 'A' });
  });

  it('refuses to restore an open session of a member who is fronting again', async () => {
    const { api } = await server.user();
    const a = await createMember(api);
    await start(api, a);
    const old = await openSessionId(api, a);
    await api.DELETE('/api/v1/front/sessions/{sessionId}', sessionPath(old));
    now += 10;
    await start(api, a);
    await expectBadRequest(
      api.POST('/api/v1/front/sessions/{sessionId}/restore', sessionPath(old)),
      'The member is fronting again; end that session before restoring this open one',
    );
    expect((await getFront(api)).activeSessions.map((s) => s._id)).not.toContain(old);
  });

  it('refuses to restore a session that would overlap one edited into its time meanwhile', async () => {
    const { api } = await server.user();
    const a = await createMember(api);
    const base = now;
    const trashed = await pastSession(api, a, base - 1000, base - 800);
    const other = await pastSession(api, a, base - 500, base - 400);
    await api.DELETE('/api/v1/front/sessions/{sessionId}', sessionPath(trashed));
    await api.PATCH('/api/v1/front/sessions/{sessionId}', { ...sessionPath(other), body: { startedAt: base - 900 } });
    await expectBadRequest(
      api.POST('/api/v1/front/sessions/{sessionId}/restore', sessionPath(trashed)),
      'The session would overlap another front session of the same member',
    );
  });

  it('answers 404 for unknown and foreign sessions', async () => {
    const { api } = await server.user();
    const other = await server.user();
    const theirs = await createMember(other.api);
    await start(other.api, theirs);
    const theirSession = await openSessionId(other.api, theirs);
    for (const id of [theirSession, UNKNOWN_ID]) {
      expect((await api.DELETE('/api/v1/front/sessions/{sessionId}', sessionPath(id))).response.status).toBe(404);
      expect((await api.POST('/api/v1/front/sessions/{sessionId}/restore', sessionPath(id))).response.status).toBe(404);
    }
    expect((await getFront(other.api)).memberIds).toEqual([theirs]);
  });
});

describe('endMemberFront', () => {
  it("ends the member's open session and removes its tier presence, in the caller's transaction", async () => {
    const { api, userId } = await server.user();
    const [a, b, c] = await members(api, 3);
    await start(api, a!);
    await start(api, b!);
    await api.POST('/api/v1/front/tier-presence', { body: { memberId: b!, tierKey: 'coFront' } });
    await api.POST('/api/v1/front/tier-presence', { body: { memberId: c!, tierKey: 'coConscious' } });
    now += 500;
    await server.deps.db.knex.transaction(async (trx) => {
      await endMemberFront(trx, userId, b!, now);
    });
    const state = await getFront(api);
    expect(state.memberIds).toEqual([a]);
    expect(state.tieredPresence.map((p) => p.memberId)).toEqual([c]);
    expect((await history(api)).items.find((i) => i.session.memberId === b)!.session.endedAt).toBe(now);
    // A rolled-back caller leaves everything as it was.
    await expect(
      server.deps.db.knex.transaction(async (trx) => {
        await endMemberFront(trx, userId, a!, now);
        throw new Error('rollback');
      }),
    ).rejects.toThrow('rollback');
    expect((await getFront(api)).memberIds).toEqual([a]);
  });
});

describe('GET /front', () => {
  it('reads the front with a fixed number of queries, however many members front', async () => {
    const { api } = await server.user();
    const ids = await members(api, 10);
    const knex = server.deps.db.knex;
    const queries = async (): Promise<number> => {
      await getFront(api);
      let n = 0;
      const count = (q: { sql: string }) => {
        if (FRONT_DATA_SQL.test(q.sql)) n++;
      };
      knex.on('query', count);
      try {
        await getFront(api);
      } finally {
        knex.off('query', count);
      }
      return n;
    };
    await start(api, ids[0]!);
    const one = await queries();
    expect(one).toBe(1); // one statement: open sessions with their members, and tier presence
    for (const id of ids.slice(1)) {
      await start(api, id);
      await api.POST('/api/v1/front/tier-presence', { body: { memberId: id, tierKey: 'coFront' } });
    }
    expect(await queries()).toBe(one);
  });

  it('costs one data statement once the key cache is warm, and that statement stays on indexes (EXPLAIN ANALYZE)', async () => {
    const { api } = await server.user();
    const other = await server.user();
    const knex = server.deps.db.knex;
    const [a, b, c] = await members(api, 3);
    const tier = (await api.POST('/api/v1/front/tiers', { body: { displayName: 'Nearby' } })).data!.id;
    await start(api, a!, { note: 'first' });
    await start(api, b!);
    await api.POST('/api/v1/front/tier-presence', { body: { memberId: b!, tierKey: 'coConscious' } });
    now += 1000; // presence is listed in the order it was set
    await api.POST('/api/v1/front/tier-presence', { body: { memberId: c!, tierKey: tier, note: 'near' } });
    // Some data around it: 1,000 more members for each account (the other's all in a tier), and
    // 3,000 closed sessions each, straight into the tables.
    for (const memberApi of [api, other.api]) {
      const seedMember = await createMember(memberApi);
      await knex.raw(
        `insert into members (id, user_id, side_system_id, name, created_at, updated_at)
         select gen_random_uuid(), m.user_id, m.side_system_id, 'Seed ' || g, ?::bigint, ?::bigint
         from members m, generate_series(1, 1000) g where m.id = ?`,
        [now, now, seedMember],
      );
      await knex.raw(
        `insert into front_sessions (id, user_id, member_id, side_system_id, started_at, ended_at, created_at, updated_at)
         select gen_random_uuid(), m.user_id, m.id, m.side_system_id, ?::bigint - g * 60000, ?::bigint - g * 60000 + 30000, ?::bigint, ?::bigint
         from members m, generate_series(1, 3000) g where m.id = ?`,
        [now, now, now, now, seedMember],
      );
    }
    await knex.raw(
      `insert into front_tier_presence (user_id, member_id, tier_key, created_at, updated_at)
       select user_id, id, 'coFront', ?::bigint, ?::bigint from members where user_id = ? on conflict do nothing`,
      [now, now, other.userId],
    );
    // Statistics for the tables read (what autovacuum or the embedded maintenance job keeps).
    await knex.raw('analyze front_sessions, members, front_tier_presence, front_custom_tiers');

    const before = await getFront(api); // warms the key cache
    let response: Awaited<ReturnType<typeof getFront>> | undefined;
    const statements = await captureStatements(knex, FRONT_DATA_SQL, async () => {
      response = await getFront(api);
    });
    expect(statements).toHaveLength(1);
    expect(response).toEqual(before);
    expect(response!.memberIds).toEqual([a, b]);
    expect(response!.primaryNote).toBe('first');
    expect(response!.tieredPresence.map((p) => [p.memberId, p.tierDisplayName, p.note])).toEqual([
      [b, 'Co-conscious', null],
      [c, 'Nearby', 'near'],
    ]);

    // The plan for these values. (The generic plan a prepared statement settles on is checked by
    // the bench on data shaped like production: with three accounts here, the planner's estimate for
    // "rows of one account" is a third of each table, for which scanning these small tables is right.)
    {
      const plan = await explain(knex, statements[0]!, { analyze: true });
      const nodes = planNodes(plan);
      // No scan of a whole table. (Custom tiers, at most 50 per account, are a table of a few dozen
      // rows here, where the planner rightly scans it; at scale front_custom_tiers_user serves the join.)
      const seq = nodes.filter((n) => n['Node Type'] === 'Seq Scan' && n['Relation Name'] !== 'front_custom_tiers');
      expect(seq, JSON.stringify(plan)).toEqual([]);
      const indexes = new Set(nodes.map((n) => n['Index Name']).filter((name) => name !== undefined));
      for (const index of ['front_sessions_one_open', 'members_pkey', 'front_tier_presence_pkey']) {
        expect(indexes.has(index), `${index} in ${JSON.stringify(plan)}`).toBe(true);
      }
    }
  });

  it('leaves out members in the trash (while front rows are not yet cleaned up)', async () => {
    const { api } = await server.user();
    const [a, b] = await members(api, 2);
    await start(api, a!);
    await start(api, b!);
    await api.POST('/api/v1/front/tier-presence', { body: { memberId: b!, tierKey: 'coFront' } });
    await api.DELETE('/api/v1/members/{memberId}', memberPath(a!));
    const state = await getFront(api);
    expect(state.memberIds).toEqual([b]);
    expect(state.primaryMemberId).toBe(b);
    await api.DELETE('/api/v1/members/{memberId}', memberPath(b!));
    expect((await getFront(api)).tieredPresence).toEqual([]);
  });
});

describe('history count (kept by triggers)', () => {
  it('equals a real count of the visible sessions through every write path', async () => {
    const { api } = await server.user();
    const other = await server.user();
    const [a, b, c] = await members(api, 3);
    await start(other.api, await createMember(other.api, 'Elsewhere'));
    // A time filter covering everything forces a real COUNT over the rows.
    const check = async (expected: number) => {
      const whole = (await history(api)).count;
      const counted = (await history(api, { startTime: 0, endTime: 9_000_000_000_000 })).count;
      expect(whole).toBe(counted);
      expect(whole).toBe(expected);
    };
    await check(0);
    await start(api, a!);
    await start(api, b!);
    await check(2);
    now += 1000;
    await stop(api, a!);
    now += 1000;
    await start(api, a!);
    await check(3);
    const sessionA = (await history(api)).items.find((i) => i.session.memberId === a && i.session.endedAt !== null)!
      .session._id;
    await api.DELETE('/api/v1/front/sessions/{sessionId}', sessionPath(sessionA));
    await check(2);
    await api.POST('/api/v1/front/sessions/{sessionId}/restore', sessionPath(sessionA));
    await check(3);
    await api.DELETE('/api/v1/front/sessions/{sessionId}', sessionPath(sessionA));
    await api.POST('/api/v1/trash/purge', { body: { items: [{ type: 'frontSession', id: sessionA }] } });
    await check(2);
    await start(api, c!);
    now += 1000;
    await api.DELETE('/api/v1/front');
    await check(3);
    await api.DELETE('/api/v1/members/{memberId}', memberPath(b!));
    await check(2);
    await api.POST('/api/v1/members/{memberId}/restore', memberPath(b!));
    await check(3);
    await api.DELETE('/api/v1/members/{memberId}', memberPath(c!));
    await api.POST('/api/v1/trash/purge', { body: { items: [{ type: 'member', id: c! }] } });
    await check(2);
    expect((await history(other.api)).count).toBe(1);
  });
});

describe('front writes in one statement (migration 0030)', () => {
  it('a start and a stop are one statement each, outside any transaction', async () => {
    const { api } = await server.user();
    const [a] = await members(api, 1);
    await start(api, a!); // warms the key cache
    await stop(api, a!);
    const knex = server.deps.db.knex;
    const heads = async (work: () => Promise<void>) =>
      (await captureStatements(knex, /./, work))
        .map((st) => st.sql.trim().split(/\s+/).slice(0, 3).join(' '))
        .filter((head) => !/rate_limit|api_keys/.test(head));
    expect(await heads(() => start(api, a!))).toEqual(['with turn as']);
    expect(await heads(() => stop(api, a!))).toEqual(['with turn as']);
  });

  it('front.changed holds the front as GET /front shows it, after every kind of front write', async () => {
    const { api, userId } = await server.user();
    const [a, b, c] = await members(api, 3);
    await api.PATCH('/api/v1/members/{memberId}', {
      ...memberPath(a!),
      body: { avatarUrl: 'https://example.net/a.png', pronouns: 'they/them', description: 'Ä "quoted" \\ note' },
    });
    const tier = (await api.POST('/api/v1/front/tiers', { body: { displayName: 'Nearby' } })).data!.id;
    const knex = server.deps.db.knex;
    const lastFront = async () => {
      const { rows } = await knex.raw<{ rows: Array<{ data: { front: unknown } }> }>(
        `select data from events where account_id = ? and type = 'front.changed' order by id desc limit 1`,
        [userId],
      );
      return rows[0]!.data.front;
    };
    const writes: Array<[string, () => Promise<unknown>]> = [
      ['start with a note', () => start(api, a!, { note: 'here' })],
      ['start with createdBy', () => start(api, b!, { createdBy: a! })],
      ['preset tier', () => api.POST('/api/v1/front/tier-presence', { body: { memberId: c!, tierKey: 'coFront' } })],
      [
        'custom tier',
        () => api.POST('/api/v1/front/tier-presence', { body: { memberId: c!, tierKey: tier, note: 'n' } }),
      ],
      ['reorder', () => api.PATCH('/api/v1/front/order', { body: { memberIds: [b!, a!] } })],
      ['stop', () => stop(api, b!)],
      ['clear', () => api.DELETE('/api/v1/front')],
    ];
    for (const [label, write] of writes) {
      now += 1;
      await write();
      expect(await lastFront(), label).toEqual(await getFront(api));
    }
  });

  it('moving a fronting member to the trash appends front.changed; moving one that is not fronting does not', async () => {
    const { api, userId } = await server.user();
    const [a, b] = await members(api, 2);
    await start(api, a!);
    const knex = server.deps.db.knex;
    const frontEvents = async () =>
      (
        await knex.raw<{ rows: Array<{ data: { front: unknown } }> }>(
          `select data from events where account_id = ? and type = 'front.changed' order by id`,
          [userId],
        )
      ).rows;
    expect(await frontEvents()).toHaveLength(1);
    await api.DELETE('/api/v1/members/{memberId}', memberPath(b!));
    expect(await frontEvents()).toHaveLength(1);
    await api.DELETE('/api/v1/members/{memberId}', memberPath(a!));
    const after = await frontEvents();
    expect(after).toHaveLength(2);
    expect(after[1]!.data.front).toEqual(await getFront(api));
    expect((await getFront(api)).memberIds).toEqual([]);
  });

  it('concurrent starts take distinct positions in arrival order, and one member starts once', async () => {
    const { api } = await server.user();
    const list = await members(api, 8);
    const results = await Promise.all([
      ...list.map((m) => api.POST('/api/v1/front/members', { body: { memberId: m! } })),
      ...list.map((m) => api.POST('/api/v1/front/members', { body: { memberId: m! } })),
    ]);
    expect(results.map((r) => r.response.status)).toEqual(results.map(() => 204));
    const knex = server.deps.db.knex;
    const { rows } = await knex.raw<{ rows: Array<{ member_id: string; position: string }> }>(
      'select member_id, position from front_sessions where member_id = any (?::uuid[]) and ended_at is null',
      [list],
    );
    expect(rows).toHaveLength(8);
    expect(new Set(rows.map((r) => r.position)).size).toBe(8);
    const front = await getFront(api);
    expect(new Set(front.memberIds)).toEqual(new Set(list));
    // The front order is the position order.
    const byPosition = [...rows].sort((x, y) => Number(x.position) - Number(y.position)).map((r) => r.member_id);
    expect(front.memberIds).toEqual(byPosition);
  });

  it('a stop racing starts and a member trash leaves the front consistent with its events', async () => {
    const { api, userId } = await server.user();
    const list = await members(api, 4);
    await start(api, list[0]!);
    await Promise.all([
      api.POST('/api/v1/front/members', { body: { memberId: list[1]! } }),
      api.DELETE('/api/v1/front/members/{memberId}', memberPath(list[0]!)),
      api.POST('/api/v1/front/members', { body: { memberId: list[2]! } }),
      api.DELETE('/api/v1/members/{memberId}', memberPath(list[3]!)),
      api.POST('/api/v1/front/members', { body: { memberId: list[3]! } }),
    ]);
    const knex = server.deps.db.knex;
    const { rows } = await knex.raw<{ rows: Array<{ data: { front: unknown } }> }>(
      `select data from events where account_id = ? and type = 'front.changed' order by id desc limit 1`,
      [userId],
    );
    // The last event shows the front as it is: each event is filled at its commit, and front writes commit one at a time.
    expect(rows[0]!.data.front).toEqual(await getFront(api));
    expect((await getFront(api)).memberIds).not.toContain(list[3]);
  });
});

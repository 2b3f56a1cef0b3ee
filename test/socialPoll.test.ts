import { execFileSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { UNKNOWN_ID } from './helpers/fixtures.ts';
import { befriend, expectNoneOf } from './helpers/friends.ts';
import { captureStatements, REQUEST_WORK } from './helpers/plans.ts';
import { jsonHeaders, useServer, type TestUser } from './helpers/server.ts';

const server = useServer();

async function pollWidget(u: TestUser, options: string[], multi = false, visibility = 'public'): Promise<string> {
  const config = { kind: 'poll', question: 'Which?', options, allowMultipleSelections: multi };
  const res = await u.api.POST('/api/v1/social/widgets', {
    body: { type: 'poll', config, visibility, size: 'small' } as never,
  });
  expect(res.response.status, JSON.stringify(res.error)).toBe(201);
  return res.data!.widgetId;
}

const vote = (u: TestUser, widgetId: string, optionIndices: number[]) =>
  u.api.POST('/api/v1/social/widgets/{widgetId}/poll', { params: { path: { widgetId } }, body: { optionIndices } });
const friendVote = (u: TestUser, owner: TestUser, widgetId: string, optionIndices: number[]) =>
  u.api.POST('/api/v1/friends/{friendUserId}/social/widgets/{widgetId}/poll', {
    params: { path: { friendUserId: owner.userId, widgetId } },
    body: { optionIndices },
  });
const friendState = (u: TestUser, owner: TestUser, widgetId: string) =>
  u.api.GET('/api/v1/friends/{friendUserId}/social/widgets/{widgetId}/poll', {
    params: { path: { friendUserId: owner.userId, widgetId } },
  });
const state = async (u: TestUser, widgetId: string) => {
  const res = await u.api.GET('/api/v1/social/widgets/{widgetId}/poll', { params: { path: { widgetId } } });
  expect(res.response.status).toBe(200);
  return res.data!;
};

describe('poll votes', () => {
  it('single choice: exactly one valid index; each vote replaces the ballot', async () => {
    const owner = await server.user();
    const p = await pollWidget(owner, ['Tea', 'Coffee', 'Water']);
    expect(await state(owner, p)).toEqual({
      question: 'Which?',
      options: ['Tea', 'Coffee', 'Water'],
      allowMultipleSelections: false,
      optionCounts: [0, 0, 0],
      distinctVoterCount: 0,
      myOptionIndices: [],
    });
    const res = await vote(owner, p, [1]);
    expect(res.response.status).toBe(200);
    expect(res.data).toMatchObject({ optionCounts: [0, 1, 0], distinctVoterCount: 1, myOptionIndices: [1] });
    expect((await vote(owner, p, [2])).data).toMatchObject({
      optionCounts: [0, 0, 1],
      distinctVoterCount: 1,
      myOptionIndices: [2],
    });
    for (const optionIndices of [[], [0, 1], [3], [7], [8], [-1], [0, 0]]) {
      expect((await vote(owner, p, optionIndices)).response.status, JSON.stringify(optionIndices)).toBe(400);
    }
    expect(await state(owner, p)).toMatchObject({ optionCounts: [0, 0, 1], myOptionIndices: [2] });
  });

  it('multi-select: 0..n indices, [] clears; bounds 0-7 and at most 8 entries', async () => {
    const owner = await server.user();
    const p = await pollWidget(owner, ['a', 'b', 'c', 'd', 'e', 'f', 'g', 'h'], true);
    expect((await vote(owner, p, [7, 0, 3])).data).toMatchObject({
      optionCounts: [1, 0, 0, 1, 0, 0, 0, 1],
      distinctVoterCount: 1,
      myOptionIndices: [0, 3, 7],
    });
    expect((await vote(owner, p, [0, 1, 2, 3, 4, 5, 6, 7])).data!.optionCounts).toEqual([1, 1, 1, 1, 1, 1, 1, 1]);
    for (const optionIndices of [[0, 1, 2, 3, 4, 5, 6, 7, 0], [8], [1, 1], [1.5]]) {
      expect((await vote(owner, p, optionIndices)).response.status, JSON.stringify(optionIndices)).toBe(400);
    }
    expect((await vote(owner, p, [])).data).toMatchObject({
      optionCounts: [0, 0, 0, 0, 0, 0, 0, 0],
      distinctVoterCount: 0,
      myOptionIndices: [],
    });
  });

  it('friends vote and read through the friend route, subject to visibility; counts equal the ballots', async () => {
    const owner = await server.user();
    const friends = [await server.user(), await server.user(), await server.user()];
    for (const f of friends) await befriend(owner, f);
    const p = await pollWidget(owner, ['x', 'y'], true);
    const hidden = await pollWidget(owner, ['secret-a', 'secret-b'], false, 'private');
    await vote(owner, p, [0]);
    await friendVote(friends[0]!, owner, p, [0, 1]);
    await friendVote(friends[1]!, owner, p, [1]);
    const s = await friendState(friends[1]!, owner, p);
    expect(s.data).toEqual({
      question: 'Which?',
      options: ['x', 'y'],
      allowMultipleSelections: true,
      optionCounts: [2, 2],
      distinctVoterCount: 3,
      myOptionIndices: [1],
    });
    expect((await state(owner, p)).myOptionIndices).toEqual([0]);
    for (const w of [hidden, UNKNOWN_ID]) {
      const res = await friendState(friends[2]!, owner, w);
      expect(res.response.status).toBe(404);
      expectNoneOf(res.error, ['secret-a', hidden]);
      expect((await friendVote(friends[2]!, owner, w, [0])).response.status).toBe(404);
    }
    const stranger = await server.user();
    expect((await friendState(stranger, owner, p)).response.status).toBe(404);
    expect((await friendVote(stranger, owner, p, [0])).response.status).toBe(404);
    // Owner routes take only the key holder's polls; guestbook or other widgets are 404.
    expect((await vote(friends[0]!, p, [0])).response.status).toBe(404);
    const gb = (
      await owner.api.POST('/api/v1/social/widgets', {
        body: { type: 'guestbook', config: { kind: 'guestbook' }, visibility: 'public', size: 'small' } as never,
      })
    ).data!.widgetId;
    expect((await vote(owner, gb, [0])).response.status).toBe(404);
  });

  it('concurrent votes from one account leave exactly one ballot', async () => {
    const owner = await server.user();
    const p = await pollWidget(owner, ['a', 'b', 'c', 'd'], true);
    const choices = [[0], [1], [2], [3], [0, 1], [2, 3], [0, 3], [1, 2]];
    const results = await Promise.all(choices.map((c) => vote(owner, p, c)));
    for (const r of results) expect(r.response.status).toBe(200);
    const s = await state(owner, p);
    expect(s.distinctVoterCount).toBe(1);
    expect(choices.map((c) => JSON.stringify(c))).toContain(JSON.stringify(s.myOptionIndices));
    expect(s.optionCounts.reduce((a, b) => a + b, 0)).toBe(s.myOptionIndices.length);
  });

  it("the owner's vote is one statement: the checks, the ballot, its event and the state", async () => {
    const owner = await server.user();
    const friend = await server.user();
    await befriend(owner, friend);
    const p = await pollWidget(owner, ['a', 'b', 'c'], true);
    expect((await friendVote(friend, owner, p, [0, 2])).response.status).toBe(200);
    await vote(owner, p, [1]); // warms the key cache
    for (const [optionIndices, after] of [
      [[2, 0], { optionCounts: [2, 0, 2], distinctVoterCount: 2, myOptionIndices: [0, 2] }],
      [[], { optionCounts: [1, 0, 1], distinctVoterCount: 1, myOptionIndices: [] }],
    ] as const) {
      let res: Awaited<ReturnType<typeof vote>> | undefined;
      const statements = await captureStatements(server.deps.db.knex, REQUEST_WORK, async () => {
        res = await vote(owner, p, [...optionIndices]);
      });
      // docs/data-access.md, "Writes in one statement": no BEGIN, no COMMIT.
      expect(
        statements.map((st) => st.sql.split(/\s+/).slice(0, 3).join(' ')),
        JSON.stringify(statements.map((st) => st.sql)),
      ).toEqual(['with poll as']);
      expect(res!.data).toEqual({ ...(await state(owner, p)), ...after });
    }
    const events = await server.deps.db.knex('events').where({ account_id: owner.userId, type: 'poll.voted' });
    expect(events).toHaveLength(4);
  });

  it('a keyed vote is two statements (the ballots read ahead, the vote storing its answer under the key); a ballot cast in between sends it to a transaction', async () => {
    const owner = await server.user();
    const friend = await server.user();
    await befriend(owner, friend);
    const p = await pollWidget(owner, ['a', 'b', 'c'], true);
    expect((await friendVote(friend, owner, p, [0, 2])).response.status).toBe(200);
    await vote(owner, p, [1]); // warms the key cache
    const knex = server.deps.db.knex;
    const keyed = (key: string, optionIndices: number[]) =>
      server.fetch(`/api/v1/social/widgets/${p}/poll`, {
        method: 'POST',
        headers: { ...jsonHeaders(owner.apiKey), 'Idempotency-Key': key },
        body: JSON.stringify({ optionIndices }),
      });
    let first = '';
    const statements = await captureStatements(knex, REQUEST_WORK, async () => {
      const res = await keyed('vote-1', [2, 0]);
      expect(res.status).toBe(200);
      first = await res.text();
    });
    const words = (sts: Array<{ sql: string }>) =>
      sts.map((st) => st.sql.split(/\s+/).slice(0, 3).join(' ').toLowerCase());
    expect(words(statements), JSON.stringify(statements.map((st) => st.sql))).toEqual(['with p as', 'with poll as']);
    expect(statements[1]!.sql).toMatch(
      /insert into poll_ballots[\s\S]*insert into idempotency_keys[\s\S]*insert into events/,
    );
    expect(JSON.parse(first)).toMatchObject({
      optionCounts: [2, 0, 2],
      distinctVoterCount: 2,
      myOptionIndices: [0, 2],
    });
    expect(first).toBe(JSON.stringify(await state(owner, p)));
    const replayed = await captureStatements(knex, REQUEST_WORK, async () => {
      const again = await keyed('vote-1', [2, 0]);
      expect([again.status, await again.text(), again.headers.get('idempotent-replayed')]).toEqual([
        200,
        first,
        'true',
      ]);
    });
    expect(words(replayed)).toEqual(['with p as', 'with poll as', 'select id, fingerprint,']);

    // Another voter's ballot changes between the read ahead and the vote. On PostgreSQL it commits
    // (the process waits for psql) as the vote goes out; the embedded database has one connection,
    // and the change asked for it first.
    const change = `update poll_ballots set option_indices = '{1}' where widget_id = '${p}' and voter_user_id = '${friend.userId}'`;
    let changed: Promise<unknown> | undefined;
    const interleave = (q: { sql: string }) => {
      if (changed) return;
      if (server.databaseUrl && /^with poll as[\s\S]*idempotency_keys/.test(q.sql.trim())) {
        execFileSync('psql', [server.databaseUrl, '-qc', change]);
        changed = Promise.resolve();
      } else if (!server.databaseUrl && /^with p as/.test(q.sql.trim())) {
        // A knex query runs once it is asked for its result.
        changed = knex.raw(change).then(() => undefined);
      }
    };
    knex.on('query', interleave);
    let stale = '';
    let staleStatements: Array<{ sql: string }> = [];
    try {
      staleStatements = await captureStatements(knex, REQUEST_WORK, async () => {
        const res = await keyed('vote-2', [2]);
        expect(res.status).toBe(200);
        stale = await res.text();
      });
    } finally {
      knex.off('query', interleave);
    }
    await changed;
    expect(words(staleStatements.filter((st) => !st.sql.startsWith('update poll_ballots set option_indices')))).toEqual(
      [
        'with p as',
        'with poll as',
        'begin;',
        'select pg_try_advisory_xact_lock(hashtextextended($1, 0))',
        'with poll as',
        'insert into idempotency_keys',
        'commit;',
      ],
    );
    expect(JSON.parse(stale)).toMatchObject({ optionCounts: [0, 1, 1], distinctVoterCount: 2, myOptionIndices: [2] });
    expect(stale).toBe(JSON.stringify(await state(owner, p)));
    expect((await keyed('vote-2', [2])).headers.get('idempotent-replayed')).toBe('true');
  });

  it('a vote racing an options change is cast on the ballots the change left (a cleared ballot stays cleared)', async () => {
    const owner = await server.user();
    const options = ['a', 'b', 'c', 'd'];
    const p = await pollWidget(owner, options, true);
    for (let round = 0; round < 6; round++) {
      expect((await vote(owner, p, [0, 1])).response.status).toBe(200);
      // The PATCH remaps the ballots (deleted and written again at the options' new indices).
      const rotated = [...options.slice((round % 3) + 1), ...options.slice(0, (round % 3) + 1)];
      const [patched, cleared] = await Promise.all([
        owner.api.PATCH('/api/v1/social/widgets/{widgetId}', {
          params: { path: { widgetId: p } },
          body: {
            config: { kind: 'poll', question: 'Which?', options: rotated, allowMultipleSelections: true },
          } as never,
        }),
        vote(owner, p, []),
      ]);
      expect([patched.response.status, cleared.response.status]).toEqual([200, 200]);
      expect(await state(owner, p), `round ${round}`).toMatchObject({
        optionCounts: [0, 0, 0, 0],
        distinctVoterCount: 0,
        myOptionIndices: [],
      });
    }
  });

  it('changing options remaps ballots by option text; switching to single choice drops multi-option ballots; another kind drops all', async () => {
    const owner = await server.user();
    const [f1, f2, f3] = [await server.user(), await server.user(), await server.user()];
    for (const f of [f1, f2, f3]) await befriend(owner, f);
    const p = await pollWidget(owner, ['a', 'b', 'c'], true);
    await friendVote(f1, owner, p, [0, 2]); // a, c
    await friendVote(f2, owner, p, [1]); // b
    await friendVote(f3, owner, p, [2]); // c
    const patch = (body: Record<string, unknown>) =>
      owner.api.PATCH('/api/v1/social/widgets/{widgetId}', { params: { path: { widgetId: p } }, body: body as never });
    expect(
      (
        await patch({
          config: { kind: 'poll', question: 'Which?', options: ['c', 'a', 'd'], allowMultipleSelections: true },
        })
      ).response.status,
    ).toBe(200);
    expect((await friendState(f1, owner, p)).data).toMatchObject({
      optionCounts: [2, 1, 0],
      distinctVoterCount: 2,
      myOptionIndices: [0, 1],
    });
    expect((await friendState(f2, owner, p)).data!.myOptionIndices).toEqual([]);
    expect((await friendState(f3, owner, p)).data!.myOptionIndices).toEqual([0]);
    await patch({
      config: { kind: 'poll', question: 'Which?', options: ['c', 'a', 'd'], allowMultipleSelections: false },
    });
    expect((await friendState(f1, owner, p)).data).toMatchObject({
      optionCounts: [1, 0, 0],
      distinctVoterCount: 1,
      myOptionIndices: [],
    });
    expect((await friendState(f3, owner, p)).data!.myOptionIndices).toEqual([0]);
    // Same options, only the question changes: ballots untouched.
    await patch({ config: { kind: 'poll', question: 'New?', options: ['c', 'a', 'd'] } });
    expect((await friendState(f3, owner, p)).data).toMatchObject({
      question: 'New?',
      myOptionIndices: [0],
      distinctVoterCount: 1,
    });
    await patch({ type: 'status', config: { kind: 'status', statusText: 'no poll' } });
    await patch({ type: 'poll', config: { kind: 'poll', question: 'Which?', options: ['c', 'a'] } });
    expect((await friendState(f3, owner, p)).data).toMatchObject({
      optionCounts: [0, 0],
      distinctVoterCount: 0,
      myOptionIndices: [],
    });
  });

  it('deleting the poll widget deletes its ballots', async () => {
    const owner = await server.user();
    const p = await pollWidget(owner, ['a', 'b']);
    await vote(owner, p, [1]);
    const ballots = async () =>
      Number((await server.deps.db.knex('poll_ballots').where({ widget_id: p }).count({ n: '*' }).first())!.n);
    expect(await ballots()).toBe(1);
    expect(
      (await owner.api.DELETE('/api/v1/social/widgets/{widgetId}', { params: { path: { widgetId: p } } })).response
        .status,
    ).toBe(204);
    expect(await ballots()).toBe(0);
    expect((await vote(owner, p, [0])).response.status).toBe(404);
  });

  it('needs the poll scope', async () => {
    const owner = await server.user({ scopes: { poll: 'read', social: 'read_write' } });
    const p = await pollWidget(owner, ['a', 'b']);
    expect((await state(owner, p)).distinctVoterCount).toBe(0);
    const res = await vote(owner, p, [0]);
    expect(res.response.status).toBe(403);
    expect(res.error).toEqual({ code: 'FORBIDDEN', message: 'Missing API key scope: poll requires read_write' });
  });
});

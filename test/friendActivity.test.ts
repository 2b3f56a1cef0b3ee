/**
 * Friend-scoped activity routes (issue 13, activity side): the friend view of the front and its
 * writes, writable member ids, history and its month aggregation, friend notes and their writes.
 * Every route over the relationship matrix and, for an accepted friend, over the levels of the
 * route's permission group; hidden canaries never appear; refused writes change nothing and are
 * not audited; successful ones are.
 */
import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { PERMISSION_GROUPS } from '../server/core/context.ts';
import { createEntry, createMember, startFronting, UNKNOWN_ID } from './helpers/fixtures.ts';
import {
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
import { captureStatements, explain, planNodes, type PlanNode, REQUEST_WORK } from './helpers/plans.ts';
import { jsonHeaders, TestServer, useServer, type TestUser } from './helpers/server.ts';

let now = 1_800_000_000_000;
const server = useServer({ clock: () => now });
const DAY = 86_400_000;

interface Seed {
  owner: TestUser;
  vis1: string;
  vis2: string;
  hidden: string;
  hidden2: string;
  visNote: string;
  mixedNote: string;
  hiddenNote: string;
  canaries: string[];
}

/**
 * An owner with two members shared through `bucketId` (when given) and two hidden ones (no
 * buckets), all fronting or in a tier (the hidden one is the owner's primary), and notes: one on
 * a visible member, one on visible + hidden, one on a hidden member only.
 */
async function seed(owner: TestUser, bucketId: string | null): Promise<Seed> {
  const hiddenName = `hidden-${randomUUID()}`;
  const hidden2Name = `hidden2-${randomUUID()}`;
  const hiddenText = `secret-${randomUUID()}`;
  const mixedText = `mixed-${randomUUID()}`;
  const hidden = await createMember(owner.api, hiddenName);
  const hidden2 = await createMember(owner.api, hidden2Name);
  const vis1 = await createMember(owner.api, 'A visible');
  const vis2 = await createMember(owner.api, 'B visible');
  if (bucketId) {
    await shareMember(owner, vis1, [bucketId]);
    await shareMember(owner, vis2, [bucketId]);
  }
  await startFronting(owner.api, hidden);
  await startFronting(owner.api, vis1);
  await startFronting(owner.api, vis2);
  const hiddenSession = (await owner.api.GET('/api/v1/front')).data!.activeSessions.find(
    (s) => s.memberId === hidden,
  )!._id;
  const tierNote = `tier-${randomUUID()}`;
  expect(
    (
      await owner.api.POST('/api/v1/front/tier-presence', {
        body: { memberId: hidden2, tierKey: 'coConscious', note: tierNote },
      })
    ).response.status,
  ).toBe(204);
  expect(
    (await owner.api.POST('/api/v1/front/tier-presence', { body: { memberId: vis2, tierKey: 'coFront' } })).response
      .status,
  ).toBe(204);
  const visNote = await createEntry(owner.api, 'visible note', { memberIds: [vis1] });
  const mixedNote = await createEntry(owner.api, mixedText, { memberIds: [vis1, hidden] });
  const hiddenNote = await createEntry(owner.api, hiddenText, { memberIds: [hidden] });
  return {
    owner,
    vis1,
    vis2,
    hidden,
    hidden2,
    visNote,
    mixedNote,
    hiddenNote,
    canaries: [hidden, hidden2, hiddenName, hidden2Name, hiddenText, hiddenNote, hiddenSession, tierNote],
  };
}

/** What the owner's data looks like (front, notes, trash): compared before and after refused writes. */
async function snapshot(owner: TestUser): Promise<string> {
  const front = await owner.api.GET('/api/v1/front');
  const entries = await owner.api.GET('/api/v1/entries', { params: { query: { limit: 100 } } });
  return JSON.stringify([front.data, entries.data]);
}

async function auditActions(
  owner: TestUser,
): Promise<Array<{ action: string; detail: unknown; targetId: string | null }>> {
  const res = await owner.api.GET('/api/v1/audit', { params: { query: { actionPrefix: 'friend_write' } } });
  expect(res.response.status).toBe(200);
  return res.data!.items.map((e) => ({ action: e.action, detail: e.detail, targetId: e.targetId }));
}

type Call = { route: string; status: number; body: unknown };

function fp(friendUserId: string) {
  return { friendUserId };
}

/** Every read route once. */
async function reads(viewer: TestUser, s: Seed): Promise<Call[]> {
  const path = fp(s.owner.userId);
  const out: Call[] = [];
  const push = (route: string, r: { response: Response; data?: unknown; error?: unknown }) =>
    out.push({ route, status: r.response.status, body: r.data ?? r.error });
  push('GET front', await viewer.api.GET('/api/v1/friends/{friendUserId}/front', { params: { path } }));
  push(
    'GET writable',
    await viewer.api.GET('/api/v1/friends/{friendUserId}/front/writable-member-ids', { params: { path } }),
  );
  push('GET history', await viewer.api.GET('/api/v1/friends/{friendUserId}/front/history', { params: { path } }));
  push(
    'GET month',
    await viewer.api.GET('/api/v1/friends/{friendUserId}/front/history/month', {
      params: { path, query: { startTime: now - 10 * DAY, endTime: now + DAY } },
    }),
  );
  push('GET entries', await viewer.api.GET('/api/v1/friends/{friendUserId}/entries', { params: { path } }));
  push(
    'GET entries?memberId=hidden',
    await viewer.api.GET('/api/v1/friends/{friendUserId}/entries', { params: { path, query: { memberId: s.hidden } } }),
  );
  return out;
}

/** Every write route once, aimed at visible content (and the hidden note). */
async function writes(viewer: TestUser, s: Seed): Promise<Call[]> {
  const path = fp(s.owner.userId);
  const out: Call[] = [];
  const push = (route: string, r: { response: Response; data?: unknown; error?: unknown }) =>
    out.push({ route, status: r.response.status, body: r.data ?? r.error });
  push(
    'PATCH order',
    await viewer.api.PATCH('/api/v1/friends/{friendUserId}/front/order', {
      params: { path },
      body: { memberIds: [s.vis2, s.vis1] },
    }),
  );
  push(
    'DELETE tier-presence',
    await viewer.api.DELETE('/api/v1/friends/{friendUserId}/front/tier-presence/{memberId}', {
      params: { path: { ...path, memberId: s.vis2 } },
    }),
  );
  push(
    'DELETE front member',
    await viewer.api.DELETE('/api/v1/friends/{friendUserId}/front/members/{memberId}', {
      params: { path: { ...path, memberId: s.vis2 } },
    }),
  );
  push(
    'POST front member',
    await viewer.api.POST('/api/v1/friends/{friendUserId}/front/members', {
      params: { path },
      body: { memberId: s.vis2 },
    }),
  );
  push(
    'POST entry',
    await viewer.api.POST('/api/v1/friends/{friendUserId}/entries', {
      params: { path },
      body: { content: 'from a friend', memberIds: [s.vis1] },
    }),
  );
  push(
    'PATCH entry',
    await viewer.api.PATCH('/api/v1/friends/{friendUserId}/entries/{entryId}', {
      params: { path: { ...path, entryId: s.visNote } },
      body: { content: 'edited by a friend' },
    }),
  );
  push(
    'DELETE entry',
    await viewer.api.DELETE('/api/v1/friends/{friendUserId}/entries/{entryId}', {
      params: { path: { ...path, entryId: s.visNote } },
    }),
  );
  push(
    'PUT front',
    await viewer.api.PUT('/api/v1/friends/{friendUserId}/front', { params: { path }, body: { memberId: s.vis1 } }),
  );
  return out;
}

/** The writes no friend may ever make: on hidden content. */
async function hiddenWrites(viewer: TestUser, s: Seed): Promise<Call[]> {
  const path = fp(s.owner.userId);
  const out: Call[] = [];
  const push = (route: string, r: { response: Response; data?: unknown; error?: unknown }) =>
    out.push({ route, status: r.response.status, body: r.data ?? r.error });
  push(
    'PUT front hidden',
    await viewer.api.PUT('/api/v1/friends/{friendUserId}/front', { params: { path }, body: { memberId: s.hidden2 } }),
  );
  push(
    'POST front hidden',
    await viewer.api.POST('/api/v1/friends/{friendUserId}/front/members', {
      params: { path },
      body: { memberId: s.hidden2 },
    }),
  );
  push(
    'DELETE front hidden',
    await viewer.api.DELETE('/api/v1/friends/{friendUserId}/front/members/{memberId}', {
      params: { path: { ...path, memberId: s.hidden } },
    }),
  );
  push(
    'DELETE tier hidden',
    await viewer.api.DELETE('/api/v1/friends/{friendUserId}/front/tier-presence/{memberId}', {
      params: { path: { ...path, memberId: s.hidden2 } },
    }),
  );
  push(
    'POST entry hidden',
    await viewer.api.POST('/api/v1/friends/{friendUserId}/entries', {
      params: { path },
      body: { content: 'x', memberIds: [s.hidden] },
    }),
  );
  push(
    'PATCH hidden entry',
    await viewer.api.PATCH('/api/v1/friends/{friendUserId}/entries/{entryId}', {
      params: { path: { ...path, entryId: s.hiddenNote } },
      body: { content: 'x' },
    }),
  );
  push(
    'DELETE hidden entry',
    await viewer.api.DELETE('/api/v1/friends/{friendUserId}/entries/{entryId}', {
      params: { path: { ...path, entryId: s.hiddenNote } },
    }),
  );
  return out;
}

/**
 * The rows by which a trigger-kept list differs from its definition, both ways (`except all`),
 * over the whole database: 0 when the list is exact.
 */
async function listDrift(knex: TestServer['deps']['db']['knex'], definition: string, listed: string): Promise<number> {
  const result = await knex.raw(
    `select count(*)::int as n from ((${listed} except all ${definition}) union all (${definition} except all ${listed})) d`,
  );
  return (result.rows as Array<{ n: number }>)[0]!.n;
}

const notFoundMember = { code: 'NOT_FOUND', message: 'Member not found' };
const notFoundEntry = { code: 'NOT_FOUND', message: 'Entry not found' };

describe('relationship matrix: no visible friendship answers 404 "Friend not found" everywhere', {
  timeout: 120_000,
}, () => {
  for (const relationship of RELATIONSHIPS.filter((r) => r !== 'accepted')) {
    it(relationship, async () => {
      const owner = await server.user();
      const viewer = await server.user();
      const bucketId = await createBucket(owner, {
        members_view: 'read_write',
        front: 'read_write',
        member_notes: 'read_write',
      });
      const s = await seed(owner, bucketId);
      if (relationship === 'blocked_by_owner' || relationship === 'blocked_by_viewer' || relationship === 'revoked') {
        // Befriended and sharing first, so only the block or revoke stands between them.
        await relate(owner, viewer, 'accepted');
        await giveFriend(owner, viewer, [bucketId]);
        const [by, other] = relationship === 'blocked_by_viewer' ? [viewer, owner] : [owner, viewer];
        const res =
          relationship === 'revoked'
            ? await by.api.POST('/api/v1/friends/{friendUserId}/revoke', { params: { path: fp(other.userId) } })
            : await by.api.POST('/api/v1/friends/{friendUserId}/block', { params: { path: fp(other.userId) } });
        expect(res.response.status).toBe(204);
      } else {
        await relate(owner, viewer, relationship);
      }
      const before = await snapshot(owner);
      const calls = [...(await reads(viewer, s)), ...(await writes(viewer, s)), ...(await hiddenWrites(viewer, s))];
      for (const c of calls) {
        expect(c.status, c.route).toBe(404);
        expect(c.body, c.route).toEqual({ code: 'NOT_FOUND', message: 'Friend not found' });
        expectNoneOf(c.body, [...s.canaries, s.vis1, s.vis2, s.visNote]);
      }
      expect(await snapshot(owner)).toBe(before);
      expect(await auditActions(owner)).toEqual([]);
    });
  }

  it("the caller's own id and an unknown account are 404 too", async () => {
    const owner = await server.user();
    const s = await seed(owner, null);
    for (const c of [...(await reads(owner, s)), ...(await writes(owner, s))])
      expect([c.route, c.status, c.body]).toEqual([c.route, 404, { code: 'NOT_FOUND', message: 'Friend not found' }]);
    const viewer = await server.user();
    const res = await viewer.api.GET('/api/v1/friends/{friendUserId}/front', { params: { path: fp(UNKNOWN_ID) } });
    expect(res.response.status).toBe(404);
  });
});

type Level = 'no_bucket' | 'none' | 'read' | 'read_write';

describe('accepted friend: the matrix over the levels of front and member_notes', { timeout: 120_000 }, () => {
  for (const level of ['no_bucket', 'none', 'read', 'read_write'] as const satisfies readonly Level[]) {
    it(level, async () => {
      const owner = await server.user();
      const viewer = await server.user();
      await relate(owner, viewer, 'accepted');
      const g = level === 'no_bucket' ? 'none' : level;
      const bucketId = await createBucket(owner, {
        members_view: 'read',
        member_avatar: 'read',
        front: g,
        member_notes: g,
      } satisfies Perms);
      // no_bucket: the friend holds a bucket granting everything, but no content carries it.
      const unshared = await createBucket(
        owner,
        { members_view: 'read_write', member_avatar: 'read_write', front: 'read_write', member_notes: 'read_write' },
        'Unshared',
      );
      await giveFriend(owner, viewer, level === 'no_bucket' ? [unshared] : [bucketId]);
      const s = await seed(owner, bucketId);
      const sees = level === 'read' || level === 'read_write';

      const r = Object.fromEntries((await reads(viewer, s)).map((c) => [c.route, c]));
      for (const c of Object.values(r)) expectNoneOf(c.body, s.canaries);
      expect(r['GET front']!.status).toBe(200);
      const front = r['GET front']!.body as {
        primary: { member: { _id: string } } | null;
        alsoFronting: Array<{ member: { _id: string } }>;
        tieredMembers: Array<{ member: { _id: string }; tierKey: string }>;
        note: string;
      };
      if (sees) {
        // The owner's primary is hidden: the first visible fronter takes its place.
        expect(front.primary!.member._id).toBe(s.vis1);
        expect(front.alsoFronting.map((f) => f.member._id)).toEqual([s.vis2]);
        expect(front.tieredMembers.map((t) => [t.member._id, t.tierKey])).toEqual([[s.vis2, 'coFront']]);
        expect(front.note).toBe('');
      } else {
        expect(front).toEqual({ primary: null, alsoFronting: [], tieredMembers: [], note: '' });
      }
      expect(r['GET writable']!.status).toBe(200);
      expect(r['GET writable']!.body).toEqual({ memberIds: level === 'read_write' ? [s.vis1, s.vis2] : [] });
      expect(r['GET history']!.status).toBe(200);
      const history = r['GET history']!.body as { items: Array<{ member: { _id: string } }>; count: number };
      expect(history.items.map((i) => i.member._id).sort()).toEqual(sees ? [s.vis1, s.vis2].sort() : []);
      expect(history.count).toBe(3); // spec: before the per-member filter
      // The month view needs the tab (a bucket granting front), whatever the content carries.
      expect(r['GET month']!.status).toBe(level === 'none' ? 403 : 200);
      if (level === 'no_bucket') expect(r['GET month']!.body).toEqual({ days: [], truncated: false });
      if (sees) {
        const days = (r['GET month']!.body as { days: Array<{ members: Array<{ memberId: string }> }> }).days;
        expect(new Set(days.flatMap((d) => d.members.map((m) => m.memberId)))).toEqual(new Set([s.vis1, s.vis2]));
      }
      expect(r['GET entries']!.status).toBe(200);
      const notes = r['GET entries']!.body as Array<{
        _id: string;
        members: Array<{ id: string }>;
        viewerCanWrite: boolean;
      }>;
      expect(notes.map((n) => n._id).sort()).toEqual(sees ? [s.visNote, s.mixedNote].sort() : []);
      for (const n of notes) {
        expect(n.members.map((m) => m.id)).toEqual([s.vis1]);
        expect(n.viewerCanWrite).toBe(level === 'read_write' && n._id === s.visNote);
      }
      expect(r['GET entries?memberId=hidden']!.body).toEqual([]);

      const before = await snapshot(owner);
      for (const c of await hiddenWrites(viewer, s)) {
        expect(c.status, c.route).toBe(404);
        expect(c.body, c.route).toEqual(
          c.route.includes('entry') ? (c.route.startsWith('POST') ? notFoundMember : notFoundEntry) : notFoundMember,
        );
        expectNoneOf(c.body, s.canaries);
      }
      if (level !== 'read_write') {
        for (const c of await writes(viewer, s)) {
          const expected =
            level === 'no_bucket' || (level === 'none' && c.route.includes('entry') && !c.route.startsWith('POST'))
              ? 404
              : 403;
          // Reorder: the tab first (403 without front read_write anywhere), then the visible set (none here: 400).
          expect(c.status, c.route).toBe(c.route === 'PATCH order' ? (level === 'no_bucket' ? 400 : 403) : expected);
          expectNoneOf(c.body, s.canaries);
        }
        expect(await snapshot(owner)).toBe(before);
        expect(await auditActions(owner)).toEqual([]);
        return;
      }
      expect(await snapshot(owner)).toBe(before);
      // read_write: every write succeeds, and is audited with the friend's id.
      const mixedBefore = await snapshot(owner);
      const mixed = await viewer.api.PATCH('/api/v1/friends/{friendUserId}/entries/{entryId}', {
        params: { path: { friendUserId: owner.userId, entryId: s.mixedNote } },
        body: { content: 'x' },
      });
      expect(mixed.response.status).toBe(403); // it links a hidden member
      expect(await snapshot(owner)).toBe(mixedBefore);
      const calls = await writes(viewer, s);
      for (const c of calls) expect([c.route, c.status]).toEqual([c.route, c.route === 'POST entry' ? 201 : 204]);
      const ownerFront = (await owner.api.GET('/api/v1/front')).data!;
      expect(ownerFront.memberIds).toEqual([s.vis1]); // PUT cleared everything, then fronted vis1
      expect(ownerFront.tieredPresence).toEqual([]);
      const created = (calls.find((c) => c.route === 'POST entry')!.body as { id: string }).id;
      const ownerNotes = (await owner.api.GET('/api/v1/entries')).data!;
      expect(ownerNotes.map((n) => n._id)).toContain(created);
      expect(ownerNotes.map((n) => n._id)).not.toContain(s.visNote); // in the trash now
      const trash = await owner.api.GET('/api/v1/trash');
      expect(JSON.stringify(trash.data)).toContain(s.visNote);
      const actions = await auditActions(owner);
      expect(actions.map((a) => a.action).sort()).toEqual(
        [
          'friend_write.front.reorder',
          'friend_write.front.tier_presence_clear',
          'friend_write.front.stop',
          'friend_write.front.start',
          'friend_write.entry.create',
          'friend_write.entry.update',
          'friend_write.entry.delete',
          'friend_write.front.set',
        ].sort(),
      );
      for (const a of actions) expect(a.detail).toEqual({ friendUserId: viewer.userId });
    });
  }
});

/** An accepted friend with front and notes at read_write through one bucket, and the seeded owner. */
async function writer(): Promise<{ s: Seed; viewer: TestUser; bucketId: string }> {
  const { owner, viewer, bucketId } = await friendsSharing(server, {
    members_view: 'read',
    front: 'read_write',
    member_notes: 'read_write',
  });
  return { s: await seed(owner, bucketId), viewer, bucketId };
}

describe('front', { timeout: 120_000 }, () => {
  it("the front answers the owner's order of fronters, presence in the order it was set, and custom tiers by name", async () => {
    const { owner, viewer, bucketId } = await friendsSharing(server, {
      members_view: 'read',
      member_avatar: 'read',
      front: 'read',
    });
    const [a, b, c, hidden] = [
      await createMember(owner.api, 'A'),
      await createMember(owner.api, 'B'),
      await createMember(owner.api, 'C'),
      await createMember(owner.api, `hidden-${randomUUID()}`),
    ];
    for (const id of [a, b, c]) await shareMember(owner, id, [bucketId]);
    for (const id of [a, b, hidden, c]) await startFronting(owner.api, id);
    expect(
      (await owner.api.PATCH('/api/v1/front/order', { body: { memberIds: [c, hidden, a, b] } })).response.status,
    ).toBe(204);
    const tier = (await owner.api.POST('/api/v1/front/tiers', { body: { displayName: 'Nearby' } })).data!.id;
    // Set in this order, later ones at later times: b, then the hidden member, then a (c, the
    // primary, cannot be in a tier).
    for (const [memberId, tierKey] of [
      [b, tier],
      [hidden, 'coFront'],
      [a, 'coConscious'],
    ] as const) {
      now += 1_000;
      const res = await owner.api.POST('/api/v1/front/tier-presence', { body: { memberId, tierKey } });
      expect(res.response.status, JSON.stringify(res.error)).toBe(204);
    }
    const res = await viewer.api.GET('/api/v1/friends/{friendUserId}/front', {
      params: { path: { friendUserId: owner.userId } },
    });
    expect(res.response.status).toBe(200);
    const front = res.data!;
    expect([front.primary, ...front.alsoFronting].map((f) => f!.member._id)).toEqual([c, a, b]);
    expect(front.tieredMembers.map((t) => [t.member._id, t.tierKey, t.tierName])).toEqual([
      [b, tier, 'Nearby'],
      [a, 'coConscious', expect.any(String)],
    ]);
    expectNoneOf(res.data, [hidden]);
  });

  it('reorder: an exact permutation of the visible fronters; hidden fronters keep their slots', async () => {
    const { s, viewer } = await writer();
    const path = fp(s.owner.userId);
    const before = await snapshot(s.owner);
    for (const memberIds of [[s.vis1], [s.vis1, s.vis2, s.hidden], [s.vis1, s.vis1], [s.vis1, UNKNOWN_ID]]) {
      const res = await viewer.api.PATCH('/api/v1/friends/{friendUserId}/front/order', {
        params: { path },
        body: { memberIds },
      });
      expect(res.response.status).toBe(400);
      expectNoneOf(
        res.error,
        s.canaries.filter((c) => c !== s.hidden),
      ); // only ids the caller sent may be echoed; none are
      expect(JSON.stringify(res.error)).not.toContain(s.hidden);
    }
    expect(await snapshot(s.owner)).toBe(before);
    expect(
      (
        await viewer.api.PATCH('/api/v1/friends/{friendUserId}/front/order', {
          params: { path },
          body: { memberIds: [s.vis2, s.vis1] },
        })
      ).response.status,
    ).toBe(204);
    expect((await s.owner.api.GET('/api/v1/front')).data!.memberIds).toEqual([s.hidden, s.vis2, s.vis1]);
  });

  it('writes need the member active and visible (404) and front read_write on it (403)', async () => {
    const { s, viewer, bucketId } = await writer();
    const path = fp(s.owner.userId);
    const readOnly = await createMember(s.owner.api, 'Read only');
    const readBucket = await createBucket(s.owner, { members_view: 'read', front: 'read' });
    await giveFriend(s.owner, viewer, [bucketId, readBucket]);
    await shareMember(s.owner, readOnly, [readBucket]);
    const archived = await createMember(s.owner.api, 'Archived');
    await shareMember(s.owner, archived, [bucketId]);
    expect(
      (
        await s.owner.api.PATCH('/api/v1/members/{memberId}', {
          params: { path: { memberId: archived } },
          body: { archived: true } as never,
        })
      ).response.status,
    ).toBe(200);
    const before = await snapshot(s.owner);
    const start = (memberId: string) =>
      viewer.api.POST('/api/v1/friends/{friendUserId}/front/members', { params: { path }, body: { memberId } });
    expect((await start(readOnly)).response.status).toBe(403);
    expect((await start(archived)).error).toEqual(notFoundMember);
    expect((await start(UNKNOWN_ID)).error).toEqual(notFoundMember);
    expect(
      (await viewer.api.PUT('/api/v1/friends/{friendUserId}/front', { params: { path }, body: { memberId: readOnly } }))
        .response.status,
    ).toBe(403);
    expect(await snapshot(s.owner)).toBe(before);
    expect(
      (await viewer.api.GET('/api/v1/friends/{friendUserId}/front/writable-member-ids', { params: { path } })).data,
    ).toEqual({ memberIds: [s.vis1, s.vis2] });
    expect(await auditActions(s.owner)).toEqual([]);
  });

  it('an internal failure answers the empty front with 200 and logs it', async () => {
    const lines: string[] = [];
    const own = await new TestServer().start({
      env: { LOG_LEVEL: 'error' },
      logStream: { write: (l: string) => void lines.push(l) },
    });
    try {
      const owner = await own.user();
      const viewer = await own.user();
      await relate(owner, viewer, 'accepted');
      const bucketId = await createBucket(owner, { members_view: 'read', front: 'read' });
      await giveFriend(owner, viewer, [bucketId]);
      const m = await createMember(owner.api, 'Robin');
      await shareMember(owner, m, [bucketId]);
      await startFronting(owner.api, m);
      const path = fp(owner.userId);
      expect(
        (await viewer.api.GET('/api/v1/friends/{friendUserId}/front', { params: { path } })).data!.primary!.member._id,
      ).toBe(m);
      // The read fails for real: the tier presence table is gone on this throwaway server.
      await own.deps.db.knex.raw('alter table front_tier_presence rename to front_tier_presence_gone');
      const res = await viewer.api.GET('/api/v1/friends/{friendUserId}/front', { params: { path } });
      expect(res.response.status).toBe(200);
      expect(res.data).toEqual({ primary: null, alsoFronting: [], tieredMembers: [], note: '' });
      expect(lines.some((l) => l.includes('friend front read failed'))).toBe(true);
      // The failed statement also resolved the friendship: checked on its own, it still keeps a
      // stranger out (404 as for an unknown account, never the empty front).
      const stranger = await own.user();
      const refused = await stranger.api.GET('/api/v1/friends/{friendUserId}/front', { params: { path } });
      expect(refused.response.status).toBe(404);
      expect(refused.error).toMatchObject({ message: 'Friend not found' });
    } finally {
      await own.close();
    }
  });

  it('avatar: null when member_avatar is not granted; tagged with ownerUserId otherwise', async () => {
    const { s, viewer } = await writer();
    const res = await viewer.api.GET('/api/v1/friends/{friendUserId}/front', { params: { path: fp(s.owner.userId) } });
    expect(res.data!.primary!.member.avatarUrl).toBeNull(); // the bucket grants no member_avatar (and no avatar is set)
  });

  it('avatar in the front and the history: granted by the member’s own buckets, narrowed by the section’s own buckets once it has any', async () => {
    const { owner, viewer, bucketId } = await friendsSharing(server, {
      members_view: 'read',
      front: 'read',
      member_avatar: 'read',
    });
    const noAvatar = await createBucket(owner, { members_view: 'read', front: 'read' }, 'No avatar');
    const notHeld = await createBucket(
      owner,
      { members_view: 'read', front: 'read', member_avatar: 'read' },
      'Not held',
    );
    await giveFriend(owner, viewer, [bucketId, noAvatar]);
    const shown = await createMember(owner.api, 'Shown');
    const ungranted = await createMember(owner.api, 'Ungranted');
    await shareMember(owner, shown, [bucketId]);
    await shareMember(owner, ungranted, [noAvatar]);
    const urls = new Map<string, string>();
    for (const m of [shown, ungranted]) {
      const res = await server.fetch(`/api/v1/members/${m}/media?kind=avatar`, {
        method: 'PUT',
        headers: { Authorization: `Bearer ${owner.apiKey}`, 'Content-Type': 'image/png' },
        body: new Uint8Array(PNG),
      });
      expect(res.status).toBe(200);
      urls.set(m, `${((await res.json()) as { avatarUrl: string }).avatarUrl}&ownerUserId=${owner.userId}`);
      await startFronting(owner.api, m);
    }
    const path = fp(owner.userId);
    /** Each member's avatarUrl in the friend's front and in the first history page. */
    const avatars = async () => {
      const front = (await viewer.api.GET('/api/v1/friends/{friendUserId}/front', { params: { path } })).data!;
      const history = (await viewer.api.GET('/api/v1/friends/{friendUserId}/front/history', { params: { path } }))
        .data!;
      const fronters = [front.primary!, ...front.alsoFronting].map((f) => [f.member._id, f.member.avatarUrl]);
      expect(fronters).toHaveLength(2);
      expect(history.items.map((i) => [i.member._id, i.member.avatarUrl]).sort()).toEqual([...fronters].sort());
      return Object.fromEntries(fronters) as Record<string, string | null>;
    };
    const setSection = async (bucketIds: string[]) => {
      const res = await owner.api.PUT('/api/v1/privacy-buckets/assignments/profile-sections/{memberId}/{sectionKey}', {
        params: { path: { memberId: shown, sectionKey: 'avatar' } },
        body: { bucketIds },
      });
      expect(res.response.status, JSON.stringify(res.error)).toBe(204);
    };
    // No section of the owner's has buckets of its own: the member's buckets decide.
    expect(await avatars()).toEqual({ [shown]: urls.get(shown), [ungranted]: null });
    // The avatar section gets a bucket the friend does not hold: it narrows the avatar away.
    await setSection([notHeld]);
    expect(await avatars()).toEqual({ [shown]: null, [ungranted]: null });
    // A held bucket granting no member_avatar does not bring it back; one granting it does.
    await setSection([notHeld, noAvatar]);
    expect(await avatars()).toEqual({ [shown]: null, [ungranted]: null });
    await setSection([notHeld, bucketId]);
    expect(await avatars()).toEqual({ [shown]: urls.get(shown), [ungranted]: null });
  });
});

describe('history and month', { timeout: 120_000 }, () => {
  it('history: keyset pages of visible sessions, cursor both-or-neither, count before the filter', async () => {
    const { s, viewer } = await writer();
    const path = fp(s.owner.userId);
    const page1 = await viewer.api.GET('/api/v1/friends/{friendUserId}/front/history', {
      params: { path, query: { limit: 1 } },
    });
    expect(page1.data!.items).toHaveLength(1);
    expect(page1.data!.count).toBe(3);
    const cursor = page1.data!.nextCursor!;
    const page2 = await viewer.api.GET('/api/v1/friends/{friendUserId}/front/history', {
      params: { path, query: { limit: 1, cursorStartedAt: cursor.startedAt, cursorId: cursor.id } },
    });
    expect(page2.data!.items).toHaveLength(1);
    expect(page2.data!.nextCursor).toBeNull(); // the hidden session is not a page of its own
    expect([page1.data!.items[0]!.member._id, page2.data!.items[0]!.member._id].sort()).toEqual(
      [s.vis1, s.vis2].sort(),
    );
    expectNoneOf([page1.data, page2.data], s.canaries);
    for (const query of [
      { cursorId: cursor.id },
      { cursorStartedAt: cursor.startedAt },
      { limit: 0 },
      { limit: 51 },
      { startTime: 10, endTime: 5 },
    ]) {
      const res = await viewer.api.GET('/api/v1/friends/{friendUserId}/front/history', { params: { path, query } });
      expect(res.response.status, JSON.stringify(query)).toBe(400);
    }
  });

  it('history: every page is exact when one member fronts most of it, a member is in two held buckets, and a held front bucket lists a member the friend may not see; with and without a time filter', async () => {
    const { owner, viewer, bucketId: shared } = await friendsSharing(server, { members_view: 'read', front: 'read' });
    // A second bucket the friend holds, granting front but not members_view: its members stay hidden.
    const frontOnly = await createBucket(owner, { front: 'read' }, 'Front only');
    await giveFriend(owner, viewer, [shared, frontOnly]);
    const [a, b, c, hidden] = [
      await createMember(owner.api, 'A'),
      await createMember(owner.api, 'B'),
      await createMember(owner.api, 'C'),
      await createMember(owner.api, 'Hidden'),
    ];
    await shareMember(owner, a, [shared, frontOnly]);
    for (const m of [b, c]) await shareMember(owner, m, [shared]);
    await shareMember(owner, hidden, [frontOnly]);
    const knex = server.deps.db.knex;
    // A fronts the newest 60 sessions; B's 15 fall among A's older ones; C's 5 are the oldest; the
    // hidden member's 40 are spread over all of them. Two sessions share a start time (the id decides).
    const seed = (member: string, first: number, step: number, count: number) =>
      knex.raw(
        `insert into front_sessions (id, user_id, member_id, side_system_id, started_at, ended_at, created_at, updated_at)
         select gen_random_uuid(), m.user_id, m.id, m.side_system_id, ?::bigint - g * ?::bigint, ?::bigint - g * ?::bigint + 30000, ?::bigint, ?::bigint
         from members m, generate_series(1, ?::int) g where m.id = ?`,
        [now - first, step, now - first, step, now, now, count, member],
      );
    await seed(a, 0, 60_000, 60);
    await seed(b, 30 * 60_000 + 1_000, 120_000, 15);
    await seed(b, 60_000, 60_000, 1); // the same start as A's newest
    await seed(c, 200 * 60_000, 60_000, 5);
    await seed(hidden, 0, 45_000, 40);
    const path = fp(owner.userId);
    const filters: Array<{ startTime?: number; endTime?: number }> = [
      {},
      { startTime: now - 100 * 60_000, endTime: now - 20 * 60_000 },
    ];
    for (const filter of filters) {
      const expected = (
        await knex('front_sessions')
          .whereIn('member_id', [a, b, c])
          .whereNull('deleted_at')
          .where((q) => {
            if (filter.endTime !== undefined)
              q.where('started_at', '<=', filter.endTime).where((o) =>
                o.whereNull('ended_at').orWhere('ended_at', '>=', filter.startTime!),
              );
          })
          .orderBy([
            { column: 'started_at', order: 'desc' },
            { column: 'id', order: 'desc' },
          ])
          .select('id')
      ).map((r: { id: string }) => r.id);
      for (const limit of [1, 7, 50]) {
        const seen: string[] = [];
        let cursor: { startedAt: number; id: string } | null = null;
        do {
          const query: {
            limit: number;
            startTime?: number;
            endTime?: number;
            cursorStartedAt?: number;
            cursorId?: string;
          } = { limit, ...filter, ...(cursor ? { cursorStartedAt: cursor.startedAt, cursorId: cursor.id } : {}) };
          const res = await viewer.api.GET('/api/v1/friends/{friendUserId}/front/history', { params: { path, query } });
          expect(res.response.status).toBe(200);
          seen.push(...res.data!.items.map((i) => i.session._id));
          cursor = res.data!.nextCursor;
        } while (cursor);
        expect(seen, `limit ${limit}, ${JSON.stringify(filter)}`).toEqual(expected);
      }
    }
  });

  // The page walks front_session_buckets (the owner's sessions per bucket, in history order) for
  // each bucket the friend holds, however many members it sees: the same plan for few and many.
  for (const shape of ['few', 'many'] as const) {
    it(`history (${shape} visible members): the first page and a page 4,000 sessions deep read a page's worth of rows, in both plans`, async () => {
      const { owner, viewer } = await friendsSharing(server, { members_view: 'read', front: 'read' });
      const shared = (await owner.api.GET('/api/v1/privacy-buckets')).data!.find((b) => b.slug.startsWith('u_'))!._id;
      const visible = await createMember(owner.api, 'Visible');
      const hidden = await createMember(owner.api, 'Hidden');
      await shareMember(owner, visible, [shared]);
      const knex = server.deps.db.knex;
      if (shape === 'many') {
        // 260 more visible members, straight into the tables; they have no sessions.
        await knex.raw(
          `with made as (
             insert into members (id, user_id, side_system_id, name, created_at, updated_at)
             select gen_random_uuid(), m.user_id, m.side_system_id, 'Extra ' || g, ?::bigint, ?::bigint from members m, generate_series(1, 260) g where m.id = ?
             returning id, user_id)
           insert into privacy_bucket_assignments (user_id, bucket_id, kind, content_id, created_at) select user_id, ?, 'member', id, ?::bigint from made`,
          [now, now, visible, shared, now],
        );
      }
      // 5,000 sessions of each member, a minute apart and interleaved, straight into the table; and as many of another account.
      const seed = (member: string, offset: number) =>
        knex.raw(
          `insert into front_sessions (id, user_id, member_id, side_system_id, started_at, ended_at, created_at, updated_at)
           select gen_random_uuid(), m.user_id, m.id, m.side_system_id, ?::bigint - g * 120000 - ?::bigint, ?::bigint - g * 120000 - ?::bigint + 30000, ?::bigint, ?::bigint
           from members m, generate_series(1, 5000) g where m.id = ?`,
          [now, offset, now, offset, now, now, member],
        );
      await seed(visible, 0);
      await seed(hidden, 60_000);
      const stranger = await server.user();
      await seed(await createMember(stranger.api, 'Other'), 0);
      // The tables as autovacuum leaves them (statistics and the visibility map), as the embedded database's maintenance job does.
      if (server.runtime.maintenance) await server.runtime.maintenance.runOnce();
      else await knex.raw('vacuum analyze front_sessions, front_session_buckets, members, privacy_bucket_assignments');
      const path = fp(owner.userId);
      const limit = 50;
      const deep = await knex('front_sessions')
        .where({ member_id: visible })
        .orderBy([
          { column: 'started_at', order: 'desc' },
          { column: 'id', order: 'desc' },
        ])
        .offset(4000)
        .first('started_at', 'id');
      for (const query of [
        { limit },
        { limit, cursorStartedAt: Number(deep.started_at), cursorId: deep.id as string },
      ]) {
        await viewer.api.GET('/api/v1/friends/{friendUserId}/front/history', { params: { path, query } });
        const statements = await captureStatements(knex, /front_sessions/, async () => {
          const res = await viewer.api.GET('/api/v1/friends/{friendUserId}/front/history', { params: { path, query } });
          expect(res.data!.items).toHaveLength(limit);
          expect(res.data!.items.every((item) => item.member._id === visible)).toBe(true);
        });
        const page = statements.find((st) => /order by/i.test(st.sql))!;
        expect(page, statements.map((st) => st.sql).join('\n')).toBeDefined();
        for (const plan of [
          await explain(knex, page, { analyze: true }),
          await explain(knex, page, { analyze: true, generic: true }),
        ]) {
          const nodes = planNodes(plan);
          const rows = (n: PlanNode) => (n['Actual Rows'] ?? 0) * (n['Actual Loops'] ?? 0);
          const scans = (index: string) => nodes.filter((n) => n['Index Name'] === index);
          for (const table of ['front_sessions', 'front_session_buckets']) {
            expect(
              nodes.filter((n) => n['Node Type'] === 'Seq Scan' && n['Relation Name'] === table),
              JSON.stringify(plan),
            ).toEqual([]);
          }
          // One bucket held: its walk reads the page (limit + 1 rows) and nothing else of the history.
          expect(scans('front_session_buckets_recent').length, JSON.stringify(plan)).toBeGreaterThan(0);
          for (const scan of scans('front_session_buckets_recent'))
            expect(rows(scan), JSON.stringify(plan)).toBe(limit + 1);
          for (const index of ['front_sessions_history', 'front_sessions_member_recent']) {
            for (const scan of scans(index)) expect(rows(scan), JSON.stringify(plan)).toBe(0);
          }
          for (const sort of nodes.filter((n) => n['Node Type'] === 'Sort'))
            expect(rows(sort), JSON.stringify(plan)).toBeLessThanOrEqual(limit + 1);
        }
      }
    }, 120_000); // 15,000 seeded sessions and four analysed plans
  }

  it("friend reads keep the privacy assignments on their indexes: with 12,000 assignments to buckets the viewer does not hold and 3,000 side systems of another account with buckets, no generic plan reads the whole table or every account's system assignments", async () => {
    const {
      owner,
      viewer,
      bucketId: shared,
    } = await friendsSharing(server, {
      members_view: 'read',
      member_profile: 'read',
      member_avatar: 'read',
      member_notes: 'read',
      front: 'read',
    });
    const knex = server.deps.db.knex;
    const others: string[] = [];
    for (let i = 0; i < 4; i++)
      others.push(await createBucket(owner, { members_view: 'read', front: 'read' }, `Other ${i}`));
    const fronting = [await createMember(owner.api, 'Fronting A'), await createMember(owner.api, 'Fronting B')];
    for (const m of fronting) {
      await shareMember(owner, m, [shared]);
      await startFronting(owner.api, m);
    }
    await createEntry(owner.api, 'a visible note', { memberIds: [fronting[0]!] });
    // 3,000 more members straight into the tables, each in the four buckets the viewer does not hold,
    // 40 of them also in the shared one and each with a profile section of its own.
    await knex.raw(
      `with made as (
         insert into members (id, user_id, side_system_id, name, created_at, updated_at)
         select gen_random_uuid(), m.user_id, m.side_system_id, 'Extra ' || g, ?::bigint, ?::bigint from members m, generate_series(1, 3000) g where m.id = ?
         returning id, user_id, name)
       insert into privacy_bucket_assignments (user_id, bucket_id, kind, content_id, section_key, created_at)
       select made.user_id, b.id, 'member', made.id, '', ?::bigint from made cross join unnest(?::uuid[]) b(id)
       union all
       select made.user_id, ?::uuid, k.kind, made.id, k.section, ?::bigint from made cross join (values ('member', ''), ('profile_section', 'avatar')) k(kind, section)
       where made.name in (select 'Extra ' || g from generate_series(1, 40) g)`,
      [now, now, fronting[0]!, now, others, shared, now],
    );
    // And another account whose 3,000 side systems each have a bucket of their own: a friend read
    // learns the owner's hidden systems from the owner's own system assignments, never by reading
    // (or hashing) every account's.
    const stranger = await server.user();
    const strangerBucket = await createBucket(stranger, { members_view: 'read' }, 'Stranger');
    await knex.raw(
      `insert into privacy_bucket_assignments (user_id, bucket_id, kind, content_id, section_key, created_at)
       select ?::uuid, ?::uuid, 'side_system', gen_random_uuid(), '', ?::bigint from generate_series(1, 3000)`,
      [stranger.userId, strangerBucket, now],
    );
    if (server.runtime.maintenance) await server.runtime.maintenance.runOnce();
    else await knex.raw('vacuum analyze members, privacy_bucket_assignments, front_sessions, entries, entry_members');
    const path = fp(owner.userId);
    const routes = {
      members: () => viewer.api.GET('/api/v1/friends/{friendUserId}/members', { params: { path } }),
      front: () => viewer.api.GET('/api/v1/friends/{friendUserId}/front', { params: { path } }),
      history: () => viewer.api.GET('/api/v1/friends/{friendUserId}/front/history', { params: { path } }),
      notes: () => viewer.api.GET('/api/v1/friends/{friendUserId}/entries', { params: { path, query: {} } }),
    };
    for (const [name, call] of Object.entries(routes)) {
      // Every friend statement (its friend_access), whether or not it still reads assignments.
      const statements = await captureStatements(knex, /privacy_bucket_assignments|friend_access/, async () => {
        const res = await call();
        expect(res.response.status, name).toBe(200);
      });
      expect(statements.length, name).toBeGreaterThan(0);
      for (const statement of statements) {
        // The statement's friend_access reads only the columns of friend_grants the statement uses (their marks).
        for (const column of [
          'bucket_ids',
          'hidden_system_ids',
          ...PERMISSION_GROUPS.flatMap((g) => [`${g}_read`, `${g}_read_write`]),
        ]) {
          if (
            !statement.sql.includes('friend_access as materialized') ||
            !new RegExp(`as ${column}\\b`).test(statement.sql)
          )
            continue;
          const read = statement.sql.includes(`(select ${column} from friend_access)`);
          expect(read, `${name}: friend_access reads ${column}, which the statement never uses`).toBe(true);
        }
        const plan = await explain(knex, statement, { analyze: true, generic: true });
        const nodes = planNodes(plan).filter((n) => n['Relation Name'] === 'privacy_bucket_assignments');
        expect(
          nodes.filter((n) => n['Node Type'] === 'Seq Scan'),
          `${name}: ${JSON.stringify(plan)}`,
        ).toEqual([]);
        // What the friend sees is 42 members: no read of the assignments comes near the 12,000 of
        // the owner's other buckets or the stranger's 3,000.
        for (const n of nodes)
          expect(
            (n['Actual Rows'] ?? 0) * (n['Actual Loops'] ?? 0),
            `${name}: ${JSON.stringify(n)}`,
          ).toBeLessThanOrEqual(500);
      }
    }
    expect((await routes.members()).data).toHaveLength(42);
  }, 120_000);

  it('front_session_buckets stays exact through every write (sessions, their corrections, assignments, buckets, purges), and the friend pages follow it', async () => {
    const { owner, viewer, bucketId: held } = await friendsSharing(server, { members_view: 'read', front: 'read' });
    const other = await createBucket(owner, { members_view: 'read', front: 'read' }, 'Not held');
    const knex = server.deps.db.knex;
    // The table against its definition (every session of a member, once per member bucket), both ways, over the whole database.
    const drift = () =>
      listDrift(
        knex,
        `select s.id as session_id, a.bucket_id, s.member_id, s.started_at from privacy_bucket_assignments a
         join front_sessions s on s.member_id = a.content_id where a.kind = 'member' and a.section_key = ''`,
        'select session_id, bucket_id, member_id, started_at from front_session_buckets',
      );
    const path = fp(owner.userId);
    const seen = async () =>
      (await viewer.api.GET('/api/v1/friends/{friendUserId}/front/history', { params: { path } })).data!.items.map(
        (i) => [i.session._id, i.session.startedAt],
      );
    const robin = await createMember(owner.api, 'Robin');
    const sam = await createMember(owner.api, 'Sam');
    // Robin fronts twice before it has any bucket.
    await startFronting(owner.api, robin);
    now += 60_000;
    await owner.api.DELETE('/api/v1/front/members/{memberId}', { params: { path: { memberId: robin } } });
    now += 60_000;
    await startFronting(owner.api, robin);
    const sessions = (await knex('front_sessions')
      .where('member_id', robin)
      .orderBy('started_at')
      .select('id', 'started_at')) as Array<{ id: string; started_at: number }>;
    expect(await drift()).toBe(0);
    expect(await seen()).toEqual([]);
    // Shared afterwards (and put in a bucket the friend does not hold): its earlier sessions are listed.
    await shareMember(owner, robin, [held, other]);
    expect(await drift()).toBe(0);
    expect(await seen()).toEqual([
      [sessions[1]!.id, Number(sessions[1]!.started_at)],
      [sessions[0]!.id, Number(sessions[0]!.started_at)],
    ]);
    // A corrected start moves the session in the friend's pages.
    const earlier = Number(sessions[0]!.started_at) - 3_600_000;
    expect(
      (
        await owner.api.PATCH('/api/v1/front/sessions/{sessionId}', {
          params: { path: { sessionId: sessions[0]!.id } },
          body: { startedAt: earlier },
        })
      ).response.status,
    ).toBe(200);
    expect(await drift()).toBe(0);
    expect((await seen())[1]).toEqual([sessions[0]!.id, earlier]);
    // Out of the held bucket: gone for the friend, still listed under the other.
    await shareMember(owner, robin, [other]);
    expect(await drift()).toBe(0);
    expect(await seen()).toEqual([]);
    // Sam fronts while shared; then the held bucket is deleted.
    await shareMember(owner, robin, [held]);
    await shareMember(owner, sam, [held]);
    await startFronting(owner.api, sam);
    expect(await drift()).toBe(0);
    expect(await seen()).toHaveLength(3);
    expect(
      (await owner.api.DELETE('/api/v1/privacy-buckets/{bucketId}', { params: { path: { bucketId: held } } })).response
        .status,
    ).toBe(204);
    expect(await drift()).toBe(0);
    expect(Number((await knex('front_session_buckets').where('bucket_id', held).count({ n: '*' }))[0]!.n)).toBe(0);
    expect(await seen()).toEqual([]);
    // A purged member's sessions leave with it.
    await knex('members').where('id', robin).delete();
    expect(await drift()).toBe(0);
    expect(Number((await knex('front_session_buckets').where('member_id', robin).count({ n: '*' }))[0]!.n)).toBe(0);
  });

  it('history: the page statements stay constant whatever the number of visible sessions', async () => {
    const { s, viewer } = await writer();
    const path = fp(s.owner.userId);
    const count = async () =>
      (
        await captureStatements(server.deps.db.knex, /front_sessions/, () =>
          viewer.api.GET('/api/v1/friends/{friendUserId}/front/history', { params: { path } }),
        )
      ).length;
    const few = await count();
    for (let i = 0; i < 5; i++) {
      now += 60_000;
      await s.owner.api.DELETE('/api/v1/front/members/{memberId}', { params: { path: { memberId: s.vis1 } } });
      now += 60_000;
      await startFronting(s.owner.api, s.vis1);
    }
    expect(await count()).toBe(few);
  });

  it('month: per UTC day and member, minutes and sessions; range rules; truncation; the tab', async () => {
    const owner = await server.user();
    const viewer = await server.user();
    await relate(owner, viewer, 'accepted');
    const bucketId = await createBucket(owner, { members_view: 'read', front: 'read' });
    await giveFriend(owner, viewer, [bucketId]);
    const m = await createMember(owner.api, 'Robin');
    await shareMember(owner, m, [bucketId]);
    const hidden = await createMember(owner.api, `hidden-${randomUUID()}`);
    const day0 = Math.floor(now / DAY) * DAY + 10 * DAY;
    now = day0 + DAY - 30 * 60_000; // 23:30 UTC
    await startFronting(owner.api, m);
    await startFronting(owner.api, hidden);
    now = day0 + DAY + 45 * 60_000; // 00:45 the next day
    await owner.api.DELETE('/api/v1/front/members/{memberId}', { params: { path: { memberId: m } } });
    await owner.api.DELETE('/api/v1/front/members/{memberId}', { params: { path: { memberId: hidden } } });
    now += 60 * 60_000;
    await startFronting(owner.api, m);
    now += 10 * 60_000;
    await owner.api.DELETE('/api/v1/front/members/{memberId}', { params: { path: { memberId: m } } });
    const path = fp(owner.userId);
    const month = (query: { startTime: number; endTime: number; maxSessions?: number }) =>
      viewer.api.GET('/api/v1/friends/{friendUserId}/front/history/month', { params: { path, query } });
    const res = await month({ startTime: day0, endTime: day0 + 3 * DAY });
    expect(res.response.status).toBe(200);
    const date = (t: number) => new Date(t).toISOString().slice(0, 10);
    expect(res.data).toEqual({
      days: [
        { date: date(day0), members: [{ memberId: m, minutes: 30, sessions: 1 }] },
        { date: date(day0 + DAY), members: [{ memberId: m, minutes: 55, sessions: 2 }] },
      ],
      truncated: false,
    });
    expectNoneOf(res.data, [hidden]);
    expect((await month({ startTime: day0, endTime: day0 + 3 * DAY, maxSessions: 1 })).data).toEqual({
      days: [{ date: date(day0 + DAY), members: [{ memberId: m, minutes: 10, sessions: 1 }] }],
      truncated: true,
    });
    for (const query of [
      { startTime: day0, endTime: day0 },
      { startTime: day0, endTime: day0 + 62 * DAY + 1 },
      { startTime: day0, endTime: day0 + DAY, maxSessions: 0 },
      { startTime: day0, endTime: day0 + DAY, maxSessions: 50001 },
    ]) {
      expect((await month(query)).response.status, JSON.stringify(query)).toBe(400);
    }
    expect((await month({ startTime: day0, endTime: day0 + 62 * DAY })).response.status).toBe(200);
    const noTab = await createBucket(owner, { members_view: 'read' });
    await giveFriend(owner, viewer, [noTab]);
    expect((await month({ startTime: day0, endTime: day0 + DAY })).response.status).toBe(403);
  });
});

describe('notes', { timeout: 120_000 }, () => {
  it("the list considers only the owner's 500 most recent live notes, filtered in SQL", async () => {
    const { s, viewer } = await writer();
    const path = fp(s.owner.userId);
    const list = () =>
      viewer.api.GET('/api/v1/friends/{friendUserId}/entries', { params: { path, query: { limit: 100 } } });
    expect((await list()).data!.map((n) => n._id).sort()).toEqual([s.visNote, s.mixedNote].sort());
    expect(
      (
        await viewer.api.GET('/api/v1/friends/{friendUserId}/entries', {
          params: { path, query: { memberId: s.vis1, limit: 1 } },
        })
      ).data,
    ).toHaveLength(1);
    // The visible notes are the oldest (vis before mixed), then 497 newer notes on the hidden member
    // plus the hidden note: exactly 500 live notes, both visible ones still in the window...
    const knex = server.deps.db.knex;
    await knex('entries')
      .where({ id: s.visNote })
      .update({ updated_at: now - 2 });
    await knex('entries')
      .where({ id: s.mixedNote })
      .update({ updated_at: now - 1 });
    const side = (await knex('entries').where({ id: s.hiddenNote }).first('side_system_id')).side_system_id as string;
    const rows = Array.from({ length: 497 }, (_, i) => ({
      id: randomUUID(),
      user_id: s.owner.userId,
      side_system_id: side,
      sub_system_id: null,
      title: null,
      content: `bulk-${i}`,
      member_id: null,
      member_ids: null,
      created_at: now + 1000 + i,
      updated_at: now + 1000 + i,
      deleted_at: null,
    }));
    await knex.batchInsert('entries', rows, 200);
    await knex.batchInsert(
      'entry_members',
      rows.map((r) => ({ entry_id: r.id, member_id: s.hidden, user_id: s.owner.userId, position: 0 })),
      200,
    );
    expect((await list()).data!.map((n) => n._id).sort()).toEqual([s.visNote, s.mixedNote].sort());
    // ...one more pushes the older of them out of the window.
    await createEntry(s.owner.api, 'newest hidden', { memberIds: [s.hidden] });
    expect((await list()).data!.map((n) => n._id)).toEqual([s.mixedNote]);
    const statements = await captureStatements(knex, /entries/, () => list());
    expect(statements).toHaveLength(1);
  });

  it("entry_link_buckets and entries.sole_member_id stay exact through every write (links, edits, assignments, trash, buckets, purges), and the friend's list follows them", async () => {
    const {
      owner,
      viewer,
      bucketId: held,
    } = await friendsSharing(server, { members_view: 'read', member_notes: 'read' });
    const other = await createBucket(owner, { members_view: 'read', member_notes: 'read' }, 'Not held');
    const knex = server.deps.db.knex;
    // The table against its definition (every link of a note, once per bucket of its member, with the note's updated_at),
    // and each note's sole member against its links (the member of its only link, else null), both ways, over the whole database.
    const drift = async () =>
      (await listDrift(
        knex,
        `select em.entry_id, em.member_id, a.bucket_id, e.updated_at from privacy_bucket_assignments a
         join entry_members em on em.member_id = a.content_id join entries e on e.id = em.entry_id where a.kind = 'member' and a.section_key = ''`,
        'select entry_id, member_id, bucket_id, updated_at from entry_link_buckets',
      )) +
      (await listDrift(
        knex,
        `select e.id, (select case when count(*) = 1 then (array_agg(em.member_id))[1] end from entry_members em where em.entry_id = e.id) from entries e`,
        'select id, sole_member_id from entries',
      ));
    const path = fp(owner.userId);
    const seen = async (limit = 100) =>
      (
        await viewer.api.GET('/api/v1/friends/{friendUserId}/entries', { params: { path, query: { limit } } })
      ).data!.map((n) => n._id);
    const edit = async (entryId: string, body: { content?: string; memberIds?: string[] }) => {
      now += 1000;
      expect(
        (await owner.api.PATCH('/api/v1/entries/{entryId}', { params: { path: { entryId } }, body })).response.status,
      ).toBe(200);
    };
    const robin = await createMember(owner.api, 'Robin');
    const sam = await createMember(owner.api, 'Sam');
    // Notes written before their members have any bucket.
    const n1 = await createEntry(owner.api, 'one', { memberIds: [robin] });
    now += 1000;
    const n2 = await createEntry(owner.api, 'two', { memberIds: [robin, sam] });
    expect(await drift()).toBe(0);
    expect(await seen()).toEqual([]);
    // Robin shared afterwards (and put in a bucket the friend does not hold): its notes are listed.
    await shareMember(owner, robin, [held, other]);
    expect(await drift()).toBe(0);
    expect(await seen()).toEqual([n2, n1]);
    // An edit moves the note up.
    await edit(n1, { content: 'one, edited' });
    expect(await drift()).toBe(0);
    expect(await seen()).toEqual([n1, n2]);
    // Relinked to a member the friend does not see: gone for the friend.
    await edit(n2, { memberIds: [sam] });
    expect(await drift()).toBe(0);
    expect(await seen()).toEqual([n1]);
    // Sam shared too; a note on both shared members is listed once, and the limit counts notes.
    await shareMember(owner, sam, [held]);
    now += 1000;
    const n3 = await createEntry(owner.api, 'three', { memberIds: [robin, sam] });
    expect(await drift()).toBe(0);
    expect(await seen()).toEqual([n3, n2, n1]);
    expect(await seen(2)).toEqual([n3, n2]);
    // A trashed note is skipped (its links stay listed); restored (which dates it now), it is back, first.
    now += 1000;
    expect(
      (await owner.api.DELETE('/api/v1/entries/{entryId}', { params: { path: { entryId: n2 } } })).response.status,
    ).toBe(204);
    expect(await drift()).toBe(0);
    expect(await seen(2)).toEqual([n3, n1]);
    now += 1000;
    expect(
      (await owner.api.POST('/api/v1/entries/{entryId}/restore', { params: { path: { entryId: n2 } } })).response
        .status,
    ).toBeLessThan(300);
    expect(await drift()).toBe(0);
    expect(await seen()).toEqual([n2, n3, n1]);
    // Robin out of the held bucket: its notes go, the note also on Sam stays.
    await shareMember(owner, robin, [other]);
    expect(await drift()).toBe(0);
    expect(await seen()).toEqual([n2, n3]);
    // The held bucket deleted: nothing is listed under it.
    expect(
      (await owner.api.DELETE('/api/v1/privacy-buckets/{bucketId}', { params: { path: { bucketId: held } } })).response
        .status,
    ).toBe(204);
    expect(await drift()).toBe(0);
    expect(Number((await knex('entry_link_buckets').where('bucket_id', held).count({ n: '*' }))[0]!.n)).toBe(0);
    expect(await seen()).toEqual([]);
    // A purged member's links and a purged note leave with them.
    await knex('members').where('id', robin).delete();
    expect(await drift()).toBe(0);
    expect(Number((await knex('entry_link_buckets').where('member_id', robin).count({ n: '*' }))[0]!.n)).toBe(0);
    await knex('entries').where('id', n3).delete();
    expect(await drift()).toBe(0);
    expect(Number((await knex('entry_link_buckets').where('entry_id', n3).count({ n: '*' }))[0]!.n)).toBe(0);
  });

  it("a note's sole member is written with its row: creating a note never updates the row again, and a relink sets it by the link triggers", async () => {
    const { owner } = await friendsSharing(server, { members_view: 'read', member_notes: 'read' });
    const knex = server.deps.db.knex;
    // Every update of a row of entries, as its sole member before and after.
    await knex.raw('create table test_entry_updates (n bigserial, entry_id uuid, old_sole uuid, new_sole uuid)');
    await knex.raw(`create function test_entry_updates() returns trigger language plpgsql as $$
      begin
        insert into test_entry_updates (entry_id, old_sole, new_sole) values (new.id, old.sole_member_id, new.sole_member_id);
        return null;
      end $$`);
    await knex.raw(
      'create trigger test_entry_updates after update on entries for each row execute function test_entry_updates()',
    );
    const updates = async () =>
      (await knex('test_entry_updates').select('entry_id', 'old_sole', 'new_sole').orderBy('n')) as Array<{
        entry_id: string;
        old_sole: string | null;
        new_sole: string | null;
      }>;
    const relink = async (entryId: string, memberIds: string[]) =>
      expect(
        (await owner.api.PATCH('/api/v1/entries/{entryId}', { params: { path: { entryId } }, body: { memberIds } }))
          .response.status,
      ).toBe(200);
    try {
      const robin = await createMember(owner.api, 'Robin');
      const sam = await createMember(owner.api, 'Sam');
      const one = await createEntry(owner.api, 'one', { memberIds: [robin] });
      const two = await createEntry(owner.api, 'two', { memberIds: [robin, sam] });
      expect(await updates()).toEqual([]);
      expect(await knex('entries').whereIn('id', [one, two]).orderBy('title').pluck('sole_member_id')).toEqual([
        robin,
        null,
      ]);
      // Relinked (the links are deleted, then written again): the link triggers follow, and the row ends right.
      await relink(two, [sam]);
      await relink(one, [sam, robin]);
      expect(await knex('entries').whereIn('id', [one, two]).orderBy('title').pluck('sole_member_id')).toEqual([
        null,
        sam,
      ]);
      expect((await updates()).filter((u) => u.old_sole !== u.new_sole)).toEqual([
        { entry_id: two, old_sole: null, new_sole: sam },
        { entry_id: one, old_sole: robin, new_sole: null },
      ]);
    } finally {
      await knex.raw('drop trigger test_entry_updates on entries');
      await knex.raw('drop function test_entry_updates()');
      await knex.raw('drop table test_entry_updates');
    }
  });

  it('memberId: only the notes linking that member, and only when that link is readable; members lists the readable links in link order', async () => {
    const {
      owner,
      viewer,
      bucketId: held,
    } = await friendsSharing(server, { members_view: 'read', member_notes: 'read' });
    // A held bucket granting member_notes without members_view: its members' links are listed
    // under a bucket the friend holds, yet those members are not readable.
    const notesOnly = await createBucket(owner, { member_notes: 'read' }, 'Notes only');
    await giveFriend(owner, viewer, [held, notesOnly]);
    const robin = await createMember(owner.api, 'Robin');
    const sam = await createMember(owner.api, 'Sam');
    const quiet = await createMember(owner.api, 'Quiet');
    await shareMember(owner, robin, [held]);
    await shareMember(owner, sam, [held]);
    await shareMember(owner, quiet, [notesOnly]);
    const note = async (text: string, memberIds: string[]) => {
      now += 1000;
      return createEntry(owner.api, text, { memberIds });
    };
    const a = await note('a', [robin]);
    const b = await note('b', [robin, sam]);
    const c = await note('c', [quiet, sam]);
    await note('d', [quiet]);
    const path = fp(owner.userId);
    const list = async (query: { memberId?: string; limit?: number }) =>
      (await viewer.api.GET('/api/v1/friends/{friendUserId}/entries', { params: { path, query } })).data!;
    const all = await list({});
    expect(all.map((n) => n._id)).toEqual([c, b, a]);
    expect(all.map((n) => n.members.map((m) => m.id))).toEqual([[sam], [robin, sam], [robin]]);
    expect(all.map((n) => n.member?.id)).toEqual([sam, robin, robin]);
    expectNoneOf(all, [quiet, 'Quiet']);
    expect((await list({ memberId: robin })).map((n) => n._id)).toEqual([b, a]);
    expect((await list({ memberId: sam })).map((n) => n._id)).toEqual([c, b]);
    expect((await list({ memberId: sam, limit: 1 })).map((n) => n._id)).toEqual([c]);
    // c is visible (through Sam) and listed under a held bucket through Quiet: not Quiet's notes.
    expect(await list({ memberId: quiet })).toEqual([]);
    expect(await list({ memberId: UNKNOWN_ID })).toEqual([]);
    // Link order is the note's, whatever order the members were read in.
    const e = await note('e', [sam, robin]);
    expect((await list({ limit: 1 }))[0]).toMatchObject({
      _id: e,
      members: [
        { id: sam, name: 'Sam' },
        { id: robin, name: 'Robin' },
      ],
    });
  });

  it('a note of one link is decided from its sole member as a note of several links is from all of them: read, read_write, hidden, trashed, memberId, relinked', async () => {
    const {
      owner,
      viewer,
      bucketId: rw,
    } = await friendsSharing(server, { members_view: 'read', member_notes: 'read_write' });
    const ro = await createBucket(owner, { members_view: 'read', member_notes: 'read' }, 'Read only');
    await giveFriend(owner, viewer, [rw, ro]);
    const writable = await createMember(owner.api, 'Writable');
    const readable = await createMember(owner.api, 'Readable');
    const hidden = await createMember(owner.api, 'Hidden');
    const trashed = await createMember(owner.api, 'Trashed');
    await shareMember(owner, writable, [rw]);
    await shareMember(owner, readable, [ro]);
    await shareMember(owner, trashed, [rw]);
    const note = async (text: string, memberIds: string[]) => {
      now += 1000;
      return createEntry(owner.api, text, { memberIds });
    };
    const w = await note('w', [writable]);
    const r = await note('r', [readable]);
    const h = await note('h', [hidden]);
    const tr = await note('t', [trashed]);
    const wr = await note('wr', [writable, readable]);
    expect(
      (await owner.api.DELETE('/api/v1/members/{memberId}', { params: { path: { memberId: trashed } } })).response
        .status,
    ).toBe(204);
    const path = fp(owner.userId);
    const list = async (query: { memberId?: string } = {}) =>
      (await viewer.api.GET('/api/v1/friends/{friendUserId}/entries', { params: { path, query } })).data!.map((n) => ({
        id: n._id,
        members: n.members.map((m) => m.name),
        member: n.member?.name ?? null,
        write: n.viewerCanWrite,
      }));
    const all = await list();
    expect(all).toEqual([
      { id: wr, members: ['Writable', 'Readable'], member: 'Writable', write: false },
      { id: r, members: ['Readable'], member: 'Readable', write: false },
      { id: w, members: ['Writable'], member: 'Writable', write: true },
    ]);
    expectNoneOf(all, [hidden, 'Hidden', trashed, 'Trashed', h, tr]);
    expect((await list({ memberId: writable })).map((n) => n.id)).toEqual([wr, w]);
    expect((await list({ memberId: readable })).map((n) => n.id)).toEqual([wr, r]);
    expect(await list({ memberId: hidden })).toEqual([]);
    expect(await list({ memberId: trashed })).toEqual([]);
    // Relinked: one link to two (one hidden), back to one hidden, a hidden note to a readable member.
    const relink = async (entryId: string, memberIds: string[]) => {
      now += 1000;
      expect(
        (await owner.api.PATCH('/api/v1/entries/{entryId}', { params: { path: { entryId } }, body: { memberIds } }))
          .response.status,
      ).toBe(200);
    };
    await relink(w, [writable, hidden]);
    expect((await list())[0]).toEqual({ id: w, members: ['Writable'], member: 'Writable', write: false });
    await relink(w, [hidden]);
    await relink(h, [readable]);
    expect(await list()).toEqual([
      { id: h, members: ['Readable'], member: 'Readable', write: false },
      { id: wr, members: ['Writable', 'Readable'], member: 'Writable', write: false },
      { id: r, members: ['Readable'], member: 'Readable', write: false },
    ]);
    // The trashed member restored: its note is back, writable.
    expect(
      (await owner.api.POST('/api/v1/members/{memberId}/restore', { params: { path: { memberId: trashed } } })).response
        .status,
    ).toBeLessThan(300);
    expect((await list({ memberId: trashed })).map((n) => ({ id: n.id, write: n.write }))).toEqual([
      { id: tr, write: true },
    ]);
  });

  // The list walks entry_link_buckets for each bucket the friend holds, down to the window's last
  // note: the same plan whether the friend sees a few of the window's notes or all of them.
  for (const shape of ['few', 'many'] as const) {
    it(`notes (${shape} visible in the window): the list reads the held bucket's links in the window (at most a page), never each of the window's notes`, async () => {
      const {
        owner,
        viewer,
        bucketId: shared,
      } = await friendsSharing(server, { members_view: 'read', member_notes: 'read' });
      const other = await createBucket(owner, { members_view: 'read', member_notes: 'read' }, 'Not held');
      const visible = await createMember(owner.api, 'Visible');
      const hidden = await createMember(owner.api, 'Hidden');
      await shareMember(owner, visible, [shared]);
      await shareMember(owner, hidden, [other]);
      const knex = server.deps.db.knex;
      // 3,000 notes straight into the tables, a second apart: every 300th on the visible member
      // (few) or every other one (many), the rest on the hidden member; and as many of another account.
      const seed = async (userId: string, member: (g: number) => string) => {
        const side = (await knex('members').where('id', member(0)).first('side_system_id')).side_system_id as string;
        const rows = Array.from({ length: 3000 }, (_, g) => ({
          id: randomUUID(),
          user_id: userId,
          side_system_id: side,
          content: `bulk-${g}`,
          created_at: now - g * 1000,
          updated_at: now - g * 1000,
        }));
        await knex.batchInsert('entries', rows, 500);
        await knex.batchInsert(
          'entry_members',
          rows.map((r, g) => ({ entry_id: r.id, member_id: member(g), user_id: userId, position: 0 })),
          500,
        );
        return rows.map((r) => r.id);
      };
      const every = shape === 'few' ? 300 : 2;
      const ids = await seed(owner.userId, (g) => (g % every === 0 ? visible : hidden));
      const stranger = await server.user();
      const strangerMember = await createMember(stranger.api, 'Other');
      await seed(stranger.userId, () => strangerMember);
      if (server.runtime.maintenance) await server.runtime.maintenance.runOnce();
      else
        await knex.raw(
          'vacuum analyze entries, entry_members, entry_link_buckets, members, privacy_bucket_assignments',
        );
      const path = fp(owner.userId);
      const limit = 50;
      const expected = ids
        .slice(0, 500) // the spec's window of the owner's most recent notes
        .filter((_, g) => g % every === 0)
        .slice(0, limit);
      const list = () =>
        viewer.api.GET('/api/v1/friends/{friendUserId}/entries', { params: { path, query: { limit } } });
      await list();
      const statements = await captureStatements(knex, /entry_link_buckets/, async () => {
        const res = await list();
        expect(res.data!.map((n) => n._id)).toEqual(expected);
      });
      expect(statements).toHaveLength(1);
      for (const plan of [
        await explain(knex, statements[0]!, { analyze: true }),
        await explain(knex, statements[0]!, { analyze: true, generic: true }),
      ]) {
        const nodes = planNodes(plan);
        const rows = (n: PlanNode) => (n['Actual Rows'] ?? 0) * (n['Actual Loops'] ?? 0);
        // (members is left out: this database has a few dozen, which a plan may rightly read whole.)
        for (const table of ['entries', 'entry_members', 'entry_link_buckets']) {
          expect(
            nodes.filter((n) => n['Node Type'] === 'Seq Scan' && n['Relation Name'] === table),
            JSON.stringify(plan),
          ).toEqual([]);
        }
        // One bucket held: its walk reads the visible links of the window, at most a page of them.
        const walks = nodes.filter((n) => n['Index Name'] === 'entry_link_buckets_recent');
        expect(walks.length, JSON.stringify(plan)).toBeGreaterThan(0);
        for (const walk of walks) expect(rows(walk), JSON.stringify(plan)).toBe(expected.length);
        // Every note here has one link: each is decided from its sole member (entries.sole_member_id), no link is read.
        for (const scan of nodes.filter((n) => n['Relation Name'] === 'entry_members'))
          expect(rows(scan), JSON.stringify(plan)).toBe(0);
        for (const sort of nodes.filter((n) => n['Node Type'] === 'Sort'))
          expect(rows(sort), JSON.stringify(plan)).toBeLessThanOrEqual(limit);
      }
    }, 120_000);
  }

  it("a friend's note is one statement: the friendship, the rights on each link, the note, its event and its audit row", async () => {
    const { s, viewer } = await writer();
    const create = (body: { content: string; memberIds?: string[]; memberId?: string }) =>
      viewer.api.POST('/api/v1/friends/{friendUserId}/entries', { params: { path: fp(s.owner.userId) }, body });
    expect((await create({ content: 'warm-up', memberId: s.vis1 })).response.status).toBe(201);
    let res: Awaited<ReturnType<typeof create>> | undefined;
    const statements = await captureStatements(server.deps.db.knex, REQUEST_WORK, async () => {
      res = await create({ content: 'from a friend', memberIds: [s.vis2, s.vis1] });
    });
    expect(res!.response.status).toBe(201);
    // docs/data-access.md, "Writes in one statement": no BEGIN, no COMMIT, no statement of its own for the friendship.
    expect(
      statements.map((st) => st.sql.split(/\s+/).slice(0, 3).join(' ')),
      JSON.stringify(statements.map((st) => st.sql)),
    ).toEqual(['with friend_access as']);
    expect(statements[0]!.sql).toMatch(
      /insert into entries[\s\S]*insert into entry_members[\s\S]*insert into events[\s\S]*insert into audit_events/,
    );
    const id = res!.data!.id;
    const detail = await s.owner.api.GET('/api/v1/entries/{entryId}', { params: { path: { entryId: id } } });
    expect(detail.data).toMatchObject({ content: 'from a friend', memberIds: [s.vis2, s.vis1], memberId: null });
    const event = await server.deps.db
      .knex('events')
      .where({ account_id: s.owner.userId, type: 'entry.created' })
      .orderBy('id', 'desc')
      .first();
    expect([event.data, event.actor]).toEqual([{ id }, { kind: 'friend', id: viewer.userId }]);
    const created = (await auditActions(s.owner)).filter((a) => a.action === 'friend_write.entry.create');
    expect(created).toHaveLength(2);
    expect(created).toContainEqual({
      action: 'friend_write.entry.create',
      detail: { friendUserId: viewer.userId },
      targetId: id,
    });
  });

  it("a friend's keyed note is one statement (the note storing its answer under the key); a replay finds the key taken", async () => {
    const { s, viewer } = await writer();
    const body = JSON.stringify({ content: 'keyed from a friend', memberIds: [s.vis2, s.vis1] });
    const create = (key: string) =>
      server.fetch(`/api/v1/friends/${s.owner.userId}/entries`, {
        method: 'POST',
        headers: { ...jsonHeaders(viewer.apiKey), 'Idempotency-Key': key },
        body,
      });
    expect((await create('warm-up')).status).toBe(201); // warms the key cache
    let first = '';
    const statements = await captureStatements(server.deps.db.knex, REQUEST_WORK, async () => {
      const res = await create('friend-note');
      expect(res.status).toBe(201);
      first = await res.text();
    });
    expect(
      statements.map((st) => st.sql.split(/\s+/).slice(0, 3).join(' ')),
      JSON.stringify(statements.map((st) => st.sql)),
    ).toEqual(['with friend_access as']);
    expect(statements[0]!.sql).toMatch(
      /insert into entries[\s\S]*insert into idempotency_keys[\s\S]*insert into events/,
    );
    const replayed = await captureStatements(server.deps.db.knex, REQUEST_WORK, async () => {
      const again = await create('friend-note');
      expect([again.status, await again.text(), again.headers.get('idempotent-replayed')]).toEqual([
        201,
        first,
        'true',
      ]);
    });
    expect(replayed.map((st) => st.sql.split(/\s+/).slice(0, 3).join(' '))).toEqual([
      'with friend_access as',
      'select id, fingerprint,',
    ]);
    const created = (await auditActions(s.owner)).filter((a) => a.action === 'friend_write.entry.create');
    expect(created.map((a) => a.targetId)).toContain(JSON.parse(first).id);
    expect(created).toHaveLength(2);
  });

  it("concurrent friend notes take a member's last slot under the owner's cap once", async () => {
    const { s, viewer } = await writer();
    const cap = server.deps.config.noteCaps.pro;
    const knex = server.deps.db.knex;
    const side = (await knex('entries').where({ id: s.hiddenNote }).first('side_system_id')).side_system_id as string;
    const bulk = Array.from({ length: cap - 1 }, () => randomUUID());
    await knex.batchInsert(
      'entries',
      bulk.map((id) => ({
        id,
        user_id: s.owner.userId,
        side_system_id: side,
        sub_system_id: null,
        title: null,
        content: 'cap',
        member_id: null,
        member_ids: null,
        created_at: 1,
        updated_at: 1,
        deleted_at: null,
      })),
      200,
    );
    await knex.batchInsert(
      'entry_members',
      bulk.map((id) => ({ entry_id: id, member_id: s.vis2, user_id: s.owner.userId, position: 0 })),
      200,
    );
    // One slot left; sixteen notes at once (on PostgreSQL, some start before another commits).
    const results = await Promise.all(
      Array.from({ length: 16 }, (_, i) =>
        viewer.api.POST('/api/v1/friends/{friendUserId}/entries', {
          params: { path: fp(s.owner.userId) },
          body: { content: `race ${i}`, memberId: s.vis2 },
        }),
      ),
    );
    expect(results.filter((r) => r.response.status === 201)).toHaveLength(1);
    expect(results.filter((r) => r.error?.code === 'NOTE_LIMIT_REACHED')).toHaveLength(15);
    const linked = await knex('entry_members as em')
      .join('entries as e', 'e.id', 'em.entry_id')
      .where({ 'em.member_id': s.vis2 })
      .whereNull('e.deleted_at')
      .count<Array<{ count: string | number }>>('* as count');
    expect(Number(linked[0]!.count)).toBe(cap);
    expect((await auditActions(s.owner)).filter((a) => a.action === 'friend_write.entry.create')).toHaveLength(1);
  });

  it('writes: at least one member, the note cap, links before and after, trash', async () => {
    const { s, viewer } = await writer();
    const path = fp(s.owner.userId);
    const before = await snapshot(s.owner);
    const create = (body: { content: string; memberIds?: string[]; memberId?: string }) =>
      viewer.api.POST('/api/v1/friends/{friendUserId}/entries', { params: { path }, body });
    expect((await create({ content: 'no member' })).response.status).toBe(400);
    expect((await create({ content: 'x', memberIds: [s.vis1, s.hidden] })).error).toEqual(notFoundMember);
    const patch = (entryId: string, body: Record<string, unknown>) =>
      viewer.api.PATCH('/api/v1/friends/{friendUserId}/entries/{entryId}', {
        params: { path: { ...path, entryId } },
        body,
      });
    expect((await patch(s.visNote, { memberIds: [s.hidden] })).error).toEqual(notFoundMember);
    expect((await patch(s.visNote, { memberIds: [] })).response.status).toBe(400);
    expect((await patch(UNKNOWN_ID, { content: 'x' })).error).toEqual(notFoundEntry);
    expect(await snapshot(s.owner)).toBe(before);
    expect((await patch(s.visNote, { memberIds: [s.vis1, s.vis2], title: 'both' })).response.status).toBe(204);
    const detail = await s.owner.api.GET('/api/v1/entries/{entryId}', { params: { path: { entryId: s.visNote } } });
    expect(detail.data!.memberIds).toEqual([s.vis1, s.vis2]);
    // A trashed note is gone for the friend.
    expect(
      (
        await viewer.api.DELETE('/api/v1/friends/{friendUserId}/entries/{entryId}', {
          params: { path: { ...path, entryId: s.visNote } },
        })
      ).response.status,
    ).toBe(204);
    expect(
      (
        await viewer.api.DELETE('/api/v1/friends/{friendUserId}/entries/{entryId}', {
          params: { path: { ...path, entryId: s.visNote } },
        })
      ).error,
    ).toEqual(notFoundEntry);
    // The owner's note cap (free plan) applies: 403 NOTE_LIMIT_REACHED.
    const cap = server.deps.config.noteCaps.pro;
    const bulk = Array.from({ length: cap }, () => ({ id: randomUUID() }));
    const knex = server.deps.db.knex;
    const side = (await knex('entries').where({ id: s.hiddenNote }).first('side_system_id')).side_system_id as string;
    await knex.batchInsert(
      'entries',
      bulk.map((b) => ({
        id: b.id,
        user_id: s.owner.userId,
        side_system_id: side,
        sub_system_id: null,
        title: null,
        content: 'cap',
        member_id: null,
        member_ids: null,
        created_at: 1,
        updated_at: 1,
        deleted_at: null,
      })),
      200,
    );
    await knex.batchInsert(
      'entry_members',
      bulk.map((b) => ({ entry_id: b.id, member_id: s.vis2, user_id: s.owner.userId, position: 0 })),
      200,
    );
    const capped = await create({ content: 'over the cap', memberId: s.vis2 });
    expect(capped.response.status).toBe(403);
    expect((capped.error as { code: string }).code).toBe('NOTE_LIMIT_REACHED');
    expect((await auditActions(s.owner)).map((a) => a.action).sort()).toEqual([
      'friend_write.entry.delete',
      'friend_write.entry.update',
    ]);
  });
});

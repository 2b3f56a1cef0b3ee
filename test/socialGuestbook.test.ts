import { execFileSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { UNKNOWN_ID } from './helpers/fixtures.ts';
import { befriend, expectNoneOf } from './helpers/friends.ts';
import { captureStatements, REQUEST_WORK } from './helpers/plans.ts';
import { jsonHeaders, useServer, type TestUser } from './helpers/server.ts';

let now = 1_800_000_000_000;
const server = useServer({ clock: () => now });

async function widget(
  u: TestUser,
  config: Record<string, unknown> = { kind: 'guestbook' },
  visibility = 'public',
): Promise<string> {
  const res = await u.api.POST('/api/v1/social/widgets', {
    body: { type: config.kind, config, visibility, size: 'medium' } as never,
  });
  expect(res.response.status, JSON.stringify(res.error)).toBe(201);
  return res.data!.widgetId;
}

const wp = (widgetId: string) => ({ params: { path: { widgetId } } });

async function post(u: TestUser, widgetId: string, body: Record<string, unknown>) {
  return u.api.POST('/api/v1/social/widgets/{widgetId}/guestbook', { ...wp(widgetId), body: body as never });
}

async function friendPost(u: TestUser, owner: TestUser, widgetId: string, body: Record<string, unknown>) {
  return u.api.POST('/api/v1/friends/{friendUserId}/social/widgets/{widgetId}/guestbook', {
    params: { path: { friendUserId: owner.userId, widgetId } },
    body: body as never,
  });
}

async function list(u: TestUser, widgetId: string, query: { limit?: number; cursor?: number } = {}) {
  const res = await u.api.GET('/api/v1/social/widgets/{widgetId}/guestbook', { params: { path: { widgetId }, query } });
  expect(res.response.status, JSON.stringify(res.error)).toBe(200);
  return res.data!;
}

describe('guestbook posting and listing', () => {
  it('posts and replies; threads newest first with replies oldest first; message shape', async () => {
    const owner = await server.user({ account: { displayName: 'Owner' } });
    const gb = await widget(owner, { kind: 'guestbook', allowAnonymous: true });
    now += 1000;
    const first = await post(owner, gb, { body: '  Hello there  ' });
    expect(first.response.status).toBe(201);
    expect(first.data).toEqual({
      id: first.data!.id,
      ownerUserId: owner.userId,
      parentMessageId: null,
      authorUserId: owner.userId,
      authorDisplayName: 'Owner',
      postedAnonymously: false,
      body: 'Hello there',
      createdAt: now,
      hiddenByOwner: false,
      displayName: 'Owner',
      authorAvatarUrl: null,
      authorStatus: { isAdmin: false, planKey: 'pro', donorSupporterUnlocked: false, closedBetaParticipantAt: null },
    });
    now += 1000;
    const second = (await post(owner, gb, { body: 'Second' })).data!;
    now += 1000;
    const r2 = (await post(owner, gb, { body: 'reply later', parentMessageId: first.data!.id })).data!;
    now += 1000;
    const anon = (await post(owner, gb, { body: 'anon reply', parentMessageId: first.data!.id, postAnonymously: true }))
      .data!;
    expect(anon).toMatchObject({
      postedAnonymously: true,
      displayName: 'Anonymous',
      authorUserId: owner.userId,
      parentMessageId: first.data!.id,
    });
    const page = await list(owner, gb);
    expect(page.nextCursor).toBeNull();
    expect(page.threads.map((t) => [t.id, t.replies.map((r) => r.id)])).toEqual([
      [second.id, []],
      [first.data!.id, [r2.id, anon.id]],
    ]);
    expect(page.threads[1]!.replies[1]!.authorUserId).toBe(owner.userId);
  });

  it('body limits after trimming; anonymous only when allowed; parent rules', async () => {
    const owner = await server.user();
    const gb = await widget(owner);
    const other = await widget(owner, { kind: 'guestbook', allowAnonymous: true });
    expect((await post(owner, gb, { body: 'x'.repeat(500) })).response.status).toBe(201);
    expect((await post(owner, gb, { body: `  ${'x'.repeat(500)}\n` })).response.status).toBe(201);
    for (const body of ['', '   ', 'x'.repeat(501), `  ${'x'.repeat(501)}  `]) {
      expect((await post(owner, gb, { body })).response.status, `len ${body.length}`).toBe(400);
    }
    const anon = await post(owner, gb, { body: 'hi', postAnonymously: true });
    expect(anon.response.status).toBe(400);
    expect(anon.error!.message).toBe('This guestbook does not allow anonymous posts');
    const top = (await post(owner, gb, { body: 'top' })).data!.id;
    const reply = (await post(owner, gb, { body: 'reply', parentMessageId: top })).data!.id;
    const elsewhere = (await post(owner, other, { body: 'other book' })).data!.id;
    for (const parentMessageId of [reply, elsewhere, UNKNOWN_ID]) {
      const res = await post(owner, gb, { body: 'x', parentMessageId });
      expect(res.response.status).toBe(400);
      expect(res.error!.message).toBe('parentMessageId must be a top-level message of this guestbook');
    }
    expect((await post(owner, gb, { body: 'x', extra: true })).response.status).toBe(400);
    expect((await list(owner, gb)).threads).toHaveLength(3);
  });

  it('the widget must be the key holder’s guestbook (404 otherwise, nothing leaks)', async () => {
    const owner = await server.user();
    const stranger = await server.user();
    const gb = await widget(owner);
    const status = await widget(owner, { kind: 'status', statusText: 'x' });
    const secret = (await post(owner, gb, { body: 'secret words' })).data!.id;
    for (const [u, w] of [
      [stranger, gb],
      [owner, status],
      [owner, UNKNOWN_ID],
    ] as const) {
      const res = await u.api.GET('/api/v1/social/widgets/{widgetId}/guestbook', { params: { path: { widgetId: w } } });
      expect(res.response.status).toBe(404);
      expectNoneOf(res.error, [secret, 'secret words']);
      expect((await post(u, w, { body: 'x' })).response.status).toBe(404);
    }
    const scoped = await server.user({ scopes: { guestbook: 'read' } });
    const own = await widget(await server.user());
    expect((await post(scoped, own, { body: 'x' })).response.status).toBe(403);
  });

  it('posts and replies in one statement each: the checks, the message, its event and the answer', async () => {
    const owner = await server.user();
    const gb = await widget(owner, { kind: 'guestbook', allowAnonymous: true });
    const top = (await post(owner, gb, { body: 'top' })).data!.id; // warms the key cache
    for (const body of [{ body: 'another' }, { body: 'a reply', parentMessageId: top, postAnonymously: true }]) {
      let res: Awaited<ReturnType<typeof post>> | undefined;
      const statements = await captureStatements(server.deps.db.knex, REQUEST_WORK, async () => {
        res = await post(owner, gb, body);
      });
      expect(res!.response.status).toBe(201);
      // docs/data-access.md, "Writes in one statement": no BEGIN, no COMMIT.
      expect(
        statements.map((st) => st.sql.split(/\s+/).slice(0, 3).join(' ')),
        JSON.stringify(statements.map((st) => st.sql)),
      ).toEqual(['with widget as']);
      expect(statements[0]!.sql).toMatch(/insert into guestbook_messages[\s\S]*insert into events/);
    }
    const events = await server.deps.db.knex('events').where({ account_id: owner.userId, type: 'guestbook.posted' });
    expect(events).toHaveLength(3);
  });

  it("a keyed post is two statements (the author's card read ahead, the post storing its answer under the key); a replay finds the key taken", async () => {
    const owner = await server.user();
    const gb = await widget(owner);
    await post(owner, gb, { body: 'warm-up' }); // warms the key cache
    const keyed = (key: string, body: string) =>
      server.fetch(`/api/v1/social/widgets/${gb}/guestbook`, {
        method: 'POST',
        headers: { ...jsonHeaders(owner.apiKey), 'Idempotency-Key': key },
        body: JSON.stringify({ body }),
      });
    now += 1;
    let first = '';
    const statements = await captureStatements(server.deps.db.knex, REQUEST_WORK, async () => {
      const res = await keyed('gb-1', 'keyed');
      expect(res.status).toBe(201);
      first = await res.text();
    });
    expect(
      statements.map((st) => st.sql.split(/\s+/).slice(0, 3).join(' ')),
      JSON.stringify(statements.map((st) => st.sql)),
    ).toEqual(['select a.display_name, a.image_url,', 'with widget as']);
    expect(statements[1]!.sql).toMatch(
      /insert into guestbook_messages[\s\S]*insert into idempotency_keys[\s\S]*insert into events/,
    );
    const { replies: _, ...listed } = (await list(owner, gb)).threads[0]!;
    expect(JSON.parse(first)).toEqual(listed);
    const replayed = await captureStatements(server.deps.db.knex, REQUEST_WORK, async () => {
      const again = await keyed('gb-1', 'keyed');
      expect([again.status, await again.text(), again.headers.get('idempotent-replayed')]).toEqual([
        201,
        first,
        'true',
      ]);
    });
    expect(replayed.map((st) => st.sql.split(/\s+/).slice(0, 3).join(' '))).toEqual([
      'select a.display_name, a.image_url,',
      'with widget as',
      'select id, fingerprint,',
    ]);

    // The author's card changes between the read ahead and the post: the post writes nothing and the
    // request runs in a transaction, answering with the new card. On PostgreSQL the change commits
    // (the process waits for psql) as the post goes out; the embedded database has one connection,
    // and the change asked for it first.
    const knex = server.deps.db.knex;
    const rename = `update accounts set display_name = 'Renamed' where id = '${owner.userId}'`;
    let renamed: Promise<unknown> | undefined;
    const interleave = (q: { sql: string }) => {
      if (renamed) return;
      if (server.databaseUrl && /^with widget as[\s\S]*idempotency_keys/.test(q.sql.trim())) {
        execFileSync('psql', [server.databaseUrl, '-qc', rename]);
        renamed = Promise.resolve();
      } else if (!server.databaseUrl && /^select a\.display_name/.test(q.sql.trim())) {
        // A knex query runs once it is asked for its result.
        renamed = knex.raw(rename).then(() => undefined);
      }
    };
    now += 1;
    knex.on('query', interleave);
    let stale = '';
    let words: string[];
    try {
      words = (
        await captureStatements(knex, REQUEST_WORK, async () => {
          const res = await keyed('gb-2', 'stale');
          expect(res.status).toBe(201);
          stale = await res.text();
        })
      )
        .filter((st) => !st.sql.startsWith('update accounts'))
        .map((st) => st.sql.split(/\s+/).slice(0, 3).join(' ').toLowerCase());
    } finally {
      knex.off('query', interleave);
    }
    await renamed;
    expect(words).toEqual([
      'select a.display_name, a.image_url,',
      'with widget as',
      'begin;',
      'select pg_try_advisory_xact_lock(hashtextextended($1, 0))',
      'with widget as',
      'insert into idempotency_keys',
      'commit;',
    ]);
    expect(JSON.parse(stale)).toMatchObject({ body: 'stale', authorDisplayName: 'Renamed', displayName: 'Renamed' });
    const threads = (await list(owner, gb)).threads;
    expect(threads.map((t) => t.body)).toEqual(['stale', 'keyed', 'warm-up']);
    expect((await keyed('gb-2', 'stale')).headers.get('idempotent-replayed')).toBe('true');
  });

  it('limit and cursor bounds', async () => {
    const owner = await server.user();
    const gb = await widget(owner);
    for (const query of [{ limit: 0 }, { limit: 101 }, { cursor: 0 }, { cursor: -5 }]) {
      expect(
        (
          await owner.api.GET('/api/v1/social/widgets/{widgetId}/guestbook', {
            params: { path: { widgetId: gb }, query },
          })
        ).response.status,
        JSON.stringify(query),
      ).toBe(400);
    }
    expect((await list(owner, gb, { limit: 100 })).threads).toEqual([]);
    expect((await list(owner, gb, { limit: 1 })).threads).toEqual([]);
  });

  it('pages by createdAt without dropping or repeating threads that share a timestamp', async () => {
    const owner = await server.user();
    const gb = await widget(owner);
    const t0 = now + 10_000;
    // createdAt: 5 threads at t0+3, 3 at t0+2, 1 at t0+1, 30 at t0 (more than the default limit).
    const plan = [...Array(30).fill(0), 1, 2, 2, 2, 3, 3, 3, 3, 3];
    const ids: string[] = [];
    for (const d of plan) {
      now = t0 + d;
      ids.push((await post(owner, gb, { body: `m${ids.length}` })).data!.id);
    }
    const seen: string[] = [];
    const sizes: number[] = [];
    let cursor: number | undefined;
    for (let i = 0; i < 20; i++) {
      const page = await list(owner, gb, { limit: 2, ...(cursor ? { cursor } : {}) });
      seen.push(...page.threads.map((t) => t.id));
      sizes.push(page.threads.length);
      if (page.nextCursor === null) break;
      expect(page.nextCursor).toBe(page.threads[page.threads.length - 1]!.createdAt);
      cursor = page.nextCursor;
    }
    expect(new Set(seen).size).toBe(seen.length);
    expect(seen.sort()).toEqual([...ids].sort());
    // Each page completes the run of its boundary timestamp: the 5 at t0+3, the 3 at t0+2, then
    // the one at t0+1 with the whole run of 30 at t0.
    expect(sizes).toEqual([5, 3, 31]);
    const defaultPage = await list(owner, gb);
    expect(defaultPage.threads).toHaveLength(39); // the 25-thread boundary lands in the t0 run, completed on the page
    expect(defaultPage.nextCursor).toBeNull();
    const exact = await list(owner, gb, { limit: 9 });
    expect(exact.threads).toHaveLength(9);
    expect(exact.nextCursor).toBe(t0 + 1);
    expect((await list(owner, gb, { cursor: t0 + 1 })).threads).toHaveLength(30);
  });
});

describe('friends post; delete, hide, block author', () => {
  it('friends who can see the widget post through the friend route; others get 404', async () => {
    const owner = await server.user();
    const friend = await server.user({ account: { displayName: 'Friendly' } });
    const gbPublic = await widget(owner, { kind: 'guestbook', allowAnonymous: true });
    const gbPrivate = await widget(owner, { kind: 'guestbook' }, 'private');
    const gbMutual = await widget(owner, { kind: 'guestbook' }, 'mutuals_only');
    expect((await friendPost(friend, owner, gbPublic, { body: 'hi' })).response.status).toBe(404);
    await befriend(owner, friend);
    const posted = await friendPost(friend, owner, gbPublic, { body: 'hi', postAnonymously: true });
    expect(posted.response.status).toBe(201);
    expect(posted.data).toMatchObject({
      ownerUserId: owner.userId,
      authorUserId: friend.userId,
      authorDisplayName: 'Friendly',
      displayName: 'Anonymous',
      postedAnonymously: true,
    });
    for (const w of [gbPrivate, gbMutual, UNKNOWN_ID]) {
      const res = await friendPost(friend, owner, w, { body: 'hi' });
      expect(res.response.status).toBe(404);
      expect(res.error).toEqual({ code: 'NOT_FOUND', message: 'Friend not found' });
    }
    // A mutual friend opens mutuals_only.
    const third = await server.user();
    await befriend(owner, third);
    await befriend(friend, third);
    expect((await friendPost(friend, owner, gbMutual, { body: 'mutual hi' })).response.status).toBe(201);
    // The owner sees who wrote the anonymous post.
    const threads = (await list(owner, gbPublic)).threads;
    expect(threads[0]!.authorUserId).toBe(friend.userId);
  });

  it('delete: the owner or the author only (403 otherwise), by messageId globally; replies go with a top-level message', async () => {
    const owner = await server.user();
    const author = await server.user();
    const stranger = await server.user();
    await befriend(owner, author);
    const gb = await widget(owner);
    const authorsBook = await widget(author);
    const strangersBook = await widget(stranger);
    const top = (await friendPost(author, owner, gb, { body: 'top' })).data!.id;
    const reply = (await post(owner, gb, { body: 'reply', parentMessageId: top })).data!.id;
    const other = (await friendPost(author, owner, gb, { body: 'other' })).data!.id;
    const del = (u: TestUser, widgetId: string, messageId: string) =>
      u.api.DELETE('/api/v1/social/widgets/{widgetId}/guestbook/messages/{messageId}', {
        params: { path: { widgetId, messageId } },
      });
    const denied = await del(stranger, strangersBook, top);
    expect(denied.response.status).toBe(403);
    expect(denied.error).toEqual({
      code: 'FORBIDDEN',
      message: 'Only the guestbook owner or the author can delete this message',
    });
    expect((await del(stranger, gb, top)).response.status).toBe(404); // not the stranger's guestbook
    expect((await del(author, authorsBook, reply)).response.status).toBe(403); // the reply is the owner's
    expect((await del(author, authorsBook, other)).response.status).toBe(204);
    expect((await del(owner, gb, top)).response.status).toBe(204);
    expect((await list(owner, gb)).threads).toEqual([]);
    expect((await del(owner, gb, reply)).response.status).toBe(404);
    expect((await del(owner, gb, UNKNOWN_ID)).response.status).toBe(404);
  });

  it('hide and unhide by the owner; hidden messages stay in the owner’s list', async () => {
    const owner = await server.user();
    const other = await server.user();
    const gb = await widget(owner);
    const otherBook = await widget(other);
    const m = (await post(owner, gb, { body: 'hide me' })).data!.id;
    const patch = (u: TestUser, widgetId: string, hiddenByOwner: boolean) =>
      u.api.PATCH('/api/v1/social/widgets/{widgetId}/guestbook/messages/{messageId}', {
        params: { path: { widgetId, messageId: m } },
        body: { hiddenByOwner },
      });
    expect((await patch(owner, gb, true)).response.status).toBe(204);
    expect((await list(owner, gb)).threads[0]!.hiddenByOwner).toBe(true);
    expect((await patch(other, otherBook, false)).response.status).toBe(404);
    expect((await list(owner, gb)).threads[0]!.hiddenByOwner).toBe(true);
    expect((await patch(owner, gb, false)).response.status).toBe(204);
    expect((await list(owner, gb)).threads[0]!.hiddenByOwner).toBe(false);
  });

  it('block author: through the block list (then 404 on friend routes); not yourself; anonymous only by the owner', async () => {
    const owner = await server.user();
    const author = await server.user();
    const viewer = await server.user();
    await befriend(owner, author);
    await befriend(owner, viewer);
    const gb = await widget(owner, { kind: 'guestbook', allowAnonymous: true });
    const viewersBook = await widget(viewer);
    const named = (await friendPost(author, owner, gb, { body: 'named' })).data!.id;
    const anon = (await friendPost(author, owner, gb, { body: 'anon', postAnonymously: true })).data!.id;
    const mine = (await post(owner, gb, { body: 'mine' })).data!.id;
    const blockAuthor = (u: TestUser, widgetId: string, body: Record<string, unknown>) =>
      u.api.POST('/api/v1/social/widgets/{widgetId}/guestbook/block-author', {
        params: { path: { widgetId } },
        body: body as never,
      });
    const self = await blockAuthor(owner, gb, { messageId: mine });
    expect(self.response.status).toBe(400);
    expect(self.error!.message).toBe('You cannot block yourself');
    expect((await blockAuthor(owner, gb, { messageId: named, reason: 'x'.repeat(281) })).response.status).toBe(400);
    const anonDenied = await blockAuthor(viewer, viewersBook, { messageId: anon });
    expect(anonDenied.response.status).toBe(403);
    expect(anonDenied.error).toEqual({
      code: 'FORBIDDEN',
      message: 'Only the guestbook owner can block an anonymous author',
    });
    expectNoneOf(anonDenied.error, [author.userId]);
    const stranger = await server.user();
    const strangersBook = await widget(stranger);
    expect((await blockAuthor(stranger, strangersBook, { messageId: named })).response.status).toBe(404);
    expect((await blockAuthor(owner, gb, { messageId: UNKNOWN_ID })).response.status).toBe(404);
    // The owner blocks the anonymous author: the author then gets 404 on the owner's friend routes.
    expect((await blockAuthor(owner, gb, { messageId: anon, reason: 'x'.repeat(280) })).response.status).toBe(204);
    const after = await friendPost(author, owner, gb, { body: 'again' });
    expect(after.response.status).toBe(404);
    expect(after.error).toEqual({ code: 'NOT_FOUND', message: 'Friend not found' });
    const friends = await owner.api.GET('/api/v1/friends', { params: { query: { status: 'blocked' } } });
    expect(JSON.stringify(friends.data)).toContain(author.userId);
    // A friend who sees the guestbook may block a named author.
    const author2 = await server.user();
    await befriend(owner, author2);
    const named2 = (await friendPost(author2, owner, gb, { body: 'named2' })).data!.id;
    expect((await blockAuthor(viewer, viewersBook, { messageId: named2 })).response.status).toBe(204);
  });

  it('deleting the widget deletes its messages', async () => {
    const owner = await server.user();
    const gb = await widget(owner);
    const m = (await post(owner, gb, { body: 'gone' })).data!.id;
    expect((await owner.api.DELETE('/api/v1/social/widgets/{widgetId}', wp(gb))).response.status).toBe(204);
    const other = await widget(owner);
    const del = await owner.api.DELETE('/api/v1/social/widgets/{widgetId}/guestbook/messages/{messageId}', {
      params: { path: { widgetId: other, messageId: m } },
    });
    expect(del.response.status).toBe(404);
    expect(
      Number((await server.deps.db.knex('guestbook_messages').where({ widget_id: gb }).count({ n: '*' }).first())!.n),
    ).toBe(0);
  });
});

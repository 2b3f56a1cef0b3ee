/**
 * Idempotency-Key on the POSTs of /api/v1 (docs/api.md "Safe retries"): a repeated request is
 * replayed byte for byte without running again (no second write, event or audit row), another
 * request under the key is a 422, one still running a 409, 4xx answers are stored and 5xx are not,
 * keys expire and are pruned, replays survive a restart, and concurrent duplicates write once.
 */
import { execFileSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Knex } from 'knex';
import { createApiClient, retryingFetch } from '../client/index.ts';
import { onBehalfOf } from '../server/access/index.ts';
import { inTransaction, RequestTransaction } from '../server/core/context.ts';
import { DatabaseEventSink } from '../server/events/log.ts';
import { CLAIM_LEASE_MS, fingerprint } from '../server/idempotency/index.ts';
import { createTestDatabase, untilWaitingForConnection, untilWaitingForLock } from './helpers/db.ts';
import { UNKNOWN_ID } from './helpers/fixtures.ts';
import { PNG } from './helpers/images.ts';
import { captureStatements, REQUEST_WORK } from './helpers/plans.ts';
import { type LoopbackServer, startLoopbackServer } from './helpers/imageServer.ts';
import { bearer, TestServer, type TestUser, useServer } from './helpers/server.ts';

let offset = 0;
const HOUR = 3_600_000;
const server = useServer({ clock: () => Date.now() + offset, env: { FETCH_ALLOW_PRIVATE: 'true' } });

interface Answer {
  status: number;
  headers: Headers;
  text: string;
}

async function post(
  user: TestUser,
  path: string,
  body: unknown,
  key: string | undefined,
  at: TestServer = server,
): Promise<Answer> {
  const res = await at.fetch(path, {
    method: 'POST',
    headers: {
      ...bearer(user.apiKey),
      'Content-Type': 'application/json',
      ...(key === undefined ? {} : { 'Idempotency-Key': key }),
    },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: res.status, headers: res.headers, text: await res.text() };
}

const db = () => server.runtime.deps.db.knex;

async function membersNamed(user: TestUser, name: string): Promise<number> {
  const { data } = await user.api.GET('/api/v1/members');
  return data!.filter((m) => m.name === name).length;
}

async function countRows(table: 'events' | 'audit_events', userId: string, like: string): Promise<number> {
  const column = table === 'events' ? 'type' : 'action';
  const owner = table === 'events' ? 'account_id' : 'user_id';
  const row = await db()(table).where(owner, userId).andWhere(column, like).count<{ n: string }[]>({ n: '*' });
  return Number(row[0]!.n);
}

describe('Idempotency-Key', () => {
  it('without a key, every POST runs (unchanged behaviour)', async () => {
    const user = await server.user();
    const first = await post(user, '/api/v1/members', { name: 'Twice' }, undefined);
    const second = await post(user, '/api/v1/members', { name: 'Twice' }, undefined);
    expect([first.status, second.status]).toEqual([201, 201]);
    expect(first.text).not.toBe(second.text);
    expect(second.headers.get('idempotent-replayed')).toBeNull();
    expect(await membersNamed(user, 'Twice')).toBe(2);
  });

  it('replays the first response byte for byte, without a second write or event', async () => {
    const user = await server.user();
    const key = randomUUID();
    const first = await post(user, '/api/v1/members', { name: 'Once' }, key);
    expect(first.status).toBe(201);
    expect(first.headers.get('idempotent-replayed')).toBeNull();
    const again = await post(user, '/api/v1/members', { name: 'Once' }, key);
    expect(again.status).toBe(201);
    expect(again.text).toBe(first.text);
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    expect(again.headers.get('content-type')).toBe(first.headers.get('content-type'));
    expect(again.headers.get('content-length')).toBe(first.headers.get('content-length'));
    expect(await membersNamed(user, 'Once')).toBe(1);
    expect(await countRows('events', user.userId, 'member.created')).toBe(1);
  });

  it('replays the headers a client relies on (Location of a 202) and an empty 204, with no second audit row or event', async () => {
    const user = await server.user();
    const key = randomUUID();
    const first = await post(user, '/api/v1/exports', undefined, key);
    expect(first.status).toBe(202);
    const again = await post(user, '/api/v1/exports', undefined, key);
    expect(again.status).toBe(202);
    expect(again.headers.get('location')).toBe(first.headers.get('location'));
    expect(again.text).toBe(first.text);
    const { data: exports } = await user.api.GET('/api/v1/exports');
    expect(exports!.items).toHaveLength(1);
    expect(await countRows('audit_events', user.userId, 'export.create')).toBe(1);

    const member = JSON.parse((await post(user, '/api/v1/members', { name: 'Trashed' }, undefined)).text).id;
    await user.api.DELETE('/api/v1/members/{memberId}', { params: { path: { memberId: member } } });
    const restoreKey = randomUUID();
    const restored = await post(user, `/api/v1/members/${member}/restore`, undefined, restoreKey);
    expect(restored.status).toBe(204);
    const replayed = await post(user, `/api/v1/members/${member}/restore`, undefined, restoreKey);
    expect(replayed.status).toBe(204);
    expect(replayed.text).toBe('');
    expect(replayed.headers.get('idempotent-replayed')).toBe('true');
    expect(await countRows('events', user.userId, 'member.restored')).toBe(1);
  });

  it('refuses the key for another request to the operation (body, path or query) with 422', async () => {
    const user = await server.user();
    const key = randomUUID();
    expect((await post(user, '/api/v1/members', { name: 'A' }, key)).status).toBe(201);
    const other = await post(user, '/api/v1/members', { name: 'B' }, key);
    expect(other.status).toBe(422);
    expect(JSON.parse(other.text)).toEqual({
      code: 'IDEMPOTENCY_KEY_MISMATCH',
      message: 'This Idempotency-Key was already used for a different request to this operation',
    });
    // The same JSON written differently is another request: the fingerprint is of the bytes.
    const spaced = await server.fetch('/api/v1/members', {
      method: 'POST',
      headers: { ...bearer(user.apiKey), 'Content-Type': 'application/json', 'Idempotency-Key': key },
      body: '{ "name": "A" }',
    });
    expect(spaced.status).toBe(422);
    expect(await membersNamed(user, 'B')).toBe(0);

    const [m1, m2] = await Promise.all(
      ['M1', 'M2'].map(async (name) => JSON.parse((await post(user, '/api/v1/members', { name }, undefined)).text).id),
    );
    await user.api.DELETE('/api/v1/members/{memberId}', { params: { path: { memberId: m1 } } });
    await user.api.DELETE('/api/v1/members/{memberId}', { params: { path: { memberId: m2 } } });
    const restoreKey = randomUUID();
    expect((await post(user, `/api/v1/members/${m1}/restore`, undefined, restoreKey)).status).toBe(204);
    expect((await post(user, `/api/v1/members/${m2}/restore`, undefined, restoreKey)).status).toBe(422);

    const importKey = randomUUID();
    const dry = await server.fetch('/api/v1/imports?source=pluralkit&dryRun=true', {
      method: 'POST',
      headers: { ...bearer(user.apiKey), 'Content-Type': 'application/json', 'Idempotency-Key': importKey },
      body: '{"version":2,"members":[]}',
    });
    expect(dry.status).toBe(202);
    const wet = await server.fetch('/api/v1/imports?source=pluralkit&dryRun=false', {
      method: 'POST',
      headers: { ...bearer(user.apiKey), 'Content-Type': 'application/json', 'Idempotency-Key': importKey },
      body: '{"version":2,"members":[]}',
    });
    expect(wet.status).toBe(422);
  });

  it('scopes a key to the account and the operation', async () => {
    const [a, b] = [await server.user(), await server.user()];
    const key = randomUUID();
    expect((await post(a, '/api/v1/members', { name: 'Shared key' }, key)).status).toBe(201);
    expect((await post(b, '/api/v1/members', { name: 'Shared key' }, key)).status).toBe(201);
    expect((await post(a, '/api/v1/groups', { name: 'Shared key' }, key)).status).toBe(201);
    expect(await membersNamed(a, 'Shared key')).toBe(1);
    expect(await membersNamed(b, 'Shared key')).toBe(1);
  });

  it('stores a 4xx the handler answers, but not a contract 400 (nothing ran) or a 5xx', async () => {
    const user = await server.user();
    const key = randomUUID();
    const body = { content: 'linked', memberIds: [UNKNOWN_ID] };
    const refused = await post(user, '/api/v1/entries', body, key);
    expect(refused.status).toBe(400);
    const again = await post(user, '/api/v1/entries', body, key);
    expect(again.status).toBe(400);
    expect(again.text).toBe(refused.text);
    expect(again.headers.get('idempotent-replayed')).toBe('true');

    const invalidKey = randomUUID();
    expect((await post(user, '/api/v1/members', { name: 123 }, invalidKey)).status).toBe(400);
    expect((await post(user, '/api/v1/members', { name: 'Valid now' }, invalidKey)).status).toBe(201);

    // No object storage: a note with an external image is a 503, not stored, so the key is free.
    const bare = await new TestServer().start({ env: { OBJECT_STORAGE: 'none', FETCH_ALLOW_PRIVATE: 'true' } });
    try {
      const other = await bare.user();
      const unavailableKey = randomUUID();
      const image = { content: '![x](http://127.0.0.1:9/x.png)' };
      expect((await post(other, '/api/v1/entries', image, unavailableKey, bare)).status).toBe(503);
      expect((await post(other, '/api/v1/entries', { content: 'plain' }, unavailableKey, bare)).status).toBe(201);
    } finally {
      await bare.close();
    }
  });

  it('refuses a key that is empty, longer than 255 characters or not printable ASCII (400)', async () => {
    const user = await server.user();
    for (const key of ['', 'k'.repeat(256), 'tab\tkey']) {
      const res = await post(user, '/api/v1/members', { name: 'Bad key' }, key);
      expect(res.status, JSON.stringify(key)).toBe(400);
      expect(JSON.parse(res.text).code).toBe('BAD_REQUEST');
    }
    expect((await post(user, '/api/v1/members', { name: 'Long key' }, 'k'.repeat(255))).status).toBe(201);
    expect(await membersNamed(user, 'Bad key')).toBe(0);
  });

  it('lets the typed client send a key (a declared header parameter)', async () => {
    const user = await server.user();
    const key = randomUUID();
    const send = () =>
      user.api.POST('/api/v1/members', { params: { header: { 'Idempotency-Key': key } }, body: { name: 'Typed' } });
    const first = await send();
    const again = await send();
    expect(again.data).toEqual(first.data);
    expect(again.response.headers.get('idempotent-replayed')).toBe('true');
  });

  it("the typed client's retryingFetch: a response lost on the way is retried and replayed, one member made", async () => {
    const user = await server.user();
    let lost = 1;
    // The server answers, but the first answer never reaches the caller (a dropped mobile connection).
    const dropping: typeof globalThis.fetch = async (input, init) => {
      const res = await globalThis.fetch(input, init);
      if (lost-- > 0) throw new TypeError('fetch failed');
      return res;
    };
    const api = createApiClient({
      baseUrl: server.baseUrl,
      apiKey: user.apiKey,
      fetch: retryingFetch({ baseDelayMs: 10, fetch: dropping }),
    });
    const { data, response } = await api.POST('/api/v1/members', { body: { name: 'Retried' } });
    expect(response.status).toBe(201);
    expect(response.headers.get('idempotent-replayed')).toBe('true');
    expect(await membersNamed(user, 'Retried')).toBe(1);
    const { data: members } = await user.api.GET('/api/v1/members');
    expect(members!.find((m) => m.name === 'Retried')!._id).toBe(data!.id);
  });

  it('keeps the stored response sealed at rest (a webhook secret is not in the table)', async () => {
    const user = await server.user();
    const key = randomUUID();
    const body = { url: 'https://hooks.example.com/in', types: ['member.created'] };
    const created = await post(user, '/api/v1/webhooks', body, key);
    expect(created.status).toBe(201);
    const { secret } = JSON.parse(created.text) as { secret: string };
    const replayed = await post(user, '/api/v1/webhooks', body, key);
    expect(JSON.parse(replayed.text).secret).toBe(secret);
    const rows = await db()('idempotency_keys').where({ user_id: user.userId }).select('response_enc');
    expect(rows).toHaveLength(1);
    const stored = Buffer.from(rows[0].response_enc as Uint8Array);
    expect(stored.includes(Buffer.from(secret))).toBe(false);
    expect(stored.includes(Buffer.from('hooks.example.com'))).toBe(false);
  });

  it('expires keys after IDEMPOTENCY_TTL_HOURS (the key is free again) and prunes them', async () => {
    const user = await server.user();
    const key = randomUUID();
    expect((await post(user, '/api/v1/members', { name: 'Before' }, key)).status).toBe(201);
    offset += 24 * HOUR - 60_000;
    expect((await post(user, '/api/v1/members', { name: 'Other' }, key)).status).toBe(422);
    offset += 120_000;
    expect((await post(user, '/api/v1/members', { name: 'After' }, key)).status).toBe(201);
    expect(await membersNamed(user, 'After')).toBe(1);
    const old = randomUUID();
    expect((await post(user, '/api/v1/groups', { name: 'Old' }, old)).status).toBe(201);
    offset += 25 * HOUR;
    await server.runtime.jobs.enqueue(db(), 'idempotency_prune', {});
    await server.runtime.jobs.runDue();
    const left = await db()('idempotency_keys').where({ user_id: user.userId }).count<{ n: string }[]>({ n: '*' });
    expect(Number(left[0]!.n)).toBe(0);
  });

  it('creates exactly one entity when 20 requests with one key arrive at once', async () => {
    const user = await server.user();
    const key = randomUUID();
    const answers = await Promise.all(
      Array.from({ length: 20 }, () => post(user, '/api/v1/members', { name: 'Concurrent' }, key)),
    );
    const created = answers.filter((a) => a.status === 201);
    const inFlight = answers.filter((a) => a.status === 409);
    expect(created.length + inFlight.length).toBe(20);
    expect(created.length).toBeGreaterThan(0);
    expect(new Set(created.map((a) => a.text)).size).toBe(1);
    for (const a of inFlight) expect(a.headers.get('retry-after')).toBe('1');
    expect(created.filter((a) => a.headers.get('idempotent-replayed') === null)).toHaveLength(1);
    expect(await membersNamed(user, 'Concurrent')).toBe(1);
    expect(await countRows('events', user.userId, 'member.created')).toBe(1);
  });

  it("runs a keyed request's first transaction without a savepoint, and marks it tainted when that work fails", async () => {
    const savepoints: string[] = [];
    const onQuery = (q: { sql: string }) => {
      if (/^savepoint/i.test(q.sql)) savepoints.push(q.sql);
    };
    // One transaction at a time: the embedded database has one connection.
    const trx = await db().transaction();
    db().on('query', onQuery);
    try {
      const request = new RequestTransaction(trx);
      await inTransaction({ db: trx as Knex }, async (tx) => expect(tx.db).toBe(trx));
      expect(savepoints).toHaveLength(0);
      expect(request.tainted).toBe(false);
      // Later ones are savepoints, as in any transaction.
      await inTransaction({ db: trx as Knex }, async (tx) => expect(tx.db).not.toBe(trx));
      expect(savepoints).toHaveLength(1);
    } finally {
      db().off('query', onQuery);
      await trx.rollback();
    }
    const other = await db().transaction();
    try {
      const failing = new RequestTransaction(other);
      await expect(
        inTransaction({ db: other as Knex }, async () => {
          throw new Error('refused half-way');
        }),
      ).rejects.toThrow('refused half-way');
      expect(failing.tainted).toBe(true);
    } finally {
      await other.rollback();
    }
  });

  it("appends a keyed write's events with its stored response: one statement more than without a key (the claim)", async () => {
    // A write in a transaction of its own (a group with members: keyed in its write, it runs again
    // in a transaction); the one-statement writes append their events themselves.
    const user = await server.user();
    const webhook = await user.api.POST('/api/v1/webhooks', {
      body: { url: 'https://hooks.example.org/a', types: ['group.created'] },
    });
    expect(webhook.response.status).toBe(201);
    const member = (await user.api.POST('/api/v1/members', { body: { name: 'In the group' } })).data!.id;
    await post(user, '/api/v1/groups', { name: 'Warm-up', memberIds: [member] }, undefined); // warms the key cache
    const count = (key: string | undefined, name: string) =>
      captureStatements(db(), REQUEST_WORK, () => post(user, '/api/v1/groups', { name, memberIds: [member] }, key));
    const plain = await count(undefined, 'Plain');
    const keyed = await count(randomUUID(), 'Keyed');
    const appends = (sts: Array<{ sql: string }>) => sts.filter((st) => /insert into events/.test(st.sql));
    expect(appends(plain)).toHaveLength(1);
    // The event is appended by the statement that stores the response under the key, not by one of its own.
    expect(appends(keyed)).toHaveLength(1);
    expect(appends(keyed)[0]!.sql).toMatch(/insert into idempotency_keys/);
    expect(
      keyed.map((st) => st.sql.split(/\s+/).slice(0, 3).join(' ')),
      JSON.stringify(keyed),
    ).toHaveLength(plain.length + 1);
    // Its webhook delivery is queued as for any event, and the event is in the log once.
    expect(await countRows('events', user.userId, 'group.created')).toBe(3);
    const deliveries = await user.api.GET('/api/v1/webhooks/{webhookId}/deliveries', {
      params: { path: { webhookId: webhook.data!.webhook.id } },
    });
    expect(deliveries.data?.items).toHaveLength(3);
  });

  it('a keyed note costs one statement, as an unkeyed one does: the write stores its response under the key', async () => {
    const user = await server.user();
    await post(user, '/api/v1/entries', { content: 'Warm-up' }, undefined); // warms the key cache
    const count = async (key: string | undefined) =>
      (await captureStatements(db(), REQUEST_WORK, () => post(user, '/api/v1/entries', { content: 'n' }, key))).map(
        (st) => st.sql,
      );
    const words = (sqls: string[]) => sqls.map((q) => q.trim().split(/\s+/).slice(0, 3).join(' ').toLowerCase());
    expect(words(await count(undefined))).toEqual(['with write_context as']);
    const key = randomUUID();
    const keyed = await count(key);
    expect(words(keyed), JSON.stringify(keyed)).toEqual(['with write_context as']);
    expect(keyed[0]).toMatch(/insert into idempotency_keys[\s\S]*insert into events[\s\S]*idempotency_held/);
    // A replay: the write finds the key taken and writes nothing, and the stored answer is read.
    expect(words(await count(key))).toEqual(['with write_context as', 'select id, fingerprint,']);
    const { data } = await user.api.GET('/api/v1/entries');
    expect(data!.filter((e) => e.content === 'n')).toHaveLength(2); // the unkeyed note and the keyed one
  });

  it('keys every create keyed in its write in one statement, and replays each byte for byte with a read of the key', async () => {
    const user = await server.user();
    const creates: Array<[string, Record<string, unknown>, string]> = [
      ['/api/v1/members', { name: 'Ahead' }, 'member.created'],
      ['/api/v1/groups', { name: 'Ahead group' }, 'group.created'],
      ['/api/v1/folders', { name: 'Ahead folder' }, 'folder.created'],
      ['/api/v1/member-statuses', { name: 'Ahead status', color: '#00ff00' }, 'member_status.created'],
      ['/api/v1/systems/side-systems', { name: 'Ahead side' }, 'side_system.created'],
      // The permissions in another order than the answer's, and than jsonb stores them.
      [
        '/api/v1/privacy-buckets',
        {
          name: ' Ahead bucket ',
          icon: 'heart',
          friendPermissions: { groups: 'read', front: 'none', members_view: 'read' },
        },
        'privacy_bucket.created',
      ],
    ];
    for (const [path, body, type] of creates) {
      await post(user, path, { ...body, name: `${body.name} (warm-up)` }, randomUUID()); // warms the key cache
      const key = randomUUID();
      let first: Answer | undefined;
      const statements = await captureStatements(db(), REQUEST_WORK, async () => {
        first = await post(user, path, body, key);
      });
      expect(first!.status, path).toBe(201);
      const words = statements.map((st) => st.sql.trim().split(/\s+/).slice(0, 2).join(' '));
      expect(words, `${path}: ${JSON.stringify(statements.map((st) => st.sql))}`).toHaveLength(1);
      expect(statements[0]!.sql, path).toMatch(/insert into idempotency_keys[\s\S]*insert into events/);
      const replayed = await captureStatements(db(), REQUEST_WORK, async () => {
        const again = await post(user, path, body, key);
        expect([again.status, again.text, again.headers.get('idempotent-replayed')], path).toEqual([
          201,
          first!.text,
          'true',
        ]);
      });
      // The write, which finds the key taken and writes nothing, and the read of the stored answer.
      expect(replayed, path).toHaveLength(2);
      expect(replayed[1]!.sql, path).toMatch(/^select id, fingerprint/);
      expect(await countRows('events', user.userId, type), path).toBe(2);
      if (path === '/api/v1/privacy-buckets') {
        // The answer given ahead of the statement is the bucket as stored, byte for byte.
        const stored = await server.fetch(`/api/v1/privacy-buckets/${JSON.parse(first!.text)._id}`, {
          headers: bearer(user.apiKey),
        });
        expect(await stored.text()).toBe(first!.text);
      }
    }
  });

  it('keys a webhook create (no event) in one statement, which stores the answer under the key; the refusal at the cap is stored', async () => {
    const user = await server.user();
    const body = { url: 'https://hooks.example.com/ahead', types: ['member.created'], description: 'ahead' };
    await post(user, '/api/v1/webhooks', { ...body, description: 'warm-up' }, randomUUID()); // warms the key cache
    const key = randomUUID();
    let first: Answer | undefined;
    const statements = await captureStatements(db(), REQUEST_WORK, async () => {
      first = await post(user, '/api/v1/webhooks', body, key);
    });
    expect(first!.status).toBe(201);
    const words = statements.map((st) => st.sql.trim().split(/\s+/).slice(0, 2).join(' '));
    expect(words, JSON.stringify(statements.map((st) => st.sql))).toEqual(['with account']);
    expect(statements[0]!.sql).toMatch(
      /insert into webhooks[\s\S]*insert into idempotency_keys[\s\S]*idempotency_held/,
    );
    const created = JSON.parse(first!.text) as { webhook: { id: string }; secret: string };
    const stored = await server.fetch(`/api/v1/webhooks/${created.webhook.id}`, { headers: bearer(user.apiKey) });
    expect(await stored.text()).toBe(JSON.stringify(created.webhook));
    const replayed = await captureStatements(db(), REQUEST_WORK, async () => {
      const again = await post(user, '/api/v1/webhooks', body, key);
      expect([again.status, again.text, again.headers.get('idempotent-replayed')]).toEqual([201, first!.text, 'true']);
    });
    expect(replayed.map((st) => st.sql.trim().split(/\s+/).slice(0, 2).join(' '))).toEqual([
      'with account',
      'select id,',
    ]);
    const { data } = await user.api.GET('/api/v1/webhooks');
    expect(data).toHaveLength(2);
    expect(await countRows('audit_events', user.userId, 'webhook.create')).toBe(2);

    // At the cap of 20 the statement writes nothing, and the 409 is stored under the key after it.
    for (let i = 2; i < 20; i++) await post(user, '/api/v1/webhooks', { ...body, description: `w${i}` }, undefined);
    const capKey = randomUUID();
    let refused: Answer | undefined;
    const atCap = await captureStatements(db(), REQUEST_WORK, async () => {
      refused = await post(user, '/api/v1/webhooks', body, capKey);
    });
    expect(refused!.status).toBe(409);
    expect(atCap.map((st) => st.sql.trim().split(/\s+/).slice(0, 2).join(' '))).toEqual([
      'with account',
      'insert into',
    ]);
    const again = await post(user, '/api/v1/webhooks', body, capKey);
    expect([again.status, again.text, again.headers.get('idempotent-replayed')]).toEqual([409, refused!.text, 'true']);
  });

  it('writes no webhook when another request took the key before its statement (idempotency_held, without events to carry it)', async () => {
    const user = await server.user();
    const key = randomUUID();
    const body = { url: 'https://hooks.example.com/lapsed', types: ['member.created'] };
    await post(user, '/api/v1/webhooks', { ...body, url: 'https://hooks.example.com/warm' }, randomUUID());
    // Another request's claim (its image downloads, say) under the same key, live, without an answer
    // yet. On PostgreSQL it commits as this request's statement goes out (the process waits for psql);
    // the embedded database has one connection, so there it is in place before the request.
    const claim = `insert into idempotency_keys (id, user_id, operation, idem_key, fingerprint, key_id, response_enc, created_at, expires_at)
      values ('${randomUUID()}', '${user.userId}', 'createWebhook', '${key}', '\\x00', null, null, 0, ${Date.now() + offset + CLAIM_LEASE_MS})`;
    let claimed = false;
    const interleave = (q: { sql: string }) => {
      if (claimed || !/^with account/.test(q.sql.trim())) return;
      execFileSync('psql', [server.databaseUrl!, '-qc', claim]);
      claimed = true;
    };
    if (server.databaseUrl) db().on('query', interleave);
    else await db().raw(claim);
    let answer: Answer;
    try {
      answer = await post(user, '/api/v1/webhooks', body, key);
    } finally {
      db().off('query', interleave);
    }
    if (server.databaseUrl) expect(claimed).toBe(true);
    // The statement failed whole: no webhook, no audit row; the key is the other request's (in flight).
    expect(answer.status).toBe(409);
    expect(answer.headers.get('retry-after')).toBe('1');
    const { data } = await user.api.GET('/api/v1/webhooks');
    expect(data!.map((w) => w.url)).toEqual(['https://hooks.example.com/warm']);
    expect(await countRows('audit_events', user.userId, 'webhook.create')).toBe(1);
  });

  it("waits for another request's uncommitted key: writes nothing when it commits, and writes when it rolls back", async () => {
    const user = await server.user();
    const body = (content: string) => ({ content });
    for (const ending of ['commit', 'rollback'] as const) {
      const key = randomUUID();
      // Another request's statement holds the key's row, uncommitted.
      const other = await db().transaction();
      try {
        await other('idempotency_keys').insert({
          id: randomUUID(),
          user_id: user.userId,
          operation: 'createEntry',
          idem_key: key,
          fingerprint: fingerprint('POST', '/api/v1/entries', Buffer.from(JSON.stringify(body(ending)))),
          key_id: null,
          response_enc: null,
          created_at: Date.now() + offset,
          expires_at: Date.now() + offset + CLAIM_LEASE_MS,
        });
        const answer = post(user, '/api/v1/entries', body(ending), key);
        // On PostgreSQL the note's statement waits for the key's row; on the embedded database, for its one connection.
        if (server.databaseUrl) await untilWaitingForLock(db(), 'the keyed note');
        else await untilWaitingForConnection(db(), 'the keyed note');
        await other[ending]();
        const done = await answer;
        // Committed: the key is the other's, still without an answer (in flight); rolled back: free.
        expect(done.status, ending).toBe(ending === 'commit' ? 409 : 201);
      } finally {
        if (!other.isCompleted()) await other.rollback();
      }
      const { data } = await user.api.GET('/api/v1/entries');
      expect(
        data!.filter((e) => e.content === ending),
        ending,
      ).toHaveLength(ending === 'commit' ? 0 : 1);
    }
    expect(await countRows('events', user.userId, 'entry.created')).toBe(1);
  });

  it('keys a front start in one statement, and stores the answer of a start that changed nothing', async () => {
    const user = await server.user();
    const member = JSON.parse((await post(user, '/api/v1/members', { name: 'Fronting' }, undefined)).text).id;
    const start = (key: string) =>
      captureStatements(db(), REQUEST_WORK, () => post(user, '/api/v1/front/members', { memberId: member }, key));
    const key = randomUUID();
    let answer: Answer | undefined;
    const first = await captureStatements(db(), REQUEST_WORK, async () => {
      answer = await post(user, '/api/v1/front/members', { memberId: member }, key);
    });
    expect(answer!.status).toBe(204);
    expect(first.map((st) => st.sql.trim().split(/\s+/).slice(0, 2).join(' '))).toEqual(['with turn']);
    const again = await post(user, '/api/v1/front/members', { memberId: member }, key);
    expect([again.status, again.text, again.headers.get('idempotent-replayed')]).toEqual([204, '', 'true']);
    expect(await countRows('events', user.userId, 'front.changed')).toBe(1);
    // Already fronting: the statement writes nothing, so the 204 is stored under the key after it.
    const noop = await start(randomUUID());
    expect(noop.map((st) => st.sql.trim().split(/\s+/).slice(0, 2).join(' '))).toEqual(['with turn', 'insert into']);
    const { data } = await user.api.GET('/api/v1/front');
    expect(data!.activeSessions).toHaveLength(1);
  });

  it('runs a keyed variant that needs a transaction again in one, storing its answer there (a member in a folder)', async () => {
    const user = await server.user();
    const folder = JSON.parse((await post(user, '/api/v1/folders', { name: 'Folder' }, undefined)).text).id;
    const key = randomUUID();
    const body = { name: 'Filed', directoryId: folder };
    const first = await post(user, '/api/v1/members', body, key);
    expect(first.status).toBe(201);
    const again = await post(user, '/api/v1/members', body, key);
    expect([again.status, again.text, again.headers.get('idempotent-replayed')]).toEqual([201, first.text, 'true']);
    expect(await membersNamed(user, 'Filed')).toBe(1);
    expect(await countRows('events', user.userId, 'member.created')).toBe(1);
    const { data } = await user.api.GET('/api/v1/members/{memberId}', {
      params: { path: { memberId: JSON.parse(first.text).id } },
    });
    expect(data!.directoryId).toBe(folder);
  });

  it('answers 409 while a claim made ahead is held, and runs the request once its lease has lapsed (a server that stopped mid-request)', async () => {
    const user = await server.user();
    const key = randomUUID();
    const body = { content: 'after a crash' };
    // A claim without a response, as a server that stopped after claiming leaves it.
    const print = fingerprint('POST', '/api/v1/entries', Buffer.from(JSON.stringify(body)));
    await db()('idempotency_keys').insert({
      id: randomUUID(),
      user_id: user.userId,
      operation: 'createEntry',
      idem_key: key,
      fingerprint: print,
      key_id: null,
      response_enc: null,
      created_at: Date.now() + offset,
      expires_at: Date.now() + offset + CLAIM_LEASE_MS,
    });
    const held = await post(user, '/api/v1/entries', body, key);
    expect(held.status).toBe(409);
    expect(held.headers.get('retry-after')).toBe('1');
    // A claim's row is never a replay, whatever the request: it is still in flight.
    expect((await post(user, '/api/v1/entries', { content: 'other' }, key)).status).toBe(409);
    offset += CLAIM_LEASE_MS + 1;
    const ran = await post(user, '/api/v1/entries', body, key);
    expect(ran.status).toBe(201);
    expect(ran.headers.get('idempotent-replayed')).toBeNull();
    expect((await post(user, '/api/v1/entries', body, key)).text).toBe(ran.text);
    const { data } = await user.api.GET('/api/v1/entries');
    expect(data).toHaveLength(1);
  });

  it('writes the events it held back before a savepoint, in the order they were emitted', async () => {
    const user = await server.user();
    const events = new DatabaseEventSink();
    const ctx = (dbx: Knex) => ({
      db: dbx,
      now: Date.now(),
      access: onBehalfOf(user.userId),
      actor: { kind: 'system' as const, job: 'test' },
    });
    const logged = (dbx: Knex) =>
      dbx('events')
        .where({ account_id: user.userId, type: 'member.updated' })
        .orderBy('id')
        .select(dbx.raw("data->>'memberId' as m"))
        .then((rows: Array<{ m: string }>) => rows.map((r) => r.m));
    const trx = await db().transaction();
    try {
      const request = new RequestTransaction(trx, { deferEvents: true });
      await inTransaction({ db: trx as Knex }, async (tx) => {
        await events.emit(ctx(tx.db) as never, {
          type: 'member.updated',
          area: 'members',
          data: { memberId: 'first' },
        });
      });
      expect(await logged(trx)).toEqual([]); // held back
      // A savepoint: what is held is written first, and nothing is held after it.
      await inTransaction({ db: trx as Knex }, async (tx) => {
        await events.emit(ctx(tx.db) as never, {
          type: 'member.updated',
          area: 'members',
          data: { memberId: 'second' },
        });
      });
      await events.emit(ctx(trx) as never, { type: 'member.updated', area: 'members', data: { memberId: 'third' } });
      expect(await logged(trx)).toEqual(['first', 'second', 'third']);
      expect(request.take()).toEqual([]);
    } finally {
      await trx.rollback();
    }
    // A savepoint rolled back takes its own events with it.
    const other = await db().transaction();
    try {
      new RequestTransaction(other, { deferEvents: true });
      await inTransaction({ db: other as Knex }, async (tx) => {
        await events.emit(ctx(tx.db) as never, { type: 'member.updated', area: 'members', data: { memberId: 'kept' } });
      });
      await inTransaction({ db: other as Knex }, async (tx) => {
        await events.emit(ctx(tx.db) as never, {
          type: 'member.updated',
          area: 'members',
          data: { memberId: 'undone' },
        });
        throw new Error('undone');
      }).catch(() => undefined);
      expect(await logged(other)).toEqual(['kept']);
    } finally {
      await other.rollback();
    }
  });

  describe('while the first request is still running', () => {
    let images: LoopbackServer;
    /** The image fetches waiting at the gate, in the order they arrived: calling one answers it. */
    const waiting: Array<() => void> = [];
    /** Resolves once `n` fetches have come to the gate. */
    const fetchesWaiting = async (n: number) => {
      for (let i = 0; i < 1000 && waiting.length < n; i++) await new Promise((r) => setTimeout(r, 10));
      expect(waiting.length).toBeGreaterThanOrEqual(n);
    };
    beforeAll(async () => {
      images = await startLoopbackServer(
        {},
        { '/gated/': { type: 'image/png', body: PNG, gate: () => new Promise((r) => waiting.push(r)) } },
      );
    });
    afterAll(() => {
      for (const answer of waiting) answer();
      return images.close();
    });

    it('answers a second request with 409 and Retry-After: 1 (a note that downloads images claims its key first, on either database)', async () => {
      const user = await server.user();
      const key = randomUUID();
      const body = { content: `![slow](${images.url('/gated/a.png')})` };
      const before = waiting.length;
      const first = post(user, '/api/v1/entries', body, key);
      // The first request claimed its key and is fetching the image, held at the gate.
      await fetchesWaiting(before + 1);
      const second = await post(user, '/api/v1/entries', body, key);
      waiting[before]!();
      const done = await first;
      expect(done.status).toBe(201);
      expect(second.status).toBe(409);
      expect(second.headers.get('retry-after')).toBe('1');
      expect(JSON.parse(second.text)).toEqual({
        code: 'CONFLICT',
        message: 'A request with this Idempotency-Key is still being processed; retry after 1 s',
      });
      const third = await post(user, '/api/v1/entries', body, key);
      expect(third.text).toBe(done.text);
      const { data } = await user.api.GET('/api/v1/entries');
      expect(data).toHaveLength(1);
    });

    it('writes nothing when its claim lapsed and another request took the key meanwhile: one note, the other answer', async () => {
      const user = await server.user();
      const key = randomUUID();
      const body = { content: `![slow](${images.url('/gated/b.png')})` };
      const before = waiting.length;
      const first = post(user, '/api/v1/entries', body, key);
      await fetchesWaiting(before + 1);
      // The first request's lease runs out while it fetches the image: the key is free again.
      await db()('idempotency_keys').where({ user_id: user.userId, idem_key: key }).update({ expires_at: 0 });
      const second = post(user, '/api/v1/entries', body, key);
      // The second request took the key (it fetches only after its claim) and waits at the gate too.
      await fetchesWaiting(before + 2);
      // The first finishes while the second still holds its claim: its write fails whole.
      waiting[before]!();
      const a = await first;
      expect(a.status).toBe(409);
      waiting[before + 1]!();
      const b = await second;
      expect(b.status).toBe(201);
      const { data } = await user.api.GET('/api/v1/entries');
      expect(data).toHaveLength(1);
      expect(data![0]!._id).toBe(JSON.parse(b.text).id);
      expect(await countRows('events', user.userId, 'entry.created')).toBe(1);
      expect((await post(user, '/api/v1/entries', body, key)).text).toBe(b.text);
    });
  });

  it('replays after a restart of the server', async () => {
    const database = await createTestDatabase();
    let first: TestServer | undefined = await new TestServer().start({
      databaseUrl: database.databaseUrl,
      embeddedTemplate: database.embeddedTemplate,
    });
    let second: TestServer | undefined;
    try {
      const user = await first.user();
      const key = randomUUID();
      const created = await post(user, '/api/v1/members', { name: 'Durable' }, key, first);
      expect(created.status).toBe(201);
      // The embedded database lives in memory here: the restarted server starts from its files.
      const dump = await first.deps.db.dumpEmbedded?.();
      await first.close();
      first = undefined;
      second = await new TestServer().start({ databaseUrl: database.databaseUrl, embeddedTemplate: dump });
      const replayed = await post(user, '/api/v1/members', { name: 'Durable' }, key, second);
      expect(replayed.status).toBe(201);
      expect(replayed.text).toBe(created.text);
      expect(replayed.headers.get('idempotent-replayed')).toBe('true');
    } finally {
      await first?.close();
      await second?.close();
      await database.drop();
    }
  });
});

describe('Idempotency-Key where responses are not validated (production)', () => {
  const production = useServer({ env: { VALIDATE_RESPONSES: 'false' } });

  /** The answer's parts a client sees, the key's replay marker aside. */
  const seen = (a: Answer) => ({
    status: a.status,
    type: a.headers.get('content-type'),
    length: a.headers.get('content-length'),
    location: a.headers.get('location'),
  });

  it('answers with the bytes it stored, as an unkeyed request is answered, and replays them byte for byte', async () => {
    const user = await production.user();
    const folder = JSON.parse((await post(user, '/api/v1/folders', { name: 'F' }, undefined, production)).text).id;
    const requests: Array<{ path: string; body: unknown }> = [
      // Keyed in its one write statement.
      { path: '/api/v1/entries', body: { title: 'Stored', content: 'as sent' } },
      // Run in a transaction, its answer stored there (a member in a folder).
      { path: '/api/v1/members', body: { name: 'Filed', directoryId: folder } },
      // A 202 with a Location.
      { path: '/api/v1/exports', body: undefined },
    ];
    for (const { path, body } of requests) {
      const key = randomUUID();
      const first = await post(user, path, body, key, production);
      expect(first.status, path).toBeLessThan(300);
      expect(first.headers.get('idempotent-replayed')).toBeNull();
      expect(Number(first.headers.get('content-length'))).toBe(Buffer.byteLength(first.text));
      const again = await post(user, path, body, key, production);
      expect(again.text, path).toBe(first.text);
      expect(seen(again)).toEqual(seen(first));
      expect(again.headers.get('idempotent-replayed')).toBe('true');
      // The same form as the unkeyed answer (its bytes differ by the new ids).
      const unkeyed = await post(user, path, body, undefined, production);
      expect({ ...seen(first), length: null, location: null }).toEqual({
        ...seen(unkeyed),
        length: null,
        location: null,
      });
      expect(Object.keys(JSON.parse(first.text)).sort()).toEqual(Object.keys(JSON.parse(unkeyed.text)).sort());
    }
  });
});

/**
 * Webhooks end to end: the routes, deliveries queued with their events and sent in order by the
 * durable queue to a local receiver, signatures verified with the `standardwebhooks` package,
 * retries after 500s and timeouts, 410 and the failing clock disabling a webhook, secret rotation,
 * the test ping, manual retry, the guarded fetcher's refusals, and the URL and secret sealed at rest.
 *
 * The server's clock is the real time plus `offset`, so a test moves past a retry's backoff by
 * moving the clock; jobs run when the test calls runDue() (test servers do not poll).
 */
import { createHmac } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { resolve } from 'node:path';
import { Webhook as StandardWebhook } from 'standardwebhooks';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { type components, verifyWebhook, WebhookVerificationError } from '../client/index.ts';
import { queueMessageReencryption } from '../server/features/messaging/index.ts';
import { captureStatements, REQUEST_WORK } from './helpers/plans.ts';
import { TestServer, type TestUser, useServer } from './helpers/server.ts';

type Event = components['schemas']['Event'];

let offset = 0;
const HOUR = 3_600_000;
const server = useServer({
  clock: () => Date.now() + offset,
  // A timeout long enough for a loaded CI machine's loopback, short enough for the hanging receiver's test.
  env: { FETCH_ALLOW_PRIVATE: 'true', WEBHOOK_TIMEOUT_MS: '2000' },
});

interface Received {
  headers: IncomingHttpHeaders;
  body: string;
}

/** A local endpoint: records what it receives and answers with the statuses queued (204 when none is). */
class Receiver {
  readonly received: Received[] = [];
  /** A status, or 'hang' (never answers: the attempt times out). */
  readonly answers: Array<number | 'hang'> = [];
  private server!: Server;
  url = '';

  async start(): Promise<this> {
    this.server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        this.received.push({ headers: req.headers, body: Buffer.concat(chunks).toString('utf8') });
        const answer = this.answers.shift() ?? 204;
        if (answer === 'hang') return;
        if (answer >= 300 && answer < 400) res.setHeader('location', `${this.url}/elsewhere`);
        res.statusCode = answer;
        res.end(answer === 204 ? undefined : 'x'.repeat(100_000));
      });
    });
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
    return this;
  }

  events(): Event[] {
    return this.received.map((r) => JSON.parse(r.body) as Event);
  }

  async close(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}

const receiver = new Receiver();
beforeAll(async () => {
  await receiver.start();
  await server.runtime.jobs.schedule('webhook_sweep', 'webhook_sweep', 1000, 0);
});
afterAll(() => receiver.close());
// The clock only moves forward (the sweep's schedule would wait for a past slot to come again).
beforeEach(() => {
  receiver.received.length = 0;
  receiver.answers.length = 0;
});

const runJobs = () => server.runtime.jobs.runDue();
/** Moves the clock (past a backoff) and runs what is due. */
async function later(ms: number): Promise<void> {
  offset += ms;
  await runJobs();
}

async function createWebhook(
  user: TestUser,
  body: Partial<components['schemas']['CreateWebhookRequest']> = {},
  path = '/hook',
) {
  const { data, response, error } = await user.api.POST('/api/v1/webhooks', {
    body: { url: `${receiver.url}${path}`, types: ['member.created', 'front.changed'], ...body },
  });
  expect(response.status, JSON.stringify(error)).toBe(201);
  return data!;
}

async function createMember(user: TestUser, name: string): Promise<string> {
  const { data, response } = await user.api.POST('/api/v1/members', { body: { name } });
  expect(response.status).toBe(201);
  return data!.id;
}

async function deliveries(user: TestUser, webhookId: string) {
  const { data, response } = await user.api.GET('/api/v1/webhooks/{webhookId}/deliveries', {
    params: { path: { webhookId } },
  });
  expect(response.status).toBe(200);
  return data!.items;
}

async function getWebhook(user: TestUser, webhookId: string) {
  const { data, response } = await user.api.GET('/api/v1/webhooks/{webhookId}', { params: { path: { webhookId } } });
  expect(response.status).toBe(200);
  return data!;
}

/**
 * Verifies a delivery with the Standard Webhooks reference library; the payload it accepted. The
 * library checks the timestamp against its own clock: it reads the server's (which tests move
 * ahead) while it verifies.
 */
function verify(secret: string, r: Received): unknown {
  const realNow = Date.now;
  Date.now = () => realNow() + offset;
  try {
    return new StandardWebhook(secret).verify(r.body, {
      'webhook-id': String(r.headers['webhook-id']),
      'webhook-timestamp': String(r.headers['webhook-timestamp']),
      'webhook-signature': String(r.headers['webhook-signature']),
    });
  } finally {
    Date.now = realNow;
  }
}

/** The signature a secret gives. */
function signatureOf(secret: string, r: Received): string {
  const key = Buffer.from(secret.slice('whsec_'.length), 'base64');
  const signed = `${r.headers['webhook-id']}.${r.headers['webhook-timestamp']}.${r.body}`;
  return `v1,${createHmac('sha256', key).update(signed).digest('base64')}`;
}

describe('webhook routes', () => {
  it('creates, reads, lists, updates and deletes; the secret is shown once', async () => {
    const user = await server.user();
    const created = await createWebhook(user, { description: 'bot' });
    expect(created.secret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
    expect(Buffer.from(created.secret.slice(6), 'base64')).toHaveLength(32);
    expect(created.webhook).toMatchObject({
      url: `${receiver.url}/hook`,
      types: ['member.created', 'front.changed'],
      description: 'bot',
      enabled: true,
      disabledReason: null,
      failingSince: null,
      lastSuccessAt: null,
    });
    const id = created.webhook.id;
    const listed = await user.api.GET('/api/v1/webhooks');
    expect(listed.data!.map((w) => w.id)).toEqual([id]);
    expect(JSON.stringify(listed.data)).not.toContain(created.secret.slice(6));
    expect(JSON.stringify(await getWebhook(user, id))).not.toContain(created.secret.slice(6));

    const patched = await user.api.PATCH('/api/v1/webhooks/{webhookId}', {
      params: { path: { webhookId: id } },
      body: { types: ['front.changed'], url: `${receiver.url}/other`, description: null, enabled: false },
    });
    expect(patched.response.status).toBe(200);
    expect(patched.data).toMatchObject({
      types: ['front.changed'],
      url: `${receiver.url}/other`,
      description: null,
      enabled: false,
      disabledReason: 'manual',
    });
    expect(patched.data!.disabledAt).toEqual(expect.any(Number));
    const enabled = await user.api.PATCH('/api/v1/webhooks/{webhookId}', {
      params: { path: { webhookId: id } },
      body: { enabled: true },
    });
    expect(enabled.data).toMatchObject({ enabled: true, disabledReason: null, disabledAt: null });

    const deleted = await user.api.DELETE('/api/v1/webhooks/{webhookId}', { params: { path: { webhookId: id } } });
    expect(deleted.response.status).toBe(204);
    const gone = await user.api.GET('/api/v1/webhooks/{webhookId}', { params: { path: { webhookId: id } } });
    expect(gone.response.status).toBe(404);
  });

  it('subscribes to every event type the contract lists for webhooks, each under a scope of its own', async () => {
    const spec = JSON.parse(readFileSync(resolve(import.meta.dirname, '../generated/openapi.json'), 'utf8')) as {
      components: { schemas: Record<string, { enum?: string[] }> };
    };
    const { MemberEventType, ChangeEventType } = spec.components.schemas;
    const types = [...MemberEventType!.enum!, 'front.changed', ...ChangeEventType!.enum!];
    expect(types.length).toBeGreaterThan(80);
    expect(types.length).toBeLessThanOrEqual(100); // WebhookTypes' maxItems: one webhook takes them all
    const user = await server.user();
    const created = await user.api.POST('/api/v1/webhooks', {
      body: { url: `${receiver.url}/hook`, types: types as components['schemas']['WebhookEventType'][] },
    });
    expect(created.response.status).toBe(201);
    expect(created.data!.webhook.types).toEqual(types);
    // Each type names the scope it needs: a key that reads nothing of the account's is refused each one.
    const blind = await server.user({ scopes: { webhooks: 'read_write' } });
    for (const type of types) {
      const refused = await blind.api.POST('/api/v1/webhooks', {
        body: { url: `${receiver.url}/hook`, types: [type as components['schemas']['WebhookEventType']] },
      });
      expect(refused.response.status, type).toBe(400);
      expect(refused.error!.message, type).toMatch(
        new RegExp(`^The key cannot read the events of type ${type.replace('.', '\\.')} \\(it needs `),
      );
    }
  });

  it("refuses types the key cannot read, a URL with credentials, and another account's webhook", async () => {
    const narrow = await server.user({ scopes: { front: 'read', webhooks: 'read_write' } });
    const refused = await narrow.api.POST('/api/v1/webhooks', {
      body: { url: `${receiver.url}/hook`, types: ['front.changed', 'entry.created'] },
    });
    expect(refused.response.status).toBe(400);
    expect(refused.error!.message).toBe('The key cannot read the events of type entry.created (it needs entries:read)');
    const ok = await createWebhook(narrow, { types: ['front.changed'] });
    const widened = await narrow.api.PATCH('/api/v1/webhooks/{webhookId}', {
      params: { path: { webhookId: ok.webhook.id } },
      body: { types: ['member.created'] },
    });
    expect(widened.response.status).toBe(400);

    const credentials = await narrow.api.POST('/api/v1/webhooks', {
      body: { url: 'https://user:pw@hooks.example.net/x', types: ['front.changed'] },
    });
    expect(credentials.response.status).toBe(400);
    const notHttp = await narrow.api.POST('/api/v1/webhooks', {
      body: { url: 'ftp://hooks.example.net/x', types: ['front.changed'] },
    });
    expect(notHttp.response.status).toBe(400);
    const unknownType = await narrow.api.POST('/api/v1/webhooks', {
      // @ts-expect-error: not an event type
      body: { url: 'https://hooks.example.net/x', types: ['front.nope'] },
    });
    expect(unknownType.response.status).toBe(400);

    const readOnly = await server.user({ scopes: { front: 'read', webhooks: 'read' } });
    const forbidden = await readOnly.api.POST('/api/v1/webhooks', {
      body: { url: `${receiver.url}/hook`, types: ['front.changed'] },
    });
    expect(forbidden.response.status).toBe(403);
    const noScope = await server.user({ scopes: { front: 'read_write' } });
    expect((await noScope.api.GET('/api/v1/webhooks')).response.status).toBe(403);

    const other = await server.user();
    const webhookId = ok.webhook.id;
    const params = { params: { path: { webhookId } } };
    expect((await other.api.GET('/api/v1/webhooks/{webhookId}', params)).response.status).toBe(404);
    expect(
      (await other.api.PATCH('/api/v1/webhooks/{webhookId}', { ...params, body: { enabled: false } })).response.status,
    ).toBe(404);
    expect((await other.api.POST('/api/v1/webhooks/{webhookId}/rotate-secret', params)).response.status).toBe(404);
    expect((await other.api.POST('/api/v1/webhooks/{webhookId}/test', params)).response.status).toBe(404);
    expect((await other.api.GET('/api/v1/webhooks/{webhookId}/deliveries', params)).response.status).toBe(404);
    expect((await other.api.DELETE('/api/v1/webhooks/{webhookId}', params)).response.status).toBe(404);
    expect((await other.api.GET('/api/v1/webhooks')).data).toEqual([]);
    expect(receiver.received).toEqual([]);
  });

  it('allows 20 webhooks per account (409 beyond)', async () => {
    const user = await server.user();
    for (let i = 0; i < 20; i++) await createWebhook(user, { types: ['front.changed'] });
    const more = await user.api.POST('/api/v1/webhooks', {
      body: { url: `${receiver.url}/hook`, types: ['front.changed'] },
    });
    expect(more.response.status).toBe(409);
    expect(more.error!.message).toBe('An account has at most 20 webhooks');
  });

  it('creates a webhook in one statement: the cap, the webhook and its audit row', async () => {
    const user = await server.user();
    await createWebhook(user); // warms the key cache
    const knex = server.deps.db.knex;
    let created: Awaited<ReturnType<typeof createWebhook>> | undefined;
    const statements = await captureStatements(knex, REQUEST_WORK, async () => {
      created = await createWebhook(user, { description: 'one' });
    });
    expect(statements.map((st) => st.sql.trim().split(/\s+/).slice(0, 3).join(' '))).toEqual(['with account as']);
    const id = created!.webhook.id;
    expect(created!.secret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
    expect(created!.webhook).toEqual(await getWebhook(user, id));
    const { rows } = await knex.raw<{ rows: Array<Record<string, unknown>> }>(
      `select user_id, actor_kind, actor_key_id, action, target_type, target_id, detail::text as detail from audit_events
       where user_id = ? and action = 'webhook.create' and target_id = ?`,
      [user.userId, id],
    );
    expect(rows).toEqual([
      {
        user_id: user.userId,
        actor_kind: 'key',
        actor_key_id: user.keyId,
        action: 'webhook.create',
        target_type: 'webhook',
        target_id: id,
        detail: '{}',
      },
    ]);
  });

  it('gives the last slots under the cap to exactly as many concurrent creates, and frees a slot on delete', async () => {
    const user = await server.user();
    const first = await createWebhook(user, { types: ['front.changed'] });
    for (let i = 0; i < 17; i++) await createWebhook(user, { types: ['front.changed'] });
    const deleted = await user.api.DELETE('/api/v1/webhooks/{webhookId}', {
      params: { path: { webhookId: first.webhook.id } },
    });
    expect(deleted.response.status).toBe(204);
    const post = () =>
      user.api.POST('/api/v1/webhooks', { body: { url: `${receiver.url}/hook`, types: ['front.changed'] } });
    const results = await Promise.all(Array.from({ length: 16 }, post));
    const statuses = results.map((r) => r.response.status).sort();
    expect(statuses).toEqual([...Array<number>(3).fill(201), ...Array<number>(13).fill(409)]);
    for (const r of results.filter((x) => x.response.status === 409))
      expect(r.error!.message).toBe('An account has at most 20 webhooks');
    const listed = (await user.api.GET('/api/v1/webhooks')).data!;
    expect(listed).toHaveLength(20);
    await user.api.DELETE('/api/v1/webhooks/{webhookId}', { params: { path: { webhookId: listed[0]!.id } } });
    expect((await post()).response.status).toBe(201);
    expect((await post()).response.status).toBe(409);
  });

  it('keeps the URL and the secret sealed at rest', async () => {
    const user = await server.user();
    const { webhook, secret } = await createWebhook(user, {}, '/sealed-path-canary');
    const row: Record<string, unknown> = await server.runtime.deps.db
      .knex('webhooks')
      .where({ id: webhook.id })
      .first();
    // Every column as text, a binary one as its bytes read as text: a URL or secret stored in clear would show.
    const dump = Object.values(row)
      .map((v) => (v instanceof Uint8Array ? Buffer.from(v).toString('latin1') : JSON.stringify(v)))
      .join('\n');
    expect(dump).toContain(webhook.id);
    expect(Buffer.from(row.secrets_enc as Uint8Array).length).toBeGreaterThan(28);
    expect(dump).not.toContain('sealed-path-canary');
    expect(dump).not.toContain(secret.slice(6));
    expect(dump).not.toContain(Buffer.from(secret.slice(6), 'base64').toString('latin1'));
  });
});

describe('deliveries', () => {
  it('queues nothing for a write that rolls back', async () => {
    const user = await server.user();
    const { webhook } = await createWebhook(user, { types: ['member.created', 'member.updated'] });
    const id = await createMember(user, 'Kept');
    // Refused (a stale version): its transaction, event and delivery with it, rolls back.
    const stale = await user.api.PATCH('/api/v1/members/{memberId}', {
      params: { path: { memberId: id } },
      body: { pronouns: 'they/them', expectedVersion: 99 },
    });
    expect(stale.response.status).toBe(409);
    await runJobs();
    expect(receiver.events().map((e) => e.type)).toEqual(['member.created']);
    expect((await deliveries(user, webhook.id)).map((d) => d.type)).toEqual(['member.created']);
  });

  it('keeps working through a rotation of the message keyring: the re-encryption job rewrites the webhook too', async () => {
    const user = await server.user();
    const { webhook, secret } = await createWebhook(user, { types: ['member.created'] });
    const config = server.deps.config;
    const original = config.messageEncryptionKeys;
    try {
      const fresh = { id: 'rotated', key: Buffer.alloc(32, 7) };
      config.messageEncryptionKeys = [fresh, ...original];
      expect(await queueMessageReencryption(server.runtime.jobs, server.runtime.deps.db.knex, config)).toBe(true);
      await runJobs();
      const row = await server.runtime.deps.db.knex('webhooks').where({ id: webhook.id }).first('key_id');
      expect(row.key_id).toBe('rotated');
      // The old key gone: the webhook reads and delivers under the new one alone.
      config.messageEncryptionKeys = [fresh];
      expect((await getWebhook(user, webhook.id)).url).toBe(`${receiver.url}/hook`);
      await createMember(user, 'After rotation');
      await runJobs();
      verify(secret, receiver.received[0]!);
    } finally {
      config.messageEncryptionKeys = original;
    }
  });

  it('sends the subscribed events, signed, in order, each with its event id; verified by standardwebhooks', async () => {
    const user = await server.user();
    const { webhook, secret } = await createWebhook(user);
    const ids: string[] = [];
    for (const name of ['Ash', 'Birch', 'Cedar']) ids.push(await createMember(user, name));
    // Not subscribed: never sent.
    await user.api.POST('/api/v1/groups', { body: { name: 'Trees' } });
    await user.api.POST('/api/v1/front/members', { body: { memberId: ids[1]! } });
    await runJobs();

    expect(receiver.received.map((r) => JSON.parse(r.body).type)).toEqual([
      'member.created',
      'member.created',
      'member.created',
      'front.changed',
    ]);
    const events = receiver.events();
    expect(events.slice(0, 3).map((e) => e.type === 'member.created' && e.data.memberId)).toEqual(ids);
    const eventIds = events.map((e) => Number(e.id));
    expect([...eventIds].sort((a, b) => a - b)).toEqual(eventIds);
    for (const r of receiver.received) {
      const payload = verify(secret, r) as Event;
      expect(r.headers['webhook-id']).toBe(payload.id);
      expect(r.headers['content-type']).toBe('application/json');
      expect(payload.accountId).toBe(user.userId);
      expect(payload.actor).toEqual({ kind: 'key', id: user.keyId });
    }
    expect(() => verify(`whsec_${Buffer.alloc(32, 1).toString('base64')}`, receiver.received[0]!)).toThrow();

    // The typed client's helper accepts what the reference library accepts, and refuses the rest.
    const first = receiver.received[0]!;
    const now = Date.now() + offset;
    const payload = await verifyWebhook({ secret, headers: first.headers, body: first.body, now });
    expect(payload).toEqual(JSON.parse(first.body));
    const bytes = await verifyWebhook({ secret, headers: first.headers, body: Buffer.from(first.body), now });
    expect(bytes.type).toBe('member.created');
    const refusals = [
      { secret: `whsec_${Buffer.alloc(32, 1).toString('base64')}`, headers: first.headers, body: first.body, now },
      { secret, headers: first.headers, body: first.body.replace('member.created', 'member.trashed'), now },
      { secret, headers: { ...first.headers, 'webhook-id': 'x' }, body: first.body, now },
      { secret, headers: first.headers, body: first.body, now: now + 301_000 },
      { secret, headers: { ...first.headers, 'webhook-signature': undefined }, body: first.body, now },
    ];
    for (const options of refusals)
      await expect(verifyWebhook(options)).rejects.toBeInstanceOf(WebhookVerificationError);
    const front = events[3]!;
    expect(front.type === 'front.changed' && front.data.front.memberIds).toEqual([ids[1]]);

    const list = await deliveries(user, webhook.id);
    expect(list.map((d) => d.eventId)).toEqual([...events].reverse().map((e) => e.id));
    expect(list.every((d) => d.state === 'succeeded' && d.attempts === 1 && d.statusCode === 204)).toBe(true);
    expect((await getWebhook(user, webhook.id)).lastSuccessAt).toEqual(expect.any(Number));
  });

  it("sends another account's events never, and a disabled webhook's none", async () => {
    const user = await server.user();
    const other = await server.user();
    const { webhook } = await createWebhook(user);
    await createMember(other, 'Elsewhere');
    await user.api.PATCH('/api/v1/webhooks/{webhookId}', {
      params: { path: { webhookId: webhook.id } },
      body: { enabled: false },
    });
    await createMember(user, 'While off');
    await runJobs();
    expect(receiver.received).toEqual([]);
    expect(await deliveries(user, webhook.id)).toEqual([]);
  });

  it('retries a 500 and a timeout with backoff, holding later events back, with the same webhook-id', async () => {
    const user = await server.user();
    const { webhook, secret } = await createWebhook(user, { types: ['member.created'] });
    receiver.answers.push(500, 'hang');
    const first = await createMember(user, 'First');
    await runJobs();
    expect(receiver.received).toHaveLength(1);
    let [pending] = await deliveries(user, webhook.id);
    expect(pending).toMatchObject({ state: 'pending', attempts: 1, statusCode: 500, error: 'status 500' });
    const due = pending!.nextAttemptAt! - pending!.lastAttemptAt!;
    expect(due).toBeGreaterThanOrEqual(4_500);
    expect(due).toBeLessThanOrEqual(5_500);
    expect((await getWebhook(user, webhook.id)).failingSince).toEqual(expect.any(Number));

    // A later event waits behind the one being retried.
    const second = await createMember(user, 'Second');
    await runJobs();
    expect(receiver.received).toHaveLength(1);

    await later(6_000);
    // The second attempt hangs: a timeout, due again after 30 s.
    expect(receiver.received).toHaveLength(2);
    [, pending] = await deliveries(user, webhook.id);
    expect(pending).toMatchObject({ state: 'pending', attempts: 2, statusCode: null, error: 'timeout' });

    await later(35_000);
    expect(receiver.received).toHaveLength(4);
    const ids = receiver.received.map((r) => r.headers['webhook-id']);
    expect(ids[0]).toBe(ids[1]);
    expect(ids[1]).toBe(ids[2]);
    expect(receiver.events().map((e) => e.type === 'member.created' && e.data.memberId)).toEqual([
      first,
      first,
      first,
      second,
    ]);
    // Signed at each attempt's time.
    verify(secret, receiver.received[2]!);
    const list = await deliveries(user, webhook.id);
    expect(list.map((d) => [d.state, d.attempts])).toEqual([
      ['succeeded', 1],
      ['succeeded', 3],
    ]);
    expect((await getWebhook(user, webhook.id)).failingSince).toBeNull();
  });

  it('gives up after eight attempts over about 19 hours, then sends the next delivery', async () => {
    const user = await server.user();
    const { webhook } = await createWebhook(user, { types: ['member.created'] });
    receiver.answers.push(...Array<number>(8).fill(503));
    await createMember(user, 'Doomed');
    await createMember(user, 'Next');
    await runJobs();
    for (const wait of [5_000, 30_000, 120_000, 600_000, 3_600_000, 21_600_000, 43_200_000]) await later(wait * 1.11);
    expect(receiver.received).toHaveLength(9);
    const [next, doomed] = await deliveries(user, webhook.id);
    expect(doomed).toMatchObject({ state: 'failed', attempts: 8, statusCode: 503, nextAttemptAt: null });
    expect(next).toMatchObject({ state: 'succeeded', attempts: 1 });
  });

  it('disables a webhook at once on 410 Gone, and after 72 hours without a success', async () => {
    const user = await server.user();
    const gone = await createWebhook(user, { types: ['member.created'] }, '/gone');
    receiver.answers.push(410);
    await createMember(user, 'A');
    await runJobs();
    expect(await getWebhook(user, gone.webhook.id)).toMatchObject({ enabled: false, disabledReason: 'gone' });
    expect((await deliveries(user, gone.webhook.id))[0]).toMatchObject({ state: 'failed', statusCode: 410 });
    await createMember(user, 'B');
    await runJobs();
    expect(receiver.received).toHaveLength(1);
    await user.api.DELETE('/api/v1/webhooks/{webhookId}', { params: { path: { webhookId: gone.webhook.id } } });

    const failing = await createWebhook(user, { types: ['member.created'] }, '/failing');
    receiver.answers.push(...Array<number>(20).fill(500));
    await createMember(user, 'C');
    await runJobs();
    await later(13 * HOUR);
    await createMember(user, 'D');
    // One attempt per 13-hour step (D waits behind C): at 65 h still on, at 78 h off.
    for (let i = 0; i < 4; i++) await later(13 * HOUR);
    expect(await getWebhook(user, failing.webhook.id)).toMatchObject({ enabled: true, disabledReason: null });
    await later(13 * HOUR);
    const disabled = await getWebhook(user, failing.webhook.id);
    expect(disabled).toMatchObject({ enabled: false, disabledReason: 'failing' });
    expect(disabled.disabledAt! - disabled.failingSince!).toBeGreaterThanOrEqual(72 * HOUR);

    // Enabled again: the pending delivery resumes at once and the failing clock restarts.
    const count = receiver.received.length;
    receiver.answers.length = 0;
    const on = await user.api.PATCH('/api/v1/webhooks/{webhookId}', {
      params: { path: { webhookId: failing.webhook.id } },
      body: { enabled: true },
    });
    expect(on.data).toMatchObject({ enabled: true, failingSince: null, disabledReason: null });
    // Due at once, not after the 12-hour backoff the last attempt left (the sweep runs every second).
    await later(2_000);
    expect(receiver.received.length).toBe(count + 2);
    expect((await deliveries(user, failing.webhook.id)).map((d) => d.state)).toEqual(['succeeded', 'succeeded']);
  });

  it('signs with both secrets for 24 hours after a rotation, then with the new one only', async () => {
    const user = await server.user();
    const { webhook, secret: old } = await createWebhook(user, { types: ['member.created'] });
    const rotated = await user.api.POST('/api/v1/webhooks/{webhookId}/rotate-secret', {
      params: { path: { webhookId: webhook.id } },
    });
    expect(rotated.response.status).toBe(200);
    const { secret: fresh, previousSecretExpiresAt } = rotated.data!;
    expect(fresh).not.toBe(old);
    expect((await getWebhook(user, webhook.id)).previousSecretExpiresAt).toBe(previousSecretExpiresAt);
    await createMember(user, 'Rotated');
    await runJobs();
    const both = receiver.received[0]!;
    expect(String(both.headers['webhook-signature']).split(' ')).toHaveLength(2);
    verify(fresh, both);
    verify(old, both);

    offset += 24 * HOUR + 1000;
    await createMember(user, 'Later');
    await runJobs();
    const one = receiver.received[1]!;
    expect(String(one.headers['webhook-signature']).split(' ')).toEqual([signatureOf(fresh, one)]);
    expect(String(one.headers['webhook-signature'])).not.toContain(signatureOf(old, one));
    expect((await getWebhook(user, webhook.id)).previousSecretExpiresAt).toBeNull();
  });

  it('pings on request and answers with the outcome; a failed delivery can be retried', async () => {
    const user = await server.user();
    const { webhook, secret } = await createWebhook(user, { types: ['member.created'] });
    const params = { params: { path: { webhookId: webhook.id } } };
    const ping = await user.api.POST('/api/v1/webhooks/{webhookId}/test', params);
    expect(ping.response.status).toBe(200);
    expect(ping.data).toMatchObject({ type: 'ping', eventId: null, state: 'succeeded', statusCode: 204, attempts: 1 });
    expect(verify(secret, receiver.received[0]!)).toEqual({
      type: 'ping',
      occurredAt: expect.any(Number),
      accountId: user.userId,
      data: { webhookId: webhook.id },
    });
    expect(String(receiver.received[0]!.headers['webhook-id'])).toMatch(/^ping_/);

    receiver.answers.push(500);
    const failed = await user.api.POST('/api/v1/webhooks/{webhookId}/test', params);
    expect(failed.data).toMatchObject({ state: 'failed', statusCode: 500, error: 'status 500' });

    // A delivery refused with 410 (the webhook disabled), enabled again and retried by hand.
    receiver.answers.push(410);
    await createMember(user, 'Retried');
    await runJobs();
    const [refused] = await deliveries(user, webhook.id);
    expect(refused).toMatchObject({ state: 'failed', statusCode: 410 });
    await user.api.PATCH('/api/v1/webhooks/{webhookId}', { ...params, body: { enabled: true } });
    const retry = await user.api.POST('/api/v1/webhooks/{webhookId}/deliveries/{deliveryId}/retry', {
      params: { path: { webhookId: webhook.id, deliveryId: refused!.id } },
    });
    expect(retry.response.status).toBe(202);
    expect(retry.data).toMatchObject({ id: refused!.id, state: 'pending', attempts: 0 });
    await runJobs();
    const last = receiver.received.at(-1)!;
    expect(last.headers['webhook-id']).toBe(refused!.eventId);
    expect((await deliveries(user, webhook.id))[0]).toMatchObject({ id: refused!.id, state: 'succeeded' });

    const missing = await user.api.POST('/api/v1/webhooks/{webhookId}/deliveries/{deliveryId}/retry', {
      params: { path: { webhookId: webhook.id, deliveryId: '99999999' } },
    });
    expect(missing.response.status).toBe(404);
    const other = await server.user();
    const foreign = await other.api.POST('/api/v1/webhooks/{webhookId}/deliveries/{deliveryId}/retry', {
      params: { path: { webhookId: webhook.id, deliveryId: refused!.id } },
    });
    expect(foreign.response.status).toBe(404);
  });

  it('pages deliveries newest first', async () => {
    const user = await server.user();
    const { webhook } = await createWebhook(user, { types: ['member.created'] });
    for (let i = 0; i < 5; i++) await createMember(user, `M${i}`);
    await runJobs();
    const seen: string[] = [];
    let cursor: string | undefined;
    do {
      const { data } = await user.api.GET('/api/v1/webhooks/{webhookId}/deliveries', {
        params: { path: { webhookId: webhook.id }, query: { limit: 2, ...(cursor ? { cursor } : {}) } },
      });
      seen.push(...data!.items.map((d) => d.id));
      cursor = data!.nextCursor ?? undefined;
    } while (cursor);
    expect(seen).toHaveLength(5);
    expect([...seen].sort((a, b) => Number(b) - Number(a))).toEqual(seen);
    // A cursor past the exact integers, or not digits at all, is the caller's mistake.
    for (const cursor of ['9999999999999999999', 'abc']) {
      const bad = await user.api.GET('/api/v1/webhooks/{webhookId}/deliveries', {
        params: { path: { webhookId: webhook.id }, query: { cursor } },
      });
      expect(bad.response.status, cursor).toBe(400);
    }
  });

  it('does not follow a redirect, and reads at most 64 KB of an answer', async () => {
    const user = await server.user();
    const { webhook } = await createWebhook(user, { types: ['member.created'] });
    receiver.answers.push(302, 200);
    await createMember(user, 'Redirected');
    await runJobs();
    expect(receiver.received).toHaveLength(1);
    expect((await deliveries(user, webhook.id))[0]).toMatchObject({
      state: 'pending',
      statusCode: 302,
      error: 'redirect 302 not followed',
    });
    // The next attempt's 200 carries a 100 KB body: a success all the same.
    await later(6_000);
    expect((await deliveries(user, webhook.id))[0]).toMatchObject({ state: 'succeeded', statusCode: 200 });
  });
});

describe('without FETCH_ALLOW_PRIVATE', () => {
  const strict = new TestServer();
  beforeAll(async () => {
    await strict.start();
  });
  afterAll(() => strict.close());

  it('refuses a private literal address, and a host that resolves to one at delivery', async () => {
    const user = await strict.user();
    const literal = await user.api.POST('/api/v1/webhooks', {
      body: { url: `${receiver.url}/hook`, types: ['member.created'] },
    });
    expect(literal.response.status).toBe(400);
    const port = new URL(receiver.url).port;
    const created = await user.api.POST('/api/v1/webhooks', {
      body: { url: `http://localhost:${port}/hook`, types: ['member.created'] },
    });
    expect(created.response.status).toBe(201);
    await user.api.POST('/api/v1/members', { body: { name: 'Private' } });
    await strict.runtime.jobs.runDue();
    const { data } = await user.api.GET('/api/v1/webhooks/{webhookId}/deliveries', {
      params: { path: { webhookId: created.data!.webhook.id } },
    });
    expect(data!.items[0]).toMatchObject({ state: 'pending', error: 'private_address', statusCode: null });
    expect(receiver.received).toEqual([]);
  });
});

describe('with the job queue polling on its own', () => {
  const live = new TestServer();
  beforeAll(async () => {
    // A poll a minute: only the commit's notification can get a delivery out within seconds.
    await live.start({ env: { FETCH_ALLOW_PRIVATE: 'true', JOB_POLL_INTERVAL_MS: '60000' } });
    await live.runtime.startJobs();
    // The start's first poll is over.
    await new Promise((r) => setTimeout(r, 200));
  });
  afterAll(() => live.close());

  it("delivers as the event commits: the append's notification wakes the delivery job", async () => {
    const user = await live.user();
    const created = await user.api.POST('/api/v1/webhooks', {
      body: { url: `${receiver.url}/live`, types: ['member.created'] },
    });
    expect(created.response.status).toBe(201);
    const started = Date.now();
    await user.api.POST('/api/v1/members', { body: { name: 'Live' } });
    while (receiver.received.length === 0 && Date.now() - started < 5_000) await new Promise((r) => setTimeout(r, 10));
    expect(receiver.received).toHaveLength(1);
    expect(Date.now() - started).toBeLessThan(5_000);
  });
});

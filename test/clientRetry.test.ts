/** The client's retryingFetch against a scripted node:http server: 429 with Retry-After, 503 with backoff, bounds. */
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { performance } from 'node:perf_hooks';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createApiClient, parseRetryAfter, retryingFetch, type RetryEvent } from '../client/index.ts';

interface Seen {
  method: string;
  path: string;
  body: string;
  authorization: string | undefined;
  idempotencyKey: string | undefined;
  at: number;
}

interface Scripted {
  status: number;
  headers?: Record<string, string>;
  body?: unknown;
}

/** Answers each request with the next scripted response (then 200 { ok: true }) and records what it saw. */
let script: Scripted[] = [];
let seen: Seen[] = [];
let server: Server;
let baseUrl: string;

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    let text = '';
    req.setEncoding('utf8');
    req.on('data', (chunk: string) => (text += chunk));
    req.on('end', () => resolve(text));
    req.on('error', reject);
  });
}

beforeAll(async () => {
  server = createServer(async (req, res) => {
    const body = await readBody(req);
    seen.push({
      method: req.method!,
      path: req.url!,
      body,
      authorization: req.headers.authorization,
      idempotencyKey: req.headers['idempotency-key'] as string | undefined,
      at: performance.now(),
    });
    const next = script.shift() ?? { status: 200, body: { ok: true } };
    res.writeHead(next.status, { 'Content-Type': 'application/json', ...next.headers });
    res.end(JSON.stringify(next.body ?? { ok: true }));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  await new Promise<void>((resolve) => server.close(() => resolve()));
});

beforeEach(() => {
  script = [];
  seen = [];
});

const limited = (retryAfter: string): Scripted => ({
  status: 429,
  headers: { 'Retry-After': retryAfter },
  body: { code: 'RATE_LIMITED', message: 'slow down' },
});
const unavailable: Scripted = {
  status: 503,
  body: { code: 'PRECONDITION_FAILED', message: 'Database is not reachable' },
};

describe('retryingFetch', () => {
  it('waits the Retry-After of a 429, then retries and returns the success', async () => {
    script = [limited('1')];
    const events: RetryEvent[] = [];
    const fetch = retryingFetch({ onRetry: (e) => events.push(e) });
    const res = await fetch(`${baseUrl}/things`);
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ ok: true });
    expect(seen.map((s) => s.method)).toEqual(['GET', 'GET']);
    expect(events.map((e) => [e.attempt, e.delayMs, e.response?.status])).toEqual([[1, 1000, 429]]);
    // Timers may fire a hair early against performance.now(); a missing wait would be ~0 ms.
    expect(seen[1]!.at - seen[0]!.at).toBeGreaterThanOrEqual(990);
  });

  it('retries a 503 with backoff and resends the request body', async () => {
    script = [unavailable, unavailable];
    const events: RetryEvent[] = [];
    const fetch = retryingFetch({ baseDelayMs: 100, onRetry: (e) => events.push(e) });
    const res = await fetch(`${baseUrl}/things/1`, {
      method: 'PUT',
      headers: { 'Content-Type': 'application/json' },
      body: '{"name":"Robin"}',
    });
    expect(res.status).toBe(200);
    expect(seen.map((s) => [s.method, s.body])).toEqual([
      ['PUT', '{"name":"Robin"}'],
      ['PUT', '{"name":"Robin"}'],
      ['PUT', '{"name":"Robin"}'],
    ]);
    // Exponential with jitter: the n-th wait lies in [base·2^(n-1)/2, base·2^(n-1)].
    expect(events.map((e) => e.attempt)).toEqual([1, 2]);
    expect(events[0]!.delayMs).toBeGreaterThanOrEqual(50);
    expect(events[0]!.delayMs).toBeLessThanOrEqual(100);
    expect(events[1]!.delayMs).toBeGreaterThanOrEqual(100);
    expect(events[1]!.delayMs).toBeLessThanOrEqual(200);
    expect(seen[1]!.at - seen[0]!.at).toBeGreaterThanOrEqual(events[0]!.delayMs - 10);
    expect(seen[2]!.at - seen[1]!.at).toBeGreaterThanOrEqual(events[1]!.delayMs - 10);
  });

  it('gives up after maxAttempts and returns the last 503', async () => {
    script = [unavailable, unavailable, unavailable, unavailable];
    const fetch = retryingFetch({ maxAttempts: 3, baseDelayMs: 10 });
    const res = await fetch(`${baseUrl}/things`);
    expect(res.status).toBe(503);
    expect(await res.json()).toEqual({ code: 'PRECONDITION_FAILED', message: 'Database is not reachable' });
    expect(seen).toHaveLength(3);
  });

  it('retries POST with one Idempotency-Key on every attempt (a new UUID per request)', async () => {
    script = [unavailable, limited('0')];
    const fetch = retryingFetch({ baseDelayMs: 10 });
    const res = await fetch(`${baseUrl}/things`, { method: 'POST', body: '{"a":1}' });
    expect(res.status).toBe(200);
    expect(seen.map((s) => [s.method, s.body])).toEqual([
      ['POST', '{"a":1}'],
      ['POST', '{"a":1}'],
      ['POST', '{"a":1}'],
    ]);
    const [key] = seen.map((s) => s.idempotencyKey);
    expect(key).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect(seen.every((s) => s.idempotencyKey === key)).toBe(true);
    await fetch(`${baseUrl}/things`, { method: 'POST', body: '{"a":1}' });
    expect(seen[3]!.idempotencyKey).not.toBe(key);
  });

  it("keeps the caller's Idempotency-Key, and sends none on other methods", async () => {
    script = [unavailable];
    const fetch = retryingFetch({ baseDelayMs: 10 });
    await fetch(`${baseUrl}/things`, { method: 'POST', body: '{}', headers: { 'Idempotency-Key': 'mine-1' } });
    await fetch(`${baseUrl}/things`, { method: 'PUT', body: '{}' });
    expect(seen.map((s) => [s.method, s.idempotencyKey])).toEqual([
      ['POST', 'mine-1'],
      ['POST', 'mine-1'],
      ['PUT', undefined],
    ]);
  });

  it('retries a keyed POST after the in-flight 409 (its Retry-After) and after a network error', async () => {
    script = [
      { status: 409, headers: { 'Retry-After': '0' }, body: { code: 'CONFLICT', message: 'still being processed' } },
    ];
    const fetch = retryingFetch({ baseDelayMs: 10 });
    expect((await fetch(`${baseUrl}/things`, { method: 'POST', body: '{}' })).status).toBe(200);
    expect(seen).toHaveLength(2);

    // A 409 without Retry-After is a real conflict: returned as it is.
    script = [{ status: 409, body: { code: 'CONFLICT', message: 'taken' } }];
    expect((await fetch(`${baseUrl}/things`, { method: 'POST', body: '{}' })).status).toBe(409);
    expect(seen).toHaveLength(3);

    let failures = 1;
    const events: RetryEvent[] = [];
    const flaky: typeof globalThis.fetch = (input, init) => {
      if (failures-- > 0) return Promise.reject(new TypeError('fetch failed'));
      return globalThis.fetch(input, init);
    };
    const retried = retryingFetch({ baseDelayMs: 10, fetch: flaky, onRetry: (e) => events.push(e) });
    expect((await retried(`${baseUrl}/things`, { method: 'POST', body: '{"n":1}' })).status).toBe(200);
    expect(events).toHaveLength(1);
    expect(events[0]!.response).toBeUndefined();
    expect(String(events[0]!.error)).toContain('fetch failed');
    // Without a key, a network error is not retried: the write may have happened.
    failures = 1;
    const unkeyed = retryingFetch({ baseDelayMs: 10, fetch: flaky, idempotencyKeys: false, methods: ['POST'] });
    await expect(unkeyed(`${baseUrl}/things`, { method: 'POST', body: '{}' })).rejects.toThrow('fetch failed');
  });

  it('with idempotencyKeys: false, sends POST once and without a key, unless the caller lists it', async () => {
    script = [limited('1'), unavailable, unavailable];
    const once = retryingFetch({ baseDelayMs: 10, idempotencyKeys: false });
    expect((await once(`${baseUrl}/things`, { method: 'POST', body: '{}' })).status).toBe(429);
    expect((await once(`${baseUrl}/things`, { method: 'POST', body: '{}' })).status).toBe(503);
    const listed = retryingFetch({ baseDelayMs: 10, idempotencyKeys: false, methods: ['POST'] });
    expect((await listed(`${baseUrl}/things`, { method: 'POST', body: '{"a":1}' })).status).toBe(200);
    expect(seen.map((s) => [s.method, s.idempotencyKey])).toEqual([
      ['POST', undefined],
      ['POST', undefined],
      ['POST', undefined],
      ['POST', undefined],
    ]);
  });

  it('does not retry PATCH', async () => {
    script = [unavailable];
    const res = await retryingFetch({ baseDelayMs: 10 })(`${baseUrl}/things`, { method: 'PATCH', body: '{}' });
    expect(res.status).toBe(503);
    expect(seen).toHaveLength(1);
  });

  it('returns a 429 at once when its Retry-After is longer than maxDelayMs', async () => {
    script = [limited('30')];
    const fetch = retryingFetch({ maxDelayMs: 5_000 });
    const started = performance.now();
    const res = await fetch(`${baseUrl}/things`);
    expect(res.status).toBe(429);
    expect(seen).toHaveLength(1);
    expect(performance.now() - started).toBeLessThan(1_000);
  });

  it('stops waiting when the request is aborted', async () => {
    script = [limited('10')];
    const controller = new AbortController();
    const fetch = retryingFetch({ onRetry: () => controller.abort(new Error('gave up')) });
    await expect(fetch(`${baseUrl}/things`, { signal: controller.signal })).rejects.toThrow('gave up');
    expect(seen).toHaveLength(1);
  });

  it('works as the typed client fetch: retried requests keep the API key', async () => {
    script = [limited('0'), unavailable];
    const api = createApiClient({ baseUrl, apiKey: 'adk_test', fetch: retryingFetch({ baseDelayMs: 10 }) });
    const { response } = await api.GET('/api/v1/appearance');
    expect(response.status).toBe(200);
    expect(seen.map((s) => [s.method, s.path, s.authorization])).toEqual([
      ['GET', '/api/v1/appearance', 'Bearer adk_test'],
      ['GET', '/api/v1/appearance', 'Bearer adk_test'],
      ['GET', '/api/v1/appearance', 'Bearer adk_test'],
    ]);
  });
});

describe('parseRetryAfter', () => {
  it('reads delay-seconds and HTTP-dates, and ignores anything else', () => {
    const now = Date.parse('2026-11-23T12:00:00Z');
    expect(parseRetryAfter('42', now)).toBe(42_000);
    expect(parseRetryAfter(' 0 ', now)).toBe(0);
    expect(parseRetryAfter('Mon, 23 Nov 2026 12:00:05 GMT', now)).toBe(5_000);
    expect(parseRetryAfter('Mon, 23 Nov 2026 11:00:00 GMT', now)).toBe(0);
    expect(parseRetryAfter('soon', now)).toBeUndefined();
    expect(parseRetryAfter('-1', now)).toBeUndefined();
    expect(parseRetryAfter(null, now)).toBeUndefined();
  });
});

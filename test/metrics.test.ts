/** GET /metrics: Prometheus text with request, rate-limit, pool, job and process series. */
import { describe, expect, it } from 'vitest';
import { createMember, UNKNOWN_ID } from './helpers/fixtures.ts';
import { bearer, TestServer, useServer } from './helpers/server.ts';

const server = useServer({ env: { RATE_LIMIT_PER_MINUTE: '3' } });

/** The value of one sample line (`name{labels} value`), or undefined when the series is absent. */
function sample(text: string, name: string, labels: Record<string, string> = {}): number | undefined {
  for (const line of text.split('\n')) {
    if (!line.startsWith(name)) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)$/.exec(line);
    if (!m || m[1] !== name) continue;
    const found = Object.fromEntries([...(m[3] ?? '').matchAll(/(\w+)="([^"]*)"/g)].map((x) => [x[1], x[2]]));
    if (Object.entries(labels).every(([k, v]) => found[k] === v)) return Number(m[4]);
  }
  return undefined;
}

async function scrape(s: TestServer = server, headers: Record<string, string> = {}): Promise<string> {
  const res = await s.fetch('/metrics', { headers });
  expect(res.status).toBe(200);
  expect(res.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
  return res.text();
}

describe('GET /metrics', () => {
  it('counts requests per operationId, method and status class, with a latency histogram', async () => {
    const user = await server.user();
    const member = await createMember(user.api);
    await user.api.GET('/api/v1/members/{memberId}', { params: { path: { memberId: member } } });
    await user.api.GET('/api/v1/members/{memberId}', { params: { path: { memberId: UNKNOWN_ID } } });
    await server.fetch('/no/such/route');
    const text = await scrape();
    expect(text).toContain('# TYPE http_requests_total counter');
    expect(
      sample(text, 'http_requests_total', { operation: 'createMember', method: 'POST', status_class: '2xx' }),
    ).toBe(1);
    expect(sample(text, 'http_requests_total', { operation: 'getMember', method: 'GET', status_class: '2xx' })).toBe(1);
    expect(sample(text, 'http_requests_total', { operation: 'getMember', method: 'GET', status_class: '4xx' })).toBe(1);
    expect(sample(text, 'http_requests_total', { operation: 'unmatched', method: 'GET', status_class: '4xx' })).toBe(1);
    expect(sample(text, 'http_request_duration_seconds_count', { operation: 'getMember', status_class: '2xx' })).toBe(
      1,
    );
    expect(
      sample(text, 'http_request_duration_seconds_bucket', { operation: 'getMember', status_class: '2xx', le: '+Inf' }),
    ).toBe(1);
    // No raw paths, ids or accounts in label values.
    expect(text).not.toContain(member);
    expect(text).not.toContain(user.userId);
  });

  it('counts rate-limit refusals, is not itself rate limited, and reports the database pool, jobs and the process', async () => {
    const user = await server.user();
    for (let i = 0; i < 5; i++) await server.fetch('/api/v1/appearance/custom-fonts', { headers: bearer(user.apiKey) });
    // Through the durable queue, as the schedule runs it.
    await server.runtime.jobs.enqueue(server.deps.db.knex, 'trash_retention', {});
    await server.runtime.jobs.runDue();
    let text = '';
    for (let i = 0; i < 5; i++) text = await scrape(); // more scrapes than the per-key limit of 3
    expect(sample(text, 'rate_limit_refusals_total')).toBe(2);
    for (const state of ['in_use', 'idle', 'waiting'])
      expect(sample(text, 'db_pool_connections', { pool: 'main', state })).toBeGreaterThanOrEqual(0);
    // PostgreSQL has a second pool for the hot reads' prepared statements; the embedded database has one connection.
    for (const state of ['in_use', 'idle', 'waiting']) {
      const prepared = sample(text, 'db_pool_connections', { pool: 'prepared', state });
      if (server.deps.db.kind === 'postgres') expect(prepared).toBeGreaterThanOrEqual(0);
      else expect(prepared).toBeUndefined();
    }
    expect(sample(text, 'job_runs_total', { job: 'trash_retention', outcome: 'success' })).toBe(1);
    expect(sample(text, 'job_run_duration_seconds_count', { job: 'trash_retention' })).toBe(1);
    expect(sample(text, 'process_cpu_user_seconds_total')).toBeGreaterThan(0);
    expect(sample(text, 'process_resident_memory_bytes')).toBeGreaterThan(0);
    expect(sample(text, 'nodejs_eventloop_lag_seconds')).toBeGreaterThanOrEqual(0);
  });

  it('counts failed job runs as failures', async () => {
    const s = await new TestServer().start();
    try {
      await s.deps.db.knex.raw('alter table entries rename to entries_gone');
      await expect(s.runtime.trashRetention.runOnce()).rejects.toThrow();
      await s.runtime.jobs.enqueue(s.deps.db.knex, 'trash_retention', {}, { maxAttempts: 1 });
      await s.runtime.jobs.runDue();
      const text = await scrape(s);
      expect(sample(text, 'job_runs_total', { job: 'trash_retention', outcome: 'failure' })).toBe(1);
      expect(sample(text, 'jobs_dead_total', { job: 'trash_retention' })).toBe(1);
    } finally {
      await s.close();
    }
  });

  it('answers an unknown or repeated query parameter with a declared 400 envelope (found by npm run fuzz)', async () => {
    for (const query of ['?fuzz=1', '?a=1&a=2', '?name=%00']) {
      const res = await server.fetch(`/metrics${query}`);
      expect(res.status, query).toBe(400);
      expect(((await res.json()) as { code: string }).code).toBe('BAD_REQUEST');
    }
    // The afterEach hook fails the test if 400 were not a declared status of getMetrics.
  });

  it('requires METRICS_TOKEN as a bearer token when the server has one', async () => {
    const token = 'metrics-token-0123456789';
    const s = await new TestServer().start({ env: { METRICS_TOKEN: token } });
    try {
      for (const headers of [
        {},
        { Authorization: 'Bearer wrong-token-0123456789' },
        { Authorization: `Bearer ${s.adminToken}` },
      ] as Array<Record<string, string>>) {
        const res = await s.fetch('/metrics', { headers });
        expect(res.status).toBe(401);
        expect(await res.json()).toEqual({
          code: 'UNAUTHORIZED',
          message: 'Missing or invalid metrics token. Use Authorization: Bearer <METRICS_TOKEN>.',
        });
      }
      expect(await scrape(s, { Authorization: `Bearer ${token}` })).toContain('http_requests_total');
    } finally {
      await s.close();
    }
  });
});

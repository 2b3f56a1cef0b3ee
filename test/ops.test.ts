import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { bearer, useServer } from './helpers/server.ts';

const lines: string[] = [];
const server = useServer({ env: { LOG_LEVEL: 'info' }, logStream: { write: (line) => void lines.push(line) } });

describe('operational endpoints', () => {
  it('GET /healthz answers without authentication', async () => {
    const res = await server.fetch('/healthz');
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ status: 'ok' });
  });

  it('GET /readyz is ready when the database answers and migrations are applied, 503 otherwise', async () => {
    const ready = await server.fetch('/readyz');
    expect(ready.status).toBe(200);
    expect(await ready.json()).toEqual({
      status: 'ready',
      database: 'ok',
      migrations: 'ok',
      checks: { database: 'ok', migrations: 'ok', objectStorage: 'ok' },
    });

    const knex = server.deps.db.knex;
    const last = await knex('schema_migrations').orderBy('id', 'desc').first();
    await knex('schema_migrations').where({ id: last.id }).delete();
    try {
      const pending = await server.fetch('/readyz');
      expect(pending.status).toBe(503);
      expect(await pending.json()).toEqual({
        code: 'PRECONDITION_FAILED',
        message: 'Database migrations are pending',
        checks: { database: 'ok', migrations: 'pending', objectStorage: 'ok' },
      });
    } finally {
      await knex('schema_migrations').insert(last);
    }
    expect((await server.fetch('/readyz')).status).toBe(200);
  });

  it('GET /docs serves self-contained HTML (no external scripts or styles)', async () => {
    const res = await server.fetch('/docs');
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/html/);
    const html = await res.text();
    expect(html).toContain('Account Data REST API');
    expect(html).not.toMatch(/<script[^>]+src=["']https?:/i);
    expect(html).not.toMatch(/<link[^>]+href=["']https?:/i);
  });

  it('HEAD /docs answers like GET without a body', async () => {
    const res = await server.fetch('/docs', { method: 'HEAD' });
    expect(res.status).toBe(200);
    expect(await res.text()).toBe('');
  });

  it('GET /openapi.json serves the bundled contract', async () => {
    const res = await server.fetch('/openapi.json');
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual(JSON.parse(readFileSync('generated/openapi.json', 'utf8')));
  });
});

describe('request logs', () => {
  it('are JSON lines with the request id and never contain the API key', async () => {
    const { apiKey } = await server.user();
    lines.length = 0;
    const res = await server.fetch('/api/v1/appearance/custom-fonts?x=1', {
      headers: { ...bearer(apiKey), 'X-Request-Id': 'log-check-1' },
    });
    expect(res.status).toBe(400);
    await server.fetch('/api/v1/appearance/custom-fonts', { headers: bearer(apiKey) });
    const entries = lines.map((l) => JSON.parse(l));
    const entry = entries.find((e) => e.reqId === 'log-check-1');
    expect(entry).toMatchObject({
      req: { method: 'GET', path: '/api/v1/appearance/custom-fonts' },
      res: { statusCode: 400 },
      userId: expect.any(String),
      responseTime: expect.any(Number),
    });
    expect(lines.join('\n')).not.toContain(apiKey);
    expect(lines.join('\n')).not.toContain(apiKey.slice(4));
  });
});

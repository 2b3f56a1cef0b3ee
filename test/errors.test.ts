/**
 * One `{ code, message }` envelope for every failure (plus `details` on a 400 for invalid input), and
 * nothing internal ever reaches a client.
 */
import { gzipSync } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import { preparedPoolOf } from '../server/db/prepared.ts';
import { createMember } from './helpers/fixtures.ts';
import { PNG } from './helpers/images.ts';
import { TestServer, useServer, bearer, jsonHeaders } from './helpers/server.ts';

const server = useServer({ env: { BODY_LIMIT_BYTES: '2048' } });

type Problem = { in: string; pointer: string; rule: string; message: string };

async function envelope(res: Response): Promise<{ code: string; message: string; details?: Problem[] }> {
  expect(res.headers.get('content-type')).toMatch(/^application\/json/);
  const body = await res.json();
  const keys = Object.keys(body).sort();
  expect(keys).toEqual(keys.includes('details') ? ['code', 'details', 'message'] : ['code', 'message']);
  return body;
}

describe('error envelope', () => {
  it('unknown route → 404 NOT_FOUND', async () => {
    const res = await server.fetch('/api/v1/does-not-exist');
    expect(res.status).toBe(404);
    expect(await envelope(res)).toEqual({ code: 'NOT_FOUND', message: 'No route for GET /api/v1/does-not-exist' });
  });

  it('wrong method → 405 METHOD_NOT_ALLOWED with Allow', async () => {
    const res = await server.fetch('/api/v1/appearance', { method: 'DELETE' });
    expect(res.status).toBe(405);
    expect(res.headers.get('allow')).toBe('GET, PATCH');
    expect((await envelope(res)).code).toBe('METHOD_NOT_ALLOWED');
  });

  it('malformed JSON → 400 BAD_REQUEST', async () => {
    const { apiKey } = await server.user();
    const res = await server.fetch('/api/v1/appearance', {
      method: 'PATCH',
      headers: jsonHeaders(apiKey),
      body: '{"themeMode": "dark",',
    });
    expect(res.status).toBe(400);
    expect(await envelope(res)).toEqual({
      code: 'BAD_REQUEST',
      message: 'Request body is not valid JSON',
      details: [{ in: 'body', pointer: '', rule: 'json', message: 'Request body is not valid JSON' }],
    });
  });

  it('a JSON body that is not an object → 400', async () => {
    const { apiKey } = await server.user();
    const res = await server.fetch('/api/v1/appearance', {
      method: 'PATCH',
      headers: jsonHeaders(apiKey),
      body: '"dark"',
    });
    expect(res.status).toBe(400);
    // express.json() takes only an object or an array at the top.
    expect(await envelope(res)).toEqual({
      code: 'BAD_REQUEST',
      message: 'Request body is not valid JSON',
      details: [{ in: 'body', pointer: '', rule: 'json', message: 'Request body is not valid JSON' }],
    });
  });

  it('missing body where one is required → 400', async () => {
    const { apiKey } = await server.user();
    const res = await server.fetch('/api/v1/appearance', { method: 'PATCH', headers: bearer(apiKey) });
    expect(res.status).toBe(400);
    expect(await envelope(res)).toEqual({
      code: 'BAD_REQUEST',
      message: 'Request body is required (application/json)',
      details: [{ in: 'body', pointer: '', rule: 'required', message: 'Request body is required (application/json)' }],
    });
  });

  it('wrong content type → 415 UNSUPPORTED_MEDIA_TYPE', async () => {
    const { apiKey } = await server.user();
    const res = await server.fetch('/api/v1/appearance', {
      method: 'PATCH',
      headers: { ...bearer(apiKey), 'Content-Type': 'text/plain' },
      body: 'themeMode=dark',
    });
    expect(res.status).toBe(415);
    expect(await envelope(res)).toEqual({
      code: 'UNSUPPORTED_MEDIA_TYPE',
      message: 'Content-Type must be application/json',
    });
  });

  it('a body that does not decode under its Content-Encoding → 400, not 500 (found by npm run fuzz)', async () => {
    const { apiKey } = await server.user();
    const plain = await server.fetch('/api/v1/members', {
      method: 'POST',
      headers: { ...jsonHeaders(apiKey), 'Content-Encoding': 'gzip' },
      body: JSON.stringify({ name: 'Robin' }),
    });
    expect(plain.status).toBe(400);
    expect(await envelope(plain)).toEqual({
      code: 'BAD_REQUEST',
      message: 'Request body does not match its Content-Encoding (gzip)',
    });
    const brotli = await server.fetch('/api/v1/members', {
      method: 'POST',
      headers: { ...jsonHeaders(apiKey), 'Content-Encoding': 'br' },
      body: JSON.stringify({ name: 'Robin' }),
    });
    expect(brotli.status).toBe(400);
    expect(await envelope(brotli)).toEqual({
      code: 'BAD_REQUEST',
      message: 'Request body does not match its Content-Encoding (br)',
    });
    const member = await createMember(server.client(apiKey), 'Robin');
    const image = await server.fetch(`/api/v1/members/${member}/media?kind=avatar`, {
      method: 'PUT',
      headers: { ...bearer(apiKey), 'Content-Type': 'image/png', 'Content-Encoding': 'deflate' },
      body: new Uint8Array(PNG),
    });
    expect(image.status).toBe(400);
    expect(await envelope(image)).toEqual({
      code: 'BAD_REQUEST',
      message: 'Request body does not match its Content-Encoding (deflate)',
    });
    // A body that is what its Content-Encoding says is read as before.
    const gzipped = await server.fetch('/api/v1/members', {
      method: 'POST',
      headers: { ...jsonHeaders(apiKey), 'Content-Encoding': 'gzip' },
      body: new Uint8Array(gzipSync(JSON.stringify({ name: 'Sky' }))),
    });
    expect(gzipped.status).toBe(201);
  });

  it('body over the size limit → 413 PAYLOAD_TOO_LARGE', async () => {
    const { apiKey } = await server.user();
    const res = await server.fetch('/api/v1/appearance/custom-color-schemes', {
      method: 'POST',
      headers: jsonHeaders(apiKey),
      body: JSON.stringify({ name: 'x'.repeat(5000), colors: { a: '#000000' } }),
    });
    expect(res.status).toBe(413);
    expect(await envelope(res)).toEqual({ code: 'PAYLOAD_TOO_LARGE', message: 'Request body exceeds 2048 bytes' });
  });

  it('validator errors name the field and the rule', async () => {
    const { apiKey } = await server.user();
    const cases: Array<[string, RequestInit, string, Omit<Problem, 'message'>]> = [
      [
        '/api/v1/appearance/custom-fonts/not-a-uuid',
        { method: 'DELETE', headers: bearer(apiKey) },
        'fontId must be a valid UUID',
        { in: 'path', pointer: 'fontId', rule: 'pattern' },
      ],
      [
        '/api/v1/appearance?verbose=1',
        { headers: bearer(apiKey) },
        "Unknown query parameter 'verbose'",
        { in: 'query', pointer: 'verbose', rule: 'additionalProperties' },
      ],
      [
        '/api/v1/appearance',
        { method: 'PATCH', headers: jsonHeaders(apiKey), body: '{"fontSize":"huge"}' },
        'fontSize must be one of: small, medium, large',
        { in: 'body', pointer: '/fontSize', rule: 'enum' },
      ],
      [
        '/api/v1/appearance',
        { method: 'PATCH', headers: jsonHeaders(apiKey), body: '{"fontScale":9}' },
        'fontScale must be <= 2',
        { in: 'body', pointer: '/fontScale', rule: 'maximum' },
      ],
      [
        '/api/v1/appearance',
        { method: 'PATCH', headers: jsonHeaders(apiKey), body: '{"reduceMotion":"yes"}' },
        'reduceMotion must be boolean',
        { in: 'body', pointer: '/reduceMotion', rule: 'type' },
      ],
      [
        '/api/v1/appearance/custom-color-schemes',
        { method: 'POST', headers: jsonHeaders(apiKey), body: '{"colors":{"a":"#000000"}}' },
        'name is required',
        { in: 'body', pointer: '/name', rule: 'required' },
      ],
    ];
    for (const [path, init, message, problem] of cases) {
      const res = await server.fetch(path, init);
      expect(res.status, path).toBe(400);
      expect(await envelope(res)).toEqual({ code: 'BAD_REQUEST', message, details: [{ ...problem, message }] });
    }
  });

  it('unexpected failures → 500 INTERNAL with a generic message; no SQL, stack or path leaks', async () => {
    const { apiKey } = await server.user();
    // A statement the database refuses (here: a column that is gone) is a bug, not an outage.
    await server.deps.db.knex.raw('alter table custom_fonts rename column created_at to created_at_gone');
    try {
      const res = await server.fetch('/api/v1/appearance/custom-fonts', { headers: bearer(apiKey) });
      expect(res.status).toBe(500);
      const text = await res.text();
      expect(JSON.parse(text)).toEqual({ code: 'INTERNAL', message: 'Internal server error' });
      expect(text).not.toMatch(/select|custom_fonts|created_at|\.ts|at |column/i);
    } finally {
      await server.deps.db.knex.raw('alter table custom_fonts rename column created_at_gone to created_at');
    }
  });

  it('storage whose schema is missing → 503 PRECONDITION_FAILED, nothing internal leaked', async () => {
    const { apiKey } = await server.user();
    await server.deps.db.knex.raw('alter table terminology_settings rename to terminology_settings_gone');
    try {
      const res = await server.fetch('/api/v1/terminology', { headers: bearer(apiKey) });
      expect(res.status).toBe(503);
      const text = await res.text();
      expect(JSON.parse(text)).toEqual({ code: 'PRECONDITION_FAILED', message: 'Database is not reachable' });
      expect(text).not.toMatch(/terminology_settings|relation|select/i);
    } finally {
      await server.deps.db.knex.raw('alter table terminology_settings_gone rename to terminology_settings');
    }
    const after = await server.fetch('/api/v1/terminology', { headers: bearer(apiKey) });
    expect(after.status).toBe(200);
  });

  it('echoes a sane X-Request-Id and generates one otherwise, on success and error alike', async () => {
    const echoed = await server.fetch('/healthz', { headers: { 'X-Request-Id': 'trace-123' } });
    expect(echoed.headers.get('x-request-id')).toBe('trace-123');
    const generated = await server.fetch('/api/v1/nope', { headers: { 'X-Request-Id': 'bad id with spaces' } });
    expect(generated.headers.get('x-request-id')).toMatch(/^[0-9a-f-]{36}$/);
  });
});

describe('authentication header handling', () => {
  it.each([
    ['no header', {}],
    ['wrong scheme', { Authorization: 'Basic dXNlcjpwYXNz' }],
    ['garbage token', { Authorization: 'Bearer nope' }],
    ['well-formed unknown key', { Authorization: `Bearer adk_${'A'.repeat(43)}` }],
    ['empty bearer', { Authorization: 'Bearer ' }],
  ])('%s → 401 with the exact message', async (_name, headers) => {
    const res = await server.fetch('/api/v1/appearance', { headers });
    expect(res.status).toBe(401);
    expect(await envelope(res)).toEqual({
      code: 'UNAUTHORIZED',
      message: 'Missing or invalid API key. Use Authorization: Bearer <token>.',
    });
  });

  it('accepts the scheme name in any case', async () => {
    const { apiKey } = await server.user();
    const res = await server.fetch('/api/v1/appearance/custom-fonts', {
      headers: { Authorization: `bearer ${apiKey}` },
    });
    expect(res.status).toBe(200);
  });

  it('read_write implies read', async () => {
    const { api } = await server.user({ scopes: { appearance: 'read_write' } });
    expect((await api.GET('/api/v1/appearance/custom-fonts')).response.status).toBe(200);
  });

  it('a read key can read but not write its scope, and other scopes stay closed', async () => {
    const { api } = await server.user({ scopes: { appearance: 'read' } });
    expect((await api.GET('/api/v1/appearance/custom-fonts')).response.status).toBe(200);
    const write = await api.POST('/api/v1/appearance/reset');
    expect(write.response.status).toBe(403);
    expect(write.error).toEqual({
      code: 'FORBIDDEN',
      message: 'Missing API key scope: appearance requires read_write',
    });
  });
});

describe('database outage', () => {
  it('a database that cannot be reached → 503 PRECONDITION_FAILED on API and admin routes, and /readyz says so', async () => {
    const lost = await new TestServer().start();
    try {
      const { apiKey } = await lost.user();
      // The key is in the process cache now; the handler's own queries hit closed pools: the main
      // one and, on PostgreSQL, the named statements' (server/db/prepared.ts), as in a real outage.
      const prepared = preparedPoolOf(lost.deps.db.knex);
      await lost.deps.db.knex.destroy();
      await prepared?.destroy();
      for (const res of [
        await lost.fetch('/api/v1/members/page?limit=5', { headers: bearer(apiKey) }),
        await lost.fetch('/api/v1/entries', {
          method: 'POST',
          headers: jsonHeaders(apiKey),
          body: JSON.stringify({ content: 'hello' }),
        }),
        await lost.fetch('/admin/v1/accounts', {
          method: 'POST',
          headers: jsonHeaders(lost.adminToken),
          body: JSON.stringify({ username: 'nobody_here' }),
        }),
      ]) {
        expect(res.status).toBe(503);
        expect(await envelope(res)).toEqual({ code: 'PRECONDITION_FAILED', message: 'Database is not reachable' });
      }
      // /readyz answers the same envelope plus the result of each check.
      const ready = await lost.fetch('/readyz');
      expect(ready.status).toBe(503);
      expect(await ready.json()).toEqual({
        code: 'PRECONDITION_FAILED',
        message: 'Database is not reachable',
        checks: { database: 'down', migrations: 'unknown', objectStorage: 'ok' },
      });
      expect(lost.violations).toEqual([]);
    } finally {
      await lost.close();
    }
  });
});

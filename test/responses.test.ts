/**
 * JSON bodies are written by the dispatcher itself when responses are not validated (production);
 * with validation on (tests, development) they go through res.json, which the validator checks. Both
 * apps here run over the same runtime and database, so every answer must match byte for byte.
 */
import type { AddressInfo } from 'node:net';
import type { Server } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApp } from '../server/app.ts';
import { createMember } from './helpers/fixtures.ts';
import { bearer, useServer } from './helpers/server.ts';

const server = useServer();
let unvalidated: Server;
let unvalidatedUrl: string;

beforeAll(async () => {
  const app = createApp({ ...server.deps, config: { ...server.deps.config, validateResponses: false } });
  unvalidated = await new Promise<Server>((resolve) => {
    const s = app.listen(0, '127.0.0.1', () => resolve(s));
  });
  unvalidatedUrl = `http://127.0.0.1:${(unvalidated.address() as AddressInfo).port}`;
});
afterAll(() => new Promise<void>((resolve) => unvalidated.close(() => resolve())));

/** Status, the headers a client reads, and the raw bytes of the body. */
async function answer(
  base: string,
  method: string,
  path: string,
  key: string,
): Promise<{ status: number; headers: Record<string, string | null>; body: string }> {
  const res = await fetch(base + path, { method, headers: bearer(key) });
  const body = await res.text();
  const headers = Object.fromEntries(
    ['content-type', 'content-length', 'x-ratelimit-limit', 'etag', 'cache-control'].map((h) => [
      h,
      res.headers.get(h),
    ]),
  );
  return { status: res.status, headers, body };
}

describe('JSON responses without response validation', () => {
  it('are the bytes and headers res.json sends, HEAD included', async () => {
    const { api, apiKey } = await server.user();
    const member = await createMember(api, 'Zoë 🌙', { displayName: '“Quotes” & <tags>', pronouns: 'they/them' });
    await api.POST('/api/v1/front/members', { body: { memberId: member } });
    await api.POST('/api/v1/entries', {
      body: { content: 'Line\nbreak \u2028 and \\ backslash', memberIds: [member] },
    });
    // (Not /me: it shows the rate limit remaining, which each request changes.)
    const paths = [
      '/api/v1/front',
      '/api/v1/entries?limit=5',
      '/api/v1/members/page?limit=2',
      '/api/v1/front/history',
      '/api/v1/trash/settings',
      `/api/v1/members/${member}`,
    ];
    for (const path of paths) {
      for (const method of ['GET', 'HEAD']) {
        const validated = await answer(server.baseUrl, method, path, apiKey);
        const direct = await answer(unvalidatedUrl, method, path, apiKey);
        expect(direct, `${method} ${path}`).toEqual(validated);
        expect(direct.status).toBe(200);
        expect(direct.headers['content-type']).toBe('application/json; charset=utf-8');
        if (method === 'GET') expect(Number(direct.headers['content-length'])).toBe(Buffer.byteLength(direct.body));
        else expect(direct.body).toBe('');
      }
    }
    // Errors are written by the error handler either way; a query string is validated even where
    // the operation takes no parameters (the validator is skipped only when there is nothing to check).
    for (const path of [
      '/api/v1/members/00000000-0000-4000-8000-000000000000',
      '/api/v1/front?unknown=1',
      '/api/v1/members/not-a-uuid',
      '/api/v1/entries?limit=0',
    ]) {
      const direct = await answer(unvalidatedUrl, 'GET', path, apiKey);
      expect(direct, path).toEqual(await answer(server.baseUrl, 'GET', path, apiKey));
      expect(direct.status, path).toBeGreaterThanOrEqual(400);
    }
  });
});

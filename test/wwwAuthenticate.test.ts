/**
 * Every 401 carries `WWW-Authenticate` (RFC 9110 §11.6.1): `Bearer realm="<api|admin|metrics>"`, the
 * realm of the credential the operation takes, plus `error="invalid_token"` (RFC 6750 §3.1) when the
 * request presented a bearer token that was refused.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { bearer, useServer } from './helpers/server.ts';

const METRICS_TOKEN = 'metrics-token-0123456789abcdef';
const server = useServer({ env: { METRICS_TOKEN } });

const WRONG_KEY = `adk_${'x'.repeat(43)}`;

async function expectChallenge(
  path: string,
  headers: Record<string, string>,
  challenge: string,
  message: string,
): Promise<void> {
  const res = await server.fetch(path, { headers });
  expect(res.status, path).toBe(401);
  expect(res.headers.get('www-authenticate'), path).toBe(challenge);
  expect(await res.json()).toEqual({ code: 'UNAUTHORIZED', message });
}

describe('WWW-Authenticate on 401', () => {
  it('an API-key route: Bearer realm="api" without a key; error="invalid_token" with a wrong or revoked one', async () => {
    const message = 'Missing or invalid API key. Use Authorization: Bearer <token>.';
    await expectChallenge('/api/v1/members', {}, 'Bearer realm="api"', message);
    // Credentials of another scheme are no bearer token at all.
    await expectChallenge(
      '/api/v1/members',
      { Authorization: 'Basic cm9iaW46cGFzcw==' },
      'Bearer realm="api"',
      message,
    );
    await expectChallenge('/api/v1/members', bearer(WRONG_KEY), 'Bearer realm="api", error="invalid_token"', message);
    const user = await server.user();
    const ok = await server.fetch('/api/v1/members', { headers: bearer(user.apiKey) });
    expect(ok.status).toBe(200);
    expect(ok.headers.get('www-authenticate')).toBeNull();
    const revoked = await server.admin.DELETE('/admin/v1/api-keys/{keyId}', {
      params: { path: { keyId: user.keyId } },
    });
    expect(revoked.response.status).toBe(204);
    await expectChallenge('/api/v1/me', bearer(user.apiKey), 'Bearer realm="api", error="invalid_token"', message);
  });

  it('an admin route: Bearer realm="admin", with error="invalid_token" for a wrong token', async () => {
    const message = 'Missing or invalid admin token. Use Authorization: Bearer <ADMIN_TOKEN>.';
    await expectChallenge('/admin/v1/accounts', {}, 'Bearer realm="admin"', message);
    await expectChallenge(
      '/admin/v1/accounts',
      bearer('not-the-admin-token'),
      'Bearer realm="admin", error="invalid_token"',
      message,
    );
  });

  it('/metrics with METRICS_TOKEN set: Bearer realm="metrics", with error="invalid_token" for a wrong token', async () => {
    const message = 'Missing or invalid metrics token. Use Authorization: Bearer <METRICS_TOKEN>.';
    await expectChallenge('/metrics', {}, 'Bearer realm="metrics"', message);
    await expectChallenge(
      '/metrics',
      bearer('not-the-metrics-token'),
      'Bearer realm="metrics", error="invalid_token"',
      message,
    );
    const ok = await server.fetch('/metrics', { headers: bearer(METRICS_TOKEN) });
    expect(ok.status).toBe(200);
    expect(ok.headers.get('www-authenticate')).toBeNull();
    await ok.text();
  });

  it('the contract declares WWW-Authenticate on the 401 of every operation', () => {
    const spec = JSON.parse(readFileSync(new URL('../generated/openapi.json', import.meta.url), 'utf8')) as {
      paths: Record<string, Record<string, { operationId?: string; responses?: Record<string, { $ref?: string }> }>>;
      components: { responses: Record<string, { headers?: Record<string, { $ref?: string }> }> };
    };
    let checked = 0;
    for (const item of Object.values(spec.paths)) {
      for (const op of Object.values(item)) {
        const ref = op?.responses?.['401']?.$ref;
        if (!op?.responses?.['401']) continue;
        checked++;
        expect(ref, op.operationId).toMatch(/^#\/components\/responses\//);
        const response = spec.components.responses[ref!.split('/').pop()!]!;
        expect(response.headers?.['WWW-Authenticate']?.$ref, op.operationId).toMatch(
          /^#\/components\/headers\/WWWAuthenticate(ApiKey|Admin|Metrics)$/,
        );
      }
    }
    expect(checked).toBeGreaterThan(200);
  });
});

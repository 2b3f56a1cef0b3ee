/**
 * Revoking a key on one instance reaches the others' key caches through PostgreSQL LISTEN/NOTIFY,
 * well before API_KEY_CACHE_TTL_MS. Several instances only exist on PostgreSQL (the embedded
 * database belongs to one process, where revocation evicts the key directly: admin.test.ts), so
 * this file runs in the PostgreSQL pass of the suite.
 */
import { describe, expect, it } from 'vitest';
import { bearer, TestServer } from './helpers/server.ts';

async function until(check: () => Promise<boolean>, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await check()) return true;
    await new Promise((r) => setTimeout(r, 20));
  }
  return check();
}

describe.runIf(Boolean(process.env.DATABASE_URL))('key revocation across instances (PostgreSQL)', () => {
  it('a key revoked through instance A is refused by instance B long before B’s cache would expire', async () => {
    const a = await new TestServer().start();
    // B caches keys for 5 minutes: only the notification can make it refuse the key in time.
    const b = await new TestServer().start({ databaseUrl: a.databaseUrl, env: { API_KEY_CACHE_TTL_MS: '300000' } });
    try {
      expect(b.runtime.revocations?.listening).toBe(true);
      const user = await a.user();
      const other = await a.createKey(user.userId);
      expect((await b.fetch('/api/v1/appearance/custom-fonts', { headers: bearer(user.apiKey) })).status).toBe(200);
      expect((await b.fetch('/api/v1/appearance/custom-fonts', { headers: bearer(other.apiKey) })).status).toBe(200);

      const { response } = await a.admin.DELETE('/admin/v1/api-keys/{keyId}', {
        params: { path: { keyId: user.keyId } },
      });
      expect(response.status).toBe(204);
      const refused = await until(
        async () => (await b.fetch('/api/v1/appearance/custom-fonts', { headers: bearer(user.apiKey) })).status === 401,
        2000,
      );
      expect(refused).toBe(true);
      // Only the revoked key is affected.
      expect((await b.fetch('/api/v1/appearance/custom-fonts', { headers: bearer(other.apiKey) })).status).toBe(200);
    } finally {
      await b.close();
      await a.close();
    }
  });

  it('after its listening connection is cut, an instance reconnects and forgets its cached keys', async () => {
    const a = await new TestServer().start();
    const b = await new TestServer().start({ databaseUrl: a.databaseUrl, env: { API_KEY_CACHE_TTL_MS: '300000' } });
    try {
      const user = await a.user();
      expect((await b.fetch('/api/v1/appearance/custom-fonts', { headers: bearer(user.apiKey) })).status).toBe(200);
      // Cut B's listener, then revoke while nobody listens: the notification is lost.
      await a.deps.db.knex.raw(
        "select pg_terminate_backend(pid) from pg_stat_activity where application_name = 'api-key-revocations' and datname = current_database()",
      );
      expect(await until(async () => b.runtime.revocations?.listening === false, 2000)).toBe(true);
      await a.deps.db.knex('api_keys').where({ id: user.keyId }).update({ revoked_at: Date.now() });
      // Reconnected, B drops its cache and reads the key afresh.
      expect(await until(async () => b.runtime.revocations?.listening === true, 5000)).toBe(true);
      expect((await b.fetch('/api/v1/appearance/custom-fonts', { headers: bearer(user.apiKey) })).status).toBe(401);
    } finally {
      await b.close();
      await a.close();
    }
  });
});

/** 1,000 requests per minute per API key; 429 RATE_LIMITED with Retry-After and RateLimit-* headers. */
import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { accountsRepo } from '../server/features/accounts/repo.ts';
import { PostgresRateLimitStore, RedisRateLimitStore } from '../server/http/rateLimit.ts';
import { bearer, TestServer, useServer } from './helpers/server.ts';
import { untilWaitingForLock } from './helpers/db.ts';

// Redis tests run when REDIS_URL is set (CI sets it) and are reported as skipped otherwise.
const REDIS_URL = process.env.REDIS_URL ?? '';

describe('default limit (1,000 per minute per key)', () => {
  const server = useServer();

  it('refuses the 1,001st request in a window and leaves a second key alone', async () => {
    const user = await server.user();
    const second = await server.createKey(user.userId);
    const path = '/api/v1/appearance/custom-fonts';
    for (let i = 1; i <= 1000; i++) {
      const res = await server.fetch(path, { headers: bearer(user.apiKey) });
      if (res.status !== 200) throw new Error(`request ${i} answered ${res.status}`);
      if (i === 1 || i === 1000) {
        expect(res.headers.get('ratelimit-limit')).toBe('1000');
        expect(res.headers.get('ratelimit-remaining')).toBe(String(1000 - i));
        expect(Number(res.headers.get('ratelimit-reset'))).toBeGreaterThan(0);
      }
      await res.arrayBuffer();
    }
    const refused = await server.fetch(path, { headers: bearer(user.apiKey) });
    expect(refused.status).toBe(429);
    expect(await refused.json()).toEqual({
      code: 'RATE_LIMITED',
      message: expect.stringMatching(/^Rate limit of 1000 requests per minute exceeded/),
    });
    const retryAfter = Number(refused.headers.get('retry-after'));
    expect(retryAfter).toBeGreaterThanOrEqual(1);
    expect(retryAfter).toBeLessThanOrEqual(60);
    expect(refused.headers.get('ratelimit-remaining')).toBe('0');
    expect(refused.headers.get('ratelimit-limit')).toBe('1000');

    const other = await server.fetch(path, { headers: bearer(second.apiKey) });
    expect(other.status).toBe(200);
    expect(other.headers.get('ratelimit-remaining')).toBe('999');
  });
});

describe('window', () => {
  let now = 1_800_000_000_000;
  const server = useServer({ env: { RATE_LIMIT_PER_MINUTE: '3' }, clock: () => now });

  it('opens a fresh window 60 s after the first request', async () => {
    const user = await server.user();
    const get = () => server.fetch('/api/v1/appearance/custom-fonts', { headers: bearer(user.apiKey) });
    for (let i = 0; i < 3; i++) expect((await get()).status).toBe(200);
    now += 30_000;
    const limited = await get();
    expect(limited.status).toBe(429);
    expect(limited.headers.get('retry-after')).toBe('30');
    now += 30_000;
    const fresh = await get();
    expect(fresh.status).toBe(200);
    expect(fresh.headers.get('ratelimit-remaining')).toBe('2');
  });

  it('does not apply to operational routes', async () => {
    for (let i = 0; i < 5; i++) expect((await server.fetch('/healthz')).status).toBe(200);
  });
});

describe('shared stores', () => {
  it('PostgreSQL store: state lives in the database, shared by every store instance on it', async () => {
    const server = await new TestServer().start({ env: { RATE_LIMIT_PER_MINUTE: '5' }, rateLimitStore: 'postgres' });
    try {
      expect(server.deps.rateLimiter.store.kind).toBe('postgres');
      const user = await server.user();
      const statuses: number[] = [];
      for (let i = 0; i < 6; i++)
        statuses.push((await server.fetch('/api/v1/appearance/custom-fonts', { headers: bearer(user.apiKey) })).status);
      expect(statuses).toEqual([200, 200, 200, 200, 200, 429]);
      // A second instance's store (same database) continues the same window once this one has synced.
      const store = server.deps.rateLimiter.store as PostgresRateLimitStore;
      await store.flush();
      const row = await server.deps.db.knex('rate_limit_windows').where({ key_id: user.keyId }).first();
      expect(row.count).toBe(6);
      const otherInstance = new PostgresRateLimitStore(server.deps.db.knex);
      try {
        expect((await otherInstance.hit(user.keyId, Date.now())).count).toBe(7);
        // This instance counts locally (it has not seen the other's request yet) ...
        expect((await store.hit(user.keyId, Date.now())).count).toBe(7);
        // ... and learns the shared total at its next sync.
        await store.flush();
        expect((await server.deps.db.knex('rate_limit_windows').where({ key_id: user.keyId }).first()).count).toBe(8);
        expect((await store.hit(user.keyId, Date.now())).count).toBe(9);
      } finally {
        await otherInstance.close();
      }
    } finally {
      await server.close();
    }
  });

  it('PostgreSQL store: instances that sync as often as production do never overshoot the shared budget', async () => {
    const server = await new TestServer().start();
    const limit = 200; // margin max(50, 20) = 50: the last 50 requests are counted in the database first
    // Timers off (syncMs an hour); each loop below is one 100 ms sync interval, 40 requests in it (< margin).
    const a = new PostgresRateLimitStore(server.deps.db.knex, { limit, syncMs: 3_600_000 });
    const b = new PostgresRateLimitStore(server.deps.db.knex, { limit, syncMs: 3_600_000 });
    try {
      const keyId = (await server.user()).keyId;
      let allowed = 0;
      let refused = 0;
      for (let tick = 0; tick < 8; tick++) {
        for (let i = 0; i < 20; i++) {
          for (const store of [a, b]) {
            if ((await store.hit(keyId, Date.now())).count <= limit) allowed++;
            else refused++;
          }
        }
        await Promise.all([a.flush(), b.flush()]);
      }
      expect(allowed).toBe(limit);
      expect(refused).toBe(8 * 40 - limit);
      expect((await server.deps.db.knex('rate_limit_windows').where({ key_id: keyId }).first()).count).toBe(8 * 40);
    } finally {
      await Promise.all([a.close(), b.close()]);
      await server.close();
    }
  });

  it('a request the process decides costs no promise: a cached key, and a count far from the limit or past it', async () => {
    const server = await new TestServer().start();
    const store = new PostgresRateLimitStore(server.deps.db.knex, { limit: 100, syncMs: 3_600_000 });
    try {
      const { apiKey, keyId } = await server.user();
      // The first use of a key is looked up, then answered from the cache (server/http/pipeline.ts's
      // authenticate step then runs without a promise).
      const looked = server.deps.apiKeys.authenticate(apiKey);
      expect(looked).toBeInstanceOf(Promise);
      expect(await looked).toMatchObject({ keyId });
      expect(server.deps.apiKeys.authenticate(apiKey)).toMatchObject({ keyId });
      expect(server.deps.apiKeys.authenticate('not a key')).toBeNull();
      const now = Date.now();
      const first = store.hit(keyId, now); // a new window: counted in the database
      expect(first).toBeInstanceOf(Promise);
      expect((await first).count).toBe(1);
      expect(store.hit(keyId, now)).toEqual({ count: 2, resetAt: expect.any(Number) });
      // Near the limit (within max(50, a tenth) of it: the 51st of 100) the database is asked again.
      for (let i = 3; i <= 50; i++) expect(store.hit(keyId, now)).toEqual({ count: i, resetAt: expect.any(Number) });
      for (let i = 51; i <= 100; i++) {
        const near = store.hit(keyId, now);
        expect(near).toBeInstanceOf(Promise);
        expect((await near).count).toBe(i);
      }
      // Past the limit counts only grow within the window: refused in the process again.
      expect(store.hit(keyId, now)).toEqual({ count: 101, resetAt: expect.any(Number) });
    } finally {
      await store.close();
      await server.close();
    }
  });

  it("PostgreSQL store: counts still pending when the key's account is deleted leave no row behind", async () => {
    const server = await new TestServer().start();
    const store = new PostgresRateLimitStore(server.deps.db.knex, { limit: 1000, syncMs: 3_600_000 });
    try {
      const { userId, keyId } = await server.user();
      const now = Date.now();
      expect((await store.hit(keyId, now)).count).toBe(1); // a new window: written at once
      for (let i = 0; i < 5; i++) await store.hit(keyId, now); // pending, synced later
      expect(
        (await server.admin.DELETE('/admin/v1/accounts/{userId}', { params: { path: { userId } } })).response.status,
      ).toBe(204);
      await store.flush();
      expect(await server.deps.db.knex('rate_limit_windows').where({ key_id: keyId }).first()).toBeUndefined();
      // A request of the deleted key that was already past authentication is counted locally only.
      expect((await store.hit(keyId, now)).count).toBe(1);
      expect(await server.deps.db.knex('rate_limit_windows').where({ key_id: keyId }).first()).toBeUndefined();
    } finally {
      await store.close();
      await server.close();
    }
  });

  it.runIf(Boolean(process.env.DATABASE_URL))(
    "PostgreSQL store: a sync racing the deletion of the key's account waits for it and leaves no row behind",
    async () => {
      const server = await new TestServer().start();
      const store = new PostgresRateLimitStore(server.deps.db.knex, { limit: 1000, syncMs: 3_600_000 });
      const knex = server.deps.db.knex;
      const trx = await knex.transaction();
      try {
        const { userId, keyId } = await server.user();
        const now = Date.now();
        await store.hit(keyId, now); // a new window: written at once
        await store.hit(keyId, now); // pending, synced later
        // The deletion has removed the key and its window but not committed when the sync runs.
        await accountsRepo.deleteAccount(trx, userId);
        const synced = store.flush();
        await untilWaitingForLock(knex, 'the sync');
        await trx.commit();
        await synced;
        expect(await knex('rate_limit_windows').where({ key_id: keyId }).first()).toBeUndefined();
        // The store forgot the key: a late request of it is counted locally and writes nothing.
        expect((await store.hit(keyId, now)).count).toBe(1);
        expect(await knex('rate_limit_windows').where({ key_id: keyId }).first()).toBeUndefined();
      } finally {
        if (!trx.isCompleted()) await trx.rollback();
        await store.close();
        await server.close();
      }
    },
  );

  it.skipIf(!REDIS_URL)('Redis store (REDIS_URL): two servers share one budget per key', async () => {
    const a = await new TestServer().start({ env: { RATE_LIMIT_PER_MINUTE: '4', REDIS_URL }, rateLimitStore: 'redis' });
    try {
      expect(a.deps.rateLimiter.store.kind).toBe('redis');
      const user = await a.user();
      for (let i = 0; i < 2; i++)
        expect((await a.fetch('/api/v1/appearance/custom-fonts', { headers: bearer(user.apiKey) })).status).toBe(200);
      // Another instance on the same Redis sees the same window for this key.
      const redis = new Redis(REDIS_URL);
      const peer = new RedisRateLimitStore(redis);
      try {
        expect((await peer.hit(user.keyId, Date.now())).count).toBe(3);
      } finally {
        await peer.close();
      }
      expect((await a.fetch('/api/v1/appearance/custom-fonts', { headers: bearer(user.apiKey) })).status).toBe(200);
      const refused = await a.fetch('/api/v1/appearance/custom-fonts', { headers: bearer(user.apiKey) });
      expect(refused.status).toBe(429);
      expect(Number(refused.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
      // Unrelated key ids start their own windows.
      const fresh = new RedisRateLimitStore(new Redis(REDIS_URL));
      try {
        expect((await fresh.hit(randomUUID(), Date.now())).count).toBe(1);
      } finally {
        await fresh.close();
      }
    } finally {
      await a.close();
    }
  });
});

/**
 * Turns a Bearer secret into the key's account and scopes.
 *
 * Hot path: a short-lived in-process cache (API_KEY_CACHE_TTL_MS, default 5 s) answers repeat
 * requests without a database round trip (never past the key's own expiry). Revocation through this process evicts the key at
 * once; on PostgreSQL other instances hear of it through LISTEN/NOTIFY (revocations.ts) and, should
 * that connection be down, refuse the key after at most the TTL. lastUsedAt is written in batches
 * (one UPDATE per flush interval for all keys used), not once per request.
 */
import type { Knex } from 'knex';
import type { Logger } from 'pino';
import type { KeyActor } from '../../core/context.ts';
import { hashApiKey, looksLikeApiKey } from './keys.ts';
import { accountsRepo } from './repo.ts';

interface CacheEntry {
  auth: KeyActor | null;
  expiresAt: number;
}

const MAX_CACHE_ENTRIES = 10_000;

export class ApiKeyAuthenticator {
  private readonly cache = new Map<string, CacheEntry>();
  private readonly used = new Set<string>();
  private flushTimer: NodeJS.Timeout | undefined;

  constructor(
    private readonly db: Knex,
    private readonly options: { ttlMs: number; clock: () => number; logger: Logger; flushIntervalMs?: number },
  ) {
    const interval = options.flushIntervalMs ?? 15_000;
    this.flushTimer = setInterval(() => void this.flushUsage(), interval);
    this.flushTimer.unref();
  }

  /** The key's actor, or null for no usable key: at once from the cache, otherwise a promise of the lookup. */
  authenticate(secret: string): KeyActor | null | Promise<KeyActor | null> {
    if (!looksLikeApiKey(secret)) return null;
    const hash = hashApiKey(secret);
    const now = this.options.clock();
    const cached = this.cache.get(hash);
    if (cached && cached.expiresAt > now) return this.using(cached.auth);
    return this.lookUp(hash, now);
  }

  private async lookUp(hash: string, now: number): Promise<KeyActor | null> {
    const row = await accountsRepo.findKeyByHash(this.db, hash);
    const usable = row !== undefined && row.revoked_at === null && (row.expires_at === null || row.expires_at > now);
    const auth: KeyActor | null = usable
      ? { kind: 'key', accountId: row.user_id, keyId: row.id, scopes: row.scopes }
      : null;
    if (this.options.ttlMs > 0) {
      if (this.cache.size >= MAX_CACHE_ENTRIES) this.cache.clear();
      // A key that expires sooner than the cache entry would is cached only until it expires.
      const until =
        usable && row.expires_at !== null
          ? Math.min(now + this.options.ttlMs, row.expires_at)
          : now + this.options.ttlMs;
      this.cache.set(hash, { auth, expiresAt: until });
    }
    return this.using(auth);
  }

  /** Records the key's use (flushed in batches) and answers its actor. */
  private using(auth: KeyActor | null): KeyActor | null {
    if (auth) this.used.add(auth.keyId);
    return auth;
  }

  /** Called after a revocation so this process refuses the key from the next request on. */
  evictKey(keyId: string): void {
    for (const [hash, entry] of this.cache) {
      if (entry.auth?.keyId === keyId) this.cache.delete(hash);
    }
  }

  /** Forgets every cached key, so the next request of each is checked against the database. */
  clearCache(): void {
    this.cache.clear();
  }

  async flushUsage(): Promise<void> {
    if (this.used.size === 0) return;
    const ids = [...this.used];
    this.used.clear();
    try {
      await accountsRepo.touchKeys(this.db, ids, this.options.clock());
    } catch (err) {
      this.options.logger.warn({ err }, 'could not record API key usage');
    }
  }

  async close(): Promise<void> {
    if (this.flushTimer) clearInterval(this.flushTimer);
    this.flushTimer = undefined;
    await this.flushUsage();
  }
}

/**
 * Per-API-key request budget: a fixed window that opens at the key's first request and lasts
 * 60 s. Stores: memory (embedded default, one process), PostgreSQL (shared by every instance on the
 * database; counts are synced in batches, see below) and Redis (REDIS_URL; one MULTI per request).
 */
import type { Knex } from 'knex';
import type { Redis } from 'ioredis';
import { sql } from '../db/sql.ts';
import { EXAMPLE_UUID, statement } from '../db/statements.ts';

export const WINDOW_MS = 60_000;
const FOREIGN_KEY_VIOLATION = '23503';

export interface RateLimitState {
  /** Requests counted in the current window, this one included. */
  count: number;
  /** Epoch ms at which the window ends. */
  resetAt: number;
}

export interface RateLimitStore {
  readonly kind: 'memory' | 'postgres' | 'redis';
  /** Counts a request: the state at once when the process decides it, a promise when a store is asked. */
  hit(keyId: string, now: number): RateLimitState | Promise<RateLimitState>;
  /** Readiness of a store with its own service (Redis); the others live in the process or the database. */
  check?(): Promise<void>;
  close(): Promise<void>;
}

export class MemoryRateLimitStore implements RateLimitStore {
  readonly kind = 'memory';
  private readonly windows = new Map<string, RateLimitState>();
  private sweeper: NodeJS.Timeout;

  constructor() {
    this.sweeper = setInterval(() => {
      const now = Date.now();
      for (const [key, state] of this.windows) if (state.resetAt <= now) this.windows.delete(key);
    }, WINDOW_MS);
    this.sweeper.unref();
  }

  hit(keyId: string, now: number): RateLimitState {
    let state = this.windows.get(keyId);
    if (!state || state.resetAt <= now) {
      state = { count: 0, resetAt: now + WINDOW_MS };
      this.windows.set(keyId, state);
    }
    state.count += 1;
    return { ...state };
  }

  async close(): Promise<void> {
    clearInterval(this.sweeper);
  }
}

/**
 * Adds `delta` requests to the key's window, while the key exists (see PostgresRateLimitStore.add):
 * a window older than WINDOW_MS starts over.
 */
const addToWindow = statement<{ keyId: string; now: number; delta: number }, { count: number; window_start: number }>({
  name: 'rate_limit_add',
  area: 'rateLimit',
  variants: { 'a key': { keyId: EXAMPLE_UUID, now: 0, delta: 1 } },
  build: ({ keyId, now, delta }) => sql`insert into rate_limit_windows as w (key_id, window_start, count)
    select ${keyId}::uuid, ${now}::bigint, ${delta}::integer where exists (select 1 from api_keys k where k.id = ${keyId}::uuid)
    on conflict (key_id) do update set
      count = case when w.window_start + ${WINDOW_MS} <= excluded.window_start then excluded.count else w.count + excluded.count end,
      window_start = case when w.window_start + ${WINDOW_MS} <= excluded.window_start then excluded.window_start else w.window_start end
    returning count, window_start`,
});

/**
 * Shared through PostgreSQL without a round trip per request: each instance counts locally and
 * adds its pending count to the key's row every `syncMs` (default 100 ms; one upsert per key per interval), learning
 * the total of all instances from the same statement. The first request of a window goes to the
 * database at once, so a fresh window is always anchored there.
 *
 * Near the limit (the last `margin` requests of the budget, margin = max(50, limit / 10)) every
 * request is counted in the database before it is answered, and once this instance has seen the
 * budget spent it refuses locally without a round trip. An instance only admits without asking
 * while the shared total at its last sync (≤ `syncMs` ago) plus its own requests is below
 * limit − margin, so the decision is exact unless one key sends more than `margin` requests within
 * one sync interval across all instances; a single instance is always exact.
 */
export class PostgresRateLimitStore implements RateLimitStore {
  readonly kind = 'postgres';
  private readonly keys = new Map<string, { total: number; pending: number; resetAt: number }>();
  private readonly timer: NodeJS.Timeout;
  private flushing: Promise<void> | undefined;
  private readonly clock: () => number;
  private readonly limit: number;
  private readonly margin: number;

  constructor(
    private readonly db: Knex,
    options: { clock?: () => number; syncMs?: number; limit?: number } = {},
  ) {
    this.clock = options.clock ?? Date.now;
    this.limit = options.limit ?? Number.POSITIVE_INFINITY;
    this.margin = Number.isFinite(this.limit) ? Math.max(50, Math.ceil(this.limit / 10)) : 0; // no limit: never near it
    this.timer = setInterval(() => void this.flush().catch(() => undefined), options.syncMs ?? 100);
    this.timer.unref();
  }

  /**
   * Adds `delta` requests to the key's window. Only while the key exists: a count synced after its
   * account was deleted (this or another instance still held it) must not leave a row behind. The
   * EXISTS skips a key already gone; the foreign key (migration 0016) refuses one whose deletion
   * commits while this statement waits. Null when the key is gone.
   */
  private async add(keyId: string, delta: number, now: number): Promise<RateLimitState | null> {
    let rows: Array<{ count: number; window_start: number }>;
    try {
      rows = await addToWindow(this.db, { keyId, now, delta });
    } catch (err) {
      // The foreign key refused the row: the key was deleted while this statement ran.
      if ((err as { code?: string }).code === FOREIGN_KEY_VIOLATION) return null;
      throw err;
    }
    const row = rows[0];
    return row ? { count: Number(row.count), resetAt: Number(row.window_start) + WINDOW_MS } : null;
  }

  /** A request of a key deleted meanwhile (it authenticated just before): counted locally only. */
  private orphan(keyId: string, delta: number, now: number): RateLimitState {
    this.keys.delete(keyId);
    return { count: delta, resetAt: now + WINDOW_MS };
  }

  /** Decided in the process (no promise) far from the limit or past it; otherwise in the database. */
  hit(keyId: string, now: number): RateLimitState | Promise<RateLimitState> {
    const local = this.keys.get(keyId);
    if (local && local.resetAt > now) {
      const seen = local.total + local.pending;
      if (seen < this.limit - this.margin || seen >= this.limit) {
        // Far from the limit, or already over it (counts only grow within a window): decide locally.
        local.pending += 1;
        return { count: seen + 1, resetAt: local.resetAt };
      }
    }
    return this.hitInDatabase(keyId, now, local);
  }

  private async hitInDatabase(
    keyId: string,
    now: number,
    local: { total: number; pending: number; resetAt: number } | undefined,
  ): Promise<RateLimitState> {
    if (local && local.resetAt > now) {
      // Near the limit: count this request, and whatever is pending, in the database first.
      const delta = local.pending + 1;
      local.pending = 0;
      let state: RateLimitState | null;
      try {
        state = await this.add(keyId, delta, now);
      } catch (err) {
        local.pending += delta - 1; // this request failed; the earlier ones still count
        throw err;
      }
      if (!state) return this.orphan(keyId, delta, now);
      this.learn(keyId, state);
      return state;
    }
    // A new window (or a key this instance has not seen): count it in the database now.
    const state = await this.add(keyId, 1, now);
    if (!state) return this.orphan(keyId, 1, now);
    this.learn(keyId, state);
    return state;
  }

  /** Takes a total read from the database; of concurrent answers for one window the largest is the newest. */
  private learn(keyId: string, state: RateLimitState): void {
    const current = this.keys.get(keyId);
    if (current && current.resetAt === state.resetAt) {
      current.total = Math.max(current.total, state.count);
    } else {
      this.keys.set(keyId, { total: state.count, pending: 0, resetAt: state.resetAt });
    }
  }

  /** Adds every pending count to the database and refreshes the totals. */
  flush(): Promise<void> {
    this.flushing ??= this.sync().finally(() => {
      this.flushing = undefined;
    });
    return this.flushing;
  }

  private async sync(): Promise<void> {
    const now = this.clock();
    for (const [keyId, local] of this.keys) {
      if (local.resetAt <= now) {
        this.keys.delete(keyId); // the window is over; its unsynced requests no longer matter
        continue;
      }
      if (local.pending === 0) continue;
      const delta = local.pending;
      local.pending = 0;
      try {
        const state = await this.add(keyId, delta, now);
        if (!state) {
          this.keys.delete(keyId); // the key (its account) was deleted: nothing left to count
          continue;
        }
        if (state.resetAt === local.resetAt) local.total = Math.max(local.total, state.count);
        else Object.assign(local, { total: state.count, resetAt: state.resetAt });
      } catch (err) {
        local.pending += delta; // try again on the next sync
        throw err;
      }
    }
  }

  async close(): Promise<void> {
    clearInterval(this.timer);
    await this.flush().catch(() => undefined);
  }
}

export class RedisRateLimitStore implements RateLimitStore {
  readonly kind = 'redis';
  constructor(private readonly redis: Redis) {}

  async hit(keyId: string, _now: number): Promise<RateLimitState> {
    const key = `ratelimit:${keyId}`;
    // SET NX opens the window with its expiry; INCR keeps the expiry; PTTL tells when it ends.
    const results = await this.redis.multi().set(key, 0, 'PX', WINDOW_MS, 'NX').incr(key).pttl(key).exec();
    if (!results) throw new Error('Redis transaction aborted');
    for (const [err] of results) if (err) throw err;
    const count = Number(results[1]![1]);
    const ttl = Number(results[2]![1]);
    return { count, resetAt: Date.now() + (ttl > 0 ? ttl : WINDOW_MS) };
  }

  async check(): Promise<void> {
    await this.redis.ping();
  }

  async close(): Promise<void> {
    // quit() waits for a reply that never comes while Redis is down; a closed socket is enough then.
    if (this.redis.status === 'ready') await this.redis.quit();
    else this.redis.disconnect();
  }
}

export interface RateLimitDecision {
  allowed: boolean;
  headers: Record<string, string>;
  retryAfterSeconds: number;
  limit: number;
  /** Requests left in the window after this one. */
  remaining: number;
  /** Seconds until the window ends. */
  resetSeconds: number;
}

export class RateLimiter {
  /** The headers' values that do not change from one request to the next. */
  private readonly limitHeader: string;
  private readonly policyHeader: string;

  constructor(
    readonly store: RateLimitStore,
    readonly limitPerWindow: number,
  ) {
    this.limitHeader = String(limitPerWindow);
    this.policyHeader = `${limitPerWindow};w=${WINDOW_MS / 1000}`;
  }

  /** The decision for one more request of the key: at once when the store decides in the process. */
  check(keyId: string, now: number): RateLimitDecision | Promise<RateLimitDecision> {
    const state = this.store.hit(keyId, now);
    return state instanceof Promise ? state.then((s) => this.decide(s, now)) : this.decide(state, now);
  }

  private decide(state: RateLimitState, now: number): RateLimitDecision {
    const resetSeconds = Math.max(0, Math.ceil((state.resetAt - now) / 1000));
    const remaining = Math.max(0, this.limitPerWindow - state.count);
    const headers: Record<string, string> = {
      'RateLimit-Limit': this.limitHeader,
      'RateLimit-Remaining': String(remaining),
      'RateLimit-Reset': String(resetSeconds),
      'RateLimit-Policy': this.policyHeader,
    };
    const allowed = state.count <= this.limitPerWindow;
    if (!allowed) headers['Retry-After'] = String(Math.max(1, resetSeconds));
    return {
      allowed,
      headers,
      retryAfterSeconds: Math.max(1, resetSeconds),
      limit: this.limitPerWindow,
      remaining,
      resetSeconds,
    };
  }

  close(): Promise<void> {
    return this.store.close();
  }
}

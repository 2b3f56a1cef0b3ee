/** The SQL of idempotency keys (generated/sql/idempotency.sql). */
import type { Knex } from 'knex';
import { type Sql, sql } from '../db/sql.ts';
import { EXAMPLE_UUID, statement } from '../db/statements.ts';
import type { KeyCompletion } from '../core/context.ts';
import { appendEvents, EVENT_LOG_LOCK, EXAMPLE_EVENT, type EventInsert, notifiedColumn } from '../events/log.ts';
import { EXAMPLE_COMPLETION as EXAMPLE_STORE, insertUnderKey } from './inStatement.ts';

const AREA = 'idempotency';

/** Which use of a key: the account, the operation and the key as sent. */
export interface KeyScope {
  userId: string;
  operation: string;
  key: string;
}

export interface StoredRow {
  id: string;
  fingerprint: Uint8Array;
  /** Null while the key is claimed ahead of its write and its response not yet stored (claimAhead). */
  key_id: string | null;
  response_enc: Uint8Array | null;
}

// The key comes last, so the name is unambiguous whatever characters it holds.
const lockName = (s: KeyScope) => `idempotency ${s.userId} ${s.operation} ${s.key}`;

/**
 * Takes the key's transaction-scoped lock if no other transaction holds it (`locked` false: a
 * request with this key is in flight), and reads the live response stored under the key, if any.
 * The read's snapshot may predate a holder that commits just before the lock is taken; store()
 * finds that one instead of overwriting it.
 */
const claim = statement<KeyScope & { now: number }, Partial<StoredRow> & { locked: boolean }>({
  name: 'idempotency_claim',
  area: AREA,
  variants: { 'a key': { userId: EXAMPLE_UUID, operation: 'op', key: 'k', now: 0 } },
  build: (s) => sql`select pg_try_advisory_xact_lock(hashtextextended(${lockName(s)}, 0)) as locked,
      r.id, r.fingerprint, r.key_id, r.response_enc
    from (select 1) as one
    left join idempotency_keys r
      on r.user_id = ${s.userId} and r.operation = ${s.operation} and r.idem_key = ${s.key} and r.expires_at > ${s.now}::bigint`,
});

/** The live response stored under a key, if any. */
const find = statement<KeyScope & { now: number }, StoredRow>({
  name: 'idempotency_find',
  area: AREA,
  variants: { 'a key': { userId: EXAMPLE_UUID, operation: 'op', key: 'k', now: 0 } },
  build: (s) => sql`select id, fingerprint, key_id, response_enc from idempotency_keys
    where user_id = ${s.userId} and operation = ${s.operation} and idem_key = ${s.key} and expires_at > ${s.now}::bigint`,
});

/** A response as stored under a key (the columns of its row). */
type StoreRow = KeyCompletion;

/** Stores a response under a key unless a live one is there already (then nothing is returned). */
const store = statement<StoreRow, { id: string }>({
  name: 'idempotency_store',
  area: AREA,
  variants: { 'a response': EXAMPLE_STORE },
  build: (r) => insertUnderKey(r),
});

/**
 * The same, with the events the request held back appended in the same statement (server/events/log.ts):
 * a keyed write's response costs no statement of its own. `id` is null when a live response was
 * there already (the caller rolls back, events included). The event log's lock comes first, as in
 * a write that stores its answer under the key (appendEvents), so the two cannot deadlock.
 */
const storeWithEvents = statement<StoreRow & { events: EventInsert[] }, { id: string | null }>({
  name: 'idempotency_store_with_events',
  area: AREA,
  variants: {
    'a response and its events': {
      ...EXAMPLE_STORE,
      events: [EXAMPLE_EVENT],
    },
  },
  build: (r) => sql`with first as (select ${EVENT_LOG_LOCK}),
    stored as (${insertUnderKey(r, { from: sql`first` })}),
    ${appendEvents(r.events)}
    select (select id from stored) as id, ${notifiedColumn}`,
});

/**
 * Claims a key ahead of its request: a row without a response, live until `leaseUntil`, unless a
 * live row holds the key (then `claimed` is null, and the row is returned as this statement's
 * snapshot sees it: none when it committed after the statement began).
 */
const claimAhead = statement<
  KeyScope & { id: string; fingerprint: Buffer; now: number; leaseUntil: number },
  Partial<StoredRow> & { claimed: string | null }
>({
  name: 'idempotency_claim_ahead',
  area: AREA,
  variants: {
    'a key': {
      userId: EXAMPLE_UUID,
      operation: 'op',
      key: 'k',
      id: EXAMPLE_UUID,
      fingerprint: Buffer.alloc(0),
      now: 0,
      leaseUntil: 0,
    },
  },
  build: (s) => sql`with claimed as (
      insert into idempotency_keys (id, user_id, operation, idem_key, fingerprint, key_id, response_enc, created_at, expires_at)
      values (${s.id}, ${s.userId}, ${s.operation}, ${s.key}, ${s.fingerprint}, null, null, ${s.now}::bigint, ${s.leaseUntil}::bigint)
      on conflict (user_id, operation, idem_key) do update set
        id = excluded.id, fingerprint = excluded.fingerprint, key_id = null, response_enc = null,
        created_at = excluded.created_at, expires_at = excluded.expires_at
        where idempotency_keys.expires_at <= ${s.now}::bigint
      returning id
    )
    select (select id from claimed) as claimed, r.id, r.fingerprint, r.key_id, r.response_enc
    from (select 1) as one
    left join idempotency_keys r
      on r.user_id = ${s.userId} and r.operation = ${s.operation} and r.idem_key = ${s.key} and r.expires_at > ${s.now}::bigint`,
});

interface Completion {
  claimId: string;
  keyId: string;
  response: Buffer;
  expiresAt: number;
}

/** `after`: a CTE whose row it waits for (the event log's lock, taken before the key's row). */
const completeClaim = (c: Completion, after?: Sql): Sql => sql`update idempotency_keys
    set key_id = ${c.keyId}, response_enc = ${c.response}, expires_at = ${c.expiresAt}::bigint
    where id = ${c.claimId} and response_enc is null${after ? sql` and exists (select 1 from ${after})` : sql.empty}
    returning id`;

const EXAMPLE_COMPLETION: Completion = { claimId: EXAMPLE_UUID, keyId: 'k', response: Buffer.alloc(0), expiresAt: 0 };

/**
 * Stores the response on a claim still waiting for it, with the events the request held back
 * (when it ran in a transaction); `id` null when the claim is gone (then nothing is appended).
 */
const complete = statement<Completion & { events: EventInsert[] }, { id: string | null }>({
  name: 'idempotency_complete',
  area: AREA,
  variants: {
    'a response': { ...EXAMPLE_COMPLETION, events: [] },
    'a response and its events': { ...EXAMPLE_COMPLETION, events: [EXAMPLE_EVENT] },
  },
  build: (c) =>
    c.events.length === 0
      ? completeClaim(c)
      : sql`with first as (select ${EVENT_LOG_LOCK}),
    stored as (${completeClaim(c, sql`first`)}),
    ${appendEvents(c.events, sql`exists (select 1 from stored)`)}
    select (select id from stored) as id, ${notifiedColumn}`,
});

/** Gives a claim up (a 5xx: the client may retry at once). */
const release = statement<{ claimId: string }, never>({
  name: 'idempotency_release',
  area: AREA,
  variants: { 'a claim': { claimId: EXAMPLE_UUID } },
  build: ({ claimId }) => sql`delete from idempotency_keys where id = ${claimId} and response_enc is null`,
});

/** Deletes expired keys (a batch at a time); how many went. */
const prune = statement<{ now: number; size: number }, { n: number }>({
  name: 'idempotency_prune',
  area: AREA,
  variants: { one: { now: 0, size: 10_000 } },
  build: ({ now, size }) => sql`with gone as (
      delete from idempotency_keys where id in (
        select id from idempotency_keys where expires_at <= ${now}::bigint limit ${size}
      ) returning 1
    )
    select count(*)::int as n from gone`,
});

export const idempotencyRepo = {
  claim: async (db: Knex, scope: KeyScope, now: number) => (await claim(db, { ...scope, now }))[0]!,
  claimAhead: async (
    db: Knex,
    scope: KeyScope,
    row: { id: string; fingerprint: Buffer; now: number; leaseUntil: number },
  ) => (await claimAhead(db, { ...scope, ...row }))[0]!,
  /** False when the claim is gone (its lease ran out and another request took the key). */
  complete: async (db: Knex, c: Completion, events: readonly EventInsert[]) =>
    (await complete(db, { ...c, events: [...events] }))[0]?.id != null,
  release: async (db: Knex, claimId: string): Promise<void> => void (await release(db, { claimId })),
  find: async (db: Knex, scope: KeyScope, now: number): Promise<StoredRow | undefined> =>
    (await find(db, { ...scope, now }))[0],
  /** False when a live response is stored under the key already. */
  store: async (db: Knex, row: StoreRow, events: readonly EventInsert[]): Promise<boolean> =>
    events.length > 0
      ? (await storeWithEvents(db, { ...row, events: [...events] }))[0]?.id != null
      : (await store(db, row)).length > 0,
  /** Deletes every expired key; how many went. */
  prune: async (db: Knex, now: number): Promise<number> => {
    let total = 0;
    for (;;) {
      const n = (await prune(db, { now, size: 10_000 }))[0]?.n ?? 0;
      total += n;
      if (n < 10_000) return total;
    }
  },
};

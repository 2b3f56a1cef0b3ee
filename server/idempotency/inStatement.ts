/**
 * A keyed request's answer stored under its key by the write's own statement (docs/api.md "Safe
 * retries", "keyed in the write"): the CTE `keyed` inserts the key's row with the sealed answer when
 * the write happened, or completes the request's own claim (claimKey), or takes over a row whose
 * time ran out; `idempotency_held` (migration 0032) fails the statement whole when it wrote but the
 * key was another request's (its answer, or its claim while it runs). The event log's append
 * carries it for a write that emits events (appendEvents, server/events/log.ts); a write that emits
 * none takes it with answerUnderKey.
 */
import type { KeyCompletion, KeyedStatement } from '../core/context.ts';
import { type Sql, sql } from '../db/sql.ts';
import { EXAMPLE_UUID } from '../db/statements.ts';

/**
 * The insert of a response under a key, taking the key only when no live row holds it or the row is
 * this request's own claim (its id), else no row. `from`: a CTE whose row it waits for (the event
 * log's lock, taken before the key's row); `when`: the condition under which it inserts at all.
 */
export const insertUnderKey = (
  key: KeyCompletion,
  at: { from?: Sql; when?: Sql } = {},
): Sql => sql`insert into idempotency_keys
      (id, user_id, operation, idem_key, fingerprint, key_id, response_enc, created_at, expires_at)
    select ${key.id}::uuid, ${key.userId}::uuid, ${key.operation}::text, ${key.key}::text, ${key.fingerprint}::bytea,
      ${key.keyId}::text, ${key.response}::bytea, ${key.now}::bigint, ${key.expiresAt}::bigint
    ${at.from ? sql`from ${at.from}` : sql.empty}${at.when ? sql` where ${at.when}` : sql.empty}
    on conflict (user_id, operation, idem_key) do update set
      id = excluded.id, fingerprint = excluded.fingerprint, key_id = excluded.key_id,
      response_enc = excluded.response_enc, created_at = excluded.created_at, expires_at = excluded.expires_at
      where (idempotency_keys.id = excluded.id and idempotency_keys.response_enc is null)
        or idempotency_keys.expires_at <= excluded.created_at
    returning id`;

/** The CTE `keyed` (followed by a comma): the sealed answer stored under the key when `when` holds. */
export const storedUnderKey = (key: KeyCompletion, when: Sql): Sql => sql`
    keyed as (${insertUnderKey(key, { when })}),`;

/**
 * For a keyed write in one statement that appends no event (ServerContext.keyed, armed by
 * oneStatement): `ctes`, the CTE `keyed` storing the answer when `written` (a condition of the
 * statement, true when it wrote), to place among its CTEs; and `answered`, a column (with its
 * leading comma) for its final select, which must yield a row whenever the statement wrote: true
 * when the answer was stored, and the statement fails whole when it wrote without storing it. Both
 * empty for a request not keyed.
 */
export function answerUnderKey(keyed: KeyedStatement | undefined, written: Sql): { ctes: Sql; answered: Sql } {
  const key = keyed?.take();
  if (!key) return { ctes: sql.empty, answered: sql.empty };
  return {
    ctes: storedUnderKey(key, written),
    answered: sql`,
      case when idempotency_held(case when ${written} then 1 else 0 end, (select count(*) from keyed))
        then exists (select 1 from keyed) end as answered`,
  };
}

/** A response under a key, for the statements' example variants (generated/sql/). */
export const EXAMPLE_COMPLETION: KeyCompletion = {
  id: EXAMPLE_UUID,
  userId: EXAMPLE_UUID,
  operation: 'op',
  key: 'k',
  fingerprint: Buffer.alloc(0),
  now: 0,
  keyId: 'k',
  response: Buffer.alloc(0),
  expiresAt: 0,
};

/** A keyed request armed with an example answer, for the variants of statements that store it (generated/sql/). */
export function exampleKeyed(): KeyedStatement {
  return {
    state: 'armed',
    arm: () => false,
    take: () => EXAMPLE_COMPLETION,
    settle: () => undefined,
    claim: async () => undefined,
  };
}

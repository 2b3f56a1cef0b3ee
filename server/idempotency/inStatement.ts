/**
 * A keyed request's answer stored on its claim by the write's own statement (docs/api.md "Safe
 * retries", "claimed ahead"): the CTE `keyed` updates the claim's row when the write happened, and
 * `idempotency_held` (migration 0032) fails the statement whole when it wrote but the claim was no
 * longer this request's (its lease ran out and another request took the key). The event log's
 * append carries it for a write that emits events (appendEvents, server/events/log.ts); a write
 * that emits none takes it with answerOnClaim.
 */
import type { KeyCompletion, KeyedStatement } from '../core/context.ts';
import { type Sql, sql } from '../db/sql.ts';
import { EXAMPLE_UUID } from '../db/statements.ts';

/** The CTE `keyed` (followed by a comma): the sealed answer stored on the claim when `when` holds. */
export const storedOnClaim = (key: KeyCompletion, when: Sql): Sql => sql`
    keyed as (
      update idempotency_keys k set key_id = ${key.keyId}, response_enc = ${key.response}, expires_at = ${key.expiresAt}::bigint
      where k.id = ${key.claimId} and k.response_enc is null and ${when}
      returning k.id
    ),`;

/**
 * For a write in one statement that appends no event, claimed ahead (`keyed`, ServerContext.keyed,
 * armed by oneStatement): `ctes`, the CTE `keyed` storing the answer when `written` (a condition of
 * the statement, true when it wrote), to place among its CTEs; and `answered`, a column (with its
 * leading comma) for its final select, which must yield a row whenever the statement wrote: true
 * when the answer was stored, and the statement fails whole when it wrote without storing it. Both
 * empty for a request not keyed ahead.
 */
export function answerOnClaim(keyed: KeyedStatement | undefined, written: Sql): { ctes: Sql; answered: Sql } {
  const key = keyed?.take();
  if (!key) return { ctes: sql.empty, answered: sql.empty };
  return {
    ctes: storedOnClaim(key, written),
    answered: sql`,
      case when idempotency_held(case when ${written} then 1 else 0 end, (select count(*) from keyed))
        then exists (select 1 from keyed) end as answered`,
  };
}

/** A keyed request armed with an example answer, for the variants of statements that store it (generated/sql/). */
export function exampleKeyed(): KeyedStatement {
  const completion: KeyCompletion = { claimId: EXAMPLE_UUID, keyId: 'k', response: Buffer.alloc(0), expiresAt: 0 };
  return { state: 'armed', arm: () => false, take: () => completion, settle: () => undefined };
}

/**
 * Access: the only place that answers "may this actor see or change this owner's content, and at
 * what level". Services receive an `Access` (server/core/context.ts) created here and apply its
 * predicates in SQL, so rows a viewer may not see are never loaded (never filtered in JS).
 *
 * Today every route is an owner route: the actor's own account at level `owner`, which sees and
 * changes everything. The privacy issue adds `forFriend()` (friendship + privacy buckets) and the
 * bucket predicate of `visibleRows()`; the seam, the 404 rule and the owner case are fixed here.
 */
import type { Knex } from 'knex';
import type { Access, KeyActor } from '../core/context.ts';
import { forbidden, notFound } from '../core/errors.ts';

/** The owner's own routes: the key's account, everything. */
export function ownAccount(actor: KeyActor): Access {
  return { ownerId: actor.accountId, level: 'owner' };
}

/** The operator (admin API) or a background job acting on one account, with the owner's rights. */
export function onBehalfOf(accountId: string): Access {
  return { ownerId: accountId, level: 'owner' };
}

/**
 * A viewer looking at another account's content (the friend routes). The bucket engine arrives
 * with the privacy issue; until then there is no friendship, so every friend route answers as if
 * the owner did not exist (404), never with data.
 */
export async function forFriend(_db: Knex, _viewerId: string, _ownerId: string): Promise<Access | null> {
  return null;
}

/**
 * The rule every friend route follows: what the viewer may not see does not exist for it (404,
 * the same answer as for an unknown id), so a response never reveals hidden content.
 */
export function requireVisible<T>(value: T | null | undefined, what: string): T {
  if (value === null || value === undefined) throw notFound(`${what} not found`);
  return value;
}

/** Writes are the owner's alone: a friend (read-only) is refused before any SQL runs. */
export function assertCanWrite(access: Access): void {
  if (access.level !== 'owner') throw forbidden("Only the owner may change this account's content");
}

export interface VisibleRowsOptions {
  /** The table alias or name whose `user_id` column holds the owner (default: unqualified). */
  table?: string;
}

/**
 * The account whose rows a one-statement read (docs/data-access.md) may return, for an owner
 * access; such statements filter on `user_id` alone, so a friend access is refused here exactly as
 * visibleRows() refuses it.
 */
export function ownerRowsOf(access: Access): string {
  if (access.level !== 'owner') throw new Error('friend access has no row predicate yet: the privacy bucket engine is not built');
  return access.ownerId;
}

/**
 * A knex predicate for the rows the access may see of a table that has a `user_id` column:
 * `query.where(visibleRows(access))`. Owner: all of the owner's rows. Friend: refused until the
 * bucket engine exists, so no friend read can run unfiltered by mistake.
 */
export function visibleRows(access: Access, options: VisibleRowsOptions = {}): (qb: Knex.QueryBuilder) => void {
  const column = options.table ? `${options.table}.user_id` : 'user_id';
  if (access.level !== 'owner') {
    throw new Error('friend access has no row predicate yet: the privacy bucket engine is not built');
  }
  return (qb) => {
    qb.where(column, access.ownerId);
  };
}

/**
 * The side/sub-system part of what a read covers (the active system, or the unified view),
 * as a knex predicate repos apply in SQL. Resolved from the account's active context by
 * server/features/systems/scope.ts.
 */
import type { Knex } from 'knex';

export interface ReadScope {
  /** null: every side system (unified view). */
  sideSystemId: string | null;
  /** null: the whole side system, sub systems included. */
  subSystemId: string | null;
}

/** Adds the scope filter to a query over a table with side_system_id / sub_system_id columns. */
export function applyScope<T extends Knex.QueryBuilder>(qb: T, scope: ReadScope, table?: string): T {
  const col = (c: string) => (table ? `${table}.${c}` : c);
  if (scope.sideSystemId) qb.where(col('side_system_id'), scope.sideSystemId);
  if (scope.subSystemId) qb.where(col('sub_system_id'), scope.subSystemId);
  return qb;
}

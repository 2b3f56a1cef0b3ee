/**
 * The side/sub-system part of what a read covers (the active system, or the unified view),
 * as SQL repos apply in their statements. Resolved from the account's active context by
 * server/features/systems/scope.ts.
 */
import { type Sql, sql } from '../db/sql.ts';

export interface ReadScope {
  /** null: every side system (unified view). */
  sideSystemId: string | null;
  /** null: the whole side system, sub systems included. */
  subSystemId: string | null;
}

/**
 * The condition "row `x` is in the active read scope of context row `c`", for a one-statement read
 * whose rows come from another index than the scope's (activeScopeRowsSql walks the scope's own).
 */
export const IN_ACTIVE_SCOPE =
  '(c.is_unified_view or (x.side_system_id = c.side_system_id and (c.sub_system_id is null or x.sub_system_id = c.sub_system_id)))';

/** IN_ACTIVE_SCOPE as a fragment of the sql tag. */
export const inActiveScopeSql: Sql = sql.constant(IN_ACTIVE_SCOPE, [IN_ACTIVE_SCOPE]);

/**
 * The rows of `table` (alias `x`) in the account's active read scope, for a one-statement read
 * that takes the scope from `active_system_context c` in the same statement (see
 * docs/data-access.md): at most `limit` rows in `order`, as three branches of which the context
 * row switches exactly one on: the unified view walks the account's ordered index, a side system
 * the side system's ordered index (migration 0011), a sub system the same walk filtered to the sub
 * system; each stops at the limit. The switch is a condition on `c` alone, which PostgreSQL
 * evaluates once per branch (a one-time filter), so the other branches read nothing.
 *
 * Each branch has a single equality for the planner to estimate. The side system branches name
 * the account only outside their LIMIT (the context's side system is the account's own, so that
 * check never drops a row): inside, the planner multiplies the selectivities of "this account" and
 * "this side system" as if independent, expects a handful of rows, and reads and sorts the whole
 * side system instead of walking it. `columns` must include `x.user_id`; `columns` and `order` are
 * constant text from code, the limit is bound in each branch, and `extra` (conditions on `x`, with
 * their own values) comes before each limit.
 */
export function activeScopeRowsSql(
  table: string,
  columns: Sql,
  order: Sql,
  limit: number,
  extra: Sql = sql.empty,
): Sql {
  const t = sql.id(table);
  const side = (condition: Sql) => sql`(select * from (select ${columns} from ${t} x
     where ${condition} and x.side_system_id = c.side_system_id and x.deleted_at is null${extra}
     order by ${order} limit ${limit}) y
   where y.user_id = c.user_id)`;
  return sql`(select ${columns} from ${t} x where c.is_unified_view and x.user_id = c.user_id and x.deleted_at is null${extra} order by ${order} limit ${limit})
  union all
  ${side(sql`not c.is_unified_view and c.sub_system_id is null`)}
  union all
  ${side(sql`not c.is_unified_view and x.sub_system_id = c.sub_system_id`)}`;
}

/**
 * The CTE `write_scope (side_system_id, sub_system_id)`: where a write in one statement places new
 * data, as resolveWriteScope (server/features/systems/scope.ts) decides it in a transaction — the
 * account's active context and its live side and sub system, share-locked so that a system cannot
 * be deleted under the write (its delete takes them for update). No row when the context names a
 * system that is gone (the write then places nothing).
 */
export function writeScopeSql(userId: string): Sql {
  return sql`write_context as (
      select side_system_id, sub_system_id from active_system_context where user_id = ${userId} for share
    ),
    write_side as (
      select s.id from side_systems s
      where s.id = (select side_system_id from write_context) and s.user_id = ${userId} and s.deleted_at is null
      for share
    ),
    write_sub as (
      select s.id from sub_systems s
      where s.id = (select sub_system_id from write_context) and s.user_id = ${userId} and s.deleted_at is null
      for share
    ),
    write_scope as (
      select c.side_system_id, c.sub_system_id from write_context c
      where exists (select 1 from write_side) and (c.sub_system_id is null or exists (select 1 from write_sub))
    )`;
}

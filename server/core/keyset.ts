/**
 * Keyset pagination, the one way lists page: rows ordered by an indexed key that ends with a
 * unique column, a page = the rows strictly after the last key of the previous page, read with
 * one row more than the page size to know whether another page exists. Deep pages cost what the
 * first one costs (no OFFSET).
 */
import { type Sql, sql } from '../db/sql.ts';

const TYPES = ['bigint', 'uuid', 'text'] as const;
const DIRECTIONS = ['asc', 'desc'] as const;

export interface KeysetColumn {
  /** The column's SQL expression (`sql\`s.started_at\``, `sql\`lower(a.username) collate "C"\``), from code. */
  sql: Sql;
  /** The cast of the cursor value, so the comparison matches the index's type. */
  type: (typeof TYPES)[number];
}

export interface Keyset {
  columns: readonly KeysetColumn[];
  direction: (typeof DIRECTIONS)[number];
}

/**
 * The cursor's condition, `(a, b) > ($1::bigint, $2::uuid)` (`<` when descending): the rows strictly
 * after `after`, the key of the previous page's last row.
 */
export function keysetAfterSql(keyset: Keyset, after: ReadonlyArray<string | number>): Sql {
  const { columns, direction } = keyset;
  if (after.length !== columns.length)
    throw new Error(`keyset cursor has ${after.length} values for ${columns.length} columns`);
  const lhs = sql.join(
    columns.map((c) => c.sql),
    ', ',
  );
  const rhs = sql.join(
    columns.map((c, i) => sql`${after[i]}::${sql.constant(c.type, TYPES)}`),
    ', ',
  );
  return sql`(${lhs}) ${sql.constant(direction === 'asc' ? '>' : '<', ['>', '<'])} (${rhs})`;
}

/** `order by <the key> limit <size + 1>`: the page and one row more, to know whether another follows. */
export function keysetOrderSql(keyset: Keyset, size: number): Sql {
  const direction = sql.constant(keyset.direction, DIRECTIONS);
  const order = sql.join(
    keyset.columns.map((c) => sql`${c.sql} ${direction}`),
    ', ',
  );
  return sql`order by ${order} limit ${size + 1}`;
}

/** The page of rows a keyset query returned, and the last row of it when another page follows. */
export function pageOf<R>(rows: R[], size: number): { items: R[]; nextAfter: R | null } {
  const items = rows.length > size ? rows.slice(0, size) : rows;
  return { items, nextAfter: rows.length > size ? items[items.length - 1]! : null };
}

/**
 * Keyset pagination, the one way lists page: rows ordered by an indexed key that ends with a
 * unique column, a page = the rows strictly after the last key of the previous page, read with
 * one row more than the page size to know whether another page exists. Deep pages cost what the
 * first one costs (no OFFSET).
 */
import type { Knex } from 'knex';

export interface KeysetColumn {
  /** The SQL expression of the column (`s.started_at`, `lower(a.username) collate "C"`); from code, never from input. */
  sql: string;
  /** The cast of the cursor value, so the comparison matches the index's type. */
  type: 'bigint' | 'uuid' | 'text';
}

export interface Keyset {
  columns: readonly KeysetColumn[];
  direction: 'asc' | 'desc';
}

/** Applies the cursor (`after`: the key of the previous page's last row), the key order and `size + 1` rows. */
export function keysetPage<Q extends Knex.QueryBuilder>(
  q: Q,
  keyset: Keyset,
  size: number,
  after?: ReadonlyArray<string | number>,
): Q {
  const { columns, direction } = keyset;
  if (after) {
    if (after.length !== columns.length)
      throw new Error(`keyset cursor has ${after.length} values for ${columns.length} columns`);
    const lhs = columns.map((c) => c.sql).join(', ');
    const rhs = columns.map((c) => `?::${c.type}`).join(', ');
    q.whereRaw(`(${lhs}) ${direction === 'asc' ? '>' : '<'} (${rhs})`, [...after]);
  }
  q.orderByRaw(columns.map((c) => `${c.sql} ${direction}`).join(', '));
  q.limit(size + 1);
  return q;
}

/** The page of rows a keysetPage() query returned, and the last row of it when another page follows. */
export function pageOf<R>(rows: R[], size: number): { items: R[]; nextAfter: R | null } {
  const items = rows.length > size ? rows.slice(0, size) : rows;
  return { items, nextAfter: rows.length > size ? items[items.length - 1]! : null };
}

/** What the social area's repos share. */
import { type Sql, sql } from '../../../db/sql.ts';

/** The file of generated/sql/ the social statements go to. */
export const AREA = 'social';

const PATCH_TYPES = ['text', 'boolean', 'int', 'jsonb'] as const;

/**
 * One column of a PATCH: `column = case when <given> then <value> else column end`. Whether the
 * value is given is a bound boolean, so every subset of columns runs the same text.
 */
export function patchColumn(column: string, type: (typeof PATCH_TYPES)[number], value: unknown): Sql {
  const col = sql.id(column);
  return sql`${col} = case when ${value !== undefined}::boolean then ${value === undefined ? null : value}::${sql.constant(type, PATCH_TYPES)} else ${col} end`;
}

/**
 * Named prepared statements for the hot reads: constant SQL text that PostgreSQL parses once per
 * connection and, after a few executions, plans once (a generic plan) instead of on every request.
 * Planning costs more than running an indexed read of one page, so this is most of the database
 * work such a request saves. See docs/data-access.md for how a read route is written with it.
 *
 * A statement goes through knex (`db.raw(text, bindings).options({ name })`), and knex's `query`
 * events (statement-count tests, the bench's SQL capture) see it. Outside a transaction it runs on
 * the PostgreSQL database's second pool (usePreparedPool), whose connections always take the
 * generic plan (`plan_cache_mode = force_generic_plan`): left to choose, PostgreSQL may keep
 * planning a statement per execution when its estimates favour custom plans. Inside a transaction
 * it runs on the transaction's connection, where PostgreSQL chooses. `pg` sends the text under its
 * name the first time a connection runs it and only the name afterwards. The embedded database
 * (PGlite) runs the same text unnamed on its one connection: it has no network round trip to save.
 *
 * Rules: the text is a constant (no values, no pieces chosen per request: a variant is another
 * statement with its own name), placeholders are `?` (knex numbers them $1, $2 … in order; a value
 * used twice is bound twice), and every name is defined once. A generic plan does not see the
 * values, so a statement must be shaped to stay on its index whatever they are; its EXPLAIN test
 * checks the generic plan (`plan_cache_mode = force_generic_plan`), not only a custom one.
 */
import type { Knex } from 'knex';

/** Runs the statement with these values (one per `?`, in order) and returns its rows. */
export type PreparedStatement<Row> = ((db: Knex, bindings: readonly unknown[]) => Promise<Row[]>) & { readonly statementName: string; readonly text: string };

const defined = new Map<string, string>();
const preparedPools = new WeakMap<Knex, Knex>();

/** Named statements run against `main` outside a transaction go to `pool` instead (see above). */
export function usePreparedPool(main: Knex, pool: Knex): void {
  preparedPools.set(main, pool);
}

/** Every statement defined so far, by name (tests EXPLAIN each one's generic plan). */
export function preparedStatements(): ReadonlyMap<string, string> {
  return defined;
}

export function prepared<Row>(name: string, text: string): PreparedStatement<Row> {
  if (!/^[a-z][a-z0-9_]{0,62}$/.test(name)) throw new Error(`prepared statement name '${name}' must be lower-case snake case, at most 63 characters`);
  const earlier = defined.get(name);
  if (earlier !== undefined && earlier !== text) throw new Error(`prepared statement '${name}' is defined twice with different SQL`);
  defined.set(name, text);
  const run = async (db: Knex, bindings: readonly unknown[]): Promise<Row[]> => {
    const target = (db as Knex & { isTransaction?: boolean }).isTransaction ? db : (preparedPools.get(db) ?? db);
    const result = (await target.raw(text, bindings as readonly Knex.RawBinding[]).options({ name })) as { rows: Row[] };
    return result.rows;
  };
  return Object.assign(run, { statementName: name, text });
}

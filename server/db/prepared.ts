/**
 * Named prepared statements for the hot reads: constant SQL text that PostgreSQL parses once per
 * connection and, after a few executions, plans once (a generic plan) instead of on every request.
 * Planning costs more than running an indexed read of one page, so this is most of the database
 * work such a request saves. See docs/data-access.md for how a read route is written with it.
 *
 * On PostgreSQL, a read run outside a transaction goes to the database's second pool
 * (usePreparedPool), whose connections always take the generic plan (`plan_cache_mode =
 * force_generic_plan`): left to choose, PostgreSQL may keep planning a statement per execution when
 * its estimates favour custom plans. It is sent straight through `pg` on a connection of that pool,
 * with its text numbered once ($1, $2 …) when defined, and reported as a knex `query` event of the
 * main instance (statement-count tests and the bench's SQL capture see it like any other query).
 * `pg` sends the text under its name the first time a connection runs it and only the name
 * afterwards. A statement that writes or has another effect (isRead() false: a background upsert,
 * a NOTIFY) runs on the main pool instead, so it never holds a read connection through its commit
 * (the rate limiter's sync did, and every read behind it waited: about 6–12% more server CPU per
 * read in the bench). Inside a transaction a statement runs through knex on the transaction's
 * connection, where PostgreSQL chooses the plan. The embedded database (PGlite) runs the same text
 * through knex, unnamed, on its one connection: it has no network round trip to save.
 *
 * Rules: the text is a constant (no values, no pieces chosen per request: a variant is another
 * statement with its own name), placeholders are `?` (knex numbers them $1, $2 … in order; a value
 * used twice is bound twice), and every name is defined once. A generic plan does not see the
 * values, so a statement must be shaped to stay on its index whatever they are; its EXPLAIN test
 * checks the generic plan (`plan_cache_mode = force_generic_plan`), not only a custom one.
 */
import type { Knex } from 'knex';

/** Runs the statement with these values (one per `?`, in order) and returns its rows. */
export type PreparedStatement<Row> = ((db: Knex, bindings: readonly unknown[]) => Promise<Row[]>) & {
  readonly statementName: string;
  readonly text: string;
};

const defined = new Map<string, string>();

interface PgConnection {
  query(config: { name: string; text: string; values: readonly unknown[] }): Promise<{ rows: unknown[] }>;
}

/** The pool of a PostgreSQL database's named statements, and the knex instance whose events report them. */
interface PreparedPool {
  pool: Knex;
  events: Knex;
}

const preparedPools = new WeakMap<Knex, PreparedPool>();

/** Named statements run against `main` outside a transaction go to `pool` instead (see above). */
export function usePreparedPool(main: Knex, pool: Knex): void {
  preparedPools.set(main, { pool, events: main });
}

/** The prepared pool of a database's main knex instance (PostgreSQL only), for its metrics. */
export function preparedPoolOf(main: Knex): Knex | undefined {
  return preparedPools.get(main)?.pool;
}

/** Every statement defined so far, by name (tests EXPLAIN each one's generic plan). */
export function preparedStatements(): ReadonlyMap<string, string> {
  return defined;
}

/**
 * Runs a statement on a connection of the prepared pool directly through `pg` (knex's query
 * builder and runner are per-request work a constant statement does not need: the native text is
 * numbered once, at definition) and reports it as a knex `query` event of the main instance.
 */
async function runOnPool(
  target: PreparedPool,
  name: string,
  text: string,
  bindings: readonly unknown[],
): Promise<unknown[]> {
  const client = target.pool.client as {
    acquireConnection(): Promise<PgConnection>;
    releaseConnection(c: PgConnection): Promise<unknown>;
  };
  target.events.emit('query', { method: 'raw', sql: text, bindings, options: { name } });
  const connection = await client.acquireConnection();
  try {
    return (await connection.query({ name, text, values: bindings })).rows;
  } finally {
    await client.releaseConnection(connection);
  }
}

/** Words of a statement that writes, locks, or acts outside its rows; a text without them only reads. */
const EFFECTS =
  /\b(insert|update|delete|merge|truncate|notify|pg_notify|pg_advisory_\w+|nextval|setval|set_config|vacuum|analyze|lock|refresh|call|do)\b|\bfor\s+(no\s+key\s+)?(update|share|key\s+share)\b/i;

/**
 * Whether a statement only reads: a `select` or `with` whose text names no effect (EFFECTS). A read
 * that mentions one of the words (a column called `update`, say) is routed as a write: on the main
 * pool, which is correct, only not planned once.
 */
export function isRead(text: string): boolean {
  return /^\s*(select|with)\b/i.test(text) && !EFFECTS.test(text);
}

export function prepared<Row>(name: string, text: string): PreparedStatement<Row> {
  if (!/^[a-z][a-z0-9_]{0,62}$/.test(name))
    throw new Error(`prepared statement name '${name}' must be lower-case snake case, at most 63 characters`);
  // `?` is always a placeholder here: knex's `??` (identifier) and `\?` (a literal question mark) are not supported.
  if (/\?\?|\\\?/.test(text))
    throw new Error(`prepared statement '${name}' uses ?? or \\?, which prepared() does not support`);
  const earlier = defined.get(name);
  if (earlier !== undefined && earlier !== text)
    throw new Error(`prepared statement '${name}' is defined twice with different SQL`);
  defined.set(name, text);
  let n = 0;
  const native = text.replace(/\?/g, () => `$${++n}`);
  const read = isRead(text);
  const run = async (db: Knex, bindings: readonly unknown[]): Promise<Row[]> => {
    if (bindings.length !== n)
      throw new Error(`prepared statement '${name}' takes ${n} values, got ${bindings.length}`);
    const pool = !read || (db as Knex & { isTransaction?: boolean }).isTransaction ? undefined : preparedPools.get(db);
    if (pool) return (await runOnPool(pool, name, native, bindings)) as Row[];
    const result = (await db.raw(text, bindings as readonly Knex.RawBinding[]).options({ name })) as { rows: Row[] };
    return result.rows;
  };
  return Object.assign(run, { statementName: name, text });
}

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
 * read in the bench); it too is sent straight through `pg`, numbered once, on a connection of that
 * pool (knex's per-statement work, copying and renumbering the text of a write of several CTEs, was
 * 13–18 KB allocated per note created). Inside a transaction a statement runs through knex on the
 * transaction's connection, where PostgreSQL chooses the plan. The embedded database (PGlite) runs
 * the same text through knex, unnamed, on its one connection: it has no network round trip to save.
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
  query(config: {
    name: string;
    text: string;
    values: readonly unknown[];
    rowMode: 'array';
  }): Promise<{ rows: unknown[][]; fields: Array<{ name: string }> }>;
}

/** The pool of a PostgreSQL database's named statements, and the knex instance whose events report them. */
interface PreparedPool {
  pool: Knex;
  events: Knex;
}

const preparedPools = new WeakMap<Knex, PreparedPool>();
/** A PostgreSQL database's main pool, where its statements that write run outside a transaction. */
const mainPools = new WeakMap<Knex, PreparedPool>();

/**
 * Named reads run against `main` outside a transaction go to `pool` instead (see above); named
 * writes outside a transaction go straight through `pg` on `main`'s own pool.
 */
export function usePreparedPool(main: Knex, pool: Knex): void {
  preparedPools.set(main, { pool, events: main });
  mainPools.set(main, { pool: main, events: main });
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
 * Runs a statement on a connection of a pool (the prepared one, or the main one for a write)
 * directly through `pg` (knex's query builder and runner are per-request work a constant statement
 * does not need: the native text is numbered once, at definition) and reports it as knex `query`
 * and `query-response` events of the main instance.
 */
async function runOnPool(
  target: PreparedPool,
  name: string,
  text: string,
  bindings: readonly unknown[],
  rows: RowShape,
): Promise<unknown[]> {
  const client = target.pool.client as {
    acquireConnection(): Promise<PgConnection>;
    releaseConnection(c: PgConnection): Promise<unknown>;
  };
  if (target.events.listenerCount('query') > 0)
    target.events.emit('query', { method: 'raw', sql: text, bindings, options: { name } });
  const connection = await client.acquireConnection();
  try {
    const result = await connection.query({ name, text, values: bindings, rowMode: 'array' });
    const objects = rows.objects(result.fields, result.rows);
    releaseRows(result);
    if (target.events.listenerCount('query-response') > 0)
      target.events.emit('query-response', objects, { method: 'raw', sql: text, bindings, options: { name } });
    return objects;
  } catch (err) {
    throw named(err, name);
  } finally {
    // knex's release is synchronous (it answers a resolved promise).
    void client.releaseConnection(connection);
  }
}

/**
 * A statement's failure, carrying the statement's name (`statement`, logged with the error). Sent
 * straight through `pg`, its message is PostgreSQL's own; knex puts the statement's text before it.
 */
function named(err: unknown, name: string): unknown {
  if (typeof err === 'object' && err !== null && !('statement' in err))
    Object.assign(err as object, { statement: name });
  return err;
}

/**
 * Empties `pg`'s array of rows once they are converted. The arrays are garbage by then, yet under
 * load they outlived the objects built from them (what kept `pg`'s result reachable was not found; at
 * rest nothing does): a sampling heap profile of the bench's members page showed `pg`'s row arrays
 * and their strings as most of what survived young-generation collections, and in 8 s of the
 * members page or the notes list the server promoted up to 46–76 MB to the old generation where,
 * emptied, it promoted 4–7 MB in seven runs of eight. Emptied, they die young with the rest of the
 * request.
 */
function releaseRows(result: { rows: unknown[][] }): void {
  result.rows.length = 0;
}

/**
 * A statement's rows as objects, as `pg` gives them in its default row mode (a key per column in
 * the statement's order; of two columns with one name, the later value under the first one's
 * place), built from the rows `pg` reads as arrays by one object literal compiled per list of
 * columns. `pg`'s own objects start as a copy of a template and take each column by a keyed store:
 * on a read of a page of members that was most of `pg`'s time in the server.
 */
class RowShape {
  private names: string[] = [];
  private build: ((values: unknown[]) => unknown) | undefined;

  objects(fields: ReadonlyArray<{ name: string }>, rows: unknown[][]): unknown[] {
    const build = this.builderFor(fields);
    const out = new Array<unknown>(rows.length);
    for (let i = 0; i < rows.length; i++) out[i] = build(rows[i]!);
    return out;
  }

  private builderFor(fields: ReadonlyArray<{ name: string }>): (values: unknown[]) => unknown {
    if (this.build && fields.length === this.names.length && fields.every((f, i) => f.name === this.names[i]))
      return this.build;
    const names = fields.map((f) => f.name);
    this.names = names;
    this.build = compileRow(names);
    return this.build;
  }
}

function compileRow(names: string[]): (values: unknown[]) => unknown {
  // `__proto__` in an object literal would set the prototype: such a row is built key by key.
  if (names.includes('__proto__')) {
    return (values) => {
      const row: Record<string, unknown> = {};
      names.forEach((name, i) => {
        Object.defineProperty(row, name, { value: values[i], enumerable: true, writable: true, configurable: true });
      });
      return row;
    };
  }
  const first = new Map<string, number>();
  names.forEach((name, i) => {
    if (!first.has(name)) first.set(name, i);
  });
  // Each key once, at its first column, with the value of its last one.
  const last = new Map<string, number>();
  names.forEach((name, i) => {
    last.set(name, i);
  });
  const body = [...first.keys()].map((name) => `${JSON.stringify(name)}: v[${last.get(name)}]`).join(',\n');
  return new Function('v', `return {\n${body}\n};`) as (values: unknown[]) => unknown;
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
  const rows = new RowShape();
  // Not an async function: it answers the query's own promise (one promise less per statement).
  const run = (db: Knex, bindings: readonly unknown[]): Promise<Row[]> => {
    if (bindings.length !== n)
      return Promise.reject(new Error(`prepared statement '${name}' takes ${n} values, got ${bindings.length}`));
    const pool = (db as Knex & { isTransaction?: boolean }).isTransaction
      ? undefined
      : (read ? preparedPools : mainPools).get(db);
    if (pool) return runOnPool(pool, name, native, bindings, rows) as Promise<Row[]>;
    return db
      .raw(text, bindings as readonly Knex.RawBinding[])
      .options({ name })
      .then(
        (result: { rows: Row[] }) => result.rows,
        (err: unknown) => {
          throw named(err, name);
        },
      );
  };
  return Object.assign(run, { statementName: name, text });
}

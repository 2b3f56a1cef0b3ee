/**
 * The one way SQL is written: a tagged template that binds each value where it is written.
 *
 *   sql`select m.id from members m where m.user_id = ${ownerId} and ${visible}`
 *
 * A `${value}` becomes a placeholder with that value bound at its position; a `${fragment}` (another
 * sql`…`, sql.id(), sql.join()) is spliced in with its own values, in place. So values never travel
 * apart from the text: moving a fragment moves its values, and no array of bindings is ever ordered
 * by hand. Identifiers enter only through sql.id(), which accepts plain lower-case names.
 *
 * knex stays underneath as the connection, pool, transaction and migration layer: `toKnex()` gives
 * the text with `?` placeholders (a literal `?` of the text escaped) for `knex.raw`, and
 * `toNative()` the text with `$1, $2 …` (each value once per position) that PostgreSQL prepares.
 */
import type { Knex } from 'knex';

const FRAGMENT = Symbol('sql fragment');

/** A piece of SQL and the values bound in it, in order. Built only by the `sql` tag and its helpers. */
export interface Sql {
  readonly [FRAGMENT]: true;
  /** The static text around the values: `strings.length === values.length + 1`. */
  readonly strings: readonly string[];
  readonly values: readonly unknown[];
  /**
   * Marks the fragment and every fragment built around it carries (sql.mark): what a statement's
   * pieces need from elsewhere in it, such as the columns of a CTE, known without reading its text.
   */
  readonly marks: ReadonlySet<string>;
}

const NO_MARKS: ReadonlySet<string> = new Set();

function make(strings: readonly string[], values: readonly unknown[], marks: ReadonlySet<string> = NO_MARKS): Sql {
  return { [FRAGMENT]: true, strings, values, marks };
}

export function isSql(value: unknown): value is Sql {
  return typeof value === 'object' && value !== null && (value as { [FRAGMENT]?: true })[FRAGMENT] === true;
}

/** The tag: `sql` followed by a template. Nested fragments are flattened, so `values` holds plain values only. */
export function sql(template: TemplateStringsArray, ...parts: unknown[]): Sql {
  const strings: string[] = [template[0]!];
  const values: unknown[] = [];
  let marks = NO_MARKS;
  parts.forEach((part, i) => {
    const after = template[i + 1]!;
    if (isSql(part)) {
      if (part.marks.size > 0) marks = marks.size === 0 ? part.marks : new Set([...marks, ...part.marks]);
      strings[strings.length - 1] += part.strings[0]!;
      for (let k = 0; k < part.values.length; k++) {
        values.push(part.values[k]);
        strings.push(part.strings[k + 1]!);
      }
      strings[strings.length - 1] += after;
    } else {
      values.push(part);
      strings.push(after);
    }
  });
  return make(strings, values, marks);
}

const IDENTIFIER = /^[a-z_][a-z0-9_]*(\.[a-z_][a-z0-9_]*)?$/;

/** An identifier (`members`, `m.id`): checked, never a value. Throws for anything but plain lower-case names. */
sql.id = (name: string): Sql => {
  if (!IDENTIFIER.test(name)) throw new Error(`sql.id: not a plain identifier: ${JSON.stringify(name)}`);
  return make([name], []);
};

/**
 * Constant text chosen from a closed set in code (a keyword, a sort direction, a constant of the
 * schema such as a content kind): `allowed` lists every text it may be, so no input reaches it.
 */
sql.constant = <T extends string>(text: T, allowed: readonly T[]): Sql => {
  if (!allowed.includes(text)) throw new Error(`sql.constant: ${JSON.stringify(text)} is not one of the allowed texts`);
  return make([text], []);
};

/** Fragments joined with `separator` (text, such as `, ` or ` and `). */
sql.join = (fragments: readonly Sql[], separator: string): Sql => {
  if (fragments.length === 0) return make([''], []);
  let out = fragments[0]!;
  for (const f of fragments.slice(1)) out = sql`${out}${make([separator], [])}${f}`;
  return out;
};

/** The fragment with `mark` added to its marks (see Sql.marks). */
sql.mark = (fragment: Sql, mark: string): Sql =>
  make(fragment.strings, fragment.values, new Set([...fragment.marks, mark]));

/** The empty fragment (an optional clause left out). */
sql.empty = make([''], []);

/** The fragment's text with `?` placeholders for knex.raw (a literal `?` escaped as `\?`), and its values. */
export function toKnex(fragment: Sql): { sql: string; bindings: unknown[] } {
  const escapeMarks = (s: string) => s.replace(/\?/g, '\\?');
  let text = escapeMarks(fragment.strings[0]!);
  for (let i = 0; i < fragment.values.length; i++) text += `?${escapeMarks(fragment.strings[i + 1]!)}`;
  return { sql: text, bindings: [...fragment.values] };
}

/** The fragment's text with `$1, $2 …` placeholders, as PostgreSQL prepares it, and its values. */
export function toNative(fragment: Sql): { text: string; values: unknown[] } {
  let text = fragment.strings[0]!;
  for (let i = 0; i < fragment.values.length; i++) text += `$${i + 1}${fragment.strings[i + 1]!}`;
  return { text, values: [...fragment.values] };
}

/** Runs a fragment on a knex connection or transaction and returns its rows. */
export async function query<Row>(db: Knex, fragment: Sql): Promise<Row[]> {
  const { sql: text, bindings } = toKnex(fragment);
  const result = (await db.raw(text, bindings as Knex.RawBinding[])) as { rows: Row[] };
  return result.rows;
}

/**
 * Runs a script of DDL statements one by one. PGlite executes knex.raw through the extended
 * protocol, which takes a single statement, so scripts are split at semicolons that end a line.
 */
export async function execScript(knex: Knex, script: string): Promise<void> {
  const statements = script
    .split(/;\s*$/m)
    .map((s) => s.replace(/^\s*--.*$/gm, '').trim())
    .filter((s) => s.length > 0);
  for (const statement of statements) await knex.raw(statement);
}

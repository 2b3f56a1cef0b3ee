/**
 * Named statements. A statement a repo runs is defined once, here in the registry: its name, its
 * area, how its SQL is built from its parameters (the `sql` tag, server/db/sql.ts), and one example
 * of each shape its text can take (`variants`: with or without a cursor, an owner's or a friend's
 * access …). Each distinct text runs as its own named prepared statement (server/db/prepared.ts),
 * `<name>` when there is one and `<name>_<n>` in the order of the variants otherwise, and
 * `npm run gen` writes every area's statements, formatted, to generated/sql/<area>.sql, so a
 * change to a query shows in review as a change of SQL. A text its variants do not list is an
 * error, not a new statement: what is committed is everything the statement can run.
 */
import type { Knex } from 'knex';
import { type PreparedStatement, prepared } from './prepared.ts';
import { type Sql, toKnex, toNative } from './sql.ts';

/** A value for the variants' example parameters where an id is needed (the text never depends on it). */
export const EXAMPLE_UUID = '00000000-0000-4000-8000-000000000000';

export interface StatementDefinition<P> {
  /** Lower snake case: the prepared statement's name (with `_<n>` per variant when it has several texts). */
  readonly name: string;
  /** The file of generated/sql/ it is written to: the area whose repo owns it. */
  readonly area: string;
  readonly build: (params: P) => Sql;
  /** One example of each shape of the text, by a label saying what makes it differ. */
  readonly variants: Readonly<Record<string, P>>;
  /**
   * Keep the prepared statement and the values of up to this many distinct parameters, the most
   * recently run, so running one of them again skips building and matching its text (a friend
   * read's statement, built from the access predicates, costs tens of microseconds to build). For
   * statements read again with the same parameters (a friend polling a front). `build` is a pure
   * function of its parameters, so equal parameters give the same statement; parameters that are
   * not plain data (paramsKey) are built every time.
   */
  readonly cache?: number;
}

/** A statement's texts, as committed: one per distinct text, with the labels of the variants that give it. */
export interface StatementTexts {
  name: string;
  area: string;
  texts: Array<{ preparedName: string; labels: string[]; text: string }>;
}

/** One distinct text: the static pieces between its values (Sql.strings) and its prepared statement. */
interface Shape {
  strings: readonly string[];
  run: PreparedStatement<unknown>;
}

interface Entry {
  definition: StatementDefinition<unknown>;
  /** Built on first use: each distinct text's shape, and the texts as committed. */
  compiled?: { shapes: Shape[]; texts: StatementTexts };
}

/** A run found: the prepared statement of the text and the values to bind. */
interface Found {
  run: PreparedStatement<unknown>;
  values: readonly unknown[];
}

/**
 * The parameters as a key: equal keys for equal plain data (strings, finite numbers, booleans,
 * null, undefined, arrays, objects of the Object prototype or none), in the order their
 * properties were written; undefined for anything else (a Set, a Date, a class's instance), whose
 * statement is then built every time.
 */
export function paramsKey(value: unknown): string | undefined {
  switch (typeof value) {
    case 'string':
      return JSON.stringify(value);
    case 'number':
      return Number.isFinite(value) ? String(value) : undefined;
    case 'boolean':
      return value ? 't' : 'f';
    case 'undefined':
      return 'u';
    case 'object': {
      if (value === null) return 'n';
      if (Array.isArray(value)) {
        let out = '[';
        for (const item of value) {
          const key = paramsKey(item);
          if (key === undefined) return undefined;
          out += `${key},`;
        }
        return `${out}]`;
      }
      const proto = Object.getPrototypeOf(value);
      if (proto !== Object.prototype && proto !== null) return undefined;
      let out = '{';
      for (const name in value) {
        const key = paramsKey((value as Record<string, unknown>)[name]);
        if (key === undefined) return undefined;
        out += `${JSON.stringify(name)}:${key},`;
      }
      return `${out}}`;
    }
    default:
      return undefined;
  }
}

/**
 * Whether a fragment has this shape: the same pieces of text between its values. Two fragments
 * with the same pieces have the same text, so this finds a request's prepared statement without
 * joining and hashing its whole text on every run.
 */
function sameStrings(a: readonly string[], b: readonly string[]): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

const registry = new Map<string, Entry>();

function compile(entry: Entry): NonNullable<Entry['compiled']> {
  if (entry.compiled) return entry.compiled;
  const { name, area, build, variants } = entry.definition;
  const distinct = new Map<string, { labels: string[]; native: string; strings: readonly string[] }>();
  for (const [label, params] of Object.entries(variants)) {
    const fragment = build(params);
    const { sql: text } = toKnex(fragment);
    const seen = distinct.get(text);
    if (seen) seen.labels.push(label);
    else distinct.set(text, { labels: [label], native: toNative(fragment).text, strings: fragment.strings });
  }
  if (distinct.size === 0) throw new Error(`statement ${name}: no variants`);
  const shapes: Shape[] = [];
  const texts: StatementTexts = { name, area, texts: [] };
  let n = 0;
  for (const [text, { labels, native, strings }] of distinct) {
    const preparedName = distinct.size === 1 ? name : `${name}_${++n}`;
    shapes.push({ strings, run: prepared(preparedName, text) });
    texts.texts.push({ preparedName, labels, text: native });
  }
  entry.compiled = { shapes, texts };
  return entry.compiled;
}

export type Statement<P, Row> = ((db: Knex, params: P) => Promise<Row[]>) & {
  readonly definition: StatementDefinition<P>;
  /** The fragment the parameters give, not run (plan tests EXPLAIN it). */
  readonly build: (params: P) => Sql;
};

/**
 * Defines a statement (at module load, once per name). Running it builds the text from the
 * parameters, finds the prepared statement of that text among its variants' and runs it with the
 * fragment's values; on PostgreSQL outside a transaction it goes to the prepared pool with the
 * generic plan (prepared.ts).
 */
export function statement<P, Row>(definition: StatementDefinition<P>): Statement<P, Row> {
  if (!/^[a-z][a-z0-9_]{0,55}$/.test(definition.name))
    throw new Error(`statement name '${definition.name}' must be lower-case snake case, at most 56 characters`);
  if (!/^[a-zA-Z][a-zA-Z0-9]*$/.test(definition.area))
    throw new Error(`statement area '${definition.area}' is not a name`);
  const existing = registry.get(definition.name);
  if (existing && existing.definition !== definition) throw new Error(`statement ${definition.name} is defined twice`);
  const entry: Entry = existing ?? { definition: definition as StatementDefinition<unknown> };
  registry.set(definition.name, entry);
  const find = (params: P): Found => {
    const fragment = definition.build(params);
    const shape = compile(entry).shapes.find((s) => sameStrings(s.strings, fragment.strings));
    if (!shape)
      throw new Error(
        `statement ${definition.name}: this text is none of its variants' (add the shape to its variants):\n${toNative(fragment).text}`,
      );
    return { run: shape.run, values: fragment.values };
  };
  const capacity = definition.cache ?? 0;
  // The least recently run first: a Map keeps insertion order, and a hit moves to the end.
  const cache = new Map<string, Found>();
  const cached = (params: P): Found => {
    const key = paramsKey(params);
    if (key === undefined) return find(params);
    const hit = cache.get(key);
    if (hit) {
      cache.delete(key);
      cache.set(key, hit);
      return hit;
    }
    const found = find(params);
    cache.set(key, found);
    if (cache.size > capacity) cache.delete(cache.keys().next().value!);
    return found;
  };
  // Not an async function: it answers the prepared statement's own promise (one promise less per
  // statement), and a failure to build or match the text as a rejected one.
  const run = (db: Knex, params: P): Promise<Row[]> => {
    try {
      if (capacity === 0) {
        const found = find(params);
        return found.run(db, found.values) as Promise<Row[]>;
      }
      // A copy: what runs it may keep or change its array, never the cached one.
      const found = cached(params);
      return found.run(db, [...found.values]) as Promise<Row[]>;
    } catch (err) {
      return Promise.reject(err);
    }
  };
  return Object.assign(run, { definition, build: definition.build });
}

/** Every statement defined so far, with its texts: what `npm run gen` writes to generated/sql/. */
export function registeredStatements(): StatementTexts[] {
  return [...registry.values()].map((e) => compile(e).texts).sort((a, b) => a.name.localeCompare(b.name));
}

/**
 * The rules of the SQL seam (docs/data-access.md), checked over server/ by `npm run lint:sql`:
 *
 *   bindings-array       no `bindings:` array assembled by hand outside server/db/ (values are bound
 *                        where they are written, with the sql tag);
 *   sql-interpolation    no template literal with `${…}` given to knex's raw SQL methods outside
 *                        server/db/ (values and identifiers go through the sql tag);
 *   sql-in-service       a feature's files other than its repos, handlers and index run no SQL: no
 *                        value import of knex or db/sql.ts, no `db(…)` / `ctx.db(…)` query builder;
 *   db-transaction       features open transactions only through inTransaction(ctx, tx => …), never
 *                        `db.transaction(`;
 *   index-exports-repo   an area's index.ts exports service functions and types, never a repo;
 *   area-cycle           no cycle between areas (features/<area>/ importing each other, through any file);
 *   unnamed-sql          outside server/db/, SQL runs only as named statements (statement(), built with
 *                        the sql tag), so generated/sql/ holds every statement: no knex query builder,
 *                        no knex.raw, no prepared() of its own.
 *
 *   tsx scripts/sql-rules.ts   check: any violation fails, with what it is
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';

const root = resolve(import.meta.dirname, '..');

function files(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    return statSync(path).isDirectory() ? files(path) : path.endsWith('.ts') ? [path] : [];
  });
}

const rel = (path: string) => relative(root, path).split('\\').join('/');

export interface Source {
  /** Relative to the project's root, with `/` (`server/features/members/repo.ts`). */
  path: string;
  text: string;
}

/** The server's source files. */
export function serverSources(): Source[] {
  return files(join(root, 'server')).map((path) => ({ path: rel(path), text: readFileSync(path, 'utf8') }));
}

/** `rule: file` (and what, where a file can break a rule several ways), sorted. */
export function violations(sources: readonly Source[] = serverSources()): string[] {
  const found = new Set<string>();
  const infrastructure = (p: string) => p.startsWith('server/db/');
  for (const { path, text } of sources) {
    if (!infrastructure(path) && /\bbindings\s*:/.test(text)) found.add(`bindings-array: ${path}`);
    if (
      !infrastructure(path) &&
      /\.(raw|whereRaw|orWhereRaw|andWhereRaw|havingRaw|joinRaw|orderByRaw|fromRaw)\(\s*`[^`]*\$\{/s.test(text)
    )
      found.add(`sql-interpolation: ${path}`);
    if (
      !infrastructure(path) &&
      (/\b(?:ctx|tx|trx|db|knex|this\.db)(?:\.db)?\(\s*['"`]/.test(text) ||
        /(?<!express)\.raw\s*(?:<[\s\S]*?>)?\s*\(/.test(text) ||
        /\bprepared(?:<[^>]*>)?\(/.test(text))
    )
      found.add(`unnamed-sql: ${path}`);
    const feature = /^server\/features\/([^/]+)\/(.+)$/.exec(path);
    if (feature) {
      const [, , file] = feature as unknown as [string, string, string];
      const sqlAllowed =
        file === 'repo.ts' || file.startsWith('repo/') || file === 'handlers.ts' || file === 'index.ts';
      if (!sqlAllowed) {
        if (/^import (?!type)[^;]*from 'knex';/m.test(text)) found.add(`sql-in-service: ${path} (imports knex)`);
        if (/^import (?!type)[^;]*from '[./]+\/db\/sql\.ts';/m.test(text))
          found.add(`sql-in-service: ${path} (imports db/sql.ts)`);
        if (/\b(?:ctx|tx|trx|db|knex)(?:\.db)?\(\s*['"`]/.test(text))
          found.add(`sql-in-service: ${path} (query builder)`);
        if (/\.raw\(/.test(text)) found.add(`sql-in-service: ${path} (raw SQL)`);
      }
      if (/\.transaction\(/.test(text)) found.add(`db-transaction: ${path}`);
      if (file === 'index.ts' && (/from '\.\/repo(?:\/[^']*)?\.ts'/.test(text) || /\b\w+Repo\b/.test(text)))
        found.add(`index-exports-repo: ${path}`);
    }
  }
  for (const cycle of areaCycles(sources)) found.add(`area-cycle: ${cycle.join(' ↔ ')}`);
  return [...found].sort();
}

/** The areas of features/ that reach each other through imports (each strongly connected set of two or more). */
function areaCycles(sources: readonly Source[]): string[][] {
  const edges = new Map<string, Set<string>>();
  for (const { path, text } of sources) {
    const from = /^server\/features\/([^/]+)\//.exec(path)?.[1];
    if (!from) continue;
    for (const m of text.matchAll(/from '(\.\.?\/[^']+)'/g)) {
      const target = rel(resolve(root, path, '..', m[1]!));
      const to = /^server\/features\/([^/]+)\//.exec(target)?.[1];
      if (to && to !== from) {
        if (!edges.has(from)) edges.set(from, new Set());
        edges.get(from)!.add(to);
      }
    }
  }
  // Tarjan's strongly connected components.
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const components: string[][] = [];
  let counter = 0;
  const visit = (v: string) => {
    index.set(v, counter);
    low.set(v, counter++);
    stack.push(v);
    onStack.add(v);
    for (const w of edges.get(v) ?? []) {
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!));
    }
    if (low.get(v) === index.get(v)) {
      const component: string[] = [];
      let w: string;
      do {
        w = stack.pop()!;
        onStack.delete(w);
        component.push(w);
      } while (w !== v);
      if (component.length > 1) components.push(component.sort());
    }
  };
  for (const v of [...edges.keys()].sort()) if (!index.has(v)) visit(v);
  return components;
}

if (process.argv[1] && resolve(process.argv[1]) === resolve(import.meta.filename)) {
  const found = violations();
  for (const v of found) console.error(`violation of the SQL seam (docs/data-access.md): ${v}`);
  if (found.length > 0) process.exitCode = 1;
  else console.log('SQL seam: no violation.');
}

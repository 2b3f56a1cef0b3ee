/**
 * Semantic diff of two JSON documents (two bundles of the contract): key order is ignored, array
 * order is not. Lists every difference as a JSON pointer, so a contract change can be checked
 * for being exactly what was meant (and scripts/gen.ts --check says what is stale, not only that
 * something is).
 *
 *   tsx scripts/spec-diff.ts old.json new.json                  exit 1 and list differences
 *   tsx scripts/spec-diff.ts old.json new.json --deref          compare with every local $ref
 *                                                               replaced by its target (inline
 *                                                               vs. $ref to the same thing is equal)
 *   tsx scripts/spec-diff.ts old.json new.json --ignore-examples  leave out `example`/`examples`
 *                                                               keywords of schemas (and of
 *                                                               parameters and headers)
 */
import { readFileSync } from 'node:fs';
import { pathToFileURL } from 'node:url';

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

const isObject = (v: Json | undefined): v is { [key: string]: Json } =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

const escapePointer = (key: string): string => key.replace(/~/g, '~0').replace(/\//g, '~1');

/** Every difference between a and b as `pointer: what`. */
export function diffJson(a: Json | undefined, b: Json | undefined, at = ''): string[] {
  if (isObject(a) && isObject(b)) {
    const out: string[] = [];
    for (const key of new Set([...Object.keys(a), ...Object.keys(b)])) {
      const here = `${at}/${escapePointer(key)}`;
      if (!(key in b)) out.push(`${here}: only in the first`);
      else if (!(key in a)) out.push(`${here}: only in the second`);
      else out.push(...diffJson(a[key], b[key], here));
    }
    return out;
  }
  if (Array.isArray(a) && Array.isArray(b)) {
    const out: string[] = [];
    for (let i = 0; i < Math.max(a.length, b.length); i++) {
      if (i >= b.length) out.push(`${at}/${i}: only in the first`);
      else if (i >= a.length) out.push(`${at}/${i}: only in the second`);
      else out.push(...diffJson(a[i], b[i], `${at}/${i}`));
    }
    return out;
  }
  if (a === b) return [];
  const show = (v: Json | undefined): string => {
    const s = JSON.stringify(v) ?? 'undefined';
    return s.length > 80 ? `${s.slice(0, 77)}...` : s;
  };
  return [`${at || '/'}: ${show(a)} ≠ ${show(b)}`];
}

/** A copy of doc with each local `$ref` replaced by (a dereferenced copy of) its target. */
export function derefLocal(doc: Json): Json {
  const target = (ref: string): Json => {
    let node: Json | undefined = doc;
    for (const part of ref.slice(2).split('/')) {
      const key = decodeURIComponent(part).replace(/~1/g, '/').replace(/~0/g, '~');
      node = isObject(node) ? node[key] : Array.isArray(node) ? node[Number(key)] : undefined;
    }
    if (node === undefined) throw new Error(`unresolved $ref ${ref}`);
    return node;
  };
  const walk = (node: Json, seen: string[]): Json => {
    if (Array.isArray(node)) return node.map((v) => walk(v, seen));
    if (!isObject(node)) return node;
    const ref = node.$ref;
    if (typeof ref === 'string' && ref.startsWith('#/')) {
      if (seen.includes(ref)) return { $ref: ref }; // recursive schema: keep the cycle as a ref
      const { $ref: _, ...siblings } = node;
      const resolved = walk(target(ref), [...seen, ref]);
      // OpenAPI 3.1 allows siblings next to $ref (description, summary); they win.
      return isObject(resolved) ? { ...resolved, ...(walk(siblings, seen) as object) } : resolved;
    }
    return Object.fromEntries(Object.entries(node).map(([k, v]) => [k, walk(v, seen)]));
  };
  return walk(doc, []);
}

/**
 * A copy of doc without the `example` keyword and array-valued `examples` (JSON Schema's, as
 * opposed to OpenAPI's maps of named Example Objects), leaving example payloads (`value`)
 * untouched: what adding examples to schemas may change and nothing else.
 */
export function withoutSchemaExamples(doc: Json): Json {
  const walk = (node: Json): Json => {
    if (Array.isArray(node)) return node.map(walk);
    if (!isObject(node)) return node;
    const kept = Object.entries(node).filter(([k, v]) => k !== 'example' && !(k === 'examples' && Array.isArray(v)));
    return Object.fromEntries(kept.map(([k, v]) => [k, k === 'value' ? v : walk(v)]));
  };
  return walk(doc);
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const [first, second] = process.argv.slice(2).filter((a) => !a.startsWith('--'));
  if (!first || !second) {
    console.error('usage: tsx scripts/spec-diff.ts <first.json> <second.json> [--deref] [--ignore-examples]');
    process.exit(2);
  }
  const load = (file: string): Json => {
    let doc = JSON.parse(readFileSync(file, 'utf8')) as Json;
    if (process.argv.includes('--deref')) doc = derefLocal(doc);
    if (process.argv.includes('--ignore-examples')) doc = withoutSchemaExamples(doc);
    return doc;
  };
  const differences = diffJson(load(first), load(second));
  for (const line of differences) console.log(line);
  console.log(differences.length === 0 ? 'no semantic difference' : `${differences.length} difference(s)`);
  process.exit(differences.length === 0 ? 0 : 1);
}

/**
 * The multi-file contract under openapi/ (see docs/development.md, "Editing the contract"), checked against its
 * bundle. `redocly bundle` names each component after the key that defines it and drops whatever
 * nothing references, without failing, so a few mistakes would otherwise pass silently:
 *
 * - a component defined in two files of its kind (the bundler keeps one as `Name`, renames the
 *   other to `Name-2`, and openapi-typescript then types it as `components['schemas']['Name-2']`);
 * - a component or path item that nothing references (it is simply missing from the bundle; the
 *   lint's no-unused-components sees only the root document's components);
 * - a path item written in the paths file of another tag, or defined in the root document.
 *
 * It also puts each group of components in the order of the files that define them (files in
 * name order, keys in the order written) instead of the order the bundler met their references,
 * so generated/ changes only where the contract does.
 */
import { readdirSync, readFileSync, existsSync } from 'node:fs';
import { join, relative } from 'node:path';

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
type JsonObject = { [key: string]: Json };
export type Bundle = JsonObject & {
  paths: Record<string, Record<string, Json>>;
  components: Record<string, JsonObject>;
};

/** Order of the component groups in the bundle (the single-file contract's order: schemas last). */
const KIND_ORDER = [
  'securitySchemes',
  'parameters',
  'headers',
  'responses',
  'examples',
  'requestBodies',
  'links',
  'callbacks',
  'pathItems',
  'schemas',
];
const METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'];

/**
 * The top-level keys of a YAML mapping file, in order. The contract's files are block mappings
 * with their keys at column 0, so a line scan is enough and needs no YAML parser.
 */
function topLevelKeys(file: string): string[] {
  const keys: string[] = [];
  for (const line of readFileSync(file, 'utf8').split('\n')) {
    const m = /^(?:'([^']+)'|"([^"]+)"|([^\s#'"][^:]*)):(?:\s|$)/.exec(line);
    if (m) keys.push((m[1] ?? m[2] ?? m[3])!);
  }
  return keys;
}

/** The files that define components of one kind: components/<kind>.yaml, then components/<kind>/*.yaml. */
function componentFiles(openapiDir: string, kind: string): string[] {
  const single = join(openapiDir, 'components', `${kind}.yaml`);
  const dir = join(openapiDir, 'components', kind);
  const files = existsSync(single) ? [single] : [];
  if (existsSync(dir)) {
    files.push(
      ...readdirSync(dir)
        .filter((f) => f.endsWith('.yaml'))
        .sort()
        .map((f) => join(dir, f)),
    );
  }
  return files;
}

/** The paths file a tag's path items belong in: `Custom fields` → paths/custom-fields.yaml. */
const pathsFileOf = (tag: string): string => `paths/${tag.toLowerCase().replace(/\s+/g, '-')}.yaml`;

/**
 * Checks the bundle against the files under openapiDir (components and path items) and orders its
 * components as the files define them.
 * Returns the problems found (empty when the layout holds); the bundle is reordered in place.
 */
export function checkLayout(bundle: Bundle, openapiDir: string): string[] {
  const problems: string[] = [];
  const rel = (file: string): string => relative(join(openapiDir, '..'), file);
  const componentDirEntries = readdirSync(join(openapiDir, 'components')).map((f) => f.replace(/\.yaml$/, ''));
  const kinds = [...new Set([...KIND_ORDER, ...Object.keys(bundle.components), ...componentDirEntries])];
  const ordered: Record<string, JsonObject> = {};
  for (const kind of kinds) {
    const files = componentFiles(openapiDir, kind);
    const group = bundle.components[kind];
    if (files.length === 0) {
      // Written in the root document itself (the security schemes): kept as they are.
      if (group) ordered[kind] = group;
      continue;
    }
    const definedIn = new Map<string, string>();
    for (const file of files) {
      for (const name of topLevelKeys(file)) {
        const first = definedIn.get(name);
        if (first)
          problems.push(
            `components.${kind}.${name} is defined in both ${rel(first)} and ${rel(file)}; a name must be unique across its kind`,
          );
        else definedIn.set(name, file);
      }
    }
    for (const [name, file] of definedIn) {
      if (!group || !(name in group))
        problems.push(
          `components.${kind}.${name} (${rel(file)}) is not referenced from any operation; remove it or use it`,
        );
    }
    if (!group) continue;
    for (const name of Object.keys(group)) {
      if (!definedIn.has(name)) {
        problems.push(
          `the bundle has components.${kind}.${name}, which no file under openapi/components/ defines with that key ` +
            '(renamed by the bundler for a clash, or written in the root document; define it in its components file)',
        );
      }
    }
    const names = [...definedIn.keys()].filter((n) => n in group);
    ordered[kind] = Object.fromEntries(
      [...names, ...Object.keys(group).filter((n) => !definedIn.has(n))].map((n) => [n, group[n]!]),
    );
  }
  bundle.components = ordered;

  // Path items: each defined once, in the paths file of its operations' tag, and listed in the root.
  const pathsDir = join(openapiDir, 'paths');
  const pathFileOf = new Map<string, string>();
  for (const f of readdirSync(pathsDir)
    .filter((f) => f.endsWith('.yaml'))
    .sort()) {
    for (const path of topLevelKeys(join(pathsDir, f)).filter((k) => k.startsWith('/'))) {
      const first = pathFileOf.get(path);
      if (first) problems.push(`path ${path} is defined in both ${first} and paths/${f}`);
      else pathFileOf.set(path, `paths/${f}`);
    }
  }
  for (const [path, file] of pathFileOf) {
    if (!(path in bundle.paths))
      problems.push(`path ${path} (openapi/${file}) is not listed under paths in openapi/openapi.yaml`);
  }
  for (const [path, item] of Object.entries(bundle.paths)) {
    const file = pathFileOf.get(path);
    if (!file) {
      problems.push(
        `path ${path} is not defined in a file under openapi/paths/ (write it in the paths file of its tag)`,
      );
      continue;
    }
    const tags = new Set(
      METHODS.flatMap((m) => {
        const op = item[m] as { tags?: string[] } | undefined;
        return op?.tags?.slice(0, 1) ?? [];
      }),
    );
    for (const tag of tags) {
      if (pathsFileOf(tag) !== file)
        problems.push(
          `path ${path} has an operation tagged ${tag}, so it belongs in openapi/${pathsFileOf(tag)}, not openapi/${file}`,
        );
    }
  }
  return problems;
}

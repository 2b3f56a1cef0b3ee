/**
 * Text PostgreSQL cannot store: U+0000 (in text and in jsonb) and unpaired UTF-16 surrogates (no
 * UTF-8 form). An export file may hold them anywhere; the API's own bodies refuse them with a 400,
 * but one bad character must not cost a whole import, so they are replaced with U+FFFD and each
 * entity that held one gets a warning.
 */
import type { ImportBundle, ImportWarning, SourceRef } from './bundle.ts';

// biome-ignore lint/suspicious/noControlCharactersInRegex: NUL is the character being replaced
const UNSTORABLE = /\u0000|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g;

function clean(value: unknown, hit: { found: boolean }): unknown {
  if (typeof value === 'string') {
    const out = value.replace(UNSTORABLE, '\uFFFD');
    if (out !== value) hit.found = true;
    return out;
  }
  if (Array.isArray(value)) return value.map((v) => clean(v, hit));
  if (value !== null && typeof value === 'object')
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [clean(k, hit) as string, clean(v, hit)]));
  return value;
}

/** The bundle with every string storable, and a warning per entity that needed it. */
export function storableBundle(bundle: ImportBundle): ImportBundle {
  const warnings: ImportWarning[] = [];
  const each = <E extends { ref: SourceRef }>(list: E[]): E[] =>
    list.map((entity) => {
      const hit = { found: false };
      const out = clean(entity, hit) as E;
      if (hit.found)
        warnings.push({
          collection: out.ref.collection,
          sourceId: out.ref.id,
          message: 'held characters that cannot be stored (NUL or an unpaired surrogate): replaced with U+FFFD',
        });
      return out;
    });
  const rest = { found: false };
  const result: ImportBundle = {
    source: bundle.source,
    system: clean(bundle.system, rest) as ImportBundle['system'],
    buckets: each(bundle.buckets),
    fields: each(bundle.fields),
    members: each(bundle.members),
    groups: each(bundle.groups),
    sessions: each(bundle.sessions),
    notes: each(bundle.notes),
    defaults: clean(bundle.defaults, rest) as ImportBundle['defaults'],
    tally: clean(bundle.tally, rest) as ImportBundle['tally'],
    warnings: [...(clean(bundle.warnings, rest) as ImportWarning[]), ...warnings],
  };
  if (rest.found)
    result.warnings.push({
      collection: 'file',
      sourceId: null,
      message: 'the file held characters that cannot be stored (NUL or an unpaired surrogate): replaced with U+FFFD',
    });
  return result;
}

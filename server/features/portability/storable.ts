/**
 * Text PostgreSQL cannot store: U+0000 (in text and in jsonb) and unpaired UTF-16 surrogates (no
 * UTF-8 form). An export file may hold them anywhere; the API's own bodies refuse them with a 400,
 * but one bad character must not cost a whole import, so they are replaced with U+FFFD and each
 * entity that held one gets a warning.
 */
import type { ImportBundle, ImportWarning, SourceRef, Streamed } from './bundle.ts';

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

/** The bundle with every string storable, and a warning per entity that needed it (streams cleaned as they are read). */
export function storableBundle(bundle: ImportBundle): ImportBundle {
  const { warnings } = bundle;
  const one = <E extends { ref: SourceRef }>(entity: E): E => {
    const hit = { found: false };
    const out = clean(entity, hit) as E;
    if (hit.found)
      warnings.push({
        collection: out.ref.collection,
        sourceId: out.ref.id,
        message: 'held characters that cannot be stored (NUL or an unpaired surrogate): replaced with U+FFFD',
      });
    return out;
  };
  const stream = <E extends { ref: SourceRef }>(s: Streamed<E>): Streamed<E> => ({
    total: s.total,
    *read() {
      for (const entity of s.read()) yield one(entity);
    },
  });
  const rest = { found: false };
  const result: ImportBundle = {
    source: bundle.source,
    system: clean(bundle.system, rest) as ImportBundle['system'],
    buckets: bundle.buckets.map(one),
    fields: bundle.fields.map(one),
    members: bundle.members.map(one),
    groups: bundle.groups.map(one),
    sessions: stream(bundle.sessions),
    notes: stream(bundle.notes),
    chat: {
      categories: bundle.chat.categories.map(one),
      channels: bundle.chat.channels.map(one),
      messages: stream(bundle.chat.messages),
    },
    defaults: clean(bundle.defaults, rest) as ImportBundle['defaults'],
    // Collection names and ids in the tally and warnings are cleaned when the outcome is stored (storableOutcome).
    tally: bundle.tally,
    warnings,
  };
  if (rest.found) warnings.push(FILE_WARNING);
  return result;
}

const FILE_WARNING: ImportWarning = {
  collection: 'file',
  sourceId: null,
  message: 'the file held characters that cannot be stored (NUL or an unpaired surrogate): replaced with U+FFFD',
};

/** An import's report and warnings with every string storable (collection names and source ids come from the file). */
export function storableOutcome<R>(report: R, warnings: ImportWarning[]): { report: R; warnings: ImportWarning[] } {
  const hit = { found: false };
  const out = { report: clean(report, hit) as R, warnings: clean(warnings, hit) as ImportWarning[] };
  if (
    hit.found &&
    !out.warnings.some((w) => w.collection === FILE_WARNING.collection && w.message === FILE_WARNING.message)
  )
    out.warnings.push(FILE_WARNING);
  return out;
}

/**
 * What every answer must satisfy, judged by the fuzzer alone: no 5xx; a status the operation
 * declares; for invalid input, no 2xx; a body that matches the declared schema of that status
 * (ajv) and a declared media type; every error is the `{ code, message }` envelope and shows no
 * stack trace, SQL, database error text or file path.
 */
import { responseFor, type Contract, type Operation } from './contract.ts';
import type { FuzzResponse } from './http.ts';
import { isJsonType } from './request.ts';

export type CheckName =
  | 'server-error'
  | 'undeclared-status'
  | 'invalid-accepted'
  | 'schema-mismatch'
  | 'media-type'
  | 'not-json'
  | 'body-on-empty-status'
  | 'error-envelope'
  | 'leak';

export interface CheckFailure {
  check: CheckName;
  detail: string;
}

/** Internals an error message must never show. */
const LEAKS: Array<[RegExp, string]> = [
  [/\n\s+at\s|\bat\s+[\w.<>$]+\s+\([^)]*:\d+:\d+\)|\bat\s+(file:|node:|\/)[^\s]*:\d+/, 'a stack trace'],
  [
    /\b(file:\/\/|node_modules\/|\/(?:work|home|usr|var|opt|srv|app|root)\/[\w.-]+\/)|\b[\w-]+\.(?:ts|js|mjs|cjs):\d+/,
    'a file path',
  ],
  [
    /syntax error at or near|violates (?:foreign key|unique|check|not-null) constraint|duplicate key value|invalid input syntax for type|relation "[^"]+" does not exist|column "[^"]+" (?:of relation|does not exist)|current transaction is aborted|\bSQLSTATE\b|\bpg_\w+|\bknex\b/i,
    'database error text',
  ],
  [
    /\b(?:select\s+[\s\S]{1,200}?\s+from\s+"?\w|insert\s+into\s+"?\w|update\s+"?\w+"?\s+set\s|delete\s+from\s+"?\w)/i,
    'SQL',
  ],
  [
    /\b(?:TypeError|ReferenceError|RangeError|SyntaxError|AggregateError):|Cannot read propert|is not a function|Maximum call stack/,
    'a JavaScript error',
  ],
];

function mediaMatches(declared: string, actual: string): boolean {
  const d = declared.toLowerCase();
  if (d === '*/*') return true;
  if (d.endsWith('/*')) return actual.startsWith(d.slice(0, -1));
  return d === actual;
}

/** Text that was in the request, so an error quoting it (`Unknown field 'select from x'`) is not a leak. */
export function checkResponse(
  contract: Contract,
  op: Operation,
  invalid: boolean,
  sentText: string,
  res: FuzzResponse,
): CheckFailure[] {
  const failures: CheckFailure[] = [];
  const text = res.body.toString('utf8');
  if (res.status >= 500) failures.push({ check: 'server-error', detail: `${res.status} ${text.slice(0, 300)}` });
  const declared = responseFor(op, res.status);
  if (!declared)
    failures.push({
      check: 'undeclared-status',
      detail: `${res.status} is not declared (declared: ${[...op.responses.keys()].join(', ')})`,
    });
  if (invalid && res.status >= 200 && res.status < 300)
    failures.push({ check: 'invalid-accepted', detail: `${res.status} for invalid input` });

  if (res.status === 204 || res.status === 304) {
    if (res.body.length > 0)
      failures.push({ check: 'body-on-empty-status', detail: `${res.status} with a ${res.body.length}-byte body` });
  } else if (declared && declared.media.length > 0) {
    const media = declared.media.find((m) => mediaMatches(m.contentType, res.contentType));
    if (!media) {
      failures.push({
        check: 'media-type',
        detail: `Content-Type ${res.contentType || '(none)'} is not one of ${declared.media.map((m) => m.contentType).join(', ')}`,
      });
    } else if (isJsonType(res.contentType)) {
      let value: unknown;
      try {
        value = JSON.parse(text);
      } catch {
        failures.push({ check: 'not-json', detail: text.slice(0, 300) });
      }
      if (value !== undefined && media.schema) {
        const c = contract.check(media.schema, value);
        if (!c.ok)
          failures.push({
            check: 'schema-mismatch',
            detail: `${declared.key}: ${c.error}; body ${text.slice(0, 300)}`,
          });
      }
    }
  } else if (declared && res.body.length > 0 && !(res.status >= 300 && res.status < 400)) {
    failures.push({
      check: 'media-type',
      detail: `a ${res.body.length}-byte ${res.contentType || 'untyped'} body where the contract declares none`,
    });
  }

  // An error the contract declares without content (getMemberMedia's empty 404, for <img> tags)
  // is answered with an empty body; every other error is the envelope.
  const declaredEmpty = declared !== undefined && declared.media.length === 0 && res.body.length === 0;
  if (res.status >= 400 && !declaredEmpty) {
    let envelope: unknown;
    try {
      envelope = JSON.parse(text);
    } catch {
      envelope = undefined;
    }
    const c =
      envelope === undefined
        ? { ok: false as const, error: 'body is not JSON' }
        : contract.check(contract.errorSchema, envelope);
    if (!c.ok || !isJsonType(res.contentType)) {
      failures.push({
        check: 'error-envelope',
        detail: `${c.ok ? `Content-Type ${res.contentType}` : c.error}: ${text.slice(0, 300)}`,
      });
    }
    // The raw text and the decoded message (JSON escapes the quotes of `relation "members"`).
    const message =
      typeof (envelope as { message?: unknown } | undefined)?.message === 'string'
        ? (envelope as { message: string }).message
        : '';
    for (const [pattern, what] of LEAKS) {
      const m = pattern.exec(message) ?? pattern.exec(text);
      if (m && !sentText.includes(m[0]))
        failures.push({ check: 'leak', detail: `shows ${what} (${JSON.stringify(m[0])}): ${text.slice(0, 300)}` });
    }
  }
  return failures;
}

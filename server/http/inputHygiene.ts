/**
 * Input rules that hold for every operation and that the contract validator cannot express,
 * checked after the body is parsed and before contract validation, so before any handler SQL
 * (authentication and the rate limit, earlier in the chain, may have read api_keys or
 * rate_limit_windows):
 *
 * - No string — in a JSON body (keys included), a query parameter or a path parameter — may hold
 *   U+0000 (PostgreSQL text cannot store it) or an unpaired UTF-16 surrogate (not valid Unicode;
 *   JSON allows the escape `\ud800`, UTF-8 storage and jsonb do not).
 * - An integer query or path parameter is written in plain decimal digits (`-`? then 0–9):
 *   `1e2`, `0x10`, ` 10`, `Infinity` and `NaN` are refused, where JavaScript's Number() would take
 *   them. Its range is then the contract's `minimum`/`maximum` (checked by the validator).
 * - A query parameter is given at most once (none of ours is an array).
 * - A JSON body nests at most MAX_JSON_DEPTH (32) arrays and objects deep.
 */
import type { RequestHandler } from 'express';
import { ApiError } from './errors.ts';
import type { MatchedOperation } from './spec.ts';

const DECIMAL_INTEGER = /^-?[0-9]+$/;
// A high surrogate not followed by a low one, or a low one not preceded by a high one.
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

function bad(message: string): ApiError {
  return new ApiError(400, 'BAD_REQUEST', message);
}

/** Why a string is refused, or undefined when it is fine. */
function stringProblem(value: string): string | undefined {
  if (value.includes('\u0000')) return 'must not contain the NUL character (U+0000)';
  if (LONE_SURROGATE.test(value)) return 'must not contain an unpaired UTF-16 surrogate (invalid Unicode)';
  return undefined;
}

function join(path: string, key: string | number): string {
  if (typeof key === 'number') return `${path}[${key}]`;
  return path ? `${path}.${key}` : key;
}

/** Deepest nesting of arrays and objects a JSON body may have (the contract's deepest is far less). */
const MAX_JSON_DEPTH = 32;

/**
 * Walks parsed JSON; throws a 400 naming the first offending field (or key), or when the body nests
 * deeper than MAX_JSON_DEPTH. Iterative, with the depth checked before anything below it is read,
 * so no body can exhaust the stack here or in the contract validator after it.
 */
function checkJson(root: unknown): void {
  const stack: Array<{ value: unknown; path: string; depth: number }> = [{ value: root, path: '', depth: 0 }];
  while (stack.length > 0) {
    const { value, path, depth } = stack.pop()!;
    if (typeof value === 'string') {
      const problem = stringProblem(value);
      if (problem) throw bad(`${path || 'Request body'} ${problem}`);
      continue;
    }
    if (value === null || typeof value !== 'object') continue;
    if (depth >= MAX_JSON_DEPTH) throw bad(`Request body is nested deeper than ${MAX_JSON_DEPTH} levels`);
    // Pushed in reverse so the first offending field in document order is the one reported.
    const children: Array<{ value: unknown; path: string; depth: number }> = [];
    if (Array.isArray(value)) {
      for (const [i, item] of value.entries()) children.push({ value: item, path: join(path, i), depth: depth + 1 });
    } else {
      for (const [key, item] of Object.entries(value)) {
        const keyProblem = stringProblem(key);
        if (keyProblem) throw bad(`A field name in ${path || 'the request body'} ${keyProblem}`);
        children.push({ value: item, path: join(path, key), depth: depth + 1 });
      }
    }
    for (let i = children.length - 1; i >= 0; i--) stack.push(children[i]!);
  }
}

export function inputHygiene(): RequestHandler {
  return (req, res, next) => {
    const matched = (res.locals as { operation?: MatchedOperation }).operation;
    if (!matched) return next();
    const { operation, params } = matched;
    for (const [name, value] of Object.entries(params)) {
      const problem = stringProblem(value);
      if (problem) throw bad(`${name} ${problem}`);
    }
    const query = (req.query ?? {}) as Record<string, unknown>;
    for (const [name, value] of Object.entries(query)) {
      const nameProblem = stringProblem(name);
      if (nameProblem) throw bad(`A query parameter name ${nameProblem}`);
      if (Array.isArray(value)) throw bad(`${name} must be given at most once`);
      if (typeof value === 'string') {
        const problem = stringProblem(value);
        if (problem) throw bad(`${name} ${problem}`);
      }
    }
    for (const param of operation.integerParams) {
      const raw = param.in === 'path' ? params[param.name] : query[param.name];
      if (typeof raw === 'string' && !DECIMAL_INTEGER.test(raw))
        throw bad(`${param.name} must be an integer written in decimal digits`);
    }
    if (req.body !== undefined && !Buffer.isBuffer(req.body)) checkJson(req.body);
    next();
  };
}

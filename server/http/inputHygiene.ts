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
 *
 * Every problem found is listed in the 400's `details` (up to MAX_PROBLEMS); `message` is the first.
 */
import type { RequestHandler } from 'express';
import { invalidInput, MAX_PROBLEMS, pointerTo, type ValidationProblem } from './errors.ts';
import type { MatchedOperation } from './spec.ts';

const DECIMAL_INTEGER = /^-?[0-9]+$/;
// A high surrogate not followed by a low one, or a low one not preceded by a high one.
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/** Why a string is refused (the rule and its wording), or undefined when it is fine. */
function stringProblem(value: string): { rule: string; text: string } | undefined {
  if (value.includes('\u0000')) return { rule: 'nulCharacter', text: 'must not contain the NUL character (U+0000)' };
  if (LONE_SURROGATE.test(value))
    return { rule: 'unpairedSurrogate', text: 'must not contain an unpaired UTF-16 surrogate (invalid Unicode)' };
  return undefined;
}

function join(path: string, key: string | number): string {
  if (typeof key === 'number') return `${path}[${key}]`;
  return path ? `${path}.${key}` : key;
}

/** Deepest nesting of arrays and objects a JSON body may have (the contract's deepest is far less). */
const MAX_JSON_DEPTH = 32;

interface Node {
  value: unknown;
  /** `members[0].name`, for messages. */
  path: string;
  pointer: string;
  depth: number;
}

/**
 * Walks parsed JSON depth first, adding a problem for each offending value (an object's keys before
 * the values under it) and for each array or object deeper than MAX_JSON_DEPTH, whose contents are
 * not read. Iterative, so no body can exhaust the stack here or in the contract validator after it.
 */
function checkJson(root: unknown, problems: ValidationProblem[]): void {
  const stack: Node[] = [{ value: root, path: '', pointer: '', depth: 0 }];
  while (stack.length > 0 && problems.length < MAX_PROBLEMS) {
    const { value, path, pointer, depth } = stack.pop()!;
    if (typeof value === 'string') {
      const problem = stringProblem(value);
      if (problem)
        problems.push({
          in: 'body',
          pointer,
          rule: problem.rule,
          message: `${path || 'Request body'} ${problem.text}`,
        });
      continue;
    }
    if (value === null || typeof value !== 'object') continue;
    if (depth >= MAX_JSON_DEPTH) {
      const message = `Request body is nested deeper than ${MAX_JSON_DEPTH} levels`;
      problems.push({ in: 'body', pointer, rule: 'maxDepth', message });
      continue;
    }
    // Pushed in reverse so that the values are visited in document order.
    const children: Node[] = [];
    if (Array.isArray(value)) {
      for (const [i, item] of value.entries())
        children.push({ value: item, path: join(path, i), pointer: pointerTo(pointer, i), depth: depth + 1 });
    } else {
      for (const [key, item] of Object.entries(value)) {
        const keyProblem = stringProblem(key);
        if (keyProblem) {
          const message = `A field name in ${path || 'the request body'} ${keyProblem.text}`;
          problems.push({ in: 'body', pointer: pointerTo(pointer, key), rule: keyProblem.rule, message });
        }
        children.push({ value: item, path: join(path, key), pointer: pointerTo(pointer, key), depth: depth + 1 });
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
    const problems: ValidationProblem[] = [];
    const add = (where: 'path' | 'query', name: string, rule: string, message: string) =>
      problems.push({ in: where, pointer: name, rule, message });
    for (const [name, value] of Object.entries(params)) {
      const problem = stringProblem(value);
      if (problem) add('path', name, problem.rule, `${name} ${problem.text}`);
    }
    const query = (req.query ?? {}) as Record<string, unknown>;
    for (const [name, value] of Object.entries(query)) {
      const nameProblem = stringProblem(name);
      if (nameProblem) add('query', name, nameProblem.rule, `A query parameter name ${nameProblem.text}`);
      if (Array.isArray(value)) add('query', name, 'singleValue', `${name} must be given at most once`);
      if (typeof value === 'string') {
        const problem = stringProblem(value);
        if (problem) add('query', name, problem.rule, `${name} ${problem.text}`);
      }
    }
    for (const param of operation.integerParams) {
      const raw = param.in === 'path' ? params[param.name] : query[param.name];
      if (typeof raw === 'string' && !DECIMAL_INTEGER.test(raw))
        add(param.in, param.name, 'decimalInteger', `${param.name} must be an integer written in decimal digits`);
    }
    if (req.body !== undefined && !Buffer.isBuffer(req.body)) checkJson(req.body, problems);
    if (problems.length > 0) throw invalidInput(problems);
    next();
  };
}

/**
 * The kinds of mistake a request can make, derived from an operation's contract, and the request
 * that makes each one. The contract's 400 examples carry such a request in `x-request` (see
 * docs/development.md, "Named 400 examples"); scripts/error-examples/main.ts sends them to the real
 * server to write the examples, and test/errorExamples.test.ts sends them again to check them.
 */
import type { Contract, Operation, Parameter, Schema } from '../fuzz/contract.ts';
import { isObject } from '../fuzz/contract.ts';

/** The request an example states: whole, not relative to anything, so it can be sent as it is. */
export interface ExampleRequest {
  /** Every path parameter's value, unencoded. */
  path?: Record<string, string>;
  /** Every query parameter sent, unencoded. */
  query?: Record<string, string>;
  /** The JSON body. */
  body?: unknown;
  /** A raw body instead of `body` (malformed JSON, or bytes of another type), with its type. */
  bodyText?: string;
  contentType?: string;
}

export interface Mistake {
  /** The example's name, one of KINDS. */
  name: Kind;
  request: ExampleRequest;
}

/** Every kind, in the order the examples are listed (the first an operation can make is its default). */
export const KINDS = {
  missingField: 'A required body field is missing',
  wrongType: 'A body field has the wrong JSON type',
  unknownField: 'The body has a field the operation does not take',
  outOfRange: 'A body value is out of range (too long, too short, too large or too small)',
  notInEnum: 'A body value is not one of the allowed values',
  badFormat: 'A body value does not have the required format',
  emptyBody: 'The body changes nothing',
  malformedJson: 'The body is not valid JSON',
  badPathId: 'An id in the path is not a UUID',
  badPathParameter: 'A path parameter has the wrong form',
  missingQueryParameter: 'A required query parameter is missing',
  unknownQueryParameter: 'The query has a parameter the operation does not take',
  badQueryParameter: 'A query parameter is out of range, not allowed or malformed',
} as const;
export type Kind = keyof typeof KINDS;

/**
 * Mistakes an operation's request can make that its server does not refuse with a 400, and why
 * (`<operationId> <kind>`): no example is written for them.
 */
const NOT_REFUSED: Readonly<Record<string, string>> = {
  'adminCreateImport malformedJson':
    'the export file is streamed to storage as it is and read by the import job, after the account is looked up',
};

/** A well-formed id that names nothing: validation refuses a request before any handler looks it up. */
export const SOME_ID = '2f3e4d5c-6b7a-4980-a1b2-c3d4e5f60718';
const UNKNOWN_FIELD = 'unexpectedField';
const UNKNOWN_QUERY = 'unexpected';

type Json = Record<string, unknown>;

function isUuid(schema: Schema): boolean {
  return schema.format === 'uuid';
}

/** A value the parameter takes: its first example, its first allowed value, its default. */
function validParam(p: Parameter): string {
  const s = p.schema;
  const example = Array.isArray(s.examples) ? s.examples[0] : s.example;
  if (isUuid(s)) return SOME_ID;
  if (example !== undefined) return String(example);
  if (Array.isArray(s.enum)) return String(s.enum[0]);
  if (s.default !== undefined) return String(s.default);
  if (s.type === 'integer' || s.type === 'number') return String(s.minimum ?? 1);
  return 'text';
}

/** A value of the parameter's type that breaks its rules, or undefined when it has none to break. */
function invalidParam(contract: Contract, p: Parameter): string | undefined {
  const s = p.schema;
  if (isUuid(s)) return 'not-a-uuid';
  if (Array.isArray(s.enum)) return 'notAnOption';
  if (s.type === 'integer' || s.type === 'number') {
    if (typeof s.maximum === 'number') return String(s.maximum + 1);
    if (typeof s.minimum === 'number') return String(s.minimum - 1);
    return undefined;
  }
  if (s.type === 'boolean') return 'maybe';
  if (typeof s.maxLength === 'number' && typeof s.pattern !== 'string') return 'x'.repeat(s.maxLength + 1);
  if (typeof s.pattern === 'string') return ['not valid!', '%%', 'x'.repeat(300)].find((v) => !contract.check(s, v).ok);
  return undefined;
}

function requestBase(op: Operation): ExampleRequest {
  const path = Object.fromEntries(op.parameters.filter((p) => p.in === 'path').map((p) => [p.name, validParam(p)]));
  const query = Object.fromEntries(
    op.parameters.filter((p) => p.in === 'query' && p.required).map((p) => [p.name, validParam(p)]),
  );
  return {
    ...(Object.keys(path).length > 0 ? { path } : {}),
    ...(Object.keys(query).length > 0 ? { query } : {}),
  };
}

/** The operation's first JSON request example: a request body the contract takes. */
function exampleBody(contract: Contract, op: Operation): unknown {
  const raw = contract.doc.paths as Json;
  const item = contract.deref<Json>(raw[op.path]);
  const body = contract.deref<Json | undefined>((item[op.method.toLowerCase()] as Json).requestBody);
  const media = (body?.content as Json | undefined)?.['application/json'] as Json | undefined;
  if (!media) return undefined;
  if (media.example !== undefined) return media.example;
  const first = Object.values((media.examples as Json | undefined) ?? {})[0];
  return first === undefined ? undefined : contract.deref<Json>(first).value;
}

/** The properties of an object schema (with `$ref`s followed), or undefined for any other schema. */
function propertiesOf(contract: Contract, schema: Schema): Record<string, Schema> | undefined {
  const s = contract.deref<Schema>(schema);
  if (!isObject(s.properties)) return undefined;
  return Object.fromEntries(Object.entries(s.properties).map(([k, v]) => [k, contract.deref<Schema>(v)]));
}

const WRONG_TYPES: unknown[] = [123, 'text', true, ['text'], { a: 1 }];

function bodyMistakes(contract: Contract, op: Operation, base: ExampleRequest): Mistake[] {
  const media = op.requestBody?.media.find((m) => m.contentType === 'application/json');
  if (!media?.schema) return [];
  const example = exampleBody(contract, op);
  if (!isObject(example) || !contract.check(media.schema, example).ok) return [];
  const schema = contract.deref<Schema>(media.schema);
  const props = propertiesOf(contract, schema);
  const out: Mistake[] = [];
  const withBody = (name: Kind, body: unknown) => out.push({ name, request: { ...base, body } });
  const without = (key: string) => Object.fromEntries(Object.entries(example).filter(([k]) => k !== key));
  const required = Array.isArray(schema.required) ? (schema.required as string[]) : [];
  if (required[0]) withBody('missingField', without(required[0]));
  // The field to spoil: the first required one, else the first the example sets.
  const target = required[0] ?? Object.keys(example)[0];
  const targetSchema = target ? props?.[target] : undefined;
  if (target && targetSchema) {
    const wrong = WRONG_TYPES.find((v) => !contract.check(targetSchema, v).ok);
    if (wrong !== undefined) withBody('wrongType', { ...example, [target]: wrong });
  }
  if (props) withBody('unknownField', { ...example, [UNKNOWN_FIELD]: true });
  for (const [kind, spoil] of [
    ['outOfRange', outOfRange],
    ['notInEnum', notInEnum],
    ['badFormat', (s: Schema) => badFormat(contract, s)],
  ] as const) {
    for (const [key, propSchema] of Object.entries(props ?? {})) {
      const value = spoil(propSchema);
      if (value === undefined) continue;
      withBody(kind, { ...example, [key]: value });
      break;
    }
  }
  if (required.length === 0 && typeof schema.minProperties === 'number' && schema.minProperties > 0)
    withBody('emptyBody', {});
  const text = JSON.stringify(example);
  out.push({
    name: 'malformedJson',
    request: { ...base, bodyText: text.slice(0, -1), contentType: 'application/json' },
  });
  return out;
}

function types(s: Schema): string[] {
  return Array.isArray(s.type) ? (s.type as string[]) : typeof s.type === 'string' ? [s.type] : [];
}

function outOfRange(s: Schema): unknown {
  const t = types(s);
  if (t.includes('string') && typeof s.maxLength === 'number' && s.maxLength < 10_000 && !s.enum && !s.format)
    return 'x'.repeat(s.maxLength + 1);
  if ((t.includes('integer') || t.includes('number')) && typeof s.maximum === 'number') return s.maximum + 1;
  if ((t.includes('integer') || t.includes('number')) && typeof s.minimum === 'number') return s.minimum - 1;
  return undefined;
}

function notInEnum(s: Schema): unknown {
  if (Array.isArray(s.enum) && s.enum.some((v) => typeof v === 'string')) return 'notAnOption';
  return undefined;
}

function badFormat(contract: Contract, s: Schema): unknown {
  const t = types(s);
  if (!t.includes('string') || s.enum) {
    const items = isObject(s.items) ? contract.deref<Schema>(s.items) : undefined;
    if (t.includes('array') && items && isUuid(items)) return ['not-a-uuid'];
    return undefined;
  }
  if (isUuid(s)) return 'not-a-uuid';
  if (typeof s.format === 'string' || typeof s.pattern === 'string')
    return ['not valid!', 'not a url', '%%'].find((v) => !contract.check(s, v).ok);
  return undefined;
}

/** Every mistake the operation's request can make, in KINDS order. */
export function mistakesOf(contract: Contract, op: Operation): Mistake[] {
  const base = requestBase(op);
  const json = op.requestBody?.media.find((m) => m.contentType === 'application/json');
  const other = op.requestBody?.required ? op.requestBody.media.find((m) => m !== json) : undefined;
  // An operation that takes only another type gets a few bytes of it: validation does not read them.
  const valid: ExampleRequest = json
    ? { ...base, ...(op.requestBody?.required ? { body: exampleBody(contract, op) } : {}) }
    : other
      ? { ...base, bodyText: 'bytes', contentType: other.contentType === '*/*' ? 'image/png' : other.contentType }
      : base;
  const out: Mistake[] = json ? bodyMistakes(contract, op, base) : [];
  const pathParams = op.parameters.filter((p) => p.in === 'path');
  const id = pathParams.find((p) => isUuid(p.schema));
  if (id) out.push({ name: 'badPathId', request: { ...valid, path: { ...valid.path, [id.name]: 'not-a-uuid' } } });
  for (const p of pathParams.filter((x) => !isUuid(x.schema))) {
    const value = invalidParam(contract, p);
    if (value === undefined) continue;
    out.push({ name: 'badPathParameter', request: { ...valid, path: { ...valid.path, [p.name]: value } } });
    break;
  }
  const queryParams = op.parameters.filter((p) => p.in === 'query');
  const missing = queryParams.find((p) => p.required);
  if (missing) {
    const query = Object.fromEntries(Object.entries(valid.query ?? {}).filter(([k]) => k !== missing.name));
    out.push({ name: 'missingQueryParameter', request: withQuery(valid, query) });
  }
  // An operation whose request can make no other mistake can still be sent a query.
  if (queryParams.length > 0 || out.length === 0)
    out.push({ name: 'unknownQueryParameter', request: withQuery(valid, { ...valid.query, [UNKNOWN_QUERY]: '1' }) });
  for (const p of queryParams) {
    const value = invalidParam(contract, p);
    if (value === undefined) continue;
    out.push({ name: 'badQueryParameter', request: withQuery(valid, { ...valid.query, [p.name]: value }) });
    break;
  }
  const order = Object.keys(KINDS);
  return out
    .filter((m) => !NOT_REFUSED[`${op.operationId} ${m.name}`])
    .sort((a, b) => order.indexOf(a.name) - order.indexOf(b.name));
}

function withQuery(request: ExampleRequest, query: Record<string, string>): ExampleRequest {
  const { query: _old, ...rest } = request;
  return Object.keys(query).length > 0 ? { ...rest, query } : rest;
}

/** The HTTP request an example states, for a server at `baseUrl`, with `authorization` if any. */
export function httpRequest(
  op: Pick<Operation, 'method' | 'path'>,
  request: ExampleRequest,
  baseUrl: string,
  authorization: string | undefined,
): { url: string; init: RequestInit } {
  const path = op.path.replace(/\{([^}]+)\}/g, (_, name: string) => encodeURIComponent(request.path?.[name] ?? ''));
  const query = new URLSearchParams(request.query ?? {}).toString();
  const headers: Record<string, string> = authorization ? { Authorization: authorization } : {};
  let body: string | undefined;
  if (request.bodyText !== undefined) {
    body = request.bodyText;
    headers['Content-Type'] = request.contentType ?? 'application/json';
  } else if (request.body !== undefined) {
    body = JSON.stringify(request.body);
    headers['Content-Type'] = 'application/json';
  }
  return {
    url: `${baseUrl}${path}${query ? `?${query}` : ''}`,
    init: { method: op.method, headers, ...(body !== undefined ? { body } : {}) },
  };
}

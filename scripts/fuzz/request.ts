/**
 * A request as the fuzzer builds it (a Draft: parameter values, headers and a JSON value or raw
 * bytes), how it is rendered to HTTP, and the fuzzer's own verdict on whether it satisfies the
 * contract (judge) — the contract's schemas plus the input rules every operation shares (no NUL or
 * unpaired surrogate in any string, integers in plain decimal, each query parameter at most once,
 * the right credentials and scope).
 */
import { parse as parseQuery } from 'node:querystring';
import type { Contract, Operation, Parameter } from './contract.ts';
import type { Fixtures } from './fixtures.ts';
import { generate, resolveSchema, type GenContext } from './generate.ts';
import type { FuzzRequest } from './http.ts';
import type { Prng } from './prng.ts';

export interface Draft {
  /** Path parameter values, unencoded. */
  path: Record<string, string>;
  /** A path sent verbatim (already encoded), overriding the template. */
  rawPath?: string;
  query: Array<[string, string]>;
  rawQuery?: string;
  /** Header names in lower case; includes authorization and content-type. */
  headers: Record<string, string>;
  /** The JSON body as a value (undefined: none), unless bodyText or bodyBytes is set. */
  json?: unknown;
  bodyText?: string;
  bodyBytes?: Buffer;
  /** Set by mutations whose invalidity the judge cannot see (random bytes labelled image/png). */
  forceInvalid?: string;
  /** Send this many at once (races between writes): copies of this request, or with `mixed` other valid ones. */
  burst?: number;
  mixed?: boolean;
}

export interface Credentials {
  metricsToken: string;
  adminToken: string;
  fixtures: Fixtures;
}

/** Minimal real images by media type (magic bytes and a valid header). */
export const SAMPLE_IMAGES: Record<string, Buffer> = {
  'image/png': Buffer.from(
    '89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c4890000000d4944415478da63f8ffff3f0005fe02fea7d6a4f60000000049454e44ae426082',
    'hex',
  ),
  'image/gif': Buffer.from(
    '47494638396101000100800000000000ffffff21f90401000000002c00000000010001000002024401003b',
    'hex',
  ),
  'image/jpeg': Buffer.concat([
    Buffer.from('ffd8ffe000104a46494600010100000100010000', 'hex'),
    Buffer.alloc(32),
    Buffer.from('ffd9', 'hex'),
  ]),
  'image/webp': Buffer.concat([
    Buffer.from('RIFF'),
    Buffer.from([0x1a, 0, 0, 0]),
    Buffer.from('WEBPVP8 '),
    Buffer.alloc(14),
  ]),
};

export function isJsonType(contentType: string): boolean {
  return contentType === 'application/json' || /^application\/[^;]*\+json$/.test(contentType);
}

export function authFor(op: Operation, creds: Credentials): string | undefined {
  switch (op.security) {
    case 'public':
      return undefined;
    case 'admin':
      return `Bearer ${creds.adminToken}`;
    case 'metrics':
      return `Bearer ${creds.metricsToken}`;
    default:
      return `Bearer ${creds.fixtures.apiKey}`;
  }
}

/** Operations that destroy the resource their last path parameter names get a fresh one. */
export function destroysTarget(op: Operation): boolean {
  return op.method === 'DELETE' || op.path.endsWith('/restore');
}

export function lastPathParam(op: Operation): Parameter | undefined {
  return op.parameters.filter((p) => p.in === 'path').at(-1);
}

export function queryValue(value: unknown): string {
  return typeof value === 'string' ? value : JSON.stringify(value);
}

/** A request that satisfies the contract, with real fixture ids most of the time. */
export async function buildValid(
  contract: Contract,
  op: Operation,
  rng: Prng,
  creds: Credentials,
  fresh: Record<string, string>,
): Promise<Draft> {
  const fixtures = creds.fixtures;
  const ctx: GenContext = { contract, rng, fixture: (name) => fixtures.sharedAny(name, (ids) => rng.pick(ids)) };
  const draft: Draft = { path: {}, query: [], headers: {} };
  for (const p of op.parameters) {
    if (p.in === 'path') {
      draft.path[p.name] = fresh[p.name] ?? queryValue(generate(ctx, p.schema, p.name));
    } else if (p.in === 'query') {
      if (p.required || rng.chance(0.5)) draft.query.push([p.name, queryValue(generate(ctx, p.schema, p.name))]);
    } else if (p.required || rng.chance(0.3)) {
      draft.headers[p.name.toLowerCase()] = queryValue(generate(ctx, p.schema, p.name));
    }
  }
  const auth = authFor(op, creds);
  if (auth) draft.headers.authorization = auth;
  const body = op.requestBody;
  if (body && body.media.length > 0 && (body.required || rng.chance(0.7))) {
    const media = rng.pick(body.media);
    draft.headers['content-type'] = media.contentType;
    if (isJsonType(media.contentType)) {
      // The generator is right nearly always; a few tries cover the odd conflict of constraints.
      let value = generate(ctx, media.schema ?? {});
      for (let i = 0; i < 5 && media.schema && !contract.check(media.schema, value).ok; i++)
        value = generate(ctx, media.schema);
      draft.json = value;
    } else {
      draft.bodyBytes =
        SAMPLE_IMAGES[media.contentType] ?? Buffer.from(Array.from({ length: rng.int(1, 64) }, () => rng.int(0, 255)));
    }
  }
  return draft;
}

export function bodyBytes(draft: Draft): Buffer | undefined {
  if (draft.bodyBytes) return draft.bodyBytes;
  if (draft.bodyText !== undefined) return Buffer.from(draft.bodyText, 'utf8');
  if (draft.json !== undefined) return Buffer.from(JSON.stringify(draft.json), 'utf8');
  return undefined;
}

export function render(op: Operation, draft: Draft): FuzzRequest {
  const path =
    draft.rawPath ?? op.path.replace(/\{([^}]+)\}/g, (_m, name: string) => encodeURIComponent(draft.path[name] ?? ''));
  return {
    method: op.method,
    path,
    query: draft.query,
    ...(draft.rawQuery !== undefined ? { rawQuery: draft.rawQuery } : {}),
    headers: draft.headers,
    body: bodyBytes(draft),
  };
}

// ---------------------------------------------------------------------------------------------
// The verdict

const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

function stringRule(value: string): string | undefined {
  if (value.includes('\u0000')) return 'contains NUL';
  if (LONE_SURROGATE.test(value)) return 'contains an unpaired surrogate';
  return undefined;
}

/** The first string (or key) of a JSON value that breaks a shared input rule; iterative, for deep nesting. */
function jsonRule(root: unknown): string | undefined {
  const stack: unknown[] = [root];
  while (stack.length > 0) {
    const value = stack.pop();
    if (typeof value === 'string') {
      const r = stringRule(value);
      if (r) return `a string in the body ${r}`;
    } else if (Array.isArray(value)) {
      stack.push(...value);
    } else if (value !== null && typeof value === 'object') {
      for (const [k, item] of Object.entries(value)) {
        const r = stringRule(k);
        if (r) return `a key in the body ${r}`;
        stack.push(item);
      }
    }
  }
  return undefined;
}

/** A query or path text as the parameter's schema type, or a reason it cannot be one. */
function coerce(contract: Contract, p: Parameter, raw: string): { value: unknown } | { error: string } {
  const schema = resolveSchema(contract, p.schema);
  const types = Array.isArray(schema.type) ? (schema.type as string[]) : [schema.type as string | undefined];
  if (types.includes('integer')) {
    if (!/^-?[0-9]+$/.test(raw)) return { error: `${p.name} is not a decimal integer` };
    return { value: Number(raw) };
  }
  if (types.includes('number')) {
    const n = Number(raw);
    return raw.trim() === '' || !Number.isFinite(n) ? { error: `${p.name} is not a number` } : { value: n };
  }
  if (types.includes('boolean'))
    return raw === 'true' || raw === 'false' ? { value: raw === 'true' } : { error: `${p.name} is not a boolean` };
  return { value: raw };
}

export type Verdict = { valid: true } | { valid: false; reason: string };

const invalid = (reason: string): Verdict => ({ valid: false, reason });

/** Whether the contract (schemas + shared input rules + security) admits this request. */
export function judge(contract: Contract, op: Operation, draft: Draft, creds: Credentials): Verdict {
  if (draft.forceInvalid) return invalid(draft.forceInvalid);
  // Security first, as the server checks it first.
  const auth = draft.headers.authorization;
  const token = auth === undefined ? undefined : /^Bearer\s+(\S+)\s*$/i.exec(auth)?.[1];
  if (op.security === 'admin' && token !== creds.adminToken) return invalid('no admin token');
  if (op.security === 'metrics' && token !== creds.metricsToken) return invalid('no metrics token');
  if (op.security === 'apiKey') {
    const f = creds.fixtures;
    if (token === f.noScopeKey) {
      if (op.scope) return invalid('key lacks the scope');
    } else if (token === f.readOnlyKey) {
      if (op.scope?.level === 'read_write') return invalid('key has the scope at read only');
    } else if (token !== f.apiKey) {
      return invalid('no valid API key');
    }
  }
  // Path parameters.
  if (draft.rawPath !== undefined) return invalid('malformed path');
  for (const p of op.parameters.filter((x) => x.in === 'path')) {
    const raw = draft.path[p.name] ?? '';
    const rule = stringRule(raw);
    if (rule) return invalid(`path ${p.name} ${rule}`);
    const v = coerce(contract, p, raw);
    if ('error' in v) return invalid(v.error);
    const c = contract.check(p.schema, v.value);
    if (!c.ok) return invalid(`path ${p.name} ${c.error}`);
  }
  // Query: as the server parses it (node:querystring, Express 5's simple parser).
  const pairs: Array<[string, string]> = [];
  if (draft.rawQuery !== undefined) {
    for (const [k, v] of Object.entries(parseQuery(draft.rawQuery))) {
      if (Array.isArray(v)) return invalid(`query ${k} given more than once`);
      pairs.push([k, v ?? '']);
    }
  } else {
    pairs.push(...draft.query);
  }
  const seen = new Set<string>();
  for (const [name, raw] of pairs) {
    if (seen.has(name)) return invalid(`query ${name} given more than once`);
    seen.add(name);
    const p = op.parameters.find((x) => x.in === 'query' && x.name === name);
    if (!p) return invalid(`unknown query parameter ${JSON.stringify(name)}`);
    const rule = stringRule(raw) ?? stringRule(name);
    if (rule) return invalid(`query ${name} ${rule}`);
    const v = coerce(contract, p, raw);
    if ('error' in v) return invalid(v.error);
    const c = contract.check(p.schema, v.value);
    if (!c.ok) return invalid(`query ${name} ${c.error}`);
  }
  for (const p of op.parameters.filter((x) => x.in === 'query' && x.required)) {
    if (!seen.has(p.name)) return invalid(`query ${p.name} is required`);
  }
  for (const p of op.parameters.filter((x) => x.in === 'header')) {
    const raw = draft.headers[p.name.toLowerCase()];
    if (raw === undefined) {
      if (p.required) return invalid(`header ${p.name} is required`);
      continue;
    }
    const c = contract.check(p.schema, raw);
    if (!c.ok) return invalid(`header ${p.name} ${c.error}`);
  }
  // Body (ignored by the server on operations that declare none).
  const body = op.requestBody;
  if (!body) return { valid: true };
  const bytes = bodyBytes(draft);
  if (!bytes || bytes.length === 0) return body.required ? invalid('body is required') : { valid: true };
  const rawType = draft.headers['content-type'];
  if (rawType === undefined) return invalid('body without Content-Type');
  const [typePart, ...paramParts] = rawType.split(';');
  const type = typePart!.trim().toLowerCase();
  const media = body.media.find((m) => m.contentType.toLowerCase() === type);
  if (!media) return invalid(`Content-Type ${rawType} is not declared`);
  if (!isJsonType(type)) return { valid: true };
  const charset = paramParts.map((s) => s.trim().toLowerCase()).find((s) => s.startsWith('charset='));
  if (charset && !/^charset="?utf-8"?$/.test(charset)) return invalid(`JSON in ${charset}`);
  let value: unknown;
  try {
    value = JSON.parse(bytes.toString('utf8').replace(/^\uFEFF/, ''));
  } catch {
    return invalid('body is not valid JSON');
  }
  if (value === null || typeof value !== 'object') return invalid('JSON body is not an object or array');
  const rule = jsonRule(value);
  if (rule) return invalid(rule);
  if (media.schema) {
    const c = contract.check(media.schema, value);
    if (!c.ok) return invalid(`body ${c.error}`);
  }
  return { valid: true };
}

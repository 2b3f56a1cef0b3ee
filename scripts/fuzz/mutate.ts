/**
 * One mutation at a time on a valid draft. A mutator does not decide whether its result is
 * invalid: the judge (request.ts) does, from the contract, so a mutation that happens to stay
 * inside the contract (an unknown key where a map allows any, a long string without maxLength) is
 * sent as valid input and only has to be answered within the contract.
 */
import type { Contract, Operation, Schema } from './contract.ts';
import { isObject } from './contract.ts';
import { generate, randomText, resolveSchema } from './generate.ts';
import type { Prng } from './prng.ts';
import { authFor, isJsonType, SAMPLE_IMAGES, type Credentials, type Draft } from './request.ts';

export interface MutationContext {
  contract: Contract;
  op: Operation;
  rng: Prng;
  creds: Credentials;
}

export interface Mutator {
  name: string;
  applies(op: Operation): boolean;
  /** The mutated draft (a copy), or undefined when this draft offers nothing to mutate. */
  apply(ctx: MutationContext, draft: Draft): Draft | undefined;
}

type Path = Array<string | number>;

function clone(draft: Draft): Draft {
  return {
    ...draft,
    path: { ...draft.path },
    query: draft.query.map(([k, v]) => [k, v] as [string, string]),
    headers: { ...draft.headers },
    json: draft.json === undefined ? undefined : structuredClone(draft.json),
  };
}

/** Every node of a JSON value with the schema that governs it (resolved), root first. */
function nodes(
  contract: Contract,
  value: unknown,
  schema: unknown,
  path: Path = [],
): Array<{ path: Path; value: unknown; schema: Schema | undefined; key?: string }> {
  const s = schema === undefined ? undefined : resolveSchema(contract, schema);
  const out: Array<{ path: Path; value: unknown; schema: Schema | undefined; key?: string }> = [
    { path, value, schema: s, key: typeof path.at(-1) === 'string' ? (path.at(-1) as string) : undefined },
  ];
  if (Array.isArray(value)) {
    for (const [i, item] of value.entries()) out.push(...nodes(contract, item, s?.items, [...path, i]));
  } else if (isObject(value)) {
    const props = (s?.properties ?? {}) as Record<string, unknown>;
    for (const [k, v] of Object.entries(value)) {
      const sub = props[k] ?? (isObject(s?.additionalProperties) ? s.additionalProperties : undefined);
      out.push(...nodes(contract, v, sub, [...path, k]));
    }
  }
  return out;
}

function setAt(root: unknown, path: Path, value: unknown): unknown {
  if (path.length === 0) return value;
  let node = root as Record<string | number, unknown>;
  for (const key of path.slice(0, -1)) node = node[key] as Record<string | number, unknown>;
  node[path.at(-1)!] = value;
  return root;
}

/** The object at `path` inside `root` (the caller picked a path that leads to an object). */
function objectAt(root: unknown, path: Path): Record<string | number, unknown> {
  let target = root as Record<string | number, unknown>;
  for (const key of path) target = target[key] as Record<string | number, unknown>;
  return target;
}

function deleteAt(root: unknown, path: Path): void {
  const node = objectAt(root, path.slice(0, -1));
  const last = path.at(-1)!;
  if (Array.isArray(node)) node.splice(last as number, 1);
  else delete node[last];
}

function jsonBody(op: Operation, draft: Draft): boolean {
  const type = draft.headers['content-type'];
  return op.requestBody !== undefined && draft.json !== undefined && type !== undefined && isJsonType(type);
}

function bodySchema(op: Operation, draft: Draft): Schema | undefined {
  return op.requestBody?.media.find((m) => m.contentType === draft.headers['content-type'])?.schema;
}

const hasJsonBody = (op: Operation) => op.requestBody?.media.some((m) => isJsonType(m.contentType)) ?? false;
const hasBinaryBody = (op: Operation) => op.requestBody?.media.some((m) => !isJsonType(m.contentType)) ?? false;

/** Valid JSON but odd text: NUL, unpaired surrogates, controls, direction overrides, huge graphemes. */
export const ODD_STRINGS = [
  '\u0000',
  'a\u0000b',
  '\ud800',
  'x\udfffy',
  '\udc00\ud800',
  '\u202eevil',
  '\ufeff',
  '\ufffe\uffff',
  'e' + '\u0301'.repeat(500),
  '👩‍👩‍👧‍👦'.repeat(40),
  '\u0007\u001b[31m',
  '\r\n\r\nX-Injected: 1',
  "' OR '1'='1' --",
  '"; DROP TABLE members; --',
  // biome-ignore lint/suspicious/noTemplateCurlyInString: a template-injection probe, sent as plain text
  '${process.exit(1)}',
  '{{7*7}}',
  '../../../../etc/passwd',
  '%00%ff',
  '\\u0000',
  ' ',
  '',
  '\u200b',
  'null',
  'true',
  '0',
  '-0',
  'NaN',
];

// biome-ignore lint/correctness/noPrecisionLoss: 2^53 + 1 on purpose (not a safe integer once parsed)
const WRONG_TYPED = [0, -1, 1.5, 1e308, -1e308, 9007199254740993, '', 'text', true, false, null, [], [1], {}, { a: 1 }];

function otherType(rng: Prng, value: unknown): unknown {
  const type = (v: unknown) => (v === null ? 'null' : Array.isArray(v) ? 'array' : typeof v);
  const candidates = WRONG_TYPED.filter((c) => type(c) !== type(value));
  return structuredClone(rng.pick(candidates));
}

/** A value just outside what the node's schema allows, or undefined when it constrains nothing. */
function outOfRange(rng: Prng, schema: Schema, value: unknown): unknown {
  const options: Array<() => unknown> = [];
  const num = (k: string) => (typeof schema[k] === 'number' ? (schema[k] as number) : undefined);
  const types = Array.isArray(schema.type) ? (schema.type as string[]) : [schema.type as string];
  if (num('minimum') !== undefined) options.push(() => num('minimum')! - (types.includes('integer') ? 1 : 0.5));
  if (num('maximum') !== undefined) options.push(() => num('maximum')! + (types.includes('integer') ? 1 : 0.5));
  if (num('exclusiveMinimum') !== undefined) options.push(() => num('exclusiveMinimum'));
  if (num('exclusiveMaximum') !== undefined) options.push(() => num('exclusiveMaximum'));
  if (types.includes('integer'))
    options.push(
      () => 1.5,
      () => 2 ** 63,
      () => -(2 ** 63),
      () => 1e21,
    );
  if (num('maxLength') !== undefined)
    options.push(
      () => 'x'.repeat(num('maxLength')! + 1),
      () => '😀'.repeat(num('maxLength')! + 1),
    );
  if ((num('minLength') ?? 0) > 0) options.push(() => 'y'.repeat(num('minLength')! - 1));
  if (num('maxItems') !== undefined && Array.isArray(value))
    options.push(() =>
      Array.from({ length: num('maxItems')! + 1 }, (_, i) => value[i % Math.max(value.length, 1)] ?? i),
    );
  if ((num('minItems') ?? 0) > 0) options.push(() => []);
  if (schema.uniqueItems && Array.isArray(value) && value.length > 0) options.push(() => [...value, value[0]]);
  if (num('maxProperties') !== undefined && isObject(value))
    options.push(() => ({
      ...value,
      ...Object.fromEntries(
        Array.from({ length: num('maxProperties')! + 1 }, (_, i) => [`k${i}`, Object.values(value)[0] ?? 1]),
      ),
    }));
  if ((num('minProperties') ?? 0) > 0) options.push(() => ({}));
  const enumValues = Array.isArray(schema.enum) ? (schema.enum as unknown[]) : undefined;
  if (enumValues) {
    const first = enumValues[0];
    options.push(
      () => (typeof first === 'string' ? `${first}_not_in_enum` : 12345),
      () => (typeof first === 'string' ? `${first.toUpperCase()}!` : 'nope'),
    );
  }
  if (schema.const !== undefined)
    options.push(() => (typeof schema.const === 'string' ? `${schema.const}x` : 'not-const'));
  if (typeof schema.pattern === 'string')
    options.push(
      () => '!!not matching!!',
      () => `${String(value)} `,
      () => `\n${String(value)}`,
    );
  if (schema.format === 'uuid')
    options.push(
      () => 'not-a-uuid',
      () => String(value).slice(0, -1),
      () => `${String(value)}0`,
      () => String(value).replace(/-/g, ''),
    );
  if (schema.format === 'uri')
    options.push(
      () => 'not a uri',
      () => 'javascript:alert(1)',
      () => 'http://',
    );
  if (options.length === 0) return undefined;
  return rng.pick(options)();
}

const JSON_MALFORMED = (valid: string, rng: Prng): string[] => [
  valid.slice(0, rng.int(0, Math.max(0, valid.length - 1))),
  valid + '}',
  valid + ' trailing',
  '{',
  '{"a":}',
  "{'a':1}",
  '{"a":1,}',
  'NaN',
  'undefined',
  '[1,2',
  '"just a string"',
  '12345',
  'null',
  'true',
  '[]',
  '{"a":1e999}',
  valid.replace(/:/, '::'),
  '{"a":"\\x41"}',
  '{"a":"unterminated}',
  '\u0000' + valid,
  '['.repeat(20_000) + ']'.repeat(20_000),
  '{"a":'.repeat(20_000) + '1' + '}'.repeat(20_000),
];

const WRONG_CONTENT_TYPES = [
  'text/plain',
  'application/x-www-form-urlencoded',
  'multipart/form-data; boundary=fuzz',
  'application/xml',
  'application/json; charset=utf-16',
  'application/json; charset=latin1',
  'application/jsonx',
  'application/octet-stream',
  'image/png',
  'image/svg+xml',
  'text/html',
  '*/*',
  'json',
  'application/',
];

const BAD_IDS = [
  'not-a-uuid',
  '0',
  '-1',
  '00000000-0000-0000-0000-00000000000g',
  '00000000000000000000000000000000',
  '{00000000-0000-4000-8000-000000000000}',
  '00000000-0000-4000-8000-0000000000000',
  ' 00000000-0000-4000-8000-000000000000',
  "1' OR '1'='1",
  // Not `.` or `..`: URL parsing removes those segments before anything is sent.
  '../../etc/passwd',
  'a/b',
  '%2e%2e',
  '\u0000',
  '😀',
  'x'.repeat(300),
  'null',
  'undefined',
  '__proto__',
  'constructor',
];

const BAD_QUERY_VALUES = [
  '',
  'abc',
  '1.5',
  '1e2',
  '0x10',
  ' 10',
  '+5',
  'Infinity',
  'NaN',
  '١٢',
  '-0',
  '99999999999999999999999',
  '-99999999999999999999',
  'true',
  '[]',
  '{}',
  'null',
  '\u0000',
  'x'.repeat(3000),
];

const UNKNOWN_KEYS = [
  'fuzzUnknown',
  'constructor',
  'prototype',
  '',
  ' ',
  'a.b',
  '$where',
  '__proto__x',
  '😀',
  'ID',
  'Name',
];

function pickNode(ctx: MutationContext, draft: Draft, filter: (n: ReturnType<typeof nodes>[number]) => boolean) {
  const all = nodes(ctx.contract, draft.json, bodySchema(ctx.op, draft)).filter(filter);
  return all.length ? ctx.rng.pick(all) : undefined;
}

export const MUTATORS: Mutator[] = [
  {
    name: 'body.wrong-type',
    applies: hasJsonBody,
    apply(ctx, draft) {
      if (!jsonBody(ctx.op, draft)) return undefined;
      const node = pickNode(ctx, draft, () => true)!;
      const out = clone(draft);
      out.json = setAt(out.json, node.path, otherType(ctx.rng, node.value));
      return out;
    },
  },
  {
    name: 'body.missing-required',
    applies: hasJsonBody,
    apply(ctx, draft) {
      if (!jsonBody(ctx.op, draft)) return undefined;
      const candidates = nodes(ctx.contract, draft.json, bodySchema(ctx.op, draft)).flatMap((n) =>
        isObject(n.value) && Array.isArray(n.schema?.required)
          ? (n.schema.required as string[]).filter((k) => k in (n.value as object)).map((k) => [...n.path, k])
          : [],
      );
      if (candidates.length === 0) return undefined;
      const out = clone(draft);
      deleteAt(out.json, ctx.rng.pick(candidates));
      return out;
    },
  },
  {
    name: 'body.unknown-key',
    applies: hasJsonBody,
    apply(ctx, draft) {
      if (!jsonBody(ctx.op, draft)) return undefined;
      const node = pickNode(ctx, draft, (n) => isObject(n.value));
      if (!node) return undefined;
      const out = clone(draft);
      const target = objectAt(out.json, node.path);
      target[ctx.rng.pick(UNKNOWN_KEYS)] = ctx.rng.pick([1, 'x', null, true, {}, []]);
      return out;
    },
  },
  {
    name: 'body.proto-key',
    applies: hasJsonBody,
    apply(ctx, draft) {
      if (!jsonBody(ctx.op, draft)) return undefined;
      const node = pickNode(ctx, draft, (n) => isObject(n.value));
      if (!node) return undefined;
      const out = clone(draft);
      const target = objectAt(out.json, node.path);
      const placeholder = '__fuzz_placeholder__';
      const [key, payload] = ctx.rng.pick([
        ['__proto__', { fuzzPolluted: true }],
        ['__proto__', { isAdmin: true, plan: 'pro_plus', scopes: { members: 'read_write' } }],
        ['constructor', { prototype: { fuzzPolluted: true } }],
      ] as const);
      target[placeholder] = payload;
      // JSON.stringify cannot write an own `__proto__` key from an object literal; text can.
      out.bodyText = JSON.stringify(out.json).replace(`"${placeholder}"`, JSON.stringify(key));
      out.json = undefined;
      return out;
    },
  },
  {
    name: 'body.out-of-range',
    applies: hasJsonBody,
    apply(ctx, draft) {
      if (!jsonBody(ctx.op, draft)) return undefined;
      const candidates = nodes(ctx.contract, draft.json, bodySchema(ctx.op, draft)).flatMap((n) => {
        const v = n.schema ? outOfRange(ctx.rng, n.schema, n.value) : undefined;
        return v === undefined ? [] : [{ path: n.path, v }];
      });
      if (candidates.length === 0) return undefined;
      const pick = ctx.rng.pick(candidates);
      const out = clone(draft);
      out.json = setAt(out.json, pick.path, pick.v);
      return out;
    },
  },
  {
    name: 'body.long-string',
    applies: hasJsonBody,
    apply(ctx, draft) {
      if (!jsonBody(ctx.op, draft)) return undefined;
      const node = pickNode(ctx, draft, (n) => typeof n.value === 'string');
      if (!node) return undefined;
      const out = clone(draft);
      const length = ctx.rng.pick([1_000, 10_000, 100_001, 300_000]);
      out.json = setAt(out.json, node.path, randomText(ctx.rng, length));
      return out;
    },
  },
  {
    name: 'body.odd-unicode',
    applies: hasJsonBody,
    apply(ctx, draft) {
      if (!jsonBody(ctx.op, draft)) return undefined;
      const out = clone(draft);
      const odd = ctx.rng.pick(ODD_STRINGS);
      const node = pickNode(ctx, draft, (n) => typeof n.value === 'string');
      if (node && ctx.rng.chance(0.8)) {
        const s = node.value as string;
        const cut = ctx.rng.int(0, s.length);
        out.json = setAt(out.json, node.path, ctx.rng.chance(0.5) ? odd : s.slice(0, cut) + odd + s.slice(cut));
        return out;
      }
      // Or an odd key.
      const obj = pickNode(ctx, draft, (n) => isObject(n.value));
      if (!obj) return undefined;
      let target = out.json as Record<string | number, unknown>;
      for (const key of obj.path) target = target[key] as Record<string | number, unknown>;
      target[odd] = 'x';
      return out;
    },
  },
  {
    name: 'body.malformed-json',
    applies: hasJsonBody,
    apply(ctx, draft) {
      if (!jsonBody(ctx.op, draft)) return undefined;
      const out = clone(draft);
      out.bodyText = ctx.rng.pick(JSON_MALFORMED(JSON.stringify(draft.json), ctx.rng));
      out.json = undefined;
      return out;
    },
  },
  {
    name: 'body.wrong-content-type',
    applies: (op) => op.requestBody !== undefined,
    apply(ctx, draft) {
      const out = clone(draft);
      if (out.json === undefined && !out.bodyBytes) out.json = {};
      const type = ctx.rng.pick([
        ...WRONG_CONTENT_TYPES,
        ...(hasBinaryBody(ctx.op) ? ['application/json', 'image/bmp'] : []),
        undefined,
      ]);
      if (type === undefined) delete out.headers['content-type'];
      else out.headers['content-type'] = type;
      return out;
    },
  },
  {
    name: 'body.missing',
    applies: (op) => op.requestBody?.required === true,
    apply(_ctx, draft) {
      const out = clone(draft);
      out.json = undefined;
      out.bodyBytes = undefined;
      if (_ctx.rng.chance(0.5)) delete out.headers['content-type'];
      return out;
    },
  },
  {
    name: 'body.image-mismatch',
    applies: hasBinaryBody,
    apply(ctx, draft) {
      const declared = ctx.op.requestBody!.media.map((m) => m.contentType).filter((t) => !isJsonType(t));
      const out = clone(draft);
      out.json = undefined;
      const type = ctx.rng.pick(declared);
      out.headers['content-type'] = type;
      // Bytes of no supported image are invalid. Another supported type's bytes are not, by the
      // schema: member media reads the type from the bytes and ignores the header; the social
      // gallery refuses a mismatch with a declared 400, which a valid request may get.
      const variants: Array<[string, Buffer, boolean]> = [
        ['random bytes', Buffer.from(Array.from({ length: ctx.rng.int(1, 512) }, () => ctx.rng.int(0, 255))), true],
        ['SVG text', Buffer.from('<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>'), true],
        ['JSON', Buffer.from('{"not":"an image"}'), true],
      ];
      for (const [other, bytes] of Object.entries(SAMPLE_IMAGES))
        if (other !== type) variants.push([`${other} bytes`, bytes, false]);
      const [what, bytes, invalid] = ctx.rng.pick(variants);
      out.bodyBytes = bytes;
      if (invalid) out.forceInvalid = `${what} labelled ${type}`;
      return out;
    },
  },
  {
    name: 'body.oversize',
    applies: (op) => op.requestBody !== undefined,
    apply(ctx, draft) {
      const out = clone(draft);
      if (out.bodyBytes) {
        out.bodyBytes = Buffer.concat([out.bodyBytes, Buffer.alloc(OVERSIZE_BYTES)]);
      } else {
        out.json = undefined;
        out.bodyText = JSON.stringify({ padding: randomText(ctx.rng, 64).repeat(OVERSIZE_BYTES / 64) });
        out.headers['content-type'] ??= 'application/json';
      }
      out.forceInvalid = 'body larger than the server accepts';
      return out;
    },
  },
  {
    name: 'path.invalid-id',
    applies: (op) => op.parameters.some((p) => p.in === 'path'),
    apply(ctx, draft) {
      const names = Object.keys(draft.path);
      if (names.length === 0) return undefined;
      const out = clone(draft);
      const name = ctx.rng.pick(names);
      const value = ctx.rng.pick(BAD_IDS.filter((v) => !ctx.contract.staticSegments.has(v)));
      out.path[name] = value;
      return out;
    },
  },
  {
    name: 'path.unknown-id',
    applies: (op) => op.parameters.some((p) => p.in === 'path'),
    apply(ctx, draft) {
      const p = ctx.rng.pick(ctx.op.parameters.filter((x) => x.in === 'path'));
      const out = clone(draft);
      // A value the schema admits that names nothing (no fixture lookup): a random UUID for ids.
      out.path[p.name] = String(generate({ contract: ctx.contract, rng: ctx.rng, fixture: () => undefined }, p.schema));
      return out;
    },
  },
  {
    name: 'path.id-case',
    applies: (op) => op.parameters.some((p) => p.in === 'path'),
    apply(ctx, draft) {
      // The same id in upper case: still the canonical form (any case), so still valid input.
      const names = Object.keys(draft.path).filter((n) => /^[0-9a-f-]{36}$/.test(draft.path[n] ?? ''));
      if (names.length === 0) return undefined;
      const out = clone(draft);
      const name = ctx.rng.pick(names);
      out.path[name] = out.path[name]!.toUpperCase();
      return out;
    },
  },
  {
    name: 'path.bad-percent',
    applies: (op) => op.parameters.some((p) => p.in === 'path'),
    apply(ctx, draft) {
      const names = Object.keys(draft.path);
      const name = ctx.rng.pick(names);
      const bad = ctx.rng.pick(['%', '%zz', '%E0%A4%A', '%ED%A0%80', '%FF%FE', '%00', '%2F..%2F', '%5C']);
      const out = clone(draft);
      out.rawPath = ctx.op.path.replace(/\{([^}]+)\}/g, (_m, n: string) =>
        n === name ? bad : encodeURIComponent(draft.path[n] ?? ''),
      );
      return out;
    },
  },
  {
    name: 'query.unknown',
    applies: () => true,
    apply(ctx, draft) {
      const out = clone(draft);
      out.query.push([
        ctx.rng.pick(['fuzz', '__proto__', 'constructor', 'limit[]', 'a[b]', 'LIMIT', 'sort', 'q', '😀']),
        ctx.rng.pick(['1', 'x', '']),
      ]);
      return out;
    },
  },
  {
    name: 'query.duplicate',
    applies: () => true,
    apply(ctx, draft) {
      const out = clone(draft);
      const declared = ctx.op.parameters.filter((p) => p.in === 'query');
      if (out.query.length > 0 && ctx.rng.chance(0.7)) {
        const [k, v] = ctx.rng.pick(out.query);
        out.query.push([k, ctx.rng.chance(0.5) ? v : v + '1']);
      } else if (declared.length > 0) {
        const p = ctx.rng.pick(declared);
        const existing = out.query.find(([k]) => k === p.name)?.[1] ?? draft.query[0]?.[1] ?? '1';
        out.query = out.query.filter(([k]) => k !== p.name);
        out.query.push([p.name, existing], [p.name, existing]);
      } else {
        out.query.push(['fuzz', '1'], ['fuzz', '2']);
      }
      return out;
    },
  },
  {
    name: 'query.wrong-value',
    applies: (op) => op.parameters.some((p) => p.in === 'query'),
    apply(ctx, draft) {
      const declared = ctx.op.parameters.filter((p) => p.in === 'query');
      const p = ctx.rng.pick(declared);
      const out = clone(draft);
      out.query = out.query.filter(([k]) => k !== p.name);
      const schema = resolveSchema(ctx.contract, p.schema);
      const beyond = outOfRange(ctx.rng, schema, undefined);
      const value =
        beyond !== undefined && typeof beyond !== 'object' && ctx.rng.chance(0.5)
          ? String(beyond)
          : ctx.rng.pick([...BAD_QUERY_VALUES, ...ODD_STRINGS.filter((s) => !/[\ud800-\udfff]/.test(s))]);
      out.query.push([p.name, value]);
      return out;
    },
  },
  {
    name: 'query.missing-required',
    applies: (op) => op.parameters.some((p) => p.in === 'query' && p.required),
    apply(ctx, draft) {
      const required = ctx.op.parameters.filter((p) => p.in === 'query' && p.required);
      const p = ctx.rng.pick(required);
      const out = clone(draft);
      out.query = out.query.filter(([k]) => k !== p.name);
      return out;
    },
  },
  {
    name: 'query.raw',
    applies: () => true,
    apply(ctx, draft) {
      const out = clone(draft);
      const declared = ctx.op.parameters.filter((p) => p.in === 'query').map((p) => p.name);
      const name = declared.length ? ctx.rng.pick(declared) : 'fuzz';
      out.rawQuery = ctx.rng.pick([
        `${name}=%zz`,
        `${name}=%`,
        `${name}=%E0%A4%A`,
        `${name}=%ED%A0%80`,
        `${name}=1%00`,
        `${name}`,
        `&&&`,
        `=`,
        `${name}=1;${name}=2`,
        `${name}=1&${name}=1`,
        `${name}[]=1`,
        `${name}[0]=1&${name}[1]=2`,
        `${name}=${'%F0%9F%98%80'.repeat(50)}`,
      ]);
      return out;
    },
  },
  {
    name: 'header.wrong-value',
    applies: (op) => op.parameters.some((p) => p.in === 'header'),
    apply(ctx, draft) {
      const p = ctx.rng.pick(ctx.op.parameters.filter((x) => x.in === 'header'));
      const out = clone(draft);
      out.headers[p.name.toLowerCase()] = ctx.rng.pick([
        '"x"'.repeat(100),
        'W/"abc"',
        '*',
        '',
        '"unterminated',
        'x'.repeat(201),
        '"a", "b", "c"',
      ]);
      return out;
    },
  },
  {
    name: 'header.odd',
    applies: () => true,
    apply(ctx, draft) {
      // Headers the contract does not govern: the answer must not change its shape for them.
      const out = clone(draft);
      const [name, value] = ctx.rng.pick([
        ['accept', 'text/html'],
        ['accept', 'application/xml;q=1, */*;q=0'],
        ['accept', '*/*;q=abc'],
        ['accept-charset', 'latin1'],
        ['accept-encoding', 'gzip;q=0, identity;q=0'],
        ['x-request-id', 'x'.repeat(500)],
        ['x-request-id', '../../etc/passwd'],
        ['x-http-method-override', 'DELETE'],
        ['x-forwarded-for', '1.2.3.4, ::1, nonsense'],
        ['origin', 'https://evil.example'],
        ['range', 'bytes=0-1'],
        ['if-match', '*'],
        ['if-modified-since', 'not a date'],
        ['content-encoding', 'gzip'],
        ['content-encoding', 'br'],
        ['content-encoding', 'x-unknown'],
      ] as const);
      out.headers[name] = value;
      // A body that is not what its Content-Encoding says is invalid; the others leave the request as it was.
      if (
        name === 'content-encoding' &&
        ctx.op.requestBody &&
        out.headers['content-type'] &&
        (out.json !== undefined || out.bodyBytes)
      )
        out.forceInvalid = `Content-Encoding ${value} on a plain body`;
      return out;
    },
  },
  {
    name: 'valid.burst',
    applies: (op) => op.method !== 'GET',
    apply(ctx, draft) {
      // The same valid write several times at once: races must end in declared answers, not 500s.
      return { ...clone(draft), burst: ctx.rng.int(2, 4) };
    },
  },
  {
    name: 'valid.mixed-burst',
    applies: (op) => op.method !== 'GET',
    apply(ctx, draft) {
      // Different valid writes at once (to the same fixtures, mostly): they must serialise cleanly.
      return { ...clone(draft), burst: ctx.rng.int(2, 4), mixed: true };
    },
  },
  {
    name: 'auth.missing',
    applies: (op) => op.security !== 'public',
    apply(_ctx, draft) {
      const out = clone(draft);
      delete out.headers.authorization;
      return out;
    },
  },
  {
    name: 'auth.invalid',
    applies: (op) => op.security !== 'public',
    apply(ctx, draft) {
      const out = clone(draft);
      const good = authFor(ctx.op, ctx.creds) ?? 'Bearer x';
      const token = good.replace(/^Bearer /, '');
      out.headers.authorization = ctx.rng.pick([
        'Bearer',
        'Bearer ',
        `Basic ${Buffer.from('admin:admin').toString('base64')}`,
        `Bearer ${token}x`,
        `Bearer ${token.slice(0, -1)}`,
        `Bearer ${token.toUpperCase()}`,
        `Bearer ${token} ${token}`,
        `Token ${token}`,
        `Bearer ${'a'.repeat(4000)}`,
        `Bearer adk_${'0'.repeat(40)}`,
        "Bearer ' OR '1'='1",
        `Bearer ${ctx.creds.adminToken}`,
        `Bearer ${ctx.creds.metricsToken}`,
        `Bearer ${ctx.creds.fixtures.apiKey}`,
      ]);
      return out;
    },
  },
  {
    name: 'auth.scope',
    applies: (op) => op.security === 'apiKey',
    apply(ctx, draft) {
      const out = clone(draft);
      out.headers.authorization = `Bearer ${ctx.rng.chance(0.5) ? ctx.creds.fixtures.readOnlyKey : ctx.creds.fixtures.noScopeKey}`;
      return out;
    },
  },
];

/** Bytes beyond the fuzz server's body limits (BODY_LIMIT_BYTES, MEDIA_MAX_BYTES and IMPORT_MAX_BYTES, server.ts). */
export const OVERSIZE_BYTES = 600_000;

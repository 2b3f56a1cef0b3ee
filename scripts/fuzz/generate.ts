/**
 * Values that satisfy a schema of the contract, drawn from a seeded stream: enums and consts,
 * examples, boundary lengths and numbers, patterns (randexp), and text that mixes ASCII with valid
 * but awkward Unicode (emoji, combining marks, right-to-left, zero-width). Strings whose property
 * or parameter name names a fixture (`memberId`, `memberIds`, `linkedMemberId`…) get the id of a
 * real fixture most of the time, so valid requests reach the handlers' happy paths.
 */
import randexpModule from 'randexp';
import { isObject, type Contract, type Schema } from './contract.ts';
import type { Prng } from './prng.ts';

/** Maps a property/parameter name to a real fixture id (or undefined). */
export type FixtureLookup = (name: string) => string | undefined;

export interface GenContext {
  contract: Contract;
  rng: Prng;
  fixture: FixtureLookup;
}

/** Valid, awkward text: every piece is well-formed Unicode that PostgreSQL can store. */
const PIECES = [
  'a',
  'Z',
  '0',
  '9',
  ' ',
  '_',
  '-',
  '.',
  'é',
  'ß',
  'Ω',
  'ж',
  '中',
  '文',
  'ا',
  'ل',
  'ع',
  '\u200b',
  '\u200d',
  '\u202e',
  '\u0301',
  '\ufeff',
  '😀',
  '👩‍👩‍👧',
  '🏳️‍⚧️',
  '\ud83d\udc4d',
  '\t',
  '\n',
  '"',
  "'",
  '\\',
  '<',
  '>',
  '&',
  '%',
  '$',
  '{',
  '}',
  '[',
  ']',
  '#',
  '\u00a0',
  '\u2028',
  '\uffff',
  '\ud800\udc00',
  'x',
  'y',
  'q',
];

function codePoints(text: string): number {
  let n = 0;
  for (const _ of text) n++;
  return n;
}

/** Text of exactly `length` code points. */
export function randomText(rng: Prng, length: number, plain = false): string {
  let out = '';
  for (let i = 0; i < length; i++) {
    if (plain || rng.chance(0.7))
      out += 'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789'[rng.int(0, 61)];
    else out += [...rng.pick(PIECES)][0];
  }
  return out;
}

function schemaTypes(schema: Schema): string[] {
  if (Array.isArray(schema.type)) return schema.type as string[];
  if (typeof schema.type === 'string') return [schema.type];
  if (schema.properties || schema.additionalProperties || schema.required) return ['object'];
  if (schema.items) return ['array'];
  if (schema.enum || schema.const !== undefined) return [];
  return ['string'];
}

/** The resolved, merged schema (refs followed, allOf folded). */
export function resolveSchema(contract: Contract, raw: unknown): Schema {
  let schema = contract.deref<Schema>(raw);
  if (Array.isArray(schema.allOf)) {
    const merged: Schema = { ...schema };
    delete merged.allOf;
    for (const part of schema.allOf as unknown[]) {
      const p = resolveSchema(contract, part);
      merged.properties = { ...(merged.properties as Schema | undefined), ...(p.properties as Schema | undefined) };
      merged.required = [
        ...((merged.required as string[] | undefined) ?? []),
        ...((p.required as string[] | undefined) ?? []),
      ];
      for (const [k, v] of Object.entries(p)) if (!(k in merged)) merged[k] = v;
    }
    schema = merged;
  }
  return schema;
}

function fixtureFor(ctx: GenContext, name: string | undefined): string | undefined {
  if (!name || !ctx.rng.chance(0.95)) return undefined;
  return ctx.fixture(name);
}

export function generate(ctx: GenContext, raw: unknown, name?: string, depth = 0): unknown {
  const { rng } = ctx;
  const schema = resolveSchema(ctx.contract, raw);
  if (schema.const !== undefined) return schema.const;
  if (Array.isArray(schema.enum)) return rng.pick(schema.enum);
  const branches = (schema.oneOf ?? schema.anyOf) as unknown[] | undefined;
  if (Array.isArray(branches) && branches.length > 0) {
    const rest = { ...schema };
    delete rest.oneOf;
    delete rest.anyOf;
    const branch = resolveSchema(ctx.contract, rng.pick(branches));
    return generate(ctx, { ...rest, ...branch }, name, depth);
  }
  const types = schemaTypes(schema);
  // Nullable fields are null now and then; otherwise the first non-null type.
  const nonNull = types.filter((t) => t !== 'null');
  const type =
    types.includes('null') && (nonNull.length === 0 || rng.chance(0.2))
      ? 'null'
      : rng.pick(nonNull.length ? nonNull : ['string']);
  switch (type) {
    case 'null':
      return null;
    case 'boolean':
      return rng.chance(0.5);
    case 'integer':
    case 'number':
      return generateNumber(ctx, schema, type === 'integer');
    case 'array':
      return generateArray(ctx, schema, name, depth);
    case 'object':
      return generateObject(ctx, schema, depth);
    default:
      return generateString(ctx, schema, name);
  }
}

function examplesOf(schema: Schema): unknown[] {
  const out: unknown[] = [];
  if (Array.isArray(schema.examples)) out.push(...(schema.examples as unknown[]));
  if (schema.example !== undefined) out.push(schema.example);
  return out;
}

function generateNumber(ctx: GenContext, schema: Schema, integer: boolean): number {
  const { rng } = ctx;
  let min =
    typeof schema.minimum === 'number'
      ? schema.minimum
      : typeof schema.exclusiveMinimum === 'number'
        ? schema.exclusiveMinimum + (integer ? 1 : 1e-6)
        : undefined;
  let max =
    typeof schema.maximum === 'number'
      ? schema.maximum
      : typeof schema.exclusiveMaximum === 'number'
        ? schema.exclusiveMaximum - (integer ? 1 : 1e-6)
        : undefined;
  const examples = examplesOf(schema).filter((e): e is number => typeof e === 'number');
  if (examples.length && rng.chance(0.3)) return rng.pick(examples);
  min ??= max !== undefined ? max - 1000 : rng.chance(0.8) ? 0 : -1000;
  max ??= min + (rng.chance(0.9) ? 1000 : 2 ** 40);
  if (integer) {
    min = Math.ceil(min);
    max = Math.floor(max);
  }
  const r = rng.next();
  let value = r < 0.15 ? min : r < 0.3 ? max : integer ? rng.int(min, max) : min + rng.next() * (max - min);
  if (!integer && typeof schema.multipleOf === 'number')
    value = Math.round(value / schema.multipleOf) * schema.multipleOf;
  return value;
}

function generateArray(ctx: GenContext, schema: Schema, name: string | undefined, depth: number): unknown[] {
  const { rng } = ctx;
  const minItems = typeof schema.minItems === 'number' ? schema.minItems : 0;
  const maxItems = typeof schema.maxItems === 'number' ? schema.maxItems : minItems + 4;
  // Mostly short; now and then as long as allowed.
  const length =
    depth > 4 ? minItems : rng.chance(0.05) ? maxItems : rng.int(minItems, Math.min(maxItems, minItems + 3));
  const out: unknown[] = [];
  const seen = new Set<string>();
  // The item name is the singular of the array's (memberIds → memberId) for fixture lookup.
  const itemName = name?.replace(/Ids$/, 'Id');
  for (let attempts = 0; out.length < length && attempts < length * 5 + 5; attempts++) {
    const item = generate(ctx, schema.items ?? {}, itemName, depth + 1);
    const key = JSON.stringify(item);
    if (schema.uniqueItems && seen.has(key)) continue;
    seen.add(key);
    out.push(item);
  }
  return out;
}

function generateObject(ctx: GenContext, schema: Schema, depth: number): Record<string, unknown> {
  const { rng } = ctx;
  const out: Record<string, unknown> = {};
  const properties = (schema.properties ?? {}) as Record<string, unknown>;
  const required = new Set((schema.required as string[] | undefined) ?? []);
  for (const [key, sub] of Object.entries(properties)) {
    if (required.has(key) || (depth < 4 && rng.chance(0.5))) out[key] = generate(ctx, sub, key, depth + 1);
  }
  const additional = schema.additionalProperties;
  const minProperties = typeof schema.minProperties === 'number' ? schema.minProperties : 0;
  const maxProperties = typeof schema.maxProperties === 'number' ? schema.maxProperties : Infinity;
  if (isObject(additional) && Object.keys(properties).length === 0) {
    const names = isObject(schema.propertyNames)
      ? resolveSchema(ctx.contract, schema.propertyNames)
      : { pattern: '^[a-z][a-zA-Z0-9]{0,11}$' };
    const most = Number.isFinite(maxProperties) && rng.chance(0.05) ? maxProperties : Math.min(maxProperties, 3);
    const count = rng.int(Math.max(minProperties, 1), Math.max(minProperties, most));
    for (let attempts = 0; Object.keys(out).length < count && attempts < count * 5; attempts++) {
      const key = generateString(ctx, { type: 'string', ...names }, undefined);
      if (key === '__proto__') continue;
      out[key] = generate(ctx, additional, key, depth + 1);
    }
  }
  // minProperties over declared optional properties: add more until it holds.
  for (const key of Object.keys(properties)) {
    if (Object.keys(out).length >= minProperties) break;
    if (!(key in out)) out[key] = generate(ctx, properties[key], key, depth + 1);
  }
  return out;
}

function generateString(ctx: GenContext, schema: Schema, name: string | undefined): string {
  const { rng } = ctx;
  const minLength = typeof schema.minLength === 'number' ? schema.minLength : 0;
  const maxLength = typeof schema.maxLength === 'number' ? schema.maxLength : undefined;
  const format = schema.format as string | undefined;
  const pattern = typeof schema.pattern === 'string' ? schema.pattern : undefined;
  // Ids: UUIDs, and content hashes (gallery images are named by their sha256).
  if (format === 'uuid' || pattern?.includes('[0-9a-fA-F]{8}-') || pattern === '^[0-9a-f]{64}$') {
    const id = fixtureFor(ctx, name);
    if (id) return id;
  }
  const examples = examplesOf(schema).filter((e): e is string => typeof e === 'string');
  if (examples.length && rng.chance(0.25)) return rng.pick(examples);
  if (format === 'uuid') return rng.uuid();
  if (format === 'uri' && !pattern) return `https://example.org/${randomText(rng, rng.int(1, 12), true)}`;
  if (format === 'date-time') return new Date(rng.int(0, 4_102_444_800_000)).toISOString();
  if (format === 'email') return `${randomText(rng, rng.int(1, 10), true)}@example.org`;
  if (format === 'uri' && rng.chance(0.3)) {
    // Awkward but valid URIs (loopback only: nothing of ours is elsewhere).
    const fits = URIS.filter(
      (u) => (!pattern || new RegExp(pattern, 'u').test(u)) && fitsLength(u, minLength, maxLength),
    );
    if (fits.length) return rng.pick(fits);
  }
  if (pattern) {
    // Unanchored patterns (`\S`, `^https://`) are a constraint on free text: prefix/sample it.
    const anchoredEnd = pattern.endsWith('$');
    if (!anchoredEnd) {
      for (let attempt = 0; attempt < 20; attempt++) {
        const length = pickLength(rng, minLength, maxLength);
        const tail =
          format === 'uri'
            ? `example.org/${randomText(rng, rng.int(1, 12), true)}`
            : randomText(rng, Math.max(0, length - 8));
        const candidate = pattern.startsWith('^') ? sampleRegex(rng, pattern) + tail : randomText(rng, length);
        if (new RegExp(pattern, 'u').test(candidate) && fitsLength(candidate, minLength, maxLength)) return candidate;
      }
      if (examples.length) return rng.pick(examples);
    }
    for (let attempt = 0; attempt < 20; attempt++) {
      const candidate = sampleRegex(rng, pattern);
      if (fitsLength(candidate, minLength, maxLength)) return candidate;
    }
    if (examples.length) return rng.pick(examples);
    return sampleRegex(rng, pattern);
  }
  // Now and then the longest string allowed, in 4-byte characters: the most bytes a field can take.
  if (maxLength !== undefined && rng.chance(0.05))
    return Array.from({ length: maxLength }, () => String.fromCodePoint(0x1f600 + rng.int(0, 79))).join('');
  // Now and then markup: note text is Markdown whose images the server fetches. Only loopback
  // addresses with nothing listening (port 9), which the outbound-fetch guard refuses anyway.
  const snippet = rng.pick(MARKUP);
  if (rng.chance(0.05) && minLength <= snippet.length && (maxLength ?? Infinity) >= snippet.length) return snippet;
  return randomText(rng, pickLength(rng, minLength, maxLength));
}

const URIS = [
  'http://[::1]:9/a.png',
  'https://user:pass@127.0.0.1:9/a.woff2?b=c#d',
  'https://127.0.0.1:9/%F0%9F%98%80.png',
  'https://localhost:9/a/../b/./c.png',
  'https://0x7f.1:9/a.png',
  'http://127.0.0.1:65535/' + 'x'.repeat(1000),
  'https://xn--nxasmq6b.localhost:9/a.woff2',
];

const MARKUP = [
  '![a](http://127.0.0.1:9/a.png)',
  '![b](http://[::1]:9/b.gif "title")',
  '![c](http://localhost:9/c.webp) and ![d](http://0.0.0.0:9/d.jpg)',
  '<img src="http://127.0.0.1:9/e.png" onerror="alert(1)">',
  '[link](javascript:alert(1)) **bold** _it_ `code`',
  '![](data:image/png;base64,iVBORw0KGgo=)',
  '![x](http://127.0.0.1:9/' + 'a'.repeat(200) + '.png)',
];

function pickLength(rng: Prng, minLength: number, maxLength: number | undefined): number {
  const max = maxLength ?? minLength + 40;
  const r = rng.next();
  if (r < 0.1) return minLength;
  if (r < 0.2) return max;
  return rng.int(minLength, Math.min(max, minLength + 24));
}

function fitsLength(text: string, minLength: number, maxLength: number | undefined): boolean {
  const n = codePoints(text);
  return n >= minLength && (maxLength === undefined || n <= maxLength);
}

// randexp is CommonJS (`module.exports = RandExp`) with ES-module typings.
const RandExp = ((randexpModule as unknown as { default?: typeof randexpModule }).default ??
  randexpModule) as unknown as new (
  pattern: string,
) => { max: number; randInt: (a: number, b: number) => number; gen(): string };

/** A string matching `pattern`, drawn from the seeded stream. */
export function sampleRegex(rng: Prng, pattern: string): string {
  const r = new RandExp(pattern);
  r.max = 12;
  r.randInt = (a: number, b: number) => rng.int(a, b);
  return r.gen();
}

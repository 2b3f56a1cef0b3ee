/**
 * The bundled contract (generated/openapi.json) as the fuzzer sees it: every operation with its
 * parameters, request body and declared responses, and an ajv (JSON Schema 2020-12, OpenAPI 3.1's
 * dialect) that validates values against any schema of the document. This validator is the
 * fuzzer's own, independent of the server's express-openapi-validator.
 */
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import addFormatsPlugin from 'ajv-formats';

export type Schema = Record<string, unknown>;

export interface Parameter {
  name: string;
  in: 'path' | 'query' | 'header';
  required: boolean;
  schema: Schema;
}

export interface MediaBody {
  contentType: string;
  schema: Schema | undefined;
}

export interface Operation {
  operationId: string;
  method: string;
  path: string;
  security: 'public' | 'apiKey' | 'admin' | 'metrics';
  /** `<scope>:<level>` for apiKey operations that need a scope. */
  scope: { name: string; level: 'read' | 'read_write' } | undefined;
  parameters: Parameter[];
  requestBody: { required: boolean; media: MediaBody[] } | undefined;
  /** Declared responses by status (`default`/`4XX` ranges kept as written). */
  responses: Map<string, { media: MediaBody[] }>;
}

const CONTRACT_ID = 'https://fuzz.invalid/contract';
export const BUNDLED_CONTRACT = resolve(import.meta.dirname, '../../generated/openapi.json');

type Json = Record<string, unknown>;

/** Operations the fuzz run leaves out, and why. */
export const NOT_FUZZED: Readonly<Record<string, string>> = {
  streamEvents:
    'an event stream stays open until its client closes it, so no response ever completes; its cursor, filter and limit errors are tested in test/events.test.ts',
};

export class Contract {
  readonly doc: Json;
  readonly operations: Operation[];
  readonly ajv: Ajv2020;
  private readonly compiled = new WeakMap<object, ValidateFunction>();
  /** Static path segments (`page`, `restore`…) a mutated path parameter must not equal. */
  readonly staticSegments: Set<string>;

  constructor(doc: Json = JSON.parse(readFileSync(BUNDLED_CONTRACT, 'utf8')) as Json) {
    this.doc = doc;
    this.ajv = new Ajv2020({ strict: false, allErrors: false, validateFormats: true });
    (addFormatsPlugin as unknown as (ajv: Ajv2020) => void)(this.ajv);
    this.ajv.addFormat('int64', { type: 'number', validate: (n: number) => Number.isSafeInteger(n) });
    this.ajv.addFormat('binary', true);
    const components = (doc.components ?? {}) as Json;
    this.ajv.addSchema({ $id: CONTRACT_ID, components: { schemas: components.schemas ?? {} } });
    this.operations = this.walk();
    this.staticSegments = new Set(
      Object.keys(doc.paths as Json).flatMap((p) => p.split('/').filter((s) => s && !s.startsWith('{'))),
    );
  }

  /** Follows `#/…` references of the document. */
  deref<T = Json>(value: unknown): T {
    let current = value;
    for (let hops = 0; hops < 20 && isObject(current) && typeof current.$ref === 'string'; hops++) {
      const ref = current.$ref as string;
      const siblings = { ...current };
      delete siblings.$ref;
      const target = ref
        .replace(/^#\//, '')
        .split('/')
        .reduce<unknown>(
          (node, key) => (node as Json | undefined)?.[key.replace(/~1/g, '/').replace(/~0/g, '~')],
          this.doc,
        );
      current = Object.keys(siblings).length > 0 && isObject(target) ? { ...target, ...siblings } : target;
    }
    return current as T;
  }

  /** A compiled validator for a schema taken from this document (its refs resolve against it). */
  validator(schema: Schema): ValidateFunction {
    let fn = this.compiled.get(schema);
    if (!fn) {
      fn = this.ajv.compile(rewriteRefs(schema) as Schema);
      this.compiled.set(schema, fn);
    }
    return fn;
  }

  /** Whether `value` satisfies `schema`; the first error otherwise. */
  check(schema: Schema, value: unknown): { ok: true } | { ok: false; error: string } {
    const fn = this.validator(schema);
    if (fn(value)) return { ok: true };
    const e = fn.errors?.[0];
    return { ok: false, error: e ? `${e.instancePath || '(root)'} ${e.message ?? 'is invalid'}` : 'is invalid' };
  }

  /** The error envelope schema every non-2xx JSON response must match. */
  get errorSchema(): Schema {
    return this.deref<Schema>({ $ref: '#/components/schemas/Error' });
  }

  private walk(): Operation[] {
    const out: Operation[] = [];
    for (const [path, rawItem] of Object.entries(this.doc.paths as Json)) {
      const item = this.deref<Json>(rawItem);
      const shared = (item.parameters as unknown[] | undefined) ?? [];
      for (const method of ['get', 'put', 'post', 'delete', 'patch']) {
        const op = item[method] as Json | undefined;
        if (!op || NOT_FUZZED[String(op.operationId)]) continue;
        const params = new Map<string, Parameter>();
        for (const raw of [...shared, ...((op.parameters as unknown[] | undefined) ?? [])]) {
          const p = this.deref<Json>(raw);
          if (p.in !== 'path' && p.in !== 'query' && p.in !== 'header') continue;
          params.set(`${p.in}:${String(p.name)}`, {
            name: String(p.name),
            in: p.in,
            required: p.in === 'path' || p.required === true,
            schema: this.deref<Schema>(p.schema ?? {}),
          });
        }
        const body = op.requestBody ? this.deref<Json>(op.requestBody) : undefined;
        const responses = new Map<string, { media: MediaBody[] }>();
        for (const [status, rawResponse] of Object.entries((op.responses as Json | undefined) ?? {})) {
          responses.set(status, { media: this.media(this.deref<Json>(rawResponse).content) });
        }
        out.push({
          operationId: String(op.operationId),
          method: method.toUpperCase(),
          path,
          ...this.security(op),
          parameters: [...params.values()],
          requestBody: body ? { required: body.required === true, media: this.media(body.content) } : undefined,
          responses,
        });
      }
    }
    return out;
  }

  private media(content: unknown): MediaBody[] {
    if (!isObject(content)) return [];
    return Object.entries(content).map(([contentType, m]) => ({
      contentType,
      schema: isObject(m) && m.schema !== undefined ? this.deref<Schema>(m.schema) : undefined,
    }));
  }

  private security(op: Json): Pick<Operation, 'security' | 'scope'> {
    const requirements = (op.security ?? this.doc.security ?? []) as Array<Record<string, string[]>>;
    const [first] = requirements;
    if (!first) return { security: 'public', scope: undefined };
    const [scheme] = Object.keys(first);
    if (scheme === 'adminToken') return { security: 'admin', scope: undefined };
    if (scheme === 'metricsToken') return { security: 'metrics', scope: undefined };
    const role = first[scheme!]?.[0];
    const m = role ? /^([A-Za-z]+):(read|read_write)$/.exec(role) : null;
    return { security: 'apiKey', scope: m ? { name: m[1]!, level: m[2] as 'read' | 'read_write' } : undefined };
  }
}

export function isObject(value: unknown): value is Json {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Local `#/components/…` references made absolute so an inline schema compiles on its own. */
function rewriteRefs(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(rewriteRefs);
  if (!isObject(value)) return value;
  const out: Json = {};
  for (const [k, v] of Object.entries(value)) {
    out[k] = k === '$ref' && typeof v === 'string' && v.startsWith('#/') ? `${CONTRACT_ID}${v}` : rewriteRefs(v);
  }
  return out;
}

/** Whether a declared response key (`200`, `4XX`, `default`) covers a status. */
export function responseFor(op: Operation, status: number): { key: string; media: MediaBody[] } | undefined {
  const exact = op.responses.get(String(status));
  if (exact) return { key: String(status), ...exact };
  const range = op.responses.get(`${String(status)[0]}XX`);
  if (range) return { key: `${String(status)[0]}XX`, ...range };
  return undefined;
}

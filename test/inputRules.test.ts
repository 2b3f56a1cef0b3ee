/**
 * Input rules that hold on every operation (server/http/inputHygiene.ts and the contract's
 * bounds): each cause is sent to every operation it applies to, and each must be a 400 envelope
 * decided before any SQL statement runs.
 */
import { describe, expect, it } from 'vitest';
import { loadBundledSpec, OperationIndex, type OperationInfo } from '../server/http/spec.ts';
import { bearer, jsonHeaders, useServer } from './helpers/server.ts';

// Keys stay cached for the whole file and rate-limit counts stay in memory, so a refused request
// needs no SQL at all, authentication and rate limit included (on PostgreSQL the default store
// syncs counts to a table in the background, which would blur what a request ran).
const server = useServer({ env: { API_KEY_CACHE_TTL_MS: '300000' }, rateLimitStore: 'memory' });
const spec = loadBundledSpec();
const index = new OperationIndex(spec);
const SAMPLE_ID = '00000000-0000-4000-8000-000000000000';
const URN = 'urn:uuid:6ef4ec47-b8d5-45dc-84c7-10e522808788';

type Schema = {
  type?: string | string[];
  format?: string;
  $ref?: string;
  minimum?: number;
  maximum?: number;
  pattern?: string;
  enum?: unknown[];
  [k: string]: unknown;
};
interface Param {
  name: string;
  in: string;
  schema?: Schema;
  $ref?: string;
}

function deref<T>(value: T & { $ref?: string }): T {
  let current: unknown = value;
  while (current && typeof current === 'object' && '$ref' in current) {
    const path = String((current as { $ref: string }).$ref)
      .slice(2)
      .split('/');
    current = path.reduce<unknown>((node, key) => (node as Record<string, unknown>)[key], spec);
  }
  return current as T;
}

/** The parameters of an operation, path-item level first, every $ref resolved (schemas too). */
function paramsOf(op: OperationInfo): Array<Param & { schema: Schema }> {
  const item = spec.paths[op.path] as { parameters?: Param[] } & Record<string, { parameters?: Param[] }>;
  return [...(item.parameters ?? []), ...(item[op.method.toLowerCase()]?.parameters ?? [])]
    .map((p) => deref(p))
    .map((p) => ({ ...p, schema: deref(p.schema ?? {}) }));
}

const isInteger = (s: Schema) => (Array.isArray(s.type) ? s.type : [s.type]).includes('integer');

function headersFor(op: OperationInfo, apiKey: string): Record<string, string> {
  const token = op.security.kind === 'admin' ? server.adminToken : apiKey;
  if (!op.hasRequestBody) return bearer(token);
  return {
    ...bearer(token),
    'Content-Type': op.requestContentTypes.includes('application/json')
      ? 'application/json'
      : op.requestContentTypes[0]!,
  };
}

/** A body the operation's content type accepts, for requests whose point is elsewhere. */
function anyBody(op: OperationInfo): string | undefined {
  if (!op.hasRequestBody) return undefined;
  return op.requestContentTypes.includes('application/json') ? '{}' : 'not really an image';
}

/** A valid sample value for a parameter, so that a request's only fault is the one under test. */
function sampleValue(schema: Schema): string {
  if (Array.isArray(schema.enum)) return String(schema.enum[0]);
  if (isInteger(schema)) return String(schema.minimum ?? 1);
  // Strings of another shape than an id (a signed URL's signature and content type) take their example.
  if (schema.format !== 'uuid' && Array.isArray(schema.examples) && schema.examples.length > 0)
    return String(schema.examples[0]);
  return SAMPLE_ID;
}

/** `path` with every parameter a sample UUID except `override`, plus every required query parameter. */
function pathWith(op: OperationInfo, override: Record<string, string> = {}, omitQuery: string[] = []): string {
  const path = op.path.replace(/\{([^}]+)\}/g, (_m, name: string) => encodeURIComponent(override[name] ?? SAMPLE_ID));
  const required = paramsOf(op).filter(
    (p) => p.in === 'query' && (p as { required?: boolean }).required && !omitQuery.includes(p.name),
  );
  const query = required.map((p) => `${p.name}=${encodeURIComponent(sampleValue(p.schema))}`).join('&');
  return query ? `${path}?${query}&` : `${path}?`;
}

async function expectRefusedWithoutSql(
  apiKey: string,
  op: OperationInfo,
  url: string,
  body: string | undefined,
  expected: RegExp,
): Promise<void> {
  const statements: string[] = [];
  // The authenticator records key usage in the background every 15 s; that write is no request's.
  const capture = (q: { sql: string }) => {
    if (!/^update api_keys set last_used_at = /.test(q.sql)) statements.push(q.sql);
  };
  server.deps.db.knex.on('query', capture);
  let res: Response;
  try {
    res = await server.fetch(url, {
      method: op.method,
      headers: headersFor(op, apiKey),
      ...(body !== undefined ? { body } : {}),
    });
  } finally {
    server.deps.db.knex.off('query', capture);
  }
  const text = await res.text();
  expect(res.status, `${op.operationId} ${url}: ${text}`).toBe(400);
  const envelope = JSON.parse(text) as { code: string; message: string };
  expect(envelope.code).toBe('BAD_REQUEST');
  expect(envelope.message, op.operationId).toMatch(expected);
  expect(statements, `${op.operationId} ran SQL before refusing: ${statements.join(' | ')}`).toEqual([]);
}

const checked = index.operations.filter((o) => o.security.kind !== 'public');
// A streamed body (an import's export file) is a file the pipeline never parses, not a request
// document: test/imports.test.ts covers what an import does with NULs, lone surrogates and nesting.
const jsonBodyOps = checked.filter(
  (o) => o.hasRequestBody && !o.streamsBody && o.requestContentTypes.includes('application/json'),
);

async function warmUser(): Promise<string> {
  const user = await server.user();
  // The key is now in the authenticator's cache: later requests need no SQL to authenticate.
  await server.fetch('/api/v1/appearance/custom-fonts', { headers: bearer(user.apiKey) });
  return user.apiKey;
}

// Process starts and walks over every operation: generous under a loaded CI machine.
describe('UUIDs are only the canonical 8-4-4-4-12 form', { timeout: 120_000 }, () => {
  const withUuidPath = checked.filter((op) => paramsOf(op).some((p) => p.in === 'path' && p.schema.format === 'uuid'));
  const withUuidQuery = checked.filter((op) =>
    paramsOf(op).some((p) => p.in === 'query' && p.schema.format === 'uuid'),
  );

  it('every uuid schema of the contract carries the canonical pattern', () => {
    const found: string[] = [];
    const walk = (node: unknown, where: string) => {
      if (!node || typeof node !== 'object') return;
      const s = node as Schema;
      if (s.format === 'uuid') {
        found.push(where);
        expect(s.pattern, where).toBe('^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$');
      }
      for (const [k, v] of Object.entries(node)) walk(v, `${where}/${k}`);
    };
    walk(spec, '#');
    expect(found.length).toBeGreaterThan(20);
  });

  it(`urn:uuid: ids in a path are a 400 on every operation that takes one (${withUuidPath.length} operations)`, async () => {
    expect(withUuidPath.length).toBeGreaterThan(30);
    const apiKey = await warmUser();
    for (const op of withUuidPath) {
      const name = paramsOf(op).find((p) => p.in === 'path' && p.schema.format === 'uuid')!.name;
      await expectRefusedWithoutSql(
        apiKey,
        op,
        pathWith(op, { [name]: URN }),
        anyBody(op),
        new RegExp(`${name} must be a valid UUID`),
      );
    }
  });

  it('urn:uuid: ids in a query are a 400 on every operation that takes one', async () => {
    expect(withUuidQuery.length).toBeGreaterThan(0);
    const apiKey = await warmUser();
    for (const op of withUuidQuery) {
      for (const p of paramsOf(op).filter((q) => q.in === 'query' && q.schema.format === 'uuid')) {
        await expectRefusedWithoutSql(
          apiKey,
          op,
          `${pathWith(op, {}, [p.name])}${p.name}=${encodeURIComponent(URN)}`,
          anyBody(op),
          new RegExp(`${p.name} must be a valid UUID`),
        );
      }
    }
  });

  it('urn:uuid: ids in a body are a 400', async () => {
    const { api } = await server.user();
    const res = await api.POST('/api/v1/entries', { body: { content: 'x', memberIds: [URN] } });
    expect(res.response.status).toBe(400);
    expect(res.error).toEqual({
      code: 'BAD_REQUEST',
      message: 'memberIds[0] must be a valid UUID',
      details: [{ in: 'body', pointer: '/memberIds/0', rule: 'pattern', message: 'memberIds[0] must be a valid UUID' }],
    });
  });
});

describe('integers', { timeout: 120_000 }, () => {
  const withIntegerQuery = checked.filter((op) => paramsOf(op).some((p) => p.in === 'query' && isInteger(p.schema)));

  it('every integer in the contract has a minimum and a maximum that a JSON number holds exactly', () => {
    let count = 0;
    const unbounded: string[] = [];
    const walk = (node: unknown, where: string) => {
      if (!node || typeof node !== 'object') return;
      const s = node as Schema;
      if (isInteger(s) && !where.includes('/examples')) {
        count++;
        if (typeof s.minimum !== 'number' || typeof s.maximum !== 'number' || s.maximum > Number.MAX_SAFE_INTEGER)
          unbounded.push(where);
      }
      for (const [k, v] of Object.entries(node)) walk(v, `${where}/${k}`);
    };
    walk(spec.components, '#/components');
    walk(spec.paths, '#/paths');
    expect(unbounded).toEqual([]);
    expect(count).toBeGreaterThan(10);
  });

  it(`integer query parameters take plain decimal digits within their bounds, on every operation (${withIntegerQuery.length} operations)`, async () => {
    expect(withIntegerQuery.length).toBeGreaterThan(3);
    const apiKey = await warmUser();
    const notDecimal = ['Infinity', '-Infinity', 'NaN', '1e2', '0x10', ' 10', '10 ', '+5', '1.5', '', '١٠'];
    for (const op of withIntegerQuery) {
      for (const p of paramsOf(op).filter((q) => q.in === 'query' && isInteger(q.schema))) {
        const url = (value: string) => `${pathWith(op, {}, [p.name])}${p.name}=${encodeURIComponent(value)}`;
        for (const value of notDecimal) {
          await expectRefusedWithoutSql(
            apiKey,
            op,
            url(value),
            undefined,
            new RegExp(`^${p.name} must be an integer written in decimal digits$`),
          );
        }
        await expectRefusedWithoutSql(
          apiKey,
          op,
          url('9223372036854775807'),
          undefined,
          new RegExp(`^${p.name} must be <= ${p.schema.maximum}$`),
        );
        await expectRefusedWithoutSql(
          apiKey,
          op,
          url(String(p.schema.maximum! + 1)),
          undefined,
          new RegExp(`^${p.name} must be <= ${p.schema.maximum}$`),
        );
        await expectRefusedWithoutSql(
          apiKey,
          op,
          url(String(p.schema.minimum! - 1)),
          undefined,
          new RegExp(`^${p.name} must be >= ${p.schema.minimum}$`),
        );
        await expectRefusedWithoutSql(
          apiKey,
          op,
          `${url('1')}&${p.name}=2`,
          undefined,
          new RegExp(`^${p.name} must be given at most once$`),
        );
      }
    }
  });

  it("a JSON number past an integer field's bounds (1e400 parses to Infinity) is a 400", async () => {
    const { api, apiKey } = await server.user();
    for (const raw of ['1e400', '-1e400', '9223372036854775807', '3651']) {
      const res = await server.fetch('/api/v1/trash/settings', {
        method: 'PATCH',
        headers: jsonHeaders(apiKey),
        body: `{"retentionDays":${raw}}`,
      });
      expect(res.status, raw).toBe(400);
      expect(((await res.json()) as { message: string }).message).toMatch(/^retentionDays must be /);
    }
    expect((await api.GET('/api/v1/trash/settings')).data?.retentionDays).toBe(30);
  });
});

describe('strings never hold U+0000 or an unpaired surrogate', { timeout: 120_000 }, () => {
  it(`a NUL in any JSON body field is a 400 naming the field, on every operation with a JSON body (${jsonBodyOps.length} operations)`, async () => {
    expect(jsonBodyOps.length).toBeGreaterThan(30);
    const apiKey = await warmUser();
    for (const op of jsonBodyOps) {
      await expectRefusedWithoutSql(
        apiKey,
        op,
        pathWith(op),
        JSON.stringify({ name: 'a\u0000b' }),
        /^name must not contain the NUL character \(U\+0000\)$/,
      );
      await expectRefusedWithoutSql(
        apiKey,
        op,
        pathWith(op),
        JSON.stringify({ terms: { member: { singular: ['ok', 'x\u0000'] } } }),
        /^terms\.member\.singular\[1\] must not contain the NUL character/,
      );
    }
  });

  it(`an escaped lone surrogate in any JSON body field or key is a 400, on every operation with a JSON body`, async () => {
    const apiKey = await warmUser();
    for (const op of jsonBodyOps) {
      // The JSON text carries the escape itself: JSON.stringify would write a lone surrogate as an escape too.
      await expectRefusedWithoutSql(
        apiKey,
        op,
        pathWith(op),
        '{"member":{"singular":"x\\ud800y"}}',
        /^member\.singular must not contain an unpaired UTF-16 surrogate/,
      );
      await expectRefusedWithoutSql(
        apiKey,
        op,
        pathWith(op),
        '{"\\udc00":1}',
        /^A field name in the request body must not contain an unpaired UTF-16 surrogate/,
      );
    }
    // A well-formed pair (an emoji written as escapes) is fine.
    const { api } = await server.user();
    expect((await api.POST('/api/v1/members', { body: { name: 'Sun \ud83c\udf1e' } })).response.status).toBe(201);
  });

  it('a NUL in a path or query parameter is a 400 on every operation that takes one', async () => {
    const apiKey = await warmUser();
    for (const op of checked) {
      const params = paramsOf(op);
      const pathParam = params.find((p) => p.in === 'path');
      if (pathParam) {
        await expectRefusedWithoutSql(
          apiKey,
          op,
          pathWith(op, { [pathParam.name]: 'a\u0000b' }),
          anyBody(op),
          new RegExp(`^${pathParam.name} must not contain the NUL character`),
        );
      }
      const queryParam = params.find((p) => p.in === 'query');
      if (queryParam) {
        await expectRefusedWithoutSql(
          apiKey,
          op,
          `${pathWith(op, {}, [queryParam.name])}${queryParam.name}=a%00b`,
          anyBody(op),
          new RegExp(`^${queryParam.name} must not contain the NUL character`),
        );
      }
    }
  });

  it('the examples from the issue: member description with NUL, terminology labels with a lone surrogate', async () => {
    const { api, apiKey } = await server.user();
    const member = await server.fetch('/api/v1/members', {
      method: 'POST',
      headers: jsonHeaders(apiKey),
      body: '{"name":"x","description":"a\\u0000b"}',
    });
    expect(member.status).toBe(400);
    const nul = 'description must not contain the NUL character (U+0000)';
    expect(await member.json()).toEqual({
      code: 'BAD_REQUEST',
      message: nul,
      details: [{ in: 'body', pointer: '/description', rule: 'nulCharacter', message: nul }],
    });
    for (const path of ['/api/v1/terminology']) {
      const res = await server.fetch(path, {
        method: 'PATCH',
        headers: jsonHeaders(apiKey),
        body: '{"member":{"singular":"x\\ud800y"}}',
      });
      expect(res.status).toBe(400);
    }
    expect((await api.GET('/api/v1/terminology')).data).toBeNull();
    expect((await api.GET('/api/v1/members')).data).toEqual([]);
  });
});

describe('JSON bodies nest at most 32 levels', () => {
  // Found by npm run fuzz: 20,000 nested arrays overflowed the stack of a recursive walk (a 500).
  const deepArray = (depth: number) => '['.repeat(depth) + ']'.repeat(depth);
  const deepObject = (depth: number) => '{"a":'.repeat(depth) + '1' + '}'.repeat(depth);

  it(`a body nested deeper than 32 levels is a 400, however deep, on every operation with a JSON body`, async () => {
    const apiKey = await warmUser();
    for (const op of jsonBodyOps) {
      for (const body of [
        deepArray(33),
        deepObject(33),
        deepArray(20_000),
        deepObject(20_000),
        `{"name":"x","terms":${deepArray(100_000)}}`,
      ]) {
        await expectRefusedWithoutSql(apiKey, op, pathWith(op), body, /^Request body is nested deeper than 32 levels$/);
      }
    }
  });

  it('32 levels are still read (and then judged by the contract)', async () => {
    const { apiKey } = await server.user();
    const res = await server.fetch('/api/v1/members', {
      method: 'POST',
      headers: jsonHeaders(apiKey),
      body: `{"name":"x","aboutTags":${deepArray(31)}}`,
    });
    expect(res.status).toBe(400);
    expect(((await res.json()) as { message: string }).message).toMatch(/^aboutTags\[0\] must be string/);
  });
});

/**
 * Walks every operation of the bundled contract: API-key operations answer 401 without a key,
 * 403 with a key lacking the scope, and 403 to a read-only key when they write; admin
 * operations answer 401 without the operator token. Also checks the contract's own conventions.
 */
import { describe, expect, it } from 'vitest';
import { loadBundledSpec, OperationIndex, SCOPES, type OperationInfo } from '../server/http/spec.ts';
import { handlers } from '../server/handlers.ts';
import { useServer } from './helpers/server.ts';

const spec = loadBundledSpec();
const index = new OperationIndex(spec);
const UNAUTHORIZED = 'Missing or invalid API key. Use Authorization: Bearer <token>.';
const SAMPLE_ID = '00000000-0000-4000-8000-000000000000';

/**
 * Every `$ref` cycle of a document, each as the chain of pointers that closes it. A `$ref` leads to
 * the node it names, and from there to every `$ref` inside that node (at any depth). Contract-test
 * tools (Portman, and the converters under it) refuse a document with one, though OpenAPI 3.1
 * allows it; a reference that names nothing is reported too.
 */
function refCycles(doc: unknown): string[] {
  const resolve = (ref: string): unknown =>
    ref
      .slice(2)
      .split('/')
      .map((part) => part.replaceAll('~1', '/').replaceAll('~0', '~'))
      .reduce<unknown>((node, key) => (node as Record<string, unknown> | undefined)?.[key], doc);
  const refsIn = (node: unknown, out = new Set<string>()): Set<string> => {
    if (node && typeof node === 'object') {
      const ref = (node as { $ref?: unknown }).$ref;
      if (typeof ref === 'string') out.add(ref);
      for (const value of Object.values(node)) refsIn(value, out);
    }
    return out;
  };
  const problems: string[] = [];
  const state = new Map<string, 'open' | 'done'>();
  const path: string[] = [];
  const visit = (ref: string): void => {
    if (state.get(ref) === 'done') return;
    if (state.get(ref) === 'open') {
      problems.push([...path.slice(path.indexOf(ref)), ref].join(' -> '));
      return;
    }
    state.set(ref, 'open');
    path.push(ref);
    const target = ref.startsWith('#/') ? resolve(ref) : undefined;
    if (target === undefined) problems.push(`${ref} names nothing in the document`);
    else for (const next of refsIn(target)) visit(next);
    path.pop();
    state.set(ref, 'done');
  };
  for (const ref of refsIn(doc)) visit(ref);
  return problems;
}

function concretePath(op: OperationInfo): string {
  return op.path.replace(/\{[^}]+\}/g, SAMPLE_ID);
}

function request(op: OperationInfo, headers: Record<string, string>): RequestInit {
  const init: RequestInit = { method: op.method, headers: { ...headers } };
  if (op.hasRequestBody) {
    init.body = '{}';
    (init.headers as Record<string, string>)['Content-Type'] = 'application/json';
  }
  return init;
}

const apiKeyOps = index.operations.filter((o) => o.security.kind === 'apiKey');
/** Operations any valid key may call, whatever its scopes (`apiKey: []`). */
const anyKeyOps = index.operations.filter((o) => o.security.kind === 'anyKey');
const adminOps = index.operations.filter((o) => o.security.kind === 'admin');
const writeOps = apiKeyOps.filter((o) => o.security.kind === 'apiKey' && o.security.level === 'read_write');

describe('contract conventions', () => {
  it('has a handler for every operation and no handler without one', () => {
    expect(Object.keys(handlers).sort()).toEqual(index.operations.map((o) => o.operationId).sort());
  });

  it('uses camelCase operationIds, one tag, a summary and success examples on every operation', () => {
    for (const [path, item] of Object.entries(spec.paths)) {
      for (const [method, raw] of Object.entries(item)) {
        if (!['get', 'put', 'post', 'patch', 'delete'].includes(method)) continue;
        const op = raw as {
          operationId: string;
          tags?: string[];
          summary?: string;
          responses: Record<string, { content?: Record<string, { examples?: unknown; example?: unknown }> }>;
        };
        expect(op.operationId, `${method} ${path}`).toMatch(/^[a-z][a-zA-Z0-9]+$/);
        expect(op.tags, `${op.operationId} tags`).toHaveLength(1);
        expect(op.summary, `${op.operationId} summary`).toBeTruthy();
        for (const [status, response] of Object.entries(op.responses)) {
          for (const [type, media] of Object.entries(response.content ?? {})) {
            expect(media.examples ?? media.example, `${op.operationId} ${status} ${type} example`).toBeDefined();
          }
        }
      }
    }
  });

  it('reads scopes only from the 16 scope names, at read for GET and read_write otherwise', () => {
    // POST /exports writes none of the account's data: it reads all of it (read on every scope, issue 27).
    const readingPosts = ['createExport'];
    for (const op of apiKeyOps) {
      if (op.security.kind !== 'apiKey') continue;
      expect(SCOPES).toContain(op.security.scope);
      const reads = op.method === 'GET' || readingPosts.includes(op.operationId);
      expect(op.security.level, op.operationId).toBe(reads ? 'read' : 'read_write');
    }
  });

  it('declares 400, 401, 403, 429, 500 and 503 on every API-key operation, 401 and 503 on admin ones, and 400/413/415 wherever a body is taken (and 408 where the pipeline reads it)', () => {
    for (const op of apiKeyOps) {
      for (const status of [400, 401, 403, 429, 500, 503])
        expect(op.declaredStatuses, `${op.operationId} ${status}`).toContain(status);
      if (op.hasRequestBody)
        for (const status of [400, 413, 415])
          expect(op.declaredStatuses, `${op.operationId} ${status}`).toContain(status);
    }
    for (const op of [...apiKeyOps, ...adminOps])
      if (op.hasRequestBody && !op.streamsBody) expect(op.declaredStatuses, `${op.operationId} 408`).toContain(408);
    for (const op of adminOps)
      for (const status of [401, 503]) expect(op.declaredStatuses, `${op.operationId} ${status}`).toContain(status);
    for (const op of anyKeyOps)
      for (const status of [400, 401, 429, 500, 503])
        expect(op.declaredStatuses, `${op.operationId} ${status}`).toContain(status);
  });

  it('takes an Idempotency-Key on every POST of /api/v1 and declares its 409 (with Retry-After) and 422', () => {
    const posts = index.operations.filter((o) => o.method === 'POST' && o.path.startsWith('/api/v1/'));
    expect(posts.length).toBeGreaterThan(60);
    const components = spec.components as { responses: Record<string, Response> };
    type Response = { $ref?: string; headers?: Record<string, unknown>; content?: Record<string, unknown> };
    const deref = (r: Response): Response => (r.$ref ? components.responses[r.$ref.split('/').pop()!]! : r);
    for (const op of posts) {
      const raw = (
        spec.paths[op.path] as Record<
          string,
          { parameters?: Array<{ $ref?: string }>; responses: Record<string, Response> }
        >
      ).post!;
      expect(
        raw.parameters?.map((p) => p.$ref),
        op.operationId,
      ).toContain('#/components/parameters/IdempotencyKey');
      const conflict = deref(raw.responses['409']!);
      expect(conflict.headers, `${op.operationId} 409`).toHaveProperty('Retry-After');
      expect(JSON.stringify(conflict.content), `${op.operationId} 409`).toContain(
        'Idempotency-Key is still being processed',
      );
      expect(JSON.stringify(deref(raw.responses['422']!).content), `${op.operationId} 422`).toContain(
        'IDEMPOTENCY_KEY_MISMATCH',
      );
    }
    for (const op of index.operations.filter((o) => o.method !== 'POST' || !o.path.startsWith('/api/v1/'))) {
      const raw = (spec.paths[op.path] as Record<string, { parameters?: Array<{ $ref?: string }> }>)[
        op.method.toLowerCase()
      ]!;
      expect(raw.parameters?.map((p) => p.$ref) ?? [], op.operationId).not.toContain(
        '#/components/parameters/IdempotencyKey',
      );
    }
  });

  it('lets only GET /api/v1/me and the event stream be called without a scope', () => {
    // The stream filters each event by its area's scope instead (docs/events.md).
    expect(anyKeyOps.map((o) => o.operationId).sort()).toEqual(['getMe', 'streamEvents']);
  });

  it('has no $ref cycle in generated/openapi.json (contract-test tools such as Portman refuse recursive schemas)', () => {
    // The check itself finds a self-reference, a cycle through two schemas and a dangling reference.
    const node = { type: 'object', properties: { children: { type: 'array', items: { $ref: '#/s/Node' } } } };
    expect(refCycles({ s: { Node: node } })).toEqual(['#/s/Node -> #/s/Node']);
    expect(refCycles({ s: { A: { $ref: '#/s/B' }, B: { items: { $ref: '#/s/A' } } } })).toEqual([
      '#/s/B -> #/s/A -> #/s/B',
    ]);
    expect(refCycles({ s: { A: { $ref: '#/s/Missing' } } })).toEqual(['#/s/Missing names nothing in the document']);

    expect(refCycles(spec)).toEqual([]);
  });
});

describe('every operation enforces authentication and scope', () => {
  const server = useServer();

  it.each([...apiKeyOps, ...anyKeyOps].map((o) => [`${o.method} ${o.path}`, o] as const))(
    '%s: no key → 401',
    async (_name, op) => {
      const res = await server.fetch(concretePath(op), request(op, {}));
      expect(res.status).toBe(401);
      expect(await res.json()).toEqual({ code: 'UNAUTHORIZED', message: UNAUTHORIZED });
    },
  );

  it.each(apiKeyOps.map((o) => [`${o.method} ${o.path}`, o] as const))(
    '%s: key without the scope → 403',
    async (_name, op) => {
      const { apiKey } = await server.user({ scopes: {} });
      const res = await server.fetch(concretePath(op), request(op, { Authorization: `Bearer ${apiKey}` }));
      expect(res.status).toBe(403);
      const body = await res.json();
      if (op.security.kind !== 'apiKey') throw new Error('unreachable');
      expect(body).toEqual({
        code: 'FORBIDDEN',
        message: `Missing API key scope: ${op.security.scope} requires ${op.security.level}`,
      });
    },
  );

  it.each(writeOps.map((o) => [`${o.method} ${o.path}`, o] as const))('%s: read-only key → 403', async (_name, op) => {
    const readOnly = Object.fromEntries(SCOPES.map((s) => [s, 'read']));
    const { apiKey } = await server.user({ scopes: readOnly });
    const res = await server.fetch(concretePath(op), request(op, { Authorization: `Bearer ${apiKey}` }));
    expect(res.status).toBe(403);
    if (op.security.kind !== 'apiKey') throw new Error('unreachable');
    expect(await res.json()).toEqual({
      code: 'FORBIDDEN',
      message: `Missing API key scope: ${op.security.scope} requires read_write`,
    });
  });

  it.each(adminOps.map((o) => [`${o.method} ${o.path}`, o] as const))(
    '%s: no or wrong operator token → 401',
    async (_name, op) => {
      for (const headers of [{}, { Authorization: 'Bearer not-the-admin-token' }] as Array<Record<string, string>>) {
        const res = await server.fetch(concretePath(op), request(op, headers));
        expect(res.status).toBe(401);
        expect((await res.json()).code).toBe('UNAUTHORIZED');
      }
    },
  );

  it('does not accept an API key on admin routes or the admin token on API routes', async () => {
    const { apiKey, userId } = await server.user();
    const createKey = adminOps.find((o) => o.operationId === 'createApiKey')!;
    const asKey = await server.fetch(
      `/admin/v1/accounts/${userId}/api-keys`,
      request(createKey, { Authorization: `Bearer ${apiKey}` }),
    );
    expect(asKey.status).toBe(401);
    const asAdmin = await server.fetch('/api/v1/appearance', {
      headers: { Authorization: `Bearer ${server.adminToken}` },
    });
    expect(asAdmin.status).toBe(401);
  });
});

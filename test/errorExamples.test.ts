/**
 * The error examples in the contract are what the server really answers (frontend teams mock
 * with them): every 403 example names the operation's own scope, every 404 example that an
 * unknown id can reach is the server's message for that operation, and every named 400 example
 * (one per kind of mistake, with the request that makes it in `x-request`) is exactly the body the
 * server answers that request with. The hand-written 400 examples after them (a business rule's
 * refusal) state their request in `x-fixture-request` instead, checked against a fixture-mode
 * server by test/businessRuleExamples.test.ts.
 */
import { describe, expect, it } from 'vitest';
import { Contract } from '../scripts/fuzz/contract.ts';
import { type ExampleRequest, httpRequest, KINDS, mistakesOf } from '../scripts/error-examples/mistakes.ts';
import { loadBundledSpec, OperationIndex, type OperationInfo } from '../server/http/spec.ts';
import { bearer, useServer } from './helpers/server.ts';

const spec = loadBundledSpec() as unknown as {
  paths: Record<string, Record<string, RawOperation>>;
  components: Record<string, Record<string, unknown>>;
};
const index = new OperationIndex(spec as never);
const UNKNOWN = '00000000-0000-4000-8000-00000000dead';

interface RawResponse {
  $ref?: string;
  content?: Record<string, { examples?: Record<string, { value?: { code: string; message: string } }> }>;
}
interface RawOperation {
  operationId: string;
  parameters?: Array<{
    $ref?: string;
    name?: string;
    in?: string;
    required?: boolean;
    schema?: { enum?: string[]; type?: string };
  }>;
  requestBody?: { content?: Record<string, { examples?: Record<string, { value: unknown }> }> };
  responses: Record<string, RawResponse>;
}

function raw(op: OperationInfo): RawOperation {
  return spec.paths[op.path]![op.method.toLowerCase()]!;
}

function resolve<T>(node: T & { $ref?: string }): T {
  if (!node.$ref) return node;
  const [, , section, name] = node.$ref.split('/');
  return spec.components[section!]![name!] as T;
}

/** The envelope examples an operation declares for a status. */
function examples(op: OperationInfo, status: number): Array<{ code: string; message: string }> {
  const response = raw(op).responses[String(status)];
  if (!response) return [];
  const media = resolve(response).content?.['application/json'];
  return Object.values(media?.examples ?? {})
    .map((e) => resolve(e as { $ref?: string; value?: { code: string; message: string } }).value!)
    .filter(Boolean);
}

/** The 400 examples of an operation that state their request, in the contract's order. */
function named400(
  op: OperationInfo,
): Array<{ name: string; summary?: string; request: ExampleRequest; value: unknown }> {
  const response = raw(op).responses['400'];
  const media = response ? resolve(response).content?.['application/json'] : undefined;
  return Object.entries(media?.examples ?? {}).flatMap(([name, e]) => {
    const example = resolve(e as { $ref?: string; summary?: string; value?: unknown; 'x-request'?: ExampleRequest });
    return example['x-request']
      ? [{ name, summary: example.summary, request: example['x-request'], value: example.value }]
      : [];
  });
}

const contract = new Contract(spec as never);

const apiKeyOps = index.operations.filter((o) => o.security.kind === 'apiKey');

// Process starts and walks over every operation: generous under a loaded CI machine.
describe('error examples in the contract', { timeout: 120_000 }, () => {
  it('every API-key operation lists among its 403 examples the exact message for its own scope', () => {
    for (const op of apiKeyOps) {
      if (op.security.kind !== 'apiKey') continue;
      expect(examples(op, 403), op.operationId).toContainEqual({
        code: 'FORBIDDEN',
        message: `Missing API key scope: ${op.security.scope} requires ${op.security.level}`,
      });
    }
  });

  it('every declared error status has at least one example whose code fits the status', () => {
    const codes: Record<string, string[]> = {
      400: ['BAD_REQUEST'],
      401: ['UNAUTHORIZED'],
      403: ['FORBIDDEN', 'NOTE_LIMIT_REACHED'],
      404: ['NOT_FOUND'],
      409: ['CONFLICT'],
      408: ['REQUEST_TIMEOUT'],
      413: ['PAYLOAD_TOO_LARGE'],
      415: ['UNSUPPORTED_MEDIA_TYPE'],
      422: ['IDEMPOTENCY_KEY_MISMATCH'],
      429: ['RATE_LIMITED'],
      500: ['INTERNAL'],
      503: ['PRECONDITION_FAILED'],
    };
    for (const op of index.operations) {
      for (const status of op.declaredStatuses.filter((s) => s >= 400)) {
        const content = resolve(raw(op).responses[String(status)]!).content;
        if (!content?.['application/json']) continue; // a bodiless error (media routes answer 404 with an empty body)
        const found = examples(op, status);
        expect(found.length, `${op.operationId} ${status}`).toBeGreaterThan(0);
        for (const e of found) expect(codes[status], `${op.operationId} ${status} ${e.code}`).toContain(e.code);
      }
    }
  });

  it('every operation has a named 400 example for each kind of mistake its request can make, listed first', () => {
    const kinds = Object.keys(KINDS);
    let count = 0;
    for (const op of index.operations) {
      const fuzzOp = contract.operations.find((o) => o.operationId === op.operationId);
      const named = named400(op);
      count += named.length;
      // The event stream (not in the fuzzer's walk) keeps its hand-written examples.
      const expected = fuzzOp ? mistakesOf(contract, fuzzOp) : [];
      expect(
        named.map((e) => e.name),
        op.operationId,
      ).toEqual(expected.map((m) => m.name));
      expect(named.map((e) => e.request)).toEqual(expected.map((m) => m.request));
      for (const e of named) expect(e.summary, `${op.operationId} ${e.name}`).toBe(KINDS[e.name as keyof typeof KINDS]);
      expect(kinds).toEqual(expect.arrayContaining(named.map((e) => e.name)));
      // Generated examples come first: the first is what Prism answers with `Prefer: code=400`.
      const all = examples(op, 400) as unknown[];
      if (named.length > 0) expect(all[0], op.operationId).toEqual(named[0]!.value);
      // The rest are a business rule's refusal written by hand: a service's 400 lists no details.
      for (const e of all.slice(named.length)) expect(e, op.operationId).not.toHaveProperty('details');
    }
    expect(count).toBeGreaterThan(800);
  });

  describe('against the real server', () => {
    const server = useServer({ env: { API_KEY_CACHE_TTL_MS: '300000' } });

    it('every named 400 example is exactly what the server answers the request it states', async () => {
      const user = await server.user();
      let checked = 0;
      for (const op of index.operations) {
        const authorization =
          op.security.kind === 'admin'
            ? `Bearer ${server.adminToken}`
            : op.security.kind === 'apiKey' || op.security.kind === 'anyKey'
              ? `Bearer ${user.apiKey}`
              : undefined;
        for (const example of named400(op)) {
          const { url, init } = httpRequest(op, example.request, server.baseUrl, authorization);
          const res = await fetch(url, init);
          const label = `${op.operationId} ${example.name}`;
          expect(res.status, label).toBe(400);
          expect(await res.json(), label).toEqual(example.value);
          checked++;
        }
      }
      expect(checked).toBeGreaterThan(800);
    });

    it('a request naming unknown ids gets a 404 message the operation lists among its 404 examples', async () => {
      const user = await server.user();
      const checked: string[] = [];
      for (const op of index.operations.filter(
        (o) => o.declaredStatuses.includes(404) && o.security.kind !== 'public',
      )) {
        const token = op.security.kind === 'admin' ? server.adminToken : user.apiKey;
        const r = raw(op);
        const bodyExample = r.requestBody?.content?.['application/json']?.examples;
        const body = bodyExample
          ? JSON.stringify(Object.values(bodyExample)[0]!.value)
          : op.hasRequestBody
            ? '{}'
            : undefined;
        const params = [
          ...(r.parameters ?? []),
          ...((spec.paths[op.path] as { parameters?: RawOperation['parameters'] }).parameters ?? []),
        ].map((p) => resolve(p));
        const query = params
          .filter((p) => p.in === 'query' && p.required)
          .map((p) => `${p.name}=${p.schema?.enum?.[0] ?? UNKNOWN}`)
          .join('&');
        const url = op.path.replace(/\{[^}]+\}/g, UNKNOWN) + (query ? `?${query}` : '');
        const headers = {
          ...bearer(token),
          ...(body !== undefined
            ? {
                'Content-Type': op.requestContentTypes.includes('application/json')
                  ? 'application/json'
                  : op.requestContentTypes[0]!,
              }
            : {}),
        };
        const res = await server.fetch(url, { method: op.method, headers, ...(body !== undefined ? { body } : {}) });
        if (res.status !== 404) {
          await res.arrayBuffer();
          continue; // this operation's 404 needs more than an unknown id (checked in its own test file)
        }
        const text = await res.text();
        if (!text) continue; // bodiless 404 (media)
        const envelope = JSON.parse(text) as { code: string; message: string };
        expect(
          examples(op, 404).map((e) => e.message),
          `${op.operationId}`,
        ).toContain(envelope.message);
        checked.push(op.operationId);
      }
      expect(checked.length).toBeGreaterThan(40);
    });
  });
});

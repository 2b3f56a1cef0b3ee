/**
 * The hand-written 400 examples of the contract (a business rule's refusal, such as "You cannot
 * block yourself", listed after the generated named examples that test/errorExamples.test.ts
 * checks) are exactly what the real server answers: each states in `x-fixture-request` the request
 * that gets it from a server in fixture mode (SEED_EXAMPLES=true, docs/contract-testing.md: the
 * accounts, keys and ids of server/fixtures/), and this test sends every one of them, in the
 * contract's order, to one such server and compares status and body (code, message, no details).
 * An example without `x-fixture-request` fails the test.
 *
 *   x-fixture-request:
 *     as: friend                    # who sends it: aurora_system's all-scopes key when left out;
 *                                   # `friend` (lantern's key), `admin` (the admin token), or a
 *                                   # key a setup step saved ("${name}")
 *     path: { friendUserId: … }     # as in `x-request`: every path parameter, unencoded;
 *     query: { cursor: … }          # the query;
 *     headers: { Last-Event-ID: … } # more request headers;
 *     body: { … }                   # the JSON body, or `bodyText` with its `contentType`;
 *     url: "${uploadUrl}"           # instead of path and query: a URL the server signed (saved)
 *     setup:                        # sent first, in order; each must answer 2xx
 *       - method: POST
 *         path: /api/v1/social/widgets   # the path itself, query included
 *         body: { … }                    # and `as`, `bodyText`, `contentType` as above
 *         save: { widgetId: widgetId }   # names for fields of the JSON answer ("0._id", "upload.url")
 *       - store: "staging/<userId>/${stagingId}"  # or bytes written straight into object storage,
 *         bodyText: …                             # as a bucket can hold them (S3 does not sniff an
 *         contentType: image/png                  # upload; the filesystem's upload route refuses
 *                                                 # what a later check would)
 *
 * `${name}` in any string of the request or a later step is a value saved before it; names belong
 * to their example. Setup steps make only what their example needs (a widget, a key, a staged
 * upload), so no example changes what another reads. The server has GIPHY configured (with a key
 * it never calls), whose cursor rules the GIF examples show.
 */
import { isDeepStrictEqual } from 'node:util';
import { beforeAll, describe, expect, it } from 'vitest';
import { httpRequest } from '../scripts/error-examples/mistakes.ts';
import { backgroundContext } from '../server/context.ts';
import { seedExamples } from '../server/fixtures/examples.ts';
import { EXAMPLE_KEYS } from '../server/fixtures/keys.ts';
import { loadBundledSpec, OperationIndex, type OperationInfo } from '../server/http/spec.ts';
import { useServer } from './helpers/server.ts';

type Json = Record<string, unknown>;

interface Sent {
  as?: string;
  body?: unknown;
  bodyText?: string;
  contentType?: string;
}

interface SetupStep extends Sent {
  method?: string;
  path?: string;
  save?: Record<string, string>;
  store?: string;
}

interface FixtureRequest extends Sent {
  path?: Record<string, string>;
  query?: Record<string, string>;
  headers?: Record<string, string>;
  url?: string;
  setup?: SetupStep[];
}

const REQUEST_FIELDS = ['as', 'path', 'query', 'headers', 'body', 'bodyText', 'contentType', 'url', 'setup'];
const STEP_FIELDS = ['as', 'method', 'path', 'body', 'bodyText', 'contentType', 'save', 'store'];

/** Fields the format does not have (a typo would otherwise send another request than it says). */
function unknownFields(request: FixtureRequest): string[] {
  return [
    ...Object.keys(request).filter((k) => !REQUEST_FIELDS.includes(k)),
    ...(request.setup ?? []).flatMap((step) => Object.keys(step).filter((k) => !STEP_FIELDS.includes(k))),
  ];
}

interface HandWritten {
  label: string;
  request: FixtureRequest | undefined;
  value: unknown;
}

const spec = loadBundledSpec() as unknown as {
  paths: Record<string, Record<string, { responses: Record<string, Json> }>>;
  components: Record<string, Record<string, Json>>;
};
const index = new OperationIndex(spec as never);

function resolve(node: Json): Json {
  if (typeof node.$ref !== 'string') return node;
  const [, , section, name] = node.$ref.split('/');
  return spec.components[section!]![name!]!;
}

/** The 400 examples of an operation that state no `x-request`: those written by hand. */
function handWritten(op: OperationInfo): HandWritten[] {
  const response = spec.paths[op.path]![op.method.toLowerCase()]!.responses['400'];
  const content = response ? (resolve(response).content as Json | undefined) : undefined;
  const examples = ((content?.['application/json'] as Json | undefined)?.examples ?? {}) as Record<string, Json>;
  return Object.entries(examples)
    .map(([name, e]) => [name, resolve(e)] as const)
    .filter(([, e]) => e['x-request'] === undefined)
    .map(([name, e]) => ({
      label: `${op.operationId} ${name}`,
      request: e['x-fixture-request'] as FixtureRequest | undefined,
      value: e.value,
    }));
}

/** `value` with every `${name}` in its strings replaced by the value saved under that name. */
function substitute<T>(value: T, saved: Map<string, string>): T {
  if (typeof value === 'string')
    return value.replace(/\$\{(\w+)\}/g, (_, name: string) => {
      const v = saved.get(name);
      if (v === undefined) throw new Error(`\${${name}} is not saved by an earlier setup step`);
      return v;
    }) as T;
  if (Array.isArray(value)) return value.map((v) => substitute(v, saved)) as T;
  if (value !== null && typeof value === 'object')
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, substitute(v, saved)])) as T;
  return value;
}

/** The field at a dotted path (`upload.url`, `0._id`) of a JSON answer. */
function field(body: unknown, path: string): string {
  let at = body;
  for (const part of path.split('.')) at = (at as Record<string, unknown> | undefined)?.[part];
  if (typeof at !== 'string') throw new Error(`the answer has no string at ${path}: ${JSON.stringify(body)}`);
  return at;
}

describe('hand-written 400 examples against a fixture-mode server', { timeout: 120_000 }, () => {
  const server = useServer({
    env: { GIF_PROVIDER: 'giphy', GIF_API_KEY: 'fixture-gif-key', GIF_API_BASE_URL: 'http://127.0.0.1:9' },
  });

  // Fixture mode: the examples' accounts, keys and rows on the server's fresh database.
  beforeAll(async () => {
    await seedExamples(
      backgroundContext({ ...server.deps, db: server.deps.db.knex }, { kind: 'system', job: 'examples_seed' }),
    );
  });

  function authorization(as: string | undefined): string {
    if (as === undefined) return `Bearer ${EXAMPLE_KEYS.owner.token}`;
    if (as === 'friend') return `Bearer ${EXAMPLE_KEYS.friend.token}`;
    if (as === 'admin') return `Bearer ${server.adminToken}`;
    if (as.startsWith('adk_')) return `Bearer ${as}`;
    throw new Error(`as: ${as} is not friend, admin or a saved key`);
  }

  function sent(s: Sent): { headers: Record<string, string>; body?: string } {
    const headers = { Authorization: authorization(s.as) };
    if (s.bodyText !== undefined)
      return { headers: { ...headers, 'Content-Type': s.contentType ?? 'application/json' }, body: s.bodyText };
    if (s.body !== undefined)
      return { headers: { ...headers, 'Content-Type': 'application/json' }, body: JSON.stringify(s.body) };
    return { headers };
  }

  async function runSetup(steps: SetupStep[], saved: Map<string, string>): Promise<void> {
    for (const raw of steps) {
      const step = substitute(raw, saved);
      if (step.store !== undefined) {
        await server.deps.storage!.put(step.store, Buffer.from(step.bodyText ?? ''), step.contentType!);
        continue;
      }
      const res = await server.fetch(step.path!, { method: step.method, ...sent(step) });
      const text = await res.text();
      if (!res.ok) throw new Error(`setup ${step.method} ${step.path}: ${res.status} ${text}`);
      for (const [name, path] of Object.entries(step.save ?? {})) saved.set(name, field(JSON.parse(text), path));
    }
  }

  it('every hand-written 400 example is exactly what the server answers the request it states', async () => {
    const problems: string[] = [];
    let checked = 0;
    for (const op of index.operations) {
      for (const example of handWritten(op)) {
        if (!example.request) {
          problems.push(`${example.label}: no x-fixture-request`);
          continue;
        }
        const unknown = unknownFields(example.request);
        if (unknown.length > 0) {
          problems.push(`${example.label}: x-fixture-request has no field ${unknown.join(', ')}`);
          continue;
        }
        try {
          const saved = new Map<string, string>();
          await runSetup(example.request.setup ?? [], saved);
          const { setup: _, ...stated } = example.request;
          const { url: signed, headers, ...request } = substitute(stated, saved);
          const { body, headers: own } = sent(request);
          // With an empty base URL, httpRequest gives the path and query.
          const target = signed ?? httpRequest(op, request, '', undefined).url;
          const res = await server.fetch(target, {
            method: op.method,
            headers: { ...own, ...headers },
            ...(body !== undefined ? { body } : {}),
            // An example that is no refusal could open an endless answer (the event stream).
            signal: AbortSignal.timeout(15_000),
          });
          const answer = await res.text();
          let parsed: unknown;
          try {
            parsed = JSON.parse(answer);
          } catch {
            parsed = answer; // not JSON: reported as it is
          }
          if (res.status !== 400 || !isDeepStrictEqual(parsed, example.value))
            problems.push(`${example.label}: ${res.status} ${answer}, not 400 ${JSON.stringify(example.value)}`);
          else checked++;
        } catch (err) {
          problems.push(`${example.label}: ${(err as Error).message}`);
        }
      }
    }
    expect(problems).toEqual([]);
    expect(checked).toBeGreaterThan(80);
  });
});

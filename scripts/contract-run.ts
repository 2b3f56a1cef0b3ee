/**
 * The contract's examples, replayed against a real server (docs/contract-testing.md): Portman turns
 * generated/openapi.json into a Postman collection with contract tests (the project's config in
 * .portman/), newman runs it, and every operation must answer as documented: its success status,
 * content type and a body that matches its schema. Operations that cannot succeed offline are
 * listed in the Portman config with their reason and expected to answer their documented 503.
 *
 *   npm run contract                      a fixture-mode server (SEED_EXAMPLES=true) on a fresh
 *                                         embedded database in a temporary DATA_DIR, then stopped
 *   npm run contract -- --url URL         a fixture-mode server already running at URL
 *                                         (CONTRACT_ADMIN_TOKEN: its admin token)
 *   npm run contract -- --keep DIR        keep the collection and newman's JSON report in DIR
 *
 * Prints one line per operation and the count; exits 1 unless every operation of the contract ran
 * and answered as documented.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import newman from 'newman';
import { EXAMPLE_KEYS } from '../server/fixtures/keys.ts';

const root = resolve(import.meta.dirname, '..');
const bin = (name: string) => join(root, 'node_modules', '.bin', name);

const METHODS = ['get', 'put', 'post', 'patch', 'delete'] as const;

const GIF_OFFLINE = 'needs the GIF provider (Tenor or GIPHY) on the internet and GIF_API_KEY: 503 PRECONDITION_FAILED';

/**
 * Operations that cannot succeed offline, and why; the Portman config expects their documented 503
 * (the contract test with `openApiResponse: "503"`), and this list must name the same operations.
 */
const OFFLINE: Record<string, string> = {
  searchMessagingGifs: GIF_OFFLINE,
  browseMessagingGifs: GIF_OFFLINE,
  listMessagingGifCategories: GIF_OFFLINE,
};

interface PortmanConfig {
  tests: { contractTests: Array<{ openApiOperationIds?: string[]; openApiResponse?: string }> };
}

/** The operations the Portman config expects a 503 from: OFFLINE's, or the run stops. */
function checkOffline(): void {
  const config = JSON.parse(readFileSync(join(root, '.portman/portman-config.json'), 'utf8')) as PortmanConfig;
  const expected = config.tests.contractTests
    .filter((t) => t.openApiResponse === '503')
    .flatMap((t) => t.openApiOperationIds ?? [])
    .sort();
  const listed = Object.keys(OFFLINE).sort();
  if (expected.join() !== listed.join())
    throw new Error(
      `.portman/portman-config.json expects a 503 from ${expected.join(', ')}; OFFLINE lists ${listed.join(', ')}`,
    );
}

interface Spec {
  paths: Record<string, Partial<Record<(typeof METHODS)[number], { operationId: string }>>>;
}

/** `GET /api/v1/members/:memberId` → operationId, for every operation of the contract, in contract order. */
function contractOperations(): Map<string, string> {
  const spec = JSON.parse(readFileSync(join(root, 'generated/openapi.json'), 'utf8')) as Spec;
  const ops = new Map<string, string>();
  for (const [path, item] of Object.entries(spec.paths))
    for (const method of METHODS) {
      const op = item[method];
      if (op) ops.set(`${method.toUpperCase()} ${path.replace(/\{([^}]+)\}/g, ':$1')}`, op.operationId);
    }
  return ops;
}

interface PostmanItem {
  id: string;
  name: string;
  item?: PostmanItem[];
  request?: {
    method: string;
    url: { path: string[] };
    header?: Array<{ key: string; value: string; disabled?: boolean }>;
    body?: Record<string, unknown>;
  };
  event?: Array<{ listen: string; script: { exec: string[] } }>;
}

type SchemaNode = Record<string, unknown>;

/** A node of the contract with every `$ref` replaced by what it names (the contract has no cycle: test/contract.test.ts). */
function dereference(spec: SchemaNode, node: unknown): unknown {
  if (Array.isArray(node)) return node.map((n) => dereference(spec, n));
  if (!node || typeof node !== 'object') return node;
  const ref = (node as SchemaNode).$ref;
  if (typeof ref === 'string') {
    const target = ref
      .slice(2)
      .split('/')
      .reduce<unknown>((n, key) => (n as SchemaNode)[key.replaceAll('~1', '/').replaceAll('~0', '~')], spec);
    return dereference(spec, target);
  }
  return Object.fromEntries(Object.entries(node).map(([k, v]) => [k, dereference(spec, v)]));
}

/** The line of a test script (an entry of `exec` may hold several lines) that declares the schema, on one line. */
const SCHEMA_LINE = /^const schema = .*$/m;

/**
 * The collection's response schemas are the contract's own, dereferenced from generated/openapi.json:
 * openapi-to-postman (under Portman) drops every property named `types` from its copies, so a schema
 * with `additionalProperties: false` (a webhook's) refused the server's valid answer. Each test
 * script's `const schema = …` line is replaced by the contract's schema of the status that script expects.
 */
function useContractSchemas(collectionFile: string, byItem: Map<string, string>): void {
  const spec = JSON.parse(readFileSync(join(root, 'generated/openapi.json'), 'utf8')) as SchemaNode;
  const responses = new Map<string, SchemaNode>();
  for (const item of Object.values(spec.paths as Record<string, Record<string, SchemaNode>>))
    for (const method of METHODS) {
      const op = item[method];
      if (op) responses.set(op.operationId as string, op.responses as SchemaNode);
    }
  const collection = JSON.parse(readFileSync(collectionFile, 'utf8')) as { item: PostmanItem[] };
  const walk = (items: PostmanItem[]) => {
    for (const it of items) {
      if (it.item) walk(it.item);
      const exec = it.event?.find((e) => e.listen === 'test')?.script.exec;
      const line = exec?.findIndex((l) => SCHEMA_LINE.test(l)) ?? -1;
      if (!exec || line < 0) continue;
      const status = /pm\.response\.code\)\.to\.equal\((\d{3})\)/.exec(exec.join('\n'))?.[1];
      const response = dereference(spec, responses.get(byItem.get(it.id) ?? '')?.[status ?? '']) as
        | { content?: Record<string, { schema?: unknown }> }
        | undefined;
      const schema = response?.content?.['application/json']?.schema;
      if (!schema)
        throw new Error(`${it.name}: no JSON schema in the contract for the status its test expects (${status})`);
      exec[line] = exec[line]!.replace(SCHEMA_LINE, () => `const schema = ${JSON.stringify(schema)}`);
    }
  };
  walk(collection.item);
  writeFileSync(collectionFile, JSON.stringify(collection));
}

/** The file every binary request body of the collection is (the bytes fixture mode seeds: server/fixtures/media.ts). */
const EXAMPLE_FILE = join(root, '.portman/example-image.png');
const EXAMPLE_FILE_TYPE = 'image/png';

/**
 * The operations whose request body is binary (an image upload, a signed-URL upload) send a real
 * file: openapi-to-postman writes the body example (`(binary PNG data)`) as a raw text body, which
 * no server takes for an image, and Portman's body overwrites only edit JSON and form bodies. Such a
 * request is switched to newman's `body.mode: "file"` with EXAMPLE_FILE, sent as `image/png`, also
 * where the body is declared as any type (the signed upload, whose example signs `image/png`). A
 * binary body of another type has no example file: the run stops and says so.
 */
function sendExampleFiles(collectionFile: string, byItem: Map<string, string>): void {
  const spec = JSON.parse(readFileSync(join(root, 'generated/openapi.json'), 'utf8')) as SchemaNode;
  const bodies = new Map<string, Record<string, { schema?: { format?: string } }>>();
  for (const item of Object.values(spec.paths as Record<string, Record<string, SchemaNode>>))
    for (const method of METHODS) {
      const op = item[method];
      if (!op?.requestBody) continue;
      const body = dereference(spec, op.requestBody) as { content?: Record<string, never> };
      if (body.content) bodies.set(op.operationId as string, body.content);
    }
  const collection = JSON.parse(readFileSync(collectionFile, 'utf8')) as { item: PostmanItem[] };
  const walk = (items: PostmanItem[]) => {
    for (const it of items) {
      if (it.item) walk(it.item);
      const request = it.request;
      const op = byItem.get(it.id);
      if (!request || !op) continue;
      const header = request.header?.find((h) => h.key.toLowerCase() === 'content-type' && !h.disabled);
      if (!header || bodies.get(op)?.[header.value]?.schema?.format !== 'binary') continue;
      if (header.value !== EXAMPLE_FILE_TYPE && header.value !== '*/*')
        throw new Error(
          `${op}: its example body is binary ${header.value}, and the run has no example file of that type`,
        );
      header.value = EXAMPLE_FILE_TYPE;
      request.body = { mode: 'file', file: { src: EXAMPLE_FILE } };
    }
  };
  walk(collection.item);
  writeFileSync(collectionFile, JSON.stringify(collection));
}

/** Portman's content-type test: `…headers.get("Content-Type")).to.include("<documented type>")`. */
const CONTENT_TYPE_CHECK = /pm\.expect\(pm\.response\.headers\.get\("Content-Type"\)\)\.to\.include\("([^"]+)"\);/;

/**
 * A response documented with a media range (any type, or `image/` and any subtype: a stored object
 * answers with the type it was stored with) is checked for a Content-Type in that range: Portman's
 * test looks for the range's own text in the header, which no real answer carries.
 */
function acceptMediaRanges(collectionFile: string): void {
  const collection = JSON.parse(readFileSync(collectionFile, 'utf8')) as { item: PostmanItem[] };
  const walk = (items: PostmanItem[]) => {
    for (const it of items) {
      if (it.item) walk(it.item);
      const exec = it.event?.find((e) => e.listen === 'test')?.script.exec ?? [];
      for (const [i, line] of exec.entries()) {
        const range = CONTENT_TYPE_CHECK.exec(line)?.[1];
        if (!range?.endsWith('/*')) continue;
        const token = '[\\w.+-]+';
        const type = range === '*/*' ? token : range.slice(0, -2).replace(/[.+]/g, '\\$&');
        exec[i] = line.replace(
          CONTENT_TYPE_CHECK,
          () => `pm.expect(pm.response.headers.get("Content-Type")).to.match(/^${type}\\/${token}/);`,
        );
      }
    }
  };
  walk(collection.item);
  writeFileSync(collectionFile, JSON.stringify(collection));
}

/** Collection item id → operationId (every request Portman wrote is one operation of the contract). */
function itemOperations(collection: { item: PostmanItem[] }, ops: Map<string, string>): Map<string, string> {
  const byItem = new Map<string, string>();
  const walk = (items: PostmanItem[]) => {
    for (const it of items) {
      if (it.item) walk(it.item);
      else if (it.request) {
        const key = `${it.request.method} /${it.request.url.path.join('/')}`;
        const op = ops.get(key);
        if (!op) throw new Error(`the collection has a request for no operation of the contract: ${key}`);
        byItem.set(it.id, op);
      }
    }
  };
  walk(collection.item);
  return byItem;
}

interface Execution {
  item: { id?: string; name: string };
  request: { method: string; url: { path?: string[] } };
  response?: { code: number; stream?: Buffer };
  requestError?: { message: string };
  assertions?: Array<{ assertion: string; error?: { message: string } }>;
}

/** Runs the collection with these variables; newman's own summary keeps every execution in memory. */
function runNewman(collectionFile: string, variables: Record<string, string>): Promise<Execution[]> {
  return new Promise((resolvePromise, reject) => {
    newman.run(
      {
        collection: JSON.parse(readFileSync(collectionFile, 'utf8')),
        envVar: Object.entries(variables).map(([key, value]) => ({ key, value })),
        reporters: [],
        timeoutRequest: 20_000,
        ignoreRedirects: true,
      },
      (err, summary) => {
        if (err) reject(err);
        else resolvePromise(summary.run.executions as unknown as Execution[]);
      },
    );
  });
}

/**
 * Operations the collection leaves out (.portman/oas-format-filter.json), checked here instead: an
 * endless event stream that newman would wait on forever. Status and content type as documented.
 */
async function checkStream(baseUrl: string, token: string): Promise<string | undefined> {
  const abort = new AbortController();
  const timer = setTimeout(() => abort.abort(), 10_000);
  try {
    const res = await fetch(`${baseUrl}/api/v1/events`, {
      headers: { authorization: `Bearer ${token}` },
      signal: abort.signal,
    });
    const type = res.headers.get('content-type') ?? '';
    const reader = res.body?.getReader();
    const first = reader ? new TextDecoder().decode((await reader.read()).value) : '';
    abort.abort();
    if (res.status !== 200) return `status ${res.status}, documented 200`;
    if (!type.startsWith('text/event-stream')) return `content type ${type}, documented text/event-stream`;
    if (!/^(:|id:|event:|data:|retry:)/m.test(first))
      return `the stream's first bytes are no event-stream field: ${first.slice(0, 100)}`;
    return undefined;
  } catch (err) {
    return err instanceof Error ? err.message : String(err);
  } finally {
    clearTimeout(timer);
  }
}

function run(command: string, args: string[], env: NodeJS.ProcessEnv = process.env): void {
  const result = spawnSync(command, args, { cwd: root, env, stdio: 'inherit' });
  if (result.status !== 0)
    throw new Error(`${command} ${args.join(' ')} exited with ${result.status ?? result.signal}`);
}

/** Starts the server (dist/main.js, as `npm start`) in fixture mode on a fresh embedded database; resolves with its URL once the banner is out. */
async function startFixtureServer(
  dataDir: string,
  adminToken: string,
): Promise<{ url: string; proc: ChildProcess; output: () => string }> {
  // The bundle `npm start` runs (built when stale): it starts in a fraction of tsx's time.
  run(bin('tsx'), ['scripts/build.ts', '--if-stale']);
  const proc = spawn(process.execPath, ['dist/main.js'], {
    cwd: root,
    env: {
      ...process.env,
      DATABASE_URL: '',
      DATA_DIR: dataDir,
      PORT: '0',
      HOST: '127.0.0.1',
      SEED_EXAMPLES: 'true',
      ADMIN_TOKEN: adminToken,
      LOG_LEVEL: 'warn',
      NODE_ENV: 'development',
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let text = '';
  const output = () => text;
  const url = await new Promise<string>((resolvePromise, reject) => {
    const timer = setTimeout(() => reject(new Error(`the server did not start within 90 s:\n${text}`)), 90_000);
    const onData = (chunk: Buffer) => {
      text += chunk.toString();
      const m = /listening on (http:\/\/\S+)/.exec(text);
      // The banner is written in one piece after the seeding, so the keys are in it once the URL is.
      if (m) {
        clearTimeout(timer);
        resolvePromise(m[1]!);
      }
    };
    proc.stdout!.on('data', onData);
    proc.stderr!.on('data', onData);
    proc.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`the server exited (${code}) before listening:\n${text}`));
    });
  });
  return { url, proc, output };
}

async function stop(proc: ChildProcess): Promise<void> {
  if (proc.exitCode !== null) return;
  const exited = new Promise((r) => proc.once('exit', r));
  proc.kill('SIGTERM');
  await exited;
}

function bodyText(e: Execution): string {
  const data = e.response?.stream;
  return data ? Buffer.from(data).toString('utf8').slice(0, 300) : '';
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: { url: { type: 'string' }, keep: { type: 'string' } },
  });
  const work = values.keep ? resolve(values.keep) : mkdtempSync(join(tmpdir(), 'ada-contract-'));
  mkdirSync(work, { recursive: true });
  const collectionFile = join(work, 'collection.postman.json');
  const started = Date.now();

  checkOffline();
  run(bin('portman'), ['--cliOptionsFile', '.portman/portman-cli.json', '--output', collectionFile]);
  const ops = contractOperations();
  const byItem = itemOperations(JSON.parse(readFileSync(collectionFile, 'utf8')), ops);
  useContractSchemas(collectionFile, byItem);
  sendExampleFiles(collectionFile, byItem);
  acceptMediaRanges(collectionFile);

  let server: Awaited<ReturnType<typeof startFixtureServer>> | undefined;
  let dataDir: string | undefined;
  let baseUrl = values.url;
  let adminToken = process.env.CONTRACT_ADMIN_TOKEN ?? '';
  if (!baseUrl) {
    dataDir = mkdtempSync(join(tmpdir(), 'ada-contract-data-'));
    adminToken = `adm_contract_${randomBytes(16).toString('hex')}`;
    server = await startFixtureServer(dataDir, adminToken);
    baseUrl = server.url;
    console.log(`fixture-mode server at ${baseUrl} (started in ${Date.now() - started} ms)`);
  }
  try {
    // Before the collection: its last examples (the admin API's) may remove the account the key belongs to.
    const streamProblem = await checkStream(baseUrl, EXAMPLE_KEYS.owner.token);
    const executions = await runNewman(collectionFile, {
      baseUrl,
      bearerToken: EXAMPLE_KEYS.owner.token,
      adminToken,
    });
    const seen = new Set<string>();
    const failed: string[] = [];
    for (const e of executions) {
      const op = byItem.get(e.item.id ?? '') ?? e.item.name;
      seen.add(op);
      const broken = (e.assertions ?? []).filter((a) => a.error);
      const status = e.response ? String(e.response.code) : 'no response';
      if (e.requestError || broken.length > 0 || (e.assertions ?? []).length === 0) {
        failed.push(op);
        const why = e.requestError
          ? e.requestError.message
          : broken.length > 0
            ? broken.map((a) => a.error!.message.replace(/\s+/g, ' ').slice(0, 400)).join(' | ')
            : 'no contract test ran';
        console.log(`FAIL ${op} ${e.request.method} /${(e.request.url.path ?? []).join('/')} → ${status}: ${why}`);
        const body = bodyText(e);
        if (body) console.log(`     body: ${body}`);
      } else console.log(`ok   ${op} → ${status}${OFFLINE[op] ? ` (offline: ${OFFLINE[op]})` : ''}`);
    }
    seen.add('streamEvents');
    if (streamProblem) {
      failed.push('streamEvents');
      console.log(`FAIL streamEvents GET /api/v1/events: ${streamProblem}`);
    } else console.log('ok   streamEvents → 200 (checked by this script: newman cannot end a stream)');
    const missing = [...ops.values()].filter((op) => !seen.has(op));
    for (const op of missing) console.log(`MISSING ${op}: the collection has no request for it`);
    const total = ops.size;
    const good = total - failed.length - missing.length;
    console.log(
      `contract examples: ${good} of ${total} operations answered as documented (${Date.now() - started} ms)`,
    );
    if (failed.length > 0 || missing.length > 0) process.exitCode = 1;
  } finally {
    if (server) {
      await stop(server.proc);
      if (process.exitCode) console.log(`server output:\n${server.output().slice(-4000)}`);
    }
    if (dataDir) rmSync(dataDir, { recursive: true, force: true });
    if (!values.keep) rmSync(work, { recursive: true, force: true });
  }
}

main().catch((err: unknown) => {
  console.error(err instanceof Error ? err.message : err);
  process.exit(1);
});

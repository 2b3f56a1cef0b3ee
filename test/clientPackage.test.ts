/**
 * The typed client as another project uses it: `npm pack` the client package, install the tarball
 * into a throw-away project outside the repository, type-check a program against it with plain
 * `nodenext` and `bundler` settings (no allowImportingTsExtensions, no skipLibCheck), and run the
 * compiled program on plain Node against a live server.
 */
import { execFile } from 'node:child_process';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  realpathSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { useServer } from './helpers/server.ts';

const run = promisify(execFile);
const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const clientDir = join(root, 'client');
const tsc = join(root, 'node_modules', 'typescript', 'bin', 'tsc');
const rootPackage = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as {
  dependencies: Record<string, string>;
  devDependencies: Record<string, string>;
};

const server = useServer();

// Outside the repository, so nothing can resolve from the repository's node_modules by accident.
const work = realpathSync(mkdtempSync(join(tmpdir(), 'ada-client-pkg-')));
const consumer = join(work, 'consumer');
// The build writes client/dist; remove it afterwards unless it was there before the test.
const distExisted = existsSync(join(clientDir, 'dist'));

afterAll(() => {
  rmSync(work, { recursive: true, force: true });
  if (!distExisted) rmSync(join(clientDir, 'dist'), { recursive: true, force: true });
});

/**
 * The environment as a user's shell has it: without what an enclosing `npm test` adds about this
 * repository (npm_package_*, npm_lifecycle_*, the local prefix) or loaders in NODE_OPTIONS. npm's
 * own settings (registry, cache, …) stay.
 */
function cleanEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) {
    const repoScoped = /^npm_/i.test(k) && !/^npm_config_/i.test(k);
    if (repoScoped || /^npm_config_(local_)?prefix$/i.test(k) || k === 'NODE_OPTIONS' || k === 'INIT_CWD') continue;
    env[k] = v;
  }
  return { ...env, ...extra };
}

async function npm(args: string[], cwd: string): Promise<string> {
  const { stdout } = await run('npm', args, {
    cwd,
    env: cleanEnv({ npm_config_update_notifier: 'false' }),
    maxBuffer: 16 << 20,
  });
  return stdout;
}

/** Runs the root's tsc (5.9) on a consumer tsconfig; resolves with its exit code and diagnostics. */
async function typecheck(project: string): Promise<{ code: number; output: string }> {
  try {
    const { stdout } = await run(process.execPath, [tsc, '-p', project, '--pretty', 'false'], {
      cwd: consumer,
      env: cleanEnv(),
    });
    return { code: 0, output: stdout };
  } catch (e) {
    const err = e as { code?: number; stdout?: string; stderr?: string };
    return { code: err.code ?? -1, output: `${err.stdout ?? ''}${err.stderr ?? ''}` };
  }
}

const write = (path: string, text: string) => {
  mkdirSync(dirname(join(consumer, path)), { recursive: true });
  writeFileSync(join(consumer, path), text);
};

// ---------------------------------------------------------------------------------------------
// The consumer project. usage.ts needs no Node types (it also type-checks as a browser/bundler
// project); main.ts is the Node entry point.

const USAGE_TS = `import { createApiClient, retryingFetch, type ApiClient, type ApiError, type components } from '@account-data/client';

type Member = components['schemas']['Member'];
type IsAny<T> = 0 extends 1 & T ? true : false;
// The types are the contract's, not any: these lines fail to compile if they were.
const memberIsTyped: IsAny<Member> = false;
const errorIsTyped: IsAny<ApiError['code']> = false;

export interface DemoResult {
  themeMode: string;
  created: string[];
  notFound: { status: number; code: ApiError['code']; message: string };
  pages: number;
  listed: string[];
}

export function client(baseUrl: string, apiKey: string): ApiClient {
  return createApiClient({ baseUrl, apiKey, fetch: retryingFetch({ maxAttempts: 3 }) });
}

export async function listAllMembers(api: ApiClient, limit: number): Promise<{ pages: number; members: Member[] }> {
  const members: Member[] = [];
  let cursor: string | undefined;
  let pages = 0;
  do {
    const { data, error } = await api.GET('/api/v1/members/page', { params: { query: { limit, cursor } } });
    if (error) throw new Error(\`\${error.code}: \${error.message}\`);
    pages++;
    members.push(...data.items);
    cursor = data.nextCursor ?? undefined;
  } while (cursor);
  return { pages, members };
}

export async function demo(baseUrl: string, apiKey: string): Promise<DemoResult> {
  const api = client(baseUrl, apiKey);

  const patched = await api.PATCH('/api/v1/appearance', { body: { themeMode: 'dark' } });
  if (patched.error) throw new Error(\`PATCH failed: \${patched.error.code}\`);
  const themeMode: 'light' | 'dark' | 'system' = patched.data.themeMode;

  const created: string[] = [];
  for (const name of ['Robin', 'Sage', 'Wren', 'Ash', 'Fern']) {
    const { data, error } = await api.POST('/api/v1/members', { body: { name } });
    if (error) throw new Error(\`create failed: \${error.code} \${error.message}\`);
    created.push(data.id);
  }

  const missing = await api.GET('/api/v1/members/{memberId}', { params: { path: { memberId: '00000000-0000-4000-8000-000000000000' } } });
  if (!missing.error) throw new Error('expected an error');
  const notFound = { status: missing.response.status, code: missing.error.code, message: missing.error.message };

  const { pages, members } = await listAllMembers(api, 2);

  if (Math.random() > 2) {
    // Never run; only compiled. Each line must be a type error, or tsc reports an unused directive.
    // @ts-expect-error not a route of the contract
    await api.GET('/api/v1/no-such-route');
    // @ts-expect-error themeMode is an enum
    await api.PATCH('/api/v1/appearance', { body: { themeMode: 'purple' } });
    // @ts-expect-error CreateMemberRequest has no field "nickname" and requires "name"
    await api.POST('/api/v1/members', { body: { nickname: 'Robin' } });
    // @ts-expect-error limit is required by GET /members/page
    await api.GET('/api/v1/members/page', { params: { query: {} } });
  }

  void memberIsTyped;
  void errorIsTyped;
  return { themeMode, created, notFound, pages, listed: members.map((m) => m._id) };
}
`;

const MAIN_TS = `import { demo } from './usage.js';

const result = await demo(process.env.API_BASE_URL!, process.env.API_KEY!);
process.stdout.write(JSON.stringify(result));
`;

// The same mistakes as the @ts-expect-error lines above, without the directive: tsc must reject each.
const WRONG_TS = `import { createApiClient } from '@account-data/client';

const api = createApiClient({ baseUrl: 'http://127.0.0.1:1', apiKey: 'adk_x' });
await api.GET('/api/v1/no-such-route');
await api.PATCH('/api/v1/appearance', { body: { themeMode: 'purple' } });
await api.POST('/api/v1/members', { body: { nickname: 'Robin' } });
await api.GET('/api/v1/members/page', { params: { query: {} } });
`;

const strict = {
  strict: true,
  skipLibCheck: false,
  noUncheckedIndexedAccess: true,
  target: 'ES2022',
  verbatimModuleSyntax: true,
};

// A Node project: NodeNext resolution, Node's types (no DOM), emits JavaScript for plain node.
const NODENEXT = {
  compilerOptions: {
    ...strict,
    module: 'NodeNext',
    moduleResolution: 'NodeNext',
    lib: ['ES2022'],
    types: ['node'],
    outDir: 'out',
    rootDir: 'src',
  },
  files: ['src/main.ts', 'src/usage.ts'],
};
// A bundler project (Vite and the like): bundler resolution, DOM types, no Node types.
const BUNDLER = {
  compilerOptions: {
    ...strict,
    module: 'ESNext',
    moduleResolution: 'bundler',
    lib: ['ES2022', 'DOM'],
    types: [],
    noEmit: true,
  },
  files: ['src/usage.ts'],
};
// Only has to find the errors in wrong.ts; the declarations were checked by the two above.
const WRONG = {
  compilerOptions: { ...NODENEXT.compilerOptions, noEmit: true, skipLibCheck: true },
  files: ['src/wrong.ts'],
};

// ---------------------------------------------------------------------------------------------

let packed: { filename: string; files: { path: string }[] };
let installedTopLevel: string[];
let nodenext: { code: number; output: string };

function topLevelPackages(): string[] {
  const modules = join(consumer, 'node_modules');
  return readdirSync(modules)
    .filter((n) => !n.startsWith('.'))
    .flatMap((n) => (n.startsWith('@') ? readdirSync(join(modules, n)).map((s) => `${n}/${s}`) : [n]))
    .sort();
}

beforeAll(async () => {
  // prepack builds client/dist, so the tarball always carries a fresh build.
  packed = JSON.parse(await npm(['pack', '--pack-destination', work, '--json'], clientDir))[0];
  write('package.json', JSON.stringify({ name: 'consumer', version: '0.0.0', private: true, type: 'module' }));
  await npm(['install', join(work, packed.filename), '--no-audit', '--no-fund', '--prefer-offline'], consumer);
  // What installing the tarball alone brought in (before the consumer adds @types/node for itself).
  installedTopLevel = topLevelPackages();

  // Node's type declarations, as any Node TypeScript project has them (the version the repository uses, so it is cached).
  const typesNode = JSON.parse(readFileSync(join(root, 'node_modules/@types/node/package.json'), 'utf8')).version;
  await npm(
    ['install', `@types/node@${typesNode}`, '--no-save', '--no-audit', '--no-fund', '--prefer-offline'],
    consumer,
  );
  write('src/usage.ts', USAGE_TS);
  write('src/main.ts', MAIN_TS);
  write('src/wrong.ts', WRONG_TS);
  write('tsconfig.json', JSON.stringify(NODENEXT));
  write('tsconfig.bundler.json', JSON.stringify(BUNDLER));
  write('tsconfig.wrong.json', JSON.stringify(WRONG));
  // Type-checks and emits out/main.js, which the runtime test runs.
  nodenext = await typecheck('tsconfig.json');
}, 240_000);

describe('the client package', () => {
  it('ships the built JavaScript, the declarations, the contract types and its license, no TypeScript sources', () => {
    const files = packed.files.map((f) => f.path).sort();
    expect(files).toEqual([
      'LICENSE',
      'README.md',
      'dist/client/events.d.ts',
      'dist/client/events.js',
      'dist/client/index.d.ts',
      'dist/client/index.js',
      'dist/client/retry.d.ts',
      'dist/client/retry.js',
      'dist/client/webhooks.d.ts',
      'dist/client/webhooks.js',
      'dist/generated/api.d.ts',
      'package.json',
    ]);
    const shipped = readFileSync(join(consumer, 'node_modules/@account-data/client/dist/generated/api.d.ts'), 'utf8');
    expect(shipped).toBe(readFileSync(join(root, 'generated/api.d.ts'), 'utf8'));
  });

  it('installs with openapi-fetch as its only dependency and none of the server packages', () => {
    const installed = JSON.parse(
      readFileSync(join(consumer, 'node_modules/@account-data/client/package.json'), 'utf8'),
    );
    expect(installed.dependencies).toEqual({ 'openapi-fetch': rootPackage.dependencies['openapi-fetch'] });

    const openapiFetch = JSON.parse(readFileSync(join(consumer, 'node_modules/openapi-fetch/package.json'), 'utf8'));
    expect(installedTopLevel).toEqual(
      ['@account-data/client', 'openapi-fetch', ...Object.keys(openapiFetch.dependencies ?? {})].sort(),
    );

    const serverPackages = [
      ...Object.keys(rootPackage.dependencies),
      ...Object.keys(rootPackage.devDependencies),
    ].filter((n) => n !== 'openapi-fetch');
    expect(serverPackages).toEqual(
      expect.arrayContaining(['express', 'knex', 'pg', 'pino', '@electric-sql/pglite', 'typescript']),
    );
    expect(installedTopLevel.filter((name) => serverPackages.includes(name))).toEqual([]);
  });

  it('type-checks a strict consumer with nodenext and with bundler resolution, and rejects wrong calls', async () => {
    expect(nodenext.output).toBe('');
    expect(nodenext.code).toBe(0);
    expect(existsSync(join(consumer, 'out/main.js'))).toBe(true);

    const bundler = await typecheck('tsconfig.bundler.json');
    expect(bundler.output).toBe('');
    expect(bundler.code).toBe(0);

    const wrong = await typecheck('tsconfig.wrong.json');
    expect(wrong.code).toBe(2);
    const lines = wrong.output.split('\n').filter((l) => /error TS\d+/.test(l));
    // One error per wrong call (lines 4–7 of wrong.ts), and nothing else fails.
    expect(lines.map((l) => /^(.*?)\((\d+),\d+\)/.exec(l)?.slice(1, 3))).toEqual([
      ['src/wrong.ts', '4'],
      ['src/wrong.ts', '5'],
      ['src/wrong.ts', '6'],
      ['src/wrong.ts', '7'],
    ]);
  }, 120_000);

  it('runs on plain Node against a live server: a success, an error envelope and a paginated list', async () => {
    expect(nodenext.code, `out/main.js is emitted by the nodenext type-check: ${nodenext.output}`).toBe(0);
    const user = await server.user();
    // Plain node: no tsx, no loader, no NODE_OPTIONS; only the consumer's node_modules.
    const { stdout } = await run(process.execPath, ['out/main.js'], {
      cwd: consumer,
      env: cleanEnv({ API_BASE_URL: server.baseUrl, API_KEY: user.apiKey }),
    });
    const result = JSON.parse(stdout);
    expect(result.themeMode).toBe('dark');
    expect(result.created).toHaveLength(5);
    expect(result.notFound).toEqual({ status: 404, code: 'NOT_FOUND', message: expect.any(String) });
    expect(result.notFound.message.length).toBeGreaterThan(0);
    // Five members, two per page: three pages, every member exactly once.
    expect(result.pages).toBe(3);
    expect([...result.listed].sort()).toEqual([...result.created].sort());

    // What the program wrote is what the server holds.
    expect((await user.api.GET('/api/v1/appearance')).data?.themeMode).toBe('dark');
    const page = await user.api.GET('/api/v1/members/page', { params: { query: { limit: 10 } } });
    expect(page.data?.items.map((m) => m.name).sort()).toEqual(['Ash', 'Fern', 'Robin', 'Sage', 'Wren']);
  }, 60_000);

  it('resolves the package and openapi-fetch from the consumer, and no server package at all', async () => {
    const script = `
      const found = {};
      for (const name of ${JSON.stringify(['@account-data/client', 'openapi-fetch', 'express', 'knex', 'pg', 'pino', '@electric-sql/pglite'])}) {
        try { found[name] = import.meta.resolve(name); } catch (e) { found[name] = e.code; }
      }
      process.stdout.write(JSON.stringify(found));`;
    const { stdout } = await run(process.execPath, ['--input-type=module', '-e', script], {
      cwd: consumer,
      env: cleanEnv(),
    });
    const found = JSON.parse(stdout) as Record<string, string>;
    const openapiFetchDir = pathToFileURL(join(consumer, 'node_modules/openapi-fetch/')).href;
    expect(found['openapi-fetch']!.startsWith(openapiFetchDir), found['openapi-fetch']).toBe(true);
    expect({ ...found, 'openapi-fetch': undefined }).toEqual({
      '@account-data/client': pathToFileURL(join(consumer, 'node_modules/@account-data/client/dist/client/index.js'))
        .href,
      'openapi-fetch': undefined,
      express: 'ERR_MODULE_NOT_FOUND',
      knex: 'ERR_MODULE_NOT_FOUND',
      pg: 'ERR_MODULE_NOT_FOUND',
      pino: 'ERR_MODULE_NOT_FOUND',
      '@electric-sql/pglite': 'ERR_MODULE_NOT_FOUND',
    });
  });
});

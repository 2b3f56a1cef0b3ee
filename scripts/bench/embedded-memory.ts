/**
 * npm run bench:memory [-- --quick] [-- --duration=5] [-- --out=bench/results]
 *
 * Resident memory (RSS) of the server on the embedded database (PGlite), as `npm start` runs it:
 * the compiled bundle under plain node. Seeds one embedded data directory through the bench's
 * seeder (a medium plan: PGlite is for small installations), then for each variant starts the
 * server on a fresh copy of it and records
 *   - RSS once started and settled (idle),
 *   - peak RSS while autocannon runs the bench's read scenarios (1, 2, 3, 4a, 4b), and req/s,
 *   - RSS after the load, and the process's high-water mark (VmHWM).
 * Variants change one thing at a time, so each part's cost is a difference between two rows:
 * shared_buffers, the two V8 settings, creating the database in-process, tsx. Throughput of the
 * settings that trade speed for memory is compared in pairs (both servers up, A B B A), and a
 * CPU-heavy query (a full scan) is timed with and without V8's optimising WebAssembly tier.
 * Components are measured alone too: plain node, PGlite alone, the app on PostgreSQL (with
 * DATABASE_URL). Writes bench/results/<date>-embedded-memory.md and .json (bench/tmp/ with --quick);
 * `--render=<file>.json` writes the .md again from a stored .json without measuring.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { cpSync, mkdirSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, totalmem } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import autocannon from 'autocannon';
import { buildServer } from '../build.ts';
import { EMBEDDED_SHARED_BUFFERS_DEFAULT, openDatabase } from '../../server/db/knex.ts';
import { migrateLatest } from '../../server/db/migrate.ts';
import { seed, type SeedPlan } from './seed.ts';
import { adminQuery, benchMessageKeys, freePort } from './support.ts';

const root = resolve(import.meta.dirname, '../..');
const { values } = parseArgs({
  options: {
    quick: { type: 'boolean' },
    duration: { type: 'string' },
    out: { type: 'string' },
    render: { type: 'string' },
  },
});
const quick = values.quick ?? false;
const duration = Number(values.duration ?? (quick ? 2 : 3));
const CONNECTIONS = 32;
const SETTLE_MS = 3_000;
const log = (m: string) => process.stdout.write(`[memory] ${m}\n`);

/** Small installations are what the embedded database is for; the working set still exceeds 16MB of buffers. */
const EMBEDDED_PLAN: SeedPlan = {
  large: { members: 2_000, entries: 20_000, sessions: 100_000 },
  small: { members: 200, entries: 200, sessions: 200 },
  noise: { accounts: 5, members: 100, entries: 500, sessions: 2_000 },
};
const QUICK_PLAN: SeedPlan = {
  large: { members: 500, entries: 2_000, sessions: 20_000 },
  small: { members: 50, entries: 50, sessions: 50 },
  noise: { accounts: 2, members: 20, entries: 50, sessions: 200 },
};

const work = join(root, 'bench/tmp/embedded-memory');

interface Status {
  rss: number;
  hwm: number;
}

function status(pid: number): Status | undefined {
  try {
    const text = readFileSync(`/proc/${pid}/status`, 'utf8');
    const kb = (name: string) => Number(new RegExp(`${name}:\\s+(\\d+) kB`).exec(text)?.[1] ?? 0);
    return { rss: kb('VmRSS') / 1024, hwm: kb('VmHWM') / 1024 };
  } catch {
    return undefined;
  }
}

/** Every live process whose process group is `pgid`. */
function group(pgid: number): number[] {
  const pids: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      if (Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[2]) === pgid) pids.push(Number(entry));
    } catch {
      // gone
    }
  }
  return pids;
}

const treeRss = (pgid: number) => group(pgid).reduce((sum, pid) => sum + (status(pid)?.rss ?? 0), 0);

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

interface Started {
  child: ChildProcess;
  url: string;
  /** The process whose RSS is the server's (for tsx: the node child that runs the app). */
  serverPid: () => number;
  stop(): Promise<void>;
}

async function startServer(command: string[], env: Record<string, string>): Promise<Started> {
  const port = await freePort();
  const child = spawn(command[0]!, command.slice(1), {
    cwd: root,
    env: {
      ...process.env,
      NODE_ENV: 'production',
      LOG_LEVEL: 'warn',
      RATE_LIMIT_PER_MINUTE: '10000000',
      TRASH_PURGE_INTERVAL_MS: '0',
      EMBEDDED_MAINTENANCE_INTERVAL_MS: '0',
      ...env,
      PORT: String(port),
      HOST: '127.0.0.1',
    },
    stdio: ['ignore', 'pipe', 'inherit'],
    detached: true,
  });
  // The log (stdout) is read and dropped; its last line says why a server that stopped did.
  let lastLine = '';
  child.stdout!.on('data', (chunk: Buffer) => {
    const lines = chunk.toString('utf8').trim().split('\n');
    lastLine = lines[lines.length - 1] ?? lastLine;
  });
  const url = `http://127.0.0.1:${port}`;
  for (let i = 0; ; i++) {
    if (child.exitCode !== null) throw new Error(`${command.join(' ')} exited with ${child.exitCode}: ${lastLine}`);
    if (i > 1200) throw new Error(`${command.join(' ')} did not start`);
    try {
      if ((await fetch(`${url}/healthz`)).ok) break;
    } catch {
      // not listening yet
    }
    await sleep(100);
  }
  // The process of the group holding the most memory is the one running the app.
  const serverPid = () =>
    group(child.pid!).sort((a, b) => (status(b)?.rss ?? 0) - (status(a)?.rss ?? 0))[0] ?? child.pid!;
  return {
    child,
    url,
    serverPid,
    stop: () =>
      new Promise<void>((res) => {
        if (child.exitCode !== null) return res();
        child.on('exit', () => res());
        process.kill(-child.pid!, 'SIGTERM');
      }),
  };
}

const READ_SCENARIOS = (deep: { startedAt: number; id: string }) => [
  { id: '1', title: 'GET /api/v1/front', path: '/api/v1/front' },
  { id: '2', title: 'GET /api/v1/entries?limit=50', path: '/api/v1/entries?limit=50' },
  { id: '3', title: 'GET /api/v1/members/page?limit=100', path: '/api/v1/members/page?limit=100' },
  { id: '4a', title: 'GET /api/v1/front/history?limit=50', path: '/api/v1/front/history?limit=50' },
  {
    id: '4b',
    title: 'GET /api/v1/front/history?limit=50 (10,000 deep)',
    path: `/api/v1/front/history?limit=50&cursorStartedAt=${deep.startedAt}&cursorId=${deep.id}`,
  },
];

interface Variant {
  id: string;
  title: string;
  command: string[];
  env?: Record<string, string>;
  /** Start on an empty data directory (first start: creates the database and the demo account). */
  fresh?: boolean;
  /** Measure the whole process group (wrappers included), not only the server process. */
  tree?: boolean;
  /** Run the read scenarios (needs the seeded data). */
  load?: boolean;
  postgres?: boolean;
}

interface VariantResult {
  id: string;
  title: string;
  idleRss: number;
  idleTreeRss: number;
  peakRssUnderLoad: number | null;
  rssAfterLoad: number | null;
  hwm: number;
  rps: Record<string, number>;
  errors: number;
}

async function measureVariant(
  v: Variant,
  dataTemplate: string,
  key: string,
  deep: { startedAt: number; id: string },
  postgresUrl: string | undefined,
): Promise<VariantResult> {
  const dir = join(work, `run-${v.id}`);
  rmSync(dir, { recursive: true, force: true });
  if (!v.fresh && !v.postgres) cpSync(dataTemplate, dir, { recursive: true });
  const env: Record<string, string> = { DATA_DIR: dir, ...v.env };
  if (v.postgres) {
    env.DATABASE_URL = postgresUrl!;
    // On PostgreSQL the server needs the message keyring (the embedded default keeps its own).
    env.MESSAGE_ENCRYPTION_KEYS = benchMessageKeys;
  } else delete process.env.DATABASE_URL;
  const server = await startServer(v.command, env);
  try {
    await sleep(SETTLE_MS);
    const pid = server.serverPid();
    const idle = status(pid)!;
    const idleTree = treeRss(server.child.pid!);
    const result: VariantResult = {
      id: v.id,
      title: v.title,
      idleRss: idle.rss,
      idleTreeRss: idleTree,
      peakRssUnderLoad: null,
      rssAfterLoad: null,
      hwm: idle.hwm,
      rps: {},
      errors: 0,
    };
    if (v.load) {
      let peak = 0;
      const sampler = setInterval(() => (peak = Math.max(peak, status(pid)?.rss ?? 0)), 100);
      for (const s of READ_SCENARIOS(deep)) {
        const r = await autocannon({
          url: server.url + s.path,
          connections: CONNECTIONS,
          duration,
          headers: { authorization: `Bearer ${key}` },
        });
        result.rps[s.id] = Math.round(r.requests.average);
        result.errors += r.errors + r.timeouts + r.non2xx;
      }
      clearInterval(sampler);
      result.peakRssUnderLoad = Math.max(peak, status(pid)?.rss ?? 0);
      await sleep(SETTLE_MS);
      result.rssAfterLoad = status(pid)!.rss;
    }
    result.hwm = status(pid)!.hwm;
    const fmt = (n: number | null) => (n === null ? '-' : `${Math.round(n)} MB`);
    log(
      `${v.id}: idle ${fmt(result.idleRss)} (group ${fmt(idleTree)}), under load ${fmt(result.peakRssUnderLoad)}, after ${fmt(result.rssAfterLoad)}, hwm ${fmt(result.hwm)}${v.load ? `, req/s ${Object.values(result.rps).join(' / ')}` : ''}`,
    );
    return result;
  } finally {
    await server.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

interface PairResult {
  a: string;
  b: string;
  /** Per read scenario: req/s of the runs in the order A, B, B, A and the ratio of B's mean to A's. */
  scenarios: Array<{ id: string; runs: number[]; ratio: number }>;
}

/**
 * Throughput of two variants compared fairly on a busy 2-core machine: both servers run at once
 * (the idle one costs no CPU) and each scenario is loaded in the order A B B A, which cancels drift.
 */
async function pairedThroughput(
  a: Variant,
  b: Variant,
  dataTemplate: string,
  key: string,
  deep: { startedAt: number; id: string },
): Promise<PairResult> {
  const dirs = [join(work, `pair-${a.id}`), join(work, `pair-${b.id}`)];
  const servers: Started[] = [];
  try {
    for (const [i, v] of [a, b].entries()) {
      rmSync(dirs[i]!, { recursive: true, force: true });
      cpSync(dataTemplate, dirs[i]!, { recursive: true });
      servers.push(await startServer(v.command, { DATA_DIR: dirs[i]!, ...v.env }));
    }
    const [sa, sb] = servers as [Started, Started];
    const rps = async (s: Started, path: string, seconds: number) =>
      Math.round(
        (
          await autocannon({
            url: s.url + path,
            connections: CONNECTIONS,
            duration: seconds,
            headers: { authorization: `Bearer ${key}` },
          })
        ).requests.average,
      );
    const result: PairResult = { a: a.id, b: b.id, scenarios: [] };
    for (const s of READ_SCENARIOS(deep)) {
      await rps(sa, s.path, 1);
      await rps(sb, s.path, 1);
      const runs = [
        await rps(sa, s.path, duration),
        await rps(sb, s.path, duration),
        await rps(sb, s.path, duration),
        await rps(sa, s.path, duration),
      ];
      const ratio = (runs[1]! + runs[2]!) / Math.max(1, runs[0]! + runs[3]!);
      result.scenarios.push({ id: s.id, runs, ratio });
    }
    log(`${b.id} / ${a.id} req/s: ${result.scenarios.map((s) => `${s.id} ${s.ratio.toFixed(2)}×`).join(', ')}`);
    return result;
  } finally {
    for (const s of servers) await s.stop();
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  }
}

/**
 * A one-off node process: RSS once `code` has run and settled, and again after a full garbage
 * collection (the snippet collects on SIGUSR2; run with --expose-gc).
 */
async function measureSnippet(
  code: string,
  args: string[] = [],
  nodeArgs: string[] = [],
): Promise<{ rss: number; afterGc: number }> {
  const child = spawn(process.execPath, ['--expose-gc', ...nodeArgs, '--input-type=module', '-e', code, ...args], {
    cwd: root,
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let out = '';
  child.stdout!.on('data', (d) => (out += d));
  while (!out.includes('ready')) {
    if (child.exitCode !== null) throw new Error(`snippet exited with ${child.exitCode}`);
    await sleep(50);
  }
  await sleep(SETTLE_MS);
  const rss = status(child.pid!)!.rss;
  child.kill('SIGUSR2');
  await sleep(1_000);
  const afterGc = status(child.pid!)!.rss;
  child.kill('SIGKILL');
  return { rss, afterGc };
}

const GC_ON_SIGNAL = "process.on('SIGUSR2', () => globalThis.gc?.());";

const pgliteSnippet = `
const { PGlite } = await import('@electric-sql/pglite');
const [dir, sb] = process.argv.slice(1);
const db = await PGlite.create(dir === 'memory' ? undefined : dir, sb === 'default' ? {} : { startParams: [...PGlite.defaultStartParams, '-c', 'shared_buffers=' + sb] });
await db.query('select 1');
globalThis.keepAlive = db; // the module scope of -e code is not kept: without this a GC collects the database
${GC_ON_SIGNAL}
console.log('ready');
setInterval(() => {}, 1000);
`;

const scanSnippet = `
const { PGlite } = await import('@electric-sql/pglite');
const db = await PGlite.create(process.argv[1], { startParams: [...PGlite.defaultStartParams, '-c', 'shared_buffers=' + process.argv[2]] });
const sql = "select count(*), sum(length(coalesce(note, ''))), max(ended_at - started_at) from front_sessions";
// Long enough for V8 to finish tiering hot functions up (when it may) before the timed part.
const run = async (ms) => { let n = 0; const t0 = performance.now(); while (performance.now() - t0 < ms) { await db.query(sql); n++; } return (performance.now() - t0) / n; };
await run(4000);
console.log(JSON.stringify({ ms: await run(6000) }));
await db.close();
`;

/** Mean ms of a full scan of front_sessions in PGlite alone, with the given node flags. */
async function scanMs(dataTemplate: string, nodeArgs: string[]): Promise<number> {
  const copy = join(work, 'scan-copy');
  rmSync(copy, { recursive: true, force: true });
  cpSync(dataTemplate, copy, { recursive: true });
  try {
    const out = await new Promise<string>((res, rej) => {
      const child = spawn(
        process.execPath,
        [...nodeArgs, '--input-type=module', '-e', scanSnippet, join(copy, 'pglite'), EMBEDDED_SHARED_BUFFERS_DEFAULT],
        { cwd: root, stdio: ['ignore', 'pipe', 'inherit'] },
      );
      let text = '';
      child.stdout!.on('data', (d) => (text += d));
      child.on('exit', (code) => (code === 0 ? res(text) : rej(new Error(`scan exited with ${code}`))));
    });
    return (JSON.parse(out) as { ms: number }).ms;
  } finally {
    rmSync(copy, { recursive: true, force: true });
  }
}

async function seedTemplate(
  plan: SeedPlan,
): Promise<{ dir: string; key: string; deep: { startedAt: number; id: string } }> {
  const dir = join(work, 'template');
  rmSync(dir, { recursive: true, force: true });
  const db = await openDatabase({ dataDir: dir, lockPurpose: 'bench' });
  try {
    await migrateLatest(db.knex);
    const seeded = await seed(db.knex, plan, log);
    await db.knex.raw('vacuum analyze');
    const row = await db
      .knex('front_sessions')
      .where({ user_id: seeded.large.userId })
      .whereNull('deleted_at')
      .orderBy([
        { column: 'started_at', order: 'desc' },
        { column: 'id', order: 'desc' },
      ])
      .offset(Math.min(10_000, plan.large.sessions / 2) - 1)
      .first('started_at', 'id');
    return { dir, key: seeded.large.apiKey, deep: { startedAt: Number(row.started_at), id: row.id } };
  } finally {
    await db.close();
  }
}

async function postgresDatabase(
  plan: SeedPlan,
): Promise<{ url: string; key: string; drop(): Promise<void> } | undefined> {
  const base = process.env.DATABASE_URL;
  if (!base) return undefined;
  const name = `bench_mem_${Date.now()}`;
  const admin = (sql: string) => adminQuery(base, sql);
  await admin(`create database ${name}`);
  const url = new URL(base);
  url.pathname = `/${name}`;
  const db = await openDatabase({ databaseUrl: url.toString(), poolMax: 1 });
  try {
    await migrateLatest(db.knex);
    const seeded = await seed(db.knex, plan, log);
    await db.knex.raw('vacuum analyze');
    return {
      url: url.toString(),
      key: seeded.large.apiKey,
      drop: () => admin(`drop database if exists ${name} with (force)`),
    };
  } finally {
    await db.close();
  }
}

async function main(): Promise<void> {
  const postgresUrl = process.env.DATABASE_URL;
  delete process.env.DATABASE_URL; // the embedded variants must not see it
  mkdirSync(work, { recursive: true });
  const built = await buildServer();
  log(`built ${built.outFile}`);
  const plan = quick ? QUICK_PLAN : EMBEDDED_PLAN;
  log('seeding the embedded template');
  const template = await seedTemplate(plan);
  const node = [process.execPath, 'dist/main.js'];

  const lean = { EMBEDDED_V8_LOW_MEMORY: 'false' };
  const variants: Variant[] = [
    {
      id: 'shipped',
      title: `shipped: node dist/main.js (shared_buffers=${EMBEDDED_SHARED_BUFFERS_DEFAULT}, low-memory V8 settings)`,
      command: node,
      load: true,
    },
    {
      id: 'sb-128MB',
      title: 'shared_buffers=128MB (PGlite default)',
      command: node,
      env: { EMBEDDED_SHARED_BUFFERS: '128MB' },
      load: true,
    },
    { id: 'sb-8MB', title: 'shared_buffers=8MB', command: node, env: { EMBEDDED_SHARED_BUFFERS: '8MB' }, load: true },
    { id: 'v8-defaults', title: 'V8 defaults (EMBEDDED_V8_LOW_MEMORY=false)', command: node, env: lean, load: true },
    {
      id: 'v8-liftoff-only',
      title: 'V8 defaults + --liftoff-only only',
      command: [process.execPath, '--liftoff-only', 'dist/main.js'],
      env: lean,
      load: true,
    },
    {
      id: 'v8-heap-growing',
      title: 'V8 defaults + --heap-growing-percent=50 only',
      command: [process.execPath, '--heap-growing-percent=50', 'dist/main.js'],
      env: lean,
      load: true,
    },
    {
      id: 'before',
      title: 'before: shared_buffers=128MB and V8 defaults (plain node)',
      command: node,
      env: { ...lean, EMBEDDED_SHARED_BUFFERS: '128MB' },
      load: true,
    },
    {
      id: 'first-start',
      title: 'shipped, first start on an empty DATA_DIR (database created in a child process, demo account)',
      command: node,
      fresh: true,
    },
    {
      id: 'tsx',
      title:
        'before, as `npm start` ran it: tsx server/main.ts (tsx wrapper + server + esbuild), shared_buffers=128MB, V8 defaults',
      command: [join(root, 'node_modules/.bin/tsx'), 'server/main.ts'],
      env: { ...lean, EMBEDDED_SHARED_BUFFERS: '128MB' },
      tree: true,
    },
  ];
  const results: VariantResult[] = [];
  for (const v of variants) results.push(await measureVariant(v, template.dir, template.key, template.deep, undefined));

  const pairs: PairResult[] = [];
  for (const [a, b] of [
    ['before', 'shipped'],
    ['sb-128MB', 'shipped'],
    ['v8-defaults', 'shipped'],
  ] as const) {
    pairs.push(
      await pairedThroughput(
        variants.find((v) => v.id === a)!,
        variants.find((v) => v.id === b)!,
        template.dir,
        template.key,
        template.deep,
      ),
    );
  }

  log('timing a full scan with and without the optimising WebAssembly tier (A B B A)');
  const scan = { optimising: [] as number[], baseline: [] as number[] };
  for (const tier of ['optimising', 'baseline', 'baseline', 'optimising'] as const)
    scan[tier].push(await scanMs(template.dir, tier === 'baseline' ? ['--liftoff-only'] : []));
  log(
    `full scan: optimising tier ${scan.optimising.map((n) => n.toFixed(0)).join('/')} ms, baseline only ${scan.baseline.map((n) => n.toFixed(0)).join('/')} ms`,
  );

  log('measuring components alone');
  const components: Component[] = [];
  components.push({
    part: 'node, empty script',
    ...(await measureSnippet(`${GC_ON_SIGNAL} console.log('ready'); setInterval(() => {}, 1000);`)),
  });
  const copy = join(work, 'component-copy');
  for (const [sb, label] of [
    ['default', 'PGlite alone, default start parameters (shared_buffers=128MB)'],
    [EMBEDDED_SHARED_BUFFERS_DEFAULT, `PGlite alone, shared_buffers=${EMBEDDED_SHARED_BUFFERS_DEFAULT}`],
  ] as const) {
    rmSync(copy, { recursive: true, force: true });
    cpSync(template.dir, copy, { recursive: true });
    components.push({
      part: `${label}, existing database`,
      ...(await measureSnippet(pgliteSnippet, [join(copy, 'pglite'), sb])),
    });
  }
  rmSync(copy, { recursive: true, force: true });
  components.push({
    part: `PGlite alone, shared_buffers=${EMBEDDED_SHARED_BUFFERS_DEFAULT}, database created in-process (initdb)`,
    ...(await measureSnippet(pgliteSnippet, [join(work, 'component-fresh'), EMBEDDED_SHARED_BUFFERS_DEFAULT])),
  });
  rmSync(join(work, 'component-fresh'), { recursive: true, force: true });
  components.push({
    part: `PGlite alone, shared_buffers=${EMBEDDED_SHARED_BUFFERS_DEFAULT}, existing database, --liftoff-only`,
    ...(await measureSnippet(
      pgliteSnippet,
      [join(template.dir, 'pglite'), EMBEDDED_SHARED_BUFFERS_DEFAULT],
      ['--liftoff-only'],
    )),
  });
  for (const c of components) log(`${c.part}: ${Math.round(c.rss)} MB, ${Math.round(c.afterGc)} MB after a full GC`);

  let postgres: VariantResult | undefined;
  if (postgresUrl) {
    process.env.DATABASE_URL = postgresUrl;
    const db = await postgresDatabase(plan);
    delete process.env.DATABASE_URL;
    if (db) {
      try {
        postgres = await measureVariant(
          {
            id: 'postgres',
            title: 'the same server on PostgreSQL (app without PGlite)',
            command: node,
            load: true,
            postgres: true,
          },
          '',
          db.key,
          template.deep,
          db.url,
        );
      } finally {
        await db.drop();
      }
    }
  }
  rmSync(template.dir, { recursive: true, force: true });
  report({
    date: new Date().toISOString().slice(0, 10),
    quick,
    machine: `${cpus().length} × ${cpus()[0]?.model ?? 'CPU'}, ${Math.round(totalmem() / 2 ** 30)} GiB RAM, Node ${process.version}`,
    duration,
    connections: CONNECTIONS,
    plan,
    variants: postgres ? [...results, postgres] : results,
    pairs,
    scan,
    components,
  });
}

interface Component {
  part: string;
  rss: number;
  afterGc: number;
}

interface Measured {
  date: string;
  quick: boolean;
  machine: string;
  duration: number;
  connections: number;
  plan: SeedPlan;
  variants: VariantResult[];
  pairs: PairResult[];
  scan: { optimising: number[]; baseline: number[] };
  components: Component[];
}

/** The costs the variants were built to isolate, as differences between rows. */
function summary(m: Measured): string {
  const v = (id: string) => m.variants.find((r) => r.id === id);
  const idle = (id: string) => v(id)?.idleRss ?? NaN;
  const peak = (id: string) => v(id)?.peakRssUnderLoad ?? NaN;
  const r = (n: number) => String(Math.round(n));
  const ratios = (b: string, a: string) => {
    const xs = m.pairs.find((p) => p.a === a && p.b === b)?.scenarios.map((s) => s.ratio) ?? [];
    return xs.length ? `${Math.min(...xs).toFixed(2)}–${Math.max(...xs).toFixed(2)}×` : 'not measured';
  };
  const component = (prefix: string, field: 'rss' | 'afterGc' = 'rss') =>
    m.components.find((c) => c.part.startsWith(prefix))?.[field] ?? NaN;
  const nodeOnly = component('node, empty script');
  const pgliteLean = component(
    `PGlite alone, shared_buffers=${EMBEDDED_SHARED_BUFFERS_DEFAULT}, existing database, --liftoff-only`,
  );
  const pgliteExisting = component(
    `PGlite alone, shared_buffers=${EMBEDDED_SHARED_BUFFERS_DEFAULT}, existing database`,
  );
  const pgliteCreated = component(
    `PGlite alone, shared_buffers=${EMBEDDED_SHARED_BUFFERS_DEFAULT}, database created in-process`,
  );
  const pgliteCreatedGc = component(
    `PGlite alone, shared_buffers=${EMBEDDED_SHARED_BUFFERS_DEFAULT}, database created in-process`,
    'afterGc',
  );
  const pgliteExistingGc = component(
    `PGlite alone, shared_buffers=${EMBEDDED_SHARED_BUFFERS_DEFAULT}, existing database`,
    'afterGc',
  );
  const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
  const lines = [
    `- **Buffer pool.** shared_buffers 128MB → ${EMBEDDED_SHARED_BUFFERS_DEFAULT}: ${r(idle('sb-128MB') - idle('shipped'))} MB less idle, ${r(peak('sb-128MB') - peak('shipped'))} MB less under load (the pool is allocated in PGlite's WebAssembly memory at start, which grows past its initial 128 MB for a 128MB pool, and stays resident). 8MB would save ${r(idle('shipped') - idle('sb-8MB'))} MB more. Paired read throughput, shipped / 128MB: ${ratios('shipped', 'sb-128MB')}.`,
    `- **V8 low-memory settings** (EMBEDDED_V8_LOW_MEMORY): ${r(idle('v8-defaults') - idle('shipped'))} MB less idle, ${r(peak('v8-defaults') - peak('shipped'))} MB less under load. Baseline-only WebAssembly alone: ${r(idle('v8-defaults') - idle('v8-liftoff-only'))} MB idle, ${r(peak('v8-defaults') - peak('v8-liftoff-only'))} MB under load (optimised code and compiler memory). Heap growth 1.5× alone: ${r(peak('v8-defaults') - peak('v8-heap-growing'))} MB under load (garbage of concurrent requests; a full collection after load brings the live heap back to ~30 MB either way). Paired read throughput, shipped / V8 defaults: ${ratios('shipped', 'v8-defaults')}; the CPU-heavy scan takes ${(mean(m.scan.baseline) / mean(m.scan.optimising)).toFixed(2)}× as long on the baseline tier.`,
    `- **Creating the database in-process.** PGlite alone right after creating a database: ${r(pgliteCreated)} MB, against ${r(pgliteExisting)} MB when it opens an existing one. Most of the ${r(pgliteCreated - pgliteExisting)} MB is garbage (initdb's own PGlite instance and the copied data directory) that stays resident until V8 runs a full collection, which an idle server may not do for a long time; after one, ${r(pgliteCreatedGc - pgliteExistingGc)} MB remain (${r(pgliteCreatedGc)} against ${r(pgliteExistingGc)} MB). The server creates a new database in a short-lived child process instead; its first start settles at ${r(idle('first-start'))} MB.`,
    `- **tsx.** \`tsx server/main.ts\` (the old \`npm start\`, npm's own process not counted) holds ${r(v('tsx')?.idleTreeRss ?? NaN)} MB in its process group against ${r(idle('before'))} MB for the same settings under plain node: ${r((v('tsx')?.idleTreeRss ?? NaN) - idle('before'))} MB of wrapper processes (tsx's CLI, esbuild's service) and in-process transpiling.`,
    `- **What remains** (shipped, idle ${r(idle('shipped'))} MB): node itself ${r(nodeOnly)} MB; PGlite with these settings ${r(pgliteLean - nodeOnly)} MB (its WebAssembly module and runtime, the ${EMBEDDED_SHARED_BUFFERS_DEFAULT} pool and catalog caches inside a 128 MB WebAssembly memory that cannot start smaller); the app ~${r(idle('postgres') - nodeOnly)} MB (the same server on PostgreSQL idles at ${r(idle('postgres'))} MB). Under the read load the JS heap adds ${r(peak('shipped') - idle('shipped'))} MB.`,
  ];
  return lines.join('\n');
}

function report(m: Measured): void {
  const { variants: all, pairs, scan, components, plan, duration: seconds, date, machine } = m;
  const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
  const mb = (n: number | null) => (n === null ? '–' : String(Math.round(n)));
  const scenarioIds = ['1', '2', '3', '4a', '4b'];
  const shipped = all.find((r) => r.id === 'shipped')!;
  const firstStart = all.find((r) => r.id === 'first-start')!;
  const target = Math.max(shipped.idleRss, shipped.peakRssUnderLoad ?? 0, firstStart.idleRss);
  const md = `# Embedded database memory ${date}${m.quick ? ' (quick)' : ''}

Machine: ${machine}. \`npm run bench:memory\` (scripts/bench/embedded-memory.ts).
Data: large account ${plan.large.members} members / ${plan.large.entries} entries / ${plan.large.sessions} front sessions, a small
account and ${plan.noise.accounts} noise accounts, seeded into one embedded data directory; every variant
starts on a fresh copy. Server: NODE_ENV=production, LOG_LEVEL=warn. Load: autocannon, ${m.connections} connections,
${seconds} s per read scenario (1, 2, 3, 4a, 4b of \`npm run bench\`). RSS is VmRSS of the server
process: idle is ${SETTLE_MS / 1000} s after /healthz first answered; "group" adds every other process
of its process group (wrappers such as tsx and esbuild); HWM is the process's high-water mark.

Target: the embedded server ≤ 300 MB RSS after start and under the read scenarios —
**${target <= 300 ? 'met' : 'not met'}** (largest of shipped idle, shipped under load, first start: ${mb(target)} MB).

## Where the memory goes

${summary(m)}

## Variants (one change each against "shipped")

The req/s columns come from separate runs and drift with whatever else the machine does; compare
throughput with the paired table below.

| variant | idle RSS MB | idle group MB | peak under read load MB | after load MB | HWM MB | req/s ${scenarioIds.join(' / ')} | errors |
|---|---|---|---|---|---|---|---|
${all.map((r) => `| ${r.title} | ${mb(r.idleRss)} | ${mb(r.idleTreeRss)} | ${mb(r.peakRssUnderLoad)} | ${mb(r.rssAfterLoad)} | ${mb(r.hwm)} | ${Object.keys(r.rps).length ? scenarioIds.map((id) => r.rps[id] ?? '–').join(' / ') : '–'} | ${Object.keys(r.rps).length ? r.errors : '–'} |`).join('\n')}

## Throughput, paired (B / A, both servers up, each scenario loaded A B B A for ${seconds} s)

Runs of one server on one scenario differ by up to ±20% on this shared 2-core machine (see the runs
in brackets), so a single ratio between 0.8× and 1.2× is within noise; a setting that cost
throughput would show in most columns, not in one.

| B / A | ${scenarioIds.join(' | ')} |
|---|${scenarioIds.map(() => '---|').join('')}
${pairs.map((p) => `| ${p.b} / ${p.a} | ${p.scenarios.map((s) => `${s.ratio.toFixed(2)}× (${s.runs.join(', ')})`).join(' | ')} |`).join('\n')}

## A CPU-heavy query with and without V8's optimising WebAssembly tier

PGlite alone, full scan of front_sessions (${plan.large.sessions + plan.small.sessions + plan.noise.accounts * plan.noise.sessions} rows, count/sum/max) back to back, mean over 6 s
after 4 s of warm-up, runs in the order optimising, baseline, baseline, optimising: optimising tier ${scan.optimising.map((n) => n.toFixed(0)).join(' / ')} ms,
baseline (Liftoff) only ${scan.baseline.map((n) => n.toFixed(0)).join(' / ')} ms — baseline takes ${(mean(scan.baseline) / mean(scan.optimising)).toFixed(2)}× as long.

## Components measured alone (RSS ${SETTLE_MS / 1000} s after start, then after a forced full GC)

| part | RSS MB | after full GC MB |
|---|---|---|
${components.map((c) => `| ${c.part} | ${mb(c.rss)} | ${mb(c.afterGc)} |`).join('\n')}
`;
  const dir = m.quick ? join(root, 'bench/tmp') : resolve(root, values.out ?? 'bench/results');
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, `${date}-embedded-memory.md`), md);
  writeFileSync(join(dir, `${date}-embedded-memory.json`), JSON.stringify(m, null, 2) + '\n');
  process.stdout.write('\n' + md);
  log(`wrote ${join(dir, date)}-embedded-memory.md and .json`);
}

if (values.render) report(JSON.parse(readFileSync(resolve(values.render), 'utf8')) as Measured);
else
  main().catch((err) => {
    console.error(err);
    process.exit(1);
  });

/**
 * Where the full server's CPU goes on each read scenario of the bench (and on the write scenarios 5
 * and 5k, POST /entries without and with an Idempotency-Key, M3, the message send, and the friend
 * reads F1, F2, F3a and F4s of scripts/bench/areas.ts, when `--only` names them):
 * `npm run bench:profile` (DATABASE_URL pointing at PostgreSQL; `-- --only 1,4b`, `--seconds 8`, `--full` for the full
 * seed, `--top 30`, `--independent` to profile the independent baseline (scripts/bench/independent.ts) on the
 * read scenarios instead, for a side-by-side look). For each scenario it starts the server under `--cpu-prof`, loads it with the
 * bench's 32 connections, stops it and sums the profile's self time by package (express, the
 * validator, knex, pg, pino, the server's own code, node internals, the garbage collector), then
 * names the heaviest functions. It measures shares, not speed: the profiler itself slows the
 * server down. The profiles stay in bench/tmp/profiles/ for Chrome DevTools or speedscope.
 *
 * `--built`: the bundle `npm start` runs (dist/main.js, built first) instead of the sources under
 * tsx, whose transform adds work of its own (esbuild's keepNames names every function created);
 * its frames are mapped back to server/ through the bundle's source map.
 *
 * `--threads`: no profiler; the CPU per request of the server's main thread and of its other
 * threads together (V8's helpers, libuv's pool) over the measured load, from /proc.
 *
 * `--heap`: instead of CPU, what each request allocates, collected objects included (V8's sampling
 * heap profiler over the measured load, preloaded from heapSampler.ts): bytes per request by package
 * and the heaviest allocating functions. Allocation drives the garbage collector's share, and unlike
 * time it does not change with the load on the machine. `--heap --survivors`: only what outlived a
 * collection of the young generation (what the old generation receives), by allocating function.
 *
 * `--perf`: Linux perf instead of V8's profiler: the process sampled over the measured load
 * (`perf record -F 1999`, the JIT's functions named through `--perf-basic-prof-only-functions`),
 * kernel and native code included, reported as samples per 1,000 requests by symbol, so two
 * servers (add `--independent`) or two builds can be set side by side. Needs `perf` on the PATH.
 */
import { spawn, spawnSync } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { SourceMap } from 'node:module';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import autocannon from 'autocannon';
import { openDatabase } from '../../server/db/knex.ts';
import { migrateLatest } from '../../server/db/migrate.ts';
import { buildServer } from '../build.ts';
import { seedMessaging, shareWithFriend } from './areas.ts';
import { FULL_PLAN, SMOKE_PLAN, seed } from './seed.ts';
import { adminQuery, benchMessageKeys, freePort } from './support.ts';

const root = resolve(import.meta.dirname, '../..');
const { values } = parseArgs({
  options: {
    only: { type: 'string' },
    seconds: { type: 'string' },
    full: { type: 'boolean' },
    top: { type: 'string' },
    independent: { type: 'boolean' },
    heap: { type: 'boolean' },
    built: { type: 'boolean' },
    threads: { type: 'boolean' },
    survivors: { type: 'boolean' },
    perf: { type: 'boolean' },
  },
});
const seconds = Number(values.seconds ?? 8);
const top = Number(values.top ?? 25);
/** The idle pause between the warm-up and the measured load, which marks where the load starts. */
const PAUSE_MS = 1500;
const log = (m: string) => process.stdout.write(`[profile] ${m}\n`);

const baseUrl = process.env.DATABASE_URL ?? '';
if (!baseUrl) {
  console.error(
    'npm run bench:profile needs DATABASE_URL pointing at a PostgreSQL server (it creates and drops its own database).',
  );
  process.exit(2);
}
const dbName = `profile_${Date.now()}_${randomBytes(3).toString('hex')}`;
const dbUrl = Object.assign(new URL(baseUrl), { pathname: `/${dbName}` }).toString();

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number; columnNumber: number };
  children?: number[];
}
interface CpuProfile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
}

/** The bundle's source map (`--built`), read once. */
let bundleMap: SourceMap | undefined;

/** A frame of the bundle (dist/main.js) at its place in the source (server/…), through the source map. */
function original(frame: ProfileNode['callFrame']): ProfileNode['callFrame'] {
  if (!frame.url.endsWith('/dist/main.js')) return frame;
  bundleMap ??= new SourceMap(JSON.parse(readFileSync(join(root, 'dist/main.js.map'), 'utf8')));
  const entry = bundleMap.findEntry(frame.lineNumber, frame.columnNumber);
  if (!('originalSource' in entry)) return frame;
  return { ...frame, url: resolve(join(root, 'dist'), entry.originalSource), lineNumber: entry.originalLine };
}

/** The package (or part of the runtime) a profile frame belongs to. */
function packageOf(url: string, name: string): string {
  if (!url) return name.startsWith('(') ? name : '(native)';
  const nm = url.lastIndexOf('node_modules/');
  if (nm >= 0) {
    const rest = url.slice(nm + 'node_modules/'.length).split('/');
    return rest[0]!.startsWith('@') ? `${rest[0]}/${rest[1]}` : rest[0]!;
  }
  if (url.startsWith('node:')) return `node:${url.slice(5).split('/')[0] === 'internal' ? 'internal' : url.slice(5)}`;
  const at = url.indexOf('/server/');
  if (at >= 0)
    return `server/${
      url
        .slice(at + '/server/'.length)
        .split('/')
        .slice(0, -1)
        .join('/') || '.'
    }`;
  return url.replace(/^file:\/\//, '').replace(root, '.');
}

/**
 * Self time by package and by function, over the measured load only: start-up and the warm-up
 * (module loading, schema compilation) end with the idle pause the profiler saw last before the
 * load (see profileScenario), and the samples up to it are left out.
 */
function summarise(profile: CpuProfile): {
  total: number;
  byPackage: Array<[string, number]>;
  byFunction: Array<[string, number]>;
} {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const idle = new Set(profile.nodes.filter((n) => n.callFrame.functionName === '(idle)').map((n) => n.id));
  let from = 0;
  let idleRun = 0;
  profile.samples.forEach((id, i) => {
    idleRun = idle.has(id) ? idleRun + (profile.timeDeltas[i] ?? 0) : 0;
    if (idleRun >= PAUSE_MS * 500) from = i; // half the pause, in µs
  });
  const self = new Map<number, number>();
  profile.samples.forEach((id, i) => {
    if (i > from) self.set(id, (self.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0));
  });
  const pkg = new Map<string, number>();
  const fn = new Map<string, number>();
  let total = 0;
  for (const [id, us] of self) {
    const node = byId.get(id)!;
    const { functionName, url, lineNumber } = original(node.callFrame);
    if (functionName === '(idle)') continue;
    total += us;
    const p = packageOf(url, functionName);
    pkg.set(p, (pkg.get(p) ?? 0) + us);
    const f = `${functionName || '(anonymous)'} ${p}${url ? `:${lineNumber + 1}` : ''}`;
    fn.set(f, (fn.get(f) ?? 0) + us);
  }
  const sorted = (m: Map<string, number>) => [...m.entries()].sort((a, b) => b[1] - a[1]);
  return { total, byPackage: sorted(pkg), byFunction: sorted(fn) };
}

/**
 * A scenario's load: a GET of a path as the large account's owner, or a request built anew each
 * time (the write scenarios), or a GET under another key (the friend reads).
 */
type Load =
  | string
  | {
      title: string;
      path: string;
      request?: () => { method: 'POST'; body: string; headers?: Record<string, string>; path?: string };
      /** The API key the load runs under, when not the large account owner's. */
      key?: string;
      /** Run once the server answers, before the warm-up (data written through the API). */
      prepare?: (url: string) => Promise<void>;
    };

async function profileScenario(id: string, load: Load, key: string, env: Record<string, string>): Promise<void> {
  const path = typeof load === 'string' ? load : load.path;
  const dir = join(root, 'bench/tmp/profiles', values.independent ? `${id}-independent` : id);
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  const port = await freePort();
  const script = values.independent ? 'scripts/bench/independent.ts' : values.built ? 'dist/main.js' : 'server/main.ts';
  const heapFile = join(dir, 'allocations.heapprofile');
  const profiler = values.threads
    ? []
    : values.perf
      ? ['--perf-basic-prof-only-functions']
      : values.heap
        ? ['--import', './scripts/bench/heapSampler.ts']
        : ['--cpu-prof', `--cpu-prof-dir=${dir}`];
  // The heap sampler is TypeScript: with --heap even the bundle runs with tsx's loader.
  const loader = script.endsWith('.js') && !values.heap ? [] : ['--import', 'tsx'];
  const child = spawn(process.execPath, [...loader, ...profiler, script], {
    cwd: root,
    env: {
      ...process.env,
      MESSAGE_ENCRYPTION_KEYS: benchMessageKeys,
      ...env,
      PORT: String(port),
      HOST: '127.0.0.1',
      HEAP_PROFILE_FILE: heapFile,
      HEAP_PROFILE_SURVIVORS: values.survivors ? '1' : '0',
    },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  const url = `http://127.0.0.1:${port}`;
  for (let i = 0; i < 300; i++) {
    if (child.exitCode !== null) throw new Error(`the server exited with ${child.exitCode}`);
    if (
      await fetch(`${url}/healthz`).then(
        () => true,
        () => false,
      )
    )
      break;
    await new Promise((r) => setTimeout(r, 100));
  }
  const headers = {
    authorization: `Bearer ${typeof load === 'string' ? key : (load.key ?? key)}`,
    'content-type': 'application/json',
  };
  if (typeof load !== 'string') await load.prepare?.(url);
  const build = typeof load === 'string' ? undefined : load.request;
  const requests =
    build === undefined
      ? undefined
      : [
          {
            setupRequest: (req: object) => {
              const made = build();
              return { ...req, ...made, path: made.path ?? path, headers: { ...headers, ...made.headers } };
            },
          },
        ];
  const run = (duration: number) =>
    autocannon({ url: url + path, connections: 32, duration, headers, ...(requests ? { requests } : {}) });
  await run(2);
  await new Promise((r) => setTimeout(r, PAUSE_MS));
  if (values.heap) {
    child.kill('SIGUSR2');
    await new Promise((r) => setTimeout(r, 200));
  }
  const before = values.threads ? threadCpu(child.pid!) : undefined;
  const perfFile = join(dir, 'perf.data');
  const perf = values.perf
    ? spawn('perf', ['record', '-F', '1999', '-p', String(child.pid), '-o', perfFile], { stdio: 'ignore' })
    : undefined;
  if (perf) await new Promise((r) => setTimeout(r, 300));
  const r = await run(seconds);
  log(`${id}: ${(r.throughput.total / Math.max(1, r.requests.total)).toFixed(0)} bytes a response (headers included)`);
  if (perf) {
    const exited = new Promise<void>((res) => perf.on('exit', () => res()));
    perf.kill('SIGINT');
    await exited;
  }
  const after = values.threads ? threadCpu(child.pid!) : undefined;
  if (values.heap) {
    child.kill('SIGUSR2');
    for (let i = 0; i < 100 && !existsSync(heapFile); i++) await new Promise((res) => setTimeout(res, 100));
  }
  await new Promise<void>((res) => {
    child.on('exit', () => res());
    child.kill('SIGTERM');
  });
  const title = `${values.independent ? 'independent baseline, ' : ''}scenario ${id} ${typeof load === 'string' ? `GET ${path}` : load.title}`;
  if (before && after) return reportThreads(title, before, after, r.requests.total);
  if (values.perf) return reportPerf(title, perfFile, r.requests.total);
  if (values.heap) return reportAllocations(title, heapFile, r.requests.total);
  const file = readdirSync(dir).find((f) => f.endsWith('.cpuprofile'));
  if (!file) throw new Error(`no profile was written to ${dir}`);
  const { total, byPackage, byFunction } = summarise(JSON.parse(readFileSync(join(dir, file), 'utf8')) as CpuProfile);
  const share = (us: number) => `${((100 * us) / total).toFixed(1).padStart(5)} %`;
  log(
    `${title}: ${r.requests.total} requests (${r.requests.average.toFixed(0)} req/s under the profiler), ${(total / 1000 / Math.max(1, r.requests.total)).toFixed(3)} ms on the main thread (not idle) per request, ${r.non2xx} answered other than 2xx`,
  );
  for (const [p, us] of byPackage.slice(0, 16)) log(`  ${share(us)}  ${p}`);
  log('  heaviest functions (self time):');
  for (const [f, us] of byFunction.slice(0, top)) log(`  ${share(us)}  ${f}`);
}

/** CPU time (ms) of a process so far: its main thread's, and its other threads' together (node names them all alike). */
function threadCpu(pid: number): Map<string, number> {
  const out = new Map<string, number>();
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    try {
      const stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8');
      const comm = stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'));
      const name = tid === String(pid) ? `${comm} (main thread)` : `${comm} (other threads)`;
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      // utime and stime (fields 14 and 15 of stat), in clock ticks of 10 ms.
      const ms = (Number(fields[11]) + Number(fields[12])) * 10;
      out.set(name, (out.get(name) ?? 0) + ms);
    } catch {
      // The thread ended between the listing and the read.
    }
  }
  return out;
}

/** `--threads`: the CPU per request of the server's threads over the measured load (no profiler). */
function reportThreads(title: string, before: Map<string, number>, after: Map<string, number>, requests: number): void {
  const n = Math.max(1, requests);
  const rows = [...after].map(([name, ms]) => [name, (ms - (before.get(name) ?? 0)) / n] as const);
  const total = rows.reduce((sum, [, ms]) => sum + ms, 0);
  log(`${title}: ${requests} requests, ${total.toFixed(3)} ms CPU per request in all`);
  for (const [name, ms] of rows.sort((a, b) => b[1] - a[1])) if (ms > 0) log(`  ${ms.toFixed(3)} ms  ${name}`);
}

/** `--perf`: samples per 1,000 requests, in all and by symbol (self, kernel included). */
function reportPerf(title: string, file: string, requests: number): void {
  const report = spawnSync('perf', ['report', '-i', file, '--no-children', '--sort', 'sym', '-n', '--stdio'], {
    encoding: 'utf8',
    maxBuffer: 64 * 1024 * 1024,
  });
  if (report.status !== 0) throw new Error(`perf report failed: ${report.stderr}`);
  const rows: Array<[symbol: string, samples: number]> = [];
  for (const line of report.stdout.split('\n')) {
    const m = /^\s+[\d.]+%\s+(\d+)\s+\[([.k])\]\s+(.*?)\s*$/.exec(line);
    if (m) rows.push([`${m[2] === 'k' ? '[kernel] ' : ''}${m[3]}`, Number(m[1])]);
  }
  const per = (samples: number) => ((1000 * samples) / Math.max(1, requests)).toFixed(1).padStart(7);
  const total = rows.reduce((sum, [, n]) => sum + n, 0);
  const kernel = rows.filter(([s]) => s.startsWith('[kernel]')).reduce((sum, [, n]) => sum + n, 0);
  log(
    `${title}: ${requests} requests; samples per 1,000 requests: ${per(total).trim()} in all, ${per(kernel).trim()} in the kernel`,
  );
  for (const [symbol, n] of rows.slice(0, top)) log(`  ${per(n)}  ${symbol}`);
}

interface HeapNode {
  callFrame: ProfileNode['callFrame'];
  selfSize: number;
  children: HeapNode[];
}

/** Bytes allocated per request (sampled, scaled by V8) by package and by function. */
function reportAllocations(title: string, file: string, requests: number): void {
  if (!existsSync(file)) throw new Error(`no heap profile was written to ${file}`);
  const { head } = JSON.parse(readFileSync(file, 'utf8')) as { head: HeapNode };
  const pkg = new Map<string, number>();
  const fn = new Map<string, number>();
  let total = 0;
  const walk = (node: HeapNode) => {
    const { functionName, url, lineNumber } = original(node.callFrame);
    if (node.selfSize > 0) {
      total += node.selfSize;
      const p = packageOf(url, functionName);
      pkg.set(p, (pkg.get(p) ?? 0) + node.selfSize);
      const f = `${functionName || '(anonymous)'} ${p}${url ? `:${lineNumber + 1}` : ''}`;
      fn.set(f, (fn.get(f) ?? 0) + node.selfSize);
    }
    for (const child of node.children) walk(child);
  };
  walk(head);
  const n = Math.max(1, requests);
  const kb = (bytes: number) => `${(bytes / n / 1024).toFixed(1).padStart(6)} KB`;
  const sorted = (m: Map<string, number>) => [...m.entries()].sort((a, b) => b[1] - a[1]);
  const what = values.survivors ? 'outliving a young-generation collection' : 'allocated';
  log(`${title}: ${requests} requests, ${kb(total).trim()} ${what} per request`);
  for (const [p, bytes] of sorted(pkg).slice(0, 16)) log(`  ${kb(bytes)}  ${p}`);
  log('  heaviest allocating functions (self):');
  for (const [f, bytes] of sorted(fn).slice(0, top)) log(`  ${kb(bytes)}  ${f}`);
}

async function main(): Promise<void> {
  if (values.built) await buildServer();
  await adminQuery(baseUrl, `create database ${dbName}`);
  try {
    const db = await openDatabase({ databaseUrl: dbUrl, poolMax: 1 });
    await migrateLatest(db.knex);
    const seeded = await seed(db.knex, values.full ? FULL_PLAN : SMOKE_PLAN, log);
    await db.knex.raw('vacuum analyze');
    const depth = values.full ? 10_000 : 5_000;
    const deep = (
      await db.knex.raw(
        'select started_at, id from front_sessions where user_id = ? and deleted_at is null order by started_at desc, id desc offset ? limit 1',
        [seeded.large.userId, depth - 1],
      )
    ).rows[0] as { started_at: number; id: string };
    await db.close();
    const reads: Record<string, string> = {
      '1': '/api/v1/front',
      '2': '/api/v1/entries?limit=50',
      '3': '/api/v1/members/page?limit=100',
      '4a': '/api/v1/front/history?limit=50',
      '4b': `/api/v1/front/history?limit=50&cursorStartedAt=${deep.started_at}&cursorId=${deep.id}`,
    };
    const pool = seeded.large.frontPool;
    let messaging: Awaited<ReturnType<typeof seedMessaging>> | undefined;
    let turn = 0;
    const note = () =>
      JSON.stringify({
        title: 'Bench',
        content: 'Written by the bench.',
        memberIds: [pool[Math.floor(Math.random() * pool.length)]],
      });
    const writes: Record<string, Load> = {
      '5': {
        title: 'POST /api/v1/entries',
        path: '/api/v1/entries',
        request: () => ({ method: 'POST', body: note() }),
      },
      '5k': {
        title: 'POST /api/v1/entries with a new Idempotency-Key each time',
        path: '/api/v1/entries',
        request: () => ({ method: 'POST', body: note(), headers: { 'idempotency-key': randomUUID() } }),
      },
      M3: {
        title: 'POST /api/v1/messaging/channels/{id}/messages (the channels in turn)',
        path: '/api/v1/messaging/channels',
        prepare: async (url) => {
          const db = await openDatabase({ databaseUrl: dbUrl, poolMax: 1 });
          try {
            messaging = await seedMessaging(url, db.knex, seeded.large, 1_000, 100);
            await db.knex.raw('vacuum analyze');
          } finally {
            await db.close();
          }
        },
        request: () => {
          if (!messaging) throw new Error('M3 was not prepared');
          const channelId = messaging.channelIds[turn++ % messaging.channelIds.length];
          return {
            method: 'POST',
            path: `/api/v1/messaging/channels/${channelId}/messages`,
            body: JSON.stringify({ memberId: messaging.memberId, content: 'Written by the bench: see you at six.' }),
          };
        },
      },
    };
    // The friend reads (F…, as areas.ts defines them): the viewer befriended once, by the first that runs.
    let shared: Promise<void> | undefined;
    const share = (url: string) =>
      (shared ??= (async () => {
        const db = await openDatabase({ databaseUrl: dbUrl, poolMax: 1 });
        try {
          await shareWithFriend(url, db.knex, seeded.large, seeded.viewer);
          await shareWithFriend(url, db.knex, seeded.small, seeded.viewer);
          await db.knex.raw('vacuum analyze');
        } finally {
          await db.close();
        }
      })());
    const friendRead = (owner: { userId: string }, rest: string, note = ''): Load => ({
      title: `friend GET /friends/{id}${rest}${note}`,
      path: `/api/v1/friends/${owner.userId}${rest}`,
      key: seeded.viewer.apiKey,
      prepare: share,
    });
    const friends: Record<string, Load> = {
      F1: friendRead(seeded.large, '/members'),
      F2: friendRead(seeded.large, '/front'),
      F3a: friendRead(seeded.large, '/front/history?limit=50'),
      F4s: friendRead(seeded.small, '/entries?limit=50', ' (small account)'),
    };
    const only = values.only?.split(',');
    // The job queue's polling would break up the idle pause that marks the start of the load.
    const env = {
      NODE_ENV: 'production',
      LOG_LEVEL: 'info',
      RATE_LIMIT_PER_MINUTE: '10000000',
      ADMIN_TOKEN: randomBytes(24).toString('hex'),
      DATABASE_URL: dbUrl,
      JOB_POLL_INTERVAL_MS: '60000',
    };
    for (const [id, load] of Object.entries({ ...reads, ...writes, ...friends })) {
      if (only ? only.includes(id) : typeof load === 'string')
        await profileScenario(id, load, seeded.large.apiKey, env);
    }
  } finally {
    await adminQuery(baseUrl, `drop database if exists ${dbName} with (force)`);
  }
}

await main();

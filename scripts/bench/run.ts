/**
 * npm run bench [-- --smoke] [-- --duration=10] [-- --keep] [-- --check-only] [-- --with-bare] [-- --embedded] [-- --friend-ratios] [-- --idempotency-pair] [-- --read-ratios] [-- --write-ratios]
 *
 * Needs DATABASE_URL (a PostgreSQL server on this machine: CPU is read from /proc); creates and
 * drops its own database. Seeds through SQL, starts the real server (built with `npm run build`
 * and run as `npm start` runs it: `node dist/main.js`, NODE_ENV=production, request validation,
 * authentication and rate limiting on) and the
 * independent baseline (scripts/bench/independent.ts: node:http + pg, one prepared statement per
 * request), checks that both answer every read (and the awkward account's pages and errors) and
 * the awkward account's writes (status, headers, body, the data and events written) alike — a
 * difference fails the run — then loads them from this process with autocannon (32 connections,
 * warm-up, fixed duration): each read scenario and each write scenario (5, 6, M3) as a pair of two
 * A B B A cycles (A B B A B A A B), full / independent, with CPU per request (server process plus
 * its PostgreSQL backends).
 * `--check-only` stops after the body check; `--friend-ratios` measures only the five friend /
 * owner req/s pairs after it and prints them; `--idempotency-pair` likewise the CPU per request of
 * POST /entries with an Idempotency-Key against without (scenarios 5k, 5); `--read-ratios` only the
 * full / independent pairs of the read scenarios (1–4b), with the server process's CPU per request
 * apart from its backends', and `--write-ratios` those of the writes 5, 6 and M3; `--with-bare` adds full / bare pairs (the old baseline:
 * the server's own services without the HTTP pipeline, so the pipeline's share of the gap).
 * A full run then measures the read scenarios and paired targets on the embedded database too
 * (PGlite, a medium account, no thresholds); `--smoke --embedded` adds that part to a smoke run.
 * Writes bench/results/<date>.md and .json (smoke runs go to bench/tmp/).
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, totalmem, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import autocannon from 'autocannon';
import type { Knex } from 'knex';
import pg from 'pg';
import { openDatabase } from '../../server/db/knex.ts';
import { migrateLatest } from '../../server/db/migrate.ts';
import { compareServers, compareWrites, type CheckOutcome, type CheckRequest, type WriteCheck } from './bodyCheck.ts';
import { CpuMeter, type CpuUsage } from './cpu.ts';
import { areaScenarios, seedAreas } from './areas.ts';
import { adminQuery, benchMessageKeys, freePort } from './support.ts';
import {
  FULL_PLAN,
  SMOKE_PLAN,
  seed,
  type AccountSize,
  type AwkwardAccount,
  type SeedPlan,
  type SeededAccount,
} from './seed.ts';

const root = resolve(import.meta.dirname, '../..');
const { values } = parseArgs({
  options: {
    smoke: { type: 'boolean' },
    duration: { type: 'string' },
    keep: { type: 'boolean' },
    'check-only': { type: 'boolean' },
    'with-bare': { type: 'boolean' },
    /** With --smoke: run the embedded database part too (a full run always does). */
    embedded: { type: 'boolean' },
    /** Only the five friend / owner req/s pairs (issue 13), printed; no results file. */
    'friend-ratios': { type: 'boolean' },
    /** Only the CPU pair of POST /entries with and without an Idempotency-Key (issue 29), printed; no results file. */
    'idempotency-pair': { type: 'boolean' },
    /** Only the full / independent pairs of the reads (issue 30), printed; no results file. */
    'read-ratios': { type: 'boolean' },
    /** Only the full / independent pairs of the writes 5, 6 and M3 (issue 30), printed; no results file. */
    'write-ratios': { type: 'boolean' },
  },
});
const smoke = values.smoke ?? false;
const withBare = values['with-bare'] ?? false;
const duration = Number(values.duration ?? (smoke ? 0.2 : 15));
/** Each side's share of a pair's A B B A runs, in seconds; the smoke run's tenths of a second only keep the harness working. */
const half = smoke ? duration / 2 : Math.max(1, Math.round(duration / 2));
// The smoke run (CI) only keeps the harness working: no warm-up, whose figures it would not use anyway.
const warmup = smoke && !values['idempotency-pair'] ? 0 : 5;
const CONNECTIONS = 32;
const log = (m: string) => process.stdout.write(`[bench] ${m}\n`);

const baseUrl = process.env.DATABASE_URL ?? '';
if (!baseUrl) {
  console.error(
    'npm run bench needs DATABASE_URL pointing at a PostgreSQL server (it creates and drops its own database).',
  );
  process.exit(2);
}
const dbName = `bench_${Date.now()}_${randomBytes(3).toString('hex')}`;
const dbUrl = (() => {
  const u = new URL(baseUrl);
  u.pathname = `/${dbName}`;
  return u.toString();
})();

/** Each server's connections carry its own application_name, so its backends can be found. */
const APP = { full: 'bench_full', independent: 'bench_independent', bare: 'bench_bare' } as const;
type TargetName = keyof typeof APP;
function urlFor(target: TargetName): string {
  const u = new URL(dbUrl);
  u.searchParams.set('application_name', APP[target]);
  return u.toString();
}

interface Proc {
  child: ChildProcess;
  url: string;
  stop(): Promise<void>;
}

/** The full server as `npm start` runs it (the bundle `npm run build` writes), built once per run. */
const SERVER = 'dist/main.js';
function buildServer(): void {
  const built = spawnSync(process.execPath, ['--import', 'tsx', 'scripts/build.ts'], { cwd: root, stdio: 'ignore' });
  if (built.status !== 0) throw new Error(`npm run build failed (${built.status})`);
}

async function startProcess(args: string[], env: Record<string, string>, port: number): Promise<Proc> {
  // TypeScript (the baseline, the bare server) runs under tsx; the built server runs on plain node.
  const loader = args[0]?.endsWith('.js') ? [] : ['--import', 'tsx'];
  const child = spawn(process.execPath, [...loader, ...args], {
    cwd: root,
    env: { ...process.env, MESSAGE_ENCRYPTION_KEYS: benchMessageKeys, ...env, PORT: String(port), HOST: '127.0.0.1' },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  const url = `http://127.0.0.1:${port}`;
  for (let i = 0; i < 300; i++) {
    if (child.exitCode !== null) throw new Error(`${args.join(' ')} exited with ${child.exitCode}`);
    try {
      await fetch(`${url}/healthz`);
      break;
    } catch {
      await new Promise((r) => setTimeout(r, 100));
    }
  }
  return {
    child,
    url,
    stop: () =>
      new Promise<void>((res) => {
        if (child.exitCode !== null) return res();
        child.on('exit', () => res());
        child.kill('SIGTERM');
      }),
  };
}

function rssMb(pid: number): number {
  try {
    const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) / 1024 : 0;
  } catch {
    return 0;
  }
}

interface Scenario {
  id: string;
  title: string;
  method?: 'GET' | 'POST' | 'DELETE';
  path: string;
  body?: () => string;
  /** For alternating write scenarios. */
  requests?: autocannon.Request[];
  /** The key this scenario runs with, when not the account's the caller passes (friend scenarios). */
  key?: string;
}

interface Target {
  name: TargetName;
  proc: Proc;
}

interface Measurement {
  scenario: string;
  title: string;
  target: TargetName;
  account: 'large' | 'small';
  rps: number;
  p50: number;
  p99: number;
  requests: number;
  errors: number;
  non2xx: number;
  peakRssMb: number;
  /** CPU ms per request: the server process, its PostgreSQL backends, and both. */
  cpuMsPerRequest: CpuPerRequest;
}

interface CpuPerRequest {
  server: number;
  database: number;
  total: number;
}

let meter: CpuMeter;

const perRequest = (cpu: CpuUsage, requests: number): CpuPerRequest => {
  const n = Math.max(1, requests);
  return { server: cpu.serverMs / n, database: cpu.databaseMs / n, total: (cpu.serverMs + cpu.databaseMs) / n };
};

/**
 * autocannon counts requests in samples of 1 s and runs for at least one sample, so a smoke run of a
 * tenth of a second would take a second. The smoke run takes one sample per load, as long as the load.
 */
const sampleMs = (seconds: number) => (smoke ? Math.max(1, Math.round(seconds * 1000)) : 1000);

/** Requests per second of a load: autocannon's mean requests per sample, per second. */
const reqPerSecond = (r: autocannon.Result, seconds: number) => (r.requests.average * 1000) / sampleMs(seconds);

async function load(target: Proc, key: string, s: Scenario, seconds: number): Promise<autocannon.Result> {
  const opts: autocannon.Options = {
    url: target.url + s.path,
    connections: CONNECTIONS,
    duration: seconds,
    sampleInt: sampleMs(seconds),
    headers: { authorization: `Bearer ${s.key ?? key}`, 'content-type': 'application/json' },
    method: s.method ?? 'GET',
  };
  if (s.requests) opts.requests = s.requests;
  else if (s.body)
    opts.requests = [{ method: s.method ?? 'GET', path: s.path, setupRequest: (req) => ({ ...req, body: s.body!() }) }];
  return autocannon(opts);
}

/** Load before a measurement, so that caches and JIT are warm (none in the smoke run). */
async function warmUp(target: Proc, key: string, s: Scenario): Promise<void> {
  if (warmup > 0) await load(target, key, s, warmup);
}

/** One load with the CPU its server (process and backends) spent on it. */
async function measuredLoad(
  target: Target,
  key: string,
  s: Scenario,
  seconds: number,
): Promise<{ result: autocannon.Result; cpu: CpuUsage }> {
  return meter.measure(target.proc.child.pid!, APP[target.name], () => load(target.proc, key, s, seconds));
}

async function measure(target: Target, account: 'large' | 'small', key: string, s: Scenario): Promise<Measurement> {
  await warmUp(target.proc, key, s);
  let peak = 0;
  const pid = target.proc.child.pid!;
  const sampler = setInterval(() => (peak = Math.max(peak, rssMb(pid))), 100);
  const { result: r, cpu } = await measuredLoad(target, key, s, duration);
  clearInterval(sampler);
  peak = Math.max(peak, rssMb(pid));
  const m: Measurement = {
    scenario: s.id,
    title: s.title,
    target: target.name,
    account,
    rps: reqPerSecond(r, duration),
    p50: r.latency.p50,
    p99: r.latency.p99,
    requests: r.requests.total,
    errors: r.errors + r.timeouts,
    non2xx: r.non2xx,
    peakRssMb: Math.round(peak),
    cpuMsPerRequest: perRequest(cpu, r.requests.total),
  };
  log(
    `${s.id} ${target.name}/${account}: ${m.rps.toFixed(0)} req/s, p50 ${m.p50} ms, p99 ${m.p99} ms, CPU ${m.cpuMsPerRequest.total.toFixed(2)} ms/req, rss ${m.peakRssMb} MB` +
      `${m.non2xx || m.errors ? `, ${m.non2xx} non-2xx, ${m.errors} errors` : ''}`,
  );
  return m;
}

interface PairSide {
  label: string;
  proc: Proc;
  key: string;
  scenario: Scenario;
}

type PairMetric = 'p50' | 'rps' | 'cpu';
const UNIT: Record<PairMetric, string> = { p50: 'ms', rps: 'req/s', cpu: 'CPU ms/req' };

interface PairResult {
  target: string;
  limit: number;
  a: string;
  b: string;
  /**
   * What the ratio compares: latency (B p50 / A p50, lower is better), throughput (B req/s / A req/s,
   * higher is better) or cost (B / A CPU ms per request, server process and PostgreSQL, lower is better).
   */
  metric: PairMetric;
  /** The metric of each run, in the order A, B, B, A. */
  runs: number[];
  aValue: number;
  bValue: number;
  ratio: number;
}

/**
 * A ratio target compares two loads: of one server (large vs small account, deep vs first page)
 * or of two (full vs independent). Measured apart, a 2-core machine's drift (other processes,
 * autovacuum, CPU steal) shows up in the ratio, so the two sides run back to back in the order
 * A B B A (half the duration each), which cancels a drift that is linear in time; each side's
 * value (p50 or req/s, per metric) is the mean of its two runs; CPU per request is over both runs.
 * Both sides of a `cpu` pair are the full server.
 */
async function paired(name: string, metric: PairMetric, limit: number, a: PairSide, b: PairSide): Promise<PairResult> {
  await warmUp(a.proc, a.key, a.scenario);
  await warmUp(b.proc, b.key, b.scenario);
  const runs: number[] = [];
  const cost = { a: { ms: 0, server: 0, requests: 0 }, b: { ms: 0, server: 0, requests: 0 } };
  for (const [which, side] of [
    ['a', a],
    ['b', b],
    ['b', b],
    ['a', a],
  ] as const) {
    if (metric === 'cpu') {
      const { result: r, cpu } = await meter.measure(side.proc.child.pid!, APP.full, () =>
        load(side.proc, side.key, side.scenario, half),
      );
      cost[which].ms += cpu.serverMs + cpu.databaseMs;
      cost[which].server += cpu.serverMs;
      cost[which].requests += r.requests.total;
      runs.push(Number(((cpu.serverMs + cpu.databaseMs) / Math.max(1, r.requests.total)).toFixed(3)));
      continue;
    }
    const r = await load(side.proc, side.key, side.scenario, half);
    runs.push(metric === 'p50' ? r.latency.p50 : Math.round(reqPerSecond(r, half)));
  }
  const aValue = metric === 'cpu' ? cost.a.ms / Math.max(1, cost.a.requests) : (runs[0]! + runs[3]!) / 2;
  const bValue = metric === 'cpu' ? cost.b.ms / Math.max(1, cost.b.requests) : (runs[1]! + runs[2]!) / 2;
  const result: PairResult = {
    target: name,
    limit,
    a: a.label,
    b: b.label,
    metric,
    runs,
    aValue,
    bValue,
    ratio: bValue / aValue,
  };
  const unit = UNIT[metric];
  // Of a CPU pair, the server process's share apart from its backends'.
  const split = (c: (typeof cost)['a']) =>
    `${(c.server / Math.max(1, c.requests)).toFixed(2)} + ${((c.ms - c.server) / Math.max(1, c.requests)).toFixed(2)}`;
  const parts = metric === 'cpu' ? ` (server + database: ${split(cost.b)} / ${split(cost.a)})` : '';
  log(
    `${name}: ${b.label} ${bValue.toFixed(2)} / ${a.label} ${aValue.toFixed(2)} ${unit} = ${result.ratio.toFixed(2)}×${parts} (runs ${runs.join(', ')} ${unit})`,
  );
  return result;
}

/** One load run of a baseline pair: the measurement's load figures plus the CPU it cost. */
type BaselineRun = Pick<Measurement, 'target' | 'rps' | 'p50' | 'p99' | 'requests' | 'errors' | 'non2xx'> & {
  cpuMs: CpuUsage;
};

interface BaselineSide {
  /** Means of the side's two runs. */
  rps: number;
  p50: number;
  p99: number;
  /** Over both runs: CPU ms / requests. */
  cpuMsPerRequest: CpuPerRequest;
}

interface BaselinePair {
  scenario: string;
  title: string;
  reference: TargetName;
  /** In the order full, reference, reference, full. */
  runs: BaselineRun[];
  full: BaselineSide;
  baseline: BaselineSide;
  /** full / reference: req/s (higher is better for the full server), CPU per request (lower is better), p50. */
  rpsRatio: number;
  cpuRatio: number;
  p50Ratio: number;
}

/**
 * The order of a full / baseline pair's runs (baselinePair: a scenario on the full server and a
 * reference server, with CPU): two A B B A cycles, the second mirrored (B A A B), so that each side
 * runs first in one cycle and last in the other. One cycle cancels a linear drift but left the
 * first run's place to the full server in every pair: after the seed, the first pair's first run
 * came out 10–15 % below its last (the database still settling), against the full server alone.
 * Each side's value is the mean of its four runs.
 */
const BASELINE_ORDER = ['full', 'baseline', 'baseline', 'full', 'baseline', 'full', 'full', 'baseline'] as const;

async function baselinePair(full: Target, reference: Target, key: string, s: Scenario): Promise<BaselinePair> {
  await warmUp(full.proc, key, s);
  await warmUp(reference.proc, key, s);
  const runs: BaselineRun[] = [];
  for (const target of BASELINE_ORDER.map((side) => (side === 'full' ? full : reference))) {
    const { result: r, cpu } = await measuredLoad(target, key, s, half);
    runs.push({
      target: target.name,
      rps: reqPerSecond(r, half),
      p50: r.latency.p50,
      p99: r.latency.p99,
      requests: r.requests.total,
      errors: r.errors + r.timeouts,
      non2xx: r.non2xx,
      cpuMs: cpu,
    });
  }
  const side = (name: TargetName): BaselineSide => {
    const mine = runs.filter((r) => r.target === name);
    const mean = (f: (r: BaselineRun) => number) => mine.reduce((n, r) => n + f(r), 0) / mine.length;
    const requests = mine.reduce((n, r) => n + r.requests, 0);
    const cpu = mine.reduce(
      (c, r) => ({
        serverMs: c.serverMs + r.cpuMs.serverMs,
        databaseMs: c.databaseMs + r.cpuMs.databaseMs,
        backends: Math.max(c.backends, r.cpuMs.backends),
      }),
      {
        serverMs: 0,
        databaseMs: 0,
        backends: 0,
      },
    );
    return {
      rps: mean((r) => r.rps),
      p50: mean((r) => r.p50),
      p99: mean((r) => r.p99),
      cpuMsPerRequest: perRequest(cpu, requests),
    };
  };
  const f = side(full.name);
  const b = side(reference.name);
  const pair: BaselinePair = {
    scenario: s.id,
    title: s.title,
    reference: reference.name,
    runs,
    full: f,
    baseline: b,
    rpsRatio: f.rps / b.rps,
    cpuRatio: f.cpuMsPerRequest.total / b.cpuMsPerRequest.total,
    p50Ratio: f.p50 / b.p50,
  };
  log(
    `${s.id} full / ${reference.name}: ${f.rps.toFixed(0)} / ${b.rps.toFixed(0)} req/s = ${pair.rpsRatio.toFixed(2)}×; ` +
      `CPU ${f.cpuMsPerRequest.total.toFixed(2)} / ${b.cpuMsPerRequest.total.toFixed(2)} ms/req = ${pair.cpuRatio.toFixed(2)}× ` +
      `(runs ${runs.map((r) => r.rps.toFixed(0)).join(', ')} req/s)`,
  );
  return pair;
}

/** POST /entries with and without an Idempotency-Key, side by side: what the key costs in CPU. */
const idempotencyPair = (large: (id: string) => PairSide) =>
  paired(
    'scenario 5k: POST /entries with an Idempotency-Key ≤ 1.15× the CPU per request without',
    'cpu',
    1.15,
    large('5'),
    large('5k'),
  );

function scenarios(account: SeededAccount, deep: { startedAt: number; id: string }): Scenario[] {
  const pick = () => account.frontPool[Math.floor(Math.random() * account.frontPool.length)]!;
  return [
    { id: '1', title: 'GET /api/v1/front', path: '/api/v1/front' },
    { id: '2', title: 'GET /api/v1/entries?limit=50', path: '/api/v1/entries?limit=50' },
    { id: '3', title: 'GET /api/v1/members/page?limit=100', path: '/api/v1/members/page?limit=100' },
    { id: '4a', title: 'GET /api/v1/front/history?limit=50 (first page)', path: '/api/v1/front/history?limit=50' },
    {
      id: '4b',
      title: 'GET /api/v1/front/history?limit=50 (≈10,000 sessions deep)',
      path: `/api/v1/front/history?limit=50&cursorStartedAt=${deep.startedAt}&cursorId=${deep.id}`,
    },
    {
      id: '5',
      title: 'POST /api/v1/entries',
      method: 'POST',
      path: '/api/v1/entries',
      body: () => JSON.stringify({ title: 'Bench', content: 'Written by the bench.', memberIds: [pick()] }),
    },
    {
      id: '5k',
      title: 'POST /api/v1/entries with an Idempotency-Key (a new one per request)',
      method: 'POST',
      path: '/api/v1/entries',
      requests: [
        {
          method: 'POST',
          path: '/api/v1/entries',
          setupRequest: (req) => ({
            ...req,
            headers: { ...req.headers, 'idempotency-key': randomUUID() },
            body: JSON.stringify({ title: 'Bench', content: 'Written by the bench.', memberIds: [pick()] }),
          }),
        },
      ],
    },
    {
      id: '6',
      title: 'POST /api/v1/front/members, then DELETE /api/v1/front/members/{id}',
      path: '/api/v1/front/members',
      requests: [
        {
          method: 'POST',
          path: '/api/v1/front/members',
          setupRequest: (req, context) => {
            const ctx = context as { memberId?: string };
            ctx.memberId = pick();
            return { ...req, body: JSON.stringify({ memberId: ctx.memberId }) };
          },
        },
        {
          method: 'DELETE',
          setupRequest: (req, context) => ({
            ...req,
            path: `/api/v1/front/members/${(context as { memberId?: string }).memberId}`,
          }),
        },
      ],
    },
  ];
}

const isRead = (s: Scenario) => !s.method && !s.requests;
/** The write scenarios the independent baseline answers too (5k's Idempotency-Key it does not take). */
const PAIRED_WRITES = ['5', '6', 'M3'];

async function deepCursor(knex: Knex, userId: string, depth: number): Promise<{ startedAt: number; id: string }> {
  const row = await knex('front_sessions')
    .where({ user_id: userId })
    .whereNull('deleted_at')
    .orderBy([
      { column: 'started_at', order: 'desc' },
      { column: 'id', order: 'desc' },
    ])
    .offset(depth - 1)
    .first('started_at', 'id');
  return { startedAt: Number(row.started_at), id: row.id };
}

/**
 * Every read scenario of the large and the small account, then the awkward account: each read
 * (every page, through the cursors, in pages of 50/100 and of 7) under each read scope it can be
 * in (the active side system, a sub system, the unified view, the second side system), and the
 * errors of the per-request duties (no key, a malformed one, an unknown one, a missing scope, a
 * bad cursor).
 */
async function bodyCheck(
  fullUrl: string,
  independentUrl: string,
  knex: Knex,
  seeded: { large: SeededAccount; small: SeededAccount; awkward: AwkwardAccount },
  deep: { startedAt: number; id: string },
): Promise<CheckOutcome> {
  const requests: CheckRequest[] = [];
  for (const [name, account] of [
    ['large', seeded.large],
    ['small', seeded.small],
  ] as const) {
    for (const s of scenarios(account, deep).filter(isRead))
      requests.push({ label: `scenario ${s.id} (${name} account)`, path: s.path, key: account.apiKey, followPages: 1 });
  }
  const { awkward } = seeded;
  const key = awkward.apiKey;
  requests.push(
    { label: 'awkward: front history', path: '/api/v1/front/history?limit=50', key, followPages: 10 },
    { label: 'awkward: front history, default page size', path: '/api/v1/front/history', key, followPages: 1 },
    { label: 'awkward: front history in pages of 7', path: '/api/v1/front/history?limit=7', key, followPages: 50 },
    { label: 'awkward: no API key', path: '/api/v1/front', key: null },
    { label: 'awkward: not an API key', path: '/api/v1/entries?limit=50', key: 'not-a-key' },
    { label: 'awkward: unknown API key', path: '/api/v1/front/history?limit=50', key: `adk_${'A'.repeat(43)}` },
    { label: 'awkward: key without the front scope', path: '/api/v1/front', key: awkward.membersOnlyKey },
    { label: 'awkward: key without the entries scope', path: '/api/v1/entries?limit=50', key: awkward.membersOnlyKey },
    { label: 'awkward: members-only key', path: '/api/v1/members/page?limit=100', key: awkward.membersOnlyKey },
    {
      label: 'awkward: invalid members cursor',
      path: `/api/v1/members/page?limit=10&cursor=${Buffer.from('[1,"x"]').toString('base64url')}`,
      key,
    },
    {
      label: 'awkward: history cursor without its time',
      path: `/api/v1/front/history?cursorId=${awkward.userId}`,
      key,
    },
  );
  const outcome: CheckOutcome = await compareServers(fullUrl, independentUrl, requests);
  const contexts: Array<[string, Record<string, unknown>]> = [
    ['active side system', { side_system_id: awkward.sideSystemId, sub_system_id: null, is_unified_view: false }],
    [
      'sub system',
      { side_system_id: awkward.sideSystemId, sub_system_id: awkward.subSystemId, is_unified_view: false },
    ],
    ['unified view', { side_system_id: awkward.sideSystemId, sub_system_id: null, is_unified_view: true }],
    ['second side system', { side_system_id: awkward.otherSideSystemId, sub_system_id: null, is_unified_view: false }],
  ];
  try {
    for (const [scope, row] of contexts) {
      await knex('active_system_context').where({ user_id: awkward.userId }).update(row);
      const found = await compareServers(fullUrl, independentUrl, [
        { label: `awkward (${scope}): front`, path: '/api/v1/front', key },
        { label: `awkward (${scope}): notes`, path: '/api/v1/entries?limit=50', key },
        { label: `awkward (${scope}): notes, default limit`, path: '/api/v1/entries', key },
        { label: `awkward (${scope}): one note`, path: '/api/v1/entries?limit=1', key },
        { label: `awkward (${scope}): members page`, path: '/api/v1/members/page?limit=100', key, followPages: 10 },
        {
          label: `awkward (${scope}): members in pages of 7`,
          path: '/api/v1/members/page?limit=7',
          key,
          followPages: 50,
        },
      ]);
      outcome.compared += found.compared;
      outcome.differences.push(...found.differences);
    }
  } finally {
    await knex('active_system_context').where({ user_id: awkward.userId }).update(contexts[0]![1]);
  }
  return outcome;
}

/**
 * The awkward account's writes on both servers (compareWrites): notes, front starts and stops, and
 * message sends, accepted and refused, each from the same state on both, comparing the answers,
 * what the writes left (read back through the full server) and the events they appended.
 */
async function writeBodyCheck(
  fullUrl: string,
  independentUrl: string,
  knex: Knex,
  awkward: AwkwardAccount,
): Promise<CheckOutcome> {
  const userId = awkward.userId;
  const key = awkward.apiKey;
  const api = async (method: string, path: string, body?: unknown): Promise<unknown> => {
    const res = await fetch(fullUrl + path, {
      method,
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    if (!res.ok) throw new Error(`write check setup: ${method} ${path} answered ${res.status}: ${text}`);
    return text ? JSON.parse(text) : undefined;
  };
  const members = (await knex('members as m')
    .where('m.user_id', userId)
    .orderBy([{ column: 'm.created_at' }, { column: 'm.id' }])
    .select(
      'm.id',
      'm.archived_at',
      'm.deleted_at',
      knex.raw(
        'exists (select 1 from front_sessions s where s.member_id = m.id and s.ended_at is null and s.deleted_at is null) as fronting',
      ),
    )) as Array<{ id: string; archived_at: number | null; deleted_at: number | null; fronting: boolean }>;
  const free = members.filter((m) => m.archived_at === null && m.deleted_at === null && !m.fronting).map((m) => m.id);
  const [a, b, c] = free as [string, string, string];
  const archived = members.find((m) => m.archived_at !== null && m.deleted_at === null)!.id;
  const trashed = members.find((m) => m.deleted_at !== null)!.id;
  const fronting = members.find((m) => m.fronting && m.archived_at === null && m.deleted_at === null)!.id;
  const unknown = randomUUID();
  const space = (await api('POST', '/api/v1/messaging/spaces', { name: 'Write check' })) as { id: string };
  const channel = (
    (await api('POST', `/api/v1/messaging/spaces/${space.id}/channels`, { name: 'write-check' })) as { id: string }
  ).id;
  const front = () => api('GET', '/api/v1/front');
  const stop = (id: string) => async () => void (await api('DELETE', `/api/v1/front/members/${id}`));
  const start = (id: string) => async () => void (await api('POST', '/api/v1/front/members', { memberId: id }));
  const note = (answer: unknown) => api('GET', `/api/v1/entries/${(answer as { id: string }).id}`);
  const lastMessage = async () =>
    ((await api('GET', `/api/v1/messaging/channels/${channel}/messages?limit=1`)) as { items: unknown[] }).items;
  const json = (body: unknown) => JSON.stringify(body);
  const w = (label: string, method: 'POST' | 'DELETE', path: string, body?: unknown, more: Partial<WriteCheck> = {}) =>
    ({
      label: `write: ${label}`,
      method,
      path,
      key,
      body: typeof body === 'string' ? body : body === undefined ? undefined : json(body),
      ...more,
    }) satisfies WriteCheck;
  const sendPath = `/api/v1/messaging/channels/${channel}/messages`;
  const checks: WriteCheck[] = [
    w(
      'note with a title and two links',
      'POST',
      '/api/v1/entries',
      { title: 'Wrïte ✓', content: 'Line\n"quoted"', memberId: a, memberIds: [b, a] },
      { effect: note },
    ),
    w('note without links, null title', 'POST', '/api/v1/entries', { title: null, content: 'x' }, { effect: note }),
    w(
      'note linked to an archived member',
      'POST',
      '/api/v1/entries',
      { content: 'x', memberIds: [archived] },
      { effect: note },
    ),
    w('note linked to trashed and unknown members', 'POST', '/api/v1/entries', {
      content: 'x',
      memberIds: [a, trashed, unknown],
    }),
    w('note: missing content, unknown field, bad types', 'POST', '/api/v1/entries', {
      zzz: 1,
      title: 5,
      memberIds: [5, 'x'],
    }),
    w('note: repeated links', 'POST', '/api/v1/entries', { content: 'x', memberIds: [a, a] }),
    w('note: not JSON', 'POST', '/api/v1/entries', '{"content":'),
    w('note: no body', 'POST', '/api/v1/entries'),
    w('note: NUL character', 'POST', '/api/v1/entries', { content: 'x\u0000' }),
    w(
      'start fronting with a note and createdBy',
      'POST',
      '/api/v1/front/members',
      { memberId: a, note: 'on the bus', createdBy: b },
      { effect: front, undo: stop(a) },
    ),
    w(
      'start fronting, whitespace note',
      'POST',
      '/api/v1/front/members',
      { memberId: a, note: '  ' },
      { effect: front, undo: stop(a) },
    ),
    w(
      'start fronting a member fronting already',
      'POST',
      '/api/v1/front/members',
      { memberId: fronting },
      { effect: front },
    ),
    w('start fronting an archived member', 'POST', '/api/v1/front/members', { memberId: archived }),
    w('start fronting a trashed member', 'POST', '/api/v1/front/members', { memberId: trashed }),
    w('start fronting, unknown createdBy', 'POST', '/api/v1/front/members', { memberId: a, createdBy: unknown }),
    w('start fronting: bad body', 'POST', '/api/v1/front/members', { memberId: 'x', note: 5 }),
    w('stop fronting', 'DELETE', `/api/v1/front/members/${a}`, undefined, { before: start(a), effect: front }),
    w('stop fronting a member not fronting', 'DELETE', `/api/v1/front/members/${c}`, undefined, { effect: front }),
    w('stop fronting a trashed member', 'DELETE', `/api/v1/front/members/${trashed}`, undefined, { effect: front }),
    w('stop fronting an unknown member', 'DELETE', `/api/v1/front/members/${unknown}`),
    w('stop fronting: not a UUID', 'DELETE', '/api/v1/front/members/nope'),
    w('send a message', 'POST', sendPath, { memberId: a, content: 'See you at six ✓' }, { effect: lastMessage }),
    w(
      'send a message with mentions',
      'POST',
      sendPath,
      { memberId: b, content: `<@${a.toUpperCase()}> <@${trashed}> <@${unknown}> <@${a}> hi` },
      { effect: lastMessage },
    ),
    w('send as an archived member', 'POST', sendPath, { memberId: archived, content: 'x' }),
    w('send to an unknown channel', 'POST', `/api/v1/messaging/channels/${unknown}/messages`, {
      memberId: a,
      content: 'x',
    }),
    w('send without content', 'POST', sendPath, { memberId: a, content: null }),
    w('send: bad channel id and body', 'POST', '/api/v1/messaging/channels/nope/messages', { content: '' }),
  ];
  const probe = {
    mark: async () => Number((await knex('events').max({ n: 'id' }).first())?.n ?? 0),
    eventsSince: (mark: number) =>
      knex('events')
        .where('account_id', userId)
        .where('id', '>', mark)
        .orderBy('id')
        .select('type', 'area', 'actor', 'data'),
    freshIds: async (since: number) =>
      (
        (await knex.raw(
          `select id from entries where user_id = ? and created_at >= ?
           union all select id from front_sessions where user_id = ? and created_at >= ?
           union all select id from messaging_messages where user_id = ? and created_at >= ?`,
          [userId, since, userId, since, userId, since],
        )) as { rows: Array<{ id: string }> }
      ).rows.map((r) => r.id),
  };
  const outcome = await compareWrites(fullUrl, independentUrl, checks, probe);
  // A member at the note cap: the plan made Free (cap 100) for the check, with 100 notes linked to `c`.
  const plan = (await knex('accounts').where({ id: userId }).first('plan')).plan as string;
  const capNotes = Array.from({ length: 100 }, () => randomUUID());
  await knex.raw(
    `with e as (insert into entries (id, user_id, side_system_id, content, member_id, created_at, updated_at)
       select x.id, ?, ?, 'cap', ?, 0, 0 from unnest(?::uuid[]) x(id) returning id)
     insert into entry_members (entry_id, member_id, user_id, position) select id, ?, ?, 0 from e`,
    [userId, awkward.sideSystemId, c, capNotes, c, userId],
  );
  await knex('accounts').where({ id: userId }).update({ plan: 'free' });
  try {
    const capped = await compareWrites(
      fullUrl,
      independentUrl,
      [
        w('note linked to a member at the Free plan’s note cap', 'POST', '/api/v1/entries', {
          content: 'x',
          memberIds: [a, c],
        }),
      ],
      probe,
    );
    outcome.compared += capped.compared;
    outcome.differences.push(...capped.differences);
  } finally {
    await knex('accounts').where({ id: userId }).update({ plan });
    await knex('entries').whereIn('id', capNotes).delete();
  }
  return outcome;
}

interface Capture {
  perRequest: Record<string, { statements: number; authAndRateLimit: number }>;
  /** With `name` when the server ran it as a named prepared statement. */
  statements: Array<{ sql: string; bindings: unknown[]; name?: string }>;
}

/**
 * The job queue's own statements (its polling and schedules), which run beside the requests. A
 * write's event append queues its webhook jobs (`insert into jobs`) in the same statement as
 * `insert into events`: that one is the request's.
 */
const isBackground = (sql: string) => /\b(jobs|job_schedules)\b/.test(sql) && !/\binsert into events\b/.test(sql);

/**
 * Runs each scenario's request 20 times through a server that captures its SQL (SQL_CAPTURE_FILE):
 * the statements per request (the job queue's polling left out) and every distinct statement.
 */
async function captureStatements(
  args: string[],
  env: Record<string, string>,
  key: string,
  list: Scenario[],
): Promise<Capture> {
  const file = join(tmpdir(), `bench-sql-${Date.now()}-${randomBytes(3).toString('hex')}.jsonl`);
  const port = await freePort();
  const server = await startProcess(args, { ...env, SQL_CAPTURE_FILE: file }, port);
  rmSync(file, { force: true }); // start-up work (migration checks) is not part of any scenario
  const perRequest: Capture['perRequest'] = {};
  const REPEAT = 20;
  try {
    for (const s of list) {
      const before = existsSync(file) ? readFileSync(file, 'utf8').split('\n').filter(Boolean).length : 0;
      for (let i = 0; i < REPEAT; i++) {
        const requests = s.requests ?? [{ method: s.method ?? 'GET', path: s.path }];
        const ctx: Record<string, string> = {};
        for (const r of requests) {
          const setup = typeof r.setupRequest === 'function' ? r.setupRequest : undefined;
          const req = (setup ? setup({ ...r, headers: {} } as never, ctx) : r) as {
            method?: string;
            path?: string;
            body?: string;
            headers?: Record<string, string>;
          };
          await fetch(server.url + (req.path ?? s.path), {
            method: req.method ?? 'GET',
            // The scenario's own headers too (5k's Idempotency-Key): without them its capture counted an unkeyed write.
            headers: {
              authorization: `Bearer ${s.key ?? key}`,
              'content-type': 'application/json',
              ...(req.headers ?? {}),
            },
            body: req.body ?? (s.body ? s.body() : undefined),
          }).then((res) => res.arrayBuffer());
        }
      }
      // The full server's job queue polls on its own (jobs, job_schedules): not part of any request.
      const lines = (existsSync(file) ? readFileSync(file, 'utf8').split('\n').filter(Boolean) : [])
        .slice(before)
        .map((l) => JSON.parse(l) as { sql: string })
        .filter((l) => !isBackground(l.sql));
      const calls = REPEAT * (s.requests?.length ?? 1);
      perRequest[s.id] = {
        statements: lines.length / calls,
        authAndRateLimit: lines.filter((l) => /\b(api_keys|rate_limit_windows)\b/.test(l.sql)).length / calls,
      };
    }
  } finally {
    await server.stop();
  }
  const seen = new Map<string, Capture['statements'][number]>();
  for (const line of existsSync(file) ? readFileSync(file, 'utf8').split('\n').filter(Boolean) : []) {
    const q = JSON.parse(line) as Capture['statements'][number];
    if (!seen.has(q.sql) && !/^(begin|commit|rollback)/i.test(q.sql)) seen.set(q.sql, q);
  }
  rmSync(file, { force: true });
  return { perRequest, statements: [...seen.values()] };
}

interface Plan {
  sql: string;
  plan: string;
  forcedPlan: string;
  /** Named prepared statements only: the plan PostgreSQL may settle on after five executions. */
  genericPlan?: string;
  seqScans: string[];
  explained: boolean;
}

/**
 * EXPLAINs each statement as pg received it ($1, $2 …), with its captured values; with
 * `generic`, also the generic plan of the statement prepared (what a named prepared statement may
 * run with), whose sequential scans count too.
 */
async function explainStatements(
  statements: Capture['statements'],
  generic: (statement: Capture['statements'][number]) => boolean,
): Promise<Plan[]> {
  const client = new pg.Client({ connectionString: dbUrl });
  await client.connect();
  // Tiny tables (api_keys, accounts) are rightly read whole by the planner; whether a statement
  // has an index path at all shows with sequential scans priced out, so both plans are kept.
  const plans: Plan[] = [];
  const explainText = async (sql: string, bindings: unknown[]) =>
    ((await client.query(`explain ${sql}`, bindings)).rows as Array<Record<string, string>>)
      .map((r) => r['QUERY PLAN'])
      .join('\n');
  const literal = (v: unknown): string =>
    v === null || v === undefined
      ? 'null'
      : Array.isArray(v)
        ? client.escapeLiteral(`{${v.map(String).join(',')}}`)
        : client.escapeLiteral(String(v));
  try {
    for (const q of statements) {
      try {
        const plan = await explainText(q.sql, q.bindings);
        await client.query('set enable_seqscan = off');
        const forcedPlan = await explainText(q.sql, q.bindings);
        let genericPlan: string | undefined;
        if (generic(q)) {
          await client.query(`prepare bench_generic as ${q.sql}`);
          await client.query('set plan_cache_mode = force_generic_plan');
          const rows = (await client.query(`explain execute bench_generic(${q.bindings.map(literal).join(', ')})`))
            .rows as Array<Record<string, string>>;
          genericPlan = rows.map((r) => r['QUERY PLAN']).join('\n');
          await client.query('deallocate bench_generic');
          await client.query('reset plan_cache_mode');
        }
        await client.query('reset enable_seqscan');
        const scans = [...`${forcedPlan}\n${genericPlan ?? ''}`.matchAll(/Seq Scan on (\w+)/g)].map((m) => m[1]!);
        plans.push({ sql: q.sql, plan, forcedPlan, genericPlan, seqScans: [...new Set(scans)], explained: true });
      } catch (err) {
        await client.query('reset enable_seqscan').catch(() => undefined);
        await client.query('reset plan_cache_mode').catch(() => undefined);
        await client.query('deallocate all').catch(() => undefined);
        plans.push({
          sql: q.sql,
          plan: `(EXPLAIN failed: ${(err as Error).message})`,
          forcedPlan: '',
          seqScans: [],
          explained: false,
        });
      }
    }
  } finally {
    await client.end();
  }
  return plans;
}

/** The embedded database is for small installations: a medium account, not the PostgreSQL run's million sessions. */
const EMBEDDED_PLAN: SeedPlan = {
  large: { members: 2_000, entries: 20_000, sessions: 100_000 },
  small: { members: 200, entries: 200, sessions: 200 },
  noise: { accounts: 5, members: 100, entries: 500, sessions: 2_000 },
};

interface EmbeddedRun {
  plan: SeedPlan;
  results: Measurement[];
  pairs: PairResult[];
  perRequest: Capture['perRequest'];
}

/**
 * The read scenarios and the paired targets on the embedded database (PGlite under DATA_DIR), the
 * full server only (the independent baseline needs PostgreSQL), reported without thresholds: a
 * seeded data directory, the server started on it as on PostgreSQL, then the statements per request
 * from a capture run. CPU is the server process alone (PGlite runs inside it).
 */
async function embeddedRun(serverEnv: Record<string, string>): Promise<EmbeddedRun> {
  const dir = join(root, 'bench/tmp', `embedded-${dbName}`);
  rmSync(dir, { recursive: true, force: true });
  try {
    log('embedded database: seeding');
    const db = await openDatabase({ dataDir: dir, lockPurpose: 'bench' });
    let seeded: Awaited<ReturnType<typeof seed>>;
    let deep: { startedAt: number; id: string };
    try {
      await migrateLatest(db.knex);
      seeded = await seed(db.knex, EMBEDDED_PLAN, log);
      await db.knex.raw('vacuum analyze');
      deep = await deepCursor(db.knex, seeded.large.userId, 10_000);
    } finally {
      await db.close();
    }
    // DATABASE_URL empty: the server opens the embedded database in DATA_DIR.
    const env = { ...serverEnv, DATABASE_URL: '', DATA_DIR: dir };
    const proc = await startProcess([SERVER], env, await freePort());
    const target: Target = { name: 'full', proc };
    const results: Measurement[] = [];
    const pairs: PairResult[] = [];
    try {
      const list = scenarios(seeded.large, deep).filter(isRead);
      const smallList = scenarios(seeded.small, deep);
      const byId = (id: string) => list.find((x) => x.id === id)!;
      const side = (label: string, key: string, scenario: Scenario): PairSide => ({ label, proc, key, scenario });
      pairs.push(
        await paired(
          'embedded: deep history page p50 vs first page',
          'p50',
          Infinity,
          side('4a full/large', seeded.large.apiKey, byId('4a')),
          side('4b full/large', seeded.large.apiKey, byId('4b')),
        ),
      );
      for (const id of ['2', '4a']) {
        const small = smallList.find((x) => x.id === id)!;
        pairs.push(
          await paired(
            `embedded: scenario ${id} large p50 vs small`,
            'p50',
            Infinity,
            side(`${id} full/small`, seeded.small.apiKey, small),
            side(`${id} full/large`, seeded.large.apiKey, byId(id)),
          ),
        );
      }
      for (const scenario of list) results.push(await measure(target, 'large', seeded.large.apiKey, scenario));
    } finally {
      await proc.stop();
    }
    const capture = await captureStatements(
      [SERVER],
      env,
      seeded.large.apiKey,
      scenarios(seeded.large, deep).filter(isRead),
    );
    return { plan: EMBEDDED_PLAN, results, pairs, perRequest: capture.perRequest };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * The friend and messaging targets (issues 13 and 14), as pairs: a friend read against the owner's
 * own read of the same data (req/s, ≥ 0.8×), a deep page against the first (p50, ≤ 1.2×), the large
 * account against the small one (p50, ≤ 1.3×).
 */
async function areaPairs(
  proc: Proc,
  areaList: Scenario[],
  owner: (id: string) => PairSide,
  ownerSmall: (id: string) => PairSide,
  friendRatiosOnly = false,
): Promise<PairResult[]> {
  const area = (id: string): PairSide => {
    const scenario = areaList.find((x) => x.id === id)!;
    return { label: `${id} full`, proc, key: scenario.key!, scenario };
  };
  const ratios = [
    () =>
      paired(
        'friend members (100 of 10,000) req/s ≥ 0.8× the owner’s members page',
        'rps',
        0.8,
        owner('3'),
        area('F1'),
      ),
    () => paired('friend front req/s ≥ 0.8× the owner’s front', 'rps', 0.8, owner('1'), area('F2')),
    () => paired('friend history first page req/s ≥ 0.8× the owner’s', 'rps', 0.8, owner('4a'), area('F3a')),
    () => paired('friend notes req/s ≥ 0.8× the owner’s notes list', 'rps', 0.8, owner('2'), area('F4')),
    // The small account's friend sees a tenth of its notes: a full page of 50, each note decided.
    () =>
      paired(
        'friend notes, full page (small account) req/s ≥ 0.8× the owner’s notes list',
        'rps',
        0.8,
        ownerSmall('2'),
        area('F4s'),
      ),
  ];
  const rest = [
    () => paired('friend deep history page p50 ≤ 1.2× first page', 'p50', 1.2, area('F3a'), area('F3b')),
    () => paired('friend members: large p50 ≤ 1.3× small', 'p50', 1.3, area('F1s'), area('F1')),
    () => paired('friend history: large p50 ≤ 1.3× small', 'p50', 1.3, area('F3as'), area('F3a')),
    () => paired('friend notes: large p50 ≤ 1.3× small', 'p50', 1.3, area('F4s'), area('F4')),
    () => paired('deep message page p50 ≤ 1.2× first page', 'p50', 1.2, area('M2a'), area('M2b')),
  ];
  const results: PairResult[] = [];
  for (const run of friendRatiosOnly ? ratios : [...ratios, ...rest]) results.push(await run());
  return results;
}

class BodyCheckFailed extends Error {}

async function main() {
  buildServer();
  log(`creating database ${dbName}`);
  await adminQuery(baseUrl, `create database ${dbName}`);
  const procs: Proc[] = [];
  let admin: pg.Client | undefined;
  try {
    const db = await openDatabase({ databaseUrl: dbUrl, poolMax: 1 });
    await migrateLatest(db.knex);
    const seeded = await seed(db.knex, smoke ? SMOKE_PLAN : FULL_PLAN, log);
    // Let the seed settle (visibility map, statistics, dirty pages written) so the first scenario
    // is not measured against autovacuum and a checkpoint.
    await db.knex.raw('vacuum analyze');
    await db.knex.raw('checkpoint');
    const depth = smoke ? 5_000 : 10_000;
    const deepLarge = await deepCursor(db.knex, seeded.large.userId, depth);

    const serverEnv = {
      NODE_ENV: 'production',
      LOG_LEVEL: 'info',
      RATE_LIMIT_PER_MINUTE: '10000000',
      ADMIN_TOKEN: randomBytes(24).toString('hex'),
      TRASH_PURGE_INTERVAL_MS: '0',
    };
    const full: Target = {
      name: 'full',
      proc: await startProcess([SERVER], { ...serverEnv, DATABASE_URL: urlFor('full') }, await freePort()),
    };
    procs.push(full.proc);
    const independent: Target = {
      name: 'independent',
      proc: await startProcess(
        ['scripts/bench/independent.ts'],
        { ...serverEnv, DATABASE_URL: urlFor('independent') },
        await freePort(),
      ),
    };
    procs.push(independent.proc);

    const started = Date.now();
    const check = await bodyCheck(full.proc.url, independent.proc.url, db.knex, seeded, deepLarge);
    const writes = await writeBodyCheck(full.proc.url, independent.proc.url, db.knex, seeded.awkward);
    check.compared += writes.compared;
    check.differences.push(...writes.differences);
    log(
      `body check: ${check.compared} requests compared in ${((Date.now() - started) / 1000).toFixed(1)} s, ${check.differences.length} with differences`,
    );
    if (check.differences.length > 0) {
      process.stderr.write(
        `\nThe full server and the independent baseline answered differently:\n\n${check.differences.join('\n\n')}\n\n`,
      );
      throw new BodyCheckFailed(`body check failed: ${check.differences.length} of ${check.compared} requests differ`);
    }
    if (values['check-only']) {
      await db.close();
      return;
    }
    // Friend and messaging data, written through the full server's API (and the big channel through SQL).
    const areas = await seedAreas(
      full.proc.url,
      db.knex,
      seeded,
      smoke ? { messages: 20_000, depth: 5_000 } : { messages: 1_000_000, depth: 100_000 },
      log,
    );
    // Settled again after the areas' seed (a million messages), as after the first.
    await db.knex.raw('vacuum analyze');
    await db.knex.raw('checkpoint');
    const areaList = areaScenarios(areas, deepLarge);

    const bare: Target | undefined = withBare
      ? {
          name: 'bare',
          proc: await startProcess(
            ['scripts/bench/bare.ts'],
            { DATABASE_URL: urlFor('bare'), BENCH_USER_ID: seeded.large.userId },
            await freePort(),
          ),
        }
      : undefined;
    if (bare) procs.push(bare.proc);
    admin = new pg.Client({ connectionString: dbUrl });
    await admin.connect();
    meter = new CpuMeter(admin);

    const list = scenarios(seeded.large, deepLarge);
    // Growth: scenarios 2 and 4a (notes list, first history page) again for the small account,
    // measured right after the large account's, so both see the same machine state.
    const growth = new Map(
      scenarios(seeded.small, deepLarge)
        .filter((s) => s.id === '2' || s.id === '4a')
        .map((s) => [s.id, s]),
    );
    const results: Measurement[] = [];
    // The ratio targets, each measured as a side-by-side pair (see paired()), on the data as seeded:
    // before the write scenarios, which add the newest sessions and notes that first pages show.
    const byId = (id: string) => list.find((s) => s.id === id)!;
    const large = (id: string): PairSide => ({
      label: `${id} full/large`,
      proc: full.proc,
      key: seeded.large.apiKey,
      scenario: byId(id),
    });
    const small = (id: string): PairSide => ({
      label: `${id} full/small`,
      proc: full.proc,
      key: seeded.small.apiKey,
      scenario: growth.get(id)!,
    });
    if (values['idempotency-pair']) {
      // A developer's loop (issue 29): the CPU cost of an Idempotency-Key on POST /entries, printed, no report.
      const p = await idempotencyPair(large);
      log(`${p.ratio <= p.limit ? 'met' : 'NOT met'}: ${p.target}: ${p.ratio.toFixed(2)}×`);
      await db.close();
      return;
    }
    if (values['friend-ratios']) {
      // A developer’s loop (issue 13): the five friend/owner req/s pairs only, printed, no report.
      for (const p of await areaPairs(full.proc, areaList, large, small, true))
        log(
          `${p.ratio >= p.limit ? 'met' : 'NOT met'}: ${p.target}: ${p.ratio.toFixed(2)}× (${p.a} ${p.aValue.toFixed(0)}, ${p.b} ${p.bValue.toFixed(0)} req/s)`,
        );
      await db.close();
      return;
    }
    const readIds = list.filter(isRead).map((s) => s.id);
    const writeList = [...list, ...areaList].filter((s) => PAIRED_WRITES.includes(s.id));
    if (values['read-ratios'] || values['write-ratios']) {
      // A developer's loop (issue 30): the read and/or write pairs against the independent baseline, printed, no report.
      const ms = (n: number) => n.toFixed(3);
      const lines: string[] = [];
      const chosen = [
        ...(values['read-ratios'] ? readIds.map(byId) : []),
        ...(values['write-ratios'] ? writeList : []),
      ];
      for (const scenario of chosen) {
        const id = scenario.id;
        const p = await baselinePair(full, independent, seeded.large.apiKey, scenario);
        const [f, b] = [p.full.cpuMsPerRequest, p.baseline.cpuMsPerRequest];
        lines.push(
          `${id}: ${p.rpsRatio.toFixed(2)}× req/s; server CPU ${ms(f.server)} / ${ms(b.server)} ms/req = ${(f.server / b.server).toFixed(2)}×; database ${ms(f.database)} / ${ms(b.database)} ms/req`,
        );
      }
      for (const line of lines) log(line);
      await db.close();
      return;
    }
    const pairs: PairResult[] = [];
    const baseline: BaselinePair[] = [];
    for (const s of list) {
      if (!isRead(s) && pairs.length === 0) {
        for (const id of readIds) baseline.push(await baselinePair(full, independent, seeded.large.apiKey, byId(id)));
        if (bare)
          for (const id of readIds) baseline.push(await baselinePair(full, bare, seeded.large.apiKey, byId(id)));
        pairs.push(await paired('deep history page p50 ≤ 1.2× first page', 'p50', 1.2, large('4a'), large('4b')));
        pairs.push(await paired('scenario 2: large p50 ≤ 1.3× small', 'p50', 1.3, small('2'), large('2')));
        pairs.push(await paired('scenario 4a: large p50 ≤ 1.3× small', 'p50', 1.3, small('4a'), large('4a')));
        pairs.push(...(await areaPairs(full.proc, areaList, large, small)));
        pairs.push(await idempotencyPair(large));
        // The writes against the baseline, after the pairs that want the data as seeded.
        for (const w of writeList) baseline.push(await baselinePair(full, independent, seeded.large.apiKey, w));
      }
      // The smoke run (CI, under 2 minutes) measures the paired scenarios in the pairs only.
      if (smoke && (isRead(s) || PAIRED_WRITES.includes(s.id))) continue;
      results.push(await measure(full, 'large', seeded.large.apiKey, s));
      const smallTwin = growth.get(s.id);
      if (smallTwin) results.push(await measure(full, 'small', seeded.small.apiKey, smallTwin));
    }
    for (const s of areaList) {
      if (smoke && (isRead(s) || PAIRED_WRITES.includes(s.id))) continue;
      results.push(await measure(full, s.id.endsWith('s') ? 'small' : 'large', s.key, s));
    }
    if (bare) await bare.proc.stop();
    await independent.proc.stop();
    await full.proc.stop();

    const independentScenarios = [...list.filter(isRead), ...writeList];
    const fullCapture = await captureStatements([SERVER], { ...serverEnv, DATABASE_URL: dbUrl }, seeded.large.apiKey, [
      ...list,
      ...areaList,
    ]);
    const independentCapture = await captureStatements(
      ['scripts/bench/independent.ts'],
      { ...serverEnv, DATABASE_URL: dbUrl },
      seeded.large.apiKey,
      independentScenarios,
    );
    const explain = {
      full: {
        perRequest: fullCapture.perRequest,
        plans: await explainStatements(fullCapture.statements, (q) => q.name !== undefined),
      },
      independent: {
        perRequest: independentCapture.perRequest,
        plans: await explainStatements(independentCapture.statements, () => true),
      },
    };
    const pgVersion = (await db.knex.raw('show server_version')).rows[0].server_version as string;
    await db.close();
    // The smoke run (CI) stays on PostgreSQL unless asked (--embedded): the embedded part seeds for a minute.
    const embedded = smoke && !values.embedded ? undefined : await embeddedRun(serverEnv);
    report(results, pairs, baseline, check, explain, readIds, PAIRED_WRITES, pgVersion, embedded);
  } finally {
    await admin?.end().catch(() => undefined);
    for (const p of procs) await p.stop().catch(() => undefined);
    if (!values.keep) await adminQuery(baseUrl, `drop database if exists ${dbName} with (force)`);
  }
}

type Explained = Record<'full' | 'independent', { perRequest: Capture['perRequest']; plans: Plan[] }>;

function planSection(plans: Plan[]): string {
  return plans
    .map((p) => {
      const forced =
        p.forcedPlan && p.forcedPlan !== p.plan
          ? `\nWith sequential scans priced out (the index path exists):\n\`\`\`\n${p.forcedPlan}\n\`\`\``
          : '';
      const generic = p.genericPlan
        ? `\nGeneric plan (prepared, plan_cache_mode = force_generic_plan):\n\`\`\`\n${p.genericPlan}\n\`\`\``
        : '';
      return `\`\`\`sql\n${p.sql}\n\`\`\`\n\`\`\`\n${p.plan}\n\`\`\`${forced}${generic}`;
    })
    .join('\n\n');
}

function report(
  results: Measurement[],
  pairs: PairResult[],
  baseline: BaselinePair[],
  check: CheckOutcome,
  explain: Explained,
  readIds: string[],
  writeIds: string[],
  pgVersion: string,
  embedded?: EmbeddedRun,
) {
  const independentPairs = baseline.filter((p) => p.reference === 'independent');
  const checks: Array<{ target: string; value: string; pass: boolean }> = [];
  checks.push({
    target: 'full and independent answer every checked request alike (body check)',
    value: `${check.compared} requests, ${check.differences.length} differ`,
    pass: check.differences.length === 0,
  });
  for (const id of readIds) {
    const p = independentPairs.find((x) => x.scenario === id);
    checks.push({
      target: `scenario ${id}: full ≥ 0.8× independent req/s`,
      value: p
        ? `${p.rpsRatio.toFixed(2)}× (paired: ${p.full.rps.toFixed(0)} / ${p.baseline.rps.toFixed(0)} req/s)`
        : 'n/a',
      pass: p !== undefined && p.rpsRatio >= 0.8,
    });
  }
  const front = independentPairs.find((x) => x.scenario === '1');
  const frontCpu = front ? front.full.cpuMsPerRequest.server / front.baseline.cpuMsPerRequest.server : Infinity;
  checks.push({
    target: 'scenario 1: server process CPU per request ≤ 1.5× the independent baseline’s',
    value: front
      ? `${frontCpu.toFixed(2)}× (${front.full.cpuMsPerRequest.server.toFixed(3)} / ${front.baseline.cpuMsPerRequest.server.toFixed(3)} ms)`
      : 'n/a',
    pass: frontCpu <= 1.5,
  });
  for (const id of readIds) {
    const p = explain.full.perRequest[id];
    checks.push({
      target: `scenario ${id}: full server SQL statements per request ≤ 1 + 0.3 (auth and rate limit)`,
      value: p ? `${p.statements.toFixed(2)} (auth + rate limit ${p.authAndRateLimit.toFixed(2)})` : 'n/a',
      pass: p !== undefined && p.statements - p.authAndRateLimit <= 1 && p.authAndRateLimit <= 0.3,
    });
  }
  for (const id of writeIds) {
    const p = independentPairs.find((x) => x.scenario === id);
    checks.push({
      target: `writes, scenario ${id}: full ≥ 0.6× independent req/s`,
      value: p
        ? `${p.rpsRatio.toFixed(2)}× (paired: ${p.full.rps.toFixed(0)} / ${p.baseline.rps.toFixed(0)} req/s)`
        : 'n/a',
      pass: p !== undefined && p.rpsRatio >= 0.6,
    });
  }
  for (const id of writeIds) {
    const p = explain.full.perRequest[id];
    const own = (x: { statements: number; authAndRateLimit: number }) => x.statements - x.authAndRateLimit;
    const ind = explain.independent.perRequest[id];
    checks.push({
      target: `writes, scenario ${id}: full server ≤ 3 SQL statements per request (besides auth and rate limit; transaction control included)`,
      value: p
        ? `${own(p).toFixed(2)} (+ auth and rate limit ${p.authAndRateLimit.toFixed(2)}; independent ${ind ? own(ind).toFixed(2) : 'n/a'})`
        : 'n/a',
      pass: p !== undefined && own(p) <= 3,
    });
  }
  for (const p of pairs) {
    checks.push({
      target: p.target,
      value: `${p.ratio.toFixed(2)}× (paired: ${p.bValue.toFixed(2)} / ${p.aValue.toFixed(2)} ${UNIT[p.metric]})`,
      pass: p.metric === 'rps' ? p.ratio >= p.limit : p.ratio <= p.limit,
    });
  }
  const peak = Math.max(...results.filter((r) => r.target === 'full').map((r) => r.peakRssMb));
  checks.push({ target: 'peak server RSS ≤ 300 MB', value: `${peak} MB`, pass: peak <= 300 });
  const authTrips = Math.max(...Object.values(explain.full.perRequest).map((p) => p.authAndRateLimit));
  checks.push({
    target: 'auth + rate limit ≤ 1 DB round trip per request',
    value: authTrips.toFixed(2),
    pass: authTrips <= 1,
  });
  for (const side of ['full', 'independent'] as const) {
    const plans = explain[side].plans;
    const unindexed = plans.filter((p) => p.seqScans.length > 0);
    const unexplained = plans.filter((p) => !p.explained);
    checks.push({
      target: `every query uses an index (${side === 'full' ? 'full server, generic plans of its prepared statements too' : 'independent baseline, generic plans too'})`,
      value:
        unindexed.length || unexplained.length
          ? `${unindexed.length} with a Seq Scan, ${unexplained.length} not explained`
          : `yes (${plans.length} statements)`,
      pass: unindexed.length === 0 && unexplained.length === 0 && plans.length > 0,
    });
  }
  const failures = [
    ...results.filter((r) => r.errors > 0 || r.non2xx > 0).map((f) => `${f.scenario}/${f.target}/${f.account}`),
    ...baseline.flatMap((p) =>
      p.runs.filter((r) => r.errors > 0 || r.non2xx > 0).map((r) => `${p.scenario}/${r.target} (pair)`),
    ),
  ];
  checks.push({
    target: 'no errors or non-2xx responses under load',
    value: failures.length ? [...new Set(failures)].join(', ') : 'none',
    pass: failures.length === 0,
  });

  const date = new Date().toISOString().slice(0, 10);
  const machine = `${cpus().length} × ${cpus()[0]?.model ?? 'CPU'}, ${Math.round(totalmem() / 2 ** 30)} GiB RAM, Node ${process.version}, PostgreSQL ${pgVersion}`;
  const ms = (n: number) => n.toFixed(2);
  const table = [
    '| scenario | target | account | req/s | p50 ms | p99 ms | CPU ms/req (server + db) | peak RSS MB |',
    '|---|---|---|---|---|---|---|---|',
    ...results.map(
      (r) =>
        `| ${r.scenario} ${r.title} | ${r.target} | ${r.account} | ${r.rps.toFixed(0)} | ${r.p50} | ${r.p99} | ${ms(r.cpuMsPerRequest.total)} (${ms(r.cpuMsPerRequest.server)} + ${ms(r.cpuMsPerRequest.database)}) | ${r.peakRssMb} |`,
    ),
  ].join('\n');
  const statements = (side: 'full' | 'independent', id: string) => {
    const p = explain[side].perRequest[id];
    return p ? `${p.statements.toFixed(2)} (${p.authAndRateLimit.toFixed(2)})` : 'n/a';
  };
  const baselineTable = (reference: TargetName) =>
    [
      `| scenario | req/s full / ${reference} | full / ${reference} | p50 ms full / ${reference} | p99 ms full / ${reference} | CPU ms/req full (server + db) | CPU ms/req ${reference} (server + db) | CPU full / ${reference} | runs F, R, R, F, R, F, F, R req/s |${reference === 'independent' ? ' SQL statements per request full (auth + rate limit) | independent |' : ''}`,
      `|---|---|---|---|---|---|---|---|---|${reference === 'independent' ? '---|---|' : ''}`,
      ...baseline
        .filter((p) => p.reference === reference)
        .map(
          (p) =>
            `| ${p.scenario} ${p.title} | ${p.full.rps.toFixed(0)} / ${p.baseline.rps.toFixed(0)} | **${p.rpsRatio.toFixed(2)}×** | ${p.full.p50.toFixed(1)} / ${p.baseline.p50.toFixed(1)} | ${p.full.p99.toFixed(1)} / ${p.baseline.p99.toFixed(1)} | ` +
            `${ms(p.full.cpuMsPerRequest.total)} (${ms(p.full.cpuMsPerRequest.server)} + ${ms(p.full.cpuMsPerRequest.database)}) | ` +
            `${ms(p.baseline.cpuMsPerRequest.total)} (${ms(p.baseline.cpuMsPerRequest.server)} + ${ms(p.baseline.cpuMsPerRequest.database)}) | ${p.cpuRatio.toFixed(2)}× | ${p.runs.map((r) => r.rps.toFixed(0)).join(', ')} |` +
            (reference === 'independent'
              ? ` ${statements('full', p.scenario)} | ${statements('independent', p.scenario)} |`
              : ''),
        ),
    ].join('\n');
  const pairTable = [
    '| comparison | B / A | runs A, B, B, A | ratio |',
    '|---|---|---|---|',
    ...pairs.map(
      (p) =>
        `| ${p.target} | ${p.b} / ${p.a} | ${p.runs.join(', ')} ${p.metric === 'p50' ? 'ms (p50)' : UNIT[p.metric]} | ${p.ratio.toFixed(2)}× |`,
    ),
  ].join('\n');
  const targets = [
    '| target | measured | met |',
    '|---|---|---|',
    ...checks.map((c) => `| ${c.target} | ${c.value} | ${c.pass ? 'yes' : '**no**'} |`),
  ].join('\n');
  const perRequestTable = (side: 'full' | 'independent') =>
    [
      '| scenario | SQL statements per request | auth + rate-limit statements per request |',
      '|---|---|---|',
      ...Object.entries(explain[side].perRequest).map(
        ([id, p]) => `| ${id} | ${p.statements.toFixed(2)} | ${p.authAndRateLimit.toFixed(2)} |`,
      ),
    ].join('\n');
  const md = `# Bench results ${date}${smoke ? ' (smoke: ratios and CPU figures from runs this short mean nothing)' : ''}

Machine: ${machine}.
Load: autocannon, ${CONNECTIONS} connections, ${warmup} s warm-up then ${duration} s per scenario, from the same machine over loopback.
Full server: \`node dist/main.js\` as \`npm start\` runs it (built by \`npm run build\` at the start of the run), NODE_ENV=production (request validation, authentication, rate limiting on; response validation off), LOG_LEVEL=info.
Independent baseline: \`scripts/bench/independent.ts\` — \`node:http\` + \`pg\`, no express, knex or server code; each request one named prepared statement — a read selecting only the columns it needs, rows mapped in JS to the same JSON; a write one statement of data-modifying CTEs in autocommit doing the server's checks, rows and event append (with its webhook deliveries and the log's advisory lock) — and the same per-request duties (API key through an in-process cache, scope check, rate limit synced to PostgreSQL as the server's store does with its headers, request id, body validation with the server's 400s, one JSON log line to stdout). It answers the read scenarios and the write scenarios 5, 6 and M3 (what it leaves out, and where its one statement is looser than the server under concurrency, is in its header comment); 5k (with an Idempotency-Key) is measured on the full server alone.
CPU per request: utime + stime from \`/proc\` of the server process and of its PostgreSQL backends (found by \`application_name\` in \`pg_stat_activity\`), divided by the requests answered.
Data: ${smoke ? 'smoke plan' : 'large account 10,000 members / 200,000 entries / 1,000,000 front sessions; small account ~1,000 of each; 50 noise accounts'}; plus an awkward account for the body check.

## Body check

Before any load, ${check.compared} requests went to both servers and their answers were compared: status, JSON (parsed, deeply, key order included, then byte for byte) and headers (Content-Type, RateLimit-Limit, RateLimit-Policy and X-Request-Id equal; RateLimit-Remaining, RateLimit-Reset and Retry-After present alike). They cover every read scenario of the large and small accounts (and their next pages) and the awkward account's reads page by page under four read scopes (active side system, sub system, unified view, second side system) — members with object and legacy-URL avatars, archived and trashed members (a trashed one holding an open session first in the front order), custom and deleted tiers, Unicode and JSON escapes, equal sort keys — the errors of the per-request duties (no key, malformed key, unknown key, missing scope, bad cursors), and the awkward account's writes: each write sent to one server and then the same to the other, comparing the answers with the new ids and times normalised (an id the write created, a time at or after the check began), what the write left (the note read back, the front after it) and the events it appended (type, area, actor, data), and the writes' refusals (invalid bodies, unknown, archived and trashed members, a member at the plan's note cap, an unknown channel). Differences: ${check.differences.length === 0 ? 'none' : check.differences.length}.

## Full server / independent baseline

Each read scenario and each write scenario the baseline answers (5, 6, M3) on the large account, as a pair in the order full, independent, independent, full, then independent, full, full, independent (${half} s each after a warm-up of each), so drift on the machine cancels and each side runs first once; the write pairs run after the other paired comparisons; req/s, p50 and p99 are the means of each side's four runs, CPU is over all four. SQL statements per request are from the capture runs below.

${baselineTable('independent')}
${withBare ? `\n### Full server / bare baseline (the server's services without the HTTP pipeline)\n\n${baselineTable('bare')}\n` : ''}
## Results

${smoke ? 'Smoke run: the read scenarios and the paired writes are measured in the pairs above only.\n\n' : ''}${table}

## Paired comparisons

Every other ratio target is measured as a pair, back to back in the order A B B A (${half} s each
after a warm-up of each side), on the data as seeded (before the write scenarios), so that drift
on the machine cancels; each side's value is the mean of its two runs.

${pairTable}

## Targets

${targets}

${embedded ? embeddedSection(embedded, half) : ''}## Database work per request (capture run, 20 requests per scenario)

The full server's job-queue polling (statements on \`jobs\` and \`job_schedules\`, about one a second)
runs beside the requests and is not counted; its statements are EXPLAINed below with the rest.

Full server:

${perRequestTable('full')}

Independent baseline:

${perRequestTable('independent')}

## Query plans (EXPLAIN of every distinct statement the scenarios ran)

The planner reads one-page tables (api_keys, accounts, …) whole even where an index exists; for
those the plan with sequential scans priced out (\`enable_seqscan = off\`) is shown too, and that
plan is what the "every query uses an index" target checks.

### Full server

Its hot reads are named prepared statements (server/db/prepared.ts) run with
\`plan_cache_mode = force_generic_plan\`: for those the generic plan is shown after the custom one,
and checked for index use, as it is the plan that runs.

${planSection(explain.full.plans)}

### Independent baseline

Its statements are named prepared statements run with \`plan_cache_mode = force_generic_plan\`, so
the generic plan (shown after the custom one, and checked for index use) is the plan that runs.

${planSection(explain.independent.plans)}
`;
  const dir = smoke ? join(root, 'bench/tmp') : join(root, 'bench/results');
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, `${date}.md`), md);
  writeFileSync(
    join(dir, `${date}.json`),
    JSON.stringify(
      {
        date,
        smoke,
        machine,
        duration,
        connections: CONNECTIONS,
        bodyCheck: check,
        baseline,
        results,
        pairs,
        checks,
        perRequest: { full: explain.full.perRequest, independent: explain.independent.perRequest },
        embedded,
      },
      null,
      2,
    ) + '\n',
  );
  process.stdout.write('\n' + baselineTable('independent') + '\n\n' + table + '\n\n' + targets + '\n\n');
  log(`wrote ${join(dir, date)}.md and .json`);
}

/** The embedded run's section of the results (no targets: the embedded database has none). */
function embeddedSection(e: EmbeddedRun, half: number): string {
  const size = (a: AccountSize) =>
    `${a.members.toLocaleString('en')} members / ${a.entries.toLocaleString('en')} entries / ${a.sessions.toLocaleString('en')} front sessions`;
  const rows = e.results.map(
    (r) =>
      `| ${r.scenario} ${r.title} | ${r.rps.toFixed(0)} | ${r.p50} | ${r.p99} | ${r.cpuMsPerRequest.server.toFixed(2)} | ${r.peakRssMb} | ${e.perRequest[r.scenario]?.statements.toFixed(2) ?? 'n/a'} |`,
  );
  const pairRows = e.pairs.map(
    (p) =>
      `| ${p.target.replace('embedded: ', '')} | ${p.b} / ${p.a} | ${p.runs.join(', ')} ms (p50) | ${p.ratio.toFixed(2)}× |`,
  );
  return `## Embedded database (PGlite), no thresholds

The full server on the embedded database (no DATABASE_URL; DATA_DIR seeded by the same seeder with a
medium plan, as the embedded database is for small installations: large account ${size(e.plan.large)};
small account ${size(e.plan.small)}; ${e.plan.noise.accounts} noise accounts). Same load; pairs as above (${half} s
each); CPU is the server process alone, since PGlite runs inside it. PGlite runs one statement at a
time, so req/s here is bounded by the sum of the statements' times.

| scenario | req/s | p50 ms | p99 ms | CPU ms/req | peak RSS MB | SQL statements per request |
|---|---|---|---|---|---|---|
${rows.join('\n')}

| comparison | B / A | runs A, B, B, A | ratio |
|---|---|---|---|
${pairRows.join('\n')}

`;
}

main().catch((err) => {
  console.error(err instanceof BodyCheckFailed ? `[bench] ${err.message}` : err);
  process.exit(1);
});

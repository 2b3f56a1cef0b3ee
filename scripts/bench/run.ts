/**
 * npm run bench [-- --smoke] [-- --duration=10]
 *
 * Needs DATABASE_URL (a PostgreSQL server); creates and drops its own database. Seeds through SQL,
 * starts the real server (request validation, authentication and rate limiting on, as `npm start`
 * runs it with NODE_ENV=production) and a bare express+pg baseline calling the same services, then
 * loads both from this process with autocannon (32 connections, warm-up, fixed duration).
 * Writes bench/results/<date>.md and .json (smoke runs go to bench/tmp/).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { cpus, totalmem, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import autocannon from 'autocannon';
import pg from 'pg';
import { openDatabase } from '../../server/db/knex.ts';
import { migrateLatest } from '../../server/db/migrate.ts';
import { FULL_PLAN, SMOKE_PLAN, seed, type SeededAccount } from './seed.ts';

const root = resolve(import.meta.dirname, '../..');
const { values } = parseArgs({ options: { smoke: { type: 'boolean' }, duration: { type: 'string' }, keep: { type: 'boolean' } } });
const smoke = values.smoke ?? false;
const duration = Number(values.duration ?? (smoke ? 2 : 15));
const warmup = smoke ? 1 : 5;
const CONNECTIONS = 32;
const log = (m: string) => process.stdout.write(`[bench] ${m}\n`);

const baseUrl = process.env.DATABASE_URL;
if (!baseUrl) {
  console.error('npm run bench needs DATABASE_URL pointing at a PostgreSQL server (it creates and drops its own database).');
  process.exit(2);
}
const dbName = `bench_${Date.now()}_${randomBytes(3).toString('hex')}`;
const dbUrl = (() => {
  const u = new URL(baseUrl);
  u.pathname = `/${dbName}`;
  return u.toString();
})();

async function adminQuery(sql: string): Promise<void> {
  const c = new pg.Client({ connectionString: baseUrl });
  await c.connect();
  try {
    await c.query(sql);
  } finally {
    await c.end();
  }
}

async function freePort(): Promise<number> {
  return new Promise((res) => {
    const s = createServer().listen(0, '127.0.0.1', () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => res(port));
    });
  });
}

interface Proc {
  child: ChildProcess;
  url: string;
  stop(): Promise<void>;
}

async function startProcess(args: string[], env: Record<string, string>, port: number): Promise<Proc> {
  const child = spawn(process.execPath, ['--import', 'tsx', ...args], {
    cwd: root,
    env: { ...process.env, ...env, PORT: String(port), HOST: '127.0.0.1' },
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
}

interface Measurement {
  scenario: string;
  title: string;
  target: 'full' | 'bare';
  account: 'large' | 'small';
  rps: number;
  p50: number;
  p99: number;
  requests: number;
  errors: number;
  non2xx: number;
  peakRssMb: number;
}

async function load(target: Proc, key: string, s: Scenario, seconds: number): Promise<autocannon.Result> {
  const opts: autocannon.Options = {
    url: target.url + s.path,
    connections: CONNECTIONS,
    duration: seconds,
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    method: s.method ?? 'GET',
  };
  if (s.requests) opts.requests = s.requests;
  else if (s.body) opts.requests = [{ method: s.method ?? 'GET', path: s.path, setupRequest: (req) => ({ ...req, body: s.body!() }) }];
  return autocannon(opts);
}

async function measure(target: Proc, name: 'full' | 'bare', account: 'large' | 'small', key: string, s: Scenario): Promise<Measurement> {
  await load(target, key, s, warmup);
  let peak = 0;
  const pid = target.child.pid!;
  const sampler = setInterval(() => (peak = Math.max(peak, rssMb(pid))), 100);
  const r = await load(target, key, s, duration);
  clearInterval(sampler);
  peak = Math.max(peak, rssMb(pid));
  const m: Measurement = {
    scenario: s.id,
    title: s.title,
    target: name,
    account,
    rps: r.requests.average,
    p50: r.latency.p50,
    p99: r.latency.p99,
    requests: r.requests.total,
    errors: r.errors + r.timeouts,
    non2xx: r.non2xx,
    peakRssMb: Math.round(peak),
  };
  log(`${s.id} ${name}/${account}: ${m.rps.toFixed(0)} req/s, p50 ${m.p50} ms, p99 ${m.p99} ms, rss ${m.peakRssMb} MB${m.non2xx || m.errors ? `, ${m.non2xx} non-2xx, ${m.errors} errors` : ''}`);
  return m;
}

interface PairSide {
  label: string;
  proc: Proc;
  key: string;
  scenario: Scenario;
}

interface PairResult {
  target: string;
  limit: number;
  a: string;
  b: string;
  /** What the ratio compares: latency (B p50 / A p50, lower is better) or throughput (B req/s / A req/s, higher is better). */
  metric: 'p50' | 'rps';
  /** The metric of each run, in the order A, B, B, A. */
  runs: number[];
  aValue: number;
  bValue: number;
  ratio: number;
}

/**
 * A ratio target compares two loads: of one server (large vs small account, deep vs first page)
 * or of two (full vs bare). Measured apart, a 2-core machine's drift (other processes,
 * autovacuum, CPU steal) shows up in the ratio, so the two sides run back to back in the order
 * A B B A (half the duration each), which cancels a drift that is linear in time; each side's
 * value (p50 or req/s, per metric) is the mean of its two runs.
 */
async function paired(name: string, metric: 'p50' | 'rps', limit: number, a: PairSide, b: PairSide): Promise<PairResult> {
  await load(a.proc, a.key, a.scenario, warmup);
  await load(b.proc, b.key, b.scenario, warmup);
  const half = Math.max(1, Math.round(duration / 2));
  const runs: number[] = [];
  for (const side of [a, b, b, a]) {
    const r = await load(side.proc, side.key, side.scenario, half);
    runs.push(metric === 'p50' ? r.latency.p50 : Math.round(r.requests.average));
  }
  const aValue = (runs[0]! + runs[3]!) / 2;
  const bValue = (runs[1]! + runs[2]!) / 2;
  const result: PairResult = { target: name, limit, a: a.label, b: b.label, metric, runs, aValue, bValue, ratio: bValue / aValue };
  const unit = metric === 'p50' ? 'ms' : 'req/s';
  log(`${name}: ${b.label} ${bValue.toFixed(1)} / ${a.label} ${aValue.toFixed(1)} ${unit} = ${result.ratio.toFixed(2)}× (runs ${runs.join(', ')} ${unit})`);
  return result;
}

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
        { method: 'DELETE', setupRequest: (req, context) => ({ ...req, path: `/api/v1/front/members/${(context as { memberId?: string }).memberId}` }) },
      ],
    },
  ];
}

async function deepCursor(knex: import('knex').Knex, userId: string, depth: number): Promise<{ startedAt: number; id: string }> {
  const row = await knex('front_sessions').where({ user_id: userId }).whereNull('deleted_at').orderBy([{ column: 'started_at', order: 'desc' }, { column: 'id', order: 'desc' }]).offset(depth - 1).first('started_at', 'id');
  return { startedAt: Number(row.started_at), id: row.id };
}

/** Runs each scenario's request through a capturing server, then EXPLAINs every distinct statement. */
async function explainAll(env: Record<string, string>, key: string, list: Scenario[]) {
  const file = join(tmpdir(), `bench-sql-${Date.now()}.jsonl`);
  const port = await freePort();
  const server = await startProcess(['server/main.ts'], { ...env, SQL_CAPTURE_FILE: file }, port);
  rmSync(file, { force: true }); // start-up work (migration checks) is not part of any scenario
  const perRequest: Record<string, { statements: number; authAndRateLimit: number }> = {};
  const REPEAT = 20;
  try {
    for (const s of list) {
      const before = existsSync(file) ? readFileSync(file, 'utf8').split('\n').filter(Boolean).length : 0;
      for (let i = 0; i < REPEAT; i++) {
        const requests = s.requests ?? [{ method: s.method ?? 'GET', path: s.path }];
        const ctx: Record<string, string> = {};
        for (const r of requests) {
          const setup = typeof r.setupRequest === 'function' ? r.setupRequest : undefined;
          const req = (setup ? setup({ ...r, headers: {} } as never, ctx) : r) as { method?: string; path?: string; body?: string };
          await fetch(server.url + (req.path ?? s.path), {
            method: req.method ?? 'GET',
            headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
            body: req.body ?? (s.body ? s.body() : undefined),
          }).then((res) => res.arrayBuffer());
        }
      }
      const lines = readFileSync(file, 'utf8').split('\n').filter(Boolean).slice(before).map((l) => JSON.parse(l) as { sql: string });
      const calls = REPEAT * (s.requests?.length ?? 1);
      perRequest[s.id] = {
        statements: lines.length / calls,
        authAndRateLimit: lines.filter((l) => /\b(api_keys|rate_limit_windows)\b/.test(l.sql)).length / calls,
      };
    }
  } finally {
    await server.stop();
  }
  const seen = new Map<string, { sql: string; bindings: unknown[] }>();
  for (const line of readFileSync(file, 'utf8').split('\n').filter(Boolean)) {
    const q = JSON.parse(line) as { sql: string; bindings: unknown[] };
    if (!seen.has(q.sql) && !/^(begin|commit|rollback)/i.test(q.sql)) seen.set(q.sql, q);
  }
  rmSync(file, { force: true });
  // The capture holds the statements as pg received them ($1, $2 …), so EXPLAIN them through pg itself.
  const client = new pg.Client({ connectionString: dbUrl });
  await client.connect();
  // Tiny tables (api_keys, accounts) are rightly read whole by the planner; whether a statement
  // has an index path at all shows with sequential scans priced out, so both plans are kept.
  const plans: Array<{ sql: string; plan: string; forcedPlan: string; seqScans: string[]; explained: boolean }> = [];
  const explainText = async (sql: string, bindings: unknown[]) =>
    ((await client.query(`explain ${sql}`, bindings)).rows as Array<Record<string, string>>).map((r) => r['QUERY PLAN']).join('\n');
  try {
    for (const q of seen.values()) {
      try {
        const plan = await explainText(q.sql, q.bindings);
        await client.query('set enable_seqscan = off');
        const forcedPlan = await explainText(q.sql, q.bindings);
        await client.query('reset enable_seqscan');
        plans.push({ sql: q.sql, plan, forcedPlan, seqScans: [...forcedPlan.matchAll(/Seq Scan on (\w+)/g)].map((m) => m[1]!), explained: true });
      } catch (err) {
        await client.query('reset enable_seqscan').catch(() => undefined);
        plans.push({ sql: q.sql, plan: `(EXPLAIN failed: ${(err as Error).message})`, forcedPlan: '', seqScans: [], explained: false });
      }
    }
  } finally {
    await client.end();
  }
  return { plans, perRequest };
}

async function main() {
  log(`creating database ${dbName}`);
  await adminQuery(`create database ${dbName}`);
  const full: Proc[] = [];
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
      DATABASE_URL: dbUrl,
      NODE_ENV: 'production',
      LOG_LEVEL: 'info',
      RATE_LIMIT_PER_MINUTE: '10000000',
      ADMIN_TOKEN: randomBytes(24).toString('hex'),
      TRASH_PURGE_INTERVAL_MS: '0',
    };
    const fullServer = await startProcess(['server/main.ts'], serverEnv, await freePort());
    full.push(fullServer);
    const bare = await startProcess(['scripts/bench/bare.ts'], { DATABASE_URL: dbUrl, BENCH_USER_ID: seeded.large.userId }, await freePort());
    full.push(bare);

    const list = scenarios(seeded.large, deepLarge);
    // Growth: scenarios 2 and 4a (notes list, first history page) again for the small account,
    // measured right after the large account's, so both see the same machine state.
    const growth = new Map(scenarios(seeded.small, deepLarge).filter((s) => s.id === '2' || s.id === '4a').map((s) => [s.id, s]));
    const results: Measurement[] = [];
    // The ratio targets, each measured as a side-by-side pair (see paired()), on the data as seeded:
    // before the write scenarios, which add the newest sessions and notes that first pages show.
    const byId = (id: string) => list.find((s) => s.id === id)!;
    const large = (id: string): PairSide => ({ label: `${id} full/large`, proc: fullServer, key: seeded.large.apiKey, scenario: byId(id) });
    const small = (id: string): PairSide => ({ label: `${id} full/small`, proc: fullServer, key: seeded.small.apiKey, scenario: growth.get(id)! });
    const bareSide = (id: string): PairSide => ({ label: `${id} bare/large`, proc: bare, key: '', scenario: byId(id) });
    const readIds = list.filter((s) => !s.method && !s.requests).map((s) => s.id);
    const pairs: PairResult[] = [];
    for (const s of list) {
      if (((s.method && s.method !== 'GET') || s.requests) && pairs.length === 0) {
        for (const id of readIds) pairs.push(await paired(`scenario ${id}: full ≥ 0.6× bare req/s`, 'rps', 0.6, bareSide(id), large(id)));
        pairs.push(await paired('deep history page p50 ≤ 1.2× first page', 'p50', 1.2, large('4a'), large('4b')));
        pairs.push(await paired('scenario 2: large p50 ≤ 1.3× small', 'p50', 1.3, small('2'), large('2')));
        pairs.push(await paired('scenario 4a: large p50 ≤ 1.3× small', 'p50', 1.3, small('4a'), large('4a')));
      }
      results.push(await measure(fullServer, 'full', 'large', seeded.large.apiKey, s));
      if (!s.method || s.method === 'GET') {
        if (!s.requests) results.push(await measure(bare, 'bare', 'large', '', s));
      }
      const smallTwin = growth.get(s.id);
      if (smallTwin) results.push(await measure(fullServer, 'full', 'small', seeded.small.apiKey, smallTwin));
    }
    await bare.stop();
    await fullServer.stop();

    const readScenarios = list.filter((s) => !s.method && !s.requests);
    const explain = await explainAll(serverEnv, seeded.large.apiKey, list);
    const pgVersion = (await db.knex.raw('show server_version')).rows[0].server_version as string;
    await db.close();
    report(results, pairs, explain, readScenarios.map((s) => s.id), pgVersion);
  } finally {
    for (const p of full) await p.stop().catch(() => undefined);
    if (!values.keep) await adminQuery(`drop database if exists ${dbName} with (force)`);
  }
}

function report(
  results: Measurement[],
  pairs: PairResult[],
  explain: Awaited<ReturnType<typeof explainAll>>,
  readIds: string[],
  pgVersion: string,
) {
  const get = (id: string, target: 'full' | 'bare', account: 'large' | 'small' = 'large') => results.find((r) => r.scenario === id && r.target === target && r.account === account);
  const rows = results.map((r) => {
    const bare = r.target === 'full' && r.account === 'large' ? get(r.scenario, 'bare') : undefined;
    return { ...r, ratioToBare: bare ? r.rps / bare.rps : undefined };
  });
  const checks: Array<{ target: string; value: string; pass: boolean }> = [];
  for (const id of readIds) {
    if (!pairs.some((p) => p.target === `scenario ${id}: full ≥ 0.6× bare req/s`)) checks.push({ target: `scenario ${id}: full ≥ 0.6× bare req/s`, value: 'n/a', pass: false });
  }
  for (const p of pairs) {
    const unit = p.metric === 'p50' ? 'ms' : 'req/s';
    checks.push({
      target: p.target,
      value: `${p.ratio.toFixed(2)}× (paired: ${p.bValue.toFixed(1)} / ${p.aValue.toFixed(1)} ${unit})`,
      pass: p.metric === 'p50' ? p.ratio <= p.limit : p.ratio >= p.limit,
    });
  }
  const peak = Math.max(...results.filter((r) => r.target === 'full').map((r) => r.peakRssMb));
  checks.push({ target: 'peak server RSS ≤ 300 MB', value: `${peak} MB`, pass: peak <= 300 });
  const authTrips = Math.max(...Object.values(explain.perRequest).map((p) => p.authAndRateLimit));
  checks.push({ target: 'auth + rate limit ≤ 1 DB round trip per request', value: authTrips.toFixed(2), pass: authTrips <= 1 });
  const unindexed = explain.plans.filter((p) => p.seqScans.length > 0);
  const unexplained = explain.plans.filter((p) => !p.explained);
  checks.push({
    target: 'every query uses an index',
    value: unindexed.length || unexplained.length ? `${unindexed.length} with a Seq Scan, ${unexplained.length} not explained` : `yes (${explain.plans.length} statements)`,
    pass: unindexed.length === 0 && unexplained.length === 0 && explain.plans.length > 0,
  });
  const failures = results.filter((r) => r.errors > 0 || r.non2xx > 0);
  checks.push({ target: 'no errors or non-2xx responses under load', value: failures.length ? failures.map((f) => `${f.scenario}/${f.target}`).join(', ') : 'none', pass: failures.length === 0 });

  const date = new Date().toISOString().slice(0, 10);
  const machine = `${cpus().length} × ${cpus()[0]?.model ?? 'CPU'}, ${Math.round(totalmem() / 2 ** 30)} GiB RAM, Node ${process.version}, PostgreSQL ${pgVersion}`;
  const table = [
    '| scenario | target | account | req/s | p50 ms | p99 ms | ratio to bare | peak RSS MB |',
    '|---|---|---|---|---|---|---|---|',
    ...rows.map((r) => `| ${r.scenario} ${r.title} | ${r.target} | ${r.account} | ${r.rps.toFixed(0)} | ${r.p50} | ${r.p99} | ${r.ratioToBare ? r.ratioToBare.toFixed(2) + '×' : ''} | ${r.peakRssMb} |`),
  ].join('\n');
  const pairTable = ['| comparison | B / A | runs A, B, B, A | ratio |', '|---|---|---|---|',
    ...pairs.map((p) => `| ${p.target} | ${p.b} / ${p.a} | ${p.runs.join(', ')} ${p.metric === 'p50' ? 'ms (p50)' : 'req/s'} | ${p.ratio.toFixed(2)}× |`)].join('\n');
  const targets = ['| target | measured | met |', '|---|---|---|', ...checks.map((c) => `| ${c.target} | ${c.value} | ${c.pass ? 'yes' : '**no**'} |`)].join('\n');
  const perRequest = ['| scenario | SQL statements per request | auth + rate-limit statements per request |', '|---|---|---|',
    ...Object.entries(explain.perRequest).map(([id, p]) => `| ${id} | ${p.statements.toFixed(2)} | ${p.authAndRateLimit.toFixed(2)} |`)].join('\n');
  const plans = explain.plans
    .map((p) => {
      const forced = p.forcedPlan && p.forcedPlan !== p.plan ? `\nWith sequential scans priced out (the index path exists):\n\`\`\`\n${p.forcedPlan}\n\`\`\`` : '';
      return `\`\`\`sql\n${p.sql}\n\`\`\`\n\`\`\`\n${p.plan}\n\`\`\`${forced}`;
    })
    .join('\n\n');
  const md = `# Bench results ${date}${smoke ? ' (smoke)' : ''}

Machine: ${machine}.
Load: autocannon, ${CONNECTIONS} connections, ${warmup} s warm-up then ${duration} s per scenario, from the same machine over loopback.
Full server: \`server/main.ts\` as \`npm start\` runs it, NODE_ENV=production (request validation, authentication, rate limiting on; response validation off), LOG_LEVEL=info.
Bare baseline: \`scripts/bench/bare.ts\` (express 5 + pg, same service functions and SQL; no validation, auth, rate limit or logging).
Data: ${smoke ? 'smoke plan' : 'large account 10,000 members / 200,000 entries / 1,000,000 front sessions; small account ~1,000 of each; 50 noise accounts'}.

## Results

${table}

## Paired comparisons

Every ratio target is measured as a pair, back to back in the order A B B A (${Math.max(1, Math.round(duration / 2))} s each
after a warm-up of each side), on the data as seeded (before the write scenarios), so that drift
on the machine cancels; each side's value is the mean of its two runs. The results table above has
the same scenarios measured apart (its "ratio to bare" column is from those separate runs).

${pairTable}

## Targets

${targets}

## Database work per request (capture run, 20 requests per scenario)

${perRequest}

## Query plans (EXPLAIN of every distinct statement the scenarios ran)

The planner reads one-page tables (api_keys, accounts, …) whole even where an index exists; for
those the plan with sequential scans priced out (\`enable_seqscan = off\`) is shown too, and that
plan is what the "every query uses an index" target checks.

${plans}
`;
  const dir = smoke ? join(root, 'bench/tmp') : join(root, 'bench/results');
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, `${date}.md`), md);
  writeFileSync(join(dir, `${date}.json`), JSON.stringify({ date, smoke, machine, duration, connections: CONNECTIONS, results: rows, pairs, checks, perRequest: explain.perRequest }, null, 2) + '\n');
  process.stdout.write('\n' + table + '\n\n' + targets + '\n\n');
  log(`wrote ${join(dir, date)}.md and .json`);
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});

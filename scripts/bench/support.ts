/** Small helpers the bench scripts share. */
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { resolve } from 'node:path';
import pg from 'pg';
import { SCOPES } from '../../server/core/scopes.ts';
import { openDatabase } from '../../server/db/knex.ts';
import { migrateLatest } from '../../server/db/migrate.ts';

/** A TCP port free on 127.0.0.1 right now. */
export function freePort(): Promise<number> {
  return new Promise((res) => {
    const s = createServer().listen(0, '127.0.0.1', () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => res(port));
    });
  });
}

/** Runs one statement on its own connection (create or drop a database). */
export async function adminQuery(connectionString: string, sql: string): Promise<void> {
  const c = new pg.Client({ connectionString });
  await c.connect();
  try {
    await c.query(sql);
  } finally {
    await c.end();
  }
}

/**
 * The message encryption key of the servers a bench run starts: the operator's
 * MESSAGE_ENCRYPTION_KEYS when set, else one generated for this run (a server on DATABASE_URL does
 * not start without one; the bench never reads messages back after the run).
 */
export const benchMessageKeys: string =
  process.env.MESSAGE_ENCRYPTION_KEYS || `bench:${randomBytes(32).toString('base64')}`;

/** Waits until the server process answers /healthz (30 s at most); throws when it exits first. */
export async function waitForServer(child: ChildProcess, url: string): Promise<void> {
  for (let i = 0; i < 300; i++) {
    if (child.exitCode !== null) throw new Error(`the server exited with ${child.exitCode}`);
    try {
      await fetch(`${url}/healthz`);
      return;
    } catch {
      await new Promise((r) => setTimeout(r, 100));
    }
  }
  throw new Error('the server did not start');
}

/** Peak RSS (MB) and CPU time (ms, user + system) of a process, from /proc. */
export function usageOf(pid: number): { peakMb: number; cpuMs: number } {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const peakMb = Math.round(Number(/VmHWM:\s+(\d+)/.exec(status)?.[1] ?? 0) / 1024);
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  const ticks = Number(fields[11]) + Number(fields[12]);
  return { peakMb, cpuMs: (ticks * 1000) / 100 };
}

export const percentile = (sorted: number[], p: number): number =>
  sorted.length === 0 ? Number.NaN : sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;

/** A JSON request that must succeed; its body (null for 204). */
export async function call(url: string, init: RequestInit & { headers: Record<string, string> }): Promise<unknown> {
  const res = await fetch(url, { ...init, headers: { 'content-type': 'application/json', ...init.headers } });
  if (!res.ok) throw new Error(`${init.method ?? 'GET'} ${url} answered ${res.status}: ${await res.text()}`);
  return res.status === 204 ? null : res.json();
}

/**
 * A bench's own server: the real one as `npm start` runs it (node dist/main.js, NODE_ENV=production) on `dbUrl`, with
 * `env` on top of the bench defaults; resolves once it answers.
 */
export async function startBenchServer(
  dbUrl: string,
  adminToken: string,
  env: Record<string, string> = {},
): Promise<{ child: ChildProcess; url: string }> {
  const port = await freePort();
  const root = resolve(import.meta.dirname, '../..');
  // As `npm start` runs it: the bundle, built first (well under a second).
  const built = spawnSync(process.execPath, ['--import', 'tsx', 'scripts/build.ts'], { cwd: root, stdio: 'ignore' });
  if (built.status !== 0) throw new Error(`npm run build failed (${built.status})`);
  const child = spawn(process.execPath, ['dist/main.js'], {
    cwd: root,
    env: {
      ...process.env,
      NODE_ENV: 'production',
      LOG_LEVEL: 'warn',
      DATABASE_URL: dbUrl,
      ADMIN_TOKEN: adminToken,
      MESSAGE_ENCRYPTION_KEYS: benchMessageKeys,
      OBJECT_STORAGE: 'none',
      RATE_LIMIT_PER_MINUTE: '10000000',
      PORT: String(port),
      HOST: '127.0.0.1',
      ...env,
    },
    stdio: ['ignore', 'inherit', 'inherit'],
  });
  const url = `http://127.0.0.1:${port}`;
  await waitForServer(child, url);
  return { child, url };
}

/** SIGTERM, then SIGKILL after 10 s; resolves when it has exited. */
export async function stopBenchServer(child: ChildProcess | undefined): Promise<void> {
  if (!child || child.exitCode !== null) return;
  const exited = new Promise((r) => child.once('exit', r));
  child.kill('SIGTERM');
  const killer = setTimeout(() => child.kill('SIGKILL'), 10_000);
  await exited;
  clearTimeout(killer);
}

/** A Pro+ account with one key of every scope at read_write; its id and Authorization header. */
export async function benchAccount(
  url: string,
  adminToken: string,
  username: string,
): Promise<{ userId: string; auth: Record<string, string> }> {
  const admin = { authorization: `Bearer ${adminToken}` };
  const { userId } = (await call(`${url}/admin/v1/accounts`, {
    method: 'POST',
    headers: admin,
    body: JSON.stringify({ username, plan: 'pro_plus' }),
  })) as { userId: string };
  const { apiKey } = (await call(`${url}/admin/v1/accounts/${userId}/api-keys`, {
    method: 'POST',
    headers: admin,
    body: JSON.stringify({ name: 'bench', scopes: Object.fromEntries(SCOPES.map((s) => [s, 'read_write'])) }),
  })) as { apiKey: string };
  return { userId, auth: { authorization: `Bearer ${apiKey}` } };
}

/**
 * A database of the bench's own on the server DATABASE_URL names: `create()` makes and migrates it,
 * `drop()` removes it. Exits with a message when DATABASE_URL is unset.
 */
export function benchDatabase(script: string): { url: string; create(): Promise<void>; drop(): Promise<void> } {
  const base = process.env.DATABASE_URL ?? '';
  if (!base) {
    console.error(`npm run bench:${script} needs DATABASE_URL (it creates and drops its own database).`);
    process.exit(2);
  }
  const name = `bench_${script}_${Date.now()}_${randomBytes(3).toString('hex')}`;
  const url = Object.assign(new URL(base), { pathname: `/${name}` }).toString();
  return {
    url,
    async create() {
      await adminQuery(base, `create database ${name}`);
      try {
        const db = await openDatabase({ databaseUrl: url, poolMax: 1 });
        try {
          await migrateLatest(db.knex);
        } finally {
          await db.close();
        }
      } catch (err) {
        await adminQuery(base, `drop database if exists ${name} with (force)`);
        throw err;
      }
    },
    drop: () => adminQuery(base, `drop database if exists ${name} with (force)`),
  };
}

/**
 * The server as a process: one per embedded DATA_DIR, signals through `npm start`, fatal errors,
 * and start-up failures an operator can read. Runs the compiled server (dist/main.js), which is
 * what `npm start` runs.
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { cpSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildServer } from '../scripts/build.ts';
import { patchAcrossSignal } from './helpers/inFlight.ts';

const root = resolve(import.meta.dirname, '..');
const dirs: string[] = [];
const started: ChildProcess[] = [];

function tempDir(prefix: string): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  dirs.push(dir);
  return dir;
}

/**
 * A DATA_DIR as `npm run db:migrate` leaves a new one: the database created and migrated, the server
 * never started (no admin token, no demo account: the next start is still the first). Made once;
 * a test whose subject is not the creation of a database starts on a copy, which saves each start
 * the ~3 s of creating and migrating one. The race of two starts on a new DATA_DIR keeps a new one.
 */
let migratedDir = '';
function migratedDataDir(prefix: string): string {
  const dir = tempDir(prefix);
  cpSync(migratedDir, dir, { recursive: true });
  return dir;
}

beforeAll(async () => {
  await buildServer();
  migratedDir = tempDir('ada-migrated-');
  await new Promise<void>((res, rej) =>
    execFile(
      process.execPath,
      ['--import', 'tsx', 'scripts/migrate.ts'],
      { cwd: root, env: serverEnv({ DATA_DIR: migratedDir }) },
      (error, _stdout, stderr) => (error ? rej(new Error(`db:migrate failed: ${stderr}`)) : res()),
    ),
  );
});
afterAll(() => {
  for (const child of started) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

function serverEnv(extra: Record<string, string>): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    PORT: '0',
    LOG_LEVEL: 'warn',
    TRASH_PURGE_INTERVAL_MS: '0',
    ...extra,
  };
  for (const name of ['DATABASE_URL', 'ADMIN_TOKEN', 'REDIS_URL']) if (!(name in extra)) delete env[name];
  return env;
}

interface Proc {
  child: ChildProcess;
  output: () => string;
  exited: Promise<number | null>;
}

function launch(command: string, args: string[], env: NodeJS.ProcessEnv, options: { detached?: boolean } = {}): Proc {
  const child = spawn(command, args, {
    cwd: root,
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: options.detached ?? false,
  });
  started.push(child);
  let out = '';
  child.stdout!.on('data', (d) => (out += d));
  child.stderr!.on('data', (d) => (out += d));
  const exited = new Promise<number | null>((res) => child.on('exit', (code) => res(code)));
  return { child, output: () => out, exited };
}

function startServer(env: NodeJS.ProcessEnv, preload?: string): Proc {
  const args = preload
    ? ['--import', `data:text/javascript,${encodeURIComponent(preload)}`, 'dist/main.js']
    : ['dist/main.js'];
  return launch(process.execPath, args, env);
}

/** Resolves with the base URL once the banner is printed; rejects if the process exits first. */
async function listening(proc: Proc, timeoutMs = 90_000): Promise<string> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const m = /listening on (http:\/\/\S+)/.exec(proc.output());
    // The banner is written in one piece; wait for its last line.
    if (m && /\n {2}(admin token|admin API)[^\n]*\n/.test(proc.output())) return m[1]!;
    if (proc.child.exitCode !== null) throw new Error(`exited with ${proc.child.exitCode}:\n${proc.output()}`);
    if (Date.now() > deadline) throw new Error(`did not start:\n${proc.output()}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

function demoKey(output: string): string {
  const key = /\n\s+(adk_[A-Za-z0-9_-]{43})\n/.exec(output)?.[1];
  if (!key) throw new Error(`no demo key in:\n${output}`);
  return key;
}

async function createMembers(baseUrl: string, key: string, names: string[]): Promise<Map<string, string>> {
  const created = new Map<string, string>();
  await Promise.all(
    names.map(async (name) => {
      const res = await fetch(`${baseUrl}/api/v1/members`, {
        method: 'POST',
        headers: { Authorization: `Bearer ${key}`, 'Content-Type': 'application/json' },
        body: JSON.stringify({ name }),
      });
      expect(res.status).toBe(201);
      created.set(((await res.json()) as { id: string }).id, name);
    }),
  );
  return created;
}

const nonEmptyLines = (text: string) => text.split('\n').filter((l) => l.trim() !== '');

/** Every process whose process group is `pgid` (field 5 of /proc/<pid>/stat). */
function processGroup(pgid: number): number[] {
  const members: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      if (Number(fields[2]) === pgid) members.push(Number(entry));
    } catch {
      // exited while we looked
    }
  }
  return members;
}

async function freePort(): Promise<number> {
  return new Promise((res) => {
    const s = createServer().listen(0, '127.0.0.1', () => {
      const { port } = s.address() as { port: number };
      s.close(() => res(port));
    });
  });
}

// Process starts and walks over every operation: generous under a loaded CI machine.
describe('one process per embedded DATA_DIR', { timeout: 120_000 }, () => {
  it('a second server (and db:migrate) is refused with the directory and pid; after kill -9 of the first a new start has every acknowledged write', async () => {
    const dataDir = migratedDataDir('ada-lock-');
    const env = serverEnv({ DATA_DIR: dataDir });
    const first = startServer(env);
    const baseUrl = await listening(first);
    const key = demoKey(first.output());
    const written = await createMembers(
      baseUrl,
      key,
      Array.from({ length: 15 }, (_, i) => `before-${i}`),
    );

    const second = startServer(env);
    expect(await second.exited).toBe(1);
    const refused = `DATA_DIR ${dataDir} is in use by another process (pid ${first.child.pid}, server, since `;
    expect(second.output()).toContain(refused);
    expect(nonEmptyLines(second.output())).toHaveLength(1);

    const migrate = await new Promise<{ code: number | null; stderr: string }>((res) =>
      execFile(
        process.execPath,
        ['--import', 'tsx', 'scripts/migrate.ts'],
        { cwd: root, env },
        (error, _stdout, stderr) => res({ code: error ? (error.code as number) : 0, stderr }),
      ),
    );
    expect(migrate.code).toBe(1);
    expect(migrate.stderr).toContain(`db:migrate: ${refused}`);

    // The refused processes changed nothing: the first still serves, and keeps its writes.
    for (const [id, name] of await createMembers(
      baseUrl,
      key,
      Array.from({ length: 15 }, (_, i) => `after-${i}`),
    ))
      written.set(id, name);
    first.child.kill('SIGKILL');
    await first.exited;
    expect(JSON.parse(readFileSync(join(dataDir, 'lock'), 'utf8')).pid).toBe(first.child.pid); // left behind

    const third = startServer(env);
    const thirdUrl = await listening(third);
    expect(third.output()).toContain(
      `removed the stale lock ${join(dataDir, 'lock')} (pid ${first.child.pid}: pid ${first.child.pid} is not running)`,
    );
    for (const [id, name] of written) {
      const res = await fetch(`${thirdUrl}/api/v1/members/${id}`, { headers: { Authorization: `Bearer ${key}` } });
      expect(res.status, `member ${name}`).toBe(200);
      expect(((await res.json()) as { name: string }).name).toBe(name);
    }
    expect(written.size).toBe(30);
    third.child.kill('SIGTERM');
    expect(await third.exited).toBe(0);
    expect(existsSync(join(dataDir, 'lock'))).toBe(false); // released on clean shutdown
  });

  it('of two simultaneous starts on a new DATA_DIR exactly one serves', async () => {
    const dataDir = tempDir('ada-race-');
    const env = serverEnv({ DATA_DIR: dataDir, SEED_DEMO: 'false' });
    const procs = [startServer(env), startServer(env)];
    const outcomes = await Promise.all(
      procs.map((p) => Promise.race([listening(p).then(() => 'serving'), p.exited.then((code) => `exited ${code}`)])),
    );
    expect([...outcomes].sort()).toEqual(['exited 1', 'serving']);
    const winner = procs[outcomes.indexOf('serving')]!;
    const loser = procs[outcomes.indexOf('exited 1')]!;
    expect(loser.output()).toContain(
      `DATA_DIR ${dataDir} is in use by another process (pid ${winner.child.pid}, server`,
    );
    winner.child.kill('SIGTERM');
    expect(await winner.exited).toBe(0);
  });
});

describe('npm start and signals', { timeout: 120_000 }, () => {
  it('SIGTERM to the npm process: the in-flight request finishes, the port closes, npm exits 0 and no process of its group survives', async () => {
    const dataDir = migratedDataDir('ada-npm-');
    const npm = launch('npm', ['start'], serverEnv({ DATA_DIR: dataDir, LOG_LEVEL: 'info' }), { detached: true });
    const pgid = npm.child.pid!; // detached: its own process group
    const baseUrl = await listening(npm);
    const key = demoKey(npm.output());
    const group = processGroup(pgid);
    expect(group).toContain(pgid);
    expect(group.length).toBeGreaterThanOrEqual(2); // npm and the server

    // Half the body before the signal, the rest after: the request is in flight during shutdown.
    // The npm process only is signalled, as `docker stop` or systemd would.
    const result = await patchAcrossSignal(baseUrl, key, () => process.kill(pgid, 'SIGTERM'));
    expect(result.status).toBe(200);
    expect(JSON.parse(result.body).themeMode).toBe('dark');
    expect(await npm.exited).toBe(0);
    await expect(fetch(`${baseUrl}/healthz`)).rejects.toThrow();
    let survivors = processGroup(pgid);
    for (let i = 0; i < 50 && survivors.length > 0; i++) {
      await new Promise((r) => setTimeout(r, 100));
      survivors = processGroup(pgid);
    }
    expect(survivors).toEqual([]);
    expect(existsSync(join(dataDir, 'lock'))).toBe(false);
    expect(npm.output()).toContain('"reason":"SIGTERM","msg":"stopped"'); // the database was closed
  });
});

describe('fatal errors', { timeout: 120_000 }, () => {
  for (const kind of ['unhandledRejection', 'uncaughtException'] as const) {
    it(`an ${kind} is logged and the server exits 1 after closing the database`, async () => {
      const dataDir = migratedDataDir('ada-fatal-');
      // Preloaded into the server process: fails the chosen way on SIGUSR2, once the server runs.
      const trigger =
        kind === 'unhandledRejection'
          ? `process.on('SIGUSR2', () => { Promise.reject(new Error('test-${kind}')); });`
          : `process.on('SIGUSR2', () => { setImmediate(() => { throw new Error('test-${kind}'); }); });`;
      const proc = startServer(serverEnv({ DATA_DIR: dataDir, SEED_DEMO: 'false' }), trigger);
      const baseUrl = await listening(proc);
      expect((await fetch(`${baseUrl}/healthz`)).status).toBe(200);
      proc.child.kill('SIGUSR2');
      expect(await proc.exited).toBe(1);
      const fatal = nonEmptyLines(proc.output())
        .filter((l) => l.startsWith('{'))
        .map((l) => JSON.parse(l) as { level: number; msg: string; err?: { message: string; stack: string } })
        .find((l) => l.level === 60);
      expect(fatal).toMatchObject({
        msg: `${kind}: exiting`,
        err: { message: `test-${kind}`, stack: expect.stringContaining('Error: test-') },
      });
      expect(existsSync(join(dataDir, 'lock'))).toBe(false); // closed on the way out
    });
  }
});

describe('start-up errors are one line without a stack', { timeout: 120_000 }, () => {
  it('Redis unreachable: names REDIS_URL and the address, exits 1', async () => {
    const port = await freePort();
    const dataDir = tempDir('ada-redis-');
    const proc = startServer(serverEnv({ DATA_DIR: dataDir, REDIS_URL: `redis://:s3cret@127.0.0.1:${port}` }));
    expect(await proc.exited).toBe(1);
    const lines = nonEmptyLines(proc.output());
    expect(lines).toHaveLength(1);
    const line = JSON.parse(lines[0]!) as { level: number; msg: string };
    expect(line.level).toBe(60);
    expect(line.msg).toBe(
      `Cannot start: Redis at redis://127.0.0.1:${port} (REDIS_URL) is not reachable: connect ECONNREFUSED 127.0.0.1:${port}`,
    );
    expect(proc.output()).not.toContain('s3cret');
    expect(existsSync(join(dataDir, 'lock'))).toBe(false);
  });

  it('a port already in use: exits 1 with one line naming PORT and HOST, before the demo account is seeded', async () => {
    const blocker = createServer();
    await new Promise<void>((res) => blocker.listen(0, '127.0.0.1', res));
    const port = (blocker.address() as { port: number }).port;
    const dataDir = migratedDataDir('ada-port-');
    try {
      const proc = startServer(serverEnv({ DATA_DIR: dataDir, PORT: String(port) }));
      expect(await proc.exited).toBe(1);
      const lines = nonEmptyLines(proc.output());
      expect(lines).toHaveLength(1);
      expect(JSON.parse(lines[0]!)).toMatchObject({
        level: 60,
        msg: `Cannot start: port ${port} on 127.0.0.1 is already in use (PORT, HOST)`,
      });
      expect(existsSync(join(dataDir, 'lock'))).toBe(false);
    } finally {
      await new Promise((res) => blocker.close(res));
    }
    // Nothing was seeded: the next start on that DATA_DIR is still the first.
    const next = startServer(serverEnv({ DATA_DIR: dataDir }));
    await listening(next);
    expect(next.output()).toContain('First start: created account "demo"');
    next.child.kill('SIGTERM');
    expect(await next.exited).toBe(0);
  });

  it('DATABASE_URL that cannot be used: names DATABASE_URL and the address, without the password', async () => {
    const port = await freePort();
    // With a message key, so that the database is what fails (without one, that is the first error).
    const key = `k1:${Buffer.alloc(32, 7).toString('base64')}`;
    const proc = startServer(
      serverEnv({ DATABASE_URL: `postgres://app:s3cret@127.0.0.1:${port}/accounts`, MESSAGE_ENCRYPTION_KEYS: key }),
    );
    expect(await proc.exited).toBe(1);
    const lines = nonEmptyLines(proc.output());
    expect(lines).toHaveLength(1);
    expect(JSON.parse(lines[0]!)).toMatchObject({
      level: 60,
      msg: `Cannot start: Cannot use the database at postgres://app@127.0.0.1:${port}/accounts (DATABASE_URL): connect ECONNREFUSED 127.0.0.1:${port}`,
    });
    expect(proc.output()).not.toContain('s3cret');
  });
});

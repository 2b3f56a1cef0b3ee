/**
 * `npm start` as an operator runs it: first-start demo account, banner, persistence, graceful
 * shutdown. Runs the compiled server (dist/main.js, built first), which is what `npm start` runs.
 */
import { execFile, execSync, spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { Agent } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildServer } from '../scripts/build.ts';
import { patchAcrossSignal } from './helpers/inFlight.ts';

const dataDir = mkdtempSync(join(tmpdir(), 'ada-start-'));
beforeAll(async () => {
  await buildServer();
});
afterAll(() => rmSync(dataDir, { recursive: true, force: true }));

function childEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env, DATA_DIR: dataDir, PORT: '0', LOG_LEVEL: 'warn', ...extra };
  delete env.DATABASE_URL;
  delete env.ADMIN_TOKEN;
  delete env.REDIS_URL;
  return env;
}

interface Started {
  child: ChildProcess;
  output: () => string;
  baseUrl: string;
}

async function start(extra: Record<string, string> = {}): Promise<Started> {
  const child = spawn(process.execPath, ['dist/main.js'], {
    env: childEnv(extra),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout!.on('data', (d) => (out += d));
  child.stderr!.on('data', (d) => (out += d));
  const baseUrl = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`server did not start:\n${out}`)), 60_000);
    const check = () => {
      const m = /listening on (http:\/\/\S+)/.exec(out);
      if (m && /(Try it:[\s\S]*curl[^\n]*\n|admin token[^\n]*\n)/.test(out)) {
        clearTimeout(timer);
        setTimeout(() => resolve(m[1]!), 50);
      }
    };
    child.stdout!.on('data', check);
    child.on('exit', (code) => reject(new Error(`server exited with ${code}:\n${out}`)));
  });
  return { child, output: () => out, baseUrl };
}

function exited(child: ChildProcess): Promise<number | null> {
  return new Promise((resolve) => {
    if (child.exitCode !== null) return resolve(child.exitCode);
    child.on('exit', (code) => resolve(code));
  });
}

// Process starts and walks over every operation: generous under a loaded CI machine.
describe('npm start on the embedded default', { timeout: 120_000 }, () => {
  let firstKey = '';
  let firstUserId = '';
  let adminToken = '';

  it('first start creates the demo account and prints the base URL, key, docs URL and a working curl line', async () => {
    const s = await start();
    try {
      const out = s.output();
      expect(out).toContain(`docs:     ${s.baseUrl}/docs`);
      const key = /\n\s+(adk_[A-Za-z0-9_-]{43})\n/.exec(out)?.[1];
      expect(key).toBeDefined();
      firstKey = key!;
      adminToken = /admin token \(kept in [^)]+\): (\S+)/.exec(out)?.[1] ?? '';
      expect(adminToken).toMatch(/^adm_/);
      expect(readFileSync(join(dataDir, 'admin-token'), 'utf8').trim()).toBe(adminToken);
      expect(statSync(join(dataDir, 'admin-token')).mode & 0o077).toBe(0);

      const curl = /^\s+(curl .+)$/m.exec(out)?.[1];
      expect(curl).toContain(firstKey);
      // A read, so printing it invites nothing that changes the account: its only options are
      // -s and -H (whole words; a key may itself contain "-X" or "-d").
      expect(curl!.split(/\s+/).filter((word) => word.startsWith('-'))).toEqual(['-s', '-H']);
      const response = JSON.parse(execSync(curl!, { encoding: 'utf8' }));
      const username = /created account "([^"]+)"/.exec(out)?.[1];
      expect(response).toMatchObject({ username, key: { name: expect.any(String) } });
      firstUserId = response.userId;
      expect(firstUserId).toMatch(/^[0-9a-f-]{36}$/);

      const docs = await fetch(`${s.baseUrl}/docs`);
      expect(docs.status).toBe(200);
    } finally {
      s.child.kill('SIGTERM');
      expect(await exited(s.child)).toBe(0);
    }
  });

  it('later starts keep the data and the admin token (not printed again) and do not create the demo account again', async () => {
    const s = await start();
    try {
      const out = s.output();
      expect(out).not.toContain('First start');
      // The token is printed when it is generated, not on every start; the file still holds it.
      expect(out).not.toContain(adminToken);
      expect(out).toContain(`admin token: in ${dataDir}/admin-token (printed on the first start only)`);
      expect(readFileSync(join(dataDir, 'admin-token'), 'utf8').trim()).toBe(adminToken);
      const res = await fetch(`${s.baseUrl}/api/v1/me`, { headers: { Authorization: `Bearer ${firstKey}` } });
      expect(res.status).toBe(200); // the demo account and its key survived the restart
      expect(((await res.json()) as { userId: string }).userId).toBe(firstUserId);
      const dup = await fetch(`${s.baseUrl}/admin/v1/accounts`, {
        method: 'POST',
        headers: { Authorization: `Bearer ${adminToken}`, 'Content-Type': 'application/json' },
        body: JSON.stringify({ username: 'demo' }),
      });
      expect(dup.status).toBe(409);
      // npm run admin, run where the server runs (same DATA_DIR, no token, PORT=0): it finds the
      // server at the address it recorded in DATA_DIR and uses DATA_DIR/admin-token with it.
      expect(JSON.parse(readFileSync(join(dataDir, 'server-address'), 'utf8'))).toMatchObject({ url: s.baseUrl });
      const cli = await promisify(execFile)(
        process.execPath,
        ['--import', 'tsx', 'scripts/admin.ts', 'list-accounts', '--prefix', 'demo'],
        { env: childEnv() },
      );
      expect(JSON.parse(cli.stdout).items.map((a: { username: string }) => a.username)).toEqual(['demo']);
    } finally {
      s.child.kill('SIGTERM');
      await exited(s.child);
    }
    // Stopped, it takes the record away with its lock.
    expect(existsSync(join(dataDir, 'server-address'))).toBe(false);
  });

  it('SIGTERM stops accepting, finishes the in-flight request, then exits 0 without waiting out its kept-alive connection', async () => {
    // Without closing the kept-alive connection of the finished request, the server would wait for
    // it until its grace period ended (10 s), then log that requests did not finish in time.
    const s = await start({ HTTP_KEEP_ALIVE_TIMEOUT_MS: '90000' });
    const agent = new Agent({ keepAlive: true });
    // Half the body before the signal, the rest after: the request is in flight during shutdown.
    const responded = patchAcrossSignal(s.baseUrl, firstKey, () => s.child.kill('SIGTERM'), agent);
    try {
      const result = await responded;
      expect(result.status).toBe(200);
      expect(JSON.parse(result.body).themeMode).toBe('dark');
      expect(result.connection).toBe('keep-alive'); // the connection stays open after the response
      expect(await exited(s.child)).toBe(0);
      expect(s.output()).not.toContain('did not finish in time');
      await expect(fetch(`${s.baseUrl}/healthz`)).rejects.toThrow();
    } finally {
      agent.destroy();
    }
  });
});

describe('npm run db:migrate', { timeout: 120_000 }, () => {
  const run = promisify(execFile);
  it('applies migrations to a new embedded database and is a no-op the second time', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'ada-migrate-'));
    try {
      const env = { ...childEnv(), DATA_DIR: dir };
      const first = JSON.parse(
        (await run(process.execPath, ['--import', 'tsx', 'scripts/migrate.ts'], { env })).stdout,
      );
      expect(first.applied.length).toBeGreaterThan(0);
      const second = JSON.parse(
        (await run(process.execPath, ['--import', 'tsx', 'scripts/migrate.ts'], { env })).stdout,
      );
      expect(second).toMatchObject({ applied: [], message: 'already up to date' });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 120_000); // two processes that each load tsx and PGlite, on a machine shared with other test files
});

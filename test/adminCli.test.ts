/**
 * Where `npm run admin` sends the token the embedded default keeps in DATA_DIR/admin-token: only to
 * the running server of that DATA_DIR on this machine, at the address that server recorded
 * (server/localServer.ts). Nothing here needs a database: the "servers" are stand-ins that record
 * what reaches them, and the DATA_DIR lock is taken by this test process as a server would.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { acquireDataDirLock, type DataDirLock } from '../server/db/dataDirLock.ts';
import { recordServerAddress, SERVER_ADDRESS_FILE } from '../server/localServer.ts';

const run = promisify(execFile);
const FILE_TOKEN = 'adm_the_data_dir_token_0123456789abcdef';

/** An HTTP server that answers every request like GET /admin/v1/accounts and remembers the Authorization it got. */
async function standIn(): Promise<{ url: string; port: number; seen: string[]; close(): Promise<void> }> {
  const seen: string[] = [];
  const server: Server = createServer((req, res) => {
    seen.push(req.headers.authorization ?? '(none)');
    res.writeHead(200, { 'Content-Type': 'application/json' }).end('{"items":[],"nextCursor":null}');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    seen,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

interface CliResult {
  code: number;
  stdout: string;
  stderr: string;
}

function cli(dataDir: string, args: string[], extraEnv: Record<string, string> = {}): Promise<CliResult> {
  const env: NodeJS.ProcessEnv = { ...process.env, DATA_DIR: dataDir, ...extraEnv };
  for (const name of ['DATABASE_URL', 'ADMIN_TOKEN', 'ADMIN_URL', 'PORT']) if (!(name in extraEnv)) delete env[name];
  return run(process.execPath, ['--import', 'tsx', 'scripts/admin.ts', ...args], { env }).then(
    ({ stdout, stderr }) => ({ code: 0, stdout, stderr }),
    (err: { code: number; stdout: string; stderr: string }) => ({
      code: err.code,
      stdout: err.stdout,
      stderr: err.stderr,
    }),
  );
}

describe('npm run admin: DATA_DIR/admin-token goes only to the server of that DATA_DIR', { timeout: 120_000 }, () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'ada-admin-cli-'));
  writeFileSync(join(dataDir, 'admin-token'), `${FILE_TOKEN}\n`, { mode: 0o600 });
  let own: Awaited<ReturnType<typeof standIn>>;
  let other: Awaited<ReturnType<typeof standIn>>;
  let lock: DataDirLock | undefined;

  /** This process holds DATA_DIR as a running server does, and records `url` as its address. */
  function runServerOfDataDir(url: string): void {
    lock = acquireDataDirLock(dataDir, { purpose: 'server' });
    recordServerAddress(dataDir, lock.record, url);
  }

  beforeAll(async () => {
    own = await standIn();
    other = await standIn();
  });
  afterEach(() => {
    lock?.release();
    lock = undefined;
    rmSync(join(dataDir, SERVER_ADDRESS_FILE), { force: true });
    own.seen.length = 0;
    other.seen.length = 0;
  });
  afterAll(async () => {
    await own.close();
    await other.close();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('sends it to the running server of DATA_DIR, at the address that server recorded (also when --url names that address)', async () => {
    runServerOfDataDir(own.url);
    const [byDefault, byUrl] = await Promise.all([
      cli(dataDir, ['list-accounts']),
      cli(dataDir, ['list-accounts', '--url', `${own.url}/`]),
    ]);
    expect(byDefault).toMatchObject({ code: 0, stderr: '' });
    expect(JSON.parse(byDefault.stdout)).toEqual({ items: [], nextCursor: null });
    expect(byUrl.code).toBe(0);
    expect(own.seen).toEqual([`Bearer ${FILE_TOKEN}`, `Bearer ${FILE_TOKEN}`]);
  });

  it('refuses to send it to another URL (--url, ADMIN_URL) and asks for --token or ADMIN_TOKEN', async () => {
    runServerOfDataDir(own.url);
    const results = await Promise.all([
      cli(dataDir, ['list-accounts', '--url', other.url]),
      cli(dataDir, ['list-accounts'], { ADMIN_URL: other.url }),
    ]);
    for (const result of results) {
      expect(result.code).toBe(2);
      expect(result.stderr).toContain(`No admin token for ${other.url}: pass --token or set ADMIN_TOKEN.`);
      expect(result.stderr).toContain(`which listens on ${own.url}`);
    }
    expect(other.seen).toEqual([]);
    expect(own.seen).toEqual([]);
    // With a token of its own the CLI goes where it is told.
    const told = await cli(dataDir, ['list-accounts', '--url', other.url, '--token', 'adm_another_servers_token_0123']);
    expect(told.code).toBe(0);
    expect(other.seen).toEqual(['Bearer adm_another_servers_token_0123']);
  });

  it('refuses it when DATABASE_URL is set, when no server of DATA_DIR runs (whoever listens on PORT), or when the address was left by an earlier server', async () => {
    // No server holds DATA_DIR; the default URL http://127.0.0.1:$PORT is someone else's.
    const noServer = await cli(dataDir, ['list-accounts'], { PORT: String(other.port) });
    expect(noServer.code).toBe(2);
    expect(noServer.stderr).toContain('No admin token: pass --token or set ADMIN_TOKEN.');
    expect(noServer.stderr).toContain(
      `is used only with the running server of that DATA_DIR, and no server is running`,
    );

    // DATA_DIR is held, but the address on record is an earlier server's (another lock).
    lock = acquireDataDirLock(dataDir, { purpose: 'server' });
    recordServerAddress(dataDir, { ...lock.record, nonce: 'an-earlier-start' }, other.url);
    const earlier = await cli(dataDir, ['list-accounts'], { PORT: String(other.port) });
    expect(earlier.code).toBe(2);
    expect(earlier.stderr).toContain('has not recorded its address');
    lock.release();
    lock = undefined;

    // DATABASE_URL: the server runs on PostgreSQL and never reads DATA_DIR, whatever DATA_DIR holds.
    runServerOfDataDir(own.url);
    const postgres = await cli(dataDir, ['list-accounts'], {
      DATABASE_URL: 'postgres://operator@db.example.org:5432/accounts',
      PORT: String(own.port),
    });
    expect(postgres.code).toBe(2);
    expect(postgres.stderr).toContain('No admin token: pass --token or set ADMIN_TOKEN. DATABASE_URL is set');
    expect(postgres.stderr).toContain('--direct');
    expect(other.seen).toEqual([]);
    expect(own.seen).toEqual([]);
  });

  it('--direct needs DATABASE_URL and takes no --url or --token', async () => {
    const [noDatabase, withToken] = await Promise.all([
      cli(dataDir, ['--direct', 'list-accounts']),
      cli(dataDir, ['--direct', 'list-accounts', '--token', FILE_TOKEN], {
        DATABASE_URL: 'postgres://operator@db.example.org:5432/accounts',
      }),
    ]);
    expect(noDatabase.code).toBe(2);
    expect(noDatabase.stderr).toContain('--direct works on the PostgreSQL database of DATABASE_URL, which is not set');
    expect(withToken.code).toBe(2);
    expect(withToken.stderr).toContain('it takes no --url or --token');
  });
});

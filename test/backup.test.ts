/**
 * Backups of the embedded database (server/db/backup.ts, docs/operations.md "Backups"): a backup
 * taken with `npm run admin -- backup` while writers run holds every write acknowledged before it
 * began, and `restore` puts the database, the keys of DATA_DIR and the stored objects into a fresh
 * DATA_DIR a server starts on. The servers here run on real DATA_DIRs (the test servers of
 * helpers/server.ts keep their database in memory), in this process, recording their address as
 * `npm start` does so the CLI finds them and their token as an operator's would.
 */
import { execFile } from 'node:child_process';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { gunzipSync, gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApiClient, type ApiClient } from '../client/index.ts';
import { createApp } from '../server/app.ts';
import { loadConfig } from '../server/config.ts';
import type { ResponseViolation } from '../server/deps.ts';
import { MEMORY_BACKUP_MESSAGE, POSTGRES_BACKUP_MESSAGE } from '../server/features/admin/backup.ts';
import { createHttpServer } from '../server/http/server.ts';
import { recordServerAddress } from '../server/localServer.ts';
import { createLogger } from '../server/logger.ts';
import { createRuntime, type Runtime } from '../server/runtime.ts';
import { createTestDatabase } from './helpers/db.ts';
import { PNG } from './helpers/images.ts';
import { ALL_SCOPES, bearer, useServer } from './helpers/server.ts';

const run = promisify(execFile);
const DATABASE_URL = process.env.DATABASE_URL;
const EMBEDDED_ONLY = DATABASE_URL ? ' [skipped: embedded database only; PostgreSQL is backed up with pg_dump]' : '';

describe('POST /admin/v1/backup on a server without an embedded DATA_DIR', () => {
  const server = useServer();

  it('answers 404 naming what to do instead: PostgreSQL’s own dump, nothing to back up in memory', async () => {
    const res = await server.admin.POST('/admin/v1/backup', { parseAs: 'stream' });
    expect(res.response.status).toBe(404);
    expect(res.error).toEqual({
      code: 'NOT_FOUND',
      message: DATABASE_URL ? POSTGRES_BACKUP_MESSAGE : MEMORY_BACKUP_MESSAGE,
    });
  });
});

interface CliResult {
  code: number;
  stdout: string;
  stderr: string;
}

function cli(args: string[], dataDir: string): Promise<CliResult> {
  const env: NodeJS.ProcessEnv = { ...process.env, DATA_DIR: dataDir };
  for (const name of ['DATABASE_URL', 'ADMIN_TOKEN', 'ADMIN_URL', 'PORT']) delete env[name];
  return run(process.execPath, ['--import', 'tsx', 'scripts/admin.ts', ...args], { env }).then(
    ({ stdout, stderr }) => ({ code: 0, stdout, stderr }),
    (err: { code: number; stdout: string; stderr: string }) => ({
      code: err.code,
      stdout: err.stdout,
      stderr: err.stderr,
    }),
  );
}

/** The real app on a DATA_DIR (its own admin token, message key and signing key there), as `npm start` runs it. */
class EmbeddedServer {
  readonly violations: ResponseViolation[] = [];
  runtime!: Runtime;
  url!: string;
  admin!: ApiClient;
  private server!: Server;
  private forgetAddress!: () => void;

  constructor(readonly dataDir: string) {}

  async start(template?: Blob): Promise<this> {
    const config = loadConfig({
      DATA_DIR: this.dataDir,
      LOG_LEVEL: process.env.TEST_LOG_LEVEL ?? 'silent',
      NODE_ENV: 'test',
      RATE_LIMIT_PER_MINUTE: '1000000',
      HTTP_KEEP_ALIVE_TIMEOUT_MS: '120000',
    });
    this.runtime = await createRuntime(config, {
      logger: createLogger(config.logLevel),
      embeddedDir: this.dataDir,
      ...(template ? { embeddedTemplate: template } : {}),
      onResponseViolation: (v) => this.violations.push(v),
    });
    this.server = createHttpServer(createApp(this.runtime.deps), config);
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
    this.forgetAddress = recordServerAddress(this.dataDir, this.runtime.deps.db.dataDirLock!, this.url);
    this.admin = createApiClient({
      baseUrl: this.url,
      apiKey: readFileSync(join(this.dataDir, 'admin-token'), 'utf8').trim(),
    });
    return this;
  }

  client(apiKey: string): ApiClient {
    return createApiClient({ baseUrl: this.url, apiKey });
  }

  async close(): Promise<void> {
    this.forgetAddress();
    await new Promise<void>((resolve) => {
      this.server.close(() => resolve());
      this.server.closeAllConnections();
    });
    await this.runtime.close();
    expect(this.violations).toEqual([]);
  }
}

/** Every member name of the account's active scope, through the API. */
async function memberNames(api: ApiClient): Promise<Set<string>> {
  const names = new Set<string>();
  let cursor: string | undefined;
  do {
    const page = await api.GET('/api/v1/members/page', {
      params: { query: { limit: 200, ...(cursor ? { cursor } : {}) } },
    });
    expect(page.response.status).toBe(200);
    for (const m of page.data!.items) names.add(m.name);
    cursor = page.data!.nextCursor ?? undefined;
  } while (cursor);
  return names;
}

const mode = (path: string) => statSync(path).mode & 0o777;
const readdir = (dir: string) => readdirSync(dir).sort();

describe.skipIf(Boolean(DATABASE_URL))(
  `npm run admin -- backup / restore on the embedded database${EMBEDDED_ONLY}`,
  { timeout: 90_000 },
  () => {
    const root = mkdtempSync(join(tmpdir(), 'ada-backup-'));
    const source = join(root, 'source');
    const restored = join(root, 'restored');
    const archive = join(root, 'nightly.tar.gz');
    let original: EmbeddedServer;
    let copy: EmbeddedServer | undefined;
    let account: { userId: string; apiKey: string };
    let robin: string;
    let channelId: string;
    let ackedBefore: string[] = [];
    let presignedByOriginal = '';

    beforeAll(async () => {
      const { embeddedTemplate } = await createTestDatabase();
      original = await new EmbeddedServer(source).start(embeddedTemplate);
    });
    afterAll(async () => {
      await copy?.close();
      rmSync(root, { recursive: true, force: true });
    });

    it('takes a consistent backup while writers run, checks it and writes it atomically', async () => {
      const created = await original.admin.POST('/admin/v1/accounts', { body: { username: 'backed_up', plan: 'pro' } });
      const key = await original.admin.POST('/admin/v1/accounts/{userId}/api-keys', {
        params: { path: { userId: created.data!.userId } },
        body: { scopes: ALL_SCOPES },
      });
      account = { userId: created.data!.userId, apiKey: key.data!.apiKey };
      const api = original.client(account.apiKey);
      robin = (await api.POST('/api/v1/members', { body: { name: 'Robin' } })).data!.id;
      const avatar = await fetch(`${original.url}/api/v1/members/${robin}/media?kind=avatar`, {
        method: 'PUT',
        headers: { ...bearer(account.apiKey), 'Content-Type': 'image/png' },
        body: new Uint8Array(PNG),
      });
      expect(avatar.status).toBe(200);
      const space = (await api.POST('/api/v1/messaging/spaces', { body: { name: 'Home' } })).data!;
      channelId = (
        await api.POST('/api/v1/messaging/spaces/{spaceId}/channels', {
          params: { path: { spaceId: space.id } },
          body: { name: 'general' },
        })
      ).data!.id;
      const sent = await api.POST('/api/v1/messaging/channels/{channelId}/messages', {
        params: { path: { channelId } },
        body: { memberId: robin, content: 'kept under the message key' },
      });
      expect(sent.response.status).toBe(201);
      const [objectKey] = await original.runtime.deps.storage!.list(`u/${account.userId}/`);
      presignedByOriginal = (await original.runtime.deps.storage!.presignGet(objectKey!, 3600)).url;

      // Writers create members until told to stop; each name is recorded once its 201 is in.
      const acked: string[] = [];
      let stop = false;
      const writer = async (w: number) => {
        const client = original.client(account.apiKey);
        for (let i = 0; !stop; i++) {
          const res = await client.POST('/api/v1/members', { body: { name: `w${w}-${i}` } });
          expect(res.response.status).toBe(201);
          acked.push(`w${w}-${i}`);
        }
      };
      const writers = [0, 1, 2, 3].map(writer);
      while (acked.length < 20) await new Promise((resolve) => setTimeout(resolve, 10));
      ackedBefore = [...acked];
      const result = await cli(['backup', '--out', archive], source);
      const ackedDuring = acked.length - ackedBefore.length;
      stop = true;
      await Promise.all(writers);

      expect(result, result.stderr).toMatchObject({ code: 0, stderr: '' });
      expect(result.stdout.trim().split('\n')).toHaveLength(1);
      const summary = JSON.parse(result.stdout);
      expect(summary).toMatchObject({
        out: archive,
        bytes: statSync(archive).size,
        sha256: expect.stringMatching(/^[0-9a-f]{64}$/),
        serverVersion: '1.0.0',
        keys: ['admin-token', 'message-encryption-keys', 'storage-signing-key'],
        objects: 1,
        warnings: [],
      });
      expect(summary.database.migrations).toBeGreaterThan(0);
      expect(mode(archive)).toBe(0o600);
      expect(ackedDuring).toBeGreaterThan(0); // the writers did run while the backup was taken
      // No temp file or snapshot is left behind.
      expect(readdir(root)).toEqual(['nightly.tar.gz', 'source']);
      expect(readdir(source).filter((n) => n.startsWith('.backup-'))).toEqual([]);
    });

    it('takes one backup at a time: a second request while one streams answers 409', async () => {
      const token = readFileSync(join(source, 'admin-token'), 'utf8').trim();
      const first = await fetch(`${original.url}/admin/v1/backup`, { method: 'POST', headers: bearer(token) });
      expect(first.status).toBe(200);
      expect(first.headers.get('content-type')).toBe('application/gzip');
      expect(first.headers.get('content-disposition')).toMatch(
        /^attachment; filename="account-data-backup-\d{8}T\d{6}Z\.tar\.gz"$/,
      );
      // Inert bytes, as every download of the server's.
      expect(first.headers.get('x-content-type-options')).toBe('nosniff');
      expect(first.headers.get('content-security-policy')).toBe("default-src 'none'; sandbox");
      const second = await fetch(`${original.url}/admin/v1/backup`, { method: 'POST', headers: bearer(token) });
      expect(second.status).toBe(409);
      expect(await second.json()).toEqual({
        code: 'CONFLICT',
        message: 'A backup of this server is already being taken; try again when it has finished',
      });
      expect((await first.arrayBuffer()).byteLength).toBeGreaterThan(0);
      await original.close();
    });

    it('restores into a fresh DATA_DIR that a server starts on: every write acknowledged before the backup, the keys and the objects', async () => {
      const result = await cli(['restore', '--from', archive, '--data-dir', restored], root);
      expect(result, result.stderr).toMatchObject({ code: 0, stderr: '' });
      const summary = JSON.parse(result.stdout);
      expect(summary).toMatchObject({ restored, from: archive, objects: 1, warnings: [] });
      for (const name of ['admin-token', 'message-encryption-keys', 'storage-signing-key']) {
        expect(readFileSync(join(restored, name), 'utf8'), name).toBe(readFileSync(join(source, name), 'utf8'));
        expect(mode(join(restored, name)), name).toBe(0o600);
      }
      expect(existsSync(join(restored, 'lock'))).toBe(false);

      copy = await new EmbeddedServer(restored).start();
      // The restored admin token is the server's token; the account's API key still works.
      const accounts = await copy.admin.GET('/admin/v1/accounts', { params: { query: { usernamePrefix: 'backed' } } });
      expect(accounts.data!.items.map((a) => a.userId)).toEqual([account.userId]);
      const api = copy.client(account.apiKey);
      const names = await memberNames(api);
      expect(ackedBefore.filter((name) => !names.has(name))).toEqual([]);
      expect(names.has('Robin')).toBe(true);
      // Message text decrypts with the restored message key.
      const messages = await api.GET('/api/v1/messaging/channels/{channelId}/messages', {
        params: { path: { channelId } },
      });
      expect(messages.data!.items.map((m) => m.content)).toEqual(['kept under the message key']);
      // The avatar's bytes came back, and a URL the original server signed verifies with the restored signing key.
      const media = await fetch(`${copy.url}/api/v1/members/${robin}/media?kind=avatar`, {
        headers: bearer(account.apiKey),
      });
      expect(Buffer.from(await media.arrayBuffer()).equals(PNG)).toBe(true);
      const signed = await fetch(copy.url + presignedByOriginal);
      expect(signed.status).toBe(200);
      expect(Buffer.from(await signed.arrayBuffer()).equals(PNG)).toBe(true);
    });

    it('refuses a DATA_DIR in use, a non-empty one, and a corrupt or cut archive, leaving the target as it was', async () => {
      const notEmpty = join(root, 'not-empty');
      mkdirSync(notEmpty);
      writeFileSync(join(notEmpty, 'notes.txt'), 'mine');
      // One byte of the admin token changed inside the archive: the gzip is sound, the SHA-256 is not.
      const tar = gunzipSync(readFileSync(archive));
      const token = readFileSync(join(source, 'admin-token'), 'utf8').trim();
      const at = tar.indexOf(token);
      expect(at).toBeGreaterThan(0);
      tar[at + 10] = tar[at + 10] === 0x41 ? 0x42 : 0x41;
      const corrupt = join(root, 'corrupt.tar.gz');
      writeFileSync(corrupt, gzipSync(tar));
      const fromCorrupt = join(root, 'from-corrupt');
      // The first half of the archive, as a download cut short leaves it.
      const cut = join(root, 'cut.tar.gz');
      const whole = readFileSync(archive);
      writeFileSync(cut, whole.subarray(0, Math.floor(whole.length / 2)));
      const empty = join(root, 'empty');
      mkdirSync(empty);

      const [inUse, refused, bad, truncated] = await Promise.all([
        cli(['restore', '--from', archive, '--data-dir', restored], root),
        cli(['restore', '--from', archive, '--data-dir', notEmpty], root),
        cli(['restore', '--from', corrupt, '--data-dir', fromCorrupt], root),
        cli(['restore', '--from', cut, '--data-dir', empty], root),
      ]);
      expect(inUse.code).toBe(1);
      expect(JSON.parse(inUse.stderr)).toEqual({
        code: 'RESTORE_REFUSED',
        message: expect.stringContaining(`${restored} is in use by a running process (pid ${process.pid}`),
      });
      expect(refused.code).toBe(1);
      expect(JSON.parse(refused.stderr)).toEqual({
        code: 'RESTORE_REFUSED',
        message: `${notEmpty} is not empty (notes.txt); restore into a new or empty directory`,
      });
      expect(readdir(notEmpty)).toEqual(['notes.txt']);
      expect(bad.code).toBe(1);
      expect(JSON.parse(bad.stderr)).toEqual({
        code: 'BAD_ARCHIVE',
        message: expect.stringMatching(
          /^admin-token does not match manifest\.json \(sha256 [0-9a-f]{64}, expected [0-9a-f]{64}\): the archive is corrupt$/,
        ),
      });
      expect(existsSync(fromCorrupt)).toBe(false);
      expect(truncated.code).toBe(1);
      expect(JSON.parse(truncated.stderr)).toMatchObject({
        code: 'BAD_ARCHIVE',
        message: expect.stringContaining('The archive is damaged or incomplete'),
      });
      expect(readdir(empty)).toEqual([]);
    });
  },
);

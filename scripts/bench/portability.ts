/**
 * npm run bench:portability [-- --smoke] [-- --members N --history N --notes N --messages N] [-- --only simply_plural|native]: how long an import takes and how much memory it needs,
 * on the real server (a child process, NODE_ENV=production, the job worker on) and PostgreSQL.
 *
 * Generates a large Simply Plural export (members with custom field values, custom fronts, nested
 * groups, buckets, front history, notes), posts it, waits for the job, and reports the time from
 * the upload to the finished import and the server's peak RSS (VmHWM) before and after; then the
 * same file again (every entity unchanged). Needs DATABASE_URL; creates and drops its own database.
 * Prints a Markdown table (docs/benchmarks.md keeps the figures of record).
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { openDatabase } from '../../server/db/knex.ts';
import { migrateLatest } from '../../server/db/migrate.ts';
import { SCOPES } from '../../server/core/scopes.ts';
import { FULL_PLAN, SMOKE_PLAN, seed } from './seed.ts';
import { adminQuery, benchMessageKeys, freePort, waitForServer } from './support.ts';

const root = resolve(import.meta.dirname, '../..');
const { values } = parseArgs({
  options: {
    smoke: { type: 'boolean' },
    members: { type: 'string' },
    history: { type: 'string' },
    notes: { type: 'string' },
    messages: { type: 'string' },
    only: { type: 'string' },
  },
});
const smoke = values.smoke ?? false;
const SIZE = {
  ...(smoke
    ? { members: 50, fronts: 5, fields: 6, groups: 10, history: 2_000, notes: 200, messages: 500 }
    : { members: 2_000, fronts: 20, fields: 12, groups: 100, history: 300_000, notes: 20_000, messages: 50_000 }),
  ...(values.members ? { members: Number(values.members) } : {}),
  ...(values.history ? { history: Number(values.history) } : {}),
  ...(values.notes ? { notes: Number(values.notes) } : {}),
  ...(values.messages ? { messages: Number(values.messages) } : {}),
};
const log = (m: string) => process.stdout.write(`[portability] ${m}\n`);

const baseUrl = process.env.DATABASE_URL ?? '';
if (!baseUrl) {
  console.error('npm run bench:portability needs DATABASE_URL (it creates and drops its own database).');
  process.exit(2);
}
const dbName = `bench_port_${Date.now()}_${randomBytes(3).toString('hex')}`;
const dbUrl = Object.assign(new URL(baseUrl), { pathname: `/${dbName}` }).toString();
const ADMIN_TOKEN = randomBytes(24).toString('hex');

/** A 24-hex ObjectId-like id, deterministic. */
const oid = (kind: number, n: number) => `65${kind.toString(16).padStart(2, '0')}${n.toString(16).padStart(20, '0')}`;

/** A Simply Plural export of the planned size (bucket era). */
function simplyPluralExport(): string {
  const uid = 'benchUid0123456789abcdefghij';
  const buckets = ['Friends', 'Trusted friends', 'Partners', 'Work'].map((name, i) => ({
    _id: oid(1, i),
    uid,
    name,
    desc: '',
    color: '#336699',
    icon: '🔒',
    rank: `0|aaaa${i}:`,
  }));
  const fields = Array.from({ length: SIZE.fields }, (_, i) => ({
    _id: oid(2, i),
    uid,
    name: `Field ${i}`,
    type: i % 4 === 3 ? 2 : 0,
    order: `0|hzzzz${i}:`,
    supportMarkdown: i % 5 === 0,
    buckets: [oid(1, i % 2)],
  }));
  const members = Array.from({ length: SIZE.members }, (_, i) => ({
    _id: oid(3, i),
    uid,
    name: `Member ${i}`,
    desc: `Description of member ${i}. `.repeat(4),
    pronouns: i % 2 ? 'she/her' : 'they/them',
    color: '#aa33cc',
    avatarUuid: `avatar-${i}`,
    pkId: i < 500 ? `pk${i.toString(36).padStart(3, '0')}` : undefined,
    info: Object.fromEntries(fields.map((f, k) => [f._id, k % 4 === 3 ? '2001-02-03' : `value ${i}-${k}`])),
    buckets: [oid(1, i % 4)],
    archived: i % 50 === 0,
    lastOperationTime: 1_700_000_000_000 + i,
  }));
  const fronts = Array.from({ length: SIZE.fronts }, (_, i) => ({
    _id: oid(4, i),
    uid,
    name: `Custom front ${i}`,
    desc: '',
    color: '#00ff00',
    buckets: [],
  }));
  const groups = Array.from({ length: SIZE.groups }, (_, i) => ({
    _id: oid(5, i),
    uid,
    name: `Group ${i}`,
    desc: '',
    color: '#123456',
    emoji: '⭐',
    parent: i < 10 ? 'root' : oid(5, i % 10),
    members: Array.from({ length: 20 }, (_, k) => oid(3, (i * 20 + k) % SIZE.members)),
    buckets: [oid(1, 0)],
  }));
  const start = 1_600_000_000_000;
  const history = Array.from({ length: SIZE.history }, (_, i) => {
    const subject = i % 10 === 9 ? oid(4, i % SIZE.fronts) : oid(3, (i * 7) % SIZE.members);
    const live = i >= SIZE.history - 2;
    return {
      _id: oid(6, i),
      uid,
      member: subject,
      custom: i % 10 === 9,
      live,
      startTime: start + i * 3_600_000,
      ...(live ? {} : { endTime: start + i * 3_600_000 + 2_700_000 }),
      customStatus: i % 3 === 0 ? 'tired' : '',
      commentCount: 0,
      lastOperationTime: start + i * 3_600_000,
    };
  });
  const notes = Array.from({ length: SIZE.notes }, (_, i) => ({
    _id: oid(7, i),
    uid,
    title: `Note ${i}`,
    note: `Something worth remembering, number ${i}. `.repeat(10),
    color: '#ffffff',
    member: oid(3, i % SIZE.members),
    date: start + i * 60_000,
    supportMarkdown: true,
  }));
  const channels = Array.from({ length: 12 }, (_, i) => ({ _id: oid(9, i), uid, name: `channel-${i}`, desc: '' }));
  const categories = Array.from({ length: 3 }, (_, i) => ({
    _id: oid(10, i),
    uid,
    name: `Category ${i}`,
    desc: '',
    channels: channels.filter((_, k) => k % 3 === i).map((c) => c._id),
  }));
  const chatMessages = Array.from({ length: SIZE.messages }, (_, i) => ({
    _id: oid(11, i),
    uid,
    channel: oid(9, i % 12),
    writer: oid(3, i % SIZE.members),
    message: `Message ${i} <###@${oid(3, (i + 1) % SIZE.members)}###> about the day. `.repeat(2),
    writtenAt: start + i * 30_000,
    updatedAt: start + i * 30_000,
    replyTo: i >= 12 && i % 5 === 0 ? oid(11, i - 12) : '',
  }));
  return JSON.stringify({
    users: [{ _id: uid, uid, username: 'bench', desc: '', color: '#000000', isAsystem: true }],
    private: [
      {
        _id: uid,
        uid,
        latestVersion: 312,
        defaultPrivacySettings: { members: [oid(1, 0)], groups: [] },
        categories: categories.map((c) => c._id),
      },
    ],
    privacyBuckets: buckets,
    customFields: fields,
    members,
    frontStatuses: fronts,
    groups,
    frontHistory: history,
    comments: [],
    notes,
    channelCategories: categories,
    channels,
    chatMessages,
    tokens: [{ _id: oid(8, 0), uid, token: 'never-read', permission: 7 }],
    friends: [],
  });
}

const serverUrl = new WeakMap<ChildProcess, string>();

async function startServer(port: number, objectsDir: string): Promise<ChildProcess> {
  const child = spawn(process.execPath, ['--import', 'tsx', 'server/main.ts'], {
    cwd: root,
    env: {
      ...process.env,
      NODE_ENV: 'production',
      LOG_LEVEL: 'info',
      DATABASE_URL: dbUrl,
      ADMIN_TOKEN,
      MESSAGE_ENCRYPTION_KEYS: benchMessageKeys,
      OBJECT_STORAGE_DIR: objectsDir,
      IMPORT_MAX_BYTES: String(2047 * 1_048_576),
      RATE_LIMIT_PER_MINUTE: '100000',
      JOB_POLL_INTERVAL_MS: '200',
      PORT: String(port),
      HOST: '127.0.0.1',
    },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  // The job's own account of where the time went (its 'import applied' log line).
  let buffered = '';
  child.stdout!.on('data', (chunk: Buffer) => {
    buffered += chunk.toString('utf8');
    const lines = buffered.split('\n');
    buffered = lines.pop()!;
    for (const line of lines) {
      if (!line.includes('"import applied"')) continue;
      const entry = JSON.parse(line) as { parseMs: number; phasesMs: Record<string, number> };
      log(
        `server: ${entry.parseMs === undefined ? '' : `parse ${entry.parseMs} ms, `}phases ${JSON.stringify(entry.phasesMs)}`,
      );
    }
  });
  await waitForServer(child, `http://127.0.0.1:${port}`);
  serverUrl.set(child, `http://127.0.0.1:${port}`);
  return child;
}

/** The process's peak and current resident set, MB (Linux /proc). */
function memoryOf(pid: number): { peakMb: number; rssMb: number } {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = (key: string) => Number(new RegExp(`${key}:\\s+(\\d+)`).exec(status)?.[1] ?? 0);
  return { peakMb: Math.round(kb('VmHWM') / 1024), rssMb: Math.round(kb('VmRSS') / 1024) };
}

/**
 * fetch, sent again once when the connection was closed under it. The server closes a kept-alive
 * connection after 5 s idle; while an import's parse holds its event loop that long, the close and
 * this client's next request on the same connection can cross (ECONNRESET, "other side closed").
 * Nothing was answered when that happens, so even an upload is sent again (the bench's own body).
 */
async function benchFetch(url: string | URL, init?: RequestInit): Promise<Response> {
  try {
    return await fetch(url, init);
  } catch (err) {
    const code = ((err as { cause?: { code?: string } }).cause ?? {}).code;
    if (code !== 'ECONNRESET' && code !== 'EPIPE' && code !== 'UND_ERR_SOCKET') throw err;
    log(`a kept-alive connection was closed under a request (${code}): sent again`);
    return fetch(url, init);
  }
}

interface Api {
  url: string;
  admin: Record<string, string>;
}

async function newKey(api: Api, username: string): Promise<Record<string, string>> {
  const account = (await (
    await benchFetch(`${api.url}/admin/v1/accounts`, {
      method: 'POST',
      headers: api.admin,
      body: JSON.stringify({ username, plan: 'pro_plus' }),
    })
  ).json()) as { userId: string };
  return keyFor(api, account.userId);
}

async function keyFor(api: Api, userId: string): Promise<Record<string, string>> {
  const key = (await (
    await benchFetch(`${api.url}/admin/v1/accounts/${userId}/api-keys`, {
      method: 'POST',
      headers: api.admin,
      body: JSON.stringify({ name: 'bench', scopes: Object.fromEntries(SCOPES.map((s) => [s, 'read_write'])) }),
    })
  ).json()) as { apiKey: string };
  return { authorization: `Bearer ${key.apiKey}` };
}

/** Polls a job's resource until it has finished; the slowest poll says how long the server stalled. */
async function waitFor<T extends { status: string }>(server: ChildProcess, url: string, auth: Record<string, string>) {
  let slowestPollMs = 0;
  for (;;) {
    await new Promise((r) => setTimeout(r, 250));
    if (server.exitCode !== null || server.signalCode !== null)
      throw new Error(`the server died (${server.exitCode ?? server.signalCode})`);
    const polled = performance.now();
    const result = (await (await benchFetch(url, { headers: auth })).json()) as T;
    slowestPollMs = Math.max(slowestPollMs, performance.now() - polled);
    if (result.status === 'succeeded' || result.status === 'failed') return { result, slowestPollMs };
  }
}

/** Imports `body` and waits; one row of the table. */
async function timedImport(
  server: ChildProcess,
  api: Api,
  auth: Record<string, string>,
  label: string,
  source: string,
  body: Buffer | string,
): Promise<string> {
  const before = memoryOf(server.pid!);
  const started = performance.now();
  const res = await benchFetch(`${api.url}/api/v1/imports?source=${source}`, {
    method: 'POST',
    headers: { ...auth, 'content-type': source === 'native' ? 'application/x-tar' : 'application/json' },
    body: typeof body === 'string' ? body : new Uint8Array(body),
  });
  if (res.status !== 202) throw new Error(`POST /imports answered ${res.status}: ${await res.text()}`);
  const { id } = (await res.json()) as { id: string };
  const uploaded = performance.now();
  // Read as the 202 arrives: the upload's own cost (streamed to storage), before the job has parsed much.
  const accepted = memoryOf(server.pid!);
  const { result, slowestPollMs } = await waitFor<{ status: string; error: string | null; report: object }>(
    server,
    `${api.url}/api/v1/imports/${id}`,
    auth,
  );
  const finished = performance.now();
  const after = memoryOf(server.pid!);
  if (result.status !== 'succeeded') throw new Error(`the import failed: ${result.error}`);
  log(
    `${label}: ${((finished - started) / 1000).toFixed(1)} s, slowest status read ${Math.round(slowestPollMs)} ms, server peak RSS ${before.peakMb} → ${accepted.peakMb} (upload accepted) → ${after.peakMb} MB`,
  );
  return `| ${label} | ${(body.length / 1_048_576).toFixed(1)} | ${((uploaded - started) / 1000).toFixed(1)} | ${((finished - started) / 1000).toFixed(1)} | ${before.peakMb} | ${accepted.peakMb} | ${after.peakMb} | ${Math.round(slowestPollMs)} |`;
}

/** Runs `work` against a server process of its own (its own objects directory), stopped afterwards. */
async function withServer<T>(work: (server: ChildProcess, api: Api) => Promise<T>): Promise<T> {
  const objectsDir = mkdtempSync(join(tmpdir(), 'bench-port-'));
  const server = await startServer(await freePort(), objectsDir);
  try {
    return await work(server, {
      url: serverUrl.get(server)!,
      admin: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
    });
  } finally {
    server.kill('SIGTERM');
    await new Promise((r) => setTimeout(r, 500));
    rmSync(objectsDir, { recursive: true, force: true });
  }
}

async function main(): Promise<void> {
  await adminQuery(baseUrl, `create database ${dbName}`);
  try {
    const db = await openDatabase({ databaseUrl: dbUrl, poolMax: 1 });
    await migrateLatest(db.knex);
    const plan = smoke ? SMOKE_PLAN : FULL_PLAN;
    const seeded = await seed(db.knex, plan, log);
    await db.close();
    const header = [
      '| run | body MB | upload s | upload to finished s | server peak RSS before, MB | when the upload is accepted, MB | after, MB | slowest status read, ms |',
      '|---|---|---|---|---|---|---|---|',
    ];

    const spRows =
      values.only === 'native'
        ? []
        : await withServer(async (server, api) => {
            const auth = await newKey(api, 'bench_import');
            const file = simplyPluralExport();
            log(`Simply Plural export: ${(file.length / 1_048_576).toFixed(1)} MB, ${JSON.stringify(SIZE)}`);
            return [
              await timedImport(server, api, auth, 'first import', 'simply_plural', file),
              await timedImport(server, api, auth, 'same file again (unchanged)', 'simply_plural', file),
            ];
          });

    const nativeRows =
      values.only === 'simply_plural'
        ? []
        : await withServer(async (server, api) => {
            const auth = await keyFor(api, seeded.large.userId);
            const before = memoryOf(server.pid!);
            const started = performance.now();
            const res = await fetch(`${api.url}/api/v1/exports`, { method: 'POST', headers: auth });
            if (res.status !== 202) throw new Error(`POST /exports answered ${res.status}: ${await res.text()}`);
            const { id } = (await res.json()) as { id: string };
            const { result, slowestPollMs } = await waitFor<{
              status: string;
              error: string | null;
              downloadUrl: string | null;
              sizeBytes: number | null;
            }>(server, `${api.url}/api/v1/exports/${id}`, auth);
            const finished = performance.now();
            const after = memoryOf(server.pid!);
            if (result.status !== 'succeeded' || !result.downloadUrl)
              throw new Error(`the export failed: ${result.error}`);
            const download = new URL(result.downloadUrl, api.url);
            const archive = Buffer.from(await (await benchFetch(download)).arrayBuffer());
            log(`export: ${((finished - started) / 1000).toFixed(1)} s, ${(archive.length / 1_048_576).toFixed(1)} MB`);
            const exportRow = `| export of the large account | ${(archive.length / 1_048_576).toFixed(1)} | – | ${((finished - started) / 1000).toFixed(1)} | ${before.peakMb} | – | ${after.peakMb} | ${Math.round(slowestPollMs)} |`;
            const copy = await newKey(api, 'bench_copy');
            return [
              exportRow,
              await timedImport(server, api, copy, 'its import into an empty account', 'native', archive),
            ];
          });

    process.stdout.write(
      [
        '',
        `Simply Plural import, ${SIZE.members} members, ${SIZE.history} front history documents, ${SIZE.notes} notes, ${SIZE.messages} chat messages (PostgreSQL, a server of its own):`,
        '',
        ...header,
        ...spRows,
        '',
        `Native export of the bench's large account (${plan.large.members} members, ${plan.large.entries} notes, ${plan.large.sessions} front sessions) and its import (a server of its own):`,
        '',
        ...header,
        ...nativeRows,
        '',
      ].join('\n'),
    );
  } finally {
    await adminQuery(baseUrl, `drop database if exists ${dbName} with (force)`);
  }
}

await main();

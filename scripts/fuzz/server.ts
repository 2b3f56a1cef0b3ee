/**
 * The real app in this process, as the tests start it (createRuntime + createApp) on a fresh
 * database: an in-memory embedded one, or with DATABASE_URL a throwaway database created next to
 * it and dropped afterwards. Response validation is off so that what the fuzzer checks is what a
 * production server sends, judged by the fuzzer's own validator. The rate limit is set out of
 * reach; error logs are kept so the runner can attribute them to the operation being fuzzed.
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { createApp } from '../../server/app.ts';
import { loadConfig } from '../../server/config.ts';
import { createLogger } from '../../server/logger.ts';
import { createRuntime } from '../../server/runtime.ts';

export interface LoggedError {
  msg: string;
  detail: string;
}

export interface FuzzServer {
  baseUrl: string;
  adminToken: string;
  metricsToken: string;
  database: 'embedded' | 'postgres';
  /** Error-level log lines since the last call. */
  takeErrors(): LoggedError[];
  /** A loopback HTML page with Open Graph tags, for link-preview fixtures. */
  previewPageUrl: string;
  /** Runs every due background job (link previews) to completion: the fuzz server starts no job worker. */
  runJobs(): Promise<void>;
  close(): Promise<void>;
}

async function adminQuery(base: string, sql: string): Promise<void> {
  const client = new pg.Client({ connectionString: base });
  await client.connect();
  try {
    await client.query(sql);
  } finally {
    await client.end();
  }
}

export async function startFuzzServer(options: { serverValidation?: boolean } = {}): Promise<FuzzServer> {
  const base = process.env.DATABASE_URL;
  let databaseUrl: string | undefined;
  let dropDatabase = async () => {};
  if (base) {
    const name = `fuzz_${randomBytes(6).toString('hex')}`;
    await adminQuery(base, `create database ${name}`);
    const url = new URL(base);
    url.pathname = `/${name}`;
    databaseUrl = url.toString();
    dropDatabase = () => adminQuery(base, `drop database if exists ${name} with (force)`);
  }
  // A loopback stand-in for the GIF provider (Tenor v2), so the GIF routes answer rather than 503,
  // and for a page to preview (`/page.html`), so link-preview routes have a real preview to act on.
  const gifProvider = await new Promise<Server>((resolve) => {
    const s = createServer((req, res) => {
      if (req.url === '/page.html') {
        res
          .writeHead(200, { 'content-type': 'text/html' })
          .end('<head><title>Fuzz page</title><meta property="og:description" content="A page to preview"></head>');
        return;
      }
      const body = req.url?.startsWith('/v2/categories')
        ? { tags: [{ searchterm: 'fuzz', name: '#fuzz', image: 'https://media.example/fuzz.gif' }] }
        : { results: [], next: '' };
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(body));
    });
    s.listen(0, '127.0.0.1', () => resolve(s));
  });
  const dir = mkdtempSync(join(tmpdir(), 'ada-fuzz-'));
  const adminToken = `adm_fuzz_${randomBytes(16).toString('hex')}`;
  const metricsToken = `met_fuzz_${randomBytes(16).toString('hex')}`;
  const errors: LoggedError[] = [];
  const logStream = {
    write(line: string) {
      try {
        const entry = JSON.parse(line) as {
          level?: number;
          msg?: string;
          err?: { message?: string; type?: string };
          violation?: string;
        };
        if ((entry.level ?? 0) >= 50)
          errors.push({ msg: entry.msg ?? '', detail: entry.violation ?? entry.err?.message ?? '' });
      } catch {
        errors.push({ msg: 'unparsable log line', detail: line.slice(0, 500) });
      }
    },
  };
  const config = loadConfig({
    NODE_ENV: 'test',
    LOG_LEVEL: 'error',
    ADMIN_TOKEN: adminToken,
    METRICS_TOKEN: metricsToken,
    ...(databaseUrl ? { DATABASE_URL: databaseUrl } : {}),
    DATA_DIR: dir,
    OBJECT_STORAGE_DIR: join(dir, 'objects'),
    DB_POOL_MAX: '4',
    SEED_DEMO: 'false',
    VALIDATE_RESPONSES: options.serverValidation ? 'true' : 'false',
    RATE_LIMIT_PER_MINUTE: '10000000',
    // Small body limits, so the oversize mutation (mutate.ts OVERSIZE_BYTES) stays cheap.
    BODY_LIMIT_BYTES: '524288',
    MEDIA_MAX_BYTES: '524288',
    IMPORT_MAX_BYTES: '524288',
    // Notes may name external images; this machine has no network, so fail those fetches fast.
    FETCH_TIMEOUT_MS: '500',
    // The loopback stand-ins above (the preview page) and nothing else private.
    FETCH_ALLOW_ADDRESSES: '127.0.0.1',
    NOTE_IMAGES_TIMEOUT_MS: '1000',
    GIF_API_KEY: 'fuzz-gif-key',
    GIF_API_BASE_URL: `http://127.0.0.1:${(gifProvider.address() as AddressInfo).port}/v2`,
    TRASH_PURGE_INTERVAL_MS: '0',
    EMBEDDED_MAINTENANCE_INTERVAL_MS: '0',
  });
  let runtime: Awaited<ReturnType<typeof createRuntime>>;
  try {
    runtime = await createRuntime(config, {
      logger: createLogger(config.logLevel, logStream),
      embeddedDir: 'memory',
      // The limiter's own store in memory: the PostgreSQL store would add a write per request.
      rateLimitStore: 'memory',
    });
  } catch (err) {
    gifProvider.close();
    await dropDatabase().catch(() => undefined);
    rmSync(dir, { recursive: true, force: true });
    throw err;
  }
  const app = createApp(runtime.deps);
  const server = await new Promise<Server>((resolve) => {
    const s = app.listen(0, '127.0.0.1', () => resolve(s));
  });
  return {
    baseUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    adminToken,
    metricsToken,
    database: databaseUrl ? 'postgres' : 'embedded',
    takeErrors: () => errors.splice(0),
    previewPageUrl: `http://127.0.0.1:${(gifProvider.address() as AddressInfo).port}/page.html`,
    runJobs: async () => void (await runtime.jobs.runDue()),
    close: async () => {
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      });
      await runtime.close();
      await new Promise((resolve) => gifProvider.close(resolve));
      await dropDatabase();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

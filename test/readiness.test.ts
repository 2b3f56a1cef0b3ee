/**
 * GET /readyz reports every dependency the server is configured with (database and migrations,
 * Redis with REDIS_URL, object storage unless OBJECT_STORAGE=none) and is 503 with the envelope plus
 * `checks` when one is down; probe requests are logged at debug, a state change once at warn/info.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, connect, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { S3_ACCESS_KEY_ID, S3_SECRET_ACCESS_KEY, startTestS3, type TestS3Server } from './helpers/s3server.ts';
import { bearer, TestServer } from './helpers/server.ts';

const REDIS = new URL(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379');

/** A TCP relay to the real Redis that the test can cut and restore, so Redis "goes down" for this server only. */
class RedisRelay {
  private server: Server | undefined;
  private readonly sockets = new Set<Socket>();
  port = 0;

  async open(): Promise<void> {
    this.server = createServer((client) => {
      const upstream = connect(Number(REDIS.port || 6379), REDIS.hostname);
      for (const s of [client, upstream]) {
        this.sockets.add(s);
        s.on('close', () => this.sockets.delete(s));
        s.on('error', () => undefined);
      }
      client.pipe(upstream).pipe(client);
    });
    await new Promise<void>((resolve) => this.server!.listen(this.port, '127.0.0.1', resolve));
    this.port = (this.server.address() as { port: number }).port;
  }

  async cut(): Promise<void> {
    const server = this.server!;
    this.server = undefined;
    const closed = new Promise<void>((resolve) => server.close(() => resolve()));
    for (const s of this.sockets) s.destroy();
    await closed;
  }

  get url(): string {
    return `redis://127.0.0.1:${this.port}`;
  }
}

interface LogLine {
  level: number;
  msg: string;
  req?: { path: string };
  checks?: Record<string, string>;
  errors?: Record<string, string>;
}

function logSink(): { lines: LogLine[]; write(line: string): void } {
  const lines: LogLine[] = [];
  return { lines, write: (line) => void lines.push(JSON.parse(line) as LogLine) };
}

const DEBUG = 20;
const INFO = 30;
const WARN = 40;

async function readiness(server: TestServer): Promise<{ status: number; body: Record<string, unknown> }> {
  const res = await server.fetch('/readyz');
  expect(res.headers.get('content-type')).toMatch(/^application\/json/);
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

async function until<T>(probe: () => Promise<T>, done: (value: T) => boolean, timeoutMs = 15_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (done(value) || Date.now() > deadline) return value;
    await new Promise((r) => setTimeout(r, 200));
  }
}

// Tests that need Redis run when REDIS_URL is set (CI sets it) and are reported as skipped otherwise.
describe.skipIf(!process.env.REDIS_URL)('readiness with Redis (REDIS_URL)', () => {
  const relay = new RedisRelay();
  const logs = logSink();
  const server = new TestServer();
  beforeAll(async () => {
    await relay.open();
    await server.start({ env: { REDIS_URL: relay.url, LOG_LEVEL: 'info' }, logStream: logs });
  });
  afterAll(async () => {
    await server.close();
    await relay.cut().catch(() => undefined);
  });

  it('lists redis among the checks and is 200 while it answers', async () => {
    expect(server.deps.rateLimiter.store.kind).toBe('redis');
    const ready = await readiness(server);
    expect(ready).toEqual({
      status: 200,
      body: {
        status: 'ready',
        database: 'ok',
        migrations: 'ok',
        checks: { database: 'ok', migrations: 'ok', redis: 'ok', objectStorage: 'ok' },
      },
    });
  });

  it('is 503 with the envelope and redis: down when Redis goes away, logged once; 200 again when it is back', async () => {
    logs.lines.length = 0;
    await relay.cut();
    const down = await until(
      () => readiness(server),
      (r) => r.status === 503,
    );
    expect(down).toEqual({
      status: 503,
      body: {
        code: 'PRECONDITION_FAILED',
        message: 'Redis is not reachable',
        checks: { database: 'ok', migrations: 'ok', redis: 'down', objectStorage: 'ok' },
      },
    });
    // API requests cannot be rate limited meanwhile: 503, retry later (not a 500, not admitted unchecked).
    const user = await server.user();
    const refused = await server.fetch('/api/v1/appearance/custom-fonts', { headers: bearer(user.apiKey) });
    expect(refused.status).toBe(503);
    expect(await refused.json()).toEqual({
      code: 'PRECONDITION_FAILED',
      message: 'Rate-limit store (Redis) is not reachable',
    });
    const started = Date.now();
    expect((await readiness(server)).status).toBe(503);
    expect(Date.now() - started).toBeLessThan(5_000); // each check has its own deadline

    const warnings = logs.lines.filter((l) => l.msg === 'not ready: Redis is not reachable');
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatchObject({
      level: WARN,
      checks: { redis: 'down' },
      errors: { redis: expect.any(String) },
    });
    expect(logs.lines.filter((l) => l.req?.path === '/readyz')).toEqual([]); // probe requests are debug

    await relay.open(); // same port
    const up = await until(
      () => readiness(server),
      (r) => r.status === 200,
    );
    expect(up.status).toBe(200);
    expect(logs.lines.filter((l) => l.msg === 'ready again' && l.level === INFO)).toHaveLength(1);
  });
});

describe('readiness of object storage', () => {
  let root: string;
  beforeAll(() => {
    root = mkdtempSync(join(tmpdir(), 'ada-ready-'));
  });
  afterAll(() => rmSync(root, { recursive: true, force: true }));

  it('filesystem: objectStorage is down when its directory cannot be used', async () => {
    writeFileSync(join(root, 'a-file'), 'not a directory');
    const server = await new TestServer().start({ env: { OBJECT_STORAGE_DIR: join(root, 'a-file', 'objects') } });
    try {
      expect(await readiness(server)).toEqual({
        status: 503,
        body: {
          code: 'PRECONDITION_FAILED',
          message: 'Object storage is not reachable',
          checks: { database: 'ok', migrations: 'ok', objectStorage: 'down' },
        },
      });
      expect(server.violations).toEqual([]);
    } finally {
      await server.close();
    }
  });

  it('OBJECT_STORAGE=none: not checked, not listed', async () => {
    const server = await new TestServer().start({ env: { OBJECT_STORAGE: 'none' } });
    try {
      expect(await readiness(server)).toEqual({
        status: 200,
        body: { status: 'ready', database: 'ok', migrations: 'ok', checks: { database: 'ok', migrations: 'ok' } },
      });
    } finally {
      await server.close();
    }
  });

  describe('S3', () => {
    let s3: TestS3Server;
    beforeAll(async () => {
      s3 = await startTestS3(['ready-bucket']);
    });
    afterAll(async () => {
      await s3.close();
    });

    const s3Env = (bucket: string, secret = S3_SECRET_ACCESS_KEY) => ({
      OBJECT_STORAGE: 's3',
      S3_ENDPOINT: s3.endpoint,
      S3_BUCKET: bucket,
      S3_ACCESS_KEY_ID,
      S3_SECRET_ACCESS_KEY: secret,
    });

    it('is ok when the bucket answers a signed HEAD', async () => {
      const server = await new TestServer().start({ env: s3Env('ready-bucket') });
      try {
        const before = s3.seen.length;
        expect(await readiness(server)).toMatchObject({ status: 200, body: { checks: { objectStorage: 'ok' } } });
        expect(s3.seen.slice(before)).toEqual([expect.objectContaining({ method: 'HEAD', url: '/ready-bucket/' })]);
      } finally {
        await server.close();
      }
    });

    it('is down for a missing bucket or a wrong secret', async () => {
      for (const env of [s3Env('no-such-bucket'), s3Env('ready-bucket', 'not-the-secret')]) {
        const server = await new TestServer().start({ env });
        try {
          expect(await readiness(server)).toEqual({
            status: 503,
            body: {
              code: 'PRECONDITION_FAILED',
              message: 'Object storage is not reachable',
              checks: { database: 'ok', migrations: 'ok', objectStorage: 'down' },
            },
          });
          expect(server.violations).toEqual([]);
        } finally {
          await server.close();
        }
      }
    });
  });
});

describe('probe request logs', () => {
  it('/healthz and /readyz are logged at debug, other requests at info', async () => {
    const logs = logSink();
    const server = await new TestServer().start({ env: { LOG_LEVEL: 'debug' }, logStream: logs });
    try {
      await server.fetch('/healthz');
      await server.fetch('/readyz');
      await server.fetch('/openapi.json');
      const byPath = Object.fromEntries(logs.lines.filter((l) => l.req).map((l) => [l.req!.path, l.level]));
      expect(byPath).toEqual({ '/healthz': DEBUG, '/readyz': DEBUG, '/openapi.json': INFO });
    } finally {
      await server.close();
    }
  });
});

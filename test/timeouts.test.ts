/**
 * Slow clients: the headers, body and keep-alive deadlines of server/http/server.ts and parseBody,
 * over raw sockets (a client that trickles its request, which fetch cannot do).
 */
import { randomUUID } from 'node:crypto';
import { connect, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, it } from 'vitest';
import { loadConfig } from '../server/config.ts';
import { PNG } from './helpers/images.ts';
import { TestServer, type TestUser } from './helpers/server.ts';

const server = new TestServer();
let user: TestUser;

beforeAll(async () => {
  await server.start({
    env: {
      HTTP_HEADERS_TIMEOUT_MS: '1000',
      HTTP_REQUEST_TIMEOUT_MS: '1500',
      HTTP_UPLOAD_TIMEOUT_MS: '20000',
      HTTP_KEEP_ALIVE_TIMEOUT_MS: '2000',
    },
  });
  user = await server.user();
});
afterAll(() => server.close());

interface Exchange {
  socket: Socket;
  /** Everything the server sent, once it closed the connection. */
  closed: Promise<{ text: string; afterMs: number }>;
}

function open(): Promise<Exchange> {
  const { port } = new URL(server.baseUrl);
  const socket = connect(Number(port), '127.0.0.1');
  const started = performance.now();
  let text = '';
  socket.on('data', (d) => (text += d));
  const closed = new Promise<{ text: string; afterMs: number }>((resolve) =>
    socket.on('close', () => resolve({ text, afterMs: performance.now() - started })),
  );
  socket.on('error', () => {}); // a reset after the server gave up is expected
  return new Promise((resolve) => socket.once('connect', () => resolve({ socket, closed })));
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

// Each test waits out a deadline of its own on a connection of its own: they run at once.
describe.concurrent('slow clients', () => {
  it('a body that does not arrive within HTTP_REQUEST_TIMEOUT_MS: 408 REQUEST_TIMEOUT, connection closed, nothing stored', async ({
    expect,
  }) => {
    const name = `slow-${randomUUID()}`;
    const body = JSON.stringify({ name });
    const { socket, closed } = await open();
    socket.write(
      `POST /api/v1/members HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${user.apiKey}\r\n` +
        `Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body.slice(0, 5)}`,
    );
    // Trickle the rest, a byte every 300 ms: it would take longer than the deadline.
    const trickle = setInterval(() => {
      if (!socket.destroyed) socket.write(' ');
    }, 300);
    const { text, afterMs } = await closed;
    clearInterval(trickle);
    expect(text).toMatch(/^HTTP\/1\.1 408 /);
    expect(text.toLowerCase()).toContain('connection: close');
    expect(JSON.parse(text.slice(text.indexOf('\r\n\r\n') + 4))).toEqual({
      code: 'REQUEST_TIMEOUT',
      message: 'The request body did not arrive within 1500 ms',
    });
    expect(afterMs).toBeGreaterThanOrEqual(1400);
    expect(afterMs).toBeLessThan(10_000);
    const members = await server.deps.db.knex('members').where({ user_id: user.userId, name });
    expect(members).toEqual([]);
  });

  it('the last bytes of a body arriving after the deadline change nothing', async ({ expect }) => {
    const name = `late-${randomUUID()}`;
    const body = JSON.stringify({ name });
    const { socket, closed } = await open();
    socket.write(
      `POST /api/v1/members HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${user.apiKey}\r\n` +
        `Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body.slice(0, 5)}`,
    );
    await sleep(1450);
    socket.write(body.slice(5)); // complete, at about the deadline
    const { text } = await closed;
    const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(text)?.[1]);
    const members = await server.deps.db.knex('members').where({ user_id: user.userId, name });
    // Either the body made it (201, stored) or the deadline did (408, nothing stored); never both.
    if (status === 201) expect(members).toHaveLength(1);
    else {
      expect(status).toBe(408);
      expect(members).toEqual([]);
    }
  });

  it('headers that do not arrive within HTTP_HEADERS_TIMEOUT_MS: Node answers 408 and closes', async ({ expect }) => {
    const { socket, closed } = await open();
    socket.write('GET /api/v1/me HTTP/1.1\r\nHost: x\r\n');
    const trickle = setInterval(() => {
      if (!socket.destroyed) socket.write('X-Slow: 1\r\n');
    }, 300);
    const { text, afterMs } = await closed;
    clearInterval(trickle);
    expect(text).toMatch(/^HTTP\/1\.1 408 /);
    expect(afterMs).toBeGreaterThanOrEqual(900);
    expect(afterMs).toBeLessThan(5_000); // 1 s plus Node's check interval (1 s), not its default 30 s
  });

  it('an idle kept-alive connection is closed after HTTP_KEEP_ALIVE_TIMEOUT_MS, which the response announces', async ({
    expect,
  }) => {
    const { socket, closed } = await open();
    socket.write(`GET /api/v1/me HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${user.apiKey}\r\n\r\n`);
    const { text, afterMs } = await closed;
    expect(text).toMatch(/^HTTP\/1\.1 200 /);
    expect(text.toLowerCase()).toContain('keep-alive: timeout=2');
    expect(afterMs).toBeGreaterThanOrEqual(1900);
    expect(afterMs).toBeLessThan(10_000);
  });

  it('the signed upload route is bound by HTTP_UPLOAD_TIMEOUT_MS, not HTTP_REQUEST_TIMEOUT_MS: a slow upload completes', async ({
    expect,
  }) => {
    const storage = server.deps.storage!;
    const key = `t/${randomUUID()}/slow.png`;
    const put = await storage.presignPut(key, 'image/png', PNG.length, 60);
    const url = new URL(put.url, server.baseUrl);
    const { socket, closed } = await open();
    const headers = Object.entries(put.headers)
      .map(([k, v]) => `${k}: ${v}\r\n`)
      .join('');
    socket.write(
      `PUT ${url.pathname}${url.search} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n${headers}` +
        (put.headers['Content-Length'] ? '' : `Content-Length: ${PNG.length}\r\n`) +
        '\r\n',
    );
    // The body in four parts over about 2.4 s: longer than the 1.5 s request deadline.
    const parts = 4;
    const size = Math.ceil(PNG.length / parts);
    for (let i = 0; i < parts; i++) {
      socket.write(PNG.subarray(i * size, (i + 1) * size));
      if (i < parts - 1) await sleep(800);
    }
    const { text } = await closed;
    expect(text).toMatch(/^HTTP\/1\.1 200 /);
    expect((await storage.get(key))?.body.equals(PNG)).toBe(true);
  });

  it('the deadlines are settings with bounds, validated at start', ({ expect }) => {
    expect(loadConfig({})).toMatchObject({
      httpHeadersTimeoutMs: 10_000,
      httpRequestTimeoutMs: 30_000,
      httpUploadTimeoutMs: 900_000,
      httpKeepAliveTimeoutMs: 5_000,
    });
    expect(() => loadConfig({ HTTP_REQUEST_TIMEOUT_MS: '500' })).toThrow(
      'HTTP_REQUEST_TIMEOUT_MS must be between 1000 and 3600000, got 500',
    );
    expect(() => loadConfig({ HTTP_REQUEST_TIMEOUT_MS: '60000', HTTP_UPLOAD_TIMEOUT_MS: '30000' })).toThrow(
      'HTTP_UPLOAD_TIMEOUT_MS must be at least HTTP_REQUEST_TIMEOUT_MS',
    );
    expect(() => loadConfig({ HTTP_HEADERS_TIMEOUT_MS: '600000', HTTP_UPLOAD_TIMEOUT_MS: '300000' })).toThrow(
      'HTTP_HEADERS_TIMEOUT_MS must be at most HTTP_UPLOAD_TIMEOUT_MS',
    );
  });
});

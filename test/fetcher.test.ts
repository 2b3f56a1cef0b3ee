/**
 * The guarded outbound fetcher against real loopback HTTP servers. Private IP literals other than
 * loopback are only ever refused, never contacted: each such case first asserts the address is
 * classified private, and the loopback cases prove the refusal happens before any connection.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../server/config.ts';
import { isPublicAddress } from '../server/net/addresses.ts';
import {
  FetchRefusedError,
  fetchOptionsFromConfig,
  guardedFetch,
  type FetchRefusedReason,
  type GuardedFetchOptions,
} from '../server/net/guardedFetch.ts';

interface TestServer {
  server: Server;
  base: string;
  port: number;
  connections: number;
  hosts: string[];
}

async function startServer(
  address: string,
  handler: (req: IncomingMessage, res: ServerResponse, self: TestServer) => void,
): Promise<TestServer> {
  const self = { connections: 0, hosts: [] } as unknown as TestServer;
  self.server = createServer((req, res) => {
    self.hosts.push(req.headers.host ?? '');
    handler(req, res, self);
  });
  self.server.on('connection', () => self.connections++);
  await new Promise<void>((resolve) => self.server.listen(0, address, () => resolve()));
  self.port = (self.server.address() as AddressInfo).port;
  self.base = `http://${address}:${self.port}`;
  return self;
}

async function stopServer(s: TestServer | undefined): Promise<void> {
  if (!s) return;
  s.server.closeAllConnections();
  await new Promise<void>((resolve) => s.server.close(() => resolve()));
}

let main: TestServer;
/** On 127.0.0.2: a "different internal host" that redirects must not reach. */
let other: TestServer;

beforeAll(async () => {
  main = await startServer('127.0.0.1', (req, res) => {
    const url = new URL(req.url ?? '/', 'http://x');
    const path = url.pathname;
    const chain = /^\/chain\/(\d+)$/.exec(path);
    if (path === '/ok') {
      res.writeHead(200, { 'content-type': 'text/plain; charset=utf-8' });
      res.end('hello');
    } else if (chain) {
      const n = Number(chain[1]);
      if (n === 0) res.end('end of chain');
      else res.writeHead(302, { location: `/chain/${n - 1}` }).end();
    } else if (path === '/redirect') {
      res
        .writeHead(Number(url.searchParams.get('status') ?? 302), { location: url.searchParams.get('to') ?? '' })
        .end();
    } else if (path === '/redirect-without-location') {
      res.writeHead(302).end();
    } else if (path === '/declared-too-big') {
      // Headers only, body never sent: only a Content-Length check can end this before the deadline.
      res.writeHead(200, { 'content-type': 'image/png', 'content-length': '5000' });
      res.flushHeaders();
    } else if (path === '/bytes') {
      const n = Number(url.searchParams.get('n'));
      res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': String(n) });
      res.end(Buffer.alloc(n, 0x61));
    } else if (path === '/stream') {
      // No Content-Length: 100 chunks of 600 bytes, unless the client hangs up first.
      res.writeHead(200, { 'content-type': 'application/octet-stream' });
      let sent = 0;
      const tick = () => {
        if (res.destroyed) return;
        if (sent++ === 100) return void res.end();
        res.write(Buffer.alloc(600, 0x62));
        setTimeout(tick, 2);
      };
      tick();
    } else if (path === '/hang') {
      // Never answers.
    } else if (path === '/stall-body') {
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.write('partial');
    } else if (path.startsWith('/status/')) {
      res.writeHead(Number(path.slice('/status/'.length))).end('status body');
    } else {
      res.writeHead(404).end();
    }
  });
  other = await startServer('127.0.0.2', (_req, res) => res.end('internal secret'));
});

afterAll(async () => {
  await stopServer(main);
  await stopServer(other);
});

beforeEach(() => {
  main.connections = 0;
  main.hosts.length = 0;
  other.connections = 0;
});

const allow: GuardedFetchOptions = { allowPrivate: true, timeoutMs: 5000 };

async function refusal(promise: Promise<unknown>): Promise<FetchRefusedError> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(FetchRefusedError);
  return error as FetchRefusedError;
}

async function expectRefused(promise: Promise<unknown>, reason: FetchRefusedReason): Promise<FetchRefusedError> {
  const error = await refusal(promise);
  expect(error.reason, error.message).toBe(reason);
  return error;
}

describe('private addresses', () => {
  it('refuses 127.0.0.1 by default, before connecting', async () => {
    await expectRefused(guardedFetch(`${main.base}/ok`), 'private_address');
    expect(main.connections).toBe(0);
  });

  it('refuses localhost by default after resolving it', async () => {
    const error = await expectRefused(guardedFetch(`http://localhost:${main.port}/ok`), 'private_address');
    expect(error.message).toMatch(/localhost resolves to (127\.0\.0\.1|::1)/);
    expect(main.connections).toBe(0);
  });

  it('fetches loopback when allowPrivate is set', async () => {
    const result = await guardedFetch(`${main.base}/ok`, allow);
    expect(result).toEqual({
      status: 200,
      contentType: 'text/plain; charset=utf-8',
      body: Buffer.from('hello'),
      truncated: false,
      finalUrl: `${main.base}/ok`,
    });
  });

  it('fetches localhost when allowPrivate is set', async () => {
    const result = await guardedFetch(`http://localhost:${main.port}/ok`, allow);
    expect(result.body.toString()).toBe('hello');
  });

  it.each([
    ['http://10.0.0.1/', '10.0.0.1'],
    ['http://10.255.255.254:8080/x', '10.255.255.254'],
    ['http://172.16.0.1/', '172.16.0.1'],
    ['http://192.168.1.1/', '192.168.1.1'],
    ['http://169.254.169.254/latest/meta-data/', '169.254.169.254'],
    ['http://100.64.0.1/', '100.64.0.1'],
    ['http://0.0.0.0:80/', '0.0.0.0'],
    ['http://224.0.0.1/', '224.0.0.1'],
    ['http://0x7f000001/', '127.0.0.1'],
    ['http://2130706433/', '127.0.0.1'],
    ['http://[::1]/', '::1'],
    ['http://[::ffff:127.0.0.1]/', '::ffff:127.0.0.1'],
    ['http://[::ffff:10.0.0.1]/', '::ffff:10.0.0.1'],
    ['http://[fd00::1]/', 'fd00::1'],
    ['http://[fe80::1]/', 'fe80::1'],
    ['http://[::]/', '::'],
  ])('refuses the IP literal %s', async (url, address) => {
    // Precondition: the classifier alone would refuse it, so no packet can leave for this address.
    expect(isPublicAddress(address)).toBe(false);
    await expectRefused(guardedFetch(url, { timeoutMs: 2000 }), 'private_address');
  });

  it('refuses a host whose DNS answers include any private address', async () => {
    const lookup = async () => [
      { address: '127.0.0.1', family: 4 as const },
      { address: '10.0.0.5', family: 4 as const },
    ];
    await expectRefused(
      guardedFetch(`http://mixed.test:${main.port}/ok`, { lookup, allowAddresses: ['127.0.0.1'] }),
      'private_address',
    );
    expect(main.connections).toBe(0);
  });

  it('connects to the address it vetted, not to a later DNS answer (no rebinding)', async () => {
    let calls = 0;
    const lookup = async () => {
      calls++;
      return [{ address: calls === 1 ? '127.0.0.1' : '127.0.0.2', family: 4 as const }];
    };
    const result = await guardedFetch(`http://rebind.test:${main.port}/ok`, { lookup, allowAddresses: ['127.0.0.1'] });
    expect(result.body.toString()).toBe('hello');
    expect(calls).toBe(1);
    expect(main.hosts).toEqual([`rebind.test:${main.port}`]);
    expect(other.connections).toBe(0);
  });

  it('maps resolver failures to dns', async () => {
    const notFound = async () => {
      throw Object.assign(new Error('getaddrinfo ENOTFOUND'), { code: 'ENOTFOUND' });
    };
    await expectRefused(guardedFetch('http://no-such-host.test/', { lookup: notFound }), 'dns');
    await expectRefused(guardedFetch('http://empty-answer.test/', { lookup: async () => [] }), 'dns');
  });
});

describe('schemes', () => {
  it.each([
    'file:///etc/passwd',
    'ftp://example.com/file',
    'data:text/plain,hello',
    'javascript:alert(1)',
    'gopher://example.com/',
    'ws://example.com/',
  ])('refuses %s', async (url) => {
    await expectRefused(guardedFetch(url), 'scheme');
  });

  it('refuses what is not a URL at all', async () => {
    await expectRefused(guardedFetch('not a url'), 'invalid_url');
    await expectRefused(guardedFetch('/relative/path'), 'invalid_url');
  });
});

describe('redirects', () => {
  it('follows a chain up to the limit and reports the final URL', async () => {
    const result = await guardedFetch(`${main.base}/chain/3`, { ...allow, maxRedirects: 3 });
    expect(result.body.toString()).toBe('end of chain');
    expect(result.finalUrl).toBe(`${main.base}/chain/0`);
  });

  it('refuses one redirect more than the limit', async () => {
    await expectRefused(guardedFetch(`${main.base}/chain/4`, { ...allow, maxRedirects: 3 }), 'too_many_redirects');
    await expectRefused(guardedFetch(`${main.base}/chain/1`, { ...allow, maxRedirects: 0 }), 'too_many_redirects');
  });

  it('defaults to at most 3 redirects', async () => {
    expect((await guardedFetch(`${main.base}/chain/3`, allow)).finalUrl).toBe(`${main.base}/chain/0`);
    await expectRefused(guardedFetch(`${main.base}/chain/4`, allow), 'too_many_redirects');
  });

  it.each([301, 303, 307, 308])('follows a %i redirect', async (status) => {
    const to = encodeURIComponent(`${main.base}/ok`);
    expect((await guardedFetch(`${main.base}/redirect?status=${status}&to=${to}`, allow)).body.toString()).toBe(
      'hello',
    );
  });

  it('re-checks every hop: an allowed first hop cannot redirect to another private address', async () => {
    const to = encodeURIComponent(`${other.base}/secret`);
    // 127.0.0.1 is allowed explicitly; 127.0.0.2 is not, and allowPrivate is off.
    const error = await expectRefused(
      guardedFetch(`${main.base}/redirect?to=${to}`, { allowAddresses: ['127.0.0.1'] }),
      'private_address',
    );
    expect(error.url).toBe(`${other.base}/secret`);
    expect(main.connections).toBe(1);
    expect(other.connections).toBe(0);
    // Control: the same chain goes through once the second address is allowed too.
    const ok = await guardedFetch(`${main.base}/redirect?to=${to}`, { allowAddresses: ['127.0.0.1', '127.0.0.2'] });
    expect(ok.body.toString()).toBe('internal secret');
  });

  it('refuses a redirect to a private IPv6 literal or to another scheme', async () => {
    const first = { allowAddresses: ['127.0.0.1'] };
    await expectRefused(
      guardedFetch(`${main.base}/redirect?to=${encodeURIComponent(`http://[::1]:${main.port}/ok`)}`, first),
      'private_address',
    );
    await expectRefused(
      guardedFetch(`${main.base}/redirect?to=${encodeURIComponent('file:///etc/passwd')}`, first),
      'scheme',
    );
  });

  it('treats a redirect without Location as a bad status', async () => {
    const error = await expectRefused(guardedFetch(`${main.base}/redirect-without-location`, allow), 'bad_status');
    expect(error.status).toBe(302);
  });
});

describe('limits', () => {
  it('refuses a Content-Length above maxBytes without waiting for the body', async () => {
    // The body never arrives, so anything but the header check would end in a timeout instead.
    await expectRefused(guardedFetch(`${main.base}/declared-too-big`, { ...allow, maxBytes: 1000 }), 'too_large');
  });

  it('stops reading a streamed body once it passes maxBytes', async () => {
    await expectRefused(guardedFetch(`${main.base}/stream`, { ...allow, maxBytes: 1000 }), 'too_large');
    // Control: the same stream is accepted with room for all of it.
    expect((await guardedFetch(`${main.base}/stream`, { ...allow, maxBytes: 60_000 })).body.length).toBe(60_000);
  });

  it('with truncate, keeps the first maxBytes and hangs up instead of refusing (declared or streamed)', async () => {
    const declared = await guardedFetch(`${main.base}/bytes?n=5000`, { ...allow, maxBytes: 1000, truncate: true });
    expect([declared.body.length, declared.truncated]).toEqual([1000, true]);
    const streamed = await guardedFetch(`${main.base}/stream`, { ...allow, maxBytes: 1000, truncate: true });
    expect([streamed.body.length, streamed.truncated, streamed.body.every((b) => b === 0x62)]).toEqual([
      1000,
      true,
      true,
    ]);
    const whole = await guardedFetch(`${main.base}/bytes?n=1000`, { ...allow, maxBytes: 1000, truncate: true });
    expect([whole.body.length, whole.truncated]).toEqual([1000, false]);
    expect((await guardedFetch(`${main.base}/bytes?n=10`, allow)).truncated).toBe(false);
  });

  it('accepts a body of exactly maxBytes and refuses one byte more', async () => {
    expect((await guardedFetch(`${main.base}/bytes?n=1000`, { ...allow, maxBytes: 1000 })).body.length).toBe(1000);
    await expectRefused(guardedFetch(`${main.base}/bytes?n=1001`, { ...allow, maxBytes: 1000 }), 'too_large');
  });

  it('times out on a server that never answers', async () => {
    await expectRefused(guardedFetch(`${main.base}/hang`, { ...allow, timeoutMs: 300 }), 'timeout');
  });

  it('times out when the body stalls half-way', async () => {
    await expectRefused(guardedFetch(`${main.base}/stall-body`, { ...allow, timeoutMs: 300 }), 'timeout');
  });

  it('rethrows the caller’s own abort reason instead of a refusal', async () => {
    const controller = new AbortController();
    const reason = new Error('caller gave up');
    setTimeout(() => controller.abort(reason), 50);
    await expect(guardedFetch(`${main.base}/hang`, { ...allow, signal: controller.signal })).rejects.toBe(reason);
  });
});

describe('status', () => {
  it.each([404, 500, 304, 300])('refuses a final %i as bad_status', async (status) => {
    const error = await expectRefused(guardedFetch(`${main.base}/status/${status}`, allow), 'bad_status');
    expect(error.status).toBe(status);
  });

  it('accepts any 2xx', async () => {
    const result = await guardedFetch(`${main.base}/status/203`, allow);
    expect(result.status).toBe(203);
    expect(result.body.toString()).toBe('status body');
  });
});

describe('address classification', () => {
  it.each([
    '93.184.216.34',
    '8.8.8.8',
    '172.32.0.1',
    '172.15.255.255',
    '100.63.255.255',
    '100.128.0.0',
    '192.169.0.1',
    '2606:4700:4700::1111',
    '::ffff:8.8.8.8',
    '64:ff9b::8.8.8.8',
  ])('%s is public', (address) => expect(isPublicAddress(address)).toBe(true));

  it.each([
    '127.0.0.1',
    '127.255.255.254',
    '10.0.0.0',
    '172.16.0.0',
    '172.31.255.255',
    '192.168.255.255',
    '169.254.0.1',
    '100.64.0.0',
    '100.127.255.255',
    '0.0.0.0',
    '0.1.2.3',
    '224.0.0.251',
    '239.255.255.250',
    '255.255.255.255',
    '198.18.0.1',
    '::1',
    '::',
    'fc00::1',
    'fdff:ffff::1',
    'fe80::1',
    'fe80::1%eth0',
    'ff02::1',
    '::ffff:127.0.0.1',
    '::ffff:7f00:1',
    '::ffff:192.168.0.1',
    '64:ff9b::10.0.0.1',
    '2001:db8::1',
    '2002:7f00:1::1',
    'example.com',
    '',
  ])('%j is not public', (address) => expect(isPublicAddress(address)).toBe(false));
});

describe('fetcher configuration', () => {
  it('defaults to no private addresses, 10 s, 10 MiB, 3 redirects', () => {
    const config = loadConfig({});
    expect(fetchOptionsFromConfig(config)).toEqual({
      allowPrivate: false,
      allowAddresses: [],
      timeoutMs: 10_000,
      maxBytes: 10 * 1_048_576,
      maxRedirects: 3,
    });
  });

  it('reads the FETCH_* variables', () => {
    const config = loadConfig({
      FETCH_ALLOW_PRIVATE: 'true',
      FETCH_ALLOW_ADDRESSES: ' 10.1.2.3, fd00::/8 ',
      FETCH_TIMEOUT_MS: '2500',
      FETCH_MAX_BYTES: '4096',
      FETCH_MAX_REDIRECTS: '0',
    });
    expect(fetchOptionsFromConfig(config)).toEqual({
      allowPrivate: true,
      allowAddresses: ['10.1.2.3', 'fd00::/8'],
      timeoutMs: 2500,
      maxBytes: 4096,
      maxRedirects: 0,
    });
  });

  it('names the variable that is wrong', () => {
    expect(() => loadConfig({ FETCH_ALLOW_PRIVATE: 'sometimes' })).toThrow(/FETCH_ALLOW_PRIVATE must be true or false/);
    expect(() => loadConfig({ FETCH_TIMEOUT_MS: '10s' })).toThrow(/FETCH_TIMEOUT_MS must be an integer/);
    expect(() => loadConfig({ FETCH_MAX_BYTES: '0' })).toThrow(/FETCH_MAX_BYTES must be between/);
    expect(() => loadConfig({ FETCH_MAX_REDIRECTS: '50' })).toThrow(ConfigError);
    expect(() => loadConfig({ FETCH_ALLOW_ADDRESSES: '10.0.0.1,intranet.example' })).toThrow(
      /FETCH_ALLOW_ADDRESSES: Not an IP address or CIDR range: intranet.example/,
    );
  });

  it('FETCH_ALLOW_ADDRESSES opens those addresses only: the loopback origin, not a redirect to another private host', async () => {
    const options = fetchOptionsFromConfig(loadConfig({ FETCH_ALLOW_ADDRESSES: '127.0.0.1' }));
    expect((await guardedFetch(`${main.base}/ok`, options)).body.toString()).toBe('hello');
    await expectRefused(
      guardedFetch(`${main.base}/redirect?to=${encodeURIComponent(`${other.base}/`)}`, options),
      'private_address',
    );
    expect(other.connections).toBe(0);
  });
});

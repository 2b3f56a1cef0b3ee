/**
 * A real S3-compatible server for tests: s3rver on a loopback port and a temp directory, behind a
 * small proxy that verifies every request's SigV4 signature (s3rver itself does not) and records
 * the host and path each request used, so path-style and virtual-host URLs can be told apart.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, request as httpRequest, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import S3rver from 's3rver';
import { verifySigV4 } from './sigv4.ts';

// s3rver's built-in account; the proxy checks signatures against the same pair.
export const S3_ACCESS_KEY_ID = 'S3RVER';
export const S3_SECRET_ACCESS_KEY = 'S3RVER';
/** Virtual-host requests go to <bucket>.s3.<VHOST_DOMAIN>; nothing resolves it, tests connect to loopback. */
export const VHOST_DOMAIN = 'test.invalid';

export interface SeenRequest {
  method: string;
  host: string;
  url: string;
}

export interface TestS3Server {
  /** Endpoint for path-style access: http://127.0.0.1:<port>. */
  endpoint: string;
  /** Endpoint for virtual-host access: http://s3.test.invalid:<port> (use loopbackFetch). */
  vhostEndpoint: string;
  port: number;
  seen: SeenRequest[];
  close(): Promise<void>;
}

function readBody(req: IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => resolve(Buffer.concat(chunks)));
    req.on('error', reject);
  });
}

const listen = (server: Server) =>
  new Promise<number>((resolve) =>
    server.listen(0, '127.0.0.1', () => resolve((server.address() as AddressInfo).port)),
  );

export async function startTestS3(buckets: string[]): Promise<TestS3Server> {
  const directory = mkdtempSync(join(tmpdir(), 'ada-s3rver-'));
  const s3rver = new S3rver({
    address: '127.0.0.1',
    port: 0,
    silent: true,
    directory,
    serviceEndpoint: VHOST_DOMAIN,
    configureBuckets: buckets.map((name) => ({ name })),
  });
  const { port: upstreamPort } = await s3rver.run();
  const secrets = new Map([[S3_ACCESS_KEY_ID, S3_SECRET_ACCESS_KEY]]);
  const seen: SeenRequest[] = [];

  const proxy = createServer(async (req, res) => {
    const body = await readBody(req);
    seen.push({ method: req.method ?? '', host: req.headers.host ?? '', url: req.url ?? '' });
    const verdict = verifySigV4({ method: req.method ?? '', url: req.url ?? '', headers: req.headers }, body, secrets);
    if (!verdict.ok) {
      res.writeHead(403, { 'content-type': 'application/xml' });
      res.end(
        `<?xml version="1.0" encoding="UTF-8"?><Error><Code>${verdict.code}</Code><Message>${verdict.message}</Message></Error>`,
      );
      return;
    }
    const upstream = httpRequest(
      { host: '127.0.0.1', port: upstreamPort, method: req.method, path: req.url, headers: req.headers },
      (upstreamRes) => {
        res.writeHead(upstreamRes.statusCode ?? 502, upstreamRes.headers);
        upstreamRes.pipe(res);
      },
    );
    upstream.on('error', (error) => {
      res.writeHead(502);
      res.end(String(error));
    });
    upstream.end(body);
  });
  const port = await listen(proxy);

  return {
    endpoint: `http://127.0.0.1:${port}`,
    vhostEndpoint: `http://s3.${VHOST_DOMAIN}:${port}`,
    port,
    seen,
    async close() {
      proxy.closeAllConnections();
      await new Promise<void>((resolve) => proxy.close(() => resolve()));
      await s3rver.close();
      rmSync(directory, { recursive: true, force: true });
    },
  };
}

/**
 * A fetch that sends every request to 127.0.0.1:<port> while keeping the URL's Host header, so a
 * virtual-host bucket name reaches the server without DNS. (Node's fetch will not send a custom Host.)
 */
export function loopbackFetch(port: number): (request: Request) => Promise<Response> {
  return async (request) => {
    const url = new URL(request.url);
    const body = request.body ? Buffer.from(await request.arrayBuffer()) : undefined;
    const headers: Record<string, string> = { host: url.host };
    request.headers.forEach((value, name) => {
      headers[name] = value;
    });
    return new Promise<Response>((resolve, reject) => {
      const req = httpRequest(
        { host: '127.0.0.1', port, method: request.method, path: `${url.pathname}${url.search}`, headers },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('end', () => {
            const status = res.statusCode ?? 502;
            const responseHeaders = new Headers();
            for (const [name, value] of Object.entries(res.headers)) {
              if (value !== undefined) responseHeaders.set(name, Array.isArray(value) ? value.join(', ') : value);
            }
            const noBody = status === 204 || status === 304 || request.method === 'HEAD';
            resolve(new Response(noBody ? null : Buffer.concat(chunks), { status, headers: responseHeaders }));
          });
          res.on('error', reject);
        },
      );
      req.on('error', reject);
      req.end(body);
    });
  };
}

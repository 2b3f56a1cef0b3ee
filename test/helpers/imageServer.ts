/** A loopback HTTP server that serves fixed bodies, for tests of outbound fetches. */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface LoopbackServer {
  url(path: string): string;
  hits: string[];
  close(): Promise<void>;
}

export async function startLoopbackServer(routes: Record<string, { status?: number; type?: string; body: Buffer | string }>): Promise<LoopbackServer> {
  const hits: string[] = [];
  const server: Server = createServer((req, res) => {
    hits.push(req.url ?? '');
    const route = routes[req.url ?? ''];
    if (!route) {
      res.writeHead(404).end('missing');
      return;
    }
    res.writeHead(route.status ?? 200, { 'Content-Type': route.type ?? 'application/octet-stream' }).end(route.body);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    url: (path) => `http://127.0.0.1:${port}${path}`,
    hits,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

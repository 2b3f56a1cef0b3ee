/** A loopback HTTP server that serves fixed bodies, for tests of outbound fetches. */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface LoopbackRoute {
  status?: number;
  type?: string;
  body: Buffer | string;
  /** Never answer (until the server closes). */
  hang?: boolean;
  /** Answer once the promise this returns (called for each request) resolves. */
  gate?: () => Promise<void>;
}

export interface LoopbackServer {
  url(path: string): string;
  hits: string[];
  /** The most requests that were being answered at the same time. */
  readonly maxInFlight: number;
  close(): Promise<void>;
}

export async function startLoopbackServer(
  routes: Record<string, LoopbackRoute>,
  prefixRoutes: Record<string, LoopbackRoute> = {},
): Promise<LoopbackServer> {
  const hits: string[] = [];
  let inFlight = 0;
  let maxInFlight = 0;
  const server: Server = createServer((req, res) => {
    hits.push(req.url ?? '');
    const url = req.url ?? '';
    const route = routes[url] ?? Object.entries(prefixRoutes).find(([prefix]) => url.startsWith(prefix))?.[1];
    if (!route) {
      res.writeHead(404).end('missing');
      return;
    }
    inFlight++;
    maxInFlight = Math.max(maxInFlight, inFlight);
    let done = false;
    const finish = () => {
      if (done) return;
      done = true;
      inFlight--;
    };
    res.on('close', finish);
    if (route.hang) return;
    const send = () => {
      res.writeHead(route.status ?? 200, { 'Content-Type': route.type ?? 'application/octet-stream' }).end(route.body);
    };
    if (route.gate) void route.gate().then(send);
    else send();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    url: (path) => `http://127.0.0.1:${port}${path}`,
    hits,
    get maxInFlight() {
      return maxInFlight;
    },
    close: () =>
      new Promise((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

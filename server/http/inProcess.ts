/**
 * A `fetch` served by a request listener (the express app) inside this process, over an in-memory
 * stream pair: no port is opened and no socket file is created, yet every request goes through
 * Node's HTTP parser and the whole pipeline exactly as it would from the network.
 */
import { createServer, request, type RequestListener } from 'node:http';
import { Duplex } from 'node:stream';
import { messageClasses } from './server.ts';

/** Two connected streams: what one side writes, the other reads. */
function streamPair(): [Duplex, Duplex] {
  const sides: Duplex[] = [];
  const side = (other: () => Duplex) =>
    new Duplex({
      read() {},
      write(chunk, _encoding, callback) {
        other().push(chunk);
        callback();
      },
      final(callback) {
        other().push(null);
        callback();
      },
    });
  sides.push(
    side(() => sides[1]!),
    side(() => sides[0]!),
  );
  return [sides[0]!, sides[1]!];
}

export function inProcessFetch(listener: RequestListener): typeof globalThis.fetch {
  const server = createServer(messageClasses(listener), listener);
  return async (input, init) => {
    const req = new Request(input, init);
    const url = new URL(req.url);
    const body = req.body ? Buffer.from(await req.arrayBuffer()) : undefined;
    const headers: Record<string, string> = Object.fromEntries(req.headers);
    headers.host = url.host;
    if (body) headers['content-length'] = String(body.length);
    const [clientSide, serverSide] = streamPair();
    // Node's HTTP server takes any duplex stream as a connection when it is handed one this way.
    server.emit('connection', serverSide);
    return new Promise<Response>((resolve, reject) => {
      const outgoing = request(
        { createConnection: () => clientSide, method: req.method, path: url.pathname + url.search, headers },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (chunk: Buffer) => chunks.push(chunk));
          res.on('error', reject);
          res.on('end', () => {
            clientSide.destroy();
            serverSide.destroy();
            const responseHeaders = new Headers();
            for (const [name, value] of Object.entries(res.headers)) {
              for (const v of [value ?? []].flat()) responseHeaders.append(name, v);
            }
            const status = res.statusCode ?? 500;
            const empty = status === 204 || status === 304 || req.method === 'HEAD';
            resolve(new Response(empty ? null : Buffer.concat(chunks), { status, headers: responseHeaders }));
          });
        },
      );
      outgoing.on('error', reject);
      outgoing.end(body);
    });
  };
}

/**
 * The HTTP server of an express app (server/http/server.ts) builds each request and response with
 * express's prototypes, so that express's own swap of them (Object.setPrototypeOf in app.handle)
 * changes nothing: the swap made Node's HTTP internals slower on every later access to the objects.
 * They must also keep V8's fast properties, as Node's own do: in dictionary mode every access to
 * their fields is a hash lookup.
 */
import { IncomingMessage, type RequestListener, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { setFlagsFromString } from 'node:v8';
import express from 'express';
import { afterEach, describe, expect, it } from 'vitest';
import { createHttpServer, messageClasses } from '../server/http/server.ts';

// V8's own check, in a function compiled after the flag that allows it.
setFlagsFromString('--allow-natives-syntax');
const hasFastProperties = new Function('o', 'return %HasFastProperties(o)') as (o: object) => boolean;

const timeouts = { httpHeadersTimeoutMs: 5000, httpUploadTimeoutMs: 10_000, httpKeepAliveTimeoutMs: 1000 };
const closers: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const close of closers.splice(0)) await close();
});

/** Listens with createHttpServer and answers with `listener`; the base URL. `before` sees each request first. */
async function serve(
  listener: Parameters<typeof createHttpServer>[0],
  before?: (req: IncomingMessage, res: ServerResponse) => void,
): Promise<string> {
  const server = createHttpServer(listener, timeouts);
  if (before) server.prependListener('request', before);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  closers.push(
    () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  );
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

describe('the HTTP server of an express app', () => {
  it("builds requests and responses with the app's prototypes before express sees them, and express works on them", async () => {
    const app = express();
    const seen: boolean[] = [];
    app.get('/echo', (req, res) => {
      // express's own request and response methods and Node's, on the same objects.
      res.status(201).set('X-Query', String(req.query.q)).json({ path: req.path, host: req.hostname });
    });
    // As Node's server hands them over, before express has seen them.
    const base = await serve(app, (req, res) => {
      seen.push(Object.getPrototypeOf(req) === app.request, Object.getPrototypeOf(res) === app.response);
    });
    for (let i = 0; i < 3; i++) {
      const res = await fetch(`${base}/echo?q=${i}`);
      expect(res.status).toBe(201);
      expect(res.headers.get('x-query')).toBe(String(i));
      expect(await res.json()).toEqual({ path: '/echo', host: '127.0.0.1' });
    }
    expect(seen).toEqual([true, true, true, true, true, true]);
  });

  it("keeps Node's behaviour of the objects: instances of Node's classes, with a request body read as a stream", async () => {
    const app = express();
    app.post('/count', (req, res) => {
      let bytes = 0;
      req.on('data', (chunk: Buffer) => (bytes += chunk.length));
      req.on('end', () =>
        res.json({ bytes, request: req instanceof IncomingMessage, response: res instanceof ServerResponse }),
      );
    });
    const base = await serve(app);
    const res = await fetch(`${base}/count`, { method: 'POST', body: 'x'.repeat(100_000) });
    expect(await res.json()).toEqual({ bytes: 100_000, request: true, response: true });
  });

  it("keeps V8's fast properties on the app's requests and responses, as on Node's own", async () => {
    const app = express();
    const seen: boolean[] = [];
    app.get('/', (req, res) => {
      res.status(200).set('X-One', '1');
      seen.push(hasFastProperties(req), hasFastProperties(res));
      res.json({});
    });
    const base = await serve(app);
    for (let i = 0; i < 3; i++) expect((await fetch(base)).status).toBe(200);
    expect(seen).toEqual([true, true, true, true, true, true]);
    // The check itself: an object that went to dictionary mode is not fast.
    const slow = { a: 1, b: 2 } as { a?: number; b: number };
    delete slow.a;
    expect(hasFastProperties(slow)).toBe(false);
  });

  it('makes the classes of an app once, however often they are asked for', () => {
    const app = express();
    const request = app.request;
    const first = messageClasses(app);
    expect(messageClasses(app)).toBe(first);
    expect(Object.getPrototypeOf(app.request)).toBe(request);
  });

  it("gives any other listener Node's own classes", () => {
    const plain: RequestListener = () => {};
    expect(messageClasses(plain)).toEqual({ IncomingMessage, ServerResponse });
    const app = express();
    const classes = messageClasses(app);
    expect(classes.IncomingMessage.prototype).toBe(app.request);
    expect(classes.ServerResponse.prototype).toBe(app.response);
  });
});

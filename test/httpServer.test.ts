/**
 * The HTTP server of an express app (server/http/server.ts) builds each request and response with
 * express's prototypes, so that express's own swap of them (Object.setPrototypeOf in app.handle)
 * changes nothing: the swap made Node's HTTP internals slower on every later access to the objects.
 */
import { IncomingMessage, type RequestListener, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import express from 'express';
import { afterEach, describe, expect, it } from 'vitest';
import { createHttpServer, messageClasses } from '../server/http/server.ts';

const timeouts = { httpHeadersTimeoutMs: 5000, httpUploadTimeoutMs: 10_000, httpKeepAliveTimeoutMs: 1000 };
const closers: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const close of closers.splice(0)) await close();
});

/** Listens with createHttpServer and answers with `listener`; the base URL. */
async function serve(listener: Parameters<typeof createHttpServer>[0]): Promise<string> {
  const server = createHttpServer(listener, timeouts);
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
    const listener = Object.assign(
      ((req, res) => {
        seen.push(Object.getPrototypeOf(req) === app.request, Object.getPrototypeOf(res) === app.response);
        app(req, res);
      }) as RequestListener,
      { request: app.request, response: app.response },
    );
    const base = await serve(listener);
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

  it("gives any other listener Node's own classes", () => {
    const plain: RequestListener = () => {};
    expect(messageClasses(plain)).toEqual({ IncomingMessage, ServerResponse });
    const app = express();
    const classes = messageClasses(app);
    expect(classes.IncomingMessage.prototype).toBe(app.request);
    expect(classes.ServerResponse.prototype).toBe(app.response);
  });
});

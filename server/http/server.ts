/** The HTTP server around the app: the one place its timeouts are set (server/main.ts and the tests use it). */
import { createServer, IncomingMessage, type RequestListener, type Server, ServerResponse } from 'node:http';
import type { Config } from '../config.ts';

export type ServerTimeouts = Pick<Config, 'httpHeadersTimeoutMs' | 'httpUploadTimeoutMs' | 'httpKeepAliveTimeoutMs'>;

/** An express app: a request listener with the prototypes it gives its requests and responses. */
type AppListener = RequestListener & { request?: object; response?: object };

/**
 * A constructor of `base`'s objects whose instances have `prototype` as their prototype: `base`
 * run as a function on the new object, as Node's own subclasses call it. `Reflect.construct` with
 * this constructor as the new target would also work, and was slower than no change at all. If a
 * Node release makes `base` a class, which cannot be called, `base` itself is used.
 */
function constructedWith<T extends abstract new (...args: never[]) => object>(base: T, prototype: object): T {
  if (Function.prototype.toString.call(base).startsWith('class')) return base;
  function Constructed(this: object, ...args: unknown[]): void {
    (base as unknown as (...a: unknown[]) => void).apply(this, args);
  }
  Constructed.prototype = prototype;
  return Constructed as unknown as T;
}

/**
 * The request and response classes for the server of `app`. express swaps the prototype of every
 * request and response for its own (`app.request`, `app.response`) when it receives them
 * (Object.setPrototypeOf in app.handle), after Node's HTTP server has built and used them. Every
 * later access to those objects in Node's internals then misses its inline caches. On a small read
 * that cost more than the rest of express: an express app doing nothing but call the bench's
 * independent baseline answered GET /front at 0.65× its req/s with 1.8× its CPU per request, and
 * at 0.92× and 1.1× with this; the full server gained 15–35 % req/s on the bench's reads. Created
 * with express's prototypes from the start, the objects keep them: the swap changes nothing. Any
 * other listener gets Node's own classes.
 */
export function messageClasses(app: AppListener): {
  IncomingMessage: typeof IncomingMessage;
  ServerResponse: typeof ServerResponse;
} {
  return {
    IncomingMessage: app.request ? constructedWith(IncomingMessage, app.request) : IncomingMessage,
    ServerResponse: app.response ? constructedWith(ServerResponse, app.response) : ServerResponse,
  };
}

export function createHttpServer(app: AppListener, config: ServerTimeouts): Server {
  // Node checks the headers and request deadlines of open connections on this interval (30 s by
  // default, which would let a 10 s deadline run to 40 s).
  const server = createServer({ connectionsCheckingInterval: 1000, ...messageClasses(app) }, app);
  server.headersTimeout = config.httpHeadersTimeoutMs;
  // The whole request, on every route: the signed upload route's bound. The other routes' bodies have
  // the shorter HTTP_REQUEST_TIMEOUT_MS (parseBody in pipeline.ts), which Node cannot set per route.
  server.requestTimeout = config.httpUploadTimeoutMs;
  server.keepAliveTimeout = config.httpKeepAliveTimeoutMs;
  return server;
}

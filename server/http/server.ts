/** The HTTP server around the app: the one place its timeouts are set (server/main.ts and the tests use it). */
import { createServer, IncomingMessage, type RequestListener, type Server, ServerResponse } from 'node:http';
import type { Config } from '../config.ts';

export type ServerTimeouts = Pick<Config, 'httpHeadersTimeoutMs' | 'httpUploadTimeoutMs' | 'httpKeepAliveTimeoutMs'>;

/** An express app: a request listener with the prototypes it gives its requests and responses. */
type AppListener = RequestListener & { request?: object; response?: object };

/** The classes made for each app (messageClasses), so that its prototypes are replaced once. */
const classesOf = new WeakMap<object, MessageClasses>();

interface MessageClasses {
  IncomingMessage: typeof IncomingMessage;
  ServerResponse: typeof ServerResponse;
}

/**
 * The request and response classes for the server of `app`. express swaps the prototype of every
 * request and response for its own (`app.request`, `app.response`) when it receives them
 * (Object.setPrototypeOf in app.handle), after Node's HTTP server has built and used them. Every
 * later access to those objects in Node's internals then misses its inline caches. On a small read
 * that cost more than the rest of express: an express app doing nothing but call the bench's
 * independent baseline answered GET /front at 0.65× its req/s with 1.8× its CPU per request, and
 * at 0.92× and 1.1× with this; the full server gained 15–35 % req/s on the bench's reads.
 *
 * Here each app gets a subclass of Node's request and of its response, whose prototype inherits
 * from the app's, and the app's `request` and `response` become those prototypes: the objects
 * are built with them from the start, so the swap changes nothing, and as subclasses they keep
 * the layout V8 gives Node's own (fast properties). Objects made otherwise with the app's
 * prototype, by calling Node's constructors as functions on them, went to dictionary mode while
 * Node built them, and `Reflect.construct` with a new target made V8 build new maps on every
 * request. Any other listener gets Node's own classes.
 */
export function messageClasses(app: AppListener): MessageClasses {
  if (!app.request || !app.response) return { IncomingMessage, ServerResponse };
  const made = classesOf.get(app);
  if (made) return made;
  class AppRequest extends IncomingMessage {}
  class AppResponse<Request extends IncomingMessage = IncomingMessage> extends ServerResponse<Request> {}
  Object.setPrototypeOf(AppRequest.prototype, app.request);
  Object.setPrototypeOf(AppResponse.prototype, app.response);
  app.request = AppRequest.prototype;
  app.response = AppResponse.prototype;
  const classes = { IncomingMessage: AppRequest, ServerResponse: AppResponse };
  classesOf.set(app, classes);
  return classes;
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

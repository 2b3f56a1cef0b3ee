/** The HTTP server around the app: the one place its timeouts are set (server/main.ts and the tests use it). */
import { createServer, type RequestListener, type Server } from 'node:http';
import type { Config } from '../config.ts';

export type ServerTimeouts = Pick<Config, 'httpHeadersTimeoutMs' | 'httpUploadTimeoutMs' | 'httpKeepAliveTimeoutMs'>;

export function createHttpServer(app: RequestListener, config: ServerTimeouts): Server {
  // Node checks the headers and request deadlines of open connections on this interval (30 s by
  // default, which would let a 10 s deadline run to 40 s).
  const server = createServer({ connectionsCheckingInterval: 1000 }, app);
  server.headersTimeout = config.httpHeadersTimeoutMs;
  // The whole request, on every route: the signed upload route's bound. The other routes' bodies have
  // the shorter HTTP_REQUEST_TIMEOUT_MS (parseBody in pipeline.ts), which Node cannot set per route.
  server.requestTimeout = config.httpUploadTimeoutMs;
  server.keepAliveTimeout = config.httpKeepAliveTimeoutMs;
  return server;
}

import { randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { RequestHandler } from 'express';
import type { Logger } from 'pino';
import { pinoHttp } from 'pino-http';

const SANE_REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

/** Request id (echoed from a sane X-Request-Id, otherwise generated) and one JSON log line per request. */
export function requestLogging(logger: Logger): RequestHandler[] {
  const http = pinoHttp({
    logger,
    genReqId: (req: IncomingMessage, res: ServerResponse) => {
      const incoming = req.headers['x-request-id'];
      const id = typeof incoming === 'string' && SANE_REQUEST_ID.test(incoming) ? incoming : randomUUID();
      res.setHeader('X-Request-Id', id);
      return id;
    },
    // Only method, path and status: headers (and with them API keys) are never logged.
    serializers: {
      req: (req: { id: string; method: string; url: string }) => ({ id: req.id, method: req.method, path: req.url.split('?')[0] }),
      res: (res: { statusCode: number }) => ({ statusCode: res.statusCode }),
    },
    customLogLevel: (_req, res, err) => (err || res.statusCode >= 500 ? 'error' : 'info'),
  });
  const attach: RequestHandler = (req, res, next) => {
    res.locals.log = req.log;
    res.locals.requestId = String(req.id);
    next();
  };
  return [http as unknown as RequestHandler, attach];
}

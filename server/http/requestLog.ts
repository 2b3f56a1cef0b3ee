import { randomUUID } from 'node:crypto';
import type { RequestHandler } from 'express';
import type { Logger } from 'pino';
import type { KeyActor } from '../core/context.ts';

const SANE_REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

/** Load balancers and orchestrators call these every few seconds: their lines would drown the rest. */
const PROBE_PATHS = new Set(['/healthz', '/readyz', '/metrics']);

/**
 * Request id (echoed from a sane X-Request-Id, otherwise generated) and one JSON log line per
 * finished request: id, method, path (no query string), status, duration and the account — never
 * headers, so never API keys. Health and readiness probes and metrics scrapes are logged at debug
 * (a failing readiness check logs its own warning when the state changes; a 500 stays an error).
 * The per-request child logger is created on the first read of res.locals.log; the dispatcher and
 * the error handler read it for every request they handle.
 */
export function requestLogging(logger: Logger): RequestHandler {
  return (req, res, next) => {
    const incoming = req.headers['x-request-id'];
    const id = typeof incoming === 'string' && SANE_REQUEST_ID.test(incoming) ? incoming : randomUUID();
    res.setHeader('X-Request-Id', id);
    const started = process.hrtime.bigint();
    let child: Logger | undefined;
    res.locals.requestId = id;
    Object.defineProperty(res.locals, 'log', {
      configurable: true,
      enumerable: true,
      get: () => (child ??= logger.child({ reqId: id })),
    });
    res.on('finish', () => {
      const auth = res.locals.auth as KeyActor | undefined;
      const entry = {
        reqId: id,
        req: { method: req.method, path: req.path },
        res: { statusCode: res.statusCode },
        responseTime: Number(process.hrtime.bigint() - started) / 1e6,
        ...(auth ? { userId: auth.accountId, keyId: auth.keyId } : {}),
      };
      const probe = PROBE_PATHS.has(req.path);
      if (res.statusCode >= 500 && !(probe && res.statusCode === 503)) logger.error(entry, 'request failed');
      else if (probe) logger.debug(entry, 'request completed');
      else logger.info(entry, 'request completed');
    });
    next();
  };
}

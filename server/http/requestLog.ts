import { randomUUID } from 'node:crypto';
import type { RequestHandler } from 'express';
import type { Logger } from 'pino';
import type { KeyActor } from '../core/context.ts';
import type { Metrics } from '../metrics.ts';
import type { RateLimitDecision } from './rateLimit.ts';
import type { MatchedOperation } from './spec.ts';

const SANE_REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

/** Load balancers and orchestrators call these every few seconds: their lines would drown the rest. */
const PROBE_PATHS = new Set(['/healthz', '/readyz', '/metrics']);

/**
 * What the pipeline keeps about one request (express's `res.locals`): the request id, the logger
 * and, as the steps find them, the operation, the API key and the rate-limit decision. A class, so
 * every request's object has the same shape; the child logger (bound to the request id) is created
 * on the first read of `log`, which most requests never make.
 */
export class RequestLocals {
  operation: MatchedOperation | undefined = undefined;
  auth: KeyActor | undefined = undefined;
  rateLimit: RateLimitDecision | undefined = undefined;
  private child: Logger | undefined = undefined;

  constructor(
    private readonly logger: Logger,
    readonly requestId: string,
  ) {}

  get log(): Logger {
    this.child ??= this.logger.child({ reqId: this.requestId });
    return this.child;
  }
}

/**
 * Request id (echoed from a sane X-Request-Id, otherwise generated), and per finished request one
 * JSON log line and the request's metrics (count and duration under its operationId, `unmatched`
 * outside the contract). The line holds id, method, path (no query string), status, duration and
 * the account — never headers, so never API keys. Health and readiness probes and metrics scrapes
 * are logged at debug (a failing readiness check logs its own warning when the state changes; a 500
 * stays an error). One `finish` listener does both: each listener is a closure per request.
 *
 * The line is written by a child of the logger without its redaction: it holds only the fields
 * above, which name no secret, and redacting it (pino copies the object to censor its paths) cost
 * more than writing it.
 */
export function requestLogging(logger: Logger, metrics: Metrics): RequestHandler {
  const access = logger.child({}, { redact: [] });
  return (req, res, next) => {
    const incoming = req.headers['x-request-id'];
    const id = typeof incoming === 'string' && SANE_REQUEST_ID.test(incoming) ? incoming : randomUUID();
    res.setHeader('X-Request-Id', id);
    const started = process.hrtime.bigint();
    const method = req.method; // before HEAD is served as GET
    const locals = new RequestLocals(logger, id);
    res.locals = locals as unknown as typeof res.locals;
    res.on('finish', () => {
      const nanoseconds = Number(process.hrtime.bigint() - started);
      const status = res.statusCode;
      metrics.observeRequest(locals.operation?.operation.operationId ?? 'unmatched', method, status, nanoseconds / 1e9);
      const auth = locals.auth;
      const path = req.path;
      const entry = {
        reqId: id,
        req: { method: req.method, path },
        res: { statusCode: status },
        responseTime: nanoseconds / 1e6,
        ...(auth ? { userId: auth.accountId, keyId: auth.keyId } : {}),
      };
      const probe = PROBE_PATHS.has(path);
      if (status >= 500 && !(probe && status === 503)) access.error(entry, 'request failed');
      else if (probe) access.debug(entry, 'request completed');
      else access.info(entry, 'request completed');
    });
    next();
  };
}

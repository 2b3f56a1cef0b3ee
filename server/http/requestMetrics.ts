import type { RequestHandler } from 'express';
import type { Metrics } from '../metrics.ts';
import type { MatchedOperation } from './spec.ts';

/** Counts and times every response under its operationId (`unmatched` outside the contract). */
export function requestMetrics(metrics: Metrics): RequestHandler {
  return (req, res, next) => {
    const started = process.hrtime.bigint();
    const method = req.method; // before HEAD is served as GET
    res.on('finish', () => {
      const operation =
        (res.locals as { operation?: MatchedOperation }).operation?.operation.operationId ?? 'unmatched';
      metrics.observeRequest(operation, method, res.statusCode, Number(process.hrtime.bigint() - started) / 1e9);
    });
    next();
  };
}

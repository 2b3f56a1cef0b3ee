/** createApp(deps): the express app with the whole middleware chain, without listening. */
import express, { type Express } from 'express';
import type { AppDeps } from './deps.ts';
import { handlers, keyedInWrite } from './handlers.ts';
import { chain } from './http/chain.ts';
import { cors } from './http/cors.ts';
import {
  authenticate,
  checkHandlerCoverage,
  dispatch,
  errorHandler,
  parseBody,
  requireBody,
  resolveOperation,
} from './http/pipeline.ts';
import { inputHygiene } from './http/inputHygiene.ts';
import { requestLogging } from './http/requestLog.ts';
import { loadBundledSpec, OperationIndex } from './http/spec.ts';
import { createValidator } from './http/validation.ts';

export function createApp(deps: AppDeps): Express {
  const spec = loadBundledSpec();
  const index = new OperationIndex(spec);
  checkHandlerCoverage(index, handlers);

  const app = express();
  app.disable('x-powered-by');
  app.set('etag', false);
  app.use(
    chain([
      requestLogging(deps.logger, deps.metrics),
      cors(deps.config.corsOrigins),
      resolveOperation(index),
      authenticate(deps),
      parseBody({
        jsonBytes: deps.config.bodyLimitBytes,
        rawBytes: deps.config.mediaMaxBytes,
        timeoutMs: deps.config.httpRequestTimeoutMs,
      }),
      requireBody(),
      inputHygiene(),
      createValidator(spec, deps.config.validateResponses),
      dispatch(handlers, deps, keyedInWrite),
    ]),
  );
  app.use(errorHandler(deps));
  return app;
}

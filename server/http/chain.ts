import type { NextFunction, Request, RequestHandler, Response } from 'express';

/**
 * Middleware run in order, as `app.use(a, b, c)` would run them, without express's router between
 * them: the router matches the path of every layer on every `next()` (about a tenth of a simple
 * read's CPU for the dozen steps of the pipeline). A step that throws, calls `next(err)` or returns
 * a rejected promise ends the chain with that error, which goes on to express's error handlers.
 */
export function chain(steps: RequestHandler[]): RequestHandler {
  return (req, res, next) => runChain(steps, req, res, next);
}

/** Runs `steps` in order, then `done` (with the error, if one ended the chain). */
export function runChain(steps: RequestHandler[], req: Request, res: Response, done: NextFunction): void {
  let i = 0;
  const step = (err?: unknown): void => {
    if (err) return done(err);
    const handler = steps[i++];
    if (!handler) return done();
    try {
      const result = handler(req, res, step) as unknown;
      if (result instanceof Promise) result.catch(done);
    } catch (e) {
      done(e);
    }
  };
  step();
}

import type { RequestHandler } from 'express';

/** CORS for the configured origins only (CORS_ORIGINS); without it no CORS headers are sent. */
export function cors(origins: string[]): RequestHandler {
  const allowed = new Set(origins);
  return (req, res, next) => {
    const origin = req.headers.origin;
    if (!origin || (!allowed.has(origin) && !allowed.has('*'))) return next();
    res.set({
      'Access-Control-Allow-Origin': allowed.has('*') ? '*' : origin,
      'Access-Control-Expose-Headers':
        'X-Request-Id, RateLimit-Limit, RateLimit-Remaining, RateLimit-Reset, Retry-After, ETag, Deprecation, Sunset, Link, Warning, WWW-Authenticate',
      Vary: 'Origin',
    });
    if (req.method === 'OPTIONS' && req.headers['access-control-request-method']) {
      res.set({
        'Access-Control-Allow-Methods': 'GET, POST, PUT, PATCH, DELETE',
        'Access-Control-Allow-Headers': 'Authorization, Content-Type, If-None-Match, X-Request-Id',
        'Access-Control-Max-Age': '600',
      });
      res.status(204).end();
      return;
    }
    next();
  };
}

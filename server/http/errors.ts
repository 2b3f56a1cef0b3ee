/**
 * The HTTP edge's error type, and the mapping of the services' domain errors
 * (server/core/errors.ts) to it. The error middleware turns both into `{ code, message }`, plus
 * `details` for invalid input.
 */
import type { components } from '../../generated/api.d.ts';
import { API_KEY_UNAUTHORIZED_MESSAGE, DomainError, type DomainErrorKind, type ErrorCode } from '../core/errors.ts';

export type { ErrorCode };
export { API_KEY_UNAUTHORIZED_MESSAGE };

/** One problem with a request's input: where it is, the rule it breaks, in words. */
export type ValidationProblem = components['schemas']['ValidationProblem'];

/** The contract's cap on `details`: a request with more problems lists the first ones. */
export const MAX_PROBLEMS = 100;

export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: ErrorCode,
    message: string,
    readonly headers: Record<string, string> = {},
    readonly details?: ValidationProblem[],
  ) {
    super(message);
    this.name = 'ApiError';
  }
}

/** The body of an error response: the envelope `{ code, message }`, with `details` when there are any. */
export function errorEnvelope(err: ApiError): string {
  return JSON.stringify({ code: err.code, message: err.message, details: err.details });
}

/** `pointer` (a JSON Pointer) extended by one reference token, escaped as RFC 6901 asks. */
export function pointerTo(pointer: string, key: string | number): string {
  return `${pointer}/${String(key).replace(/~/g, '~0').replace(/\//g, '~1')}`;
}

/** A 400 for invalid input: `message` describes the first problem, `details` lists them all. */
export function invalidInput(
  problems: ValidationProblem[],
  message = problems[0]?.message ?? 'Invalid request',
): ApiError {
  return new ApiError(
    400,
    'BAD_REQUEST',
    message,
    {},
    problems.length > 0 ? problems.slice(0, MAX_PROBLEMS) : undefined,
  );
}

export const unauthorized = (message: string) => new ApiError(401, 'UNAUTHORIZED', message);

/** The realm a 401 names: which credential the operation takes (an API key, the admin or the metrics token). */
export type AuthRealm = 'api' | 'admin' | 'metrics';

/**
 * The challenge every 401 carries in `WWW-Authenticate` (RFC 9110 §11.6.1), added by the error
 * handler whatever threw it: the Bearer scheme with the operation's realm, and
 * `error="invalid_token"` (RFC 6750 §3.1) only when the request presented a bearer token that was
 * refused — a request without one gets no error code, as RFC 6750 §3.1 asks.
 */
export function bearerChallenge(realm: AuthRealm, tokenPresented: boolean): string {
  return `Bearer realm="${realm}"${tokenPresented ? ', error="invalid_token"' : ''}`;
}
export const preconditionFailed = (message: string) => new ApiError(503, 'PRECONDITION_FAILED', message);

export const ADMIN_UNAUTHORIZED_MESSAGE = 'Missing or invalid admin token. Use Authorization: Bearer <ADMIN_TOKEN>.';
/** A server without an admin token (ADMIN_TOKEN unset on PostgreSQL) answers every admin operation with this (503). */
export const ADMIN_DISABLED_MESSAGE =
  'The admin API is disabled: set ADMIN_TOKEN (at least 16 characters) to enable /admin/v1';
export const METRICS_UNAUTHORIZED_MESSAGE =
  'Missing or invalid metrics token. Use Authorization: Bearer <METRICS_TOKEN>.';

const BY_KIND: Record<DomainErrorKind, { status: number; code: ErrorCode }> = {
  invalid: { status: 400, code: 'BAD_REQUEST' },
  unauthenticated: { status: 401, code: 'UNAUTHORIZED' },
  forbidden: { status: 403, code: 'FORBIDDEN' },
  not_found: { status: 404, code: 'NOT_FOUND' },
  conflict: { status: 409, code: 'CONFLICT' },
  unsupported_media: { status: 415, code: 'UNSUPPORTED_MEDIA_TYPE' },
  unavailable: { status: 503, code: 'PRECONDITION_FAILED' },
};

/** The status and envelope of a service's domain error. */
export function fromDomainError(err: DomainError): ApiError {
  const { status, code } = BY_KIND[err.kind];
  return new ApiError(status, err.code ?? code, err.message);
}

/**
 * Domain errors: what a service throws when a request cannot be carried out. They say what went
 * wrong in domain terms (invalid input, not found, conflict, …); the HTTP edge
 * (server/http/errors.ts) maps each kind to a status and the `{ code, message }` envelope, so
 * services never know about HTTP.
 */
import type { components } from '../../generated/api.d.ts';

export type ErrorCode = components['schemas']['ErrorCode'];

export type DomainErrorKind =
  /** The input breaks a rule (400). */
  | 'invalid'
  /** No valid credentials (401). */
  | 'unauthenticated'
  /** Credentials are valid but do not allow this, or a plan limit is reached (403). */
  | 'forbidden'
  /** The target does not exist, or the caller may not know it exists (404). */
  | 'not_found'
  /** The target changed meanwhile, or the input clashes with existing data (409). */
  | 'conflict'
  /** A body whose bytes are not of an accepted media type (415). */
  | 'unsupported_media'
  /** Something the service depends on (database, object storage) is not available (503). */
  | 'unavailable';

export class DomainError extends Error {
  constructor(
    readonly kind: DomainErrorKind,
    message: string,
    /** A more specific envelope code than the kind's default (e.g. NOTE_LIMIT_REACHED for a 403). */
    readonly code?: ErrorCode,
  ) {
    super(message);
    this.name = 'DomainError';
  }
}

export const badRequest = (message: string) => new DomainError('invalid', message);
export const unauthorized = (message: string) => new DomainError('unauthenticated', message);
export const forbidden = (message: string) => new DomainError('forbidden', message);
export const notFound = (message: string) => new DomainError('not_found', message);
export const conflict = (message: string) => new DomainError('conflict', message);
export const unsupportedMediaType = (message: string) => new DomainError('unsupported_media', message);
export const unavailable = (message: string) => new DomainError('unavailable', message);
/** A plan limit on notes (403 NOTE_LIMIT_REACHED). */
export const noteLimitReached = (message: string) => new DomainError('forbidden', message, 'NOTE_LIMIT_REACHED');

export const API_KEY_UNAUTHORIZED_MESSAGE = 'Missing or invalid API key. Use Authorization: Bearer <token>.';

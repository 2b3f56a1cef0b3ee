/** The one error type handlers and services throw; the error middleware turns it into `{ code, message }`. */
import type { components } from '../../generated/api.d.ts';

export type ErrorCode = components['schemas']['ErrorCode'];

export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: ErrorCode,
    message: string,
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
    this.name = 'ApiError';
  }
}

export const badRequest = (message: string) => new ApiError(400, 'BAD_REQUEST', message);
export const unauthorized = (message: string) => new ApiError(401, 'UNAUTHORIZED', message);
export const forbidden = (message: string) => new ApiError(403, 'FORBIDDEN', message);
export const notFound = (message: string) => new ApiError(404, 'NOT_FOUND', message);
export const conflict = (message: string) => new ApiError(409, 'CONFLICT', message);
export const preconditionFailed = (message: string) => new ApiError(503, 'PRECONDITION_FAILED', message);

export const API_KEY_UNAUTHORIZED_MESSAGE = 'Missing or invalid API key. Use Authorization: Bearer <token>.';
export const ADMIN_UNAUTHORIZED_MESSAGE = 'Missing or invalid admin token. Use Authorization: Bearer <ADMIN_TOKEN>.';
export const METRICS_UNAUTHORIZED_MESSAGE = 'Missing or invalid metrics token. Use Authorization: Bearer <METRICS_TOKEN>.';

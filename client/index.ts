/**
 * Typed client for the Account Data API, built on openapi-fetch with the generated `paths`.
 *
 *   const api = createApiClient({ baseUrl: 'http://localhost:3000', apiKey: process.env.API_KEY! });
 *   const { data, error } = await api.GET('/api/v1/appearance');
 */
import createClient from 'openapi-fetch';
import type { Client, Middleware } from 'openapi-fetch';
import type { components, operations, paths } from '../generated/api.d.ts';

export type { components, operations, paths };
export {
  retryingFetch,
  parseRetryAfter,
  IDEMPOTENT_METHODS,
  RETRY_STATUSES,
  type RetryOptions,
  type RetryEvent,
} from './retry.ts';
export {
  subscribe,
  SubscriptionRefused,
  type Event,
  type EventStreamReset,
  type StreamMessage,
  type SubscribeOptions,
} from './events.ts';
export {
  verifyWebhook,
  WebhookVerificationError,
  type VerifyWebhookOptions,
  type WebhookPayload,
  type WebhookPing,
} from './webhooks.ts';
export type ApiClient = Client<paths>;
export type ApiError = components['schemas']['Error'];
/** One entry of `ApiError['details']`: a problem with the request's input and where it is. */
export type ValidationProblem = components['schemas']['ValidationProblem'];

export interface ApiClientOptions {
  /** Server origin, e.g. http://localhost:3000 (paths already carry /api/v1). */
  baseUrl: string;
  /** API key (adk_…) for /api/v1, or the operator token for /admin/v1. */
  apiKey: string;
  /** Custom fetch (tests, proxies, instrumentation, or `retryingFetch()` for 429/503 retries). */
  fetch?: typeof globalThis.fetch;
}

function bearer(token: string): Middleware {
  return {
    onRequest({ request }) {
      request.headers.set('Authorization', `Bearer ${token}`);
      return request;
    },
  };
}

export function createApiClient(options: ApiClientOptions): ApiClient {
  const client = createClient<paths>({
    baseUrl: options.baseUrl.replace(/\/+$/, ''),
    ...(options.fetch ? { fetch: options.fetch } : {}),
  });
  client.use(bearer(options.apiKey));
  return client;
}

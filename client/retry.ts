/**
 * A `fetch` wrapper that retries what the API asks callers to retry: 429 `RATE_LIMITED` (after its
 * `Retry-After`) and 503 `PRECONDITION_FAILED` (database or storage unavailable; backoff). Pass it
 * as the client's `fetch`:
 *
 *   const api = createApiClient({ baseUrl, apiKey, fetch: retryingFetch({ maxAttempts: 4 }) });
 *
 * Idempotent methods are retried, and POST: each POST is sent with an `Idempotency-Key` (the
 * caller's, or a new UUID) that every attempt repeats, so the server runs it once whatever the
 * retries. Such a request is also retried after a network error, and after the 409 that says the
 * same key is still being processed. PATCH is sent once: a 503 may come after a write began.
 */

export interface RetryEvent {
  /** The attempt that just failed (1 = the first request). */
  attempt: number;
  /** How long the wrapper waits before the next attempt. */
  delayMs: number;
  /** The 429, 503 or in-flight 409 response (its body is discarded); undefined after a network error. */
  response: Response | undefined;
  /** The network error, when the attempt got no response (retried only for a request with an Idempotency-Key). */
  error?: unknown;
  request: Request;
}

export interface RetryOptions {
  /** Attempts in total, the first included (default 3; 1 turns retries off). */
  maxAttempts?: number;
  /** Backoff before the first retry when the response has no `Retry-After`; doubled each time, with jitter (default 500 ms). */
  baseDelayMs?: number;
  /** Longest wait. A `Retry-After` beyond it is not waited for: the response is returned as it is (default 60 000 ms). */
  maxDelayMs?: number;
  /** Methods that are retried (default GET, HEAD, OPTIONS, PUT, DELETE, and POST with `idempotencyKeys`). Others are sent once. */
  methods?: readonly string[];
  /**
   * Send every POST with an `Idempotency-Key` (a new UUID unless the request has one), the same on
   * every attempt, and retry it (default true). `false`: POST is retried only when `methods` lists it,
   * and without a key.
   */
  idempotencyKeys?: boolean;
  /** The fetch to wrap (default: `globalThis.fetch` at call time). */
  fetch?: typeof globalThis.fetch;
  /** Called before each wait, e.g. for logging. */
  onRetry?: (event: RetryEvent) => void;
}

export const RETRY_STATUSES: readonly number[] = [429, 503];
export const IDEMPOTENT_METHODS: readonly string[] = ['GET', 'HEAD', 'OPTIONS', 'PUT', 'DELETE'];
const IDEMPOTENCY_KEY_HEADER = 'Idempotency-Key';

/** Milliseconds a `Retry-After` header asks for (delay-seconds or HTTP-date), or undefined when absent or unreadable. */
export function parseRetryAfter(value: string | null, now: number = Date.now()): number | undefined {
  if (value === null) return undefined;
  const text = value.trim();
  if (/^\d+$/.test(text)) return Number(text) * 1000;
  // Every HTTP-date form starts with a day name; Date.parse alone would also accept "-1" or "1.5".
  if (!/^[A-Za-z]{3}/.test(text)) return undefined;
  const at = Date.parse(text);
  return Number.isNaN(at) ? undefined : Math.max(0, at - now);
}

export function retryingFetch(options: RetryOptions = {}): typeof globalThis.fetch {
  const maxAttempts = Math.max(1, Math.floor(options.maxAttempts ?? 3));
  const baseDelayMs = options.baseDelayMs ?? 500;
  const maxDelayMs = options.maxDelayMs ?? 60_000;
  const keyed = options.idempotencyKeys ?? true;
  const methods = new Set(
    (options.methods ?? (keyed ? [...IDEMPOTENT_METHODS, 'POST'] : IDEMPOTENT_METHODS)).map((m) => m.toUpperCase()),
  );

  return async (input, init) => {
    const send: typeof globalThis.fetch = options.fetch ?? globalThis.fetch;
    const method = (init?.method ?? (input instanceof Request ? input.method : 'GET')).toUpperCase();
    if (maxAttempts === 1 || !methods.has(method)) return send(input, init);
    // The template is never sent itself: every attempt gets a clone, so a request body can be sent again.
    const template = new Request(input, init);
    if (keyed && method === 'POST' && !template.headers.has(IDEMPOTENCY_KEY_HEADER))
      template.headers.set(IDEMPOTENCY_KEY_HEADER, globalThis.crypto.randomUUID());
    // Only a request the server runs once may be sent again after a network error or an in-flight 409.
    const safeToRepeat = template.headers.has(IDEMPOTENCY_KEY_HEADER);
    // Forward the caller's other init fields (e.g. undici's `dispatcher`), but the body only through the clone.
    const { body: _body, headers: _headers, ...rest } = init ?? {};
    for (let attempt = 1; ; attempt++) {
      let response: Response | undefined;
      let error: unknown;
      try {
        response = await send(template.clone(), rest);
      } catch (err) {
        if (attempt >= maxAttempts || !safeToRepeat || template.signal.aborted) throw err;
        error = err;
      }
      if (response) {
        const inFlight = safeToRepeat && response.status === 409 && response.headers.has('Retry-After');
        if (attempt >= maxAttempts || !(RETRY_STATUSES.includes(response.status) || inFlight)) return response;
      }
      const asked = parseRetryAfter(response?.headers.get('Retry-After') ?? null);
      if (response && asked !== undefined && asked > maxDelayMs) return response;
      const backoff = Math.min(maxDelayMs, baseDelayMs * 2 ** (attempt - 1));
      const delayMs = asked ?? Math.round(backoff / 2 + (Math.random() * backoff) / 2);
      options.onRetry?.({ attempt, delayMs, response, request: template, ...(response ? {} : { error }) });
      await response?.body?.cancel().catch(() => {});
      await sleep(delayMs, template.signal);
    }
  };
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) return reject(signal.reason);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal.reason);
    };
    const timer = setTimeout(() => {
      signal.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal.addEventListener('abort', onAbort, { once: true });
  });
}

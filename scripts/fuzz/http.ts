/**
 * Raw HTTP for the fuzzer: requests are built as text and bytes (duplicated query parameters,
 * malformed JSON, wrong or missing content types), which a typed client cannot express.
 */

export interface FuzzRequest {
  method: string;
  /** The path as sent, already percent-encoded. */
  path: string;
  /** Query pairs, encoded on send; duplicates allowed. */
  query: Array<[string, string]>;
  /** When set, sent verbatim after `?` instead of `query`. */
  rawQuery?: string;
  headers: Record<string, string>;
  /** Bytes of the body; a Buffer so fetch adds no Content-Type of its own. */
  body?: Buffer;
}

export interface FuzzResponse {
  status: number;
  contentType: string;
  headers: Record<string, string>;
  body: Buffer;
  ms: number;
}

export function queryString(req: FuzzRequest): string {
  if (req.rawQuery !== undefined) return req.rawQuery;
  return req.query.map(([k, v]) => `${encodeURIComponent(k)}=${encodeURIComponent(v)}`).join('&');
}

export function urlOf(req: FuzzRequest): string {
  const q = queryString(req);
  return q ? `${req.path}?${q}` : req.path;
}

/** Thrown when the client itself refuses a request (an invalid header value, say): not sent. */
export class NotSendable extends Error {}

export class TimedOut extends Error {}

export async function send(baseUrl: string, req: FuzzRequest, timeoutMs = 15_000): Promise<FuzzResponse> {
  const started = performance.now();
  let response: Response;
  try {
    response = await fetch(baseUrl + urlOf(req), {
      method: req.method,
      headers: req.headers,
      body: req.body ? new Uint8Array(req.body) : undefined,
      redirect: 'manual',
      signal: AbortSignal.timeout(timeoutMs),
    });
  } catch (err) {
    if (err instanceof Error && (err.name === 'TimeoutError' || err.name === 'AbortError'))
      throw new TimedOut(`no response within ${timeoutMs} ms`);
    // undici refuses some header values, headers (Expect) and URLs before anything is sent.
    if (err instanceof TypeError && !/fetch failed/.test(err.message)) throw new NotSendable(err.message);
    const cause = (err as { cause?: { code?: string; message?: string } }).cause;
    if (cause?.code === 'UND_ERR_NOT_SUPPORTED' || cause?.code === 'UND_ERR_INVALID_ARG')
      throw new NotSendable(cause.message ?? cause.code);
    throw err;
  }
  const body = Buffer.from(await response.arrayBuffer());
  const headers: Record<string, string> = {};
  response.headers.forEach((v, k) => {
    headers[k] = v;
  });
  return {
    status: response.status,
    contentType: (response.headers.get('content-type') ?? '').split(';')[0]!.trim().toLowerCase(),
    headers,
    body,
    ms: performance.now() - started,
  };
}

/** JSON helper for fixtures and probes (not for fuzzed requests). */
export async function callJson(
  baseUrl: string,
  method: string,
  path: string,
  token: string | undefined,
  body?: unknown,
): Promise<{ status: number; json: unknown }> {
  const headers: Record<string, string> = {};
  if (token) headers.authorization = `Bearer ${token}`;
  if (body !== undefined) headers['content-type'] = 'application/json';
  const res = await send(baseUrl, {
    method,
    path,
    query: [],
    headers,
    body: body === undefined ? undefined : Buffer.from(JSON.stringify(body)),
  });
  let json: unknown;
  try {
    json = res.body.length ? JSON.parse(res.body.toString('utf8')) : undefined;
  } catch {
    json = res.body.toString('utf8');
  }
  return { status: res.status, json };
}

/**
 * The bench's body-equality check: the same requests to the full server and to the independent
 * baseline must get the same status, the same JSON (compared parsed, deeply, key order included;
 * then byte for byte) and the same relevant headers. Pages are followed through their nextCursor
 * (from the full server's answer), so every page of the awkward account is compared.
 */

export interface CheckRequest {
  /** What the request is about, for the report. */
  label: string;
  path: string;
  /** The bearer secret; null sends no Authorization header, a string that is not a key sends it as is. */
  key: string | null;
  /** Follow nextCursor to the following pages (members page or front history), at most this many. */
  followPages?: number;
}

export interface CheckOutcome {
  /** Requests compared (followed pages included). */
  compared: number;
  /** One readable block per request that differed. */
  differences: string[];
}

interface Answer {
  status: number;
  headers: Headers;
  text: string;
}

/** Headers the two servers must agree on: exactly, or only on being present. */
const SAME_VALUE = ['content-type', 'ratelimit-limit', 'ratelimit-policy', 'www-authenticate', 'x-request-id'];
const SAME_PRESENCE = ['ratelimit-remaining', 'ratelimit-reset', 'retry-after'];

let sequence = 0;

async function ask(baseUrl: string, path: string, key: string | null, requestId: string): Promise<Answer> {
  const headers: Record<string, string> = { 'x-request-id': requestId };
  if (key !== null) headers.authorization = `Bearer ${key}`;
  const res = await fetch(baseUrl + path, { headers });
  return { status: res.status, headers: res.headers, text: await res.text() };
}

const show = (v: unknown): string => {
  const s = v === undefined ? 'undefined' : JSON.stringify(v);
  return s.length > 160 ? `${s.slice(0, 157)}...` : s;
};

/** Differences between two parsed JSON values, key order included, at most `max`. */
export function jsonDifferences(a: unknown, b: unknown, path = '$', out: string[] = [], max = 12): string[] {
  if (out.length >= max) return out;
  const kind = (v: unknown) => (v === null ? 'null' : Array.isArray(v) ? 'array' : typeof v);
  if (kind(a) !== kind(b)) {
    out.push(`${path}: full ${show(a)}, independent ${show(b)}`);
  } else if (Array.isArray(a) && Array.isArray(b)) {
    if (a.length !== b.length) out.push(`${path}: full has ${a.length} items, independent ${b.length}`);
    for (let i = 0; i < Math.min(a.length, b.length); i++) jsonDifferences(a[i], b[i], `${path}[${i}]`, out, max);
  } else if (kind(a) === 'object') {
    const ao = a as Record<string, unknown>;
    const bo = b as Record<string, unknown>;
    const ak = Object.keys(ao);
    const bk = Object.keys(bo);
    if (ak.join('\u0000') !== bk.join('\u0000'))
      out.push(`${path}: keys full [${ak.join(', ')}], independent [${bk.join(', ')}]`);
    for (const k of ak) if (k in bo) jsonDifferences(ao[k], bo[k], `${path}.${k}`, out, max);
  } else if (a !== b) {
    out.push(`${path}: full ${show(a)}, independent ${show(b)}`);
  }
  return out;
}

function compare(full: Answer, independent: Answer): string[] {
  const out: string[] = [];
  if (full.status !== independent.status) out.push(`status: full ${full.status}, independent ${independent.status}`);
  for (const name of SAME_VALUE) {
    const a = full.headers.get(name);
    const b = independent.headers.get(name);
    if (a !== b) out.push(`header ${name}: full ${show(a)}, independent ${show(b)}`);
  }
  for (const name of SAME_PRESENCE) {
    const a = full.headers.has(name);
    const b = independent.headers.has(name);
    if (a !== b)
      out.push(`header ${name}: ${a ? 'only the full server sends it' : 'only the independent baseline sends it'}`);
  }
  let parsed: [unknown, unknown] | undefined;
  try {
    parsed = [JSON.parse(full.text), JSON.parse(independent.text)];
  } catch {
    out.push(`body is not JSON: full ${show(full.text)}, independent ${show(independent.text)}`);
  }
  if (parsed) {
    const body = jsonDifferences(parsed[0], parsed[1]);
    out.push(...body);
    if (body.length === 0 && full.text !== independent.text) out.push('body: the same JSON value but different bytes');
  }
  return out;
}

/** The path of the page after `body` (a members page or a front-history page), or undefined on the last page. */
function nextPagePath(path: string, body: unknown): string | undefined {
  const next = (body as { nextCursor?: unknown } | null)?.nextCursor;
  if (next === null || next === undefined) return undefined;
  const url = new URL(path, 'http://x');
  if (typeof next === 'string') {
    url.searchParams.set('cursor', next);
  } else {
    const cursor = next as { startedAt: number; id: string };
    url.searchParams.set('cursorStartedAt', String(cursor.startedAt));
    url.searchParams.set('cursorId', cursor.id);
  }
  return url.pathname + url.search;
}

/** Sends every request (and the pages it leads to) to both servers and compares the answers. */
export async function compareServers(
  fullUrl: string,
  independentUrl: string,
  requests: CheckRequest[],
): Promise<CheckOutcome> {
  const outcome: CheckOutcome = { compared: 0, differences: [] };
  for (const request of requests) {
    let path: string | undefined = request.path;
    for (let page = 0; path !== undefined && page <= (request.followPages ?? 0); page++) {
      const requestId = `bench-check-${++sequence}`;
      const full = await ask(fullUrl, path, request.key, requestId);
      const independent = await ask(independentUrl, path, request.key, requestId);
      outcome.compared++;
      const found = compare(full, independent);
      if (found.length > 0)
        outcome.differences.push(
          `${request.label}${page > 0 ? ` (page ${page + 1})` : ''}: GET ${path}\n  ${found.join('\n  ')}`,
        );
      let body: unknown;
      try {
        body = JSON.parse(full.text);
      } catch {
        body = undefined;
      }
      path = full.status === 200 ? nextPagePath(path, body) : undefined;
    }
  }
  return outcome;
}

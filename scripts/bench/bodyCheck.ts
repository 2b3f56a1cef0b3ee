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

/** A write of the check: sent to one server, its effects read, undone, then the same to the other. */
export interface WriteCheck {
  label: string;
  method: 'POST' | 'DELETE';
  path: string;
  key: string;
  /** The body as sent (JSON text, or anything else); none when undefined. */
  body?: string;
  /** Before each server's request: bring the data to the state the write starts from. */
  before?: () => Promise<void>;
  /** After each server's request: what the write left, read back (through the full server). */
  effect?: (answer: unknown) => Promise<unknown>;
  /** After the effect is read: undo the write, so that the other server starts from the same state. */
  undo?: (answer: unknown) => Promise<void>;
}

/** How the writes' side effects are seen: the events appended after a mark, and the ids the writes created. */
export interface WriteProbe {
  /** The newest event id now. */
  mark(): Promise<number>;
  /** The account's events after the mark (type, area, actor, data), oldest first. */
  eventsSince(mark: number): Promise<unknown[]>;
  /** Ids of rows created at or after `since` (epoch ms): the ids that differ between the two servers. */
  freshIds(since: number): Promise<string[]>;
}

async function send(baseUrl: string, check: WriteCheck, requestId: string): Promise<Answer> {
  const headers: Record<string, string> = { 'x-request-id': requestId, authorization: `Bearer ${check.key}` };
  if (check.body !== undefined) headers['content-type'] = 'application/json';
  const res = await fetch(baseUrl + check.path, { method: check.method, headers, body: check.body });
  return { status: res.status, headers: res.headers, text: await res.text() };
}

/**
 * Each write to the full server and then to the independent baseline, from the same state (each
 * server's write undone before the other's): the answers compared as compareServers compares them,
 * and what each write left (`effect`) and the events it appended compared as JSON, with the ids the
 * writes created and the times from the check's start on normalised (the two servers cannot agree
 * on those).
 */
export async function compareWrites(
  fullUrl: string,
  independentUrl: string,
  checks: WriteCheck[],
  probe: WriteProbe,
): Promise<CheckOutcome> {
  const outcome: CheckOutcome = { compared: 0, differences: [] };
  const started = Date.now();
  for (const check of checks) {
    const requestId = `bench-check-${++sequence}`;
    const seen: Array<{ answer: Answer; effect: unknown; events: unknown[] }> = [];
    for (const url of [fullUrl, independentUrl]) {
      await check.before?.();
      const mark = await probe.mark();
      const answer = await send(url, check, requestId);
      let parsed: unknown;
      try {
        parsed = JSON.parse(answer.text);
      } catch {
        parsed = undefined;
      }
      const effect = check.effect && answer.status < 300 ? await check.effect(parsed) : undefined;
      const events = await probe.eventsSince(mark);
      if (answer.status < 300) await check.undo?.(parsed);
      seen.push({ answer, effect, events });
    }
    const fresh = new Set(await probe.freshIds(started));
    const normalise = (text: string) =>
      text
        .replace(/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/gi, (id) =>
          fresh.has(id.toLowerCase()) ? '00000000-0000-0000-0000-00000000000a' : id,
        )
        .replace(/\b\d{13}\b/g, (n) => (Number(n) >= started ? '1000000000000' : n));
    const [full, independent] = seen.map((s) => ({
      answer: { ...s.answer, text: normalise(s.answer.text) },
      effect: s.effect === undefined ? undefined : JSON.parse(normalise(JSON.stringify(s.effect))),
      events: JSON.parse(normalise(JSON.stringify(s.events))) as unknown[],
    })) as [
      { answer: Answer; effect: unknown; events: unknown[] },
      { answer: Answer; effect: unknown; events: unknown[] },
    ];
    outcome.compared++;
    const found = [
      ...(full.answer.status === 204 && independent.answer.status === 204
        ? compareEmpty(full.answer, independent.answer)
        : compare(full.answer, independent.answer)),
      ...jsonDifferences(full.effect, independent.effect, '$effect'),
      ...jsonDifferences(full.events, independent.events, '$events'),
    ];
    if (found.length > 0)
      outcome.differences.push(`${check.label}: ${check.method} ${check.path}\n  ${found.join('\n  ')}`);
  }
  return outcome;
}

/** Two answers without a body (204): the same headers, and no body from either. */
function compareEmpty(full: Answer, independent: Answer): string[] {
  const out = compare({ ...full, text: 'null' }, { ...independent, text: 'null' });
  if (full.text !== '' || independent.text !== '')
    out.push(`body: full ${show(full.text)}, independent ${show(independent.text)} (a 204 has none)`);
  return out;
}

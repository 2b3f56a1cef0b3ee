/**
 * `subscribe()`: the account's event stream (GET /api/v1/events, docs/events.md) as an async
 * iterable of typed messages, reconnecting after a dropped connection with `Last-Event-ID`, so
 * that within the server's retention nothing is missed and nothing comes twice.
 *
 *   const controller = new AbortController();
 *   for await (const message of subscribe({ baseUrl, apiKey, signal: controller.signal })) {
 *     if (message.kind === 'reset') reloadEverything();
 *     else if (message.event.type === 'front.changed') show(message.event.data.front);
 *   }
 */
import type { components } from '../generated/api.d.ts';

export type Event = components['schemas']['Event'];
export type EventStreamReset = components['schemas']['EventStreamReset'];

/** One message of the stream: an event, or a reset (re-read the state you keep). */
export type StreamMessage = { kind: 'event'; event: Event } | { kind: 'reset'; reset: EventStreamReset };

export interface SubscribeOptions {
  /** Server origin, e.g. http://localhost:3000. */
  baseUrl: string;
  apiKey: string;
  /** Start after this event id (what a previous subscription last got); without it, with the next change. */
  lastEventId?: string;
  /** Type prefixes to keep (`front.`, `member.created`). */
  types?: string[];
  /** Ends the subscription (the iterator then finishes). */
  signal?: AbortSignal;
  fetch?: typeof globalThis.fetch;
  /** Told of each dropped connection before the reconnect (default: nothing). */
  onReconnect?: (info: { lastEventId: string | undefined; error: unknown; delayMs: number }) => void;
}

/** The stream refused the subscription (401, 403, 400): reconnecting would not help. */
export class SubscriptionRefused extends Error {
  constructor(
    readonly status: number,
    readonly body: unknown,
  ) {
    super(`the event stream answered ${status}`);
    this.name = 'SubscriptionRefused';
  }
}

const DEFAULT_RETRY_MS = 2000;
const MAX_RETRY_MS = 30_000;

interface Parsed {
  id?: string;
  event?: string;
  data: string[];
  retry?: number;
}

/** Splits SSE text into messages (https://html.spec.whatwg.org/multipage/server-sent-events.html#event-stream-interpretation). */
class SseParser {
  private buffer = '';
  private current: Parsed = { data: [] };

  *push(text: string): Generator<Parsed> {
    this.buffer += text;
    for (let nl = this.buffer.search(/\r\n|\r|\n/); nl >= 0; nl = this.buffer.search(/\r\n|\r|\n/)) {
      const line = this.buffer.slice(0, nl);
      this.buffer = this.buffer.slice(nl + (this.buffer.startsWith('\r\n', nl) ? 2 : 1));
      if (line === '') {
        const done = this.current;
        this.current = { data: [] };
        if (done.event !== undefined || done.data.length > 0 || done.id !== undefined || done.retry !== undefined)
          yield done;
        continue;
      }
      if (line.startsWith(':')) continue;
      const colon = line.indexOf(':');
      const field = colon < 0 ? line : line.slice(0, colon);
      let value = colon < 0 ? '' : line.slice(colon + 1);
      if (value.startsWith(' ')) value = value.slice(1);
      if (field === 'data') this.current.data.push(value);
      else if (field === 'event') this.current.event = value;
      else if (field === 'id') this.current.id = value;
      else if (field === 'retry' && /^\d+$/.test(value)) this.current.retry = Number(value);
    }
  }
}

function sleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const timer = setTimeout(resolve, ms);
    signal?.addEventListener(
      'abort',
      () => {
        clearTimeout(timer);
        resolve();
      },
      { once: true },
    );
  });
}

export async function* subscribe(options: SubscribeOptions): AsyncGenerator<StreamMessage, void, undefined> {
  const doFetch = options.fetch ?? globalThis.fetch;
  const base = options.baseUrl.replace(/\/+$/, '');
  const query = options.types?.length ? `?types=${encodeURIComponent(options.types.join(','))}` : '';
  let lastEventId = options.lastEventId;
  let retryMs = DEFAULT_RETRY_MS;
  let failures = 0;
  while (!options.signal?.aborted) {
    let error: unknown;
    try {
      const res = await doFetch(`${base}/api/v1/events${query}`, {
        headers: {
          Authorization: `Bearer ${options.apiKey}`,
          Accept: 'text/event-stream',
          ...(lastEventId ? { 'Last-Event-ID': lastEventId } : {}),
        },
        ...(options.signal ? { signal: options.signal } : {}),
      });
      if (res.status !== 200 || !res.body) {
        const body: unknown = await res.json().catch(() => null);
        // Too many streams or a server not ready: wait and try again; anything else is final.
        if (res.status !== 429 && res.status < 500) throw new SubscriptionRefused(res.status, body);
        error = new Error(`the event stream answered ${res.status}`);
      } else {
        const parser = new SseParser();
        const decoder = new TextDecoder();
        for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
          for (const message of parser.push(decoder.decode(chunk, { stream: true }))) {
            if (message.retry !== undefined) retryMs = message.retry;
            if (message.event === undefined || message.data.length === 0) continue;
            failures = 0;
            const data: unknown = JSON.parse(message.data.join('\n'));
            if (message.id !== undefined) lastEventId = message.id;
            if (message.event === 'reset') yield { kind: 'reset', reset: data as EventStreamReset };
            else yield { kind: 'event', event: data as Event };
          }
        }
        error = new Error('the event stream ended');
      }
    } catch (err) {
      if (err instanceof SubscriptionRefused) throw err;
      if (options.signal?.aborted) return;
      error = err;
    }
    const delayMs = Math.min(MAX_RETRY_MS, retryMs * 2 ** Math.min(failures++, 4));
    options.onReconnect?.({ lastEventId, error, delayMs });
    await sleep(delayMs, options.signal);
  }
}

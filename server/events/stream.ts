/**
 * The open event streams of this process (GET /api/v1/events) and how they are fed.
 *
 * - A stream opened with a cursor first reads the log after it, a page at a time ("catching up"),
 *   then joins the live feed. One without a cursor starts at the log's newest event.
 * - The live feed: the commit-time notification of an append (log.ts; LISTEN on PostgreSQL, so
 *   every instance hears every write; PGlite's own listen in the embedded process) wakes the hub,
 *   which reads the log once after the newest id it has seen, for every stream at once, and hands
 *   each event to the streams of its account whose key may read its area and whose filter keeps it.
 *   A stream still catching up is passed over and told to read once more when it is done, so
 *   nothing falls between its last page and the feed. After a reconnect of the listening connection
 *   the hub reads the log once anyway (notifications sent while it was down are lost).
 * - Ids only grow as events commit (the log's lock), so "every id above the cursor, in order" has
 *   no gap and no duplicate.
 * - A comment line every EVENTS_HEARTBEAT_SECONDS; once a second the keys of the open streams are
 *   checked and the streams of a revoked key closed; a stream whose client reads too slowly (1 MB
 *   unsent) is closed, to resume from its last id.
 */
import { PassThrough, type Readable } from 'node:stream';
import type { Knex } from 'knex';
import type { Logger } from 'pino';
import { type Event, type EventRow, eventsRepo, toEvent } from './log.ts';

const PAGE = 500;
/** Unsent bytes past which a slow client's stream is closed (it resumes from its last id). */
const MAX_BUFFERED = 1 << 20;

/** Refused: the key has EVENTS_MAX_STREAMS_PER_KEY streams open here already. */
export class TooManyStreams extends Error {}

export interface StreamRequest {
  accountId: string;
  keyId: string;
  /** The areas (scopes) the key may read; with `friends`, its friends' events come too. */
  areas: string[];
  /** Type prefixes to keep; null keeps every type. */
  types: string[] | null;
  /** Start after this id; null starts with the next change. */
  after: number | null;
}

/** What a friend may see of an owner's event, asked when it is sent (events/friends.ts). */
export interface FriendViews {
  /** The accounts the viewer has an accepted friendship with now. */
  friendIds(viewerId: string): Promise<string[]>;
  /**
   * The event as the viewer (its key reading `areas`) may see it now, and what it shows (`subject`:
   * the friend's front, one member, the social section), whose last view sent is kept so that an
   * unchanged one is not sent again; null when it may see nothing of it.
   */
  view(viewerId: string, row: EventRow, areas: readonly string[]): Promise<FriendView | null>;
}

export interface FriendView {
  event: Event;
  subject: string;
}

/** How the hub hears of appends: resolves to a function that stops listening. */
export type Subscribe = (handlers: {
  onNotify(payload: string): void;
  onConnected(): void;
}) => Promise<() => Promise<void>>;

interface Stream {
  readonly request: StreamRequest;
  /** Its own account and, when its key reads `friends`, its friends' (as of its opening). */
  accounts: Set<string>;
  /** Sends in order: a friend's event is looked at before it is sent. */
  sending: Promise<void>;
  /** Per friend and subject, the data last sent: a change the viewer cannot see is not sent at all. */
  lastFromFriend: Map<string, string>;
  readonly out: PassThrough;
  cursor: number;
  /** Its cursor is set (from the log's bounds or the client's): it reads on from there itself. */
  placed: boolean;
  /** Reading the log on its own (catching up). */
  catchingUp: boolean;
  /** The hub passed it over while it caught up: read once more. */
  again: boolean;
}

export class EventHub {
  private readonly streams = new Set<Stream>();
  private readonly perKey = new Map<string, number>();
  /** The newest id the live read has handed out. */
  private seen = 0;
  /**
   * The log was appended to while no stream was open, and the live read skipped it (nothing to hand
   * out, and a read per write for nobody): `seen` moves on to the streams' cursors before the next read.
   */
  private skipped = false;
  private reading: Promise<void> | null = null;
  private readAgain = false;
  private stopListening: (() => Promise<void>) | null = null;
  private timers: NodeJS.Timeout[] = [];
  private closed = false;

  constructor(
    private readonly db: Knex,
    private readonly options: {
      heartbeatMs: number;
      maxPerKey: number;
      logger: Logger;
      subscribe: Subscribe;
      friends: FriendViews;
    },
  ) {}

  async start(): Promise<void> {
    this.seen = (await eventsRepo.bounds(this.db)).newest;
    this.stopListening = await this.options.subscribe({
      onNotify: () => this.wake(),
      onConnected: () => this.wake(),
    });
    const heartbeat = setInterval(() => {
      for (const s of this.streams) this.write(s, ': heartbeat\n\n');
    }, this.options.heartbeatMs);
    const revoked = setInterval(() => void this.closeRevoked(), 1000);
    for (const t of [heartbeat, revoked]) t.unref();
    this.timers = [heartbeat, revoked];
  }

  /** Opens a stream: the reset message when the cursor is outside the log, then the events after it. */
  async open(request: StreamRequest): Promise<Readable> {
    if (this.closed) throw new Error('the event hub is closed');
    const open = this.perKey.get(request.keyId) ?? 0;
    if (open >= this.options.maxPerKey) throw new TooManyStreams();
    this.perKey.set(request.keyId, open + 1);
    const out = new PassThrough();
    const stream: Stream = {
      request,
      accounts: new Set([request.accountId]),
      sending: Promise.resolve(),
      lastFromFriend: new Map(),
      out,
      cursor: 0,
      placed: false,
      catchingUp: true,
      again: false,
    };
    this.streams.add(stream);
    out.on('close', () => this.forget(stream));
    try {
      if (request.areas.includes('friends')) {
        for (const id of await this.options.friends.friendIds(request.accountId)) stream.accounts.add(id);
        // Starting now: what the viewer sees of each friend now is what it has, so that only a change
        // it can see is sent (a resumed stream instead gets each friend's view with its first event).
        if (request.after === null) await this.seedFriendViews(stream);
      }
      const { newest, pruned } = await eventsRepo.bounds(this.db);
      out.write('retry: 2000\n\n');
      if (request.after === null) stream.cursor = newest;
      else if (request.after < pruned) {
        this.send(stream, 'reset', null, { reason: 'cursor_expired', oldestId: String(pruned + 1) });
        stream.cursor = pruned;
      } else if (request.after > newest) {
        this.send(stream, 'reset', null, { reason: 'cursor_unknown', oldestId: null });
        stream.cursor = newest;
      } else stream.cursor = request.after;
      stream.placed = true;
    } catch (err) {
      out.destroy();
      throw err;
    }
    void this.catchUp(stream);
    return out;
  }

  private async seedFriendViews(stream: Stream): Promise<void> {
    const viewer = stream.request.accountId;
    for (const friend of stream.accounts) {
      if (friend === viewer) continue;
      const now: EventRow = {
        id: 0,
        account_id: friend,
        type: 'front.changed',
        area: 'front',
        occurred_at: 0,
        actor: { kind: 'system', id: null },
        data: {},
      };
      const seen = await this.options.friends.view(viewer, now, stream.request.areas);
      if (seen) stream.lastFromFriend.set(`${friend} ${seen.subject}`, JSON.stringify(seen.event.data));
    }
  }

  /** Ends every stream (shutdown) and stops listening. */
  async close(): Promise<void> {
    this.closed = true;
    for (const t of this.timers) clearInterval(t);
    for (const s of this.streams) s.out.end();
    await this.stopListening?.();
    await this.reading?.catch(() => undefined);
  }

  private forget(stream: Stream): void {
    if (!this.streams.delete(stream)) return;
    const n = (this.perKey.get(stream.request.keyId) ?? 1) - 1;
    if (n > 0) this.perKey.set(stream.request.keyId, n);
    else this.perKey.delete(stream.request.keyId);
  }

  /** Reads the log after the stream's cursor until it is at the end, then hands it to the live feed. */
  private async catchUp(stream: Stream): Promise<void> {
    try {
      do {
        stream.again = false;
        for (;;) {
          const rows = await eventsRepo.after(this.db, [...stream.accounts], stream.cursor, PAGE);
          let widened = false;
          // A new friend's events after its acceptance are not in this page: read again from there.
          for (const row of rows) {
            widened = this.deliver(stream, row);
            if (widened) break;
          }
          await stream.sending;
          if ((rows.length < PAGE && !widened) || stream.out.destroyed) break;
        }
      } while (stream.again && !stream.out.destroyed);
      // No await since `again` was read: from here the live read hands this stream its events.
      stream.catchingUp = false;
    } catch (err) {
      this.options.logger.warn({ err }, 'an event stream could not read the log');
      stream.out.destroy();
    }
  }

  private wake(): void {
    if (this.streams.size === 0) {
      this.skipped = true;
      return;
    }
    if (this.reading) {
      this.readAgain = true;
      return;
    }
    this.reading = this.readLive().finally(() => {
      this.reading = null;
      if (this.readAgain) {
        this.readAgain = false;
        this.wake();
      }
    });
  }

  /** One live read: every event after `seen`, to the streams it is for. */
  private async readLive(): Promise<void> {
    // After reads skipped for want of streams, start from the lowest cursor of the open streams: each
    // reads the log on its own from its cursor (catchUp), so nothing after it is missed. A stream not
    // placed yet will be placed at the log's end or later, so it holds the skip back until it is.
    if (this.skipped && [...this.streams].every((s) => s.placed)) {
      this.skipped = false;
      this.seen = Math.max(this.seen, Math.min(...[...this.streams].map((s) => s.cursor)));
    }
    try {
      for (;;) {
        const rows = await eventsRepo.after(this.db, null, this.seen, PAGE);
        for (const row of rows) {
          this.seen = row.id;
          for (const s of this.streams) {
            if (!s.accounts.has(row.account_id)) continue;
            if (s.catchingUp) s.again = true;
            else this.deliver(s, row);
          }
        }
        if (rows.length < PAGE) return;
      }
    } catch (err) {
      this.options.logger.warn({ err }, 'the event hub could not read the log');
    }
  }

  /**
   * Sends one event if the stream is owed it and may see it; moves its cursor past it either way.
   * The account's own events go as they are, under the key's scopes; a friend's go as the friend
   * may see them when they are sent (FriendViews), in the order of the log. True when the event
   * added an account to the stream's (a friendship accepted).
   */
  private deliver(stream: Stream, row: EventRow): boolean {
    if (row.id <= stream.cursor) return false;
    stream.cursor = row.id;
    const { areas, types, accountId } = stream.request;
    const keep = (type: string) => !types || types.some((prefix) => type.startsWith(prefix));
    if (row.account_id === accountId) {
      // A friendship accepted while the stream is open: the new friend's events come from now on.
      const friend = row.type === 'friendship.accepted' && areas.includes('friends') ? row.data.id : undefined;
      const widened = typeof friend === 'string' && !stream.accounts.has(friend);
      if (widened) stream.accounts.add(friend);
      if (!areas.includes(row.area) || !keep(row.type)) return widened;
      const event = toEvent(row);
      stream.sending = stream.sending.then(() => this.send(stream, event.type, row.id, event));
      return widened;
    }
    stream.sending = stream.sending.then(async () => {
      if (stream.out.destroyed) return;
      const view = await this.options.friends.view(accountId, row, areas).catch((err: unknown) => {
        this.options.logger.warn({ err }, 'a friend event could not be looked at; not sent');
        return null;
      });
      if (!view || !keep(view.event.type)) return;
      const { event } = view;
      const seen = `${row.account_id} ${view.subject}`;
      const data = JSON.stringify(event.data);
      if (stream.lastFromFriend.get(seen) === data) return;
      stream.lastFromFriend.set(seen, data);
      this.send(stream, event.type, row.id, event);
    });
    return false;
  }

  private send(stream: Stream, type: string, id: number | null, data: unknown): void {
    this.write(stream, `${id === null ? '' : `id: ${id}\n`}event: ${type}\ndata: ${JSON.stringify(data)}\n\n`);
  }

  private write(stream: Stream, text: string): void {
    if (stream.out.destroyed || stream.out.writableEnded) return;
    if (stream.out.writableLength > MAX_BUFFERED) {
      stream.out.end();
      return;
    }
    stream.out.write(text);
  }

  private async closeRevoked(): Promise<void> {
    if (this.streams.size === 0) return;
    const keys = [...this.perKey.keys()];
    try {
      const live = await eventsRepo.liveKeys(this.db, keys);
      for (const s of this.streams) if (!live.has(s.request.keyId)) s.out.end();
    } catch (err) {
      this.options.logger.warn({ err }, 'the event hub could not check its streams’ keys');
    }
  }
}

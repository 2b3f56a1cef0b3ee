/**
 * LISTEN on one PostgreSQL channel over a dedicated connection (not from the pool), reconnecting
 * with backoff when it drops. Notifications sent while it is down are lost, so `onConnected` is
 * called after every (re)connect: the caller re-reads whatever the notifications stand for.
 */
import pg from 'pg';
import type { Logger } from 'pino';

export interface ChannelHandlers {
  onNotify(payload: string): void;
  onConnected(): void;
}

export class ChannelListener {
  /** The client being connected or listening; events of any other are stale. */
  private current: pg.Client | undefined;
  private listeningOn: pg.Client | undefined;
  private retry: NodeJS.Timeout | undefined;
  private closed = false;
  private attempt = 0;

  constructor(
    private readonly databaseUrl: string,
    private readonly channel: string,
    private readonly handlers: ChannelHandlers,
    private readonly logger: Logger,
    /** The connection's application_name (what pg_stat_activity shows for it). */
    private readonly applicationName = `listen-${channel}`,
  ) {
    if (!/^[a-z_]+$/.test(channel)) throw new Error(`channel ${JSON.stringify(channel)} is not a plain name`);
  }

  /** Resolves once listening (or once the first attempt failed; it keeps retrying in the background). */
  async start(): Promise<void> {
    await this.connect();
  }

  private async connect(): Promise<void> {
    if (this.closed) return;
    const client = new pg.Client({ connectionString: this.databaseUrl, application_name: this.applicationName });
    this.current = client;
    client.on('notification', (msg) => {
      if (msg.channel === this.channel) this.handlers.onNotify(msg.payload ?? '');
    });
    client.on('error', (err) => {
      this.logger.warn({ err, channel: this.channel }, 'a LISTEN connection was lost');
      this.reconnectLater(client);
    });
    client.on('end', () => this.reconnectLater(client));
    try {
      await client.connect();
      await client.query(`listen ${this.channel}`);
    } catch (err) {
      this.logger.warn({ err, channel: this.channel }, 'a LISTEN connection could not connect; retrying');
      this.reconnectLater(client);
      return;
    }
    if (this.current !== client) return;
    this.listeningOn = client;
    this.attempt = 0;
    this.handlers.onConnected();
  }

  /** Drops a failed client for good and schedules one new attempt; later events of that client are ignored. */
  private reconnectLater(client: pg.Client): void {
    if (this.current !== client) return;
    this.current = undefined;
    this.listeningOn = undefined;
    client.removeAllListeners();
    client.on('error', () => undefined);
    void client.end().catch(() => undefined);
    if (this.closed) return;
    const delay = Math.min(30_000, 500 * 2 ** this.attempt++);
    this.retry = setTimeout(() => {
      this.retry = undefined;
      void this.connect();
    }, delay);
    this.retry.unref();
  }

  get listening(): boolean {
    return this.listeningOn !== undefined;
  }

  async close(): Promise<void> {
    this.closed = true;
    if (this.retry) clearTimeout(this.retry);
    const client = this.current;
    this.current = undefined;
    this.listeningOn = undefined;
    if (client) {
      client.removeAllListeners();
      client.on('error', () => undefined);
      await client.end().catch(() => undefined);
    }
  }
}

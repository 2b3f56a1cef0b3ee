/**
 * Revocation across instances on PostgreSQL. Revoking a key NOTIFYs `api_key_revoked` with its id;
 * every instance LISTENs on one dedicated connection and drops the key from its cache, so the
 * others refuse it as soon as the notification arrives (milliseconds), not after the cache TTL.
 *
 * Notifications sent while the listening connection is down are lost, so after every (re)connect
 * the whole key cache is dropped; while it is down the cache TTL (API_KEY_CACHE_TTL_MS) remains the
 * bound. The embedded database serves one process, which evicts the key itself.
 */
import pg from 'pg';
import type { Logger } from 'pino';

/** The channel a revocation is announced on (accountsRepo.announceRevocation) and heard on (here). */
export const REVOCATION_CHANNEL = 'api_key_revoked';

export interface RevocationTarget {
  evictKey(keyId: string): void;
  clearCache(): void;
}

export class RevocationListener {
  /** The client being connected or listening; events of any other are stale. */
  private current: pg.Client | undefined;
  private listeningOn: pg.Client | undefined;
  private retry: NodeJS.Timeout | undefined;
  private closed = false;
  private attempt = 0;

  constructor(
    private readonly databaseUrl: string,
    private readonly target: RevocationTarget,
    private readonly logger: Logger,
  ) {}

  /** Resolves once listening (or once the first attempt failed; it keeps retrying in the background). */
  async start(): Promise<void> {
    await this.connect();
  }

  private async connect(): Promise<void> {
    if (this.closed) return;
    const client = new pg.Client({ connectionString: this.databaseUrl, application_name: 'api-key-revocations' });
    this.current = client;
    client.on('notification', (msg) => {
      if (msg.channel === REVOCATION_CHANNEL && msg.payload) this.target.evictKey(msg.payload);
    });
    client.on('error', (err) => {
      this.logger.warn({ err }, 'API key revocation listener lost its connection');
      this.reconnectLater(client);
    });
    client.on('end', () => this.reconnectLater(client));
    try {
      await client.connect();
      await client.query(`listen ${REVOCATION_CHANNEL}`);
    } catch (err) {
      this.logger.warn({ err }, 'API key revocation listener could not connect; retrying');
      this.reconnectLater(client);
      return;
    }
    if (this.current !== client) return;
    this.listeningOn = client;
    this.attempt = 0;
    this.target.clearCache(); // whatever was revoked while nobody listened is read afresh
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

/**
 * Revocation across instances on PostgreSQL. Revoking a key NOTIFYs `api_key_revoked` with its id;
 * every instance LISTENs on one dedicated connection and drops the key from its cache, so the
 * others refuse it as soon as the notification arrives (milliseconds), not after the cache TTL.
 *
 * Notifications sent while the listening connection is down are lost, so after every (re)connect
 * the whole key cache is dropped; while it is down the cache TTL (API_KEY_CACHE_TTL_MS) remains the
 * bound. The embedded database serves one process, which evicts the key itself.
 */
import type { Logger } from 'pino';
import { ChannelListener } from '../../db/listen.ts';

/** The channel a revocation is announced on (accountsRepo.announceRevocation) and heard on (here). */
export const REVOCATION_CHANNEL = 'api_key_revoked';

export interface RevocationTarget {
  evictKey(keyId: string): void;
  clearCache(): void;
}

export class RevocationListener {
  private readonly listener: ChannelListener;

  constructor(databaseUrl: string, target: RevocationTarget, logger: Logger) {
    this.listener = new ChannelListener(
      databaseUrl,
      REVOCATION_CHANNEL,
      {
        onNotify: (keyId) => {
          if (keyId) target.evictKey(keyId);
        },
        // Whatever was revoked while nobody listened is read afresh.
        onConnected: () => target.clearCache(),
      },
      logger,
      'api-key-revocations',
    );
  }

  /** Resolves once listening (or once the first attempt failed; it keeps retrying in the background). */
  start(): Promise<void> {
    return this.listener.start();
  }

  get listening(): boolean {
    return this.listener.listening;
  }

  close(): Promise<void> {
    return this.listener.close();
  }
}

/**
 * Idempotency keys: a POST sent with `Idempotency-Key` runs once per account, operation and key
 * (IETF draft "The Idempotency-Key HTTP Header Field", with Stripe's semantics; docs/api.md "Safe
 * retries"). The HTTP edge (server/http/pipeline.ts) runs such a request in one transaction:
 *
 * 1. claim(): the key's lock, held to commit, and the response stored under the key. Another
 *    transaction holding the lock means the first request is still running (409). A stored
 *    response is replayed when the request is the same (its fingerprint), else refused (422).
 * 2. The handler runs with that transaction as its database (its first transaction is this one,
 *    later ones savepoints in it).
 * 3. store(): the response it gave, sealed, in the same transaction (by the same statement as the
 *    events the handler emitted, which the request transaction held back), then commit. A crash
 *    cannot keep the write without its response or the response without its write.
 *
 * A refusal (4xx) rolls the transaction back and is stored on its own: it wrote nothing. A 5xx or
 * 429 is not stored: the transaction rolls back and the client may retry. On the embedded
 * database transactions run one after another, so a concurrent duplicate waits for the first to
 * commit and then gets its replay rather than a 409.
 */
import { createHash, randomUUID } from 'node:crypto';
import type { Knex } from 'knex';
import { MessageCipher } from '../crypto/messageCipher.ts';
import type { MessageKey } from '../config.ts';
import type { EventInsert } from '../events/log.ts';
import { idempotencyRepo, type KeyScope, type StoredRow } from './repo.ts';

export type { KeyScope };

/** A response as stored and replayed: status, the headers a client relies on, the body's bytes. */
export interface StoredResponse {
  status: number;
  headers: Record<string, string>;
  body: Buffer;
}

export type Claim =
  | { kind: 'run' }
  | { kind: 'in_flight' }
  | { kind: 'mismatch' }
  | { kind: 'replay'; response: StoredResponse };

/** What a key may be: 1–255 printable ASCII characters (the contract's parameter says the same). */
export const IDEMPOTENCY_KEY = /^[ -~]{1,255}$/;

/** The request's fingerprint: SHA-256 of its method, path with query as sent, and body bytes. */
export function fingerprint(method: string, url: string, body: Buffer | undefined): Buffer {
  return createHash('sha256')
    .update(`${method}\n${url}\n`)
    .update(body ?? Buffer.alloc(0))
    .digest();
}

interface Sealed {
  s: number;
  h: Record<string, string>;
  b: string;
}

export class IdempotencyKeys {
  constructor(
    private readonly keys: () => readonly MessageKey[],
    private readonly ttlMs: number,
  ) {}

  /** Takes the key for this request (in `trx`, held to its end) or says why not. */
  async claim(trx: Knex.Transaction, scope: KeyScope, print: Buffer, now: number): Promise<Claim> {
    const row = await idempotencyRepo.claim(trx, scope, now);
    if (!row.locked) return { kind: 'in_flight' };
    return row.id === null || row.id === undefined ? { kind: 'run' } : this.match(scope, row as StoredRow, print);
  }

  /**
   * Stores the response (in the write's transaction, with the events the request held back, or on
   * its own for a refusal). False when a response committed under the key in the meantime (the
   * claim's snapshot predated it): the caller rolls back and answers with stored().
   */
  async store(
    db: Knex,
    scope: KeyScope,
    print: Buffer,
    response: StoredResponse,
    now: number,
    events: readonly unknown[] = [],
  ): Promise<boolean> {
    const id = randomUUID();
    const value: Sealed = { s: response.status, h: response.headers, b: response.body.toString('base64') };
    const sealed = new MessageCipher(this.keys()).seal(scope.userId, id, JSON.stringify(value));
    return idempotencyRepo.store(
      db,
      {
        ...scope,
        id,
        fingerprint: print,
        keyId: sealed.keyId,
        response: sealed.data,
        now,
        expiresAt: now + this.ttlMs,
      },
      events as EventInsert[],
    );
  }

  /** What a request gets once a response is stored under its key (after store() returned false). */
  async stored(db: Knex, scope: KeyScope, print: Buffer, now: number): Promise<Claim> {
    const row = await idempotencyRepo.find(db, scope, now);
    return row ? this.match(scope, row, print) : { kind: 'in_flight' };
  }

  private match(scope: KeyScope, row: StoredRow, print: Buffer): Claim {
    if (!Buffer.from(row.fingerprint).equals(print)) return { kind: 'mismatch' };
    const text = new MessageCipher(this.keys()).open(scope.userId, row.id, {
      keyId: row.key_id,
      data: Buffer.from(row.response_enc),
    });
    const value = JSON.parse(text) as Sealed;
    return { kind: 'replay', response: { status: value.s, headers: value.h, body: Buffer.from(value.b, 'base64') } };
  }
}

/** Deletes the keys past their time; how many went (the `idempotency_prune` job). */
export const pruneIdempotencyKeys = (db: Knex, now: number): Promise<number> => idempotencyRepo.prune(db, now);

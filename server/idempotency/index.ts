/**
 * Idempotency keys: a POST sent with `Idempotency-Key` runs once per account, operation and key
 * (IETF draft "The Idempotency-Key HTTP Header Field", with Stripe's semantics; docs/api.md "Safe
 * retries"). An operation whose write is one statement stores its answer under the key in that
 * statement (server/http/pipeline.ts runKeyedInWrite, KeyedRequest below); any other runs in one
 * transaction:
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
import { type KeyCompletion, KeyAnswered, type KeyedStatement } from '../core/context.ts';
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
  | { kind: 'run'; claimId?: string }
  | { kind: 'in_flight' }
  | { kind: 'mismatch' }
  | { kind: 'replay'; response: StoredResponse };

/**
 * How long a key claimed ahead (claimAhead) stays claimed without a response: longer than any
 * request takes. A server that stops mid-request leaves its claim to lapse after this; the write
 * and its response commit together, so a lapsed claim means the write never happened.
 */
export const CLAIM_LEASE_MS = 5 * 60_000;

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
   * Claims the key ahead of a request's write, in a statement of its own (claimKey, before work
   * that takes long, such as a note's image downloads): `run` with the claim's id, or why not. A
   * claim without a response yet is a request in flight.
   */
  async claimAhead(db: Knex, scope: KeyScope, print: Buffer, now: number): Promise<Claim> {
    const id = randomUUID();
    const row = await idempotencyRepo.claimAhead(db, scope, {
      id,
      fingerprint: print,
      now,
      leaseUntil: now + CLAIM_LEASE_MS,
    });
    if (row.claimed) return { kind: 'run', claimId: row.claimed };
    // The holder committed after this statement's snapshot was taken: read it now.
    return row.id ? this.match(scope, row as StoredRow, print) : this.stored(db, scope, print, now);
  }

  /**
   * The key's side of a request whose write is one statement (ServerContext.keyed): that statement
   * stores the response under the key with a new row id, or on the claim `claim` made (claimKey).
   */
  keyed(
    scope: KeyScope,
    print: Buffer,
    successStatus: number | undefined,
    now: number,
    claim: () => Promise<Claim>,
  ): KeyedRequest {
    const request: KeyedRequest = new KeyedRequest(
      (body, status = successStatus) => {
        if (status === undefined) return undefined;
        const response = responseOf(status, body);
        const id = request.claimId ?? randomUUID();
        return {
          response,
          completion: {
            id,
            ...scope,
            fingerprint: print,
            now,
            ...this.seal(scope.userId, id, response),
            expiresAt: now + this.ttlMs,
          },
        };
      },
      async () => {
        const answer = await claim();
        if (answer.kind !== 'run') throw new KeyAnswered(answer);
        request.claimId = answer.claimId;
      },
    );
    return request;
  }

  /**
   * Stores the response on the request's claim, with the events it held back (in its transaction);
   * false when the claim is gone (another request took the key).
   */
  async complete(
    db: Knex,
    scope: KeyScope,
    claimId: string,
    response: StoredResponse,
    now: number,
    events: readonly unknown[] = [],
  ): Promise<boolean> {
    const sealed = this.seal(scope.userId, claimId, response);
    return idempotencyRepo.complete(db, { claimId, ...sealed, expiresAt: now + this.ttlMs }, events as EventInsert[]);
  }

  /** Gives the claim up: nothing was written and nothing is stored (a 5xx), so a retry runs at once. */
  release(db: Knex, claimId: string): Promise<void> {
    return idempotencyRepo.release(db, claimId);
  }

  private seal(userId: string, id: string, response: StoredResponse): { keyId: string; response: Buffer } {
    const value: Sealed = { s: response.status, h: response.headers, b: response.body.toString('base64') };
    const sealed = new MessageCipher(this.keys()).seal(userId, id, JSON.stringify(value));
    return { keyId: sealed.keyId, response: sealed.data };
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
    const sealed = this.seal(scope.userId, id, response);
    return idempotencyRepo.store(
      db,
      {
        ...scope,
        id,
        fingerprint: print,
        keyId: sealed.keyId,
        response: sealed.response,
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
    // Claimed ahead and still running (or stopped, until its lease lapses).
    if (row.key_id === null || row.response_enc === null) return { kind: 'in_flight' };
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

/** The bytes a success answers with: JSON, or nothing (what the pipeline's respond() sends). */
export function responseOf(status: number, body: unknown, headers: Record<string, string> = {}): StoredResponse {
  if (body === undefined) return { status, headers: { ...headers }, body: Buffer.alloc(0) };
  return {
    status,
    headers: { ...headers, 'Content-Type': 'application/json; charset=utf-8' },
    body: Buffer.from(JSON.stringify(body)),
  };
}

/**
 * A keyed request whose write is one statement (ServerContext.keyed): that write stores the sealed
 * success under the key (oneStatement, appendEvents), or on the request's claim once claim() took
 * it (`claimId`). `written` once that write wrote; `response` is then what was stored, which the
 * handler's answer must equal.
 */
export class KeyedRequest implements KeyedStatement {
  state: KeyedStatement['state'] = 'open';
  written = false;
  response: StoredResponse | undefined;
  /** The claim's row, once claim() took the key. */
  claimId: string | undefined;
  private completion: KeyCompletion | undefined;
  constructor(
    private readonly sealFor: (
      body: unknown,
      status?: number,
    ) => { response: StoredResponse; completion: KeyCompletion } | undefined,
    private readonly claimNow: () => Promise<void>,
  ) {}

  async claim(): Promise<void> {
    if (this.state !== 'open' || this.claimId) throw new Error('a keyed request claims its key once, before its write');
    await this.claimNow();
  }

  arm(body: unknown, status?: number): boolean {
    if (this.state !== 'open') return false;
    const sealed = this.sealFor(body, status);
    if (!sealed) return false;
    this.response = sealed.response;
    this.completion = sealed.completion;
    this.state = 'armed';
    return true;
  }

  take(): KeyCompletion | undefined {
    if (this.state !== 'armed') return undefined;
    this.state = 'embedded';
    return this.completion;
  }

  settle(written: boolean): void {
    this.written = written;
    this.state = 'done';
  }
}

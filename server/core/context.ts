/**
 * The service context: everything a service needs to carry out one request (or one job), built
 * once by the HTTP edge (server/http/pipeline.ts) or a job, and passed as the first argument of
 * every service function, followed by the domain input.
 *
 * `actor` is who acts; `access` says whose data and at what level. On the owner's own routes
 * both name the same account (access level `owner`); friend routes resolve `access` for another
 * owner through server/access/ (forFriend), whose predicates then filter in SQL.
 */
import type { Knex } from 'knex';
import type { Logger } from 'pino';
import type { components } from '../../generated/api.d.ts';
import type { Config } from '../config.ts';
import type { ObjectStorage } from '../storage/types.ts';
import type { Scope, ScopeMap } from './scopes.ts';

type Schemas = components['schemas'];

/**
 * Fixture mode only (server/fixtures/): the id a created row gets instead of a random one, so that
 * the contract's examples can name it. Request bodies are strict, so no HTTP input carries it.
 */
export interface PresetId {
  readonly id?: string;
}

/** Who carries out the action. */
export type Actor =
  /** A caller authenticated with an account's API key. */
  | { kind: 'key'; accountId: string; keyId: string; scopes: ScopeMap }
  /** The server operator through the admin API. */
  | { kind: 'operator' }
  /** The server itself: a background job. */
  | { kind: 'system'; job: string };

/** The API-key caller (what the key authenticator resolves a bearer token to). */
export type KeyActor = Extract<Actor, { kind: 'key' }>;

/**
 * Whose data a service works on and what the actor may do with it. Only server/access/ creates
 * these, so no service can widen its own access. A union, so that what only a friend access has
 * (its grants, or a statement of its own) is there exactly where the compiler can see it.
 */
export type Access = OwnerAccess | FriendAccess | InStatementFriendAccess;

/** An access whose rights are known in JS (everything but InStatementFriendAccess). */
export type ResolvedAccess = OwnerAccess | FriendAccess;

/** The owner itself (or the operator, or a job, acting for it): everything, read and write. */
export interface OwnerAccess {
  readonly level: 'owner';
  /** The account whose data is read or written. */
  readonly ownerId: string;
  readonly inStatement?: undefined;
}

/**
 * Another account with an accepted friendship, limited per permission group by the privacy buckets
 * the owner assigned to it (server/access/, docs/privacy.md), resolved by its own statement (forFriend).
 */
export interface FriendAccess {
  readonly level: 'friend';
  readonly inStatement: false;
  /** The account whose data is read or written. */
  readonly ownerId: string;
  /** The key's account, whose accepted friendship with the owner this is. */
  readonly viewerId: string;
  /** The owner's privacy buckets the owner assigned to the viewer. */
  readonly bucketIds: readonly string[];
  /**
   * Per permission group, the viewer's buckets that grant at least `read` and those that grant
   * `read_write`. Content is visible at a level when one of its buckets is in the list; an empty
   * list grants nothing.
   */
  readonly grants: Readonly<
    Record<PermissionGroup, { readonly read: readonly string[]; readonly write: readonly string[] }>
  >;
  /** The owner's side and sub systems that hide their members from the viewer (a system with buckets of its own, none of them a held bucket granting members_view). */
  readonly hiddenSystemIds: readonly string[];
}

/**
 * A friend whose friendship and grants are not resolved yet but read inside the one statement that
 * uses them (server/access/ friendInStatement, the CTE `friend_access`): only the access predicates
 * take it, and the statement answers whether the friendship is there (`ok`) with its rows.
 */
export interface InStatementFriendAccess {
  readonly level: 'friend';
  readonly inStatement: true;
  /** The account whose data is read. */
  readonly ownerId: string;
  /** The key's account. */
  readonly viewerId: string;
}

/** The friend permission groups of a privacy bucket (spec: Privacy bucket). */
export const PERMISSION_GROUPS = [
  'members_view',
  'member_profile',
  'member_avatar',
  'member_notes',
  'member_custom_fields',
  'member_statuses',
  'member_relationships',
  'groups',
  'front',
  'friend_data',
] as const;
export type PermissionGroup = (typeof PERMISSION_GROUPS)[number];
export type PermissionLevel = 'none' | 'read' | 'read_write';
export type PermissionMap = Record<PermissionGroup, PermissionLevel>;

/** One audited action (server/audit/). */
export interface AuditEntry {
  /** Dotted verb, e.g. `member.trash`, `api_key.create`. */
  action: string;
  targetType: string;
  targetId: string | null;
  /** Small JSON detail (at most 2 KB serialised). */
  detail?: Record<string, unknown>;
}

/** An audit row but its detail, for a write that inserts it in its own statement (auditInsertSql in server/audit/). */
export interface PendingAudit {
  id: string;
  user_id: string;
  actor_kind: 'key' | 'operator' | 'system';
  actor_key_id: string | null;
  actor_job: string | null;
  action: string;
  target_type: string;
  target_id: string | null;
  created_at: number;
}

/** Records actions in the caller's transaction: `ctx.db` must be the transaction of the audited write. */
export interface AuditSink {
  record(ctx: ServiceContext, entry: AuditEntry): Promise<void>;
  /**
   * The row of `entry` but its detail, for a write made in one statement that inserts it itself
   * (auditInsertSql), its detail an expression of that statement.
   */
  row(ctx: ServiceContext, entry: Omit<AuditEntry, 'detail'>): PendingAudit;
}

/**
 * One change for the event log (server/events/): the type and its data as the contract's Event
 * union declares them, and the scope a reader needs to see it.
 */
export type EventEntry =
  | { type: Schemas['MemberEvent']['type']; area: 'members'; data: Schemas['MemberEvent']['data'] }
  | { type: Schemas['FrontChangedEvent']['type']; area: 'front'; data: Schemas['FrontChangedEvent']['data'] }
  | {
      type: Schemas['ChangeEvent']['type'];
      area: Scope;
      data: Schemas['ChangeEvent']['data'];
    };

/**
 * Appends to the event log in the caller's transaction: `ctx.db` must be the transaction of the
 * change. `about` is another account the event names (a friendship's other side), so that the
 * event goes when that account is deleted.
 */
export interface EventSink {
  emit(ctx: ServiceContext, entry: EventEntry & EventOptions): Promise<void>;
  /** Several events in one statement (a bulk write's, one per target), in the order given. */
  emitMany(ctx: ServiceContext, entries: Array<EventEntry & EventOptions>): Promise<void>;
  /**
   * The log's rows for `entries`, for a write that appends them in its own statement
   * (appendEvents in server/events/log.ts) instead of emitting them.
   */
  rows(ctx: ServiceContext, entries: Array<EventEntry & EventOptions>): PendingEvent[];
}

/** An event as the log stores it, before its id (server/events/log.ts). */
export interface PendingEvent {
  account_id: string;
  type: string;
  area: string;
  occurred_at: number;
  actor: unknown;
  data: unknown;
  about_account_id: string | null;
}

export interface EventOptions {
  /** Another account the event names (a friendship's other side): the event goes with that account. */
  about?: string;
  /** The actor is not named when it is a friend (an anonymous guestbook post, a poll vote): `{ kind: 'friend', id: null }`. */
  anonymous?: boolean;
}

/** The enqueue side of the durable job queue (server/jobs/queue.ts). */
export interface JobEnqueuer {
  /** Pass the caller's transaction as `db` so the job exists exactly when the write commits. */
  enqueue(
    db: Knex,
    queue: string,
    payload: unknown,
    options?: { runAfter?: number; maxAttempts?: number; key?: string },
  ): Promise<string | null>;
}

/** What every context carries: who acts, the database, the time and the shared services. */
export interface ServerContext {
  readonly actor: Actor;
  /** The pool, or the open transaction inside inTransaction(). */
  readonly db: Knex;
  /** This request's time (epoch ms), read once. */
  readonly now: number;
  /** The server's settings (plan caps, retention defaults, fetch limits). */
  readonly config: Config;
  readonly log: Logger;
  /** Object storage; null when the operator configured none (OBJECT_STORAGE=none). */
  readonly storage: ObjectStorage | null;
  readonly audit: AuditSink;
  readonly events: EventSink;
  readonly jobs: JobEnqueuer;
  /** A keyed POST whose key is taken by its one write (KeyedStatement); absent otherwise. */
  readonly keyed?: KeyedStatement;
}

/** A context working on one account's data: `access` says whose, and at what level. */
export interface ServiceContext<A extends Access = Access> extends ServerContext {
  readonly access: A;
}

/** The owner's own context (the handler's ctx.service(), a job's, the operator's). */
export type OwnerContext = ServiceContext<OwnerAccess>;
/** A friend route's context whose friendship and grants are resolved (the handler's ctx.friend()). */
export type FriendContext = ServiceContext<FriendAccess>;
/** A friend read's context whose friendship is resolved in its statement (ctx.friendInStatement()). */
export type InStatementFriendContext = ServiceContext<InStatementFriendAccess>;

const requestTransactions = new WeakMap<Knex, RequestTransaction>();

/**
 * A request's own transaction (a POST with an Idempotency-Key, server/http/pipeline.ts): the
 * request's first inTransaction() runs in it directly, without a savepoint. When that work fails,
 * the transaction is `tainted` (it may hold part of the work): the request never commits it.
 *
 * With `deferEvents`, the event log's appends made directly in it are held back (defer()) and
 * written by the statement that stores the response (take()), so the stored response costs no
 * statement of its own. Before the first savepoint the held events are written (a savepoint rolled
 * back must take its own events with it, and the log keeps the order they were emitted in), and
 * nothing is held after it.
 */
export class RequestTransaction {
  used = false;
  tainted = false;
  private deferring: boolean;
  private held: { rows: unknown[]; write: (rows: unknown[]) => Promise<void> } | null = null;
  constructor(
    readonly trx: Knex.Transaction,
    options: { deferEvents?: boolean } = {},
  ) {
    this.deferring = options.deferEvents ?? false;
    requestTransactions.set(trx, this);
  }

  /** Holds `rows` to be written with the response, or false when this transaction holds nothing (write them now). */
  defer(rows: readonly unknown[], write: (rows: unknown[]) => Promise<void>): boolean {
    if (!this.deferring) return false;
    if (this.held) this.held.rows.push(...rows);
    else this.held = { rows: [...rows], write };
    return true;
  }

  /** The held rows, for the statement that stores the response; none are held after. */
  take(): unknown[] {
    const rows = this.held?.rows ?? [];
    this.held = null;
    return rows;
  }

  /** Writes what is held and holds nothing more (before a savepoint). */
  async stopDeferring(): Promise<void> {
    this.deferring = false;
    const held = this.held;
    this.held = null;
    if (held && held.rows.length > 0) await held.write(held.rows);
  }
}

/** The request transaction `db` is, if it is one (not a savepoint in it). */
export const requestTransactionOf = (db: Knex): RequestTransaction | undefined => requestTransactions.get(db);

/**
 * Runs `work` in one transaction with a context whose `db` is that transaction, so every write,
 * audit record and enqueued job of `work` commits together or not at all. Inside a transaction
 * already, it opens a savepoint (but not the first time in a RequestTransaction). Any context with a
 * `db` will do (a background pass that records and enqueues nothing passes `{ db }`).
 */
export async function inTransaction<C extends Pick<ServerContext, 'db'>, T>(
  ctx: C,
  work: (tx: C & { db: Knex.Transaction }) => Promise<T>,
): Promise<T> {
  const keyed = (ctx as { keyed?: KeyedStatement }).keyed;
  if (keyed && !ctx.db.isTransaction) {
    if (keyed.state === 'done') throw new Error('a request keyed in its write wrote twice');
    throw new NeedsTransaction();
  }
  const request = requestTransactions.get(ctx.db);
  if (request && !request.used) {
    request.used = true;
    try {
      return await work({ ...ctx, db: request.trx });
    } catch (err) {
      request.tainted = true;
      throw err;
    }
  }
  await request?.stopDeferring();
  return ctx.db.transaction((trx) => work({ ...ctx, db: trx }));
}

/**
 * Runs a write that is one statement (docs/data-access.md, "Writes in one statement") and appends
 * its own events: on `ctx.db` as it is, since one statement commits or rolls back whole (on the
 * pool it needs no transaction). A keyed request's transaction (RequestTransaction) takes it as its
 * work, so a failure taints it, after writing any events held back, to keep the log in order.
 *
 * `answer` is the body the operation answers with when the statement writes (undefined: no body),
 * and its status when the operation has several successes (else its one success status),
 * for a keyed request (ctx.keyed): the statement then stores that response under the key itself,
 * beside its events (appendEvents) or, for a write that emits none, by answerUnderKey
 * (server/idempotency/inStatement.ts), so the key costs no statement of its own. Such a
 * statement's result is its final row with `notified` (notifiedColumn) or `answered`, which says
 * whether it wrote (undefined, no row, with answerUnderKey: it did not). Without `answer`, such a request runs again in a transaction (NeedsTransaction).
 */
export async function oneStatement<C extends Pick<ServerContext, 'db' | 'keyed'>, T>(
  ctx: C,
  work: (db: Knex) => Promise<T>,
  answer?: { status?: number; body?: unknown },
): Promise<T> {
  const request = requestTransactions.get(ctx.db);
  if (request) {
    await request.stopDeferring();
    return inTransaction(ctx, (tx) => work(tx.db));
  }
  const { keyed } = ctx;
  if (!keyed) return work(ctx.db);
  if (keyed.state === 'done') throw new Error('a request keyed in its write wrote twice');
  if (!answer || !keyed.arm(answer.body, answer.status)) throw new NeedsTransaction();
  let written = false;
  try {
    const result = await work(ctx.db);
    // Stored afterwards, a key would leave a duplicate free to write in between: a bug, said loudly.
    if (keyed.state === 'armed')
      throw new Error('a keyed one-statement write ran without storing its answer under the key');
    if (keyed.state === 'embedded') {
      // No row: a statement storing with answerUnderKey wrote nothing (its final row is there whenever it writes).
      if (result === undefined) written = false;
      else if (typeof result === 'object' && result !== null && 'answered' in result)
        written = result.answered === true;
      else if (typeof result === 'object' && result !== null && 'notified' in result)
        written = result.notified !== null;
      else
        throw new Error(
          "a keyed one-statement write must return its final row with notifiedColumn's `notified` or answerUnderKey's `answered`",
        );
    }
    return result;
  } finally {
    keyed.settle(written);
  }
}

/**
 * A keyed POST whose key is taken by its one write (server/http/pipeline.ts, runKeyedInWrite): that
 * write's statement stores the response under the key (oneStatement, appendEvents, answerUnderKey),
 * or on the claim made before external work (claimKey). `state`: `open` before that write, `armed`
 * with the response sealed, `embedded` once a statement carries it, `done` after the write ran.
 */
export interface KeyedStatement {
  readonly state: 'open' | 'armed' | 'embedded' | 'done';
  /**
   * Seals the operation's success with `body` (and `status`, else the operation's one success
   * status); false when the operation cannot say its answer ahead.
   */
  arm(body: unknown, status?: number): boolean;
  /** The response to store, once, for the statement being built (armed → embedded). */
  take(): KeyCompletion | undefined;
  /** The write ran; `written`: its statement wrote, and so stored the response. */
  settle(written: boolean): void;
  /**
   * Claims the key in a statement of its own, as a row without a response under a lease, before
   * work that must not run twice at once or that takes long (a note's image downloads); throws
   * KeyAnswered when the key is taken. Its write then stores the response on that claim.
   */
  claim(): Promise<void>;
}

/** The response of a keyed request as its write's statement stores it under the key (storedUnderKey). */
export interface KeyCompletion {
  /** The row's id: the claim's (claimKey), or a new one. */
  id: string;
  userId: string;
  operation: string;
  key: string;
  fingerprint: Buffer;
  now: number;
  keyId: string;
  response: Buffer;
  expiresAt: number;
}

/** The key of a keyed request was taken when it claimed it (claimKey): the pipeline answers with `answer`. */
export class KeyAnswered extends Error {
  constructor(readonly answer: unknown) {
    super('the idempotency key is taken');
  }
}

/**
 * Claims a keyed request's key ahead of its write (KeyedStatement.claim), when the request is keyed
 * in its write and has not written yet; nothing otherwise (in a transaction the key is held already).
 */
export async function claimKey(ctx: Pick<ServerContext, 'db' | 'keyed'>): Promise<void> {
  if (ctx.keyed?.state === 'open' && !ctx.db.isTransaction) await ctx.keyed.claim();
}

/** A request keyed in its write reached a write that is not one statement with its answer: the pipeline runs it again in a transaction. */
export class NeedsTransaction extends Error {
  constructor() {
    super('this keyed request needs a transaction');
  }
}

/**
 * A request keyed in its write built its answer from a read made before its statement, and the statement
 * found that what the answer was built from had changed since: it wrote nothing (nor stored the
 * answer), so the request runs again in a transaction, as NeedsTransaction.
 */
export class StaleAnswer extends NeedsTransaction {}

/**
 * Whether the request's answer is to be read ahead of its one write (StaleAnswer): it is keyed in
 * that write, nothing is written yet, and it is not running in a transaction.
 */
export const readsAnswerAhead = (ctx: Pick<ServerContext, 'db' | 'keyed'>): boolean =>
  ctx.keyed?.state === 'open' && !ctx.db.isTransaction;

/** The account whose data the context works on. */
export const ownerOf = (ctx: ServiceContext): string => ctx.access.ownerId;

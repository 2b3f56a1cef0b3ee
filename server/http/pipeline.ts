/**
 * The request pipeline, in order: operation resolution (404/405) → API key (401) → rate limit
 * (429) → scope (403) → body parsing (400/413/415) → input rules every operation shares (400,
 * inputHygiene.ts) → contract validation (400) → typed handler → error envelope. Each step reads the operation resolved from the contract. The rate limit comes
 * before the scope check so that a key probing for scopes it lacks still spends its budget.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { parse as parseContentType } from 'content-type';
import express, {
  type ErrorRequestHandler,
  type NextFunction,
  type Request,
  type RequestHandler,
  type Response,
} from 'express';
import type { Knex } from 'knex';
import type { Logger } from 'pino';
import { friendInStatement, onBehalfOf, ownAccount, requireFriend } from '../access/index.ts';
import type {
  FriendContext,
  InStatementFriendContext,
  KeyActor,
  OwnerContext,
  ServerContext,
  ServiceContext,
} from '../core/context.ts';
import {
  KeyAnswered,
  type KeyedStatement,
  NeedsTransaction,
  RequestTransaction,
  StaleAnswer,
} from '../core/context.ts';
import { DomainError } from '../core/errors.ts';
import { hasScope } from '../core/scopes.ts';
import type { AppDeps } from '../deps.ts';
import { isDatabaseUnavailable } from '../db/unavailable.ts';
import {
  type Claim,
  fingerprint,
  IDEMPOTENCY_KEY,
  type KeyScope,
  responseOf,
  type StoredResponse,
} from '../idempotency/index.ts';
import {
  ADMIN_DISABLED_MESSAGE,
  ADMIN_UNAUTHORIZED_MESSAGE,
  API_KEY_UNAUTHORIZED_MESSAGE,
  METRICS_UNAUTHORIZED_MESSAGE,
  ApiError,
  bearerChallenge,
  errorEnvelope,
  fromDomainError,
  invalidInput,
  preconditionFailed,
  unauthorized,
} from './errors.ts';
import type { HandlerMap, OperationId, RequestContext } from './handlers.ts';
import type { RateLimitDecision } from './rateLimit.ts';
import type { RequestLocals } from './requestLog.ts';
import type { OperationIndex, OperationInfo } from './spec.ts';
import { isResponseViolation, isValidatorError, validationMessage } from './validation.ts';

/** What requestLogging (the first step) keeps for the request: every later step has it. */
function locals(res: Response): RequestLocals {
  return res.locals as unknown as RequestLocals;
}

export function resolveOperation(index: OperationIndex): RequestHandler {
  return (req, res, next) => {
    const result = index.match(req.method, req.path);
    if (result.kind === 'not-found') throw new ApiError(404, 'NOT_FOUND', `No route for ${req.method} ${req.path}`);
    if (result.kind === 'method-not-allowed') {
      throw new ApiError(
        405,
        'METHOD_NOT_ALLOWED',
        `${req.method} is not allowed on ${req.path}; allowed: ${result.allow.join(', ')}`,
        {
          Allow: result.allow.join(', '),
        },
      );
    }
    locals(res).operation = result.match;
    // HEAD is served as GET; Node already knows to send no body for a HEAD request.
    if (req.method === 'HEAD') req.method = 'GET';
    next();
  };
}

function bearer(req: Request): string | undefined {
  const header = req.headers.authorization;
  if (!header) return undefined;
  const m = /^Bearer\s+(\S+)\s*$/i.exec(header);
  return m?.[1];
}

function digest(value: string): Buffer {
  return createHash('sha256').update(value).digest();
}

/** The security of an operation called with an API key. */
type KeySecurity = Extract<OperationInfo['security'], { kind: 'apiKey' | 'anyKey' }>;

/**
 * The key's request counted and its scope checked; a throw refuses it. Synchronous when the key
 * cache and the rate limiter decide in the process (most requests): no promise per request.
 */
function admit(deps: AppDeps, res: Response, security: KeySecurity, auth: KeyActor | null): void | Promise<void> {
  if (!auth) throw unauthorized(API_KEY_UNAUTHORIZED_MESSAGE);
  locals(res).auth = auth;
  let decision: RateLimitDecision | Promise<RateLimitDecision>;
  try {
    decision = deps.rateLimiter.check(auth.keyId, deps.clock());
  } catch (err) {
    throw storeFailure(deps, res, err);
  }
  if (!(decision instanceof Promise)) return decide(deps, res, security, auth, decision);
  return decision.then(
    (d) => decide(deps, res, security, auth, d),
    (err: unknown) => {
      throw storeFailure(deps, res, err);
    },
  );
}

/** A failure of the rate-limit store: the PostgreSQL store's are database errors, mapped like any other. */
function storeFailure(deps: AppDeps, res: Response, err: unknown): unknown {
  if (deps.rateLimiter.store.kind !== 'redis') return err;
  locals(res).log.error({ err }, 'rate-limit store not reachable');
  return preconditionFailed('Rate-limit store (Redis) is not reachable');
}

function decide(
  deps: AppDeps,
  res: Response,
  security: KeySecurity,
  auth: KeyActor,
  decision: RateLimitDecision,
): void {
  locals(res).rateLimit = decision;
  // Plain header names and strings: express's res.set() would check each for a Content-Type.
  for (const name in decision.headers) res.setHeader(name, decision.headers[name]!);
  if (!decision.allowed) {
    deps.metrics.rateLimitRefused();
    throw new ApiError(
      429,
      'RATE_LIMITED',
      `Rate limit of ${deps.rateLimiter.limitPerWindow} requests per minute exceeded; retry in ${decision.retryAfterSeconds} s`,
    );
  }
  if (security.kind === 'anyKey') return;
  // Any one of the operation's requirements lets the key in (the first is named in the refusal).
  const sufficient =
    hasScope(auth.scopes, security.scope, security.level) ||
    security.alternatives.some((r) => hasScope(auth.scopes, r.scope, r.level));
  if (!sufficient)
    throw new ApiError(403, 'FORBIDDEN', `Missing API key scope: ${security.scope} requires ${security.level}`);
}

export function authenticate(deps: AppDeps): RequestHandler {
  const adminDigest = deps.adminToken ? digest(deps.adminToken) : undefined;
  const metricsDigest = deps.config.metricsToken ? digest(deps.config.metricsToken) : undefined;
  return (req, res, next) => {
    const { operation } = locals(res).operation!;
    const security = operation.security;
    // A signed storage URL is checked by its handler: the signature covers the path and query it parses.
    if (security.kind === 'public' || security.kind === 'signedUrl') return next();
    const token = bearer(req);
    if (security.kind === 'metrics') {
      if (metricsDigest && (!token || !timingSafeEqual(digest(token), metricsDigest)))
        throw unauthorized(METRICS_UNAUTHORIZED_MESSAGE);
      return next();
    }
    if (security.kind === 'admin') {
      // No token configured: the admin API is off, whatever the request carries. A 401 would send
      // the operator looking for a token that does not exist.
      if (!adminDigest) throw preconditionFailed(ADMIN_DISABLED_MESSAGE);
      // Compare digests so the comparison takes the same time whatever the input length.
      if (!token || !timingSafeEqual(digest(token), adminDigest)) throw unauthorized(ADMIN_UNAUTHORIZED_MESSAGE);
      return next();
    }
    const auth = token ? deps.apiKeys.authenticate(token) : null;
    const admitted =
      auth instanceof Promise ? auth.then((a) => admit(deps, res, security, a)) : admit(deps, res, security, auth);
    if (admitted instanceof Promise) return admitted.then(() => next());
    next();
  };
}

function hasBody(req: Request): boolean {
  const length = req.headers['content-length'];
  return req.headers['transfer-encoding'] !== undefined || (length !== undefined && length !== '0');
}

const JSON_TYPES = ['application/json', 'application/*+json'];

/**
 * The charset a request declares, read exactly as body-parser reads it before decoding (the same
 * `content-type` parser: the first `charset` parameter, quoted or not, lower-cased), so this check
 * and the decoder cannot disagree.
 */
function declaredCharset(req: Request): string | undefined {
  const header = req.headers['content-type'];
  return header ? parseContentType(header).parameters.charset?.toLowerCase() : undefined;
}

/**
 * Request bodies for operations that declare one: JSON (UTF-8 only, parsed, BODY_LIMIT_BYTES) or, for
 * operations that take raw media, the bytes as a Buffer (MEDIA_MAX_BYTES). A body sent to an
 * operation that takes none is ignored (many clients send `{}` with every POST).
 *
 * A body must arrive within `timeoutMs` (HTTP_REQUEST_TIMEOUT_MS) of the time it is asked for:
 * otherwise 408 REQUEST_TIMEOUT, the connection closes, and the rest of the pipeline never runs, so
 * nothing is written even if the last bytes come in while the 408 is on its way.
 */
export function parseBody(limits: { jsonBytes: number; rawBytes: number; timeoutMs: number }): RequestHandler {
  const json = express.json({
    limit: limits.jsonBytes,
    type: () => true,
    strict: true,
    // The bytes as sent, for the fingerprint of a request with an Idempotency-Key.
    verify: (req, _res, buf) => {
      if (req.headers['idempotency-key'] !== undefined) (req as { rawBody?: Buffer }).rawBody = buf;
    },
  });
  const raw = express.raw({ limit: limits.rawBytes, type: () => true });
  return (req, res, next) => {
    const { operation } = locals(res).operation!;
    // Streamed bodies (signed uploads) are read by the handler, with its own limit.
    if (operation.streamsBody) return next();
    if (!operation.hasRequestBody || !hasBody(req)) {
      req.body = undefined;
      return next();
    }
    const acceptsJson = operation.requestContentTypes.includes('application/json');
    if (acceptsJson) {
      if (!req.is(JSON_TYPES))
        throw new ApiError(415, 'UNSUPPORTED_MEDIA_TYPE', 'Content-Type must be application/json');
      // JSON is UTF-8 (RFC 8259 §8.1). body-parser would decode any utf-* charset it knows (UTF-7
      // turns `+ADw-` into `<`, UTF-16 is accepted too), so every other charset is refused here,
      // before a byte is read.
      const charset = declaredCharset(req);
      if (charset !== undefined && charset !== 'utf-8') {
        throw new ApiError(
          415,
          'UNSUPPORTED_MEDIA_TYPE',
          `Request body must be UTF-8 JSON (RFC 8259); charset "${charset.replace(/[^a-z0-9._:+-]/g, '').slice(0, 40)}" is not supported`,
        );
      }
    } else if (!req.is(operation.requestContentTypes)) {
      throw new ApiError(
        415,
        'UNSUPPORTED_MEDIA_TYPE',
        `Content-Type must be one of: ${operation.requestContentTypes.join(', ')}`,
      );
    }
    let expired = false;
    const deadline = setTimeout(() => {
      if (req.complete) return;
      expired = true;
      // The unread rest of the body would otherwise keep the connection busy.
      res.set('Connection', 'close');
      res.once('finish', () => req.socket.destroy());
      next(new ApiError(408, 'REQUEST_TIMEOUT', `The request body did not arrive within ${limits.timeoutMs} ms`));
    }, limits.timeoutMs);
    const done = (err?: unknown) => {
      clearTimeout(deadline);
      if (!expired) next(err);
    };
    (acceptsJson ? json : raw)(req, res, done);
  };
}

/** body-parser errors → envelope errors. */
function bodyParserError(err: { type?: string; status?: number; limit?: number }, req: Request): ApiError | undefined {
  // A body that is not what its Content-Encoding says: body-parser passes zlib's error on (Z_DATA_ERROR,
  // or brotli's ERR__ERROR_FORMAT_…) with a 400 status but no type.
  const encoding = String(req.headers['content-encoding'] ?? 'identity')
    .toLowerCase()
    .trim();
  if (err.type === undefined && err.status === 400 && encoding !== 'identity') {
    return new ApiError(
      400,
      'BAD_REQUEST',
      `Request body does not match its Content-Encoding (${encoding.replace(/[^a-z0-9, -]/g, '').slice(0, 40)})`,
    );
  }
  switch (err.type) {
    case 'entity.parse.failed':
      return invalidInput([{ in: 'body', pointer: '', rule: 'json', message: 'Request body is not valid JSON' }]);
    case 'entity.too.large':
      return new ApiError(413, 'PAYLOAD_TOO_LARGE', `Request body exceeds ${err.limit} bytes`);
    case 'encoding.unsupported':
    case 'charset.unsupported':
      return new ApiError(415, 'UNSUPPORTED_MEDIA_TYPE', 'Request body must be UTF-8 encoded JSON');
    case 'request.aborted':
    case 'request.size.invalid':
    case 'stream.encoding.set':
      return new ApiError(400, 'BAD_REQUEST', 'Request body could not be read');
    default:
      return undefined;
  }
}

/** The operation declares a required body; none arrived. */
export function requireBody(): RequestHandler {
  return (req, res, next) => {
    const { operation } = locals(res).operation!;
    if (operation.requestBodyRequired && !operation.streamsBody && req.body === undefined) {
      const message = `Request body is required (${operation.requestContentTypes.join(', ')})`;
      throw invalidInput([{ in: 'body', pointer: '', rule: 'required', message }]);
    }
    next();
  };
}

class Context implements RequestContext {
  private serverCtx: ServerContext | undefined;
  private ownerCtx: OwnerContext | undefined;
  readonly auth: KeyActor | null;
  readonly rateLimit: RateLimitDecision | null;
  readonly requestId: string;

  constructor(
    readonly deps: AppDeps,
    /** The pool, or the request's transaction (a POST with an Idempotency-Key). */
    private readonly db: Knex,
    private readonly locals: RequestLocals,
    readonly req: Request,
    /** A keyed request whose key is taken by its one write (runKeyedInWrite). */
    private readonly keyed?: KeyedStatement,
  ) {
    this.auth = locals.auth ?? null;
    this.rateLimit = locals.rateLimit ?? null;
    this.requestId = locals.requestId;
  }

  /** The request's logger, created when first asked for. */
  get log(): Logger {
    return this.locals.log;
  }

  /** This request's time, read once whichever contexts the handler asks for. */
  private time: number | undefined;

  /**
   * A service context for `actor` (with `access`, when it acts on an account's data). Its `log` is
   * a getter, so the child logger is created only when a service logs; a copy made by spreading the
   * context reads it then.
   */
  private contextOf<A extends object>(actor: ServerContext['actor'], access: A): ServerContext & A;
  private contextOf(actor: ServerContext['actor']): ServerContext;
  private contextOf(actor: ServerContext['actor'], access?: object): ServerContext {
    const { deps, locals } = this;
    this.time ??= deps.clock();
    const context: ServerContext = {
      actor,
      db: this.db,
      now: this.time,
      config: deps.config,
      get log() {
        return locals.log;
      },
      storage: deps.storage,
      audit: deps.audit,
      events: deps.events,
      jobs: deps.jobs,
      keyed: this.keyed,
    };
    return access ? Object.assign(context, access) : context;
  }

  private base(actor: ServerContext['actor']): ServerContext {
    this.serverCtx ??= this.contextOf(actor);
    return this.serverCtx;
  }

  service(): OwnerContext {
    if (!this.auth) throw new Error('service() called on an operation without API-key authentication');
    this.ownerCtx ??= this.contextOf(this.auth, { access: ownAccount(this.auth) });
    return this.ownerCtx;
  }

  async friend(ownerId: string): Promise<FriendContext> {
    if (!this.auth) throw new Error('friend() called on an operation without API-key authentication');
    const access = await requireFriend(this.db, this.auth.accountId, ownerId);
    return this.contextOf(this.auth, { access });
  }

  friendInStatement(ownerId: string): InStatementFriendContext {
    if (!this.auth) throw new Error('friendInStatement() called on an operation without API-key authentication');
    return this.contextOf(this.auth, { access: friendInStatement(this.auth.accountId, ownerId) });
  }

  operatorFor(accountId: string): ServiceContext {
    if (this.auth) throw new Error('operatorFor() called on an API-key operation');
    return this.contextOf({ kind: 'operator' }, { access: onBehalfOf(accountId) });
  }

  operator(): ServerContext {
    if (this.auth) throw new Error('operator() called on an API-key operation');
    return this.base({ kind: 'operator' });
  }
}

/**
 * `keyedInWrite`: the operations whose key is taken by their one write (runKeyedInWrite): their
 * handlers write only through oneStatement() with their answer, or through inTransaction() (the
 * request then runs again in a transaction), never on the pool directly.
 */
export function dispatch(
  handlers: HandlerMap,
  deps: AppDeps,
  keyedInWrite: ReadonlySet<OperationId> = new Set(),
): RequestHandler {
  return async (req, res) => {
    const l = locals(res);
    const { operation, params } = l.operation!;
    const handler = handlers[operation.operationId] as (input: unknown, ctx: RequestContext) => Promise<HandlerOutcome>;
    const run = (db: Knex, keyed?: KeyedStatement) =>
      handler({ path: params, query: req.query ?? {}, body: req.body }, new Context(deps, db, l, req, keyed));
    const key = req.method === 'POST' && l.auth ? req.headers['idempotency-key'] : undefined;
    if (typeof key === 'string') {
      const who = { userId: l.auth!.accountId, key };
      if (keyedInWrite.has(operation.operationId)) return runKeyedInWrite(deps, req, res, who, run);
      return runIdempotent(deps, res, { ...keyOf(req, res, who), now: deps.clock() }, run);
    }
    const streaming = respond(deps, res, await run(deps.db.knex));
    if (streaming) await streaming;
  };
}

/**
 * Writes a handler's outcome to the response; for a streamed body, answers the promise of its end
 * (the rest are written at once, without a promise per request).
 */
function respond(deps: AppDeps, res: Response, result: HandlerOutcome): Promise<void> | undefined {
  if (result.headers) res.set(result.headers);
  res.status(result.status);
  if (result.body === undefined) {
    res.end();
  } else if (result.body === null) {
    // A JSON null (only where the contract's schema allows it, or the handler would not
    // compile). Sent as text: the response validator's res.json hook turns null into a 204.
    res.type('application/json').send('null');
  } else if (result.body instanceof Readable) {
    // A streamed body (a stored object), sent with its type exactly as stored (res.type would add a
    // charset). A failure mid-way can only cut the response short.
    if (result.contentType) res.setHeader('Content-Type', result.contentType);
    return pipeline(result.body, res).catch((err: unknown) => {
      locals(res).log.warn({ err }, 'streamed response ended early');
      res.destroy();
    });
  } else if (typeof result.body === 'string' || Buffer.isBuffer(result.body)) {
    if (result.contentType) res.type(result.contentType);
    res.send(result.body);
  } else if (
    !deps.config.validateResponses &&
    !res.getHeader('Content-Type') &&
    !res.getHeader('ETag') &&
    !res.getHeader('Last-Modified')
  ) {
    sendJson(res, result.body);
  } else {
    // The response validator checks what goes through res.json; express answers a conditional
    // GET of a body with an ETag or Last-Modified with 304 there.
    res.json(result.body);
  }
}

const JSON_CONTENT_TYPE = 'application/json; charset=utf-8';

/** The key's scope and the request's fingerprint, or a 400 for a key the contract refuses. */
function keyOf(req: Request, res: Response, who: { userId: string; key: string }): { scope: KeyScope; print: Buffer } {
  if (!IDEMPOTENCY_KEY.test(who.key))
    throw new ApiError(400, 'BAD_REQUEST', 'Idempotency-Key must be 1 to 255 printable ASCII characters');
  const { operation } = locals(res).operation!;
  return {
    scope: { userId: who.userId, operation: operation.operationId, key: who.key },
    print: fingerprint(req.method, req.originalUrl, requestBytes(req, operation)),
  };
}

/**
 * A POST with an Idempotency-Key to an operation whose write is one statement (dispatch's
 * `keyedInWrite`): the handler runs at once, and its write's statement stores the sealed success
 * under the key with its events (oneStatement, appendEvents): the key costs no statement of its
 * own. When the key is taken by then (another request's answer, or its claim while it runs), that
 * statement fails whole and writes nothing, and the key's answer is given. A handler that works
 * long before its write (a note's image downloads) claims the key first (claimKey), and its write
 * stores on that claim. A refusal or an answer given without that write (nothing written, or a
 * write that said nothing) is stored afterwards, unless the key was taken meanwhile: then that
 * answer is given. A 5xx or 429 gives a claim up (and is not stored). A
 * write that needs a transaction (NeedsTransaction, before anything was written, or StaleAnswer,
 * after a statement that wrote nothing because the answer built ahead no longer held) runs again
 * as runIdempotent runs it, on the claim when there is one.
 */
async function runKeyedInWrite(
  deps: AppDeps,
  req: Request,
  res: Response,
  who: { userId: string; key: string },
  run: (db: Knex, keyed?: KeyedStatement) => Promise<HandlerOutcome>,
): Promise<void> {
  const { scope, print } = keyOf(req, res, who);
  const now = deps.clock();
  const db = deps.db.knex;
  const success = locals(res).operation!.operation.declaredStatuses.filter((s) => s >= 200 && s < 300);
  const keyed = deps.idempotency.keyed(scope, print, success.length === 1 ? success[0] : undefined, now, () =>
    deps.idempotency.claimAhead(db, scope, print, now),
  );
  const answered = async () => replay(res, await deps.idempotency.stored(db, scope, print, now));
  const stored = async (response: StoredResponse) =>
    (await (keyed.claimId
      ? deps.idempotency.complete(db, scope, keyed.claimId, response, now)
      : deps.idempotency.store(db, scope, print, response, now))) || (await answered(), false);
  let result: HandlerOutcome;
  try {
    result = await run(db, keyed);
  } catch (err) {
    if (err instanceof KeyAnswered) return await replay(res, err.answer as Claim);
    // Before its write, or after a write whose guard found the answer read ahead stale (nothing written).
    if (err instanceof NeedsTransaction && (keyed.state !== 'done' || (err instanceof StaleAnswer && !keyed.written)))
      return await runIdempotent(deps, res, { scope, print, now, claimId: keyed.claimId }, run);
    if (isKeyTaken(err)) return await answered();
    // The write and its stored response committed: that is the answer, whatever failed after it.
    if (keyed.written) return await replay(res, { kind: 'replay', response: keyed.response! }, false);
    const refused = clientError(err);
    if (!refused) {
      if (keyed.claimId) await deps.idempotency.release(db, keyed.claimId).catch(() => undefined);
      throw err;
    }
    if (await stored(refusal(refused))) throw err;
    return;
  }
  const response = outcome(result);
  if (keyed.written) {
    if (!sameResponse(response, keyed.response!))
      throw new Error(`${scope.operation} answered otherwise than the response its statement stored`);
    return await respondStored(deps, res, result, response);
  }
  if (await stored(response)) await respondStored(deps, res, result, response);
}

/**
 * A keyed request's own answer: the bytes just stored under its key (`response`, the handler's
 * `result` encoded), sent as they are rather than encoded again; where responses are validated,
 * through respond() (the validator checks what goes through res.json).
 */
function respondStored(
  deps: AppDeps,
  res: Response,
  result: HandlerOutcome,
  response: StoredResponse,
): Promise<void> | undefined {
  if (deps.config.validateResponses) return respond(deps, res, result);
  return replay(res, { kind: 'replay', response }, false);
}

/** The statement failed because the key was another request's when it wrote (idempotency_held, migration 0032). */
const isKeyTaken = (err: unknown): boolean => (err as { code?: unknown } | null)?.code === 'IK001';

function sameResponse(a: StoredResponse, b: StoredResponse): boolean {
  return a.status === b.status && a.body.equals(b.body) && JSON.stringify(a.headers) === JSON.stringify(b.headers);
}

/**
 * A POST with an Idempotency-Key (server/idempotency/): claimed, run and its response stored in one
 * transaction, or the stored response replayed. The operation's JSON bodies are the only kind a POST
 * answers with, so the stored bytes are exactly what respond() sends.
 *
 * The handler's first transaction is the request's (RequestTransaction: no savepoint), and the
 * events it emits there are appended by the statement that stores the response. When that
 * work failed but the handler answered all the same (it caught the error), the transaction may hold
 * part of the failed work: it is rolled back and the request runs again with savepoints (`direct`
 * false). A refusal (4xx) rolls back whatever the handler did and is stored on its own.
 */
async function runIdempotent(
  deps: AppDeps,
  res: Response,
  key: { scope: KeyScope; print: Buffer; now: number; claimId?: string },
  run: (db: Knex) => Promise<HandlerOutcome>,
  direct = true,
): Promise<void> {
  const { scope, print, now, claimId } = key;
  const db = deps.db.knex;
  // On the claim made ahead (claimKey), or as a response of its own under the key.
  const store = (on: Knex, response: StoredResponse, events?: unknown[]) =>
    claimId
      ? deps.idempotency.complete(on, scope, claimId, response, now, events)
      : deps.idempotency.store(on, scope, print, response, now, events);
  const trx = await db.transaction();
  try {
    const answer = claimId ? { kind: 'run' as const } : await deps.idempotency.claim(trx, scope, print, now);
    if (answer.kind !== 'run') {
      await trx.rollback();
      return await replay(res, answer);
    }
    const request = direct ? new RequestTransaction(trx, { deferEvents: true }) : undefined;
    let result: HandlerOutcome;
    try {
      result = await run(trx);
    } catch (err) {
      await trx.rollback();
      // A 4xx is stored like a success; a 5xx or 429 is not (the client may retry).
      const refused = clientError(err);
      if (!refused && claimId) await deps.idempotency.release(db, claimId).catch(() => undefined);
      if (!refused || (await store(db, refusal(refused)))) throw err;
      return await replay(res, await deps.idempotency.stored(db, scope, print, now));
    }
    if (request?.tainted) {
      await trx.rollback();
      return await runIdempotent(deps, res, key, run, false);
    }
    // The events the handler emitted directly in the transaction go with the response: one statement.
    const response = outcome(result);
    if (await store(trx, response, request?.take())) {
      await trx.commit();
      return await respondStored(deps, res, result, response);
    }
    // Another request with the key committed first: its response, not this one (rolled back).
    await trx.rollback();
    return await replay(res, await deps.idempotency.stored(db, scope, print, now));
  } finally {
    if (!trx.isCompleted()) await trx.rollback().catch(() => undefined);
  }
}

/** A handler's outcome as stored: the bytes respond() sends for it (a POST answers with JSON or nothing). */
function outcome(result: HandlerOutcome): StoredResponse {
  return responseOf(result.status, result.body, result.headers as Record<string, string> | undefined);
}

/** A refusal as stored: what the error handler sends for it. */
function refusal(err: ApiError): StoredResponse {
  return {
    status: err.status,
    headers: { ...err.headers, 'Content-Type': JSON_CONTENT_TYPE },
    body: Buffer.from(errorEnvelope(err)),
  };
}

/** The 4xx a handler's error answers with (other than 429), if it is one. */
function clientError(err: unknown): ApiError | undefined {
  const e = err instanceof ApiError ? err : err instanceof DomainError ? fromDomainError(err) : undefined;
  return e && e.status < 500 && e.status !== 429 ? e : undefined;
}

/** Answers with the stored response (byte for byte), a 409 while the key is in flight, or a 422. */
async function replay(res: Response, answer: Claim, replayed = true): Promise<void> {
  if (answer.kind === 'in_flight' || answer.kind === 'run')
    throw new ApiError(
      409,
      'CONFLICT',
      'A request with this Idempotency-Key is still being processed; retry after 1 s',
      { 'Retry-After': '1' },
    );
  if (answer.kind === 'mismatch')
    throw new ApiError(
      422,
      'IDEMPOTENCY_KEY_MISMATCH',
      'This Idempotency-Key was already used for a different request to this operation',
    );
  const { status, headers, body } = answer.response;
  res.status(status).set(headers);
  if (replayed) res.set('Idempotent-Replayed', 'true');
  if (body.length === 0) return void res.end();
  res.setHeader('Content-Length', body.length);
  res.end(body);
}

/**
 * The bytes a request's fingerprint covers: the JSON body as received, a raw body, or for a
 * streamed body (received by its handler) its declared type and length.
 */
function requestBytes(req: Request, operation: OperationInfo): Buffer | undefined {
  if (operation.streamsBody)
    return Buffer.from(`${req.headers['content-type'] ?? ''}\n${req.headers['content-length'] ?? ''}`);
  const raw = (req as { rawBody?: Buffer }).rawBody;
  return raw ?? (Buffer.isBuffer(req.body) ? req.body : undefined);
}

/**
 * What res.json sends for an object (the app sets no JSON replacer, spacing or escaping, and no
 * ETag), written straight to Node's response: express's send() also works out a charset, an ETag
 * and a 304 for a conditional request, none of which applies here. A HEAD request gets the same
 * headers and no body (Node leaves it out). The body is encoded once, into the bytes both the
 * length and the socket take: a large JSON.stringify result is a rope that Buffer.byteLength
 * flattens into a copy, and a string written to the socket is encoded again (a page of 100
 * members: 51 KB less allocated per request, `npm run bench:profile -- --heap`).
 */
function sendJson(res: Response, body: unknown): void {
  const bytes = Buffer.from(JSON.stringify(body), 'utf8');
  res.setHeader('Content-Type', 'application/json; charset=utf-8');
  res.setHeader('Content-Length', bytes.length);
  res.end(bytes);
}

interface HandlerOutcome {
  status: number;
  body?: unknown;
  headers?: Record<string, string>;
  contentType?: string;
}

/** Walks the contract so every operation has exactly one handler and no handler is orphaned. */
export function checkHandlerCoverage(index: OperationIndex, handlers: Record<string, unknown>): void {
  const declared = new Set<string>(index.operations.map((o) => o.operationId));
  const missing = [...declared].filter((id) => typeof handlers[id] !== 'function');
  const orphaned = Object.keys(handlers).filter((id) => !declared.has(id));
  if (missing.length || orphaned.length) {
    throw new Error(
      `Handler map does not match the contract. Missing: ${missing.join(', ') || 'none'}; orphaned: ${orphaned.join(', ') || 'none'}`,
    );
  }
}

export function errorHandler(deps: AppDeps): ErrorRequestHandler {
  return (err: unknown, req: Request, res: Response, _next: NextFunction) => {
    // Express's own locals when the request failed before requestLogging ran.
    const l = res.locals as Partial<RequestLocals>;
    const log = l.log ?? deps.logger;
    let apiError: ApiError;
    if (err instanceof ApiError) {
      apiError = err;
    } else if (err instanceof DomainError) {
      apiError = fromDomainError(err);
    } else if (isValidatorError(err)) {
      if (isResponseViolation(err)) {
        const message = validationMessage(err);
        log.error({ violation: message }, 'response does not match the contract');
        deps.onResponseViolation?.({ method: req.method, path: req.path, status: res.statusCode, message });
        apiError = new ApiError(500, 'INTERNAL', 'Internal server error');
      } else if (err.status === 415) {
        apiError = new ApiError(415, 'UNSUPPORTED_MEDIA_TYPE', 'Content-Type must be application/json');
      } else {
        apiError = new ApiError(400, 'BAD_REQUEST', validationMessage(err));
      }
    } else if (isDatabaseUnavailable(err)) {
      log.error({ err }, 'database not available');
      apiError = preconditionFailed('Database is not reachable');
    } else {
      apiError = bodyParserError(err as { type?: string }, req) ?? internal(err, log);
    }
    checkDeclaredStatus(deps, req, l.operation?.operation, apiError.status, log);
    if (res.headersSent) {
      // The response is already on the wire; all that is left is to end it.
      res.end();
      return;
    }
    res.set(apiError.headers);
    if (apiError.status === 401) res.set('WWW-Authenticate', challengeFor(l.operation?.operation, req));
    res.status(apiError.status).type('application/json').send(errorEnvelope(apiError));
  };
}

/** WWW-Authenticate of a 401: the realm of the credential the operation takes. */
function challengeFor(operation: OperationInfo | undefined, req: Request): string {
  const kind = operation?.security.kind;
  const realm = kind === 'admin' ? 'admin' : kind === 'metrics' ? 'metrics' : 'api';
  return bearerChallenge(realm, bearer(req) !== undefined);
}

function internal(err: unknown, log: Logger): ApiError {
  log.error({ err }, 'unhandled error');
  return new ApiError(500, 'INTERNAL', 'Internal server error');
}

/** An error status the operation does not declare is a contract violation too. */
function checkDeclaredStatus(
  deps: AppDeps,
  req: Request,
  operation: OperationInfo | undefined,
  status: number,
  log: Logger,
): void {
  if (!operation || !deps.config.validateResponses) return;
  if (operation.declaredStatuses.includes(status)) return;
  const message = `status ${status} is not declared for ${operation.operationId}`;
  log.error({ violation: message }, 'response does not match the contract');
  deps.onResponseViolation?.({ method: req.method, path: req.path, status, message });
}

export type { OperationId };

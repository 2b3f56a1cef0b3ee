/**
 * Handler types derived from generated/api.d.ts. One map operationId → handler is declared
 * with `satisfies HandlerMap`, so a contract operation without a handler, or a handler whose
 * input or result does not match the contract, is a compile error.
 */
import type { Readable } from 'node:stream';
import type { Request } from 'express';
import type { Logger } from 'pino';
import type { operations } from '../../generated/api.d.ts';
import type {
  FriendContext,
  InStatementFriendContext,
  KeyActor,
  OwnerContext,
  ServerContext,
  ServiceContext,
} from '../core/context.ts';
import type { AppDeps } from '../deps.ts';
import type { RateLimitDecision } from './rateLimit.ts';

export type OperationId = keyof operations;

type OrEmpty<T> = [T] extends [never] ? Record<string, never> : [T] extends [undefined] ? Record<string, never> : T;

type PathOf<O> = O extends { parameters: { path: infer P } } ? P : Record<string, never>;
type QueryOf<O> = O extends { parameters: { query?: infer Q } } ? OrEmpty<NonNullable<Q>> : Record<string, never>;
type BodyOf<O> = O extends { requestBody: { content: { 'application/json': infer B } } }
  ? B
  : O extends { requestBody?: { content: { 'application/json': infer B } } }
    ? B | undefined
    : O extends { requestBody: { content: Record<string, unknown> } }
      ? Buffer | undefined // raw bodies (images): the bytes as sent
      : undefined;

type ResponseBody<R> = R extends { content: { 'application/json': infer B } }
  ? B
  : R extends { content: Record<string, unknown> }
    ? Buffer | string | Readable
    : undefined;

type ResultFor<S, R> =
  ResponseBody<R> extends undefined
    ? { status: S; body?: undefined; headers?: Record<string, string> }
    : { status: S; body: ResponseBody<R>; headers?: Record<string, string>; contentType?: string };

/**
 * Any declared status with its declared body. Errors are normally thrown as ApiError (the
 * envelope); returning one directly is for responses whose body differs, such as an empty 404.
 */
export type HandlerResult<O> = O extends { responses: infer R }
  ? { [S in keyof R & number]: ResultFor<S, R[S]> }[keyof R & number]
  : never;

export interface HandlerInput<O> {
  path: PathOf<O>;
  query: QueryOf<O>;
  body: BodyOf<O>;
}

export interface RequestContext {
  deps: AppDeps;
  /** The API-key caller (API-key operations only; null elsewhere). */
  auth: KeyActor | null;
  /**
   * The service context of an owner route: the key's account acting on its own data (built once
   * per request, `now` read once). Throws on operations without API-key authentication.
   */
  service(): OwnerContext;
  /**
   * The service context of a friend-scoped route: the key's account viewing `ownerId`'s content
   * through their accepted friendship and privacy buckets (server/access/ forFriend). Throws 404
   * (the same body as an unknown account) when there is no such friendship or a block.
   */
  friend(ownerId: string): Promise<FriendContext>;
  /**
   * The service context of a friend read that resolves the friendship inside its own statement
   * (server/access/ friendInStatement): no statement here. The service must pass the statement's
   * `ok` to requireFriendship() before it answers, which throws the same 404 as friend().
   */
  friendInStatement(ownerId: string): InStatementFriendContext;
  /** The operator (admin API) acting on one account, with the owner's rights. */
  operatorFor(accountId: string): ServiceContext;
  /** The operator acting on the server as a whole (no account yet, or all of them). */
  operator(): ServerContext;
  /** This request's rate-limit decision (API-key operations only). */
  rateLimit: RateLimitDecision | null;
  requestId: string;
  log: Logger;
  req: Request;
}

export type Handler<K extends OperationId> = (
  input: HandlerInput<operations[K]>,
  ctx: RequestContext,
) => Promise<HandlerResult<operations[K]>>;

export type HandlerMap = { [K in OperationId]: Handler<K> };

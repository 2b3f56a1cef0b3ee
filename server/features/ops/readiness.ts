/**
 * GET /readyz: every dependency the server is configured with, checked in parallel and each within
 * CHECK_TIMEOUT_MS, so a probe answers in bounded time even when a dependency hangs. The response
 * says which check failed; why (the error) goes to the log, once per change of state rather than
 * on every probe.
 */
import type { Logger } from 'pino';
import type { components } from '../../../generated/api.d.ts';
import { pendingMigrations } from '../../db/migrate.ts';
import { pingDatabase } from '../../db/ping.ts';
import type { AppDeps } from '../../deps.ts';

export type ReadinessChecks = components['schemas']['ReadinessChecks'];

export const CHECK_TIMEOUT_MS = 2_000;

export interface Readiness {
  ready: boolean;
  checks: ReadinessChecks;
  /** What failed, in words for the response: "Redis is not reachable; …". */
  message: string;
}

class CheckTimeout extends Error {}

async function within<T>(work: () => Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      work(),
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new CheckTimeout(`no answer within ${ms} ms`)), ms);
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

const errorText = (err: unknown) => (err instanceof Error ? err.message : String(err));

/** The failing checks last reported, per app, so a lasting outage is logged once, not on every probe. */
const lastReported = new WeakMap<AppDeps, string>();

export async function checkReadiness(deps: AppDeps, log: Logger, timeoutMs = CHECK_TIMEOUT_MS): Promise<Readiness> {
  const errors: Record<string, string> = {};
  const fail = (name: string, err: unknown) => {
    errors[name] = errorText(err);
  };

  const database = (async (): Promise<Pick<ReadinessChecks, 'database' | 'migrations'>> => {
    try {
      await within(() => pingDatabase(deps.db.knex), timeoutMs);
    } catch (err) {
      fail('database', err);
      return { database: 'down', migrations: 'unknown' };
    }
    try {
      const pending = await within(() => pendingMigrations(deps.db.knex), timeoutMs);
      if (pending > 0) errors.migrations = `${pending} pending`;
      return { database: 'ok', migrations: pending > 0 ? 'pending' : 'ok' };
    } catch (err) {
      fail('migrations', err);
      return { database: 'ok', migrations: 'unknown' };
    }
  })();

  const store = deps.rateLimiter.store;
  const redis =
    store.kind === 'redis' && store.check
      ? within(() => store.check!(), timeoutMs).then(
          () => 'ok' as const,
          (err) => (fail('redis', err), 'down' as const),
        )
      : undefined;

  const storage = deps.storage;
  const objectStorage = storage
    ? within(() => storage.check(AbortSignal.timeout(timeoutMs)), timeoutMs).then(
        () => 'ok' as const,
        (err) => (fail('objectStorage', err), 'down' as const),
      )
    : undefined;

  const checks: ReadinessChecks = { ...(await database) };
  if (redis) checks.redis = await redis;
  if (objectStorage) checks.objectStorage = await objectStorage;

  const problems: string[] = [];
  if (checks.database === 'down') problems.push('Database is not reachable');
  else if (checks.migrations === 'pending') problems.push('Database migrations are pending');
  else if (checks.migrations === 'unknown') problems.push('Database migrations could not be checked');
  if (checks.redis === 'down') problems.push('Redis is not reachable');
  if (checks.objectStorage === 'down') problems.push('Object storage is not reachable');

  const failing = Object.keys(errors).sort().join(',');
  if (failing !== (lastReported.get(deps) ?? '')) {
    lastReported.set(deps, failing);
    if (failing) log.warn({ checks, errors }, `not ready: ${problems.join('; ')}`);
    else log.info({ checks }, 'ready again');
  }
  return { ready: problems.length === 0, checks, message: problems.join('; ') };
}

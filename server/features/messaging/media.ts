/** What the media flows of messaging (attachments, space icons) share: storage or 503, staging errors as 400. */
import type { Knex } from 'knex';
import type { ServiceContext } from '../../core/context.ts';
import { badRequest, unavailable } from '../../core/errors.ts';
import { StagingError } from '../../storage/staging.ts';
import type { ObjectStorage } from '../../storage/types.ts';
import { attachmentsRepo } from './repo/attachments.ts';

/** The configured object storage, or 503 PRECONDITION_FAILED. */
export function requireStorage(ctx: ServiceContext): ObjectStorage {
  if (!ctx.storage) throw unavailable('Object storage is not configured on this server');
  return ctx.storage;
}

/** Every staging failure is the request's fault here (the ids and the bytes are the caller's): 400. */
export async function asBadRequest<T>(work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (err) {
    if (err instanceof StagingError) throw badRequest(err.message);
    throw err;
  }
}

/** An unexpired staged upload of the account for `purpose`, else 400 (`what` names it in the message). */
export async function assertStaged(
  db: Knex,
  userId: string,
  stagingId: string,
  purpose: string,
  now: number,
  what: string,
): Promise<{ metadata: unknown }> {
  const row = await attachmentsRepo.findStaged(db, userId, stagingId, purpose, now);
  if (!row) throw badRequest(`stagingId is not a staged ${what} upload of this account`);
  return row;
}

/**
 * The active system scope, shared by every area whose data lives in a side/sub system
 * (members, groups and folders, notes, front). Reads resolve to a filter; writes to a target.
 */
import type { Knex } from 'knex';
import { type ReadScope } from '../../access/systemScope.ts';
import { notFound } from '../../core/errors.ts';
import { systemsRepo, type RowLock } from './repo.ts';

export interface WriteScope {
  sideSystemId: string;
  subSystemId: string | null;
}

export interface ScopeQuery {
  sideSystemId?: string | null;
  subSystemId?: string | null;
}

/**
 * Validates an explicit side/sub pair: both must be the caller's and the sub must sit in the side.
 * With `lock`, the rows found are locked (see RowLock) until the caller's transaction ends.
 */
async function explicitScope(db: Knex, userId: string, q: ScopeQuery, lock?: RowLock): Promise<WriteScope | undefined> {
  if (q.subSystemId) {
    const sub = await systemsRepo.findSub(db, userId, q.subSystemId, lock);
    if (!sub) throw notFound('Sub system not found');
    if (q.sideSystemId && sub.side_system_id !== q.sideSystemId) {
      if (!(await systemsRepo.findSide(db, userId, q.sideSystemId))) throw notFound('Side system not found');
      throw notFound('Sub system not found in that side system');
    }
    // A live sub keeps its side from being deleted, but the lock makes that independent of the order of checks.
    if (lock && !(await systemsRepo.findSide(db, userId, sub.side_system_id, lock)))
      throw notFound('Side system not found');
    return { sideSystemId: sub.side_system_id, subSystemId: sub.id };
  }
  if (q.sideSystemId) {
    if (!(await systemsRepo.findSide(db, userId, q.sideSystemId, lock))) throw notFound('Side system not found');
    return { sideSystemId: q.sideSystemId, subSystemId: null };
  }
  return undefined;
}

export async function resolveReadScope(db: Knex, userId: string, q: ScopeQuery = {}): Promise<ReadScope> {
  const explicit = await explicitScope(db, userId, q);
  if (explicit) return explicit;
  const ctx = await systemsRepo.getContext(db, userId);
  if (!ctx) throw new Error(`account ${userId} has no active system context`);
  if (ctx.is_unified_view) return { sideSystemId: null, subSystemId: null };
  return { sideSystemId: ctx.side_system_id, subSystemId: ctx.sub_system_id };
}

/**
 * Where new data goes: the explicit target, else the stored active side/sub (also in unified view).
 * Takes a transaction: the target rows stay share-locked until the caller's write commits, so a
 * concurrent side/sub delete either waits and then counts the new row, or finishes first and the
 * write answers 404 (explicit target) or lands in the scope the delete left active (implicit).
 */
export async function resolveWriteScope(
  trx: Knex.Transaction,
  userId: string,
  q: ScopeQuery = {},
): Promise<WriteScope> {
  const explicit = await explicitScope(trx, userId, q, 'share');
  if (explicit) return explicit;
  // Deletes lock the context row first; locking it too means we read the context a delete leaves behind.
  const ctx = await systemsRepo.getContext(trx, userId, 'share');
  if (!ctx) throw new Error(`account ${userId} has no active system context`);
  if (!(await systemsRepo.findSide(trx, userId, ctx.side_system_id, 'share')))
    throw new Error(`account ${userId} has a deleted active side system`);
  if (ctx.sub_system_id && !(await systemsRepo.findSub(trx, userId, ctx.sub_system_id, 'share'))) {
    throw new Error(`account ${userId} has a deleted active sub system`);
  }
  return { sideSystemId: ctx.side_system_id, subSystemId: ctx.sub_system_id };
}

export type { ReadScope } from '../../access/systemScope.ts';

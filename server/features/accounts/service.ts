/** Accounts and API keys: the rules behind the operator admin API and the first-start demo. */
import { randomUUID } from 'node:crypto';
import type { Knex } from 'knex';
import type { components } from '../../../generated/api.d.ts';
import { decodeCursor, encodeCursor } from '../../core/cursor.ts';
import { API_KEY_UNAUTHORIZED_MESSAGE, ApiError, badRequest, conflict, notFound, unauthorized } from '../../http/errors.ts';
import { deletePrefix, type ObjectStorage } from '../../storage/types.ts';
import type { Logger } from 'pino';
import { createInitialSideSystem } from '../systems/service.ts';
import { generateApiKey } from './keys.ts';
import { PLANS, PLAN_NAMES, type PlanKey } from './plans.ts';
import { accountsRepo, type AccountRow, type AdminAccountRow, type ApiKeyRow, type ScopeMap } from './repo.ts';

type Schemas = components['schemas'];
import { announceRevocation } from './revocations.ts';

export interface NewAccount {
  username: string;
  displayName?: string;
  plan?: PlanKey;
  isAdmin?: boolean;
  pronouns?: string;
  status?: string;
  timezone?: string;
  country?: string;
  aboutMarkdown?: string;
}

function isUniqueViolation(err: unknown): boolean {
  return typeof err === 'object' && err !== null && (err as { code?: unknown }).code === '23505';
}

export async function createAccount(db: Knex, input: NewAccount, now: number): Promise<{ userId: string; username: string }> {
  const row: AccountRow = {
    id: randomUUID(),
    username: input.username,
    display_name: input.displayName ?? input.username,
    plan: input.plan ?? 'free',
    is_admin: input.isAdmin ?? false,
    pronouns: input.pronouns ?? null,
    status: input.status ?? null,
    timezone: input.timezone ?? null,
    country: input.country ?? null,
    about_markdown: input.aboutMarkdown ?? null,
    banner_url: null,
    image_url: null,
    donor_supporter_unlocked: false,
    closed_beta_participant_at: null,
    created_at: now,
    updated_at: now,
  };
  try {
    await db.transaction(async (trx) => {
      if (await accountsRepo.usernameTaken(trx, input.username)) throw conflict('Username is already taken');
      await accountsRepo.insertAccount(trx, row);
      await createInitialSideSystem(trx, row.id, now);
    });
  } catch (err) {
    // Two concurrent creates can both pass the check; the unique index settles it.
    if (isUniqueViolation(err)) throw conflict('Username is already taken');
    throw err;
  }
  return { userId: row.id, username: row.username };
}

export async function createApiKey(
  db: Knex,
  userId: string,
  input: { scopes: ScopeMap; name?: string; expiresAt?: number },
  now: number,
): Promise<{ id: string; apiKey: string; scopes: ScopeMap; expiresAt: number | null }> {
  if (input.expiresAt !== undefined && input.expiresAt <= now) throw badRequest('expiresAt must be in the future');
  const key = generateApiKey();
  const id = randomUUID();
  await db.transaction(async (trx) => {
    // Row lock: concurrent issues for one account are serialised so the plan limit holds.
    const account = await accountsRepo.lockAccount(trx, userId);
    if (!account) throw notFound('Account not found');
    const limit = PLANS[account.plan].activeApiKeys;
    if ((await accountsRepo.countActiveKeys(trx, userId, now)) >= limit) {
      throw new ApiError(403, 'FORBIDDEN', `The ${PLAN_NAMES[account.plan]} plan allows ${limit} active API key${limit === 1 ? '' : 's'}; revoke one first`);
    }
    await accountsRepo.insertApiKey(trx, {
      id,
      user_id: userId,
      name: input.name ?? null,
      key_prefix: key.displayPrefix,
      key_hash: key.hash,
      scopes: input.scopes,
      created_at: now,
      last_used_at: null,
      revoked_at: null,
      expires_at: input.expiresAt ?? null,
    });
  });
  return { id, apiKey: key.secret, scopes: input.scopes, expiresAt: input.expiresAt ?? null };
}

function toAdminAccount(row: AdminAccountRow): Schemas['AdminAccount'] {
  return {
    userId: row.id,
    username: row.username,
    displayName: row.display_name,
    plan: row.plan,
    isAdmin: row.is_admin,
    pronouns: row.pronouns,
    status: row.status,
    timezone: row.timezone,
    country: row.country,
    aboutMarkdown: row.about_markdown,
    activeApiKeys: Number(row.active_api_keys),
    createdAt: row.created_at,
    updatedAt: row.updated_at,
  };
}

function toApiKeyInfo(row: ApiKeyRow): Schemas['ApiKeyInfo'] {
  return {
    id: row.id,
    name: row.name,
    scopes: row.scopes,
    createdAt: row.created_at,
    lastUsedAt: row.last_used_at,
    expiresAt: row.expires_at,
    revokedAt: row.revoked_at,
  };
}

export async function listAccounts(
  db: Knex,
  query: { limit?: number; cursor?: string; usernamePrefix?: string },
  now: number,
): Promise<Schemas['AdminAccountPage']> {
  const limit = query.limit ?? 50;
  const after = query.cursor ? decodeCursor<[string]>(query.cursor, ['string'])[0] : undefined;
  const rows = await accountsRepo.listAccounts(db, { limit: limit + 1, now, after, prefix: query.usernamePrefix });
  const page = rows.slice(0, limit);
  const last = page[page.length - 1];
  return { items: page.map(toAdminAccount), nextCursor: rows.length > limit && last ? encodeCursor([last.username.toLowerCase()]) : null };
}

export async function getAccount(db: Knex, userId: string, now: number): Promise<Schemas['AdminAccount']> {
  const row = await accountsRepo.findAdminAccount(db, userId, now);
  if (!row) throw notFound('Account not found');
  return toAdminAccount(row);
}

export async function listApiKeys(db: Knex, userId: string, query: { limit?: number; cursor?: string }): Promise<Schemas['ApiKeyInfoPage']> {
  const limit = query.limit ?? 50;
  const after = query.cursor ? decodeCursor<[number, string]>(query.cursor, ['integer', 'uuid']) : undefined;
  if (!(await accountsRepo.findAccount(db, userId))) throw notFound('Account not found');
  const rows = await accountsRepo.listKeys(db, userId, limit + 1, after ? { createdAt: after[0], id: after[1] } : undefined);
  const page = rows.slice(0, limit);
  const last = page[page.length - 1];
  return { items: page.map(toApiKeyInfo), nextCursor: rows.length > limit && last ? encodeCursor([last.created_at, last.id]) : null };
}

/**
 * Deletes the account and all its data in one transaction, announces its keys' revocation to
 * every instance, then removes its stored objects (everything under `u/<userId>/`). Objects go
 * after the commit: a failure there leaves unreachable bytes behind (logged), never a live
 * account without its media.
 */
export async function deleteAccount(
  deps: { db: Knex; storage: ObjectStorage | null; logger: Logger },
  userId: string,
): Promise<{ keyIds: string[] }> {
  const keyIds = await deps.db.transaction(async (trx) => {
    if (!(await accountsRepo.lockAccount(trx, userId))) throw notFound('Account not found');
    const ids = await accountsRepo.keyIds(trx, userId);
    await accountsRepo.deleteAccount(trx, userId, ids);
    // Delivered to the other instances at commit, and only if the deletion commits.
    for (const keyId of ids) await announceRevocation(trx, keyId);
    return ids;
  });
  if (deps.storage) {
    try {
      await deletePrefix(deps.storage, `u/${userId}/`);
    } catch (err) {
      deps.logger.error({ err, userId }, 'account deleted, but some of its stored objects could not be removed');
    }
  }
  return { keyIds };
}

/** GET /me: the key's account and the key itself (the rate-limit part comes from the request). */
export async function describeKey(db: Knex, auth: { userId: string; keyId: string }): Promise<Omit<Schemas['Me'], 'rateLimit'>> {
  const [account, key] = await Promise.all([accountsRepo.findAccount(db, auth.userId), accountsRepo.findKey(db, auth.keyId)]);
  // The key authenticated this very request; only a concurrent account deletion can remove it.
  if (!account || !key) throw unauthorized(API_KEY_UNAUTHORIZED_MESSAGE);
  return {
    userId: account.id,
    username: account.username,
    displayName: account.display_name,
    plan: account.plan,
    key: { id: key.id, name: key.name, scopes: key.scopes, createdAt: key.created_at, expiresAt: key.expires_at },
  };
}

export async function revokeApiKey(db: Knex, keyId: string, now: number): Promise<void> {
  if (!(await accountsRepo.revokeKey(db, keyId, now))) throw notFound('API key not found');
  await announceRevocation(db, keyId);
}

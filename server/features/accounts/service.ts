/** Accounts and API keys: the rules behind the operator admin API and the first-start demo. */
import { randomUUID } from 'node:crypto';
import type { components } from '../../../generated/api.d.ts';
import { decodeCursor, encodeCursor } from '../../core/cursor.ts';
import { pageOf } from '../../core/keyset.ts';
import {
  API_KEY_UNAUTHORIZED_MESSAGE,
  badRequest,
  conflict,
  forbidden,
  notFound,
  unauthorized,
} from '../../core/errors.ts';
import { onBehalfOf } from '../../access/index.ts';
import { inTransaction, ownerOf, type ServerContext, type ServiceContext } from '../../core/context.ts';
import { deletePrefix } from '../../storage/types.ts';
import { createInitialSideSystem } from '../systems/index.ts';
import { apiKeyFromSecret, generateApiKey } from './keys.ts';
import { PLANS, PLAN_NAMES, type PlanKey } from './plans.ts';
import { accountsRepo, type AccountRow, type AdminAccountRow, type ApiKeyRow, type ScopeMap } from './repo.ts';

type Schemas = components['schemas'];

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
  /** Fixture mode only (server/fixtures/): the ids the account and its first side system get. */
  preset?: { id: string; sideSystemId?: string };
}

function isUniqueViolation(err: unknown): boolean {
  return typeof err === 'object' && err !== null && (err as { code?: unknown }).code === '23505';
}

/** Creates an account with its first side system (audited on the new account: `account.create`). */
export async function createAccount(
  ctx: ServerContext,
  input: NewAccount,
): Promise<{ userId: string; username: string }> {
  const { now } = ctx;
  const row: AccountRow = {
    id: input.preset?.id ?? randomUUID(),
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
    await inTransaction({ ...ctx, access: onBehalfOf(row.id) }, async (tx) => {
      if (await accountsRepo.usernameTaken(tx.db, input.username)) throw conflict('Username is already taken');
      await accountsRepo.insertAccount(tx.db, row);
      await createInitialSideSystem(tx.db, row.id, now, input.preset?.sideSystemId);
      await tx.audit.record(tx, {
        action: 'account.create',
        targetType: 'account',
        targetId: row.id,
        detail: { username: row.username, plan: row.plan },
      });
    });
  } catch (err) {
    // Two concurrent creates can both pass the check; the unique index settles it.
    if (isUniqueViolation(err)) throw conflict('Username is already taken');
    throw err;
  }
  return { userId: row.id, username: row.username };
}

/** Issues a key within the plan's limit (audited: `api_key.create`, its name, scopes and expiry; never the secret). */
export async function createApiKey(
  ctx: ServiceContext,
  input: {
    scopes: ScopeMap;
    name?: string;
    expiresAt?: number;
    /** Fixture mode only (server/fixtures/keys.ts): the key's id and its published secret. */
    preset?: { id: string; secret: string };
  },
): Promise<{ id: string; apiKey: string; scopes: ScopeMap; expiresAt: number | null }> {
  const { now } = ctx;
  const userId = ownerOf(ctx);
  if (input.expiresAt !== undefined && input.expiresAt <= now) throw badRequest('expiresAt must be in the future');
  const key = input.preset ? apiKeyFromSecret(input.preset.secret) : generateApiKey();
  const id = input.preset?.id ?? randomUUID();
  await inTransaction(ctx, async (tx) => {
    const trx = tx.db;
    // Row lock: concurrent issues for one account are serialised so the plan limit holds.
    const account = await accountsRepo.lockAccount(trx, userId);
    if (!account) throw notFound('Account not found');
    const limit = PLANS[account.plan].activeApiKeys;
    if ((await accountsRepo.countActiveKeys(trx, userId, now)) >= limit) {
      throw forbidden(
        `The ${PLAN_NAMES[account.plan]} plan allows ${limit} active API key${limit === 1 ? '' : 's'}; revoke one first`,
      );
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
    await tx.audit.record(tx, {
      action: 'api_key.create',
      targetType: 'api_key',
      targetId: id,
      detail: { name: input.name ?? null, scopes: input.scopes, expiresAt: input.expiresAt ?? null },
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
  ctx: ServerContext,
  query: { limit?: number; cursor?: string; usernamePrefix?: string },
): Promise<Schemas['AdminAccountPage']> {
  const { db, now } = ctx;
  const limit = query.limit ?? 50;
  const after = query.cursor ? decodeCursor<[string]>(query.cursor, ['string'])[0] : undefined;
  const rows = await accountsRepo.listAccounts(db, { limit, now, after, prefix: query.usernamePrefix });
  const { items, nextAfter } = pageOf(rows, limit);
  return {
    items: items.map(toAdminAccount),
    nextCursor: nextAfter ? encodeCursor([nextAfter.username.toLowerCase()]) : null,
  };
}

/** How many accounts the server holds (fixture mode starts only on none). */
export async function countAccounts(ctx: ServerContext): Promise<number> {
  return accountsRepo.countAccounts(ctx.db);
}

/** The plan of the context's account; null when the account does not exist (any more). */
export async function accountPlan(ctx: ServiceContext): Promise<PlanKey | null> {
  return (await accountsRepo.findAccount(ctx.db, ownerOf(ctx)))?.plan ?? null;
}

export async function getAccount(ctx: ServiceContext): Promise<Schemas['AdminAccount']> {
  const row = await accountsRepo.findAdminAccount(ctx.db, ownerOf(ctx), ctx.now);
  if (!row) throw notFound('Account not found');
  return toAdminAccount(row);
}

export async function listApiKeys(
  ctx: ServiceContext,
  query: { limit?: number; cursor?: string },
): Promise<Schemas['ApiKeyInfoPage']> {
  const { db } = ctx;
  const userId = ownerOf(ctx);
  const limit = query.limit ?? 50;
  const after = query.cursor ? decodeCursor<[number, string]>(query.cursor, ['integer', 'uuid']) : undefined;
  if (!(await accountsRepo.findAccount(db, userId))) throw notFound('Account not found');
  const rows = await accountsRepo.listKeys(
    db,
    userId,
    limit,
    after ? { createdAt: after[0], id: after[1] } : undefined,
  );
  const { items, nextAfter } = pageOf(rows, limit);
  return {
    items: items.map(toApiKeyInfo),
    nextCursor: nextAfter ? encodeCursor([nextAfter.created_at, nextAfter.id]) : null,
  };
}

/**
 * Deletes the account and all its data in one transaction, announces its keys' revocation to
 * every instance, then removes its stored objects (everything under `u/<userId>/`). Objects go
 * after the commit: a failure there leaves unreachable bytes behind (logged), never a live
 * account without its media.
 */
export async function deleteAccount(ctx: ServiceContext): Promise<{ keyIds: string[] }> {
  const userId = ownerOf(ctx);
  const keyIds = await inTransaction(ctx, async (tx) => {
    const trx = tx.db;
    if (!(await accountsRepo.lockAccount(trx, userId))) throw notFound('Account not found');
    const ids = await accountsRepo.keyIds(trx, userId);
    await accountsRepo.deleteAccount(trx, userId);
    // Delivered to the other instances at commit, and only if the deletion commits.
    for (const keyId of ids) await accountsRepo.announceRevocation(trx, keyId);
    return ids;
  });
  if (ctx.storage) {
    try {
      await deletePrefix(ctx.storage, `u/${userId}/`);
    } catch (err) {
      ctx.log.error({ err, userId }, 'account deleted, but some of its stored objects could not be removed');
    }
  }
  return { keyIds };
}

/** GET /me: the key's account and the key itself (the rate-limit part comes from the request). */
export async function describeKey(ctx: ServiceContext): Promise<Omit<Schemas['Me'], 'rateLimit'>> {
  if (ctx.actor.kind !== 'key') throw new Error('describeKey needs an API-key actor');
  const [account, key] = await Promise.all([
    accountsRepo.findAccount(ctx.db, ownerOf(ctx)),
    accountsRepo.findKey(ctx.db, ctx.actor.keyId),
  ]);
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

/** Revokes a key (audited on its account: `api_key.revoke`); revoking a revoked key keeps its first revocation time. */
export async function revokeApiKey(ctx: ServerContext, keyId: string): Promise<void> {
  await inTransaction(ctx, async (tx) => {
    const owner = await accountsRepo.revokeKey(tx.db, keyId, tx.now);
    if (!owner) throw notFound('API key not found');
    await tx.audit.record(
      { ...tx, access: onBehalfOf(owner) },
      { action: 'api_key.revoke', targetType: 'api_key', targetId: keyId },
    );
    // Delivered to the other instances at commit, and only if the revocation commits.
    await accountsRepo.announceRevocation(tx.db, keyId);
  });
}

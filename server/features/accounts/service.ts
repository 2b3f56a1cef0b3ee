/** Accounts and API keys: the rules behind the operator admin API and the first-start demo. */
import { randomUUID } from 'node:crypto';
import type { Knex } from 'knex';
import { ApiError, conflict, notFound } from '../../http/errors.ts';
import { createInitialSideSystem } from '../systems/service.ts';
import { generateApiKey } from './keys.ts';
import { PLANS, PLAN_NAMES, type PlanKey } from './plans.ts';
import { accountsRepo, type AccountRow, type ScopeMap } from './repo.ts';
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
  input: { scopes: ScopeMap; name?: string },
  now: number,
): Promise<{ id: string; apiKey: string; scopes: ScopeMap }> {
  const key = generateApiKey();
  const id = randomUUID();
  await db.transaction(async (trx) => {
    // Row lock: concurrent issues for one account are serialised so the plan limit holds.
    const account = await accountsRepo.lockAccount(trx, userId);
    if (!account) throw notFound('Account not found');
    const limit = PLANS[account.plan].activeApiKeys;
    if ((await accountsRepo.countActiveKeys(trx, userId)) >= limit) {
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
    });
  });
  return { id, apiKey: key.secret, scopes: input.scopes };
}

export async function revokeApiKey(db: Knex, keyId: string, now: number): Promise<void> {
  if (!(await accountsRepo.revokeKey(db, keyId, now))) throw notFound('API key not found');
  await announceRevocation(db, keyId);
}

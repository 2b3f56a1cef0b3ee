/** First start of an empty embedded database: a `demo` account with an all-scopes key. */
import type { Knex } from 'knex';
import { SCOPES, type Scope, type ScopeLevel } from '../../http/spec.ts';
import { accountsRepo } from './repo.ts';
import { createAccount, createApiKey } from './service.ts';

const SEEDED = 'demo_seeded_at';

export async function seedDemoAccount(db: Knex, now: number): Promise<{ username: string; apiKey: string } | undefined> {
  if ((await accountsRepo.getMeta(db, SEEDED)) !== undefined) return undefined;
  if ((await accountsRepo.countAccounts(db)) > 0) {
    await accountsRepo.setMeta(db, SEEDED, String(now));
    return undefined;
  }
  const { userId, username } = await createAccount(db, { username: 'demo', displayName: 'Demo System' }, now);
  const scopes = Object.fromEntries(SCOPES.map((s) => [s, 'read_write'])) as Record<Scope, ScopeLevel>;
  const { apiKey } = await createApiKey(db, userId, { name: 'Demo key (all scopes)', scopes }, now);
  await accountsRepo.setMeta(db, SEEDED, String(now));
  return { username, apiKey };
}

/** First start of an empty embedded database: a `demo` account with an all-scopes key. */
import { onBehalfOf } from '../../access/index.ts';
import type { ServerContext } from '../../core/context.ts';
import { SCOPES, type Scope, type ScopeLevel } from '../../core/scopes.ts';
import { accountsRepo } from './repo.ts';
import { createAccount, createApiKey } from './service.ts';

const SEEDED = 'demo_seeded_at';

export async function seedDemoAccount(ctx: ServerContext): Promise<{ username: string; apiKey: string } | undefined> {
  const { db, now } = ctx;
  if ((await accountsRepo.getMeta(db, SEEDED)) !== undefined) return undefined;
  if ((await accountsRepo.countAccounts(db)) > 0) {
    await accountsRepo.setMeta(db, SEEDED, String(now));
    return undefined;
  }
  const { userId, username } = await createAccount(ctx, { username: 'demo', displayName: 'Demo System' });
  const scopes = Object.fromEntries(SCOPES.map((s) => [s, 'read_write'])) as Record<Scope, ScopeLevel>;
  const { apiKey } = await createApiKey(
    { ...ctx, access: onBehalfOf(userId) },
    { name: 'Demo key (all scopes)', scopes },
  );
  await accountsRepo.setMeta(db, SEEDED, String(now));
  return { username, apiKey };
}

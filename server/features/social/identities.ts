/**
 * Verified external identities (registered by the operator, admin API) and POST /social/sync-oauth,
 * which turns them into links: one per provider at most five, so a bounded number of statements.
 */
import { randomUUID } from 'node:crypto';
import type { components } from '../../../generated/api.d.ts';
import { inTransaction, ownerOf, type ServiceContext } from '../../core/context.ts';
import { notFound } from '../../core/errors.ts';
import { identitiesRepo } from './repo/identities.ts';
import { linksRepo } from './repo/links.ts';
import { profileRepo } from './repo/profile.ts';

type Schemas = components['schemas'];

/** Records (or replaces) the account's verified identity at one provider. */
export async function registerIdentity(ctx: ServiceContext, input: Schemas['RegisterIdentityRequest']): Promise<void> {
  const userId = ownerOf(ctx);
  await inTransaction(ctx, async (tx) => {
    if (!(await identitiesRepo.lockAccount(tx.db, userId))) throw notFound('Account not found');
    await identitiesRepo.upsert(tx.db, {
      id: randomUUID(),
      user_id: userId,
      provider: input.provider,
      external_user_id: input.externalUserId,
      handle: input.handle ?? null,
      url: input.url ?? null,
      avatar_url: input.avatarUrl ?? null,
      verified_at: tx.now,
    });
  });
}

export async function syncOauth(ctx: ServiceContext): Promise<Schemas['SyncOauthResult']> {
  const userId = ownerOf(ctx);
  return inTransaction(ctx, async (tx) => {
    await profileRepo.touch(tx.db, userId, tx.now);
    await profileRepo.lock(tx.db, userId); // one sync (or link create) at a time
    const identities = await identitiesRepo.of(tx.db, userId);
    let inserted = 0;
    let updated = 0;
    for (const identity of identities) {
      updated += await linksRepo.syncIdentity(
        tx.db,
        userId,
        { platform: identity.provider, handle: identity.handle, url: identity.url, avatarUrl: identity.avatar_url },
        tx.now,
      );
      if (await linksRepo.existsForPlatform(tx.db, userId, identity.provider)) continue;
      await linksRepo.insert(tx.db, {
        id: randomUUID(),
        user_id: userId,
        platform: identity.provider,
        display_name: identity.handle ?? identity.provider,
        handle: identity.handle,
        url: identity.url,
        description: null,
        badge: null,
        accent_color: null,
        avatar_url: identity.avatar_url,
        visibility: 'private',
        featured: false,
        sort_order: await profileRepo.nextSortOrder(tx.db, 'social_links', userId),
        created_at: tx.now,
        updated_at: tx.now,
      });
      inserted += 1;
    }
    return { inserted, updated };
  });
}

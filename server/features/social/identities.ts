/**
 * Verified external identities (registered by the operator, admin API) and POST /social/sync-oauth,
 * which turns them into links: one per provider at most five, so a bounded number of statements.
 */
import { randomUUID } from 'node:crypto';
import type { components } from '../../../generated/api.d.ts';
import { inTransaction, ownerOf, type ServiceContext } from '../../core/context.ts';
import { notFound } from '../../core/errors.ts';
import * as repo from './repo.ts';

type Schemas = components['schemas'];

interface IdentityRow {
  provider: Schemas['IdentityProvider'];
  handle: string | null;
  url: string | null;
  avatar_url: string | null;
}

/** Records (or replaces) the account's verified identity at one provider. */
export async function registerIdentity(ctx: ServiceContext, input: Schemas['RegisterIdentityRequest']): Promise<void> {
  const userId = ownerOf(ctx);
  await inTransaction(ctx, async (tx) => {
    const account = await tx.db('accounts').where({ id: userId }).forUpdate().first('id');
    if (!account) throw notFound('Account not found');
    await tx
      .db('social_identities')
      .insert({
        id: randomUUID(),
        user_id: userId,
        provider: input.provider,
        external_user_id: input.externalUserId,
        handle: input.handle ?? null,
        url: input.url ?? null,
        avatar_url: input.avatarUrl ?? null,
        verified_at: tx.now,
      })
      .onConflict(['user_id', 'provider'])
      .merge(['external_user_id', 'handle', 'url', 'avatar_url', 'verified_at']);
  });
}

export async function syncOauth(ctx: ServiceContext): Promise<Schemas['SyncOauthResult']> {
  const userId = ownerOf(ctx);
  return inTransaction(ctx, async (tx) => {
    await repo.touch(tx.db, userId, tx.now);
    await repo.profiles(tx.db).where({ user_id: userId }).forUpdate(); // one sync (or link create) at a time
    const identities: IdentityRow[] = await tx
      .db('social_identities')
      .where({ user_id: userId })
      .orderBy('provider')
      .select('provider', 'handle', 'url', 'avatar_url');
    let inserted = 0;
    let updated = 0;
    for (const identity of identities) {
      const changed = await repo
        .links(tx.db)
        .where({ user_id: userId, platform: identity.provider })
        .andWhere((q) => {
          q.whereRaw('handle is distinct from ?', [identity.handle])
            .orWhereRaw('url is distinct from ?', [identity.url])
            .orWhereRaw('avatar_url is distinct from ?', [identity.avatar_url]);
        })
        .update({ handle: identity.handle, url: identity.url, avatar_url: identity.avatar_url, updated_at: tx.now });
      updated += changed;
      const exists = await repo.links(tx.db).where({ user_id: userId, platform: identity.provider }).first('id');
      if (exists) continue;
      await repo.links(tx.db).insert({
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
        sort_order: await repo.nextSortOrder(tx.db, 'social_links', userId),
        created_at: tx.now,
        updated_at: tx.now,
      });
      inserted += 1;
    }
    return { inserted, updated };
  });
}

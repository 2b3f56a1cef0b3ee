/** Space icons (docs/messaging.md, "Space icons"): the upload flow of attachments, for one image per space. */
import type { Knex } from 'knex';
import type { components } from '../../../generated/api.d.ts';
import { ownerOf, type ServiceContext } from '../../core/context.ts';
import { badRequest } from '../../core/errors.ts';
import { completeUpload, consumeStagedUpload, createUploadIntent, StagingError } from '../../storage/staging.ts';
import { asBadRequest, assertStaged, requireStorage } from './media.ts';

type Schemas = components['schemas'];

const ICON_PURPOSE = 'space-icon';
const ICON_TYPES = ['image/png', 'image/jpeg', 'image/webp', 'image/gif'] as const;

/** The icon's object; named by its staging id, so a retried move after a rollback finds it in place. */
const iconKey = (userId: string, stagingId: string) => `u/${userId}/messaging/space-icons/${stagingId}`;

export async function createIconIntent(ctx: ServiceContext, input: Schemas['SpaceIconUploadIntentRequest']): Promise<Schemas['MessagingUploadIntent']> {
  const storage = requireStorage(ctx);
  const intent = await asBadRequest(() =>
    createUploadIntent(ctx.db, storage, {
      userId: ownerOf(ctx),
      purpose: ICON_PURPOSE,
      contentType: input.contentType,
      byteSize: input.byteSize,
      maxBytes: ctx.config.spaceIconMaxBytes,
      allowedTypes: ICON_TYPES,
      now: ctx.now,
      urlTtlSeconds: ctx.config.storageUploadUrlTtlSeconds,
      stagingTtlMs: ctx.config.storageStagingTtlMs,
    }),
  );
  return { stagingId: intent.stagingId, upload: { ...intent.upload, method: 'PUT' as const }, expiresAt: intent.expiresAt };
}

export async function completeIcon(ctx: ServiceContext, stagingId: string): Promise<void> {
  const storage = requireStorage(ctx);
  const userId = ownerOf(ctx);
  await assertStaged(ctx.db, userId, stagingId, ICON_PURPOSE, ctx.now, 'space-icon');
  await asBadRequest(() => completeUpload(ctx.db, storage, { userId, stagingId, now: ctx.now }));
}

/** Inside the space write's transaction: takes a completed icon upload and answers its object key; 400 when it is not one. */
export async function takeIcon(tx: ServiceContext & { db: Knex.Transaction }, stagingId: string): Promise<string> {
  const storage = requireStorage(tx);
  const userId = ownerOf(tx);
  const id = stagingId.toLowerCase();
  try {
    return (await consumeStagedUpload(tx.db, storage, { userId, stagingId: id, purpose: ICON_PURPOSE, finalKey: iconKey(userId, id), now: tx.now })).key;
  } catch (err) {
    if (err instanceof StagingError) throw badRequest('iconStagingId is not a completed, unused space-icon upload of this account');
    throw err;
  }
}

/** The icon's short-lived download URL; null without an icon or without storage. */
export async function iconUrl(ctx: ServiceContext, key: string | null): Promise<string | null> {
  if (!key || !ctx.storage) return null;
  return (await ctx.storage.presignGet(key, ctx.config.storageDownloadUrlTtlSeconds)).url;
}

/** Deletes a replaced icon's object after the write committed; a failure leaves bytes behind, logged. */
export async function dropIcon(ctx: ServiceContext, key: string | null): Promise<void> {
  if (!key || !ctx.storage) return;
  try {
    await ctx.storage.delete(key);
  } catch (err) {
    ctx.log.error({ err, key }, 'a replaced space icon could not be deleted');
  }
}

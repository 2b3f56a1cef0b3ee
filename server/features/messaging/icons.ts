/**
 * Space icons (docs/messaging.md, "Space icons"): the upload flow of attachments, for one image per
 * space, and copies of another space's icon named by its `iconStorageRef`.
 */
import { randomUUID } from 'node:crypto';
import type { Knex } from 'knex';
import type { components } from '../../../generated/api.d.ts';
import { ownerOf, type PresetId, type ServiceContext } from '../../core/context.ts';
import { badRequest } from '../../core/errors.ts';
import { completeUpload, consumeStagedUpload, createUploadIntent, StagingError } from '../../storage/staging.ts';
import { asBadRequest, assertStaged, requireStorage } from './media.ts';
import { structureRepo } from './repo/structure.ts';

type Schemas = components['schemas'];

const ICON_PURPOSE = 'space-icon';
const ICON_TYPES = ['image/png', 'image/jpeg', 'image/webp', 'image/gif'] as const;

/**
 * The icon's object: named by its staging id (so a retried move after a rollback finds it in place),
 * or by a new id for a copy. That id is the icon's `iconStorageRef`.
 */
const iconKey = (userId: string, iconId: string) => `u/${userId}/messaging/space-icons/${iconId}`;

/** The `iconStorageRef` of an icon object: the id its key ends with; null without an icon. */
export const iconRefOf = (key: string | null): string | null =>
  key === null ? null : key.slice(key.lastIndexOf('/') + 1);

export async function createIconIntent(
  ctx: ServiceContext,
  input: Schemas['SpaceIconUploadIntentRequest'] & PresetId,
): Promise<Schemas['MessagingUploadIntent']> {
  const storage = requireStorage(ctx);
  const intent = await asBadRequest(() =>
    createUploadIntent(ctx.db, storage, {
      id: input.id,
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
  return {
    stagingId: intent.stagingId,
    upload: { ...intent.upload, method: 'PUT' as const },
    expiresAt: intent.expiresAt,
  };
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
    return (
      await consumeStagedUpload(tx.db, storage, {
        userId,
        stagingId: id,
        purpose: ICON_PURPOSE,
        finalKey: iconKey(userId, id),
        now: tx.now,
      })
    ).key;
  } catch (err) {
    if (err instanceof StagingError)
      throw badRequest('iconStagingId is not a completed, unused space-icon upload of this account');
    throw err;
  }
}

/**
 * Inside the space write's transaction: a copy of the icon `ref` names (the icon of a live space of
 * the account) under a key of its own, so replacing or removing either never touches the other;
 * 400 when `ref` names no such icon. The copy exists before the write commits: a caller whose
 * transaction fails deletes it (dropIcon).
 */
export async function copyIcon(tx: ServiceContext & { db: Knex.Transaction }, ref: string): Promise<string> {
  const storage = requireStorage(tx);
  const userId = ownerOf(tx);
  const source = iconKey(userId, ref.toLowerCase());
  if (!(await structureRepo.liveSpaceHasIcon(tx.db, userId, source)))
    throw badRequest('iconStorageRef is not the icon of a live space of this account');
  const object = await storage.get(source);
  // The row names an icon whose bytes are gone: the storage lost them, not the caller's doing.
  if (!object) throw new Error(`space icon object ${source} is missing`);
  const copy = iconKey(userId, randomUUID());
  await storage.put(copy, object.body, object.contentType);
  return copy;
}

/** The icon's short-lived download URL; null without an icon or without storage. */
export async function iconUrl(ctx: ServiceContext, key: string | null): Promise<string | null> {
  if (!key || !ctx.storage) return null;
  return (await ctx.storage.presignGet(key, ctx.config.storageDownloadUrlTtlSeconds)).url;
}

/** Deletes a replaced icon's object after the write committed (or a copy whose write failed); a failure leaves bytes behind, logged. */
export async function dropIcon(ctx: ServiceContext, key: string | null): Promise<void> {
  if (!key || !ctx.storage) return;
  try {
    await ctx.storage.delete(key);
  } catch (err) {
    ctx.log.error({ err, key }, 'a replaced space icon could not be deleted');
  }
}

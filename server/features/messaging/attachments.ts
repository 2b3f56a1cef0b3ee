/**
 * Message attachments (docs/messaging.md, "Attachments"): the upload intent and its completion on
 * top of server/storage/staging.ts, the download URL, and taking staged uploads into a message.
 */
import type { Knex } from 'knex';
import type { components } from '../../../generated/api.d.ts';
import { inTransaction, ownerOf, type PresetId, type ServiceContext } from '../../core/context.ts';
import { badRequest, notFound } from '../../core/errors.ts';
import { completeUpload, consumeStagedUpload, createUploadIntent, StagingError } from '../../storage/staging.ts';
import { asBadRequest, assertStaged, requireStorage } from './media.ts';
import { attachmentsRepo } from './repo/attachments.ts';
import { structureRepo } from './repo/structure.ts';

type Schemas = components['schemas'];

const ATTACHMENT_PURPOSE = 'message-attachment';

/** Where a sent attachment's bytes live; the attachment id is its staging id, so a retried move after a rollback finds the object already there. */
const attachmentKey = (userId: string, attachmentId: string) => `u/${userId}/messaging/attachments/${attachmentId}`;

export async function createIntent(
  ctx: ServiceContext,
  input: Schemas['AttachmentUploadIntentRequest'] & PresetId,
): Promise<Schemas['MessagingUploadIntent']> {
  const storage = requireStorage(ctx);
  const userId = ownerOf(ctx);
  const contentType = input.contentType.toLowerCase();
  if (!ctx.config.messageAttachmentTypes.includes(contentType))
    throw badRequest(`Attachments of type ${input.contentType} are not accepted`);
  return inTransaction(ctx, async (tx) => {
    if (!(await structureRepo.findLiveChannel(tx.db, userId, input.channelId)))
      throw badRequest('channelId is not a live channel of this account');
    const intent = await asBadRequest(() =>
      createUploadIntent(tx.db, storage, {
        id: input.id,
        userId,
        purpose: ATTACHMENT_PURPOSE,
        contentType,
        byteSize: input.byteSize,
        maxBytes: tx.config.messageAttachmentMaxBytes,
        allowedTypes: tx.config.messageAttachmentTypes,
        metadata: {
          channelId: input.channelId.toLowerCase(),
          fileName: input.fileName,
          width: input.width ?? null,
          height: input.height ?? null,
          durationMs: input.durationMs ?? null,
        },
        now: tx.now,
        urlTtlSeconds: tx.config.storageUploadUrlTtlSeconds,
        stagingTtlMs: tx.config.storageStagingTtlMs,
      }),
    );
    return {
      stagingId: intent.stagingId,
      upload: { ...intent.upload, method: 'PUT' as const },
      expiresAt: intent.expiresAt,
    };
  });
}

export async function complete(ctx: ServiceContext, stagingId: string): Promise<void> {
  const storage = requireStorage(ctx);
  const userId = ownerOf(ctx);
  await assertStaged(ctx.db, userId, stagingId, ATTACHMENT_PURPOSE, ctx.now, 'attachment');
  await asBadRequest(() => completeUpload(ctx.db, storage, { userId, stagingId, now: ctx.now }));
}

export async function accessUrl(ctx: ServiceContext, attachmentId: string): Promise<Schemas['AttachmentAccessUrl']> {
  const storage = requireStorage(ctx);
  const objectKey = await attachmentsRepo.findObjectKey(ctx.db, ownerOf(ctx), attachmentId);
  if (objectKey === null) throw notFound('Attachment not found');
  const signed = await storage.presignGet(objectKey, ctx.config.storageDownloadUrlTtlSeconds);
  return { url: signed.url, expiresAt: signed.expiresAt };
}

interface AttachmentMetadata {
  channelId?: string;
  fileName?: string;
  width?: number | null;
  height?: number | null;
  durationMs?: number | null;
}

/**
 * Inside the send's transaction, after the message row: takes each staged upload (an unexpired,
 * completed attachment upload of the account for this channel) into the message, in order. Any
 * that is not is 400 and the whole send rolls back.
 */
export async function attachStaged(
  tx: ServiceContext & { db: Knex.Transaction },
  messageId: string,
  channelId: string,
  stagingIds: readonly string[],
): Promise<void> {
  if (stagingIds.length === 0) return;
  const storage = requireStorage(tx);
  const userId = ownerOf(tx);
  for (const [position, raw] of stagingIds.entries()) {
    const stagingId = raw.toLowerCase();
    const refuse = () =>
      badRequest(`stagedAttachmentIds: ${raw} is not a completed, unused attachment upload for this channel`);
    const staged = await attachmentsRepo.findStaged(tx.db, userId, stagingId, ATTACHMENT_PURPOSE, tx.now);
    if (!staged) throw refuse();
    const metadata = (
      typeof staged.metadata === 'string' ? JSON.parse(staged.metadata) : staged.metadata
    ) as AttachmentMetadata;
    if (metadata.channelId !== channelId.toLowerCase()) throw refuse();
    let taken: Awaited<ReturnType<typeof consumeStagedUpload>>;
    try {
      taken = await consumeStagedUpload(tx.db, storage, {
        userId,
        stagingId,
        purpose: ATTACHMENT_PURPOSE,
        finalKey: attachmentKey(userId, stagingId),
        now: tx.now,
      });
    } catch (err) {
      if (err instanceof StagingError) throw refuse();
      throw err;
    }
    await attachmentsRepo.insert(tx.db, {
      id: stagingId,
      user_id: userId,
      message_id: messageId,
      position,
      object_key: taken.key,
      file_name: metadata.fileName ?? 'file',
      content_type: taken.contentType,
      byte_size: taken.byteSize,
      width: metadata.width ?? null,
      height: metadata.height ?? null,
      duration_ms: metadata.durationMs ?? null,
      created_at: tx.now,
    });
  }
}

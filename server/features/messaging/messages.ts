/** Messages: send (idempotent), edit, delete, pages, pins, read markers, mentions, link previews queued (docs/messaging.md). */
import { randomUUID } from 'node:crypto';
import type { Knex } from 'knex';
import type { components } from '../../../generated/api.d.ts';
import {
  inTransaction,
  oneStatement,
  ownerOf,
  type PresetId,
  readsAnswerAhead,
  type ServiceContext,
  StaleAnswer,
} from '../../core/context.ts';
import { badRequest, conflict, notFound, unavailable } from '../../core/errors.ts';
import { MessageCipher } from '../../crypto/messageCipher.ts';
import { toMemberSummary, type MediaRef } from '../members/index.ts';
import { attachStaged } from './attachments.ts';
import {
  dropPreviewImages,
  LINK_PREVIEW_ATTEMPTS,
  LINK_PREVIEW_QUEUE,
  pendingPreviews,
  queueLinkPreviews,
  syncLinkPreviews,
  toLinkPreviews,
  type StoredLinkPreview,
} from './linkPreviews.ts';
import { jsonValue } from './repo/json.ts';
import { type MessageReadRow, messagesRepo, type SendMessage, type StoredMessage } from './repo/messages.ts';
import { structureRepo } from './repo/structure.ts';
import { liveChannel } from './structure.ts';

type Schemas = components['schemas'];
type Message = Schemas['Message'];

/** Pins per channel. */
const MAX_PINS = 50;
/** Distinct mentions kept per message. */
const MAX_MENTIONS = 50;
const EXCERPT = 200;
/** `<@memberId>`: the one mention syntax. */
const MENTION = /<@([0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12})>/g;

const cipherOf = (ctx: ServiceContext) => new MessageCipher(ctx.config.messageEncryptionKeys);
const bytes = (value: Uint8Array) =>
  Buffer.isBuffer(value) ? value : Buffer.from(value.buffer, value.byteOffset, value.byteLength);

/** `sent`: the text a send has just sealed into the row, so it is not opened again. */
async function toMessage(
  ctx: ServiceContext,
  cipher: MessageCipher,
  row: MessageReadRow,
  sent?: string,
): Promise<Message> {
  const id = row.id!;
  // A message sent without text (attachments or a GIF only) stores the empty string, which no text can be.
  const text = sent ?? cipher.open(row.user_id, id, { keyId: row.key_id, data: bytes(row.content_enc) });
  let replyTo: Message['replyTo'] = null;
  if (row.reply_id) {
    const deleted = row.reply_deleted_at !== null;
    replyTo = {
      messageId: row.reply_id,
      authorMemberId: row.reply_author_id!,
      excerpt: deleted
        ? null
        : [...cipher.open(row.user_id, row.reply_id, { keyId: row.reply_key_id!, data: bytes(row.reply_content_enc!) })]
            .slice(0, EXCERPT)
            .join(''),
      deleted,
    };
  }
  const avatar = jsonValue<MediaRef>(row.author_avatar) ?? null;
  return {
    id,
    channelId: row.channel_id,
    authorMemberId: row.author_member_id,
    authorMemberAvatarUrl: toMemberSummary({
      id: row.author_member_id,
      name: '',
      display_name: null,
      archived_at: null,
      avatar,
    }).avatarUrl,
    content: text === '' ? null : text,
    createdAt: Number(row.created_at),
    editedAt: row.edited_at === null ? null : Number(row.edited_at),
    attachments: jsonValue<Message['attachments']>(row.attachments) ?? [],
    linkPreviews: await toLinkPreviews(
      ctx,
      cipher,
      row.user_id,
      jsonValue<StoredLinkPreview[]>(row.link_previews) ?? [],
    ),
    gif: jsonValue<Message['gif']>(row.gif) ?? null,
    mentions: jsonValue<Message['mentions']>(row.mentions) ?? [],
    replyTo,
  };
}

/** Rows to messages, in order (image URLs of link previews are signed in-process, no statement). */
function toMessages(ctx: ServiceContext, rows: readonly MessageReadRow[]): Promise<Message[]> {
  const cipher = cipherOf(ctx);
  return Promise.all(rows.map((r) => toMessage(ctx, cipher, r)));
}

/** The rows of a channel read: 404 when the channel is not found, else its messages and pins. */
function readRows(rows: MessageReadRow[]): { messages: MessageReadRow[]; pinned: string[] } {
  if (rows.length === 0) throw notFound('Channel not found');
  return { messages: rows.filter((r) => r.id !== null), pinned: jsonValue<string[]>(rows[0]!.pinned_ids) ?? [] };
}

// ---- pages ----

export async function listMessages(
  ctx: ServiceContext,
  channelId: string,
  q: { limit?: number; beforeCreatedAt?: number; beforeId?: string },
): Promise<Schemas['MessagePage']> {
  const userId = ownerOf(ctx);
  const limit = q.limit ?? 50;
  if ((q.beforeCreatedAt === undefined) !== (q.beforeId === undefined))
    throw badRequest('beforeCreatedAt and beforeId go together');
  const rows =
    q.beforeCreatedAt === undefined
      ? await messagesRepo.pageFirst(ctx.db, channelId, userId, limit + 1)
      : await messagesRepo.pageBefore(
          ctx.db,
          channelId,
          userId,
          { createdAt: q.beforeCreatedAt, id: q.beforeId! },
          limit + 1,
        );
  const { messages, pinned } = readRows(rows);
  const items = await toMessages(ctx, messages.slice(0, limit));
  const last = items[items.length - 1];
  return {
    items,
    nextCursor: messages.length > limit && last ? { beforeCreatedAt: last.createdAt, beforeId: last.id } : null,
    pinnedMessageIds: pinned,
  };
}

export async function listNewer(
  ctx: ServiceContext,
  channelId: string,
  q: { limit?: number; afterCreatedAt: number; afterId: string },
): Promise<Schemas['MessageNewerPage']> {
  const userId = ownerOf(ctx);
  const limit = q.limit ?? 50;
  const { messages, pinned } = readRows(
    await messagesRepo.pageAfter(ctx.db, channelId, userId, { createdAt: q.afterCreatedAt, id: q.afterId }, limit + 1),
  );
  const ascending = await toMessages(ctx, messages.slice(0, limit));
  const newest = ascending[ascending.length - 1];
  return {
    items: ascending.reverse(),
    nextCursor: messages.length > limit && newest ? { afterCreatedAt: newest.createdAt, afterId: newest.id } : null,
    pinnedMessageIds: pinned,
  };
}

export async function listAround(
  ctx: ServiceContext,
  channelId: string,
  q: { anchorMessageId: string; beforeLimit?: number; afterLimit?: number },
): Promise<Schemas['MessageAroundPage']> {
  const userId = ownerOf(ctx);
  const beforeLimit = q.beforeLimit ?? 25;
  const afterLimit = q.afterLimit ?? 25;
  const anchorRows = readRows(await messagesRepo.oneMessage(ctx.db, q.anchorMessageId, channelId, userId));
  const anchor = anchorRows.messages[0];
  if (!anchor) throw notFound('Message not found');
  const key = { createdAt: Number(anchor.created_at), id: anchor.id! };
  // The anchor and older (the anchor comes first), then newer.
  const older = readRows(await messagesRepo.pageUpTo(ctx.db, channelId, userId, key, beforeLimit + 2));
  const newer = readRows(await messagesRepo.pageAfter(ctx.db, channelId, userId, key, afterLimit + 1));
  const olderItems = await toMessages(ctx, older.messages.slice(0, beforeLimit + 1));
  const newerItems = await toMessages(ctx, newer.messages.slice(0, afterLimit));
  const oldest = olderItems[olderItems.length - 1]!;
  const newest = newerItems[newerItems.length - 1];
  return {
    items: [...newerItems.reverse(), ...olderItems],
    olderCursor:
      older.messages.length > beforeLimit + 1 ? { beforeCreatedAt: oldest.createdAt, beforeId: oldest.id } : null,
    newerCursor:
      newer.messages.length > afterLimit && newest ? { afterCreatedAt: newest.createdAt, afterId: newest.id } : null,
    pinnedMessageIds: older.pinned,
  };
}

async function readOne(ctx: ServiceContext, messageId: string, channelId: string): Promise<Message> {
  const { messages } = readRows(await messagesRepo.oneMessage(ctx.db, messageId, channelId, ownerOf(ctx)));
  if (!messages[0]) throw notFound('Message not found');
  return toMessage(ctx, cipherOf(ctx), messages[0]);
}

// ---- writes ----

async function assertAuthorMember(db: Knex, userId: string, memberId: string): Promise<void> {
  if (!(await messagesRepo.memberIsLive(db, userId, memberId)))
    throw badRequest('memberId is not a live, non-archived member of this account');
}

/** The `<@id>` ids of a text: distinct, lower case, in order of first appearance, at most MAX_MENTIONS. */
const mentionCandidates = (content: string) =>
  [...new Set([...content.matchAll(MENTION)].map((m) => m[1]!.toLowerCase()))].slice(0, MAX_MENTIONS);

/** Members the text mentions with `<@id>` that may be mentioned in the channel, in order of first appearance. */
async function mentionsIn(db: Knex, userId: string, sideSystemId: string | null, content: string): Promise<string[]> {
  const ids = mentionCandidates(content);
  if (ids.length === 0) return [];
  const found = new Set(await messagesRepo.mentionable(db, userId, ids, sideSystemId));
  return ids.filter((id) => found.has(id));
}

class AlreadySent extends Error {}

async function retried(ctx: ServiceContext, existing: StoredMessage, channelId: string): Promise<Message> {
  if (existing.channel_id !== channelId.toLowerCase() || existing.deleted_at !== null)
    throw conflict('clientMutationId was already used for another message');
  return readOne(ctx, existing.id, channelId);
}

type SendInput = Schemas['SendMessageRequest'] & PresetId & { readonly previewIds?: readonly string[] };

/**
 * Sends a message. With a clientMutationId already used by the account, returns the first message
 * (`created: false`) instead; the unique index on (account, clientMutationId) makes concurrent
 * retries meet there, and only the first writes anything.
 *
 * A message without attachments (the common case) is one statement (messagesRepo.send, docs/data-access.md
 * "Writes in one statement"): the checks, the channel's next sequence number taken under its row
 * lock, the message, the channel's counters, the link previews with their queued fetches and the
 * `message.created` event. A retry costs one more (the stored message, read), and a retry that
 * raced the first send two more (found, then read). Staged attachments move objects in storage
 * and lock their staging rows, so a message with attachments takes the transactional path.
 */
export async function sendMessage(
  ctx: ServiceContext,
  channelId: string,
  input: SendInput,
): Promise<{ created: boolean; message: Message }> {
  const content = input.content ?? '';
  const attachmentIds = input.stagedAttachmentIds ?? [];
  const gif = input.gifMetadata ?? null;
  if (content === '' && attachmentIds.length === 0 && gif === null)
    throw badRequest('content is required unless attachments or a GIF are sent');
  if (attachmentIds.length > 0) return sendWithAttachments(ctx, channelId, input);
  const userId = ownerOf(ctx);
  const mutationId = input.clientMutationId ?? null;
  const id = input.id ?? randomUUID();
  const sealed = cipherOf(ctx).seal(userId, id, content);
  const events = ctx.events.rows(ctx, [
    { type: 'message.created', area: 'messaging', data: { id, channelId: channelId.toLowerCase() } },
  ]);
  const row: SendMessage = {
    id,
    user_id: userId,
    channel_id: channelId,
    author_member_id: input.memberId,
    key_id: sealed.keyId,
    content_enc: sealed.data,
    reply_to_id: input.replyToMessageId ?? null,
    mention_candidates: mentionCandidates(content),
    gif: gif === null ? null : JSON.stringify(gif),
    client_mutation_id: mutationId,
    created_at: ctx.now,
  };
  const ahead = await answerAhead(ctx, row, content);
  const outcome = await oneStatement(
    ctx,
    (db) =>
      messagesRepo.send(db, {
        row,
        // Fetched later by the link_preview job, never while the sender waits.
        previews: pendingPreviews(ctx, content, input.previewIds),
        previewQueue: LINK_PREVIEW_QUEUE,
        previewAttempts: LINK_PREVIEW_ATTEMPTS,
        events,
        ahead: ahead?.digest ?? null,
      }),
    ahead && { status: 201, body: ahead.message },
  );
  if (outcome.sent && ahead) return { created: true, message: ahead.message };
  if (outcome.sent) return { created: true, message: await toMessage(ctx, cipherOf(ctx), outcome, content) };
  // The refusals in the order the transactional send checks them; nothing was written.
  if (outcome.existing_id !== null)
    return {
      created: false,
      message: await retried(
        ctx,
        { id: outcome.existing_id, channel_id: outcome.existing_channel_id!, deleted_at: outcome.existing_deleted_at },
        channelId,
      ),
    };
  if (!outcome.channel_live) throw notFound('Channel not found');
  if (!outcome.author_live) throw badRequest('memberId is not a live, non-archived member of this account');
  if (!outcome.reply_ok) throw badRequest('replyToMessageId is not a message of this channel');
  // What the answer read ahead was built from changed before the statement: it wrote nothing.
  if (outcome.ahead_ok === false) throw new StaleAnswer();
  // Archived while the send waited for the channel's lock.
  if (!outcome.locked) throw notFound('Channel not found');
  // A concurrent send with the same clientMutationId committed first.
  const existing = mutationId === null ? null : await messagesRepo.findByMutation(ctx.db, userId, mutationId);
  if (!existing) throw new Error(`message ${id} was not written and no message has its clientMutationId`);
  return { created: false, message: await retried(ctx, existing, channelId) };
}

/**
 * A keyed send (ctx.keyed, its key taken by its write, docs/api.md "Safe retries") answers with the message it
 * writes, which shows more than the request (the author's avatar, the reply excerpt, the mentions):
 * read ahead (messagesRepo.sendAhead) and built here, so that the send's one statement can store
 * that answer under the key. The send writes only if those inputs are still what was read (their
 * digest); otherwise it writes nothing and the request runs again in a transaction (StaleAnswer).
 * Undefined without a key to be taken by the write, and when the send would not write (a refusal, a used
 * client mutation id): that request takes the transactional path.
 */
async function answerAhead(
  ctx: ServiceContext,
  row: SendMessage,
  content: string,
): Promise<{ digest: string; message: Message } | undefined> {
  if (!readsAnswerAhead(ctx)) return undefined;
  const read = await messagesRepo.sendAhead(ctx.db, row);
  if (!read.channel_live || !read.author_live || !read.reply_ok || read.duplicate) return undefined;
  const message = await toMessage(
    ctx,
    cipherOf(ctx),
    {
      ...read,
      channel_found: read.channel_id!,
      pinned_ids: [],
      id: row.id,
      user_id: row.user_id,
      channel_id: read.channel_id!,
      key_id: row.key_id,
      content_enc: row.content_enc,
      created_at: row.created_at,
      edited_at: null,
      attachments: [],
      link_previews: [],
    },
    content,
  );
  return { digest: read.digest, message };
}

/** The transactional send, for a message with staged attachments (their objects move in storage). */
async function sendWithAttachments(
  ctx: ServiceContext,
  channelId: string,
  input: SendInput,
): Promise<{ created: boolean; message: Message }> {
  const userId = ownerOf(ctx);
  const mutationId = input.clientMutationId ?? null;
  const content = input.content ?? '';
  const attachmentIds = input.stagedAttachmentIds ?? [];
  const gif = input.gifMetadata ?? null;
  if (!ctx.storage) throw unavailable('Object storage is not configured on this server');
  const findExisting = async (): Promise<StoredMessage | null> =>
    mutationId === null ? null : messagesRepo.findByMutation(ctx.db, userId, mutationId);
  if (mutationId !== null) {
    const existing = await findExisting();
    if (existing) return { created: false, message: await retried(ctx, existing, channelId) };
  }
  try {
    const message = await inTransaction(ctx, async (tx) => {
      const channel = await liveChannel(tx.db, userId, channelId, true);
      await assertAuthorMember(tx.db, userId, input.memberId);
      if (input.replyToMessageId !== undefined) {
        const parent = await messagesRepo.findLiveInChannel(tx.db, userId, channelId, input.replyToMessageId);
        if (!parent) throw badRequest('replyToMessageId is not a message of this channel');
      }
      const mentions = await mentionsIn(tx.db, userId, channel.side_system_id, content);
      const id = input.id ?? randomUUID();
      const sealed = cipherOf(tx).seal(userId, id, content);
      const seq = Number(channel.last_seq) + 1;
      const inserted = await messagesRepo.insert(tx.db, {
        id,
        user_id: userId,
        channel_id: channelId,
        seq,
        author_member_id: input.memberId,
        key_id: sealed.keyId,
        content_enc: sealed.data,
        reply_to_id: input.replyToMessageId ?? null,
        mention_member_ids: mentions,
        gif: gif === null ? null : JSON.stringify(gif),
        client_mutation_id: mutationId,
        created_at: tx.now,
      });
      if (inserted === null) throw new AlreadySent();
      // After the message row: a concurrent retry waits on the unique index above and never reaches its uploads.
      await attachStaged(tx, id, channelId, attachmentIds);
      // Fetched later by the link_preview job, never while the sender waits.
      await queueLinkPreviews(tx, id, content, input.previewIds);
      await messagesRepo.channelSent(tx.db, channelId, seq);
      await tx.events.emit(tx, { type: 'message.created', area: 'messaging', data: { id, channelId: channel.id } });
      return readOne(tx, id, channelId);
    });
    return { created: true, message };
  } catch (err) {
    if (!(err instanceof AlreadySent)) throw err;
    const existing = await findExisting();
    if (!existing) throw err;
    return { created: false, message: await retried(ctx, existing, channelId) };
  }
}

/** A live message of the account in a live channel, with that channel locked; else 404. */
async function lockMessage(tx: ServiceContext, messageId: string) {
  const userId = ownerOf(tx);
  const row = await messagesRepo.findLive(tx.db, userId, messageId);
  if (!row) throw notFound('Message not found');
  const channel = await structureRepo.findLiveChannel(tx.db, userId, row.channel_id, true);
  if (!channel) throw notFound('Message not found');
  const locked = await messagesRepo.lockLive(tx.db, messageId);
  if (!locked) throw notFound('Message not found');
  // The stored id (canonical lower case), whatever case the path wrote it in.
  return { channel, id: locked.id, seq: Number(locked.seq) };
}

/**
 * Author rule: the account is the author of every message in its channels, so any key of the
 * account with messaging:read_write may edit or delete them; another account's message is 404.
 */
export async function editMessage(ctx: ServiceContext, messageId: string, content: string): Promise<Message> {
  const userId = ownerOf(ctx);
  const { message, removedImages } = await inTransaction(ctx, async (tx) => {
    const { channel, id } = await lockMessage(tx, messageId);
    const mentions = await mentionsIn(tx.db, userId, channel.side_system_id, content);
    const sealed = cipherOf(tx).seal(userId, id, content);
    await messagesRepo.updateContent(tx.db, id, sealed, mentions, tx.now);
    const removedImages = await syncLinkPreviews(tx, id, content);
    await tx.events.emit(tx, { type: 'message.edited', area: 'messaging', data: { id, channelId: channel.id } });
    return { message: await readOne(tx, id, channel.id), removedImages };
  });
  // The images of previews whose links the edit removed go once it has committed.
  await dropPreviewImages(ctx, removedImages);
  return message;
}

export async function deleteMessage(ctx: ServiceContext, messageId: string): Promise<void> {
  await inTransaction(ctx, async (tx) => {
    const { channel, seq, id } = await lockMessage(tx, messageId);
    await messagesRepo.markDeleted(tx.db, messageId, tx.now);
    await messagesRepo.deletePin(tx.db, channel.id, messageId);
    if (seq > Number(channel.read_seq)) await messagesRepo.unreadDown(tx.db, channel.id);
    await tx.events.emit(tx, { type: 'message.deleted', area: 'messaging', data: { id, channelId: channel.id } });
  });
}

// ---- pins ----

export async function listPins(ctx: ServiceContext, channelId: string): Promise<Message[]> {
  const { messages } = readRows(await messagesRepo.pinned(ctx.db, channelId, ownerOf(ctx)));
  return toMessages(ctx, messages);
}

export async function pin(ctx: ServiceContext, channelId: string, messageId: string): Promise<void> {
  const userId = ownerOf(ctx);
  await inTransaction(ctx, async (tx) => {
    const channel = await liveChannel(tx.db, userId, channelId, true);
    const message = await messagesRepo.findLiveInChannel(tx.db, userId, channelId, messageId);
    if (!message) throw badRequest('messageId is not a message of this channel');
    const pins = await messagesRepo.pinIds(tx.db, channelId);
    if (pins.includes(messageId.toLowerCase())) return;
    if (pins.length >= MAX_PINS) throw badRequest(`A channel has at most ${MAX_PINS} pinned messages`);
    await messagesRepo.insertPin(tx.db, userId, channelId, messageId, tx.now);
    await tx.events.emit(tx, {
      type: 'message.pinned',
      area: 'messaging',
      data: { id: message.id, channelId: channel.id },
    });
  });
}

export async function unpin(ctx: ServiceContext, channelId: string, messageId: string): Promise<void> {
  const userId = ownerOf(ctx);
  await inTransaction(ctx, async (tx) => {
    const channel = await liveChannel(tx.db, userId, channelId, true);
    const message = await messagesRepo.findLiveInChannel(tx.db, userId, channelId, messageId);
    if (!message) throw notFound('Message not found');
    await messagesRepo.deletePin(tx.db, channelId, messageId);
    await tx.events.emit(tx, {
      type: 'message.unpinned',
      area: 'messaging',
      data: { id: message.id, channelId: channel.id },
    });
  });
}

// ---- read state ----

export async function markRead(
  ctx: ServiceContext,
  channelId: string,
  lastReadMessageId: string | undefined,
): Promise<void> {
  const userId = ownerOf(ctx);
  await inTransaction(ctx, async (tx) => {
    const channel = await liveChannel(tx.db, userId, channelId, true);
    // Other devices of the account move their unread marks along.
    const read = () => tx.events.emit(tx, { type: 'channel.read', area: 'messaging', data: { id: channelId } });
    if (lastReadMessageId === undefined) {
      await messagesRepo.setRead(tx.db, channelId, channel.last_seq, 0);
      await read();
      return;
    }
    const message = await messagesRepo.findLiveInChannel(tx.db, userId, channelId, lastReadMessageId);
    if (!message) throw badRequest('lastReadMessageId is not a message of this channel');
    // Counted on messaging_messages_seq: the live messages after the marker, no more.
    const n = await messagesRepo.liveAfter(tx.db, channelId, message.seq);
    await messagesRepo.setRead(tx.db, channelId, message.seq, n);
    await read();
  });
}

// ---- mentions ----

export async function mentionables(
  ctx: ServiceContext,
  q: { channelId: string; query?: string; limit?: number },
): Promise<Schemas['MessagingMemberOption'][]> {
  const userId = ownerOf(ctx);
  const channel = await liveChannel(ctx.db, userId, q.channelId);
  return memberOptions(ctx.db, userId, { sideSystemId: channel.side_system_id, query: q.query, limit: q.limit ?? 10 });
}

/** Live, non-archived members of the account by name (optionally of one side system, matching a text). */
export async function memberOptions(
  db: Knex,
  userId: string,
  options: { sideSystemId?: string | null; query?: string; limit?: number },
): Promise<Schemas['MessagingMemberOption'][]> {
  const text = options.query?.trim().toLowerCase();
  const rows = await messagesRepo.memberOptions(db, userId, {
    sideSystemId: options.sideSystemId || null,
    text: text || null,
    limit: options.limit ?? null,
  });
  return rows.map((r) => ({
    memberId: r.id,
    name: r.name,
    displayName: r.display_name ?? '',
    avatarUrl: toMemberSummary({ ...r, archived_at: null }).avatarUrl,
  }));
}

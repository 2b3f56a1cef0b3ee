import type { HandlerMap } from '../../http/handlers.ts';
import * as attachments from './attachments.ts';
import * as gifs from './gifs.ts';
import * as icons from './icons.ts';
import * as previews from './linkPreviews.ts';
import * as messages from './messages.ts';
import * as prefs from './preferences.ts';
import * as structure from './structure.ts';

const done = { status: 204 } as const;

export const messagingHandlers = {
  getMessagingBootstrap: async (_i, ctx) => ({ status: 200, body: await structure.bootstrap(ctx.service()) }),

  listMessagingSpaces: async (_i, ctx) => ({ status: 200, body: await structure.listSpaces(ctx.service()) }),
  createMessagingSpace: async ({ body }, ctx) => ({
    status: 201,
    body: await structure.createSpace(ctx.service(), body),
  }),
  reorderMessagingSpaces: async ({ body }, ctx) => (
    await structure.reorderSpaces(ctx.service(), body.orderedSpaceIds), done
  ),
  createMessagingSpaceIconUploadIntent: async ({ body }, ctx) => ({
    status: 201,
    body: await icons.createIconIntent(ctx.service(), body),
  }),
  completeMessagingSpaceIconUpload: async ({ body }, ctx) => (
    await icons.completeIcon(ctx.service(), body.stagingId), done
  ),
  updateMessagingSpace: async ({ path, body }, ctx) => ({
    status: 200,
    body: await structure.updateSpace(ctx.service(), path.spaceId, body),
  }),
  archiveMessagingSpace: async ({ path }, ctx) => (await structure.archiveSpace(ctx.service(), path.spaceId), done),

  listMessagingCategories: async ({ path }, ctx) => ({
    status: 200,
    body: await structure.listCategories(ctx.service(), path.spaceId),
  }),
  createMessagingCategory: async ({ path, body }, ctx) => ({
    status: 201,
    body: await structure.createCategory(ctx.service(), path.spaceId, body.name),
  }),
  reorderMessagingCategories: async ({ path, body }, ctx) => (
    await structure.reorderCategories(ctx.service(), path.spaceId, body.orderedCategoryIds), done
  ),
  renameMessagingCategory: async ({ path, body }, ctx) => ({
    status: 200,
    body: await structure.updateCategory(ctx.service(), path.categoryId, { name: body.name }),
  }),
  setMessagingCategoryCollapsed: async ({ path, body }, ctx) => ({
    status: 200,
    body: await structure.updateCategory(ctx.service(), path.categoryId, { collapsed: body.collapsed }),
  }),
  deleteMessagingCategory: async ({ path }, ctx) => (
    await structure.deleteCategory(ctx.service(), path.categoryId), done
  ),

  listMessagingChannels: async ({ path }, ctx) => ({
    status: 200,
    body: await structure.listChannels(ctx.service(), path.spaceId),
  }),
  createMessagingChannel: async ({ path, body }, ctx) => ({
    status: 201,
    body: await structure.createChannel(ctx.service(), path.spaceId, body),
  }),
  reorderMessagingChannels: async ({ path, body }, ctx) => (
    await structure.reorderChannels(ctx.service(), path.spaceId, body.orderedChannelIds), done
  ),
  updateMessagingChannel: async ({ path, body }, ctx) => ({
    status: 200,
    body: await structure.updateChannel(ctx.service(), path.channelId, body),
  }),
  moveMessagingChannel: async ({ path, body }, ctx) => ({
    status: 200,
    body: await structure.moveChannel(ctx.service(), path.channelId, body.categoryId),
  }),
  archiveMessagingChannel: async ({ path }, ctx) => (
    await structure.archiveChannel(ctx.service(), path.channelId), done
  ),

  listMessages: async ({ path, query }, ctx) => ({
    status: 200,
    body: await messages.listMessages(ctx.service(), path.channelId, query ?? {}),
  }),
  listNewerMessages: async ({ path, query }, ctx) => ({
    status: 200,
    body: await messages.listNewer(ctx.service(), path.channelId, query),
  }),
  listMessagesAround: async ({ path, query }, ctx) => ({
    status: 200,
    body: await messages.listAround(ctx.service(), path.channelId, query),
  }),
  sendMessage: async ({ path, body }, ctx) => {
    const { created, message } = await messages.sendMessage(ctx.service(), path.channelId, body);
    return created ? { status: 201, body: message } : { status: 200, body: message };
  },
  editMessage: async ({ path, body }, ctx) => ({
    status: 200,
    body: await messages.editMessage(ctx.service(), path.messageId, body.content),
  }),
  deleteMessage: async ({ path }, ctx) => (await messages.deleteMessage(ctx.service(), path.messageId), done),

  listMessagingPins: async ({ path }, ctx) => ({
    status: 200,
    body: await messages.listPins(ctx.service(), path.channelId),
  }),
  pinMessage: async ({ path, body }, ctx) => (await messages.pin(ctx.service(), path.channelId, body.messageId), done),
  unpinMessage: async ({ path }, ctx) => (await messages.unpin(ctx.service(), path.channelId, path.messageId), done),
  markMessagingChannelRead: async ({ path, body }, ctx) => (
    await messages.markRead(ctx.service(), path.channelId, body?.lastReadMessageId), done
  ),
  createMessagingAttachmentUploadIntent: async ({ body }, ctx) => ({
    status: 201,
    body: await attachments.createIntent(ctx.service(), body),
  }),
  completeMessagingAttachmentUpload: async ({ body }, ctx) => (
    await attachments.complete(ctx.service(), body.stagingId), done
  ),
  getMessagingAttachmentAccessUrl: async ({ path }, ctx) => ({
    status: 200,
    body: await attachments.accessUrl(ctx.service(), path.attachmentId),
  }),
  dismissMessagingLinkPreview: async ({ path }, ctx) => (
    await previews.dismissPreview(ctx.service(), path.previewId), done
  ),
  refreshMessagingLinkPreview: async ({ path }, ctx) => (
    await previews.refreshPreview(ctx.service(), path.previewId), done
  ),
  searchMessagingGifs: async ({ query }, ctx) => ({ status: 200, body: await gifs.search(ctx.service(), query) }),
  browseMessagingGifs: async ({ query }, ctx) => ({ status: 200, body: await gifs.browse(ctx.service(), query ?? {}) }),
  listMessagingGifCategories: async (_i, ctx) => ({ status: 200, body: await gifs.categories(ctx.service()) }),
  listMessagingMentionables: async ({ query }, ctx) => ({
    status: 200,
    body: await messages.mentionables(ctx.service(), query),
  }),

  getMessagingChatAs: async ({ query }, ctx) => ({ status: 200, body: await prefs.getChatAs(ctx.service(), query) }),
  setMessagingChatAs: async ({ body }, ctx) => ({ status: 200, body: await prefs.setChatAs(ctx.service(), body) }),
  listMessagingChatAsMembers: async (_i, ctx) => ({ status: 200, body: await prefs.chatAsMembers(ctx.service()) }),
  getMessagingLastViewedRoute: async (_i, ctx) => ({ status: 200, body: await prefs.getLastViewed(ctx.service()) }),
  setMessagingLastViewedRoute: async ({ body }, ctx) => ({
    status: 200,
    body: await prefs.setLastViewed(ctx.service(), body),
  }),
  getMessagingEmojiPreferences: async (_i, ctx) => ({ status: 200, body: await prefs.getEmoji(ctx.service()) }),
  setMessagingEmojiPreferences: async ({ body }, ctx) => ({
    status: 200,
    body: await prefs.setEmoji(ctx.service(), body),
  }),
  getMessagingGifPreferences: async (_i, ctx) => ({ status: 200, body: await prefs.getGif(ctx.service()) }),
  setMessagingGifPreferences: async ({ body }, ctx) => ({ status: 200, body: await prefs.setGif(ctx.service(), body) }),
} satisfies Partial<HandlerMap>;

import { DomainError, notFound } from '../../core/errors.ts';
import type { HandlerMap } from '../../http/handlers.ts';
import * as gallery from './gallery.ts';
import * as guestbook from './guestbook.ts';
import { syncOauth } from './identities.ts';
import * as poll from './poll.ts';
import * as profile from './profile.ts';

/** On friend routes every 404 has the body of an unknown friend, whatever is missing or hidden. */
const FRIEND_NOT_FOUND = 'Friend not found';

export const socialHandlers = {
  getSocial: async (_i, ctx) => ({ status: 200, body: await profile.getSection(ctx.service()) }),
  updateSocial: async ({ body }, ctx) => {
    await profile.updateTheme(ctx.service(), body);
    return { status: 204 };
  },
  createSocialLink: async ({ body }, ctx) => ({ status: 201, body: await profile.createLink(ctx.service(), body) }),
  updateSocialLink: async ({ path, body }, ctx) => ({
    status: 200,
    body: await profile.updateLink(ctx.service(), path.linkId, body),
  }),
  deleteSocialLink: async ({ path }, ctx) => {
    await profile.deleteLink(ctx.service(), path.linkId);
    return { status: 204 };
  },
  createSocialWidget: async ({ body }, ctx) => ({ status: 201, body: await profile.createWidget(ctx.service(), body) }),
  updateSocialWidget: async ({ path, body }, ctx) => ({
    status: 200,
    body: await profile.updateWidget(ctx.service(), path.widgetId, body),
  }),
  deleteSocialWidget: async ({ path }, ctx) => {
    await profile.deleteWidget(ctx.service(), path.widgetId);
    return { status: 204 };
  },
  reorderSocial: async ({ body }, ctx) => {
    await profile.reorder(ctx.service(), body);
    return { status: 204 };
  },
  syncSocialOauth: async (_i, ctx) => ({ status: 200, body: await syncOauth(ctx.service()) }),
  getFriendSocial: async ({ path }, ctx) => ({
    status: 200,
    body: await profile.getFriendSection(await ctx.friend(path.friendUserId)),
  }),

  listSocialGallery: async ({ query }, ctx) => ({
    status: 200,
    body: await gallery.list(ctx.service(), query.limit ?? 50, query.cursor),
  }),
  uploadSocialGalleryImage: async ({ body }, ctx) => {
    // The pipeline admitted only the four image types; the bytes must be of the one declared.
    const declared = (ctx.req.get('content-type') ?? '').split(';')[0]!.trim().toLowerCase();
    const { created, image } = await gallery.upload(ctx.service(), declared, body);
    return created ? { status: 201, body: image } : { status: 200, body: image };
  },
  getSocialGalleryImage: async ({ path, query }, ctx) => {
    const caller = ctx.service();
    gallery.requireGalleryStorage(caller); // 503 first, whoever asks
    const ifNoneMatch = ctx.req.get('if-none-match');
    const owner =
      query.ownerUserId !== undefined && query.ownerUserId !== caller.access.ownerId ? query.ownerUserId : null;
    if (!owner) return gallery.readOwn(caller, path.sha256, ifNoneMatch);
    let fctx: Awaited<ReturnType<typeof ctx.friend>>;
    try {
      fctx = await ctx.friend(owner);
    } catch (err) {
      // No visible friendship: the same 404 as an unknown image.
      if (err instanceof DomainError && err.kind === 'not_found') throw notFound(gallery.GALLERY_IMAGE_NOT_FOUND);
      throw err;
    }
    return gallery.readForFriend(fctx, path.sha256, ifNoneMatch);
  },
  deleteSocialGalleryImage: async ({ path }, ctx) => {
    await gallery.remove(ctx.service(), path.sha256);
    return { status: 204 };
  },

  listGuestbookMessages: async ({ path, query }, ctx) => ({
    status: 200,
    body: await guestbook.listThreads(ctx.service(), path.widgetId, query.limit ?? 25, query.cursor),
  }),
  postGuestbookMessage: async ({ path, body }, ctx) => ({
    status: 201,
    body: await guestbook.post(ctx.service(), path.widgetId, body),
  }),
  deleteGuestbookMessage: async ({ path }, ctx) => {
    await guestbook.remove(ctx.service(), path.widgetId, path.messageId);
    return { status: 204 };
  },
  updateGuestbookMessage: async ({ path, body }, ctx) => {
    await guestbook.setHidden(ctx.service(), path.widgetId, path.messageId, body.hiddenByOwner);
    return { status: 204 };
  },
  blockGuestbookAuthor: async ({ path, body }, ctx) => {
    await guestbook.blockAuthor(ctx.service(), path.widgetId, body);
    return { status: 204 };
  },
  postFriendGuestbookMessage: async ({ path, body }, ctx) => ({
    status: 201,
    body: await guestbook.post(await ctx.friend(path.friendUserId), path.widgetId, body, FRIEND_NOT_FOUND),
  }),

  getPoll: async ({ path }, ctx) => ({ status: 200, body: await poll.getState(ctx.service(), path.widgetId) }),
  votePoll: async ({ path, body }, ctx) => ({ status: 200, body: await poll.vote(ctx.service(), path.widgetId, body) }),
  getFriendPoll: async ({ path }, ctx) => ({
    status: 200,
    body: await poll.getState(await ctx.friend(path.friendUserId), path.widgetId, FRIEND_NOT_FOUND),
  }),
  voteFriendPoll: async ({ path, body }, ctx) => ({
    status: 200,
    body: await poll.vote(await ctx.friend(path.friendUserId), path.widgetId, body, FRIEND_NOT_FOUND),
  }),
} satisfies Partial<HandlerMap>;

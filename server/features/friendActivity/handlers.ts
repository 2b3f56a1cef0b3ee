import type { HandlerMap } from '../../http/handlers.ts';
import * as friendActivity from './service.ts';

/**
 * Friend-scoped activity routes: each resolves the friendship (404 when it is not visible), the
 * hot reads (front, history, notes) and a note's create inside their one statement
 * (friendInStatement), the rest first.
 */
export const friendActivityHandlers = {
  getFriendFront: async ({ path }, ctx) => {
    const fctx = ctx.friendInStatement(path.friendUserId);
    return { status: 200, body: await friendActivity.getFront(fctx) };
  },
  setFriendFront: async ({ path, body }, ctx) => {
    const fctx = await ctx.friend(path.friendUserId);
    await friendActivity.setFront(fctx, body.memberId);
    return { status: 204 };
  },
  startFriendFronting: async ({ path, body }, ctx) => {
    const fctx = await ctx.friend(path.friendUserId);
    await friendActivity.startFront(fctx, body.memberId);
    return { status: 204 };
  },
  stopFriendFronting: async ({ path }, ctx) => {
    const fctx = await ctx.friend(path.friendUserId);
    await friendActivity.stopFront(fctx, path.memberId);
    return { status: 204 };
  },
  clearFriendTierPresence: async ({ path }, ctx) => {
    const fctx = await ctx.friend(path.friendUserId);
    await friendActivity.clearPresence(fctx, path.memberId);
    return { status: 204 };
  },
  reorderFriendFront: async ({ path, body }, ctx) => {
    const fctx = await ctx.friend(path.friendUserId);
    await friendActivity.reorder(fctx, body.memberIds);
    return { status: 204 };
  },
  listFriendFrontWritableMembers: async ({ path }, ctx) => {
    const fctx = await ctx.friend(path.friendUserId);
    return { status: 200, body: await friendActivity.writableMemberIds(fctx) };
  },
  getFriendFrontHistory: async ({ path, query }, ctx) => {
    const fctx = ctx.friendInStatement(path.friendUserId);
    return { status: 200, body: await friendActivity.history(fctx, query) };
  },
  getFriendFrontHistoryMonth: async ({ path, query }, ctx) => {
    const fctx = await ctx.friend(path.friendUserId);
    return { status: 200, body: await friendActivity.month(fctx, query) };
  },
  listFriendEntries: async ({ path, query }, ctx) => {
    const fctx = ctx.friendInStatement(path.friendUserId);
    return { status: 200, body: await friendActivity.listNotes(fctx, query) };
  },
  createFriendEntry: async ({ path, body }, ctx) => {
    const fctx = ctx.friendInStatement(path.friendUserId);
    return { status: 201, body: await friendActivity.createNote(fctx, body) };
  },
  updateFriendEntry: async ({ path, body }, ctx) => {
    const fctx = await ctx.friend(path.friendUserId);
    await friendActivity.updateNote(fctx, path.entryId, body);
    return { status: 204 };
  },
  deleteFriendEntry: async ({ path }, ctx) => {
    const fctx = await ctx.friend(path.friendUserId);
    await friendActivity.deleteNote(fctx, path.entryId);
    return { status: 204 };
  },
} satisfies Partial<HandlerMap>;

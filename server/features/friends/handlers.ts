import { listAuditEvents } from '../../audit/index.ts';
import type { HandlerMap } from '../../http/handlers.ts';
import * as friends from './service.ts';

export const friendsHandlers = {
  listFriends: async ({ query }, ctx) => ({
    status: 200,
    body: await friends.listFriends(ctx.service(), query.status),
  }),
  listFriendsPage: async ({ query }, ctx) => ({
    status: 200,
    body: await friends.listFriendsPage(ctx.service(), query),
  }),
  listFriendRequests: async (_i, ctx) => ({ status: 200, body: await friends.listRequests(ctx.service()) }),
  listFriendSuggestions: async ({ query }, ctx) => ({
    status: 200,
    body: await friends.listSuggestions(ctx.service(), query.limit ?? 20),
  }),
  requestFriendByUsername: async ({ body }, ctx) => ({
    status: 201,
    body: await friends.sendRequestByUsername(ctx.service(), body.username),
  }),
  blockFriendByUsername: async ({ body }, ctx) => ({
    status: 200,
    body: await friends.blockByUsername(ctx.service(), body.username, body.reason),
  }),
  acceptFriendRequest: async ({ path }, ctx) => {
    await friends.acceptRequest(ctx.service(), path.requesterUserId);
    return { status: 204 };
  },
  searchFriendContent: async ({ query }, ctx) => ({
    status: 200,
    body: await friends.search(await ctx.friend(query.ownerUserId), query.q, query.limitPerType ?? 10),
  }),
  getFriendSearchCatalog: async ({ query }, ctx) => ({
    status: 200,
    body: await friends.catalog(await ctx.friend(query.ownerUserId)),
  }),
  searchFriendMembers: async ({ query }, ctx) => ({
    status: 200,
    body: await friends.searchMembers(await ctx.friend(query.ownerUserId), query.q, query.limit ?? 20),
  }),
  getFriendsProfile: async (_i, ctx) => ({ status: 200, body: await friends.getOwnProfile(ctx.service()) }),
  updateFriendsProfile: async ({ body }, ctx) => ({
    status: 200,
    body: await friends.updateOwnProfile(ctx.service(), body),
  }),
  getFriendProfile: async ({ path }, ctx) => ({
    status: 200,
    body: await friends.getProfileCard(await ctx.friend(path.friendUserId)),
  }),
  requestFriend: async ({ path }, ctx) => {
    await friends.sendRequest(ctx.service(), path.friendUserId);
    return { status: 204 };
  },
  revokeFriend: async ({ path }, ctx) => {
    await friends.revoke(ctx.service(), path.friendUserId);
    return { status: 204 };
  },
  blockFriend: async ({ path, body }, ctx) => {
    await friends.block(ctx.service(), path.friendUserId, body?.reason);
    return { status: 204 };
  },
  listAuditEvents: async ({ query }, ctx) => ({
    status: 200,
    body: await listAuditEvents(ctx.service(), {
      limit: query.limit ?? 50,
      cursor: query.cursor,
      actionPrefix: query.actionPrefix,
    }),
  }),
} satisfies Partial<HandlerMap>;

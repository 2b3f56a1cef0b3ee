import type { HandlerMap } from '../../http/handlers.ts';
import * as friendMembers from './service.ts';

export const friendMembersHandlers = {
  listFriendMembers: async ({ path }, ctx) => {
    // The friendship is resolved inside the list's one statement (404 without one).
    const fctx = ctx.friendInStatement(path.friendUserId);
    return { status: 200, body: await friendMembers.listMembers(fctx) };
  },
  getFriendMember: async ({ path }, ctx) => {
    const fctx = await ctx.friend(path.friendUserId);
    return { status: 200, body: await friendMembers.getMember(fctx, path.memberId) };
  },
  getFriendGroupTree: async ({ path }, ctx) => {
    const fctx = await ctx.friend(path.friendUserId);
    return { status: 200, body: await friendMembers.groupTree(fctx) };
  },
  getFriendFolder: async ({ path, query }, ctx) => {
    const fctx = await ctx.friend(path.friendUserId);
    const folderId = query.folderId === undefined || query.folderId === 'null' ? null : query.folderId;
    return { status: 200, body: await friendMembers.folderContents(fctx, folderId) };
  },
  listFriendMemberStatuses: async ({ path }, ctx) => {
    // The caller's own id answers the caller's own statuses (spec); anyone else needs a friendship.
    const sctx =
      path.friendUserId === ctx.service().access.ownerId ? ctx.service() : await ctx.friend(path.friendUserId);
    return { status: 200, body: await friendMembers.listStatuses(sctx) };
  },
  listFriendMemberStatusesOfMember: async ({ path }, ctx) => {
    const sctx =
      path.friendUserId === ctx.service().access.ownerId ? ctx.service() : await ctx.friend(path.friendUserId);
    return { status: 200, body: await friendMembers.memberStatuses(sctx, path.memberId) };
  },
  getFriendCustomFields: async ({ path, query }, ctx) => {
    const fctx = await ctx.friend(path.friendUserId);
    return { status: 200, body: await friendMembers.customFields(fctx, query.memberId) };
  },
  setFriendCustomFieldValue: async ({ path, body }, ctx) => {
    const fctx = await ctx.friend(path.friendUserId);
    await friendMembers.setCustomFieldValue(fctx, path.fieldId, body.memberId, body.value);
    return { status: 204 };
  },
} satisfies Partial<HandlerMap>;

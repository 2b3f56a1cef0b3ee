import type { HandlerMap } from '../../http/handlers.ts';
import { DomainError, forbidden } from '../../core/errors.ts';
import { hasScope } from '../../core/scopes.ts';
import { deleteMemberMedia, readFriendMemberMedia, readMemberMedia, uploadMemberMedia } from './media.ts';
import * as members from './service.ts';

const SUNSET = 'Sat, 21 Nov 2026 00:00:00 GMT';
const DEPRECATION_HEADERS = {
  Deprecation: 'true',
  Sunset: SUNSET,
  Link: '</api/v1/members/page>; rel=successor-version',
  Warning: `299 - "GET /api/v1/members is deprecated and returns at most ${members.DEPRECATED_LIST_CAP} members; use GET /api/v1/members/page"`,
};

export const membersHandlers = {
  listMembers: async ({ query }, ctx) => ({
    status: 200,
    headers: DEPRECATION_HEADERS,
    body: await members.listMembersDeprecated(ctx.service(), query),
  }),
  listMembersPage: async ({ query }, ctx) => ({
    status: 200,
    body: await members.listMembersPage(ctx.service(), query),
  }),
  createMember: async ({ body }, ctx) => ({ status: 201, body: await members.createMember(ctx.service(), body) }),
  getMember: async ({ path }, ctx) => ({ status: 200, body: await members.getMember(ctx.service(), path.memberId) }),
  updateMember: async ({ path, body }, ctx) => ({
    status: 200,
    body: await members.updateMember(ctx.service(), path.memberId, body),
  }),
  deleteMember: async ({ path }, ctx) => {
    await members.trashMember(ctx.service(), path.memberId);
    return { status: 204 };
  },
  restoreMember: async ({ path }, ctx) => {
    await members.restoreMember(ctx.service(), path.memberId);
    return { status: 204 };
  },
  getMemberMedia: async ({ path, query }, ctx) => {
    const ifNoneMatch = ctx.req.get('if-none-match');
    const caller = ctx.service();
    const friendOwner =
      query.ownerUserId !== undefined && query.ownerUserId !== caller.access.ownerId ? query.ownerUserId : null;
    // The operation accepts members:read or friends:read; each branch needs its own (openapi description).
    const [scope, scopes] = [friendOwner ? 'friends' : 'members', ctx.auth?.scopes ?? {}] as const;
    if (!hasScope(scopes, scope, 'read')) throw forbidden(`Missing API key scope: ${scope} requires read`);
    if (!friendOwner) return readMemberMedia(caller, path.memberId, query.kind, ifNoneMatch);
    let fctx: Awaited<ReturnType<typeof ctx.friend>>;
    try {
      fctx = await ctx.friend(friendOwner);
    } catch (err) {
      // No visible friendship: the same empty 404 as an unknown member.
      if (err instanceof DomainError && err.kind === 'not_found') return { status: 404 };
      throw err;
    }
    return readFriendMemberMedia(fctx, path.memberId, query.kind, ifNoneMatch);
  },
  uploadMemberMedia: async ({ path, query, body }, ctx) => ({
    status: 200,
    body: await uploadMemberMedia(ctx.service(), path.memberId, query.kind, body),
  }),
  deleteMemberMedia: async ({ path, query }, ctx) => {
    await deleteMemberMedia(ctx.service(), path.memberId, query.kind);
    return { status: 204 };
  },
} satisfies Partial<HandlerMap>;

import type { HandlerMap } from '../../http/handlers.ts';
import { deleteMemberMedia, readMemberMedia, uploadMemberMedia } from './media.ts';
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
  listMembersPage: async ({ query }, ctx) => ({ status: 200, body: await members.listMembersPage(ctx.service(), query) }),
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
  getMemberMedia: async ({ path, query }, ctx) =>
    readMemberMedia(ctx.service(), path.memberId, query.kind, ctx.req.get('if-none-match')),
  uploadMemberMedia: async ({ path, query, body }, ctx) => ({
    status: 200,
    body: await uploadMemberMedia(ctx.service(), path.memberId, query.kind, body),
  }),
  deleteMemberMedia: async ({ path, query }, ctx) => {
    await deleteMemberMedia(ctx.service(), path.memberId, query.kind);
    return { status: 204 };
  },
} satisfies Partial<HandlerMap>;

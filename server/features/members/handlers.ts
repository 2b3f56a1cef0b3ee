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
    body: await members.listMembersDeprecated(ctx.deps.db.knex, ctx.userId, query),
  }),
  listMembersPage: async ({ query }, ctx) => ({ status: 200, body: await members.listMembersPage(ctx.deps.db.knex, ctx.userId, query) }),
  createMember: async ({ body }, ctx) => ({ status: 201, body: await members.createMember(ctx.deps.db.knex, ctx.userId, body, ctx.deps.clock()) }),
  getMember: async ({ path }, ctx) => ({ status: 200, body: await members.getMember(ctx.deps.db.knex, ctx.userId, path.memberId) }),
  updateMember: async ({ path, body }, ctx) => ({
    status: 200,
    body: await members.updateMember(ctx.deps.db.knex, ctx.userId, path.memberId, body, ctx.deps.clock()),
  }),
  deleteMember: async ({ path }, ctx) => {
    await members.trashMember(ctx.deps.db.knex, ctx.userId, path.memberId, ctx.deps.clock());
    return { status: 204 };
  },
  restoreMember: async ({ path }, ctx) => {
    await members.restoreMember(ctx.deps.db.knex, ctx.userId, path.memberId, ctx.deps.clock());
    return { status: 204 };
  },
  getMemberMedia: async ({ path, query }, ctx) =>
    readMemberMedia(ctx.deps.db.knex, ctx.deps.storage, ctx.userId, path.memberId, query.kind, ctx.req.get('if-none-match')),
  uploadMemberMedia: async ({ path, query, body }, ctx) => ({
    status: 200,
    body: await uploadMemberMedia(ctx.deps.db.knex, ctx.deps.storage, ctx.log, ctx.userId, path.memberId, query.kind, body, ctx.deps.clock()),
  }),
  deleteMemberMedia: async ({ path, query }, ctx) => {
    await deleteMemberMedia(ctx.deps.db.knex, ctx.deps.storage, ctx.log, ctx.userId, path.memberId, query.kind, ctx.deps.clock());
    return { status: 204 };
  },
} satisfies Partial<HandlerMap>;

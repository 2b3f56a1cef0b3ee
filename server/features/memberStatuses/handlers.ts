import type { HandlerMap } from '../../http/handlers.ts';
import * as statuses from './service.ts';

export const memberStatusesHandlers = {
  listMemberStatuses: async (_i, ctx) => ({ status: 200, body: await statuses.listStatuses(ctx.deps.db.knex, ctx.userId) }),
  createMemberStatus: async ({ body }, ctx) => ({ status: 201, body: await statuses.createStatus(ctx.deps.db.knex, ctx.userId, body, ctx.deps.clock()) }),
  updateMemberStatus: async ({ path, body }, ctx) => ({
    status: 200,
    body: await statuses.updateStatus(ctx.deps.db.knex, ctx.userId, path.statusId, body, ctx.deps.clock()),
  }),
  deleteMemberStatus: async ({ path }, ctx) => {
    await statuses.deleteStatus(ctx.deps.db.knex, ctx.userId, path.statusId);
    return { status: 204 };
  },
  listMemberStatusAssignments: async ({ path }, ctx) => ({ status: 200, body: await statuses.listAssignments(ctx.deps.db.knex, ctx.userId, path.memberId) }),
  assignMemberStatus: async ({ path }, ctx) => {
    await statuses.assign(ctx.deps.db.knex, ctx.userId, path.memberId, path.statusId, ctx.deps.clock());
    return { status: 204 };
  },
  clearMemberStatus: async ({ path }, ctx) => {
    await statuses.clear(ctx.deps.db.knex, ctx.userId, path.memberId, path.statusId);
    return { status: 204 };
  },
} satisfies Partial<HandlerMap>;

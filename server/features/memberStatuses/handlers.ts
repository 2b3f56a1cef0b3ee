import type { HandlerMap } from '../../http/handlers.ts';
import * as statuses from './service.ts';

export const memberStatusesHandlers = {
  listMemberStatuses: async (_i, ctx) => ({ status: 200, body: await statuses.listStatuses(ctx.service()) }),
  createMemberStatus: async ({ body }, ctx) => ({
    status: 201,
    body: await statuses.createStatus(ctx.service(), body),
  }),
  updateMemberStatus: async ({ path, body }, ctx) => ({
    status: 200,
    body: await statuses.updateStatus(ctx.service(), path.statusId, body),
  }),
  deleteMemberStatus: async ({ path }, ctx) => {
    await statuses.deleteStatus(ctx.service(), path.statusId);
    return { status: 204 };
  },
  listMemberStatusAssignments: async ({ path }, ctx) => ({
    status: 200,
    body: await statuses.listAssignments(ctx.service(), path.memberId),
  }),
  assignMemberStatus: async ({ path }, ctx) => {
    await statuses.assign(ctx.service(), path.memberId, path.statusId);
    return { status: 204 };
  },
  clearMemberStatus: async ({ path }, ctx) => {
    await statuses.clear(ctx.service(), path.memberId, path.statusId);
    return { status: 204 };
  },
} satisfies Partial<HandlerMap>;

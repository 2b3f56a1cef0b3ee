import type { HandlerMap } from '../../http/handlers.ts';
import * as systems from './service.ts';

export const systemsHandlers = {
  getSystems: async (_i, ctx) => ({ status: 200, body: await systems.getSystems(ctx.service()) }),
  setActiveSystem: async ({ body }, ctx) => ({ status: 200, body: await systems.setActive(ctx.service(), body) }),
  setUnifiedView: async ({ body }, ctx) => ({
    status: 200,
    body: await systems.setUnifiedView(ctx.service(), body.enabled),
  }),
  createSideSystem: async ({ body }, ctx) => ({
    status: 201,
    body: await systems.createSideSystem(ctx.service(), body),
  }),
  updateSideSystem: async ({ path, body }, ctx) => ({
    status: 200,
    body: await systems.updateSideSystem(ctx.service(), path.sideSystemId, body),
  }),
  deleteSideSystem: async ({ path }, ctx) => {
    await systems.deleteSideSystem(ctx.service(), path.sideSystemId);
    return { status: 200, body: { success: true } };
  },
  createSubSystem: async ({ body }, ctx) => ({ status: 201, body: await systems.createSubSystem(ctx.service(), body) }),
  updateSubSystem: async ({ path, body }, ctx) => ({
    status: 200,
    body: await systems.updateSubSystem(ctx.service(), path.subSystemId, body),
  }),
  deleteSubSystem: async ({ path }, ctx) => {
    await systems.deleteSubSystem(ctx.service(), path.subSystemId);
    return { status: 200, body: { success: true } };
  },
  listAssignableMembers: async ({ path }, ctx) => ({
    status: 200,
    body: await systems.listAssignableMembers(ctx.service(), path.sideSystemId),
  }),
} satisfies Partial<HandlerMap>;

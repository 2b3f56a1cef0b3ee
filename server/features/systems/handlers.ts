import type { HandlerMap } from '../../http/handlers.ts';
import * as systems from './service.ts';

export const systemsHandlers = {
  getSystems: async (_i, ctx) => ({ status: 200, body: await systems.getSystems(ctx.deps.db.knex, ctx.userId) }),
  setActiveSystem: async ({ body }, ctx) => ({ status: 200, body: await systems.setActive(ctx.deps.db.knex, ctx.userId, body, ctx.deps.clock()) }),
  setUnifiedView: async ({ body }, ctx) => ({
    status: 200,
    body: await systems.setUnifiedView(ctx.deps.db.knex, ctx.userId, body.enabled, ctx.deps.clock()),
  }),
  createSideSystem: async ({ body }, ctx) => ({ status: 201, body: await systems.createSideSystem(ctx.deps.db.knex, ctx.userId, body, ctx.deps.clock()) }),
  updateSideSystem: async ({ path, body }, ctx) => ({
    status: 200,
    body: await systems.updateSideSystem(ctx.deps.db.knex, ctx.userId, path.sideSystemId, body, ctx.deps.clock()),
  }),
  deleteSideSystem: async ({ path }, ctx) => {
    await systems.deleteSideSystem(ctx.deps.db.knex, ctx.userId, path.sideSystemId, ctx.deps.clock());
    return { status: 200, body: { success: true } };
  },
  createSubSystem: async ({ body }, ctx) => ({ status: 201, body: await systems.createSubSystem(ctx.deps.db.knex, ctx.userId, body, ctx.deps.clock()) }),
  updateSubSystem: async ({ path, body }, ctx) => ({
    status: 200,
    body: await systems.updateSubSystem(ctx.deps.db.knex, ctx.userId, path.subSystemId, body, ctx.deps.clock()),
  }),
  deleteSubSystem: async ({ path }, ctx) => {
    await systems.deleteSubSystem(ctx.deps.db.knex, ctx.userId, path.subSystemId, ctx.deps.clock());
    return { status: 200, body: { success: true } };
  },
  listAssignableMembers: async ({ path }, ctx) => ({
    status: 200,
    body: await systems.listAssignableMembers(ctx.deps.db.knex, ctx.userId, path.sideSystemId),
  }),
} satisfies Partial<HandlerMap>;

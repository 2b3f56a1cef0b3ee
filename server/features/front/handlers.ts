import type { HandlerMap } from '../../http/handlers.ts';
import * as front from './service.ts';

export const frontHandlers = {
  getFront: async (_input, ctx) => ({ status: 200, body: await front.getFront(ctx.deps.db.knex, ctx.userId) }),

  getFrontHistory: async ({ query }, ctx) => ({ status: 200, body: await front.getHistory(ctx.deps.db.knex, ctx.userId, query) }),

  clearFront: async (_input, ctx) => {
    await front.clearFront(ctx.deps.db.knex, ctx.userId, ctx.deps.clock());
    return { status: 204 };
  },

  startFronting: async ({ body }, ctx) => {
    await front.startFronting(ctx.deps.db.knex, ctx.userId, body, ctx.deps.clock());
    return { status: 204 };
  },

  stopFronting: async ({ path }, ctx) => {
    await front.stopFronting(ctx.deps.db.knex, ctx.userId, path.memberId, ctx.deps.clock());
    return { status: 204 };
  },

  reorderFront: async ({ body }, ctx) => {
    await front.reorderFront(ctx.deps.db.knex, ctx.userId, body.memberIds, ctx.deps.clock());
    return { status: 204 };
  },

  setTierPresence: async ({ body }, ctx) => {
    await front.setTierPresence(ctx.deps.db.knex, ctx.userId, body, ctx.deps.clock());
    return { status: 204 };
  },

  clearTierPresence: async ({ path }, ctx) => {
    await front.clearTierPresence(ctx.deps.db.knex, ctx.userId, path.memberId);
    return { status: 204 };
  },

  listFrontTiers: async (_input, ctx) => ({ status: 200, body: await front.listTiers(ctx.deps.db.knex, ctx.userId) }),

  createFrontTier: async ({ body }, ctx) => ({ status: 201, body: await front.createTier(ctx.deps.db.knex, ctx.userId, body, ctx.deps.clock()) }),

  deleteFrontTier: async ({ path }, ctx) => {
    await front.deleteTier(ctx.deps.db.knex, ctx.userId, path.tierId);
    return { status: 204 };
  },

  updateFrontSession: async ({ path, body }, ctx) => ({
    status: 200,
    body: await front.updateSession(ctx.deps.db.knex, ctx.userId, path.sessionId, body, ctx.deps.clock()),
  }),

  deleteFrontSession: async ({ path }, ctx) => {
    await front.trashSession(ctx.deps.db.knex, ctx.userId, path.sessionId, ctx.deps.clock());
    return { status: 204 };
  },

  restoreFrontSession: async ({ path }, ctx) => {
    await front.restoreSession(ctx.deps.db.knex, ctx.userId, path.sessionId, ctx.deps.clock());
    return { status: 204 };
  },
} satisfies Partial<HandlerMap>;

import type { HandlerMap } from '../../http/handlers.ts';
import * as front from './service.ts';

export const frontHandlers = {
  getFront: async (_input, ctx) => ({ status: 200, body: await front.getFront(ctx.service()) }),

  getFrontHistory: async ({ query }, ctx) => ({ status: 200, body: await front.getHistory(ctx.service(), query) }),

  clearFront: async (_input, ctx) => {
    await front.clearFront(ctx.service());
    return { status: 204 };
  },

  startFronting: async ({ body }, ctx) => {
    await front.startFronting(ctx.service(), body);
    return { status: 204 };
  },

  stopFronting: async ({ path }, ctx) => {
    await front.stopFronting(ctx.service(), path.memberId);
    return { status: 204 };
  },

  reorderFront: async ({ body }, ctx) => {
    await front.reorderFront(ctx.service(), body.memberIds);
    return { status: 204 };
  },

  setTierPresence: async ({ body }, ctx) => {
    await front.setTierPresence(ctx.service(), body);
    return { status: 204 };
  },

  clearTierPresence: async ({ path }, ctx) => {
    await front.clearTierPresence(ctx.service(), path.memberId);
    return { status: 204 };
  },

  listFrontTiers: async (_input, ctx) => ({ status: 200, body: await front.listTiers(ctx.service()) }),

  createFrontTier: async ({ body }, ctx) => ({ status: 201, body: await front.createTier(ctx.service(), body) }),

  deleteFrontTier: async ({ path }, ctx) => {
    await front.deleteTier(ctx.service(), path.tierId);
    return { status: 204 };
  },

  updateFrontSession: async ({ path, body }, ctx) => ({
    status: 200,
    body: await front.updateSession(ctx.service(), path.sessionId, body),
  }),

  deleteFrontSession: async ({ path }, ctx) => {
    await front.trashSession(ctx.service(), path.sessionId);
    return { status: 204 };
  },

  restoreFrontSession: async ({ path }, ctx) => {
    await front.restoreSession(ctx.service(), path.sessionId);
    return { status: 204 };
  },
} satisfies Partial<HandlerMap>;

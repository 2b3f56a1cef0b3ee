import type { HandlerMap } from '../../http/handlers.ts';
import * as terminology from './service.ts';

export const terminologyHandlers = {
  getTerminology: async (_input, ctx) => ({ status: 200, body: await terminology.getTerminology(ctx.deps.db.knex, ctx.userId) }),

  updateTerminology: async ({ body }, ctx) => ({
    status: 200,
    body: await terminology.updateTerminology(ctx.deps.db.knex, ctx.userId, body, ctx.deps.clock()),
  }),

  resetTerminology: async (_input, ctx) => ({
    status: 200,
    body: await terminology.resetTerminology(ctx.deps.db.knex, ctx.userId, ctx.deps.clock()),
  }),

  getResolvedTerminology: async ({ query }, ctx) => ({
    status: 200,
    body: await terminology.getResolvedTerminology(ctx.deps.db.knex, ctx.userId, query),
  }),

  updateScopedTerminology: async ({ body }, ctx) => ({
    status: 200,
    body: await terminology.updateScopedTerminology(ctx.deps.db.knex, ctx.userId, body, ctx.deps.clock()),
  }),

  resetScopedTerminology: async ({ body }, ctx) => ({
    status: 200,
    body: await terminology.resetScopedTerminology(ctx.deps.db.knex, ctx.userId, body),
  }),
} satisfies Partial<HandlerMap>;

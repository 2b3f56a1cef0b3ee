import type { HandlerMap } from '../../http/handlers.ts';
import * as terminology from './service.ts';

export const terminologyHandlers = {
  getTerminology: async (_input, ctx) => ({ status: 200, body: await terminology.getTerminology(ctx.service()) }),

  updateTerminology: async ({ body }, ctx) => ({
    status: 200,
    body: await terminology.updateTerminology(ctx.service(), body),
  }),

  resetTerminology: async (_input, ctx) => ({
    status: 200,
    body: await terminology.resetTerminology(ctx.service()),
  }),

  getResolvedTerminology: async ({ query }, ctx) => ({
    status: 200,
    body: await terminology.getResolvedTerminology(ctx.service(), query),
  }),

  updateScopedTerminology: async ({ body }, ctx) => ({
    status: 200,
    body: await terminology.updateScopedTerminology(ctx.service(), body),
  }),

  resetScopedTerminology: async ({ body }, ctx) => ({
    status: 200,
    body: await terminology.resetScopedTerminology(ctx.service(), body),
  }),
} satisfies Partial<HandlerMap>;

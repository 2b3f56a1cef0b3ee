import type { HandlerMap } from '../../http/handlers.ts';
import * as appearance from './service.ts';

export const appearanceHandlers = {
  getAppearance: async (_input, ctx) => ({ status: 200, body: await appearance.getAppearance(ctx.deps.db.knex, ctx.userId) }),

  updateAppearance: async ({ body }, ctx) => ({
    status: 200,
    body: await appearance.updateAppearance(ctx.deps.db.knex, ctx.userId, body, ctx.deps.clock()),
  }),

  resetAppearance: async (_input, ctx) => ({
    status: 200,
    body: await appearance.resetAppearance(ctx.deps.db.knex, ctx.userId, ctx.deps.clock()),
  }),

  listCustomColorSchemes: async (_input, ctx) => ({
    status: 200,
    body: await appearance.listCustomColorSchemes(ctx.deps.db.knex, ctx.userId),
  }),

  createCustomColorScheme: async ({ body }, ctx) => ({
    status: 201,
    body: await appearance.createCustomColorScheme(ctx.deps.db.knex, ctx.userId, body, ctx.deps.clock()),
  }),

  deleteCustomColorScheme: async ({ path }, ctx) => {
    await appearance.deleteCustomColorScheme(ctx.deps.db.knex, ctx.userId, path.schemeId);
    return { status: 204 };
  },

  listCustomFonts: async (_input, ctx) => ({ status: 200, body: await appearance.listCustomFonts(ctx.deps.db.knex, ctx.userId) }),

  createCustomFont: async ({ body }, ctx) => ({
    status: 201,
    body: await appearance.createCustomFont(ctx.deps.db.knex, ctx.userId, body, ctx.deps.clock()),
  }),

  deleteCustomFont: async ({ path }, ctx) => {
    await appearance.deleteCustomFont(ctx.deps.db.knex, ctx.userId, path.fontId);
    return { status: 204 };
  },
} satisfies Partial<HandlerMap>;

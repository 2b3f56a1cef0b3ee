import type { HandlerMap } from '../../http/handlers.ts';
import * as appearance from './service.ts';

export const appearanceHandlers = {
  getAppearance: async (_input, ctx) => ({ status: 200, body: await appearance.getAppearance(ctx.service()) }),

  updateAppearance: async ({ body }, ctx) => ({
    status: 200,
    body: await appearance.updateAppearance(ctx.service(), body),
  }),

  resetAppearance: async (_input, ctx) => ({
    status: 200,
    body: await appearance.resetAppearance(ctx.service()),
  }),

  listCustomColorSchemes: async (_input, ctx) => ({
    status: 200,
    body: await appearance.listCustomColorSchemes(ctx.service()),
  }),

  createCustomColorScheme: async ({ body }, ctx) => ({
    status: 201,
    body: await appearance.createCustomColorScheme(ctx.service(), body),
  }),

  deleteCustomColorScheme: async ({ path }, ctx) => {
    await appearance.deleteCustomColorScheme(ctx.service(), path.schemeId);
    return { status: 204 };
  },

  listCustomFonts: async (_input, ctx) => ({ status: 200, body: await appearance.listCustomFonts(ctx.service()) }),

  createCustomFont: async ({ body }, ctx) => ({
    status: 201,
    body: await appearance.createCustomFont(ctx.service(), body),
  }),

  deleteCustomFont: async ({ path }, ctx) => {
    await appearance.deleteCustomFont(ctx.service(), path.fontId);
    return { status: 204 };
  },
} satisfies Partial<HandlerMap>;

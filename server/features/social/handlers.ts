import type { HandlerMap } from '../../http/handlers.ts';
import * as profile from './profile.ts';

export const socialHandlers = {
  getSocial: async (_i, ctx) => ({ status: 200, body: await profile.getSection(ctx.service()) }),
  updateSocial: async ({ body }, ctx) => {
    await profile.updateTheme(ctx.service(), body);
    return { status: 204 };
  },
  createSocialLink: async ({ body }, ctx) => ({ status: 201, body: await profile.createLink(ctx.service(), body) }),
  updateSocialLink: async ({ path, body }, ctx) => ({ status: 200, body: await profile.updateLink(ctx.service(), path.linkId, body) }),
  deleteSocialLink: async ({ path }, ctx) => {
    await profile.deleteLink(ctx.service(), path.linkId);
    return { status: 204 };
  },
  createSocialWidget: async ({ body }, ctx) => ({ status: 201, body: await profile.createWidget(ctx.service(), body) }),
  updateSocialWidget: async ({ path, body }, ctx) => ({ status: 200, body: await profile.updateWidget(ctx.service(), path.widgetId, body) }),
  deleteSocialWidget: async ({ path }, ctx) => {
    await profile.deleteWidget(ctx.service(), path.widgetId);
    return { status: 204 };
  },
  reorderSocial: async ({ body }, ctx) => {
    await profile.reorder(ctx.service(), body);
    return { status: 204 };
  },
} satisfies Partial<HandlerMap>;

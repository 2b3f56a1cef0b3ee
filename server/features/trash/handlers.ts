import type { HandlerMap } from '../../http/handlers.ts';
import * as trash from './service.ts';

export const trashHandlers = {
  listTrash: async ({ query }, ctx) => ({
    status: 200,
    body: await trash.listTrash(ctx.service(), query),
  }),
  purgeTrash: async ({ body }, ctx) => {
    await trash.purge(ctx.service(), body.items);
    return { status: 204 };
  },
  getTrashSettings: async (_i, ctx) => ({ status: 200, body: await trash.getSettings(ctx.service()) }),
  updateTrashSettings: async ({ body }, ctx) => ({
    status: 200,
    body: await trash.updateSettings(ctx.service(), body.retentionDays),
  }),
} satisfies Partial<HandlerMap>;

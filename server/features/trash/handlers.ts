import type { HandlerMap } from '../../http/handlers.ts';
import * as trash from './service.ts';

export const trashHandlers = {
  listTrash: async ({ query }, ctx) => ({
    status: 200,
    body: await trash.listTrash(ctx.deps.db.knex, ctx.userId, query, ctx.deps.config.trashRetentionDays),
  }),
  purgeTrash: async ({ body }, ctx) => {
    await trash.purge(ctx.deps.db.knex, ctx.deps.storage, ctx.log, ctx.userId, body.items);
    return { status: 204 };
  },
  getTrashSettings: async (_i, ctx) => ({ status: 200, body: await trash.getSettings(ctx.deps.db.knex, ctx.userId, ctx.deps.config.trashRetentionDays) }),
  updateTrashSettings: async ({ body }, ctx) => ({
    status: 200,
    body: await trash.updateSettings(ctx.deps.db.knex, ctx.userId, body.retentionDays, ctx.deps.config.trashRetentionDays),
  }),
} satisfies Partial<HandlerMap>;

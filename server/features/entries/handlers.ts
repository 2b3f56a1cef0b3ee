import type { HandlerMap } from '../../http/handlers.ts';
import * as entries from './service.ts';

export const entriesHandlers = {
  listEntries: async ({ query }, ctx) => ({ status: 200, body: await entries.listEntries(ctx.service(), query) }),
  createEntry: async ({ body }, ctx) => ({ status: 201, body: await entries.createEntry(ctx.service(), body) }),
  getEntry: async ({ path }, ctx) => ({ status: 200, body: await entries.getEntry(ctx.service(), path.entryId) }),
  updateEntry: async ({ path, body }, ctx) => ({
    status: 200,
    body: await entries.updateEntry(ctx.service(), path.entryId, body),
  }),
  deleteEntry: async ({ path, query }, ctx) => {
    await entries.deleteEntry(ctx.service(), path.entryId, query.permanent);
    return { status: 204 };
  },
  restoreEntry: async ({ path }, ctx) => {
    await entries.restoreEntry(ctx.service(), path.entryId);
    return { status: 204 };
  },
  getEntryImage: async ({ path }, ctx) =>
    entries.readEntryImage(ctx.service(), path.imageId, ctx.req.get('if-none-match')),
} satisfies Partial<HandlerMap>;

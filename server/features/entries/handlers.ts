import type { HandlerMap } from '../../http/handlers.ts';
import { notFound, preconditionFailed } from '../../http/errors.ts';
import { readStoredImage } from '../../storage/serve.ts';
import { imageKey } from './rehost.ts';
import * as entries from './service.ts';

export const entriesHandlers = {
  listEntries: async ({ query }, ctx) => ({ status: 200, body: await entries.listEntries(ctx.deps.db.knex, ctx.userId, query) }),
  createEntry: async ({ body }, ctx) => ({ status: 201, body: await entries.createEntry(ctx.deps, ctx.userId, body, ctx.deps.clock()) }),
  getEntry: async ({ path }, ctx) => ({ status: 200, body: await entries.getEntry(ctx.deps.db.knex, ctx.userId, path.entryId) }),
  updateEntry: async ({ path, body }, ctx) => ({ status: 200, body: await entries.updateEntry(ctx.deps, ctx.userId, path.entryId, body, ctx.deps.clock()) }),
  deleteEntry: async ({ path, query }, ctx) => {
    await entries.deleteEntry(ctx.deps, ctx.userId, path.entryId, query.permanent, ctx.deps.clock());
    return { status: 204 };
  },
  restoreEntry: async ({ path }, ctx) => {
    await entries.restoreEntry(ctx.deps, ctx.userId, path.entryId, ctx.deps.clock());
    return { status: 204 };
  },
  getEntryImage: async ({ path }, ctx) => {
    if (!ctx.deps.storage) throw preconditionFailed('Object storage is not configured on this server');
    const result = await readStoredImage(ctx.deps.storage, imageKey(ctx.userId, path.imageId), ctx.req.get('if-none-match'));
    if (result.status === 404) throw notFound('Image not found');
    return result;
  },
} satisfies Partial<HandlerMap>;

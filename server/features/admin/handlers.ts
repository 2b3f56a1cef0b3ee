import type { HandlerMap } from '../../http/handlers.ts';
import { createAccount, createApiKey, revokeApiKey } from '../accounts/service.ts';

export const adminHandlers = {
  createAccount: async ({ body }, ctx) => ({
    status: 201,
    body: await createAccount(ctx.deps.db.knex, body, ctx.deps.clock()),
  }),

  createApiKey: async ({ path, body }, ctx) => ({
    status: 201,
    body: await createApiKey(ctx.deps.db.knex, path.userId, body, ctx.deps.clock()),
  }),

  revokeApiKey: async ({ path }, ctx) => {
    await revokeApiKey(ctx.deps.db.knex, path.keyId, ctx.deps.clock());
    ctx.deps.apiKeys.evictKey(path.keyId);
    return { status: 204 };
  },
} satisfies Partial<HandlerMap>;

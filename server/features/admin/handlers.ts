import type { HandlerMap } from '../../http/handlers.ts';
import { createAccount, createApiKey, deleteAccount, getAccount, listAccounts, listApiKeys, revokeApiKey } from '../accounts/service.ts';

export const adminHandlers = {
  listAccounts: async ({ query }, ctx) => ({
    status: 200,
    body: await listAccounts(ctx.deps.db.knex, query, ctx.deps.clock()),
  }),

  createAccount: async ({ body }, ctx) => ({
    status: 201,
    body: await createAccount(ctx.deps.db.knex, body, ctx.deps.clock()),
  }),

  getAccount: async ({ path }, ctx) => ({
    status: 200,
    body: await getAccount(ctx.deps.db.knex, path.userId, ctx.deps.clock()),
  }),

  deleteAccount: async ({ path }, ctx) => {
    const { keyIds } = await deleteAccount({ db: ctx.deps.db.knex, storage: ctx.deps.storage, logger: ctx.log }, path.userId);
    for (const keyId of keyIds) ctx.deps.apiKeys.evictKey(keyId);
    return { status: 204 };
  },

  listApiKeys: async ({ path, query }, ctx) => ({
    status: 200,
    body: await listApiKeys(ctx.deps.db.knex, path.userId, query),
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

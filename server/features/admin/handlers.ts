import type { HandlerMap } from '../../http/handlers.ts';
import { receiveBody } from '../../http/uploads.ts';
import { registerIdentity } from '../social/index.ts';
import {
  createAccount,
  createApiKey,
  deleteAccount,
  getAccount,
  listAccounts,
  listApiKeys,
  revokeApiKey,
} from '../accounts/index.ts';
import { takeBackup } from './backup.ts';
import { USER_CONTENT_HEADERS } from '../../storage/index.ts';
import { acceptImport, createExport, getExport, getImport, IMPORT_MEDIA_TYPES } from '../portability/index.ts';

export const adminHandlers = {
  listAccounts: async ({ query }, ctx) => ({ status: 200, body: await listAccounts(ctx.operator(), query) }),

  createAccount: async ({ body }, ctx) => ({ status: 201, body: await createAccount(ctx.operator(), body) }),

  getAccount: async ({ path }, ctx) => ({ status: 200, body: await getAccount(ctx.operatorFor(path.userId)) }),

  deleteAccount: async ({ path }, ctx) => {
    const { keyIds } = await deleteAccount(ctx.operatorFor(path.userId));
    for (const keyId of keyIds) ctx.deps.apiKeys.evictKey(keyId);
    return { status: 204 };
  },

  listApiKeys: async ({ path, query }, ctx) => ({
    status: 200,
    body: await listApiKeys(ctx.operatorFor(path.userId), query),
  }),

  createApiKey: async ({ path, body }, ctx) => ({
    status: 201,
    body: await createApiKey(ctx.operatorFor(path.userId), body),
  }),

  registerAccountIdentity: async ({ path, body }, ctx) => {
    await registerIdentity(ctx.operatorFor(path.userId), body);
    return { status: 204 };
  },

  adminCreateImport: async ({ path, query }, ctx) => {
    const operator = ctx.operatorFor(path.userId);
    await getAccount(operator); // 404 before the file is read
    const accepted = await acceptImport(operator, { source: query.source, dryRun: query.dryRun ?? false }, (sink) =>
      receiveBody(ctx.req, ctx.deps.config.importMaxBytes, { contentType: IMPORT_MEDIA_TYPES[query.source] }, sink),
    );
    return {
      status: 202,
      headers: { Location: `/admin/v1/accounts/${path.userId}/imports/${accepted.id}` },
      body: accepted,
    };
  },

  adminGetImport: async ({ path }, ctx) => ({
    status: 200,
    body: await getImport(ctx.operatorFor(path.userId), path.importId),
  }),

  adminCreateExport: async ({ path }, ctx) => {
    const operator = ctx.operatorFor(path.userId);
    await getAccount(operator);
    const accepted = await createExport(operator);
    return {
      status: 202,
      headers: { Location: `/admin/v1/accounts/${path.userId}/exports/${accepted.id}` },
      body: accepted,
    };
  },

  adminGetExport: async ({ path }, ctx) => ({
    status: 200,
    body: await getExport(ctx.operatorFor(path.userId), path.exportId),
  }),

  createBackup: async (_input, ctx) => {
    const backup = await takeBackup(ctx.deps, ctx.log);
    return {
      status: 200,
      body: backup.stream,
      contentType: 'application/gzip',
      headers: {
        'Content-Disposition': `attachment; filename="${backup.fileName}"`,
        'Cache-Control': 'no-store',
        ...USER_CONTENT_HEADERS,
      },
    };
  },

  revokeApiKey: async ({ path }, ctx) => {
    await revokeApiKey(ctx.operator(), path.keyId);
    ctx.deps.apiKeys.evictKey(path.keyId);
    return { status: 204 };
  },
} satisfies Partial<HandlerMap>;

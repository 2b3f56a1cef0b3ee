import { hasScope } from '../../core/scopes.ts';
import { forbidden } from '../../core/errors.ts';
import type { HandlerMap } from '../../http/handlers.ts';
import { readBodyLimited } from '../../http/uploads.ts';
import { createImport, getImport, IMPORT_SCOPES, listImports } from './service.ts';

export const portabilityHandlers = {
  createImport: async ({ query }, ctx) => {
    const scopes = ctx.auth?.scopes ?? {};
    const missing = IMPORT_SCOPES[query.source].find((scope) => !hasScope(scopes, scope, 'read_write'));
    if (missing) throw forbidden(`Missing API key scope: ${missing} requires read_write`);
    const file = await readBodyLimited(ctx.req, ctx.deps.config.importMaxBytes);
    const accepted = await createImport(ctx.service(), { source: query.source, dryRun: query.dryRun ?? false, file });
    return { status: 202, headers: { Location: `/api/v1/imports/${accepted.id}` }, body: accepted };
  },
  listImports: async ({ query }, ctx) => ({ status: 200, body: await listImports(ctx.service(), query) }),
  getImport: async ({ path }, ctx) => ({ status: 200, body: await getImport(ctx.service(), path.importId) }),
} satisfies Partial<HandlerMap>;

import { forbidden } from '../../core/errors.ts';
import { hasScope, SCOPES, type ScopeLevel } from '../../core/scopes.ts';
import type { HandlerMap, RequestContext } from '../../http/handlers.ts';
import { receiveBody } from '../../http/uploads.ts';
import { createExport, getExport, listExports } from './exports.ts';
import { getImport, IMPORT_MEDIA_TYPES, IMPORT_SCOPES, listImports } from './service.ts';
import { acceptImport } from './upload.ts';

/** An export holds everything: its routes need `read` on every scope (403 names the first one missing). */
function requireEveryScope(ctx: RequestContext, level: ScopeLevel): void {
  const scopes = ctx.auth?.scopes ?? {};
  const missing = SCOPES.find((scope) => !hasScope(scopes, scope, level));
  if (missing) throw forbidden(`Missing API key scope: ${missing} requires ${level}`);
}

export const portabilityHandlers = {
  createImport: async ({ query }, ctx) => {
    const scopes = ctx.auth?.scopes ?? {};
    const missing = IMPORT_SCOPES[query.source].find((scope) => !hasScope(scopes, scope, 'read_write'));
    if (missing) throw forbidden(`Missing API key scope: ${missing} requires read_write`);
    const accepted = await acceptImport(
      ctx.service(),
      { source: query.source, dryRun: query.dryRun ?? false },
      (sink) =>
        receiveBody(ctx.req, ctx.deps.config.importMaxBytes, { contentType: IMPORT_MEDIA_TYPES[query.source] }, sink),
    );
    return { status: 202, headers: { Location: `/api/v1/imports/${accepted.id}` }, body: accepted };
  },
  listImports: async ({ query }, ctx) => ({ status: 200, body: await listImports(ctx.service(), query) }),
  getImport: async ({ path }, ctx) => ({ status: 200, body: await getImport(ctx.service(), path.importId) }),
  createExport: async (_input, ctx) => {
    requireEveryScope(ctx, 'read');
    const accepted = await createExport(ctx.service());
    return { status: 202, headers: { Location: `/api/v1/exports/${accepted.id}` }, body: accepted };
  },
  listExports: async ({ query }, ctx) => {
    requireEveryScope(ctx, 'read');
    return { status: 200, body: await listExports(ctx.service(), query) };
  },
  getExport: async ({ path }, ctx) => {
    requireEveryScope(ctx, 'read');
    return { status: 200, body: await getExport(ctx.service(), path.exportId) };
  },
} satisfies Partial<HandlerMap>;

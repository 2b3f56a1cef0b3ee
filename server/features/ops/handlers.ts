import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { pendingMigrations } from '../../db/migrate.ts';
import { preconditionFailed } from '../../http/errors.ts';
import type { HandlerMap } from '../../http/handlers.ts';
import { BUNDLED_SPEC_PATH } from '../../http/spec.ts';

const DOCS_PATH = resolve(import.meta.dirname, '../../../generated/docs.html');
let docsHtml: string | undefined;
let specJson: Record<string, unknown> | undefined;

export const opsHandlers = {
  getHealth: async () => ({ status: 200, body: { status: 'ok' } }),

  getReadiness: async (_input, ctx) => {
    try {
      await ctx.deps.db.knex.raw('select 1');
    } catch (err) {
      ctx.log.warn({ err }, 'readiness: database not reachable');
      throw preconditionFailed('Database is not reachable');
    }
    if ((await pendingMigrations(ctx.deps.db.knex)) > 0) throw preconditionFailed('Database migrations are pending');
    return { status: 200, body: { status: 'ready', database: 'ok', migrations: 'ok' } };
  },

  getDocs: async () => {
    docsHtml ??= readFileSync(DOCS_PATH, 'utf8');
    return { status: 200, body: docsHtml, contentType: 'text/html; charset=utf-8' };
  },

  getOpenApiDocument: async () => {
    specJson ??= JSON.parse(readFileSync(BUNDLED_SPEC_PATH, 'utf8')) as Record<string, unknown>;
    return { status: 200, body: specJson };
  },
} satisfies Partial<HandlerMap>;

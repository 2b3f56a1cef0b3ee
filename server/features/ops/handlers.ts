import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import type { HandlerMap } from '../../http/handlers.ts';
import { BUNDLED_SPEC_PATH } from '../../http/spec.ts';
import { checkReadiness } from './readiness.ts';

const DOCS_PATH = resolve(import.meta.dirname, '../../../generated/docs.html');
let docsHtml: string | undefined;
let specJson: Record<string, unknown> | undefined;

export const opsHandlers = {
  getHealth: async () => ({ status: 200, body: { status: 'ok' } }),

  getReadiness: async (_input, ctx) => {
    const { ready, checks, message } = await checkReadiness(ctx.deps, ctx.deps.logger);
    if (!ready) return { status: 503, body: { code: 'PRECONDITION_FAILED', message, checks } };
    return { status: 200, body: { status: 'ready', database: 'ok', migrations: 'ok', checks } };
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

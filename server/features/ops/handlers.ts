import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import type { HandlerMap } from '../../http/handlers.ts';
import { BUNDLED_SPEC_PATH } from '../../http/spec.ts';
import { loadDocsPage, type DocsPage } from './docsPage.ts';
import { checkReadiness } from './readiness.ts';

const DOCS_PATH = resolve(import.meta.dirname, '../../../generated/docs.html');
let docsPage: DocsPage | undefined;
let specJson: Record<string, unknown> | undefined;

export const opsHandlers = {
  getHealth: async () => ({ status: 200, body: { status: 'ok' } }),

  getReadiness: async (_input, ctx) => {
    const { ready, checks, message } = await checkReadiness(ctx.deps, ctx.deps.logger);
    if (!ready) return { status: 503, body: { code: 'PRECONDITION_FAILED', message, checks } };
    return { status: 200, body: { status: 'ready', database: 'ok', migrations: 'ok', checks } };
  },

  getDocs: async () => {
    // The same bytes for every origin: the contract's server URL is relative and the page
    // resolves it in the browser, so nothing from the request (Host) is written into the HTML.
    docsPage ??= loadDocsPage(DOCS_PATH);
    return {
      status: 200,
      body: docsPage.html,
      contentType: 'text/html; charset=utf-8',
      headers: { 'Content-Security-Policy': docsPage.contentSecurityPolicy },
    };
  },

  getOpenApiDocument: async () => {
    specJson ??= JSON.parse(readFileSync(BUNDLED_SPEC_PATH, 'utf8')) as Record<string, unknown>;
    return { status: 200, body: specJson };
  },

  getMetrics: async (_input, ctx) => ({
    status: 200,
    body: await ctx.deps.metrics.render(),
    contentType: ctx.deps.metrics.contentType,
  }),
} satisfies Partial<HandlerMap>;

import type { HandlerMap } from '../../http/handlers.ts';
import * as webhooks from './service.ts';

export const webhooksHandlers = {
  listWebhooks: async (_i, ctx) => ({ status: 200, body: await webhooks.listWebhooks(ctx.service()) }),
  createWebhook: async ({ body }, ctx) => ({ status: 201, body: await webhooks.createWebhook(ctx.service(), body) }),
  getWebhook: async ({ path }, ctx) => ({
    status: 200,
    body: await webhooks.getWebhook(ctx.service(), path.webhookId),
  }),
  updateWebhook: async ({ path, body }, ctx) => ({
    status: 200,
    body: await webhooks.updateWebhook(ctx.service(), path.webhookId, body),
  }),
  deleteWebhook: async ({ path }, ctx) => {
    await webhooks.deleteWebhook(ctx.service(), path.webhookId);
    return { status: 204 };
  },
  rotateWebhookSecret: async ({ path }, ctx) => ({
    status: 200,
    body: await webhooks.rotateSecret(ctx.service(), path.webhookId),
  }),
  testWebhook: async ({ path }, ctx) => ({
    status: 200,
    body: await webhooks.testWebhook(ctx.service(), path.webhookId),
  }),
  listWebhookDeliveries: async ({ path, query }, ctx) => ({
    status: 200,
    body: await webhooks.listDeliveries(ctx.service(), path.webhookId, query ?? {}),
  }),
  retryWebhookDelivery: async ({ path }, ctx) => ({
    status: 202,
    body: await webhooks.retryDelivery(ctx.service(), path.webhookId, path.deliveryId),
  }),
} satisfies Partial<HandlerMap>;

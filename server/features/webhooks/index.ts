/** What the rest of the server uses of webhooks: the delivery jobs and the pruning of ended deliveries. */
export { defineWebhookDelivery, scheduleWebhookSweep } from './delivery.ts';
export { webhooksRepo } from './repo.ts';

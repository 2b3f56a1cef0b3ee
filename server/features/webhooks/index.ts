/** What the rest of the server uses of webhooks: the delivery jobs and the pruning of ended deliveries. */
export { defineWebhookDelivery, pruneDeliveries, scheduleWebhookSweep } from './delivery.ts';

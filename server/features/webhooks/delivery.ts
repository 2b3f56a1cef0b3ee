/**
 * Sending webhooks (docs/webhooks.md). One `webhook_deliver` job per webhook at a time (its job key)
 * sends that webhook's pending deliveries oldest first, so an endpoint receives events in the order
 * of their ids. A failed attempt is due again after a backoff with jitter (5 s, 30 s, 2 min, 10 min,
 * 1 h, 6 h, 12 h: eight attempts over about 19 hours) and holds back the deliveries after it; out of
 * attempts, it fails and the next one goes. `410 Gone` disables the webhook at once; failing with no
 * success for WEBHOOK_DISABLE_AFTER_HOURS disables it too.
 *
 * The job returns when the next delivery is not due (or after a time budget); the recurring
 * `webhook_sweep` job queues the job again for every webhook whose next delivery is due, which
 * also covers an event queued just as a job was ending.
 */
import type { Knex } from 'knex';
import type { Logger } from 'pino';
import type { Config } from '../../config.ts';
import { MessageCipher } from '../../crypto/messageCipher.ts';
import { toEvent, WEBHOOK_QUEUE } from '../../events/log.ts';
import type { JobQueue } from '../../jobs/queue.ts';
import { FetchRefusedError, fetchOptionsFromConfig, guardedFetch } from '../../net/guardedFetch.ts';
import { type WebhookRow, webhooksRepo } from './repo.ts';
import { signedHeaders } from './signing.ts';

/** Waits after the first, second … failed attempt; one attempt more than delays. */
export const RETRY_DELAYS_MS = [5_000, 30_000, 120_000, 600_000, 3_600_000, 21_600_000, 43_200_000] as const;
export const MAX_ATTEMPTS = RETRY_DELAYS_MS.length + 1;
/** A delay is drawn within ±10 % of its step, so endpoints that failed together are not retried together. */
const JITTER = 0.1;
/** The response body read at most; the rest is not waited for. */
const MAX_RESPONSE_BYTES = 64 * 1024;
/** One job's sending time; then it returns and the sweep queues it again (its lease is twice this). */
const JOB_BUDGET_MS = 60_000;
const SWEEP_QUEUE = 'webhook_sweep';

/** The sealed part of a webhook: its URL, and its secrets (the current one first, then the rotated-out one). */
export interface Sealed {
  url: string;
  secrets: string[];
}

export interface Target {
  url: string;
  /** The secrets that sign now. */
  secrets: string[];
}

export interface Outcome {
  ok: boolean;
  gone: boolean;
  statusCode: number | null;
  durationMs: number;
  error: string | null;
}

export function openSealed(config: Pick<Config, 'messageEncryptionKeys'>, row: WebhookRow): Sealed {
  const cipher = new MessageCipher(config.messageEncryptionKeys);
  return JSON.parse(cipher.open(row.user_id, row.id, { keyId: row.key_id, data: Buffer.from(row.secrets_enc) }));
}

/** The URL and the secrets that sign at `now` (the rotated-out one only until it expires). */
export function openTarget(config: Pick<Config, 'messageEncryptionKeys'>, row: WebhookRow, now: number): Target {
  const { url, secrets } = openSealed(config, row);
  const previousActive = row.previous_secret_expires_at !== null && now < row.previous_secret_expires_at;
  return { url, secrets: previousActive ? secrets : secrets.slice(0, 1) };
}

/** The body of a test ping (a WebhookPing). */
export function pingBody(row: Pick<WebhookRow, 'id' | 'user_id'>, now: number): string {
  return JSON.stringify({ type: 'ping', occurredAt: now, accountId: row.user_id, data: { webhookId: row.id } });
}

/** Why an attempt failed, for the delivery's `error` (a reason, never the fetcher's message with addresses). */
function failure(err: FetchRefusedError): string {
  if (err.reason === 'bad_status') return `status ${err.status}`;
  if (err.reason === 'too_many_redirects') return `redirect ${err.status} not followed`;
  return err.reason;
}

/** POSTs one signed body through the guarded fetcher: 2xx is success, anything else a failure. */
export async function attempt(
  config: Config,
  target: Target,
  messageId: string,
  body: string,
  now: number,
): Promise<Outcome> {
  const started = performance.now();
  const durationMs = () => Math.round(performance.now() - started);
  try {
    const res = await guardedFetch(target.url, {
      ...fetchOptionsFromConfig(config),
      timeoutMs: config.webhookTimeoutMs,
      maxBytes: MAX_RESPONSE_BYTES,
      truncate: true,
      maxRedirects: 0,
      post: { body: Buffer.from(body, 'utf8') },
      headers: {
        'content-type': 'application/json',
        ...signedHeaders(target.secrets, messageId, Math.floor(now / 1000), body),
      },
    });
    return { ok: true, gone: false, statusCode: res.status, durationMs: durationMs(), error: null };
  } catch (err) {
    if (!(err instanceof FetchRefusedError)) throw err;
    return {
      ok: false,
      gone: err.reason === 'bad_status' && err.status === 410,
      statusCode: err.status ?? null,
      durationMs: durationMs(),
      error: failure(err),
    };
  }
}

export interface DeliveryDeps {
  db: Knex;
  /** The running server's settings (its keyring, timeouts). */
  config: () => Config;
  clock: () => number;
  logger: Logger;
}

/** Sends a webhook's due deliveries in order until one is not due, the webhook is disabled, or the budget is spent. */
export async function deliverPending(deps: DeliveryDeps, webhookId: string): Promise<void> {
  const { db, clock, logger } = deps;
  const started = Date.now();
  while (Date.now() - started < JOB_BUDGET_MS) {
    const config = deps.config();
    const webhook = await webhooksRepo.next(db, webhookId);
    const head = webhook?.enabled ? webhook.head : null;
    if (!webhook || !head) return;
    const now = clock();
    if (head.next_attempt_at !== null && head.next_attempt_at > now) return;
    const body = head.event
      ? JSON.stringify(toEvent(head.event))
      : head.type === 'ping'
        ? pingBody(webhook, now)
        : null;
    const outcome: Outcome = body
      ? await attempt(config, openTarget(config, webhook, now), head.message_id, body, now)
      : { ok: false, gone: false, statusCode: null, durationMs: 0, error: 'event_expired' };
    const attempts = head.attempts + 1;
    const final = outcome.ok || outcome.gone || body === null || attempts >= MAX_ATTEMPTS;
    const after = clock();
    const delay = RETRY_DELAYS_MS[attempts - 1] ?? 0;
    const enabled = await webhooksRepo.recordAttempt(db, {
      deliveryId: head.id,
      now: after,
      ...outcome,
      final,
      nextAttemptAt: final ? null : after + Math.round(delay * (1 - JITTER + Math.random() * 2 * JITTER)),
      disableAfterMs: config.webhookDisableAfterHours * 3_600_000,
    });
    if (!outcome.ok)
      logger.info(
        { webhookId, deliveryId: head.id, attempt: attempts, error: outcome.error, final, enabled },
        'webhook delivery failed',
      );
    if (!enabled || !final) return;
  }
}

/** The delivery jobs and the sweep that queues them again (scheduled by scheduleWebhookSweep). */
export function defineWebhookDelivery(jobs: JobQueue, deps: DeliveryDeps, concurrency: number): void {
  jobs.define<{ webhookId: string }>(WEBHOOK_QUEUE, (job) => deliverPending(deps, job.payload.webhookId), {
    concurrency,
    leaseMs: 2 * JOB_BUDGET_MS,
    maxAttempts: 3,
  });
  jobs.define(SWEEP_QUEUE, () => webhooksRepo.sweep(deps.db, deps.clock()), { maxAttempts: 1 });
}

export async function scheduleWebhookSweep(jobs: JobQueue, everyMs: number, now: number): Promise<void> {
  await jobs.schedule(SWEEP_QUEUE, SWEEP_QUEUE, everyMs, now);
}

/** Deletes deliveries that ended before `before` (the event log's retention); how many went. */
export function pruneDeliveries(db: Knex, before: number): Promise<number> {
  return webhooksRepo.pruneDeliveries(db, before);
}

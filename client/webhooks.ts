/**
 * `verifyWebhook()`: checks a webhook delivery's Standard Webhooks signature (docs/webhooks.md)
 * and returns its body, typed: an Event, or a WebhookPing for a test ping.
 *
 *   app.post('/hooks', express.raw({ type: 'application/json' }), async (req, res) => {
 *     const payload = await verifyWebhook({ secret: process.env.WEBHOOK_SECRET!, headers: req.headers, body: req.body });
 *     if (payload.type === 'front.changed') show(payload.data.front);
 *     res.sendStatus(204);
 *   });
 *
 * Pass the body exactly as received (a string or the raw bytes), never re-serialised JSON. Uses Web
 * Crypto (Node 20+, Deno, Bun, workers); the comparison is the platform's constant-time HMAC verify.
 */
import type { components } from '../generated/api.d.ts';

export type WebhookPing = components['schemas']['WebhookPing'];
/** What a delivery carries: an event of the account, or the test ping. */
export type WebhookPayload = components['schemas']['Event'] | WebhookPing;

export interface VerifyWebhookOptions {
  /** The webhook's secret (`whsec_…`); during a rotation either the new or the old one verifies. */
  secret: string;
  /** The request's headers: a Headers object or a plain record (Node's req.headers). */
  headers: Headers | Record<string, string | string[] | undefined>;
  /** The raw body, as received. */
  body: string | Uint8Array;
  /** How far the `webhook-timestamp` may be from now, in seconds (default 300): older deliveries are replays. */
  toleranceSeconds?: number;
  /** The current time in epoch ms (default Date.now()). */
  now?: number;
}

/** The delivery is not authentic (bad or missing signature or headers) or too old or new. */
export class WebhookVerificationError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'WebhookVerificationError';
  }
}

function header(headers: VerifyWebhookOptions['headers'], name: string): string {
  const value = headers instanceof Headers ? headers.get(name) : headers[name];
  const text = Array.isArray(value) ? value[0] : value;
  if (!text) throw new WebhookVerificationError(`Missing ${name} header`);
  return text;
}

function fromBase64(text: string): Uint8Array<ArrayBuffer> {
  const binary = atob(text);
  const bytes = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i);
  return bytes;
}

export async function verifyWebhook(options: VerifyWebhookOptions): Promise<WebhookPayload> {
  const id = header(options.headers, 'webhook-id');
  const timestamp = header(options.headers, 'webhook-timestamp');
  const signatures = header(options.headers, 'webhook-signature');
  if (!/^\d{1,15}$/.test(timestamp)) throw new WebhookVerificationError('Invalid webhook-timestamp header');
  const now = Math.floor((options.now ?? Date.now()) / 1000);
  const tolerance = options.toleranceSeconds ?? 300;
  if (Math.abs(now - Number(timestamp)) > tolerance)
    throw new WebhookVerificationError('webhook-timestamp is outside the tolerance (a replay, or a skewed clock)');
  if (!options.secret.startsWith('whsec_')) throw new WebhookVerificationError('The secret must start with whsec_');
  let keyBytes: Uint8Array<ArrayBuffer>;
  try {
    keyBytes = fromBase64(options.secret.slice('whsec_'.length));
  } catch {
    throw new WebhookVerificationError('The secret is not base64 after whsec_');
  }
  const encoder = new TextEncoder();
  const body = typeof options.body === 'string' ? encoder.encode(options.body) : options.body;
  const prefix = encoder.encode(`${id}.${timestamp}.`);
  const signed = new Uint8Array(prefix.length + body.length);
  signed.set(prefix);
  signed.set(body, prefix.length);
  const key = await crypto.subtle.importKey('raw', keyBytes, { name: 'HMAC', hash: 'SHA-256' }, false, ['verify']);
  for (const candidate of signatures.split(' ')) {
    if (!candidate.startsWith('v1,')) continue;
    let signature: Uint8Array<ArrayBuffer>;
    try {
      signature = fromBase64(candidate.slice(3));
    } catch {
      continue;
    }
    if (await crypto.subtle.verify('HMAC', key, signature, signed))
      return JSON.parse(new TextDecoder().decode(body)) as WebhookPayload;
  }
  throw new WebhookVerificationError('No signature matches the secret');
}

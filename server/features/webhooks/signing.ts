/**
 * Standard Webhooks signing (https://www.standardwebhooks.com): a delivery carries `webhook-id`,
 * `webhook-timestamp` (seconds) and `webhook-signature`, `v1,` and the base64 HMAC-SHA256 of
 * `{id}.{timestamp}.{body}` under each active secret, space-separated. A secret is `whsec_` and the
 * base64 of 32 random bytes; the bytes are the HMAC key.
 */
import { createHmac, randomBytes } from 'node:crypto';

const PREFIX = 'whsec_';

export function newSecret(): string {
  return PREFIX + randomBytes(32).toString('base64');
}

function keyOf(secret: string): Buffer {
  if (!secret.startsWith(PREFIX)) throw new Error('not a webhook secret');
  return Buffer.from(secret.slice(PREFIX.length), 'base64');
}

/** The headers of one delivery: signed under every secret given (the current one first). */
export function signedHeaders(
  secrets: readonly string[],
  messageId: string,
  timestampSeconds: number,
  body: string,
): Record<string, string> {
  const signed = `${messageId}.${timestampSeconds}.${body}`;
  const signatures = secrets.map((s) => `v1,${createHmac('sha256', keyOf(s)).update(signed).digest('base64')}`);
  return {
    'webhook-id': messageId,
    'webhook-timestamp': String(timestampSeconds),
    'webhook-signature': signatures.join(' '),
  };
}

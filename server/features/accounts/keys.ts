/**
 * API key secrets: `adk_` + 256 random bits (base64url). Only the SHA-256 of the secret is
 * stored; a high-entropy secret needs no slow hash, and a fast one keeps lookups cheap.
 */
import { createHash, randomBytes } from 'node:crypto';

export const API_KEY_PREFIX = 'adk_';

export function generateApiKey(): { secret: string; hash: string; displayPrefix: string } {
  return apiKeyFromSecret(API_KEY_PREFIX + randomBytes(32).toString('base64url'));
}

/** A key with a given secret: fixture mode's published keys (server/fixtures/keys.ts). */
export function apiKeyFromSecret(secret: string): { secret: string; hash: string; displayPrefix: string } {
  if (!looksLikeApiKey(secret)) throw new Error('an API key secret is adk_ and 43 base64url characters');
  return { secret, hash: hashApiKey(secret), displayPrefix: secret.slice(0, 10) };
}

export function hashApiKey(secret: string): string {
  return createHash('sha256').update(secret).digest('hex');
}

/** Cheap shape check so garbage never reaches the database. */
export function looksLikeApiKey(secret: string): boolean {
  return (
    secret.startsWith(API_KEY_PREFIX) &&
    secret.length === API_KEY_PREFIX.length + 43 &&
    /^[A-Za-z0-9_-]+$/.test(secret.slice(4))
  );
}

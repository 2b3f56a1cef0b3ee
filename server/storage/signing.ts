/**
 * Signed URLs for the filesystem backend: the server plays the part S3 plays for presigned URLs.
 * A URL names the object, the method, its expiry and, for uploads, the content type and exact byte
 * size; an HMAC-SHA256 over all of them under the server's storage signing key makes it the
 * credential. Verification recomputes the MAC and compares in constant time, then checks expiry.
 *
 * The key: STORAGE_SIGNING_KEY when set (required when several instances serve one storage
 * directory, so a URL one signs another accepts); otherwise 32 random bytes generated on first start
 * and kept in DATA_DIR/storage-signing-key (mode 0600), so URLs survive a restart; with no data
 * directory (the in-memory test database) a random key per process.
 */
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { assertPresignArgs, assertValidContentType, assertValidKey, type PresignedRequest } from './types.ts';

/** Where the server accepts the URLs it signs (the contract's /storage/v1/objects/{objectKey}). */
const SIGNED_URL_PATH = '/storage/v1/objects/';

const VERSION = 'ada-storage-url-v1';

/** Keys never contain `~`, so `/` ↔ `~` is a bijection that keeps a key one URL path segment. */
export function keyToUrlSegment(key: string): string {
  return key.replaceAll('/', '~');
}

export function urlSegmentToKey(segment: string): string {
  return segment.replaceAll('~', '/');
}

/** Why a signed URL was refused; the HTTP edge answers 403 for both. */
export class SignedUrlError extends Error {
  constructor(
    readonly reason: 'expired' | 'bad_signature',
    message: string,
  ) {
    super(message);
    this.name = 'SignedUrlError';
  }
}

export interface SignedUploadParams {
  key: string;
  /** Epoch ms. */
  expires: number;
  contentType: string;
  byteSize: number;
  signature: string;
}

export interface SignedDownloadParams {
  key: string;
  expires: number;
  signature: string;
}

export class UrlSigner {
  constructor(
    private readonly secret: Buffer,
    private readonly clock: () => number = Date.now,
    /** Origin (and path prefix) clients reach this server at; URLs are relative without it. */
    private readonly publicBaseUrl: string = '',
  ) {
    if (secret.length < 32) throw new RangeError('The storage signing key must be at least 32 bytes');
  }

  private mac(fields: Array<string | number>): string {
    return createHmac('sha256', this.secret)
      .update([VERSION, ...fields].join('\n'))
      .digest('base64url');
  }

  private url(key: string, query: Record<string, string>): string {
    return `${this.publicBaseUrl}${SIGNED_URL_PATH}${keyToUrlSegment(key)}?${new URLSearchParams(query)}`;
  }

  signPut(key: string, contentType: string, byteSize: number, expiresInSeconds: number): PresignedRequest {
    assertValidKey(key);
    assertValidContentType(contentType);
    assertPresignArgs(byteSize, expiresInSeconds);
    const expires = this.clock() + expiresInSeconds * 1000;
    const signature = this.mac(['PUT', key, expires, contentType, byteSize]);
    return {
      method: 'PUT',
      url: this.url(key, { expires: String(expires), contentType, byteSize: String(byteSize), signature }),
      headers: { 'Content-Type': contentType },
      expiresAt: expires,
    };
  }

  signGet(key: string, expiresInSeconds: number): PresignedRequest {
    assertValidKey(key);
    assertPresignArgs(undefined, expiresInSeconds);
    const expires = this.clock() + expiresInSeconds * 1000;
    return {
      method: 'GET',
      url: this.url(key, { expires: String(expires), signature: this.mac(['GET', key, expires]) }),
      headers: {},
      expiresAt: expires,
    };
  }

  verifyPut(params: SignedUploadParams, now: number): void {
    this.verify(
      params.signature,
      this.mac(['PUT', params.key, params.expires, params.contentType, params.byteSize]),
      params.expires,
      now,
    );
  }

  verifyGet(params: SignedDownloadParams, now: number): void {
    this.verify(params.signature, this.mac(['GET', params.key, params.expires]), params.expires, now);
  }

  /** Signature first: only a URL this server issued learns that it has merely expired. */
  private verify(given: string, expected: string, expires: number, now: number): void {
    const a = Buffer.from(given, 'base64url');
    const b = Buffer.from(expected, 'base64url');
    if (a.length !== b.length || !timingSafeEqual(a, b))
      throw new SignedUrlError('bad_signature', "This URL's signature is not valid");
    if (now >= expires) throw new SignedUrlError('expired', 'This URL has expired');
  }
}

export type SigningKeySource = 'env' | 'data-dir' | 'generated' | 'process';

const SIGNING_KEY_FILE = 'storage-signing-key';

/** STORAGE_SIGNING_KEY, else the key kept in `dataDir` (created on first use), else a key for this process only. */
export function resolveSigningKey(
  configured: string | undefined,
  dataDir: string | undefined,
): { key: Buffer; source: SigningKeySource } {
  if (configured) return { key: Buffer.from(configured, 'utf8'), source: 'env' };
  if (!dataDir) return { key: randomBytes(32), source: 'process' };
  const file = join(dataDir, SIGNING_KEY_FILE);
  if (existsSync(file)) {
    const key = Buffer.from(readFileSync(file, 'utf8').trim(), 'base64url');
    if (key.length < 32)
      throw new RangeError(
        `${file} does not hold a storage signing key of at least 32 bytes; delete it to generate a new one`,
      );
    return { key, source: 'data-dir' };
  }
  mkdirSync(dataDir, { recursive: true });
  const key = randomBytes(32);
  writeFileSync(file, `${key.toString('base64url')}\n`, { mode: 0o600, flag: 'wx' });
  return { key, source: 'generated' };
}

/** The object-storage contract every backend honours, so callers never know which one is configured. */
import { createHash } from 'node:crypto';

export interface StoredObject {
  body: Buffer;
  contentType: string;
  etag: string;
}

export interface ObjectStorage {
  readonly kind: 'filesystem' | 's3';
  /** Creates or replaces the object at `key`. */
  put(key: string, body: Buffer, contentType: string): Promise<{ etag: string }>;
  /** `null` when no object exists at `key`. */
  get(key: string): Promise<StoredObject | null>;
  /** Removing a key that does not exist is not an error. */
  delete(key: string): Promise<void>;
  /** Readiness: resolves when the backend can be used (root directory writable, bucket reachable), rejects otherwise. */
  check(signal?: AbortSignal): Promise<void>;
  /** Every key under a folder prefix (`u/<id>/`: valid segments, ending with `/`), in no particular order. */
  list(prefix: string): Promise<string[]>;
}

/** A folder prefix: one or more valid key segments followed by `/`. */
export function assertValidPrefix(prefix: string): void {
  if (typeof prefix !== 'string' || !prefix.endsWith('/')) throw new InvalidObjectKeyError(String(prefix), 'a prefix must end with /');
  assertValidKey(prefix.slice(0, -1));
}

/** Deletes every object under a folder prefix (an account's media when the account goes). */
export async function deletePrefix(storage: ObjectStorage, prefix: string): Promise<number> {
  const keys = await storage.list(prefix);
  for (const key of keys) await storage.delete(key);
  return keys.length;
}

/** A key that could escape the storage root, or that one backend would store differently from the other. */
export class InvalidObjectKeyError extends Error {
  constructor(readonly key: string, reason: string) {
    super(`Invalid object key ${JSON.stringify(key)}: ${reason}`);
    this.name = 'InvalidObjectKeyError';
  }
}

/** The backend failed (I/O error, bucket refused the request); the message is safe to log, never to show. */
export class ObjectStorageError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'ObjectStorageError';
  }
}

const SEGMENT = /^[A-Za-z0-9._-]+$/;
const MAX_KEY_LENGTH = 1024; // S3's own limit, in bytes; our keys are ASCII.

/**
 * Keys are `/`-separated segments of [A-Za-z0-9._-]. The filesystem backend maps them to paths, so
 * `.` segments, `..` anywhere, empty segments and a leading slash are refused rather than normalised:
 * no key may point outside the root, and two spellings of one key must never exist.
 */
export function assertValidKey(key: string): void {
  if (typeof key !== 'string' || key.length === 0) throw new InvalidObjectKeyError(String(key), 'must not be empty');
  if (key.length > MAX_KEY_LENGTH) throw new InvalidObjectKeyError(key, `must be at most ${MAX_KEY_LENGTH} characters`);
  if (key.startsWith('/')) throw new InvalidObjectKeyError(key, 'must not start with /');
  for (const segment of key.split('/')) {
    if (segment === '') throw new InvalidObjectKeyError(key, 'must not contain empty segments or end with /');
    if (segment === '.' || segment.includes('..')) throw new InvalidObjectKeyError(key, 'must not contain "." segments or ".."');
    if (!SEGMENT.test(segment)) throw new InvalidObjectKeyError(key, 'segments may only contain A-Z, a-z, 0-9, ".", "_" and "-"');
  }
}

const CONTENT_TYPE = /^[a-z0-9][a-z0-9!#$&^_.+-]*\/[a-z0-9][a-z0-9!#$&^_.+-]*$/i;

/** A bare media type (no parameters): it is replayed verbatim as a response header later. */
export function assertValidContentType(contentType: string): void {
  if (typeof contentType !== 'string' || contentType.length > 255 || !CONTENT_TYPE.test(contentType)) {
    throw new TypeError(`Invalid content type ${JSON.stringify(contentType)}: expected a media type such as image/png`);
  }
}

/**
 * Strong ETag derived from the bytes alone, so both backends (and a migration between them) agree.
 * S3's own ETag is an MD5 or, for multipart uploads, not a content hash at all, hence not used.
 */
export function etagOf(body: Buffer): string {
  return `"${createHash('sha256').update(body).digest('hex')}"`;
}

/** The object-storage contract every backend honours, so callers never know which one is configured. */
import { createHash } from 'node:crypto';
import type { Readable } from 'node:stream';

export interface StoredObject {
  body: Buffer;
  contentType: string;
  etag: string;
}

/** What HEAD tells about an object, without its bytes. */
export interface ObjectHead {
  contentType: string;
  /** Bytes of the body. */
  size: number;
  /**
   * Strong validator. The sha256 ETag (as `put` returns) whenever the backend knows the hash; an
   * object an S3 client uploaded through a presigned URL carries S3's own ETag instead.
   */
  etag: string;
}

/** An object's bytes as a stream, with its metadata: for bodies too large to hold in memory. */
export interface ObjectStream extends ObjectHead {
  /** The body (or the requested range of it). Consume it or destroy it: it holds a file or a connection. */
  body: Readable;
}

/** A byte range, both ends inclusive as in HTTP's `Range: bytes=start-end`. */
export interface ByteRange {
  start: number;
  end: number;
}

/**
 * A request a client may make without credentials of its own until `expiresAt`: send `method` to
 * `url` with exactly `headers` (and, for a PUT, a body of the signed size).
 */
export interface PresignedRequest {
  method: 'GET' | 'PUT';
  /** Absolute for S3; for the filesystem backend absolute when STORAGE_PUBLIC_URL is set, otherwise relative to this server's origin. */
  url: string;
  /** Headers the request must carry as signed (Content-Type, and Content-Length where the backend signs it). */
  headers: Record<string, string>;
  /** Epoch ms. */
  expiresAt: number;
}

export interface ObjectStorage {
  readonly kind: 'filesystem' | 's3';
  /** Creates or replaces the object at `key`. */
  put(key: string, body: Buffer, contentType: string): Promise<{ etag: string }>;
  /**
   * Creates or replaces the object at `key` with exactly `byteSize` bytes read from `open()`, never
   * holding them in memory (an export's archive). `open` is called once per pass over the body: S3
   * reads it once to hash it and again to send it (a retried attempt opens it again).
   */
  upload(key: string, open: () => Readable, contentType: string, byteSize: number): Promise<{ etag: string }>;
  /** `null` when no object exists at `key`. */
  get(key: string): Promise<StoredObject | null>;
  /** The body as a stream (optionally one byte range of it), `null` when no object exists at `key`. */
  getStream(key: string, options?: { range?: ByteRange }): Promise<ObjectStream | null>;
  /** Metadata without the body, `null` when no object exists at `key`. */
  head(key: string): Promise<ObjectHead | null>;
  /**
   * Moves an object to another key (atomic rename on the filesystem; copy then delete on S3). A
   * missing source whose target exists counts as already moved, so a retried move succeeds; false
   * when neither exists.
   */
  move(fromKey: string, toKey: string): Promise<boolean>;
  /** Removing a key that does not exist is not an error. */
  delete(key: string): Promise<void>;
  /** Readiness: resolves when the backend can be used (root directory writable, bucket reachable), rejects otherwise. */
  check(signal?: AbortSignal): Promise<void>;
  /** Every key under a folder prefix (`u/<id>/`: valid segments, ending with `/`), in no particular order. */
  list(prefix: string): Promise<string[]>;
  /**
   * A URL that uploads exactly `byteSize` bytes of `contentType` to `key` until `expiresInSeconds`
   * have passed. Content type and size are part of the signature: another type, or another size,
   * is refused by whoever checks it (S3, or this server for the filesystem backend).
   */
  presignPut(key: string, contentType: string, byteSize: number, expiresInSeconds: number): Promise<PresignedRequest>;
  /** A URL that downloads `key` until `expiresInSeconds` have passed. */
  presignGet(key: string, expiresInSeconds: number): Promise<PresignedRequest>;
}

/** Longest validity of a presigned URL: S3's own limit for SigV4 query signing (7 days). */
const MAX_PRESIGN_SECONDS = 7 * 24 * 3600;

export function assertPresignArgs(byteSize: number | undefined, expiresInSeconds: number): void {
  if (!Number.isInteger(expiresInSeconds) || expiresInSeconds < 1 || expiresInSeconds > MAX_PRESIGN_SECONDS) {
    throw new RangeError(
      `expiresInSeconds must be an integer between 1 and ${MAX_PRESIGN_SECONDS}, got ${expiresInSeconds}`,
    );
  }
  if (byteSize !== undefined && (!Number.isSafeInteger(byteSize) || byteSize < 0)) {
    throw new RangeError(`byteSize must be a non-negative integer, got ${byteSize}`);
  }
}

/** A folder prefix: one or more valid key segments followed by `/`. */
export function assertValidPrefix(prefix: string): void {
  if (typeof prefix !== 'string' || !prefix.endsWith('/'))
    throw new InvalidObjectKeyError(String(prefix), 'a prefix must end with /');
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
  constructor(
    readonly key: string,
    reason: string,
  ) {
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

/** An upload refused for what was sent (not a backend failure): the HTTP edge answers 413, 400 or 415. */
export class UploadRejectedError extends Error {
  constructor(
    readonly reason: 'too_large' | 'too_short' | 'content_mismatch',
    message: string,
  ) {
    super(message);
    this.name = 'UploadRejectedError';
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
    if (segment === '.' || segment.includes('..'))
      throw new InvalidObjectKeyError(key, 'must not contain "." segments or ".."');
    if (!SEGMENT.test(segment))
      throw new InvalidObjectKeyError(key, 'segments may only contain A-Z, a-z, 0-9, ".", "_" and "-"');
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

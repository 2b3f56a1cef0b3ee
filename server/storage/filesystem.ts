/**
 * Objects as files under one root directory: the embedded default, no service to run.
 *
 * Each object is ONE file holding a small header (the content type, and for objects written by
 * this version the body's sha256 and size) followed by the raw bytes. One file means one atomic
 * rename replaces body and metadata together; a body file plus a sidecar could be read half-updated
 * while an overwrite is in flight. A streamed write reserves a fixed-size header (JSON padded with
 * spaces, which JSON.parse ignores) and fills it in once the hash of the whole body is known.
 *
 * Key `a/b/c` is stored at `<root>/a/b/c~obj`. The `~` suffix (a character keys cannot contain)
 * keeps `a` (a file) and `a/b` (needing a directory `a`) from colliding, as they may in S3.
 *
 * Presigned URLs point at this server (/storage/v1/objects/…), signed by signing.ts; the upload
 * route streams the body into putStream with the signed size as its limit.
 */
import { createHash, randomBytes } from 'node:crypto';
import type { Dirent } from 'node:fs';
import {
  access,
  constants,
  mkdir,
  open,
  readdir,
  readFile,
  rename,
  stat,
  unlink,
  type FileHandle,
} from 'node:fs/promises';
import { dirname, isAbsolute, join, relative, resolve, sep } from 'node:path';
import { Readable } from 'node:stream';
import { UrlSigner, type SignedDownloadParams, type SignedUploadParams } from './signing.ts';
import {
  assertValidContentType,
  assertValidKey,
  assertValidPrefix,
  etagOf,
  ObjectStorageError,
  UploadRejectedError,
  type ByteRange,
  type ObjectHead,
  type ObjectStorage,
  type ObjectStream,
  type PresignedRequest,
  type StoredObject,
} from './types.ts';

const OBJECT_SUFFIX = '~obj';
const MAGIC = 'ADOBJ1\n';
const MAGIC_BYTES = Buffer.from(MAGIC, 'ascii');
/** Header of a streamed write: magic, JSON padded with spaces, newline. Content types are at most 255 characters, so it fits. */
const STREAM_HEADER_BYTES = 512;
/** Enough to hold any header this backend writes. */
const HEADER_READ_BYTES = 4096;

interface Header {
  contentType: string;
  /** Hex sha256 of the body; absent in objects written before it was recorded. */
  sha256?: string;
  size?: number;
}

function headerLine(header: Header, padTo?: number): Buffer {
  const json = JSON.stringify(header);
  const line = padTo === undefined ? json : json.padEnd(padTo - MAGIC_BYTES.length - 1, ' ');
  return Buffer.concat([MAGIC_BYTES, Buffer.from(`${line}\n`, 'utf8')]);
}

function encode(body: Buffer, contentType: string): Buffer {
  const sha256 = createHash('sha256').update(body).digest('hex');
  return Buffer.concat([headerLine({ contentType, sha256, size: body.length }), body]);
}

/** The header at the start of `file` and where the body begins. */
function parseHeader(file: Buffer, path: string): { header: Header; bodyOffset: number } {
  const headerEnd = file.indexOf(0x0a, MAGIC_BYTES.length);
  if (!file.subarray(0, MAGIC_BYTES.length).equals(MAGIC_BYTES) || headerEnd < 0) {
    throw new ObjectStorageError(`Corrupt object file ${path}: missing header`);
  }
  let header: unknown;
  try {
    header = JSON.parse(file.subarray(MAGIC_BYTES.length, headerEnd).toString('utf8'));
  } catch (cause) {
    throw new ObjectStorageError(`Corrupt object file ${path}: unreadable header`, { cause });
  }
  if (typeof header !== 'object' || header === null || typeof (header as Header).contentType !== 'string') {
    throw new ObjectStorageError(`Corrupt object file ${path}: header has no content type`);
  }
  return { header: header as Header, bodyOffset: headerEnd + 1 };
}

function isErrno(error: unknown, ...codes: string[]): boolean {
  return error instanceof Error && codes.includes((error as NodeJS.ErrnoException).code ?? '');
}

export interface FilesystemStorageOptions {
  /** HMAC key of presigned URLs (signing.ts resolveSigningKey); without one, presign* throw. */
  signingKey?: Buffer;
  /** Origin clients reach this server at (STORAGE_PUBLIC_URL); presigned URLs are relative without it. */
  publicBaseUrl?: string;
  /** Clock of presigned URLs' expiry. */
  clock?: () => number;
}

export interface PutStreamLimits {
  /** The body must be exactly this long: more fails as soon as it is exceeded, less at its end. */
  byteSize: number;
  /** Given the body's first SNIFF_BYTES bytes (all of it when shorter); false refuses the upload. */
  verifyHead?: (head: Buffer) => boolean;
  /** How many bytes verifyHead wants (default 512). */
  headBytes?: number;
}

export class FilesystemObjectStorage implements ObjectStorage {
  readonly kind = 'filesystem' as const;
  readonly root: string;
  private readonly signer: UrlSigner | undefined;

  constructor(root: string, options: FilesystemStorageOptions = {}) {
    this.root = resolve(root);
    this.signer = options.signingKey
      ? new UrlSigner(options.signingKey, options.clock, options.publicBaseUrl?.replace(/\/+$/, ''))
      : undefined;
  }

  private pathOf(key: string): string {
    assertValidKey(key);
    const path = join(this.root, `${key}${OBJECT_SUFFIX}`);
    // Belt and braces: key validation already rules out escaping the root.
    const rel = relative(this.root, path);
    if (rel === '..' || rel.startsWith(`..${sep}`) || isAbsolute(rel))
      throw new ObjectStorageError(`Key ${key} resolves outside the storage root`);
    return path;
  }

  /** Creates the temp file next to `path` (same directory: rename() stays on one filesystem and is atomic). */
  private async openTemp(path: string): Promise<{ temp: string; handle: FileHandle }> {
    await mkdir(dirname(path), { recursive: true });
    const temp = `${path}.${randomBytes(6).toString('hex')}.tmp`;
    return { temp, handle: await open(temp, 'wx', 0o600) };
  }

  async put(key: string, body: Buffer, contentType: string): Promise<{ etag: string }> {
    const path = this.pathOf(key);
    assertValidContentType(contentType);
    let temp: string | undefined;
    try {
      const opened = await this.openTemp(path);
      temp = opened.temp;
      try {
        await opened.handle.writeFile(encode(body, contentType));
        // Durable before visible: a crash after rename must not leave an empty object behind.
        await opened.handle.sync();
      } finally {
        await opened.handle.close();
      }
      await rename(temp, path);
    } catch (error) {
      if (temp) await unlink(temp).catch(() => undefined);
      throw new ObjectStorageError(`Could not write object ${key}`, { cause: error });
    }
    return { etag: etagOf(body) };
  }

  /**
   * Writes a streamed body of exactly `limits.byteSize` bytes without holding it in memory: into a
   * temp file with a byte counter, renamed into place only when complete and verified. Refusals are
   * UploadRejectedError (too large as soon as the counter passes the limit, too short at the end,
   * or content the verifier refuses); nothing is left behind for them. The source is not consumed
   * further after a refusal: the caller decides what happens to the rest of it.
   */
  async putStream(
    key: string,
    source: Readable,
    contentType: string,
    limits: PutStreamLimits,
  ): Promise<{ etag: string; size: number }> {
    const path = this.pathOf(key);
    assertValidContentType(contentType);
    const headBytes = limits.headBytes ?? 512;
    let temp: string | undefined;
    try {
      const opened = await this.openTemp(path);
      temp = opened.temp;
      const hash = createHash('sha256');
      let size = 0;
      const headChunks: Buffer[] = [];
      let headLength = 0;
      try {
        await opened.handle.write(Buffer.alloc(STREAM_HEADER_BYTES, 0x20), 0, STREAM_HEADER_BYTES, 0);
        // Not destroyed when the loop stops early: a refused HTTP upload still has its response to send.
        for await (const raw of source.iterator({ destroyOnReturn: false })) {
          const chunk = Buffer.isBuffer(raw) ? raw : Buffer.from(raw as Uint8Array);
          size += chunk.length;
          if (size > limits.byteSize)
            throw new UploadRejectedError('too_large', `Upload exceeds the signed size of ${limits.byteSize} bytes`);
          if (headLength < headBytes) {
            headChunks.push(chunk.subarray(0, headBytes - headLength));
            headLength += Math.min(chunk.length, headBytes - headLength);
          }
          hash.update(chunk);
          await opened.handle.write(chunk, 0, chunk.length, STREAM_HEADER_BYTES + size - chunk.length);
        }
        if (size < limits.byteSize)
          throw new UploadRejectedError(
            'too_short',
            `Upload ended after ${size} of the ${limits.byteSize} signed bytes`,
          );
        if (limits.verifyHead && !limits.verifyHead(Buffer.concat(headChunks))) {
          throw new UploadRejectedError('content_mismatch', `The uploaded bytes are not ${contentType}`);
        }
        const sha256 = hash.digest('hex');
        const header = headerLine({ contentType, sha256, size }, STREAM_HEADER_BYTES);
        await opened.handle.write(header, 0, header.length, 0);
        await opened.handle.sync();
        await opened.handle.close();
        await rename(temp, path);
        temp = undefined;
        return { etag: `"${sha256}"`, size };
      } finally {
        if (temp) await opened.handle.close().catch(() => undefined);
      }
    } catch (error) {
      if (temp) await unlink(temp).catch(() => undefined);
      if (error instanceof UploadRejectedError) throw error;
      throw new ObjectStorageError(`Could not write object ${key}`, { cause: error });
    }
  }

  async upload(key: string, open: () => Readable, contentType: string, byteSize: number): Promise<{ etag: string }> {
    const source = open();
    try {
      return { etag: (await this.putStream(key, source, contentType, { byteSize })).etag };
    } catch (error) {
      if (error instanceof UploadRejectedError)
        throw new ObjectStorageError(`Could not write object ${key}: ${error.message}`);
      throw error;
    } finally {
      source.destroy();
    }
  }

  async get(key: string): Promise<StoredObject | null> {
    const path = this.pathOf(key);
    let file: Buffer;
    try {
      file = await readFile(path);
    } catch (error) {
      // ENOTDIR: a path component is a file, which our layout never creates; still "no such object".
      if (isErrno(error, 'ENOENT', 'ENOTDIR')) return null;
      throw new ObjectStorageError(`Could not read object ${key}`, { cause: error });
    }
    const { header, bodyOffset } = parseHeader(file, path);
    const body = file.subarray(bodyOffset);
    // Hash what is on disk rather than trusting a stored value: the ETag can never disagree with the bytes.
    return { body, contentType: header.contentType, etag: etagOf(body) };
  }

  /** Opens the object and reads its header; the caller owns (and must close) the handle. */
  private async openObject(
    key: string,
  ): Promise<{ handle: FileHandle; header: Header; bodyOffset: number; size: number; path: string } | null> {
    const path = this.pathOf(key);
    let handle: FileHandle;
    try {
      handle = await open(path, 'r');
    } catch (error) {
      if (isErrno(error, 'ENOENT', 'ENOTDIR')) return null;
      throw new ObjectStorageError(`Could not read object ${key}`, { cause: error });
    }
    try {
      const buffer = Buffer.alloc(HEADER_READ_BYTES);
      const { bytesRead } = await handle.read(buffer, 0, HEADER_READ_BYTES, 0);
      const { header, bodyOffset } = parseHeader(buffer.subarray(0, bytesRead), path);
      const { size: fileSize } = await handle.stat();
      return { handle, header, bodyOffset, size: fileSize - bodyOffset, path };
    } catch (error) {
      await handle.close().catch(() => undefined);
      throw error instanceof ObjectStorageError
        ? error
        : new ObjectStorageError(`Could not read object ${key}`, { cause: error });
    }
  }

  /** The recorded hash, or (objects written before it was recorded) the hash of the bytes, read in a stream. */
  private async etagFrom(opened: { handle: FileHandle; header: Header; bodyOffset: number }): Promise<string> {
    if (opened.header.sha256) return `"${opened.header.sha256}"`;
    const hash = createHash('sha256');
    for await (const chunk of opened.handle.createReadStream({ start: opened.bodyOffset, autoClose: false }))
      hash.update(chunk as Buffer);
    return `"${hash.digest('hex')}"`;
  }

  async head(key: string): Promise<ObjectHead | null> {
    const opened = await this.openObject(key);
    if (!opened) return null;
    try {
      return { contentType: opened.header.contentType, size: opened.size, etag: await this.etagFrom(opened) };
    } finally {
      await opened.handle.close();
    }
  }

  /** Reads from the handle opened here, so a concurrent overwrite (a rename) never mixes two versions. */
  async getStream(key: string, options: { range?: ByteRange } = {}): Promise<ObjectStream | null> {
    const opened = await this.openObject(key);
    if (!opened) return null;
    let etag: string;
    try {
      etag = await this.etagFrom(opened);
    } catch (error) {
      await opened.handle.close().catch(() => undefined);
      throw new ObjectStorageError(`Could not read object ${key}`, { cause: error });
    }
    const start = options.range?.start ?? 0;
    const last = Math.min(options.range?.end ?? opened.size - 1, opened.size - 1);
    if (start > last) {
      // An empty object, or a range past its end.
      await opened.handle.close();
      return { body: Readable.from([]), contentType: opened.header.contentType, size: opened.size, etag };
    }
    const body = opened.handle.createReadStream({
      start: opened.bodyOffset + start,
      end: opened.bodyOffset + last,
      autoClose: true,
    });
    return { body, contentType: opened.header.contentType, size: opened.size, etag };
  }

  async move(fromKey: string, toKey: string): Promise<boolean> {
    const from = this.pathOf(fromKey);
    const to = this.pathOf(toKey);
    try {
      await mkdir(dirname(to), { recursive: true });
      await rename(from, to);
      return true;
    } catch (error) {
      if (isErrno(error, 'ENOENT', 'ENOTDIR')) {
        const target = await stat(to).catch(() => null);
        return target !== null;
      }
      throw new ObjectStorageError(`Could not move object ${fromKey} to ${toKey}`, { cause: error });
    }
  }

  async delete(key: string): Promise<void> {
    const path = this.pathOf(key);
    try {
      await unlink(path);
    } catch (error) {
      if (isErrno(error, 'ENOENT', 'ENOTDIR')) return;
      throw new ObjectStorageError(`Could not delete object ${key}`, { cause: error });
    }
    // Empty directories are left in place: removing them races with a concurrent put into the same folder.
  }

  /** The root exists (it is created on first use anyway) and this process may read and write it. */
  async check(): Promise<void> {
    try {
      await mkdir(this.root, { recursive: true });
      await access(this.root, constants.R_OK | constants.W_OK | constants.X_OK);
    } catch (error) {
      throw new ObjectStorageError(`Object storage directory ${this.root} is not usable: ${(error as Error).message}`, {
        cause: error,
      });
    }
  }

  async list(prefix: string): Promise<string[]> {
    assertValidPrefix(prefix);
    const dir = join(this.root, prefix);
    let entries: Dirent[];
    try {
      entries = await readdir(dir, { recursive: true, withFileTypes: true });
    } catch (error) {
      if (isErrno(error, 'ENOENT', 'ENOTDIR')) return [];
      throw new ObjectStorageError(`Could not list objects under ${prefix}`, { cause: error });
    }
    // Temp files of writes in flight end in .tmp, not in the object suffix, so they are skipped.
    return entries
      .filter((e) => e.isFile() && e.name.endsWith(OBJECT_SUFFIX))
      .map((e) => relative(this.root, join(e.parentPath, e.name)).split(sep).join('/').slice(0, -OBJECT_SUFFIX.length));
  }

  private requireSigner(): UrlSigner {
    if (!this.signer)
      throw new ObjectStorageError('Filesystem object storage has no signing key; presigned URLs are unavailable');
    return this.signer;
  }

  async presignPut(
    key: string,
    contentType: string,
    byteSize: number,
    expiresInSeconds: number,
  ): Promise<PresignedRequest> {
    return this.requireSigner().signPut(key, contentType, byteSize, expiresInSeconds);
  }

  async presignGet(key: string, expiresInSeconds: number): Promise<PresignedRequest> {
    return this.requireSigner().signGet(key, expiresInSeconds);
  }

  /** Throws SignedUrlError unless this server signed exactly these upload parameters and they have not expired. */
  verifySignedUpload(params: SignedUploadParams, now: number): void {
    this.requireSigner().verifyPut(params, now);
  }

  /** Throws SignedUrlError unless this server signed this download and it has not expired. */
  verifySignedDownload(params: SignedDownloadParams, now: number): void {
    this.requireSigner().verifyGet(params, now);
  }
}

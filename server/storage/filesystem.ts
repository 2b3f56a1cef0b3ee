/**
 * Objects as files under one root directory: the embedded default, no service to run.
 *
 * Each object is ONE file holding a small header (the content type) followed by the raw bytes.
 * One file means one atomic rename replaces body and content type together; a body file plus a
 * sidecar could be read half-updated while an overwrite is in flight.
 *
 * Key `a/b/c` is stored at `<root>/a/b/c~obj`. The `~` suffix (a character keys cannot contain)
 * keeps `a` (a file) and `a/b` (needing a directory `a`) from colliding, as they may in S3.
 */
import { randomBytes } from 'node:crypto';
import { access, constants, mkdir, open, readdir, readFile, rename, unlink } from 'node:fs/promises';
import { dirname, isAbsolute, join, relative, resolve, sep } from 'node:path';
import { assertValidContentType, assertValidKey, assertValidPrefix, etagOf, ObjectStorageError, type ObjectStorage, type StoredObject } from './types.ts';

const OBJECT_SUFFIX = '~obj';
const MAGIC = 'ADOBJ1\n';
const MAGIC_BYTES = Buffer.from(MAGIC, 'ascii');

interface Header {
  contentType: string;
}

function encode(body: Buffer, contentType: string): Buffer {
  const header = Buffer.from(`${JSON.stringify({ contentType } satisfies Header)}\n`, 'utf8');
  return Buffer.concat([MAGIC_BYTES, header, body]);
}

function decode(file: Buffer, path: string): { header: Header; body: Buffer } {
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
  return { header: header as Header, body: file.subarray(headerEnd + 1) };
}

function isErrno(error: unknown, ...codes: string[]): boolean {
  return error instanceof Error && codes.includes((error as NodeJS.ErrnoException).code ?? '');
}

export class FilesystemObjectStorage implements ObjectStorage {
  readonly kind = 'filesystem' as const;
  readonly root: string;

  constructor(root: string) {
    this.root = resolve(root);
  }

  private pathOf(key: string): string {
    assertValidKey(key);
    const path = join(this.root, `${key}${OBJECT_SUFFIX}`);
    // Belt and braces: key validation already rules out escaping the root.
    const rel = relative(this.root, path);
    if (rel === '..' || rel.startsWith(`..${sep}`) || isAbsolute(rel)) throw new ObjectStorageError(`Key ${key} resolves outside the storage root`);
    return path;
  }

  async put(key: string, body: Buffer, contentType: string): Promise<{ etag: string }> {
    const path = this.pathOf(key);
    assertValidContentType(contentType);
    await mkdir(dirname(path), { recursive: true });
    // Same directory as the target, so rename() stays on one filesystem and is atomic.
    const temp = `${path}.${randomBytes(6).toString('hex')}.tmp`;
    try {
      const handle = await open(temp, 'wx', 0o600);
      try {
        await handle.writeFile(encode(body, contentType));
        // Durable before visible: a crash after rename must not leave an empty object behind.
        await handle.sync();
      } finally {
        await handle.close();
      }
      await rename(temp, path);
    } catch (error) {
      await unlink(temp).catch(() => undefined);
      throw new ObjectStorageError(`Could not write object ${key}`, { cause: error });
    }
    return { etag: etagOf(body) };
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
    const { header, body } = decode(file, path);
    // Hash what is on disk rather than trusting a stored value: the ETag can never disagree with the bytes.
    return { body, contentType: header.contentType, etag: etagOf(body) };
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
      throw new ObjectStorageError(`Object storage directory ${this.root} is not usable: ${(error as Error).message}`, { cause: error });
    }
  }

  async list(prefix: string): Promise<string[]> {
    assertValidPrefix(prefix);
    const dir = join(this.root, prefix);
    let entries;
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
}

/**
 * Backups of the embedded database (docs/operations.md, "Backups").
 *
 * Taking one (the running server, `POST /admin/v1/backup`):
 * - The snapshot is taken holding the embedded database's single connection (Database.exclusive):
 *   knex hands it over once the app's open transaction, if any, has committed or rolled back, and
 *   no statement runs until it is released. Meanwhile a CHECKPOINT writes every change to the data
 *   files, and PGlite's files are copied (reflinked where the file system can) into a private
 *   directory under DATA_DIR; the stored objects of the filesystem storage are hard-linked there
 *   (objects are written to a temp file and renamed into place, never changed, so the link keeps the
 *   bytes the database refers to even if the object is deleted afterwards), and the key files are
 *   copied. Requests wait for that moment only, not for the download.
 * - The archive is then streamed from that copy: a gzipped tar of the DATA_DIR layout (`pglite/`,
 *   `objects/`, the key files) with `manifest.json` last, since the SHA-256 of each file is known
 *   once it has been sent. Memory stays flat (a chunk at a time); the copy takes disk space the size
 *   of the database (not of the objects, which are links) until the download ends. PGlite's own
 *   dumpDataDir() is not used: it builds the whole tarball in memory (about three times the cluster).
 *
 * Restoring one (offline, `npm run admin -- restore`): readBackup() checks every file against the
 * manifest while it writes it; restoreEmbeddedBackup() refuses a DATA_DIR that is in use or not
 * empty, holds its lock while it writes, opens the restored database once (which also replays what
 * the checkpoint left in the log) and removes everything it wrote if anything fails.
 */
import { createHash, randomBytes } from 'node:crypto';
import {
  closeSync,
  constants,
  copyFileSync,
  createReadStream,
  createWriteStream,
  existsSync,
  linkSync,
  mkdirSync,
  openSync,
  readdirSync,
  readFileSync,
  readSync,
  statSync,
  type Dirent,
} from 'node:fs';
import { lstat, mkdir, readdir, readFile, rm, rmdir, stat } from 'node:fs/promises';
import { isAbsolute, join, relative, resolve, sep } from 'node:path';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { createGunzip, createGzip } from 'node:zlib';
import {
  acquireDataDirLock,
  DataDirLockedError,
  inspectDataDirLock,
  LOCK_FILE_NAME,
  type DataDirLock,
} from './dataDirLock.ts';
import { EMBEDDED_SHARED_BUFFERS_DEFAULT, type Database, type EmbeddedConnection } from './knex.ts';
import { toNative, sql } from './sql.ts';
import {
  END_OF_ARCHIVE,
  entryHeader,
  padding,
  readTar,
  TarFormatError,
  type EntryHeader,
  type ReadEntry,
} from './tar.ts';

const BACKUP_FORMAT = 'account-data-api/embedded-backup';
const BACKUP_FORMAT_VERSION = 1;

/** The files of DATA_DIR that hold keys, as the server names them (runtime.ts, messageCipher.ts, storage/signing.ts). */
const KEY_FILES = ['admin-token', 'message-encryption-keys', 'storage-signing-key'] as const;
const KEY_MODE = 0o600;
const DATABASE_DIR = 'pglite';
const OBJECTS_DIR = 'objects';
const MANIFEST = 'manifest.json';
/** Where snapshots are copied to while they are streamed: inside DATA_DIR, so links and reflinks stay on one file system. */
const SNAPSHOT_PREFIX = '.backup-';
/** Suffix of the filesystem storage's object files (storage/filesystem.ts); anything else there is a write in flight. */
const OBJECT_SUFFIX = '~obj';
const MAX_MANIFEST_BYTES = 256 * 1_048_576;
/** How much the archive stream reads and compresses at a time. */
const CHUNK_BYTES = 1_048_576;

type Part = 'database' | 'keys' | 'objects';

export interface BackupManifest {
  format: typeof BACKUP_FORMAT;
  version: number;
  createdAt: string;
  server: { version: string };
  database: { postgres: string; migrations: number; latestMigration: string | null };
  keys: {
    /** Key files of DATA_DIR in the archive. */
    included: string[];
    /** Settings the server took from its environment instead of DATA_DIR: not in the archive, keep them with it. */
    fromEnvironment: string[];
  };
  objects: { included: true } | { included: false; reason: string };
  parts: Record<Part, { files: number; bytes: number }>;
  files: Array<{ path: string; size: number; sha256: string }>;
}

export class BackupInProgressError extends Error {
  constructor() {
    super('A backup of this server is already being taken; try again when it has finished');
    this.name = 'BackupInProgressError';
  }
}

/** The archive is not a backup this version can restore, or is damaged; the message says which file and how. */
export class BackupArchiveError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'BackupArchiveError';
  }
}

/** The target directory cannot be restored into (in use, not empty). */
export class RestoreRefusedError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'RestoreRefusedError';
  }
}

function serverVersion(): string {
  const pkg = JSON.parse(readFileSync(join(import.meta.dirname, '../../package.json'), 'utf8')) as { version: string };
  return pkg.version;
}

function partOf(path: string): Part {
  if (path === DATABASE_DIR || path.startsWith(`${DATABASE_DIR}/`)) return 'database';
  if (path === OBJECTS_DIR || path.startsWith(`${OBJECTS_DIR}/`)) return 'objects';
  return 'keys';
}

/** Relative path inside the archive, with `/`. */
const archivePath = (root: string, path: string) => relative(root, path).split(sep).join('/');

async function exists(path: string): Promise<boolean> {
  return lstat(path).then(
    () => true,
    () => false,
  );
}

/**
 * Gives the event loop a turn every few milliseconds of synchronous file work: the snapshot's
 * copies and the archive's reads are sync calls (one threadpool round trip per file would let every
 * queued request run in between and stretch a backup under load from seconds to minutes), without
 * holding up the other requests (probes, metrics) for long.
 */
class Pacer {
  private since = performance.now();
  async tick(): Promise<void> {
    if (performance.now() - this.since < 20) return;
    await new Promise((resolve) => setImmediate(resolve));
    this.since = performance.now();
  }
}

/** Files of a running cluster that a copy leaves out, as pg_basebackup does: the next start writes its own. */
const RUNTIME_FILES = new Set(['postmaster.pid', 'postmaster.opts']);

/** Copies the cluster's directory tree (a reflink where the file system offers one), keeping permission bits. */
async function copyTree(from: string, to: string, pacer: Pacer): Promise<void> {
  mkdirSync(to, { mode: statSync(from).mode & 0o777 });
  for (const entry of readdirSync(from, { withFileTypes: true })) {
    const source = join(from, entry.name);
    if (entry.isDirectory()) await copyTree(source, join(to, entry.name), pacer);
    else if (entry.isFile() && !RUNTIME_FILES.has(entry.name))
      copyFileSync(source, join(to, entry.name), constants.COPYFILE_FICLONE);
    await pacer.tick();
  }
}

/** Hard-links every stored object under `from` into `to` (copies when a link is impossible). */
async function linkObjects(from: string, to: string, pacer: Pacer): Promise<void> {
  let entries: Dirent[];
  try {
    entries = readdirSync(from, { withFileTypes: true });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return;
    throw err;
  }
  mkdirSync(to, { recursive: true });
  for (const entry of entries) {
    const source = join(from, entry.name);
    if (entry.isDirectory()) await linkObjects(source, join(to, entry.name), pacer);
    else if (entry.isFile() && entry.name.endsWith(OBJECT_SUFFIX)) {
      try {
        linkSync(source, join(to, entry.name));
      } catch (err) {
        const code = (err as NodeJS.ErrnoException).code;
        if (code === 'ENOENT') continue; // deleted meanwhile (a delete needs no transaction)
        if (code !== 'EXDEV' && code !== 'EPERM' && code !== 'EMLINK') throw err;
        copyFileSync(source, join(to, entry.name));
      }
    }
    await pacer.tick();
  }
}

export interface SnapshotOptions {
  /** The filesystem object storage's root when it is DATA_DIR/objects; otherwise why objects are left out. */
  objects: { root: string } | { excluded: string };
  /** Settings the server takes from its environment rather than from DATA_DIR's key files. */
  keysFromEnvironment: string[];
  clock: () => number;
}

export interface EmbeddedBackup {
  /** The gzipped archive; the snapshot's copy is removed when it ends, fails or is destroyed. */
  stream: Readable;
  fileName: string;
  createdAt: string;
  /** How long requests waited for the snapshot (the single connection was held). */
  quiescedMs: number;
}

/** DATA_DIRs with a backup under way in this process (one at a time each). */
const active = new Set<string>();

/**
 * Takes the snapshot (see the file comment) and returns the archive to stream. Throws
 * BackupInProgressError while another backup of the same DATA_DIR is being taken.
 */
export async function takeEmbeddedBackup(db: Database, options: SnapshotOptions): Promise<EmbeddedBackup> {
  const dataDir = db.dataDir;
  if (db.kind !== 'pglite' || !dataDir || !db.exclusive)
    throw new Error('Backups need the embedded database on a DATA_DIR');
  if (active.has(dataDir)) throw new BackupInProgressError();
  active.add(dataDir);
  const snapshot = join(dataDir, `${SNAPSHOT_PREFIX}${randomBytes(6).toString('hex')}`);
  try {
    // Leftovers of a backup cut short by a crash (only one runs at a time, and this process holds DATA_DIR).
    for (const name of await readdir(dataDir))
      if (name.startsWith(SNAPSHOT_PREFIX)) await rm(join(dataDir, name), { recursive: true, force: true });
    await mkdir(snapshot, { mode: 0o700 });
    let quiescedMs = 0;
    let createdAt = '';
    const database = await db.exclusive(async (pglite) => {
      const started = performance.now();
      const pacer = new Pacer();
      createdAt = new Date(options.clock()).toISOString();
      await pglite.query(toNative(sql`checkpoint`).text);
      const state = await migrationState(pglite);
      await copyTree(join(dataDir, DATABASE_DIR), join(snapshot, DATABASE_DIR), pacer);
      for (const name of KEY_FILES)
        if (existsSync(join(dataDir, name))) copyFileSync(join(dataDir, name), join(snapshot, name));
      if ('root' in options.objects) await linkObjects(options.objects.root, join(snapshot, OBJECTS_DIR), pacer);
      quiescedMs = Math.round(performance.now() - started);
      return state;
    });
    const postgres = (await readFile(join(snapshot, DATABASE_DIR, 'PG_VERSION'), 'utf8')).trim();
    const manifest: Omit<BackupManifest, 'parts' | 'files' | 'keys'> & { keys: { fromEnvironment: string[] } } = {
      format: BACKUP_FORMAT,
      version: BACKUP_FORMAT_VERSION,
      createdAt,
      server: { version: serverVersion() },
      database: { postgres, ...database },
      keys: { fromEnvironment: options.keysFromEnvironment },
      objects: 'root' in options.objects ? { included: true } : { included: false, reason: options.objects.excluded },
    };
    // Removed before the archive's last bytes go out (a stream destroyed before it started: when its pipeline ends).
    let cleaned: Promise<void> | undefined;
    const cleanup = () =>
      (cleaned ??= rm(snapshot, { recursive: true, force: true }).finally(() => active.delete(dataDir)));
    const guarded = async function* (): AsyncGenerator<Buffer> {
      try {
        yield* coalesce(archive(snapshot, manifest));
      } finally {
        await cleanup();
      }
    };
    const tar = Readable.from(guarded(), { objectMode: false, highWaterMark: CHUNK_BYTES });
    const gzip = createGzip({ chunkSize: CHUNK_BYTES / 4 });
    pipeline(tar, gzip)
      .catch(() => undefined) // a failure reaches the reader as the stream's error
      .finally(cleanup);
    const stamp = createdAt.replace(/[-:]/g, '').replace(/\.\d+Z$/, 'Z');
    return { stream: gzip, fileName: `account-data-backup-${stamp}.tar.gz`, createdAt, quiescedMs };
  } catch (err) {
    active.delete(dataDir);
    await rm(snapshot, { recursive: true, force: true });
    throw err;
  }
}

async function migrationState(
  pglite: EmbeddedConnection,
): Promise<{ migrations: number; latestMigration: string | null }> {
  const { rows } = await pglite.query<{ migrations: number; latest: string | null }>(
    toNative(sql`select count(*)::int as migrations, max(name) as latest from schema_migrations`).text,
  );
  return { migrations: rows[0]?.migrations ?? 0, latestMigration: rows[0]?.latest ?? null };
}

/** Every directory and file under `dir`, parents first, in a stable order. */
function* walk(dir: string): Generator<{ path: string; isDirectory: boolean }> {
  const entries = readdirSync(dir, { withFileTypes: true }).sort((a, b) => (a.name < b.name ? -1 : 1));
  for (const entry of entries) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) {
      yield { path, isDirectory: true };
      yield* walk(path);
    } else if (entry.isFile()) yield { path, isDirectory: false };
  }
}

/** A directory and everything under it. */
function* tree(dir: string): Generator<{ path: string; isDirectory: boolean }> {
  yield { path: dir, isDirectory: true };
  yield* walk(dir);
}

/** Joins small pieces into chunks of about CHUNK_BYTES: one round trip through gzip each, not one per file. */
async function* coalesce(pieces: AsyncIterable<Buffer>): AsyncGenerator<Buffer> {
  let pending: Buffer[] = [];
  let size = 0;
  for await (const piece of pieces) {
    pending.push(piece);
    size += piece.length;
    if (size >= CHUNK_BYTES) {
      yield Buffer.concat(pending);
      pending = [];
      size = 0;
    }
  }
  if (size > 0) yield Buffer.concat(pending);
}

/** The bytes of a file, read synchronously a chunk at a time (see Pacer). */
function* readChunks(path: string, size: number): Generator<Buffer> {
  const fd = openSync(path, 'r');
  try {
    for (let at = 0; at < size; ) {
      const chunk = Buffer.allocUnsafe(Math.min(CHUNK_BYTES, size - at));
      const read = readSync(fd, chunk, 0, chunk.length, at);
      if (read === 0) break;
      at += read;
      yield read === chunk.length ? chunk : chunk.subarray(0, read);
    }
  } finally {
    closeSync(fd);
  }
}

/** The tar stream of a snapshot directory: its key files, `pglite/`, `objects/`, then the manifest. */
async function* archive(
  snapshot: string,
  base: Omit<BackupManifest, 'parts' | 'files' | 'keys'> & { keys: { fromEnvironment: string[] } },
): AsyncGenerator<Buffer> {
  const pacer = new Pacer();
  const files: BackupManifest['files'] = [];
  const parts: BackupManifest['parts'] = {
    database: { files: 0, bytes: 0 },
    keys: { files: 0, bytes: 0 },
    objects: { files: 0, bytes: 0 },
  };
  const included: string[] = [];
  for (const name of [...KEY_FILES, DATABASE_DIR, OBJECTS_DIR]) {
    const path = join(snapshot, name);
    if (!existsSync(path)) continue;
    const isKey = (KEY_FILES as readonly string[]).includes(name);
    if (isKey) included.push(name);
    const items = isKey ? [{ path, isDirectory: false }] : tree(path);
    for (const item of items) {
      const info = statSync(item.path);
      const entry: EntryHeader = {
        path: archivePath(snapshot, item.path),
        type: item.isDirectory ? 'directory' : 'file',
        mode: isKey ? KEY_MODE : info.mode & 0o777,
        size: item.isDirectory ? 0 : info.size,
        mtime: info.mtimeMs / 1000,
      };
      yield entryHeader(entry);
      if (item.isDirectory) continue;
      const hash = createHash('sha256');
      let sent = 0;
      for (const chunk of readChunks(item.path, entry.size)) {
        hash.update(chunk);
        sent += chunk.length;
        yield chunk;
        await pacer.tick();
      }
      if (sent !== entry.size) throw new Error(`${entry.path} changed size while it was archived`);
      yield padding(entry.size);
      files.push({ path: entry.path, size: entry.size, sha256: hash.digest('hex') });
      const part = parts[partOf(entry.path)];
      part.files++;
      part.bytes += entry.size;
      await pacer.tick();
    }
  }
  const manifest: BackupManifest = {
    ...base,
    keys: { included, fromEnvironment: base.keys.fromEnvironment },
    parts,
    files,
  };
  const body = Buffer.from(JSON.stringify(manifest, null, 2) + '\n', 'utf8');
  yield entryHeader({ path: MANIFEST, type: 'file', mode: 0o644, size: body.length, mtime: Date.now() / 1000 });
  yield body;
  yield padding(body.length);
  yield END_OF_ARCHIVE;
}

/** A path an archive may hold: relative, `/`-separated, inside the DATA_DIR layout. */
function checkPath(path: string): void {
  const segments = path.split('/');
  const safe =
    path.length > 0 &&
    !isAbsolute(path) &&
    !path.includes('\\') &&
    !path.includes('\0') &&
    segments.every((s) => s !== '' && s !== '.' && s !== '..');
  const known =
    path === MANIFEST ||
    (KEY_FILES as readonly string[]).includes(path) ||
    segments[0] === DATABASE_DIR ||
    segments[0] === OBJECTS_DIR;
  if (!safe || !known) throw new BackupArchiveError(`The archive holds an unexpected path "${path.slice(0, 200)}"`);
}

function checkManifest(value: unknown): BackupManifest {
  const manifest = value as Partial<BackupManifest> | null;
  if (!manifest || manifest.format !== BACKUP_FORMAT)
    throw new BackupArchiveError(`manifest.json does not describe a backup of this server (format ${BACKUP_FORMAT})`);
  if (manifest.version !== BACKUP_FORMAT_VERSION)
    throw new BackupArchiveError(
      `The backup is in version ${String(manifest.version)} of the format; this version restores version ${BACKUP_FORMAT_VERSION}`,
    );
  if (!Array.isArray(manifest.files) || !manifest.database || !manifest.keys || !manifest.objects)
    throw new BackupArchiveError('manifest.json is incomplete');
  return manifest as BackupManifest;
}

/** Receives each entry of a backup as it is read (restore writes it); the data must be read to its end. */
export type EntrySink = (entry: ReadEntry, data: AsyncIterable<Buffer>) => Promise<void>;

/**
 * Reads a backup archive (the gzipped bytes) and checks it whole: every path inside the layout,
 * `manifest.json` last and of this format, and each file present with the size and SHA-256 the
 * manifest gives, nothing more. `sink` sees each entry as it goes by. Throws BackupArchiveError.
 */
export async function readBackup(source: AsyncIterable<Buffer> | Readable, sink?: EntrySink): Promise<BackupManifest> {
  const seen = new Map<string, { size: number; sha256: string }>();
  let manifest: BackupManifest | undefined;
  try {
    await pipeline(Readable.from(source), createGunzip(), async (tar: AsyncIterable<Buffer>) => {
      for await (const entry of readTar(tar)) {
        if (manifest) throw new BackupArchiveError('The archive holds entries after manifest.json');
        checkPath(entry.path);
        if (entry.path === MANIFEST) {
          if (entry.size > MAX_MANIFEST_BYTES) throw new BackupArchiveError('manifest.json is too large');
          const chunks: Buffer[] = [];
          for await (const chunk of entry.chunks()) chunks.push(chunk);
          try {
            manifest = checkManifest(JSON.parse(Buffer.concat(chunks).toString('utf8')));
          } catch (err) {
            if (err instanceof BackupArchiveError) throw err;
            throw new BackupArchiveError('manifest.json is not valid JSON');
          }
          continue;
        }
        if (seen.has(entry.path)) throw new BackupArchiveError(`The archive holds ${entry.path} twice`);
        const hash = createHash('sha256');
        const hashed = async function* (): AsyncGenerator<Buffer> {
          for await (const chunk of entry.chunks()) {
            hash.update(chunk);
            yield chunk;
          }
        };
        if (sink) await sink(entry, hashed());
        else for await (const _ of hashed());
        if (entry.type === 'file') seen.set(entry.path, { size: entry.size, sha256: hash.digest('hex') });
      }
    });
  } catch (err) {
    if (err instanceof BackupArchiveError) throw err;
    const code = (err as NodeJS.ErrnoException).code;
    if (err instanceof TarFormatError || code?.startsWith('Z_'))
      throw new BackupArchiveError(`The archive is damaged or incomplete: ${(err as Error).message}`);
    throw err;
  }
  if (!manifest) throw new BackupArchiveError('The archive has no manifest.json: it is incomplete or not a backup');
  for (const file of manifest.files) {
    const got = seen.get(file.path);
    if (!got) throw new BackupArchiveError(`${file.path} is listed in manifest.json but missing from the archive`);
    if (got.size !== file.size || got.sha256 !== file.sha256)
      throw new BackupArchiveError(
        `${file.path} does not match manifest.json (sha256 ${got.sha256}, expected ${file.sha256}): the archive is corrupt`,
      );
    seen.delete(file.path);
  }
  const extra = seen.keys().next();
  if (!extra.done) throw new BackupArchiveError(`${extra.value} is in the archive but not in manifest.json`);
  return manifest;
}

export interface RestoreSummary {
  dataDir: string;
  manifest: BackupManifest;
  /** What the restored database answered when it was opened. */
  database: { migrations: number; latestMigration: string | null };
}

/**
 * Restores a backup file into `dataDir`, which must not exist, or be empty and not in use. See the
 * file comment; throws RestoreRefusedError or BackupArchiveError (and leaves `dataDir` as it was).
 */
export async function restoreEmbeddedBackup(from: string, dataDir: string): Promise<RestoreSummary> {
  const target = resolve(dataDir);
  const holder = inspectDataDirLock(target);
  if (holder.state === 'running-here' || holder.state === 'running-elsewhere')
    throw new RestoreRefusedError(
      `${target} is in use by a running process (pid ${holder.holder.pid}${holder.state === 'running-elsewhere' ? ` on ${holder.holder.hostname}` : ''}, ${holder.holder.purpose}); stop it first, and restore into an empty directory`,
    );
  const created = !(await exists(target));
  if (!created) {
    if (!(await stat(target)).isDirectory()) throw new RestoreRefusedError(`${target} is not a directory`);
    const present = await readdir(target);
    if (present.length > 0)
      throw new RestoreRefusedError(
        `${target} is not empty (${present.slice(0, 3).join(', ')}${present.length > 3 ? ', …' : ''}); restore into a new or empty directory`,
      );
  }
  await stat(from).catch(() => {
    throw new RestoreRefusedError(`${from} cannot be read`);
  });
  await mkdir(target, { recursive: true, mode: 0o700 });
  let lock: DataDirLock;
  try {
    lock = acquireDataDirLock(target, { purpose: 'restore' });
  } catch (err) {
    if (err instanceof DataDirLockedError) throw new RestoreRefusedError(err.message); // started meanwhile
    throw err;
  }
  let restored = false;
  try {
    const manifest = await readBackup(createReadStream(from), async (entry, data) => {
      const path = join(target, ...entry.path.split('/'));
      if (entry.type === 'directory') {
        await mkdir(path, { recursive: true, mode: entry.mode & 0o777 });
        for await (const _ of data);
        return;
      }
      if (entry.path === MANIFEST) return;
      await mkdir(join(path, '..'), { recursive: true, mode: 0o700 });
      const isKey = (KEY_FILES as readonly string[]).includes(entry.path);
      await pipeline(
        Readable.from(data),
        createWriteStream(path, { flags: 'wx', mode: isKey ? KEY_MODE : entry.mode & 0o777 }),
      );
    });
    const database = await openRestored(join(target, DATABASE_DIR));
    if (database.latestMigration !== manifest.database.latestMigration)
      throw new BackupArchiveError(
        `The restored database is at migration ${String(database.latestMigration)}, the manifest says ${String(manifest.database.latestMigration)}`,
      );
    restored = true;
    return { dataDir: target, manifest, database };
  } finally {
    // A failed restore leaves the directory as it found it: empty, or gone if it did not exist.
    if (!restored)
      for (const name of await readdir(target))
        if (name !== LOCK_FILE_NAME) await rm(join(target, name), { recursive: true, force: true });
    lock.release();
    if (!restored && created) await rmdir(target).catch(() => undefined);
  }
}

/** Opens the restored cluster once: it must start, and the log the checkpoint left is replayed now. */
async function openRestored(dir: string): Promise<{ migrations: number; latestMigration: string | null }> {
  if (!(await exists(join(dir, 'PG_VERSION')))) throw new BackupArchiveError('The archive holds no database');
  const { PGlite } = await import('@electric-sql/pglite');
  let pglite: InstanceType<typeof PGlite>;
  try {
    pglite = await PGlite.create(dir, {
      startParams: [...PGlite.defaultStartParams, '-c', `shared_buffers=${EMBEDDED_SHARED_BUFFERS_DEFAULT}`],
    });
  } catch (err) {
    throw new BackupArchiveError(`The restored database does not open: ${(err as Error).message}`);
  }
  try {
    return await migrationState(pglite);
  } finally {
    await pglite.close();
  }
}

/**
 * Writes a native archive of one account (docs/portability.md, "The native export"): every
 * exported table (nativeTables.ts) as a JSON Lines part, the stored objects its rows name, and the
 * manifest that describes and checks them.
 *
 * Memory stays flat whatever the account's size: rows are read in keyset pages inside one
 * read-only snapshot and written to a temporary file per table as they come (a tar header needs
 * each part's size up front); the objects are copied to temporary files one at a time; the tar is
 * then streamed to object storage from those files. The peak is one page of rows (a few hundred,
 * 100 for the tables with large rows) plus the stream buffers; the temporary files take about the
 * archive's size on disk.
 */
import { createHash, type Hash } from 'node:crypto';
import { once } from 'node:events';
import { createReadStream, createWriteStream, type WriteStream } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { Readable } from 'node:stream';
import { inTransaction, type OwnerContext, ownerOf } from '../../core/context.ts';
import { MessageCipher } from '../../crypto/messageCipher.ts';
import type { ObjectStorage } from '../../storage/types.ts';
import { DERIVED_MEDIA, EXPORTED_TABLES, type ExportedTable, MEDIA_FOLDERS } from './nativeTables.ts';
import type { NativeExportManifest } from './repo/exports.ts';

type NativeExportTable = NonNullable<NativeExportManifest['parts'][number]['table']>;
import { nativeRepo } from './repo/native.ts';
import { TAR_END_BYTES, type TarEntry, tarEntrySize } from './tar.ts';

export const NATIVE_FORMAT = 'account-data-export';
export const NATIVE_VERSION = 1;

/** A file written line by line, with its bytes, lines and SHA-256 counted as it goes. */
class PartFile {
  private readonly out: WriteStream;
  private readonly hash: Hash = createHash('sha256');
  bytes = 0;
  lines = 0;

  constructor(readonly path: string) {
    this.out = createWriteStream(path);
  }

  async line(text: string): Promise<void> {
    const chunk = Buffer.from(`${text}\n`, 'utf8');
    this.hash.update(chunk);
    this.bytes += chunk.length;
    this.lines++;
    if (!this.out.write(chunk)) await once(this.out, 'drain');
  }

  async close(): Promise<string> {
    this.out.end();
    await once(this.out, 'finish');
    return this.hash.digest('hex');
  }
}

export interface NativeArchive {
  manifest: NativeExportManifest;
  /** The archive's size in bytes. */
  size: number;
  /** The archive's entries, in order, each opened from its temporary file when written. */
  entries(): AsyncIterable<TarEntry>;
}

const fileEntry = (name: string, path: string, size: number): TarEntry => ({
  name,
  size,
  open: () => createReadStream(path),
});

/** Lines of a file, one at a time. */
function linesOf(path: string): AsyncIterable<string> {
  return createInterface({ input: createReadStream(path), crlfDelay: Number.POSITIVE_INFINITY });
}

const escapeRegExp = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/**
 * Writes one table's rows of the account to `file`, page by page, and the keys of the stored
 * objects they name to `media` (one per line; repeats within a page dropped).
 */
async function writeTable(
  ctx: OwnerContext,
  table: ExportedTable,
  file: PartFile,
  media: PartFile,
  cipher: MessageCipher,
): Promise<void> {
  const userId = ownerOf(ctx);
  const size = table.batch ?? 500;
  const mediaKey = new RegExp(
    `u/${escapeRegExp(userId)}/(?:${MEDIA_FOLDERS.map(escapeRegExp).join('|')})[A-Za-z0-9._/-]+`,
    'g',
  );
  const derived = DERIVED_MEDIA[table.name];
  let after: string[] | null = null;
  for (;;) {
    const rows = await nativeRepo.exportPage(ctx.db, table, userId, after, size);
    const keys = new Set<string>();
    for (const row of rows) {
      let line = row.line;
      if (table.sealed) {
        const value = JSON.parse(line) as { id: string };
        const text = cipher.open(userId, value.id, {
          keyId: row.sealed_key!,
          data: Buffer.from(row.sealed_data!, 'base64'),
        });
        line = JSON.stringify({ ...value, [table.sealed]: table.sealed === 'data' ? JSON.parse(text) : text });
      }
      await file.line(line);
      for (const key of line.match(mediaKey) ?? []) keys.add(key);
      if (derived) keys.add(derived(userId, JSON.parse(line) as { sha256: string }));
    }
    for (const key of keys) await media.line(key);
    if (rows.length < size || table.page.length === 0) return;
    const last = rows[rows.length - 1]!;
    after = table.page.map((_, i) => String(last[`k${i}`]));
  }
}

/** Copies one stored object to a temporary file, hashing it; null when storage no longer has it. */
async function copyObject(
  storage: ObjectStorage,
  key: string,
  path: string,
): Promise<{ contentType: string; bytes: number; sha256: string } | null> {
  const stored = await storage.getStream(key);
  if (!stored) return null;
  const hash = createHash('sha256');
  const out = createWriteStream(path);
  let bytes = 0;
  for await (const chunk of stored.body) {
    const buffer = chunk as Buffer;
    hash.update(buffer);
    bytes += buffer.length;
    if (!out.write(buffer)) await once(out, 'drain');
  }
  out.end();
  await once(out, 'finish');
  return { contentType: stored.contentType, bytes, sha256: hash.digest('hex') };
}

/** Writes the archive's parts into `dir` (an empty temporary directory) and describes the archive. */
export async function writeNativeArchive(
  ctx: OwnerContext,
  storage: ObjectStorage,
  dir: string,
  createdAt: number,
): Promise<NativeArchive> {
  const userId = ownerOf(ctx);
  const cipher = new MessageCipher(ctx.config.messageEncryptionKeys);
  const parts: NativeExportManifest['parts'] = [];
  const mediaKeys = new PartFile(join(dir, 'media-keys.txt'));
  await inTransaction(ctx, async (tx) => {
    await nativeRepo.beginSnapshot(tx.db);
    for (const table of EXPORTED_TABLES) {
      const file = new PartFile(join(dir, `${table.name}.jsonl`));
      await writeTable(tx, table, file, mediaKeys, cipher);
      const sha256 = await file.close();
      parts.push({
        path: `data/${table.name}.jsonl`,
        table: table.name as NativeExportTable,
        rows: file.lines,
        bytes: file.bytes,
        sha256,
      });
    }
  });
  await mediaKeys.close();

  // The objects, one at a time, each into a file of its own (m<n>) and a line of media.jsonl.
  const index = new PartFile(join(dir, 'media.jsonl'));
  let objects = 0;
  let objectBytes = 0;
  let missing = 0;
  let mediaSize = 0;
  for await (const key of linesOf(mediaKeys.path)) {
    const copied = await copyObject(storage, key, join(dir, `m${objects}`));
    if (!copied) {
      missing++;
      continue;
    }
    await index.line(JSON.stringify({ key, ...copied }));
    mediaSize += tarEntrySize({ name: `media/${key}`, size: copied.bytes });
    objects++;
    objectBytes += copied.bytes;
  }
  const indexSha = await index.close();
  parts.push({ path: 'media.jsonl', table: null, rows: index.lines, bytes: index.bytes, sha256: indexSha });

  const manifest: NativeExportManifest = {
    format: NATIVE_FORMAT,
    version: NATIVE_VERSION,
    accountId: userId,
    createdAt,
    parts,
    media: { objects, bytes: objectBytes, missing },
  };
  const manifestBytes = Buffer.from(`${JSON.stringify(manifest, null, 2)}\n`, 'utf8');
  const fixed: TarEntry[] = [
    { name: 'manifest.json', size: manifestBytes.length, open: () => Readable.from([manifestBytes]) },
    fileEntry('media.jsonl', index.path, index.bytes),
    ...parts.filter((p) => p.table !== null).map((p) => fileEntry(p.path, join(dir, `${p.table}.jsonl`), p.bytes)),
  ];
  const size = TAR_END_BYTES + mediaSize + fixed.reduce((sum, e) => sum + tarEntrySize(e), 0);
  return {
    manifest,
    size,
    entries: async function* () {
      yield* fixed;
      let n = 0;
      for await (const line of linesOf(index.path)) {
        const { key, bytes } = JSON.parse(line) as { key: string; bytes: number };
        yield fileEntry(`media/${key}`, join(dir, `m${n++}`), bytes);
      }
    },
  };
}

/**
 * The native archive as a tar stream, over the ustar subset of server/db/tar.ts (which the embedded
 * backup writes and reads too): regular files, a pax `path` record for names longer than a header
 * holds. Writing streams each entry's body from `open()` in turn, so an archive of any size costs
 * one entry's read buffer; a tar header carries the size up front, so every entry's size is known
 * before the archive starts (the export writes its parts to temporary files first), and so is the
 * archive's, which object storage is told before the first byte.
 */
import { Readable } from 'node:stream';
import { END_OF_ARCHIVE, entryHeader, padding } from '../../db/tar.ts';

export { readTar, TarFormatError } from '../../db/tar.ts';

export interface TarEntry {
  /** `/`-separated, relative. */
  name: string;
  size: number;
  /** The body, exactly `size` bytes; called when the entry is written. */
  open(): Readable;
}

const header = (entry: { name: string; size: number }, mtime: number) =>
  entryHeader({ path: entry.name, type: 'file', mode: 0o644, size: entry.size, mtime });

/** The bytes an entry takes in the archive: its headers, its body and the body's padding. */
export function tarEntrySize(entry: { name: string; size: number }): number {
  return header(entry, 0).length + entry.size + padding(entry.size).length;
}

/** The end of an archive: its size is this plus every entry's tarEntrySize. */
export const TAR_END_BYTES = END_OF_ARCHIVE.length;

/** The archive of these entries as a stream; `mtime` (epoch seconds) is every entry's modification time. */
export function tarStream(entries: AsyncIterable<TarEntry> | Iterable<TarEntry>, mtime: number): Readable {
  async function* generate(): AsyncGenerator<Buffer> {
    for await (const entry of entries) {
      yield header(entry, mtime);
      let written = 0;
      for await (const chunk of entry.open()) {
        const buffer = chunk as Buffer;
        written += buffer.length;
        if (written > entry.size) throw new Error(`tar entry ${entry.name} is longer than its ${entry.size} bytes`);
        yield buffer;
      }
      if (written !== entry.size) throw new Error(`tar entry ${entry.name} has ${written} of its ${entry.size} bytes`);
      yield padding(entry.size);
    }
    yield END_OF_ARCHIVE;
  }
  return Readable.from(generate());
}

/** Why the first 512 bytes are not a ustar header, or null when they are one (a quick check before storing an upload). */
export function tarHeaderError(block: Buffer): string | null {
  if (block.length < 512) return 'it is shorter than one 512-byte tar block';
  if (block.toString('ascii', 257, 262) !== 'ustar') return 'its first header block has no ustar magic';
  let sum = 0;
  for (let i = 0; i < 512; i++) sum += i >= 148 && i < 156 ? 0x20 : block[i]!;
  const stored = block.toString('ascii', 148, 156).replace(/\0.*$/s, '').trim();
  if (!/^[0-7]+$/.test(stored) || Number.parseInt(stored, 8) !== sum)
    return 'its first header block has a wrong checksum';
  return null;
}

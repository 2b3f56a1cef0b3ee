/**
 * The tar subset the embedded backup uses (server/db/backup.ts): regular files and directories in
 * POSIX ustar, with a pax `path` record for names longer than the 100 bytes a header holds. Written
 * and read as streams, one entry at a time, so neither side holds more than a chunk of a file.
 * `tar tzvf` and `tar xzf` read what is written here.
 */
import { Buffer } from 'node:buffer';

const BLOCK = 512;
/** The largest size the header's 11 octal digits hold (8 GiB − 1); PostgreSQL's segments are 1 GiB. */
const MAX_SIZE = 0o77777777777;

export type EntryType = 'file' | 'directory';

export interface EntryHeader {
  path: string;
  type: EntryType;
  /** Permission bits (0o600 …). */
  mode: number;
  size: number;
  /** Seconds since the epoch. */
  mtime: number;
}

function octal(value: number, width: number): string {
  return value.toString(8).padStart(width - 1, '0') + '\0';
}

function rawHeader(name: string, typeflag: string, mode: number, size: number, mtime: number): Buffer {
  if (size > MAX_SIZE) throw new RangeError(`${name}: ${size} bytes is more than a tar entry holds`);
  const block = Buffer.alloc(BLOCK);
  block.write(name, 0, 100, 'utf8');
  block.write(octal(mode & 0o7777, 8), 100, 'ascii');
  block.write(octal(0, 8), 108, 'ascii'); // uid
  block.write(octal(0, 8), 116, 'ascii'); // gid
  block.write(octal(size, 12), 124, 'ascii');
  block.write(octal(Math.max(0, Math.floor(mtime)), 12), 136, 'ascii');
  block.write('        ', 148, 'ascii'); // checksum, counted as spaces
  block.write(typeflag, 156, 'ascii');
  block.write('ustar\0', 257, 'ascii');
  block.write('00', 263, 'ascii');
  let sum = 0;
  for (const byte of block) sum += byte;
  block.write(octal(sum, 7) + ' ', 148, 'ascii');
  return block;
}

/** A pax record: `<length> <key>=<value>\n`, the length counting itself. */
function paxRecord(key: string, value: string): Buffer {
  const body = ` ${key}=${value}\n`;
  let length = Buffer.byteLength(body) + 1;
  while (String(length).length + Buffer.byteLength(body) !== length) length++;
  return Buffer.from(`${length}${body}`, 'utf8');
}

/** The blocks that start an entry (a pax header first when the path does not fit), its data to follow. */
export function entryHeader(entry: EntryHeader): Buffer {
  const name = entry.type === 'directory' && !entry.path.endsWith('/') ? `${entry.path}/` : entry.path;
  const typeflag = entry.type === 'directory' ? '5' : '0';
  const size = entry.type === 'directory' ? 0 : entry.size;
  const header = rawHeader(name, typeflag, entry.mode, size, entry.mtime);
  if (Buffer.byteLength(name) <= 100) return header;
  const pax = paxRecord('path', name);
  return Buffer.concat([rawHeader('PaxHeader', 'x', 0o644, pax.length, entry.mtime), pax, padding(pax.length), header]);
}

/** Zero bytes that fill the last block of `size` bytes of data. */
export function padding(size: number): Buffer {
  return Buffer.alloc((BLOCK - (size % BLOCK)) % BLOCK);
}

/** Two zero blocks: the end of the archive. */
export const END_OF_ARCHIVE = Buffer.alloc(BLOCK * 2);

export class TarFormatError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'TarFormatError';
  }
}

/** Pulls exact byte counts out of a stream of chunks. */
class ChunkReader {
  private buffered: Buffer[] = [];
  private length = 0;
  private done = false;

  constructor(private readonly source: AsyncIterator<Buffer>) {}

  private async fill(): Promise<boolean> {
    if (this.done) return false;
    const next = await this.source.next();
    if (next.done) {
      this.done = true;
      return false;
    }
    this.buffered.push(next.value);
    this.length += next.value.length;
    return true;
  }

  /** Exactly `n` bytes, or fewer at the end of the stream. */
  async read(n: number): Promise<Buffer> {
    while (this.length < n && (await this.fill()));
    const all = this.buffered.length === 1 ? this.buffered[0]! : Buffer.concat(this.buffered);
    const out = all.subarray(0, Math.min(n, all.length));
    const rest = all.subarray(out.length);
    this.buffered = rest.length > 0 ? [rest] : [];
    this.length = rest.length;
    return out;
  }

  /** Up to `n` bytes as they arrive (at least one unless the stream has ended). */
  async readSome(n: number): Promise<Buffer> {
    if (this.length === 0) await this.fill();
    return this.read(Math.min(n, this.length));
  }

  /** True when nothing but zero bytes is left. */
  async onlyZerosLeft(): Promise<boolean> {
    for (;;) {
      for (const chunk of this.buffered) if (chunk.some((b) => b !== 0)) return false;
      this.buffered = [];
      this.length = 0;
      if (!(await this.fill())) return true;
    }
  }
}

function parseOctal(field: Buffer, what: string): number {
  const text = field.toString('ascii').replace(/\0.*$/s, '').trim();
  if (!/^[0-7]+$/.test(text)) throw new TarFormatError(`Unreadable ${what} in a tar header`);
  return parseInt(text, 8);
}

function parseHeader(block: Buffer): { name: string; typeflag: string; mode: number; size: number; mtime: number } {
  let sum = 0;
  for (let i = 0; i < BLOCK; i++) sum += i >= 148 && i < 156 ? 32 : block[i]!;
  if (parseOctal(block.subarray(148, 156), 'checksum') !== sum) throw new TarFormatError('A tar header is corrupt');
  const field = (start: number, end: number) => block.subarray(start, end).toString('utf8').replace(/\0.*$/s, '');
  const prefix = block.subarray(257, 262).toString('ascii') === 'ustar' ? field(345, 500) : '';
  const name = field(0, 100);
  return {
    name: prefix ? `${prefix}/${name}` : name,
    typeflag: String.fromCharCode(block[156]!),
    mode: parseOctal(block.subarray(100, 108), 'mode'),
    size: parseOctal(block.subarray(124, 136), 'size'),
    mtime: parseOctal(block.subarray(136, 148), 'time'),
  };
}

function parsePax(data: Buffer): Record<string, string> {
  const records: Record<string, string> = {};
  let at = 0;
  while (at < data.length) {
    const space = data.indexOf(0x20, at);
    const length = Number(data.subarray(at, space).toString('ascii'));
    if (space < 0 || !Number.isInteger(length) || length <= 0 || at + length > data.length)
      throw new TarFormatError('A pax header is corrupt');
    const record = data.subarray(space + 1, at + length - 1).toString('utf8');
    const eq = record.indexOf('=');
    if (eq > 0) records[record.slice(0, eq)] = record.slice(eq + 1);
    at += length;
  }
  return records;
}

export interface ReadEntry extends EntryHeader {
  /** The entry's data, a chunk at a time; must be read to the end (or the entry skipped) before the next. */
  chunks(): AsyncGenerator<Buffer>;
}

/**
 * The entries of a tar stream, in order. Anything but files, directories and pax path records is
 * refused, as is a stream that ends before the end-of-archive blocks (a cut download).
 */
export async function* readTar(source: AsyncIterable<Buffer>): AsyncGenerator<ReadEntry> {
  const reader = new ChunkReader(source[Symbol.asyncIterator]());
  let paxPath: string | undefined;
  for (;;) {
    const block = await reader.read(BLOCK);
    if (block.length < BLOCK) throw new TarFormatError('The archive ends early: it is incomplete');
    if (block.every((b) => b === 0)) {
      if (!(await reader.onlyZerosLeft())) throw new TarFormatError('Data after the end of the archive');
      return;
    }
    const header = parseHeader(block);
    if (header.typeflag === 'x') {
      const data = await reader.read(header.size);
      await reader.read(padding(header.size).length);
      if (data.length < header.size) throw new TarFormatError('The archive ends early: it is incomplete');
      paxPath = parsePax(data).path;
      continue;
    }
    const type: EntryType | undefined =
      header.typeflag === '0' || header.typeflag === '\0' ? 'file' : header.typeflag === '5' ? 'directory' : undefined;
    if (!type) throw new TarFormatError(`Unsupported tar entry type "${header.typeflag}" (${header.name})`);
    const path = (paxPath ?? header.name).replace(/\/+$/, '');
    paxPath = undefined;
    const size = type === 'file' ? header.size : 0;
    let left = size;
    let consumed = false;
    const chunks = async function* (): AsyncGenerator<Buffer> {
      consumed = true;
      while (left > 0) {
        const chunk = await reader.readSome(Math.min(left, 1 << 20));
        if (chunk.length === 0) throw new TarFormatError('The archive ends early: it is incomplete');
        left -= chunk.length;
        yield chunk;
      }
    };
    yield { path, type, mode: header.mode, size, mtime: header.mtime, chunks };
    if (!consumed || left > 0) for await (const _ of chunks());
    const pad = await reader.read(padding(size).length);
    if (pad.length < padding(size).length) throw new TarFormatError('The archive ends early: it is incomplete');
  }
}

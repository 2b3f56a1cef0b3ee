/**
 * A small streaming tar (POSIX ustar, with pax headers for names or sizes ustar cannot hold): the
 * native export writes its archive with it and the native import reads it back. Regular files only.
 *
 * Writing streams each entry's body from `open()` in turn, so an archive of any size costs one
 * entry's read buffer; a tar header carries the size up front, so every entry's size is known
 * before the archive starts (the export writes its parts to temporary files first).
 * Reading pulls from the source as the caller consumes each entry, and refuses what it cannot
 * trust: a header whose checksum or magic is wrong, an entry of another type, an archive cut short.
 */
import { Readable } from 'node:stream';

const BLOCK = 512;
/** The largest size the 11 octal digits of a ustar header hold. */
const MAX_USTAR_SIZE = 0o77777777777;

export interface TarEntry {
  /** `/`-separated, relative, ASCII. */
  name: string;
  size: number;
  /** The body, exactly `size` bytes; called when the entry is written. */
  open(): Readable | Promise<Readable>;
}

/** The archive is not a tar file this reader accepts, or it ends early. */
export class TarFormatError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'TarFormatError';
  }
}

const padding = (size: number) => (BLOCK - (size % BLOCK)) % BLOCK;

/** Splits a name into ustar's prefix (≤155 bytes) and name (≤100) at a `/`, or null when it does not fit. */
function ustarName(name: string): { prefix: string; name: string } | null {
  if (Buffer.byteLength(name) <= 100) return { prefix: '', name };
  for (let i = name.indexOf('/'); i !== -1; i = name.indexOf('/', i + 1)) {
    const prefix = name.slice(0, i);
    const rest = name.slice(i + 1);
    if (Buffer.byteLength(prefix) <= 155 && Buffer.byteLength(rest) <= 100 && rest.length > 0)
      return { prefix, name: rest };
  }
  return null;
}

/** One pax record, `<length> <key>=<value>\n`, whose length counts its own digits. */
function paxRecord(key: string, value: string): string {
  const body = ` ${key}=${value}\n`;
  let length = Buffer.byteLength(body);
  while (String(length).length + Buffer.byteLength(body) !== length)
    length = String(length).length + Buffer.byteLength(body);
  return `${length}${body}`;
}

function paxRecords(entry: { name: string; size: number }): string {
  return (
    (ustarName(entry.name) ? '' : paxRecord('path', entry.name)) +
    (entry.size > MAX_USTAR_SIZE ? paxRecord('size', String(entry.size)) : '')
  );
}

function header(name: string, size: number, type: '0' | 'x', mtime: number): Buffer {
  const block = Buffer.alloc(BLOCK, 0);
  const split = ustarName(name) ?? { prefix: '', name: name.slice(0, 100) };
  const octal = (value: number, width: number) => `${value.toString(8).padStart(width - 1, '0')}\0`;
  block.write(split.name, 0, 100, 'utf8');
  block.write(octal(0o644, 8), 100, 'ascii');
  block.write(octal(0, 8), 108, 'ascii');
  block.write(octal(0, 8), 116, 'ascii');
  block.write(octal(Math.min(size, MAX_USTAR_SIZE), 12), 124, 'ascii');
  block.write(octal(mtime, 12), 136, 'ascii');
  block.write('        ', 148, 'ascii');
  block.write(type, 156, 'ascii');
  block.write('ustar\u000000', 257, 'ascii');
  block.write(split.prefix, 345, 155, 'utf8');
  let sum = 0;
  for (const byte of block) sum += byte;
  block.write(`${sum.toString(8).padStart(6, '0')}\0 `, 148, 'ascii');
  return block;
}

/** The bytes an entry takes in the archive: its headers, its body and the body's padding. */
export function tarEntrySize(entry: { name: string; size: number }): number {
  const pax = Buffer.byteLength(paxRecords(entry));
  return (pax > 0 ? BLOCK + pax + padding(pax) : 0) + BLOCK + entry.size + padding(entry.size);
}

/** The two zero blocks that end an archive: its size is these plus every entry's tarEntrySize. */
export const TAR_END_BYTES = 2 * BLOCK;

/** The archive of these entries as a stream; `mtime` (epoch seconds) is every entry's modification time. */
export function tarStream(entries: AsyncIterable<TarEntry> | Iterable<TarEntry>, mtime: number): Readable {
  async function* generate(): AsyncGenerator<Buffer> {
    for await (const entry of entries) {
      const pax = paxRecords(entry);
      if (pax) {
        const bytes = Buffer.from(pax, 'utf8');
        yield header(`PaxHeaders/${entry.name}`.slice(0, 100), bytes.length, 'x', mtime);
        yield bytes;
        yield Buffer.alloc(padding(bytes.length));
      }
      yield header(entry.name, entry.size, '0', mtime);
      let written = 0;
      for await (const chunk of await entry.open()) {
        const buffer = Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk as Uint8Array);
        written += buffer.length;
        if (written > entry.size) throw new Error(`tar entry ${entry.name} is longer than its ${entry.size} bytes`);
        yield buffer;
      }
      if (written !== entry.size) throw new Error(`tar entry ${entry.name} has ${written} of its ${entry.size} bytes`);
      yield Buffer.alloc(padding(entry.size));
    }
    yield Buffer.alloc(2 * BLOCK);
  }
  return Readable.from(generate(), { objectMode: false });
}

/** Exact reads over a stream of chunks. */
class ByteReader {
  private buffered: Buffer[] = [];
  private length = 0;
  private done = false;
  read = 0;

  constructor(private readonly source: AsyncIterator<Buffer | Uint8Array | string>) {}

  private async fill(n: number): Promise<void> {
    while (this.length < n && !this.done) {
      const next = await this.source.next();
      if (next.done) this.done = true;
      else {
        const chunk = Buffer.isBuffer(next.value) ? next.value : Buffer.from(next.value as Uint8Array);
        this.buffered.push(chunk);
        this.length += chunk.length;
      }
    }
  }

  private take(n: number): Buffer {
    const all = this.buffered.length === 1 ? this.buffered[0]! : Buffer.concat(this.buffered, this.length);
    const out = all.subarray(0, n);
    const rest = all.subarray(n);
    this.buffered = rest.length > 0 ? [rest] : [];
    this.length = rest.length;
    this.read += out.length;
    return out;
  }

  /** Exactly n bytes, or fewer at the end of the stream. */
  async exact(n: number): Promise<Buffer> {
    await this.fill(n);
    return this.take(Math.min(n, this.length));
  }

  /** The next n bytes as they arrive, without holding them all; throws when the stream ends first. */
  async *chunks(n: number, what: string): AsyncGenerator<Buffer> {
    let left = n;
    while (left > 0) {
      await this.fill(1);
      if (this.length === 0) throw new TarFormatError(`The archive ends in the middle of ${what} (it was cut short)`);
      const piece = this.take(Math.min(left, this.length));
      left -= piece.length;
      yield piece;
    }
  }
}

function field(block: Buffer, offset: number, length: number): string {
  const raw = block.subarray(offset, offset + length);
  const end = raw.indexOf(0);
  return raw.subarray(0, end === -1 ? length : end).toString('utf8');
}

function octalField(block: Buffer, offset: number, length: number, what: string): number {
  const text = field(block, offset, length).trim();
  if (!/^[0-7]*$/.test(text)) throw new TarFormatError(`The archive has a header whose ${what} is not a number`);
  return text === '' ? 0 : Number.parseInt(text, 8);
}

/** Why the first block is not a ustar header, or null when it is one (a quick check before storing an upload). */
export function tarHeaderError(block: Buffer): string | null {
  if (block.length < BLOCK) return `it is shorter than one ${BLOCK}-byte tar block`;
  if (block.toString('ascii', 257, 262) !== 'ustar') return 'its first header block has no ustar magic';
  let sum = 0;
  for (let i = 0; i < BLOCK; i++) sum += i >= 148 && i < 156 ? 0x20 : block[i]!;
  const stored = field(block, 148, 8).trim();
  if (!/^[0-7]+$/.test(stored) || Number.parseInt(stored, 8) !== sum)
    return 'its first header block has a wrong checksum';
  return null;
}

export interface TarReadEntry {
  name: string;
  size: number;
  /** The body: consume it whole before asking for the next entry. */
  body: AsyncIterable<Buffer>;
}

/**
 * The regular files of an archive, in order. Each entry's body must be read to its end before the
 * next entry is asked for. Throws TarFormatError for anything it does not accept, including an
 * archive without its end blocks.
 */
export async function* readTar(source: AsyncIterable<Buffer | Uint8Array | string>): AsyncGenerator<TarReadEntry> {
  const reader = new ByteReader(source[Symbol.asyncIterator]());
  let pax: Record<string, string> = {};
  for (;;) {
    const block = await reader.exact(BLOCK);
    if (block.length === 0)
      throw new TarFormatError('The archive ends without its end-of-archive blocks (it was cut short)');
    if (block.length < BLOCK) throw new TarFormatError('The archive ends in the middle of a header (it was cut short)');
    if (block.every((b) => b === 0)) {
      const second = await reader.exact(BLOCK);
      if (second.length < BLOCK || !second.every((b) => b === 0))
        throw new TarFormatError('The archive has an empty header block that is not its end');
      return;
    }
    const problem = tarHeaderError(block);
    if (problem)
      throw new TarFormatError(
        `The archive has a damaged header at byte ${reader.read - BLOCK}: ${problem.replace('its first header block', 'the block')}`,
      );
    const type = String.fromCharCode(block[156]!);
    const size = pax.size !== undefined ? Number(pax.size) : octalField(block, 124, 12, 'size');
    if (!Number.isSafeInteger(size) || size < 0)
      throw new TarFormatError('The archive has an entry of impossible size');
    const prefix = field(block, 345, 155);
    const name = pax.path ?? (prefix ? `${prefix}/${field(block, 0, 100)}` : field(block, 0, 100));
    if (type === 'x' || type === 'g') {
      if (size > 1_048_576) throw new TarFormatError('The archive has a pax header larger than 1 MiB');
      const parts: Buffer[] = [];
      for await (const chunk of reader.chunks(size + padding(size), 'a pax header')) parts.push(chunk);
      if (type === 'x') pax = parsePax(Buffer.concat(parts).subarray(0, size));
      continue;
    }
    pax = {};
    if (type !== '0' && type !== '\0')
      throw new TarFormatError(`The archive holds ${JSON.stringify(name)}, which is not a regular file`);
    const label = JSON.stringify(name);
    let remaining = size;
    const body = (async function* () {
      for await (const chunk of reader.chunks(size, label)) {
        remaining -= chunk.length;
        yield chunk;
      }
    })();
    yield { name, size, body };
    // Whatever the caller left unread, then the padding.
    for await (const _ of reader.chunks(remaining + padding(size), label)) void _;
  }
}

function parsePax(text: Buffer): Record<string, string> {
  const out: Record<string, string> = {};
  let at = 0;
  while (at < text.length) {
    const space = text.indexOf(0x20, at);
    const length = Number(text.toString('ascii', at, space));
    const record = text.subarray(at, at + length).toString('utf8');
    const m = /^\d+ ([^=]+)=([\s\S]*)\n$/.exec(record);
    if (space === -1 || !Number.isSafeInteger(length) || length <= 0 || !m)
      throw new TarFormatError('The archive has a malformed pax header');
    out[m[1]!] = m[2]!;
    at += length;
  }
  return out;
}

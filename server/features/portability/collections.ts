/**
 * A JSON object file of collections (Simply Plural's export: one top-level key per collection,
 * each an array of documents or a map of them by id), read one document at a time instead of
 * parsed whole. An index pass notes where each top-level value starts and ends; `documents(key)`
 * then reads only that value's bytes from the file and parses each document on its own. So
 * reading a file costs what its largest document and the caller keep, not ten times the file.
 *
 * The file was checked to be one JSON object when it was uploaded (jsonSyntax.ts); each document
 * still goes through JSON.parse, so bytes that are not JSON never become a value.
 */
import { closeSync, read, openSync, readSync } from 'node:fs';
import { promisify } from 'node:util';

const readAsync = promisify(read);

/** The file is not one JSON object (the upload's check makes this rare: a file changed in storage). */
export class NotJsonObject extends Error {
  constructor() {
    super('the file is not one JSON object');
    this.name = 'NotJsonObject';
  }
}

/** A document of a collection: `key` is its key in a map of documents, null in an array. */
export interface CollectionDocument {
  key: string | null;
  doc: unknown;
}

/** What the parser reads of the file, whether parsed whole (memory) or streamed (a file). */
export interface Collections {
  /** The top-level keys, in file order. */
  keys(): string[];
  has(key: string): boolean;
  /** The documents of an array or map value, one at a time; null when the value is neither. */
  documents(key: string): Iterable<CollectionDocument> | null;
  /** How many documents documents(key) yields (0 when it yields none). */
  count(key: string): number;
  /** Whether the value is an array, a map (object) of documents, or something else; undefined when absent. */
  kind(key: string): 'array' | 'object' | 'other' | undefined;
  /** The value itself (a value that holds no documents). */
  value(key: string): unknown;
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** A reviver for JSON.parse of each document and value (PluralKit's drops Discord ids). */
export type Reviver = (this: unknown, key: string, value: unknown) => unknown;

/** A file already parsed (tests, and small inputs). */
export function collectionsOf(doc: Record<string, unknown>): Collections {
  const entries = (value: unknown): CollectionDocument[] | null => {
    if (Array.isArray(value)) return value.map((d) => ({ key: null, doc: d }));
    if (isObject(value)) return Object.entries(value).map(([key, d]) => ({ key, doc: d }));
    return null;
  };
  const own = (key: string) => Object.hasOwn(doc, key);
  return {
    keys: () => Object.keys(doc),
    has: own,
    documents: (key) => (own(key) ? entries(doc[key]) : null),
    count: (key) => (own(key) ? (entries(doc[key])?.length ?? 0) : 0),
    kind: (key) => {
      if (!own(key)) return undefined;
      const value = doc[key];
      return Array.isArray(value) ? 'array' : isObject(value) ? 'object' : 'other';
    },
    value: (key) => (own(key) ? doc[key] : undefined),
  };
}

/** Where a top-level value is in the file: bytes [start, end), its kind and its number of members. */
interface Span {
  start: number;
  end: number;
  kind: 'array' | 'object' | 'other';
  count: number;
}

const WS = new Uint8Array(256);
for (const c of [0x20, 0x09, 0x0a, 0x0d]) WS[c] = 1;

/**
 * Reads [from, to) of the file in chunks, calling `visit` for each byte with its position. The
 * visitor returns nothing; the caller keeps its own state. Chunk size is a parameter for tests.
 */
function scan(fd: number, from: number, to: number, chunkSize: number, visit: (chunk: Buffer, at: number) => void) {
  const buffer = Buffer.allocUnsafe(chunkSize);
  let at = from;
  while (at < to) {
    const n = readSync(fd, buffer, 0, Math.min(chunkSize, to - at), at);
    if (n === 0) throw new Error('the import file ended before its index said');
    visit(buffer.subarray(0, n), at);
    at += n;
  }
}

/** scan, with each read awaited (the index pass over the whole file). */
async function scanAsync(
  fd: number,
  from: number,
  to: number,
  chunkSize: number,
  visit: (chunk: Buffer, at: number) => void,
): Promise<void> {
  const buffer = Buffer.allocUnsafe(chunkSize);
  let at = from;
  while (at < to) {
    const { bytesRead: n } = await readAsync(fd, buffer, 0, Math.min(chunkSize, to - at), at);
    if (n === 0) throw new Error('the import file ended before its index said');
    visit(buffer.subarray(0, n), at);
    at += n;
  }
}

/** Growable bytes of one piece being read (a key, a document). */
class Piece {
  private parts: Buffer[] = [];
  private size = 0;
  add(bytes: Buffer): void {
    if (bytes.length === 0) return;
    this.parts.push(Buffer.from(bytes));
    this.size += bytes.length;
  }
  take(): string {
    const text = Buffer.concat(this.parts, this.size).toString('utf8');
    this.parts = [];
    this.size = 0;
    return text;
  }
}

/**
 * The structure of JSON bytes at one level: which bytes are inside strings, and how deep each byte
 * is. `step` advances over one byte and tells the caller what it was.
 */
class Structure {
  depth = 0;
  private inString = false;
  private escaped = false;

  /** 'open' / 'close' (a container at the depth before/after), 'quote' (a string starts or ends), 'byte' otherwise. */
  step(c: number): 'open' | 'close' | 'quote' | 'string' | 'byte' {
    if (this.inString) {
      if (this.escaped) this.escaped = false;
      else if (c === 0x5c) this.escaped = true;
      else if (c === 0x22) {
        this.inString = false;
        return 'quote';
      }
      return 'string';
    }
    if (c === 0x22) {
      this.inString = true;
      return 'quote';
    }
    if (c === 0x7b || c === 0x5b) {
      this.depth++;
      return 'open';
    }
    if (c === 0x7d || c === 0x5d) {
      this.depth--;
      return 'close';
    }
    return 'byte';
  }
}

/** A JSON object file of collections on disk (see the top of this file). Close it when done. */
export class CollectionsFile implements Collections {
  private readonly spans = new Map<string, Span>();
  private readonly order: string[] = [];

  private constructor(
    private readonly fd: number,
    private readonly size: number,
    private readonly chunkSize: number,
    private readonly reviver: Reviver | undefined,
  ) {}

  /**
   * Opens the file and indexes its top-level values (one pass, its reads awaited, so the event loop
   * runs between chunks); `reviver` is applied to each document and value as it is parsed. Rejects
   * with NotJsonObject when it is not one JSON object.
   */
  static async open(
    path: string,
    size: number,
    options: { chunkSize?: number; reviver?: Reviver } = {},
  ): Promise<CollectionsFile> {
    const file = new CollectionsFile(openSync(path, 'r'), size, options.chunkSize ?? 1 << 20, options.reviver);
    try {
      await file.index();
    } catch (err) {
      file.close();
      throw err;
    }
    return file;
  }

  close(): void {
    closeSync(this.fd);
  }

  private async index(): Promise<void> {
    const s = new Structure();
    const key = new Piece();
    /** Where the top level is: before the object, at a key, its colon, its value, inside a scalar or a container value, after a container, past the end. */
    let phase: 'start' | 'key' | 'colon' | 'value' | 'scalar' | 'container' | 'after' | 'end' = 'start';
    let readingKey = false;
    let current = '';
    let span: Span = { start: 0, end: 0, kind: 'other', count: 0 };
    /** Inside a container value: a member has begun since its last comma. */
    let memberOpen = false;
    const finish = (end: number) => {
      span.end = end;
      if (span.kind !== 'other' && memberOpen) span.count++;
      // Like JSON.parse: a key given twice keeps its last value.
      if (!this.spans.has(current)) this.order.push(current);
      this.spans.set(current, span);
    };
    await scanAsync(this.fd, 0, this.size, this.chunkSize, (chunk, base) => {
      let keyFrom = readingKey ? 0 : -1;
      for (let i = 0; i < chunk.length; i++) {
        const c = chunk[i]!;
        const depthBefore = s.depth;
        const kind = s.step(c);
        switch (phase) {
          case 'start':
            if (WS[c]) break;
            if (c !== 0x7b) throw new NotJsonObject();
            phase = 'key';
            break;
          case 'key':
            if (readingKey) {
              if (kind === 'quote') {
                key.add(chunk.subarray(keyFrom, i + 1));
                readingKey = false;
                current = JSON.parse(key.take()) as string;
                phase = 'colon';
              }
            } else if (kind === 'quote') {
              readingKey = true;
              keyFrom = i;
            } else if (kind === 'close') phase = 'end';
            break;
          case 'colon':
            if (c === 0x3a) phase = 'value';
            break;
          case 'value':
            if (WS[c]) break;
            memberOpen = false;
            if (kind === 'open') {
              span = { start: base + i, end: -1, kind: c === 0x7b ? 'object' : 'array', count: 0 };
              phase = 'container';
            } else {
              span = { start: base + i, end: -1, kind: 'other', count: 0 };
              phase = 'scalar';
            }
            break;
          case 'scalar':
            if (kind === 'byte' && c === 0x2c) {
              finish(base + i);
              phase = 'key';
            } else if (kind === 'close') {
              finish(base + i);
              phase = 'end';
            }
            break;
          case 'container':
            if (depthBefore !== 2) break;
            if (kind === 'close') {
              finish(base + i + 1);
              phase = 'after';
            } else if (kind === 'byte' && c === 0x2c) {
              if (memberOpen) span.count++;
              memberOpen = false;
            } else if (!WS[c]) memberOpen = true;
            break;
          case 'after':
            if (c === 0x2c) phase = 'key';
            else if (kind === 'close') phase = 'end';
            break;
          case 'end':
            break;
        }
      }
      if (readingKey) key.add(chunk.subarray(keyFrom));
    });
    // Set by the scan's callback, which the compiler does not follow.
    if ((phase as string) !== 'end') throw new NotJsonObject();
  }

  keys(): string[] {
    return [...this.order];
  }

  has(key: string): boolean {
    return this.spans.has(key);
  }

  count(key: string): number {
    return this.spans.get(key)?.count ?? 0;
  }

  kind(key: string): 'array' | 'object' | 'other' | undefined {
    return this.spans.get(key)?.kind;
  }

  value(key: string): unknown {
    const span = this.spans.get(key);
    if (!span) return undefined;
    const piece = new Piece();
    scan(this.fd, span.start, span.end, this.chunkSize, (chunk) => piece.add(chunk));
    return JSON.parse(piece.take(), this.reviver);
  }

  documents(key: string): Iterable<CollectionDocument> | null {
    const span = this.spans.get(key);
    if (!span || span.kind === 'other') return null;
    return this.members(span);
  }

  /** The members of a container value, each parsed on its own (a map's as `{ key: value }`). */
  private *members(span: Span): Generator<CollectionDocument> {
    const s = new Structure();
    const piece = new Piece();
    let open = false;
    const ready: CollectionDocument[] = [];
    const emit = () => {
      const text = piece.take();
      open = false;
      if (span.kind === 'array') ready.push({ key: null, doc: JSON.parse(text, this.reviver) });
      else {
        const [entry] = Object.entries(JSON.parse(`{${text}}`, this.reviver) as Record<string, unknown>);
        ready.push({ key: entry![0], doc: entry![1] });
      }
    };
    // Inside the brackets: [start + 1, end - 1).
    const buffer = Buffer.allocUnsafe(this.chunkSize);
    let at = span.start + 1;
    const to = span.end - 1;
    while (at < to) {
      const n = readSync(this.fd, buffer, 0, Math.min(this.chunkSize, to - at), at);
      if (n === 0) throw new Error('the import file ended before its index said');
      const chunk = buffer.subarray(0, n);
      let from = -1;
      for (let i = 0; i < n; i++) {
        const c = chunk[i]!;
        const depthBefore = s.depth;
        const kind = s.step(c);
        if (depthBefore === 0 && kind === 'byte' && c === 0x2c) {
          if (from >= 0) piece.add(chunk.subarray(from, i));
          from = -1;
          if (open) emit();
          continue;
        }
        if (!open) {
          if (WS[c]) continue;
          open = true;
        }
        if (from < 0) from = i;
      }
      if (from >= 0) piece.add(chunk.subarray(from));
      at += n;
      yield* ready.splice(0);
    }
    if (open) emit();
    yield* ready.splice(0);
  }
}

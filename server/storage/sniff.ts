/**
 * Does an object's first bytes agree with the content type its uploader declared? A presigned
 * upload goes straight to the bucket, so the declared type is all the server has until it reads the
 * bytes back; the stored type is replayed to browsers later, so an HTML page declared as image/png
 * must never be accepted. Images reuse the sniffers of images.ts; the other types that uploads may
 * declare have a signature here. A type without a rule cannot be verified and is not stageable.
 */
import { sniffImageType } from './images.ts';

/** Bytes of the object's start that the checks below need (text/plain looks at all of them). */
export const SNIFF_BYTES = 512;

const ascii = (buf: Buffer, start: number, end: number) => buf.subarray(start, end).toString('latin1');

/** ISO base media file (MP4, QuickTime, M4A): a `ftyp` box first, whose major brand says which. */
function ftypBrand(buf: Buffer): string | null {
  return buf.length >= 12 && ascii(buf, 4, 8) === 'ftyp' ? ascii(buf, 8, 12) : null;
}

function isMp4(buf: Buffer): boolean {
  const brand = ftypBrand(buf);
  return brand !== null && brand !== 'qt  ' && !brand.startsWith('M4A');
}

function isQuickTime(buf: Buffer): boolean {
  return ftypBrand(buf) === 'qt  ' || (buf.length >= 8 && ['moov', 'mdat', 'wide', 'free'].includes(ascii(buf, 4, 8)));
}

function isM4a(buf: Buffer): boolean {
  return ftypBrand(buf)?.startsWith('M4A') === true;
}

/** Matroska/WebM: the EBML magic, then a DocType element saying "webm" within the header. */
function isWebm(buf: Buffer): boolean {
  return buf.length >= 4 && buf.readUInt32BE(0) === 0x1a45dfa3 && buf.subarray(0, 64).includes('webm', 0, 'latin1');
}

function isOgg(buf: Buffer): boolean {
  return buf.length >= 4 && ascii(buf, 0, 4) === 'OggS';
}

/** MP3: an ID3v2 tag, or an MPEG audio frame sync (11 set bits) with a valid layer. */
function isMp3(buf: Buffer): boolean {
  if (buf.length >= 3 && ascii(buf, 0, 3) === 'ID3') return true;
  return buf.length >= 2 && buf[0] === 0xff && (buf[1]! & 0xe0) === 0xe0 && (buf[1]! & 0x06) !== 0;
}

function isWav(buf: Buffer): boolean {
  return buf.length >= 12 && ascii(buf, 0, 4) === 'RIFF' && ascii(buf, 8, 12) === 'WAVE';
}

function isPdf(buf: Buffer): boolean {
  return buf.length >= 5 && ascii(buf, 0, 5) === '%PDF-';
}

function isZip(buf: Buffer): boolean {
  return buf.length >= 4 && ascii(buf, 0, 4) === 'PK\x03\x04';
}

/** A binary type of the table below, recognised from its signature (images first). */
export function sniffContentType(head: Buffer): string | null {
  const image = sniffImageType(head);
  if (image) return image;
  for (const [type, test] of Object.entries(BINARY_SIGNATURES)) if (test(head)) return type;
  return null;
}

const BINARY_SIGNATURES: Record<string, (head: Buffer) => boolean> = {
  'application/pdf': isPdf,
  'application/zip': isZip,
  'video/mp4': isMp4,
  'video/quicktime': isQuickTime,
  'video/webm': isWebm,
  'audio/mp4': isM4a,
  'audio/mpeg': isMp3,
  'audio/ogg': isOgg,
  'audio/wav': isWav,
};

/**
 * Plain text: valid UTF-8 (a character cut at the end of the sample is fine), no NUL or other C0
 * controls than tab, newline, carriage return and form feed, and not the start of a binary format.
 */
function isPlainText(head: Buffer): boolean {
  if (sniffContentType(head) !== null) return false;
  for (const byte of head)
    if (byte < 0x20 && byte !== 0x09 && byte !== 0x0a && byte !== 0x0d && byte !== 0x0c) return false;
  try {
    new TextDecoder('utf-8', { fatal: true }).decode(head.subarray(0, trimPartialUtf8(head)));
    return true;
  } catch {
    return false;
  }
}

/** Length of `buf` without a UTF-8 sequence cut off at its end. */
function trimPartialUtf8(buf: Buffer): number {
  for (let back = 1; back <= Math.min(3, buf.length); back++) {
    const byte = buf[buf.length - back]!;
    if ((byte & 0xc0) === 0x80) continue; // continuation byte: look further back for the lead
    const need = byte >= 0xf0 ? 4 : byte >= 0xe0 ? 3 : byte >= 0xc0 ? 2 : 1;
    return need > back ? buf.length - back : buf.length;
  }
  return buf.length;
}

/** Content types whose bytes can be checked, hence the only ones an upload may declare. */
export const VERIFIABLE_CONTENT_TYPES: readonly string[] = [
  'image/png',
  'image/jpeg',
  'image/webp',
  'image/gif',
  ...Object.keys(BINARY_SIGNATURES),
  'text/plain',
];

export function isVerifiableContentType(type: string): boolean {
  return VERIFIABLE_CONTENT_TYPES.includes(type);
}

/**
 * Whether `head` (the object's first SNIFF_BYTES bytes, or all of it when shorter) is of the
 * declared type. False for a type this module cannot verify.
 */
export function contentMatchesType(declared: string, head: Buffer): boolean {
  const type = declared.toLowerCase();
  if (type === 'text/plain') return isPlainText(head);
  if (type.startsWith('image/')) return sniffImageType(head) === type;
  const test = BINARY_SIGNATURES[type];
  return test !== undefined && test(head) && sniffImageType(head) === null;
}

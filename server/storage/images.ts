/**
 * Image type from the bytes themselves. A client's Content-Type or file name is never trusted: the
 * stored type is replayed to browsers later, so a mislabelled HTML or SVG file would become script.
 * SVG is deliberately absent for the same reason (it can carry script).
 */
export const ALLOWED_IMAGE_TYPES = ['image/png', 'image/jpeg', 'image/webp', 'image/gif'] as const;
export type ImageType = (typeof ALLOWED_IMAGE_TYPES)[number];

const PNG_SIGNATURE = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);

const ascii = (buf: Buffer, start: number, end: number) => buf.subarray(start, end).toString('latin1');

// Each check wants the signature AND the first structure after it, so a bare prefix (a truncated
// upload, or text that happens to start with "GIF8") is not taken for an image.
function isPng(buf: Buffer): boolean {
  // Signature, then the IHDR chunk that must come first.
  return buf.length >= 16 && buf.subarray(0, 8).equals(PNG_SIGNATURE) && ascii(buf, 12, 16) === 'IHDR';
}

function isJpeg(buf: Buffer): boolean {
  // SOI marker, then the start of the next marker segment (APPn, DQT, SOF, ...).
  return (
    buf.length >= 4 && buf[0] === 0xff && buf[1] === 0xd8 && buf[2] === 0xff && (buf[3] ?? 0) >= 0xc0 && buf[3] !== 0xff
  );
}

function isGif(buf: Buffer): boolean {
  // "GIF87a"/"GIF89a" and the 7-byte logical screen descriptor.
  const signature = ascii(buf, 0, 6);
  return buf.length >= 13 && (signature === 'GIF87a' || signature === 'GIF89a');
}

function isWebp(buf: Buffer): boolean {
  // RIFF container of form WEBP whose first chunk is one of the three WebP bitstream chunks.
  return (
    buf.length >= 16 &&
    ascii(buf, 0, 4) === 'RIFF' &&
    ascii(buf, 8, 12) === 'WEBP' &&
    ['VP8 ', 'VP8L', 'VP8X'].includes(ascii(buf, 12, 16))
  );
}

export function sniffImageType(buf: Buffer): ImageType | null {
  if (isPng(buf)) return 'image/png';
  if (isJpeg(buf)) return 'image/jpeg';
  if (isGif(buf)) return 'image/gif';
  if (isWebp(buf)) return 'image/webp';
  return null;
}

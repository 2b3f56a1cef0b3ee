/** Serving a stored image over HTTP: bytes with Content-Type and ETag, or 304 for a matching If-None-Match. */
import type { ObjectStorage } from './types.ts';

/**
 * Sent with every response that carries bytes an account uploaded or the server fetched (member
 * media, gallery and note images, signed storage downloads), 200 and 304 alike: the browser keeps to
 * the declared type (an image with an HTML page after its end stays an image), and opened as a page
 * the bytes load nothing and run no script, in an opaque origin.
 */
export const USER_CONTENT_HEADERS: Readonly<Record<string, string>> = Object.freeze({
  'X-Content-Type-Options': 'nosniff',
  'Content-Security-Policy': "default-src 'none'; sandbox",
});

export type StoredImageResponse =
  | { status: 200; body: Buffer; contentType: string; headers: Record<string, string> }
  | { status: 304; headers: Record<string, string> }
  | { status: 404 };

function etagMatches(header: string | undefined, etag: string): boolean {
  if (!header) return false;
  return header.split(',').some((candidate) => {
    const c = candidate.trim();
    return c === '*' || c === etag || c === `W/${etag}`;
  });
}

export async function readStoredImage(
  storage: ObjectStorage,
  key: string,
  ifNoneMatch: string | undefined,
): Promise<StoredImageResponse> {
  const object = await storage.get(key);
  if (!object) return { status: 404 };
  const headers = { ETag: object.etag, 'Cache-Control': 'private, no-cache', ...USER_CONTENT_HEADERS };
  if (etagMatches(ifNoneMatch, object.etag)) return { status: 304, headers };
  return { status: 200, body: object.body, contentType: object.contentType, headers };
}

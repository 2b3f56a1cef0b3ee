/** Social gallery images for tests: distinct real images, their gallery URLs, and uploads through the API. */
import { createHash } from 'node:crypto';
import { expect } from 'vitest';
import { GIF, JPEG, PNG, WEBP } from './images.ts';
import { bearer, type TestServer, type TestUser } from './server.ts';

export const IMAGE_BYTES = { 'image/png': PNG, 'image/jpeg': JPEG, 'image/webp': WEBP, 'image/gif': GIF } as const;
export type GalleryType = keyof typeof IMAGE_BYTES;

/** A valid image of `type` whose bytes (hence sha256) differ for every `n`: bytes after the image's end. */
export function uniqueImage(n: number, type: GalleryType = 'image/png'): Buffer {
  return Buffer.concat([IMAGE_BYTES[type], Buffer.from(`#gallery-${n}`)]);
}

export const sha256Of = (bytes: Buffer): string => createHash('sha256').update(bytes).digest('hex');
export const galleryUrlOf = (bytes: Buffer): string => `/api/v1/social/gallery/${sha256Of(bytes)}`;

export function uploadGallery(
  server: TestServer,
  apiKey: string,
  bytes: Buffer | string,
  type: string = 'image/png',
): Promise<Response> {
  return server.fetch('/api/v1/social/gallery', {
    method: 'POST',
    headers: { ...bearer(apiKey), 'Content-Type': type },
    body: typeof bytes === 'string' ? bytes : new Uint8Array(bytes),
  });
}

/** Uploads `bytes` to `user`'s gallery (new or already there) and returns its gallery URL. */
export async function addGalleryImage(
  server: TestServer,
  user: TestUser,
  bytes: Buffer,
  type: GalleryType = 'image/png',
): Promise<string> {
  const res = await uploadGallery(server, user.apiKey, bytes, type);
  const body = await res.json();
  expect([200, 201], JSON.stringify(body)).toContain(res.status);
  return body.url as string;
}

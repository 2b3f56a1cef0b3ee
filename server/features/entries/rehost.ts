/**
 * External images in note markdown (`![alt](https://…)`) are copied into object storage through
 * the guarded fetcher and the link rewritten to /api/v1/entry-images/{sha256}, so reading a note
 * never makes the reader's client call a third party.
 */
import { createHash } from 'node:crypto';
import { ApiError, badRequest, preconditionFailed } from '../../http/errors.ts';
import { FetchRefusedError, guardedFetch, type GuardedFetchOptions } from '../../net/guardedFetch.ts';
import { sniffImageType } from '../../storage/images.ts';
import type { ObjectStorage } from '../../storage/types.ts';

export const MAX_IMAGES_PER_NOTE = 20;
const IMAGE = /!\[([^\]\n]*)\]\(\s*<?(https?:\/\/[^\s)>]+)>?((?:\s+"[^"\n]*")?)\s*\)/g;

export function imageKey(userId: string, sha256: string): string {
  return `u/${userId}/entry-images/${sha256}`;
}

export function externalImageUrls(content: string): string[] {
  return [...new Set([...content.matchAll(IMAGE)].map((m) => m[2]!))];
}

export async function rehostImages(content: string, userId: string, storage: ObjectStorage | null, fetchOptions: GuardedFetchOptions): Promise<string> {
  const urls = externalImageUrls(content);
  if (urls.length === 0) return content;
  if (urls.length > MAX_IMAGES_PER_NOTE) throw badRequest(`A note may embed at most ${MAX_IMAGES_PER_NOTE} external images`);
  if (!storage) throw preconditionFailed('Object storage is not configured; notes with external images cannot be saved');
  const replacement = new Map<string, string>();
  for (const url of urls) {
    let body: Buffer;
    try {
      body = (await guardedFetch(url, fetchOptions)).body;
    } catch (err) {
      if (err instanceof FetchRefusedError) throw badRequest(`Could not re-host image ${url} (${err.reason.replace(/_/g, ' ')})`);
      throw err;
    }
    const type = sniffImageType(body);
    if (!type) throw new ApiError(400, 'BAD_REQUEST', `Could not re-host image ${url} (not a PNG, JPEG, WebP or GIF image)`);
    const sha = createHash('sha256').update(body).digest('hex');
    await storage.put(imageKey(userId, sha), body, type);
    replacement.set(url, `/api/v1/entry-images/${sha}`);
  }
  return content.replace(IMAGE, (whole, alt: string, url: string, title: string) => {
    const stored = replacement.get(url);
    return stored ? `![${alt}](${stored}${title})` : whole;
  });
}

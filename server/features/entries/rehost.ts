/**
 * External images in note markdown (`![alt](https://…)`) are copied into object storage through
 * the guarded fetcher and the link rewritten to /api/v1/entry-images/{sha256}, so reading a note
 * never makes the reader's client call a third party.
 */
import { createHash } from 'node:crypto';
import { badRequest, unavailable } from '../../core/errors.ts';
import { FetchRefusedError, guardedFetch, type GuardedFetchOptions } from '../../net/guardedFetch.ts';
import { sniffImageType } from '../../storage/images.ts';
import { noteImageKey } from '../../storage/noteImages.ts';
import type { ObjectStorage } from '../../storage/types.ts';

export const MAX_IMAGES_PER_NOTE = 20;
const IMAGE = /!\[([^\]\n]*)\]\(\s*<?(https?:\/\/[^\s)>]+)>?((?:\s+"[^"\n]*")?)\s*\)/g;

/** Where a re-hosted image is stored; the storage module owns the layout (its garbage collector walks it). */
export const imageKey = noteImageKey;

export function externalImageUrls(content: string): string[] {
  return [...new Set([...content.matchAll(IMAGE)].map((m) => m[2]!))];
}

export interface RehostLimits {
  /** Images fetched at the same time. */
  concurrency: number;
  /** Deadline for the whole note, every fetch and upload included. */
  totalTimeoutMs: number;
  /** Called before an image is stored (storage garbage collection learns of it there: registerNoteImage). */
  beforeStore?: (sha256: string) => Promise<void>;
}

/**
 * Fetches up to `concurrency` images at once under one deadline for the whole note, so a note
 * with many slow images cannot hold a request (and a worker) for 20 × FETCH_TIMEOUT_MS. The first
 * failure cancels the fetches still running; nothing is rewritten unless every image was stored.
 */
export async function rehostImages(
  content: string,
  userId: string,
  storage: ObjectStorage | null,
  fetchOptions: GuardedFetchOptions,
  limits: RehostLimits,
): Promise<string> {
  const urls = externalImageUrls(content);
  if (urls.length === 0) return content;
  if (urls.length > MAX_IMAGES_PER_NOTE)
    throw badRequest(`A note may embed at most ${MAX_IMAGES_PER_NOTE} external images`);
  if (!storage) throw unavailable('Object storage is not configured; notes with external images cannot be saved');
  const failed = new AbortController();
  const deadline = AbortSignal.timeout(limits.totalTimeoutMs);
  const signal = AbortSignal.any([deadline, failed.signal]);
  const replacement = new Map<string, string>();
  const queue = [...urls];

  const rehostOne = async (url: string): Promise<void> => {
    let body: Buffer;
    try {
      body = (await guardedFetch(url, { ...fetchOptions, signal })).body;
    } catch (err) {
      if (deadline.aborted) throw badRequest(`Could not re-host the note's images within ${limits.totalTimeoutMs} ms`);
      if (err instanceof FetchRefusedError)
        throw badRequest(`Could not re-host image ${url} (${err.reason.replace(/_/g, ' ')})`);
      throw err;
    }
    const type = sniffImageType(body);
    if (!type) throw badRequest(`Could not re-host image ${url} (not a PNG, JPEG, WebP or GIF image)`);
    const sha = createHash('sha256').update(body).digest('hex');
    await limits.beforeStore?.(sha);
    await storage.put(imageKey(userId, sha), body, type);
    replacement.set(url, `/api/v1/entry-images/${sha}`);
  };
  const worker = async (): Promise<void> => {
    for (let url = queue.shift(); url !== undefined && !signal.aborted; url = queue.shift()) await rehostOne(url);
  };
  const workers = Array.from({ length: Math.min(limits.concurrency, urls.length) }, () =>
    worker().catch((err: unknown) => {
      failed.abort(err); // stop the other workers' fetches
      throw err;
    }),
  );
  const results = await Promise.allSettled(workers);
  // The first failure is the cause; the others are the cancellations it triggered.
  const firstFailure = failed.signal.aborted
    ? failed.signal.reason
    : results.find((r) => r.status === 'rejected')?.reason;
  if (firstFailure !== undefined) throw firstFailure;
  if (deadline.aborted) throw badRequest(`Could not re-host the note's images within ${limits.totalTimeoutMs} ms`);
  return content.replace(IMAGE, (whole, alt: string, url: string, title: string) => {
    const stored = replacement.get(url);
    return stored ? `![${alt}](${stored}${title})` : whole;
  });
}

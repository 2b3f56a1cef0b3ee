/**
 * Link previews (docs/messaging.md, "Link previews"). A send or edit finds the http(s) links of the
 * text (linksIn), keeps one `pending` row per link and queues a `link_preview` job for it, in the
 * write's transaction; nothing is fetched while the request waits. The job fetches the page through
 * the guarded fetcher (HTML only, the first LINK_PREVIEW_HTML_MAX_BYTES), reads its metadata
 * (pageMetadata.ts), re-hosts its image in object storage and marks the row `ready`, or `failed`.
 * Message reads show ready, undismissed previews (the lateral of repo/json.ts); `dismiss` hides one,
 * `refresh` queues its fetch again. A link is part of the message's text, so a preview's URL and what
 * the page said are sealed with the message keyring like the text (bound to the account and the
 * preview id); logs name previews by id, never by URL.
 */
import { randomUUID } from 'node:crypto';
import type { Knex } from 'knex';
import type { Logger } from 'pino';
import type { components } from '../../../generated/api.d.ts';
import type { Config } from '../../config.ts';
import { inTransaction, ownerOf, type ServiceContext } from '../../core/context.ts';
import { notFound } from '../../core/errors.ts';
import { MessageCipher, type Sealed } from '../../crypto/messageCipher.ts';
import type { Job, JobQueue } from '../../jobs/queue.ts';
import { FetchRefusedError, fetchOptionsFromConfig, guardedFetch } from '../../net/guardedFetch.ts';
import { ALLOWED_IMAGE_TYPES, sniffImageType } from '../../storage/images.ts';
import type { ObjectStorage } from '../../storage/types.ts';
import { decodeHtml, extractMetadata, METADATA_LIMITS } from './pageMetadata.ts';
import { linkPreviewsRepo, type NewPreview } from './repo/linkPreviews.ts';

type LinkPreview = components['schemas']['MessageLinkPreview'];

export const LINK_PREVIEW_QUEUE = 'link_preview';
/** Previews per message: the first distinct links of the text. */
export const MAX_LINK_PREVIEWS = 5;
const MAX_ATTEMPTS = 3;
/** Attempts of a preview's fetch (a send that queues it in its own statement passes it). */
export const LINK_PREVIEW_ATTEMPTS = MAX_ATTEMPTS;
const HTML_TYPES = new Set(['text/html', 'application/xhtml+xml']);

/** `http://` or `https://` up to whitespace, `<`, `>` or `"`; trailing punctuation is trimmed after. */
const LINK = /https?:\/\/[^\s<>"]+/gi;
const TRAILING_PUNCTUATION = /[.,;:!?'*_~]+$/;

const count = (text: string, char: string) => text.split(char).length - 1;

/** The link without what most likely belongs to the sentence around it: final punctuation, a closing bracket it never opened. */
function trimLink(raw: string): string {
  let link = raw;
  for (;;) {
    const before = link;
    link = link.replace(TRAILING_PUNCTUATION, '');
    for (const [open, close] of [
      ['(', ')'],
      ['[', ']'],
    ] as const) {
      if (link.endsWith(close) && count(link, close) > count(link, open)) link = link.slice(0, -1);
    }
    if (link === before) return link;
  }
}

/**
 * The links a message's text previews: every `http://` / `https://` run, trimmed, parsed with the
 * WHATWG URL parser (fragment dropped; credentials, an empty host or more than 2048 characters:
 * skipped), deduplicated, in order of first appearance, the first MAX_LINK_PREVIEWS.
 */
export function linksIn(content: string): string[] {
  const links: string[] = [];
  for (const match of content.matchAll(LINK)) {
    let url: URL;
    try {
      url = new URL(trimLink(match[0]));
    } catch {
      continue;
    }
    if (url.username || url.password || url.hostname === '') continue;
    url.hash = '';
    if (url.href.length > METADATA_LIMITS.url || links.includes(url.href)) continue;
    links.push(url.href);
    if (links.length === MAX_LINK_PREVIEWS) break;
  }
  return links;
}

/** Where a preview's re-hosted image lives (deleted with the account's `u/<account>/`). */
const imageKey = (userId: string, previewId: string) => `u/${userId}/messaging/link-previews/${previewId}`;

type Tx = ServiceContext & { db: Knex.Transaction };

/** What a preview row keeps sealed (`data_enc`): the link, and once fetched what the page says. */
interface PreviewContent {
  url: string;
  title?: string | null;
  description?: string | null;
  siteName?: string | null;
}

const bytes = (value: Uint8Array) =>
  Buffer.isBuffer(value) ? value : Buffer.from(value.buffer, value.byteOffset, value.byteLength);

function sealContent(
  cipher: MessageCipher,
  userId: string,
  previewId: string,
  content: PreviewContent,
): { key_id: string; data_enc: Buffer } {
  const sealed = cipher.seal(userId, previewId, JSON.stringify(content));
  return { key_id: sealed.keyId, data_enc: sealed.data };
}

function openContent(cipher: MessageCipher, userId: string, previewId: string, sealed: Sealed): PreviewContent {
  return JSON.parse(cipher.open(userId, previewId, sealed)) as PreviewContent;
}

/** The pending preview rows of `links`, each link sealed under its preview's id. */
function previewRows(
  ctx: ServiceContext,
  links: Array<{ url: string; position: number; id?: string | undefined }>,
): NewPreview[] {
  const cipher = new MessageCipher(ctx.config.messageEncryptionKeys);
  const userId = ownerOf(ctx);
  return links.map(({ url, position, id = randomUUID() }) => {
    return { id, position, ...sealContent(cipher, userId, id, { url }) };
  });
}

async function addPreviews(
  tx: Tx,
  messageId: string,
  links: Array<{ url: string; position: number; id?: string | undefined }>,
): Promise<void> {
  if (links.length === 0) return;
  const rows = previewRows(tx, links);
  await linkPreviewsRepo.insertPending(tx.db, ownerOf(tx), messageId, rows, tx.now);
  for (const row of rows)
    await tx.jobs.enqueue(tx.db, LINK_PREVIEW_QUEUE, { previewId: row.id }, { key: row.id, maxAttempts: MAX_ATTEMPTS });
}

/**
 * The pending previews of a new message's links, for a send that inserts them and queues their
 * fetches (`link_preview`, at most MAX_ATTEMPTS attempts, keyed by the preview id) in its
 * own statement (messagesRepo.send). `presetIds` as for queueLinkPreviews.
 */
export function pendingPreviews(ctx: ServiceContext, content: string, presetIds: readonly string[] = []): NewPreview[] {
  return previewRows(
    ctx,
    linksIn(content).map((url, position) => ({ url, position, id: presetIds[position] })),
  );
}

/**
 * Inside the send's transaction: a pending preview per link of the new message, each fetch queued.
 * `presetIds` (fixture mode only) names the previews' ids in the links' order.
 */
export async function queueLinkPreviews(
  tx: Tx,
  messageId: string,
  content: string,
  presetIds: readonly string[] = [],
): Promise<void> {
  await addPreviews(
    tx,
    messageId,
    linksIn(content).map((url, position) => ({ url, position, id: presetIds[position] })),
  );
}

/**
 * Inside the edit's transaction: previews of links no longer in the text go, new links get pending
 * previews and queued fetches, the others stay as they are (fetched, dismissed) in their new order.
 * Returns the image keys of the removed previews, to delete once the edit has committed.
 */
export async function syncLinkPreviews(tx: Tx, messageId: string, content: string): Promise<string[]> {
  const wanted = linksIn(content);
  const cipher = new MessageCipher(tx.config.messageEncryptionKeys);
  const stored = await linkPreviewsRepo.ofMessage(tx.db, messageId);
  const existing = stored.map((p) => ({
    ...p,
    url: openContent(cipher, ownerOf(tx), p.id, { keyId: p.key_id, data: bytes(p.data_enc) }).url,
  }));
  const gone = existing.filter((p) => !wanted.includes(p.url));
  if (gone.length > 0)
    await linkPreviewsRepo.deleteMany(
      tx.db,
      gone.map((p) => p.id),
    );
  for (const kept of existing.filter((p) => wanted.includes(p.url))) {
    const position = wanted.indexOf(kept.url);
    if (position !== kept.position) await linkPreviewsRepo.setPosition(tx.db, kept.id, position, tx.now);
  }
  await addPreviews(
    tx,
    messageId,
    wanted.flatMap((url, position) => (existing.some((p) => p.url === url) ? [] : [{ url, position }])),
  );
  return gone.flatMap((p) => (p.image_key ? [p.image_key] : []));
}

/** Deletes the images of removed previews after the write committed; a failure leaves bytes behind, logged. */
export async function dropPreviewImages(ctx: ServiceContext, keys: readonly string[]): Promise<void> {
  if (!ctx.storage) return;
  for (const key of keys) {
    try {
      await ctx.storage.delete(key);
    } catch (err) {
      ctx.log.error({ err, key }, 'the image of a removed link preview could not be deleted');
    }
  }
}

/** A preview as message reads select it (repo/json.ts): sealed content (base64) and the image's object key. */
export interface StoredLinkPreview {
  id: string;
  keyId: string;
  data: string;
  imageKey: string | null;
}

/** The read shape: opened with the account's keyring; the image as a freshly presigned download URL (null without storage). */
export async function toLinkPreviews(
  ctx: ServiceContext,
  cipher: MessageCipher,
  userId: string,
  stored: readonly StoredLinkPreview[],
): Promise<LinkPreview[]> {
  return Promise.all(
    stored.map(async (p) => {
      const content = openContent(cipher, userId, p.id, { keyId: p.keyId, data: Buffer.from(p.data, 'base64') });
      return {
        id: p.id,
        url: content.url,
        title: content.title ?? null,
        description: content.description ?? null,
        siteName: content.siteName ?? null,
        imageUrl:
          p.imageKey && ctx.storage
            ? (await ctx.storage.presignGet(p.imageKey, ctx.config.storageDownloadUrlTtlSeconds)).url
            : null,
      };
    }),
  );
}

// ---- dismiss and refresh ----

/** A preview of the account on a live message in a live channel and space, else 404. */
async function ownPreview(db: Knex, userId: string, previewId: string): Promise<{ id: string; status: string }> {
  const row = await linkPreviewsRepo.findOwn(db, userId, previewId);
  if (!row) throw notFound('Link preview not found');
  return row;
}

export async function dismissPreview(ctx: ServiceContext, previewId: string): Promise<void> {
  const { id } = await ownPreview(ctx.db, ownerOf(ctx), previewId);
  await linkPreviewsRepo.dismiss(ctx.db, id, ctx.now);
}

/** Queues the fetch again (not twice while one is queued or running); a failed preview is pending until it has run. */
export async function refreshPreview(ctx: ServiceContext, previewId: string): Promise<void> {
  await inTransaction(ctx, async (tx) => {
    const { id, status } = await ownPreview(tx.db, ownerOf(tx), previewId);
    if (status === 'failed') await linkPreviewsRepo.markPending(tx.db, id, tx.now);
    await tx.jobs.enqueue(tx.db, LINK_PREVIEW_QUEUE, { previewId: id }, { key: id, maxAttempts: MAX_ATTEMPTS });
  });
}

// ---- the job ----

export interface LinkPreviewJobDeps {
  db: Knex;
  /** Read when a job runs: the settings of the running server. */
  config: () => Config;
  storage: ObjectStorage | null;
  clock: () => number;
  logger: Logger;
}

interface PreviewRow {
  id: string;
  user_id: string;
  /** Opened from `data_enc` by the job. */
  url: string;
  image_key: string | null;
}

type Outcome =
  | {
      status: 'ready';
      title: string | null;
      description: string | null;
      siteName: string | null;
      image: { body: Buffer; type: string } | null;
    }
  | { status: 'failed'; failure: string };

/** Worth another attempt: the network or the site may be better later. Refusals and 4xx are final. */
function transient(err: unknown): boolean {
  if (!(err instanceof FetchRefusedError)) return true;
  if (err.reason === 'bad_status') return (err.status ?? 0) >= 500 || err.status === 429;
  return err.reason === 'timeout' || err.reason === 'network' || err.reason === 'dns';
}

/** The page's image, fetched through the guarded fetcher and accepted only when its bytes are PNG, JPEG, WebP or GIF; null otherwise. */
async function fetchImage(
  deps: LinkPreviewJobDeps,
  config: Config,
  url: string,
  previewId: string,
): Promise<{ body: Buffer; type: string } | null> {
  try {
    const res = await guardedFetch(url, {
      ...fetchOptionsFromConfig(config),
      maxBytes: config.linkPreviewImageMaxBytes,
      headers: { accept: ALLOWED_IMAGE_TYPES.join(',') },
    });
    const type = sniffImageType(res.body);
    if (type) return { body: res.body, type };
    deps.logger.debug({ previewId }, 'link preview image is not a PNG, JPEG, WebP or GIF; kept without an image');
  } catch (err) {
    deps.logger.debug(
      { previewId, reason: err instanceof FetchRefusedError ? err.reason : 'error' },
      'link preview image not fetched; kept without an image',
    );
  }
  return null;
}

async function fetchPreview(deps: LinkPreviewJobDeps, row: PreviewRow): Promise<Outcome> {
  const config = deps.config();
  const page = await guardedFetch(row.url, {
    ...fetchOptionsFromConfig(config),
    maxBytes: config.linkPreviewHtmlMaxBytes,
    // Metadata is at the start of a page: read that much, never the rest of a huge (or endless) one.
    truncate: true,
    headers: { accept: 'text/html,application/xhtml+xml;q=0.9' },
  });
  const mediaType = (page.contentType ?? '').split(';')[0]!.trim().toLowerCase();
  if (!HTML_TYPES.has(mediaType)) return { status: 'failed', failure: 'not_html' };
  const meta = extractMetadata(decodeHtml(page.body, page.contentType), page.finalUrl);
  if (meta.title === null && meta.description === null) return { status: 'failed', failure: 'no_metadata' };
  const image = meta.image && deps.storage ? await fetchImage(deps, config, meta.image, row.id) : null;
  return { status: 'ready', title: meta.title, description: meta.description, siteName: meta.siteName, image };
}

async function deleteQuietly(deps: LinkPreviewJobDeps, key: string): Promise<void> {
  try {
    await deps.storage?.delete(key);
  } catch (err) {
    deps.logger.error({ err, key }, 'a link preview image could not be deleted');
  }
}

async function store(
  deps: LinkPreviewJobDeps,
  cipher: MessageCipher,
  row: PreviewRow,
  outcome: Outcome,
): Promise<void> {
  const now = deps.clock();
  let key: string | null = null;
  if (outcome.status === 'ready' && outcome.image && deps.storage) {
    try {
      await deps.storage.put(imageKey(row.user_id, row.id), outcome.image.body, outcome.image.type);
      key = imageKey(row.user_id, row.id);
    } catch (err) {
      deps.logger.error({ err, previewId: row.id }, 'a link preview image could not be stored; kept without an image');
    }
  }
  const content: PreviewContent =
    outcome.status === 'ready'
      ? { url: row.url, title: outcome.title, description: outcome.description, siteName: outcome.siteName }
      : { url: row.url };
  const stored = await linkPreviewsRepo.storeOutcome(
    deps.db,
    row.id,
    {
      ...sealContent(cipher, row.user_id, row.id, content),
      ...(outcome.status === 'ready'
        ? { status: 'ready', failure: null, image_key: key }
        : { status: 'failed', failure: outcome.failure, image_key: null }),
    },
    now,
  );
  if (!stored) {
    // An edit removed the preview while it was being fetched: its image must not stay behind.
    if (key) await deleteQuietly(deps, key);
    return;
  }
  if (row.image_key && row.image_key !== key) await deleteQuietly(deps, row.image_key);
}

async function runPreviewJob(deps: LinkPreviewJobDeps, job: Job<{ previewId?: unknown }>): Promise<void> {
  const previewId = job.payload?.previewId;
  if (typeof previewId !== 'string') return;
  const found = await linkPreviewsRepo.findForJob(deps.db, previewId);
  // Removed by an edit, or its message was deleted: nothing to show it on.
  if (!found) return;
  const cipher = new MessageCipher(deps.config().messageEncryptionKeys);
  const row: PreviewRow = {
    id: found.id,
    user_id: found.user_id,
    image_key: found.image_key,
    url: openContent(cipher, found.user_id, found.id, { keyId: found.key_id, data: bytes(found.data_enc) }).url,
  };
  let outcome: Outcome;
  try {
    outcome = await fetchPreview(deps, row);
  } catch (err) {
    const failure = err instanceof FetchRefusedError ? err.reason : 'error';
    if (job.attempt < job.maxAttempts && transient(err)) {
      // Retried by the queue, which logs the error: a fetch refusal names the link (message text), so it is
      // replaced by one that names the preview.
      throw err instanceof FetchRefusedError
        ? new Error(`link preview ${row.id} could not be fetched (${failure})`)
        : err;
    }
    outcome = { status: 'failed', failure };
    deps.logger.info({ previewId, failure, attempt: job.attempt }, 'link preview could not be fetched');
  }
  await store(deps, cipher, row, outcome);
}

/** The `link_preview` queue: LINK_PREVIEW_CONCURRENCY fetches at a time per process, 3 attempts for network trouble. */
export function defineLinkPreviews(jobs: JobQueue, deps: LinkPreviewJobDeps): void {
  jobs.define(LINK_PREVIEW_QUEUE, (job: Job<{ previewId?: unknown }>) => runPreviewJob(deps, job), {
    concurrency: deps.config().linkPreviewConcurrency,
    maxAttempts: MAX_ATTEMPTS,
    // A page and an image, each within FETCH_TIMEOUT_MS, and a storage write.
    leaseMs: 5 * 60_000,
  });
}

/**
 * The social gallery (extension, docs/social.md §2): images an account uploads so its custom_badge
 * widgets can show them. The spec lists gallery upload as unavailable, yet says custom_badge
 * `imageUrls` must be gallery URLs hosted by this server; without a gallery that rule could only
 * check the URL's shape. An image is named by the SHA-256 of its bytes, stored at
 * u/<userId>/social-gallery/<sha256> and registered in social_gallery_images.
 *
 * Order of writes: the object is stored before its row commits, so a listed image always has its
 * bytes; a delete removes the row first and the object after the commit. A crash between the two
 * steps leaves at worst an unlisted object, which goes with the account's u/<userId>/ prefix.
 */
import { createHash } from 'node:crypto';
import type { Knex } from 'knex';
import type { components } from '../../../generated/api.d.ts';
import { decodeCursor, encodeCursor } from '../../core/cursor.ts';
import { type FriendContext, inTransaction, ownerOf, type ServiceContext } from '../../core/context.ts';
import { badRequest, conflict, forbidden, notFound, unavailable } from '../../core/errors.ts';
import { pageOf } from '../../core/keyset.ts';
import { sniffImageType } from '../../storage/images.ts';
import { readStoredImage, type StoredImageResponse } from '../../storage/serve.ts';
import type { ObjectStorage } from '../../storage/types.ts';
import { type GalleryRow, galleryRepo } from './repo/gallery.ts';
import { visibleToFriend } from './visibility.ts';

type Schemas = components['schemas'];
type GalleryImage = Schemas['SocialGalleryImage'];

export const GALLERY_IMAGE_NOT_FOUND = 'Gallery image not found';
const GALLERY_URL_PREFIX = '/api/v1/social/gallery/';
/** A gallery URL as a custom_badge widget stores it: the bare path, no query. */
const GALLERY_URL = /^\/api\/v1\/social\/gallery\/([0-9a-f]{64})$/;
const BADGE_URLS_MESSAGE =
  'imageUrls must name images of your own gallery (/api/v1/social/gallery/<sha256>, uploaded with POST /api/v1/social/gallery)';

const galleryUrl = (sha256: string): string => `${GALLERY_URL_PREFIX}${sha256}`;
const galleryKey = (userId: string, sha256: string): string => `u/${userId}/social-gallery/${sha256}`;

function toImage(r: GalleryRow): GalleryImage {
  return {
    sha256: r.sha256,
    url: galleryUrl(r.sha256),
    contentType: r.content_type as GalleryImage['contentType'],
    byteSize: Number(r.byte_size),
    createdAt: Number(r.created_at),
  };
}

/** Every gallery route needs object storage (503 without it, before anything else is looked at). */
export function requireGalleryStorage(ctx: ServiceContext): void {
  requireStorage(ctx.storage);
}

function requireStorage(storage: ObjectStorage | null): ObjectStorage {
  if (!storage) throw unavailable('Object storage is not configured on this server');
  return storage;
}

export async function list(
  ctx: ServiceContext,
  limit: number,
  cursor: string | undefined,
): Promise<Schemas['SocialGalleryPage']> {
  requireStorage(ctx.storage);
  const after = cursor === undefined ? undefined : decodeCursor<[number, string]>(cursor, ['integer', 'string']);
  const rows = await galleryRepo.page(ctx.db, ownerOf(ctx), limit, after);
  const { items, nextAfter } = pageOf(rows, limit);
  return {
    items: items.map(toImage),
    nextCursor: nextAfter ? encodeCursor([Number(nextAfter.created_at), nextAfter.sha256]) : null,
  };
}

/**
 * Stores an image whose bytes must be of the declared type. The same bytes twice are one image:
 * `created: false` with the image as first stored (its object is written again, which repairs a
 * lost one). Per-account cap: SOCIAL_GALLERY_MAX_IMAGES, counted under a lock on the account row
 * so concurrent uploads cannot pass it together.
 */
export async function upload(
  ctx: ServiceContext,
  declaredType: string,
  body: Buffer | undefined,
): Promise<{ created: boolean; image: GalleryImage }> {
  const store = requireStorage(ctx.storage);
  const userId = ownerOf(ctx);
  const max = ctx.config.socialGalleryMaxImages;
  if (!body || body.length === 0) throw badRequest('Request body must be the image bytes');
  if (sniffImageType(body) !== declaredType) throw badRequest(`The uploaded bytes are not ${declaredType}`);
  const sha256 = createHash('sha256').update(body).digest('hex');
  const full = () => forbidden(`Your gallery is full (${max} images); delete an image first`);

  // Cheap early refusal, so a full gallery does not cost an object write (the transaction decides).
  const known = await galleryRepo.find(ctx.db, userId, sha256);
  if (!known && (await galleryRepo.count(ctx.db, userId)) >= max) throw full();

  const key = galleryKey(userId, sha256);
  await store.put(key, body, declaredType);
  try {
    return await inTransaction(ctx, async (tx) => {
      await galleryRepo.lockAccount(tx.db, userId);
      const existing = await galleryRepo.find(tx.db, userId, sha256);
      if (existing) return { created: false, image: toImage(existing) };
      if ((await galleryRepo.count(tx.db, userId)) >= max) throw full();
      const row: GalleryRow = {
        user_id: userId,
        sha256,
        content_type: declaredType,
        byte_size: body.length,
        created_at: tx.now,
      };
      await galleryRepo.insert(tx.db, row);
      await tx.events.emit(tx, {
        type: 'social_profile.changed',
        area: 'social',
        data: { id: userId, kind: 'gallery' },
      });
      return { created: true, image: toImage(row) };
    });
  } catch (err) {
    // Refused after the write: the object goes again unless the image is registered meanwhile
    // (when even that cannot be read, the object stays: unlisted, it goes with the account).
    const registered = await galleryRepo.find(ctx.db, userId, sha256).catch(() => true);
    if (!registered) await dropObject(ctx, store, key);
    throw err;
  }
}

/** The caller's own image. */
export async function readOwn(
  ctx: ServiceContext,
  sha256: string,
  ifNoneMatch: string | undefined,
): Promise<Exclude<StoredImageResponse, { status: 404 }>> {
  const store = requireStorage(ctx.storage);
  const row = await galleryRepo.find(ctx.db, ownerOf(ctx), sha256);
  if (!row) throw notFound(GALLERY_IMAGE_NOT_FOUND);
  return serve(store, galleryKey(ownerOf(ctx), sha256), ifNoneMatch);
}

/**
 * A friend's image (ctx is a friend context: the accepted friendship without a block is already
 * established): only while one of the owner's custom_badge widgets that the viewer may see shows
 * it, by the visibility rules of GET /friends/{friendUserId}/social. Otherwise the 404 of an
 * unknown image.
 */
export async function readForFriend(
  ctx: FriendContext,
  sha256: string,
  ifNoneMatch: string | undefined,
): Promise<Exclude<StoredImageResponse, { status: 404 }>> {
  const store = requireStorage(ctx.storage);
  const ownerId = ownerOf(ctx);
  const visibilities = await galleryRepo.badgeVisibilitiesOfImage(ctx.db, ownerId, sha256, galleryUrl(sha256));
  // At most one more statement: a mutual friend, when only mutuals_only widgets show it.
  const order = ['public', 'logged_in', 'friends_only', 'mutuals_only'];
  const best = visibilities.filter((v) => order.includes(v)).sort((a, b) => order.indexOf(a) - order.indexOf(b))[0];
  if (!best || !(await visibleToFriend(ctx.db, ownerId, ctx.access.viewerId, best)))
    throw notFound(GALLERY_IMAGE_NOT_FOUND);
  return serve(store, galleryKey(ownerId, sha256), ifNoneMatch);
}

async function serve(
  store: ObjectStorage,
  key: string,
  ifNoneMatch: string | undefined,
): Promise<Exclude<StoredImageResponse, { status: 404 }>> {
  const result = await readStoredImage(store, key, ifNoneMatch);
  if (result.status === 404) throw notFound(GALLERY_IMAGE_NOT_FOUND);
  return result;
}

/**
 * Removes an image no custom_badge widget of the caller shows (409 otherwise). The row goes in a
 * transaction that holds it locked while the widgets are checked (a widget write that names the
 * image holds a share lock on it, see checkBadgeImages); the object is deleted after the commit.
 */
export async function remove(ctx: ServiceContext, sha256: string): Promise<void> {
  const store = requireStorage(ctx.storage);
  const userId = ownerOf(ctx);
  await inTransaction(ctx, async (tx) => {
    const row = await galleryRepo.lock(tx.db, userId, sha256);
    if (!row) throw notFound(GALLERY_IMAGE_NOT_FOUND);
    if (await galleryRepo.badgeShowsImage(tx.db, userId, galleryUrl(sha256)))
      throw conflict('A custom_badge widget shows this image; take it out of the widget first');
    await galleryRepo.delete(tx.db, userId, sha256);
    await tx.events.emit(tx, { type: 'social_profile.changed', area: 'social', data: { id: userId, kind: 'gallery' } });
  });
  await dropObject(ctx, store, galleryKey(userId, sha256));
}

/** Best effort: an unlisted object wastes space but shows nothing, and goes with the account. */
async function dropObject(ctx: ServiceContext, store: ObjectStorage, key: string): Promise<void> {
  try {
    await store.delete(key);
  } catch (err) {
    ctx.log.warn({ err, key }, 'could not delete a social gallery object');
  }
}

/**
 * The rule of a custom_badge config the schema cannot state: every URL is the bare gallery URL of
 * an image in the caller's own gallery. One statement for the whole list, which share-locks the
 * images so a concurrent delete waits for the widget write (and then sees the widget: 409).
 */
export async function checkBadgeImages(db: Knex, userId: string, imageUrls: string[]): Promise<void> {
  if (imageUrls.length === 0) return;
  const wanted = new Set<string>();
  for (const url of imageUrls) {
    const m = GALLERY_URL.exec(url);
    if (!m) throw badRequest(BADGE_URLS_MESSAGE);
    wanted.add(m[1]!);
  }
  if ((await galleryRepo.shareImages(db, userId, [...wanted])) !== wanted.size) throw badRequest(BADGE_URLS_MESSAGE);
}

/** A friend's view of a custom_badge config: each URL tagged with the owner, which the viewer's key needs to fetch it. */
export function tagForViewer(imageUrls: string[], ownerId: string): string[] {
  return imageUrls.map((url) => `${url}?ownerUserId=${ownerId}`);
}

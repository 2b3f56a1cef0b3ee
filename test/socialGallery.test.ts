/**
 * The social gallery (extension): upload, list, fetch by the owner and by friends, delete, and the
 * custom_badge rule that every imageUrls entry names an image of the caller's own gallery.
 */
import { describe, expect, it } from 'vitest';
import { createLogger } from '../server/logger.ts';
import { collectGarbage } from '../server/storage/gc.ts';
import { UNKNOWN_ID } from './helpers/fixtures.ts';
import { befriend, relate, RELATIONSHIPS } from './helpers/friends.ts';
import {
  addGalleryImage,
  galleryUrlOf,
  IMAGE_BYTES,
  sha256Of,
  uniqueImage,
  uploadGallery,
  type GalleryType,
} from './helpers/gallery.ts';
import { PNG } from './helpers/images.ts';
import { bearer, TestServer, useServer, type TestUser } from './helpers/server.ts';

let now = 1_800_000_000_000;
const CAP = 5;
const server = useServer({
  clock: () => now,
  env: { MEDIA_MAX_BYTES: '4096', SOCIAL_GALLERY_MAX_IMAGES: String(CAP) },
});

const NOT_FOUND = { code: 'NOT_FOUND', message: 'Gallery image not found' };
const BADGE_MESSAGE =
  'imageUrls must name images of your own gallery (/api/v1/social/gallery/<sha256>, uploaded with POST /api/v1/social/gallery)';
let counter = 0;
const fresh = (type: GalleryType = 'image/png') => uniqueImage(++counter, type);

const objects = async (u: TestUser) => (await server.deps.storage!.list(`u/${u.userId}/social-gallery/`)).sort();
const fetchImage = (u: TestUser, url: string, headers: Record<string, string> = {}) =>
  server.fetch(url, { headers: { ...bearer(u.apiKey), ...headers } });
const friendUrl = (url: string, owner: TestUser) => `${url}?ownerUserId=${owner.userId}`;

async function listAll(u: TestUser, limit?: number): Promise<Array<{ sha256: string; createdAt: number }>> {
  const items = [];
  let cursor: string | undefined;
  for (let pages = 0; pages < 50; pages++) {
    const res = await u.api.GET('/api/v1/social/gallery', { params: { query: { limit, cursor } } });
    expect(res.response.status, JSON.stringify(res.error)).toBe(200);
    items.push(...res.data!.items);
    if (!res.data!.nextCursor) return items;
    cursor = res.data!.nextCursor;
  }
  throw new Error('too many pages');
}

async function addBadge(u: TestUser, imageUrls: string[], visibility = 'friends_only'): Promise<string> {
  const res = await u.api.POST('/api/v1/social/widgets', {
    body: { type: 'custom_badge', config: { kind: 'custom_badge', imageUrls }, visibility, size: 'small' } as never,
  });
  expect(res.response.status, JSON.stringify(res.error)).toBe(201);
  return res.data!.widgetId;
}

const createBadge = (u: TestUser, imageUrls: string[]) =>
  u.api.POST('/api/v1/social/widgets', {
    body: {
      type: 'custom_badge',
      config: { kind: 'custom_badge', imageUrls },
      visibility: 'public',
      size: 'small',
    } as never,
  });
const patchWidget = (u: TestUser, widgetId: string, body: Record<string, unknown>) =>
  u.api.PATCH('/api/v1/social/widgets/{widgetId}', { params: { path: { widgetId } }, body: body as never });
const deleteImage = (u: TestUser, sha256: string) =>
  u.api.DELETE('/api/v1/social/gallery/{sha256}', { params: { path: { sha256 } } });

describe('POST /social/gallery', () => {
  it.each(Object.keys(IMAGE_BYTES) as GalleryType[])(
    'stores %s under the account prefix and the owner reads it back with its type and ETag',
    async (type) => {
      const u = await server.user();
      const bytes = fresh(type);
      const sha = sha256Of(bytes);
      now += 1000;
      const res = await uploadGallery(server, u.apiKey, bytes, type);
      expect(res.status).toBe(201);
      const image = await res.json();
      expect(image).toEqual({
        sha256: sha,
        url: `/api/v1/social/gallery/${sha}`,
        contentType: type,
        byteSize: bytes.length,
        createdAt: now,
      });
      expect(await objects(u)).toEqual([`u/${u.userId}/social-gallery/${sha}`]);

      const got = await fetchImage(u, image.url);
      expect(got.status).toBe(200);
      expect(got.headers.get('content-type')).toBe(type);
      expect(got.headers.get('etag')).toBe(`"${sha}"`);
      expect(got.headers.get('cache-control')).toBe('private, no-cache');
      expect(Buffer.from(await got.arrayBuffer()).equals(bytes)).toBe(true);
      const cached = await fetchImage(u, image.url, { 'If-None-Match': `"${sha}"` });
      expect(cached.status).toBe(304);
      // The caller's own id as ownerUserId is the owner's branch.
      expect((await fetchImage(u, friendUrl(image.url, u))).status).toBe(200);
    },
  );

  it('the same bytes twice are one image: 200 with the first upload, nothing new stored', async () => {
    const u = await server.user();
    const bytes = fresh();
    now += 1000;
    const first = await (await uploadGallery(server, u.apiKey, bytes)).json();
    now += 1000;
    const again = await uploadGallery(server, u.apiKey, bytes);
    expect(again.status).toBe(200);
    expect(await again.json()).toEqual(first);
    expect((await listAll(u)).map((i) => i.sha256)).toEqual([first.sha256]);
    // Concurrent uploads of new bytes: one 201, the rest 200, one image.
    const other = fresh();
    const statuses = (await Promise.all(Array.from({ length: 4 }, () => uploadGallery(server, u.apiKey, other))))
      .map((r) => r.status)
      .sort();
    expect(statuses).toEqual([200, 200, 200, 201]);
    expect(await listAll(u)).toHaveLength(2);
    expect(await objects(u)).toHaveLength(2);
  });

  it('refuses bytes of another type (400), non-image content types (415), an empty body (400) and images over MEDIA_MAX_BYTES (413); nothing is stored', async () => {
    const u = await server.user();
    const cases: Array<[Buffer | string, string, number, string]> = [
      [PNG, 'image/jpeg', 400, 'The uploaded bytes are not image/jpeg'],
      [IMAGE_BYTES['image/gif'], 'image/png', 400, 'The uploaded bytes are not image/png'],
      [
        Buffer.from('<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>'),
        'image/png',
        400,
        'The uploaded bytes are not image/png',
      ],
      [PNG.subarray(0, 10), 'image/png', 400, 'The uploaded bytes are not image/png'],
      [Buffer.from('{"not":"an image"}'), 'image/webp', 400, 'The uploaded bytes are not image/webp'],
      ['<svg/>', 'image/svg+xml', 415, 'Content-Type must be one of: image/png, image/jpeg, image/webp, image/gif'],
      ['hello', 'text/plain', 415, 'Content-Type must be one of: image/png, image/jpeg, image/webp, image/gif'],
      [Buffer.concat([PNG, Buffer.alloc(4096)]), 'image/png', 413, 'Request body exceeds 4096 bytes'],
    ];
    for (const [bytes, type, status, message] of cases) {
      const res = await uploadGallery(server, u.apiKey, bytes, type);
      expect(res.status, `${type} ${message}`).toBe(status);
      expect(await res.json()).toEqual({
        code: { 400: 'BAD_REQUEST', 413: 'PAYLOAD_TOO_LARGE', 415: 'UNSUPPORTED_MEDIA_TYPE' }[status],
        message,
      });
    }
    const empty = await server.fetch('/api/v1/social/gallery', {
      method: 'POST',
      headers: { ...bearer(u.apiKey), 'Content-Type': 'image/png' },
    });
    expect(empty.status).toBe(400);
    expect((await empty.json()).code).toBe('BAD_REQUEST');
    // At the limit exactly is fine.
    const atLimit = Buffer.concat([PNG, Buffer.alloc(4096 - PNG.length)]);
    expect((await uploadGallery(server, u.apiKey, atLimit)).status).toBe(201);
    expect(await listAll(u)).toHaveLength(1);
    expect(await objects(u)).toEqual([`u/${u.userId}/social-gallery/${sha256Of(atLimit)}`]);
  });

  it(`holds at most SOCIAL_GALLERY_MAX_IMAGES (${CAP}) images: a new one beyond is 403, a known one still 200, a delete frees a place`, async () => {
    const u = await server.user();
    const stored: Buffer[] = [];
    for (let i = 0; i < CAP - 2; i++) {
      stored.push(fresh());
      expect((await uploadGallery(server, u.apiKey, stored.at(-1)!)).status).toBe(201);
    }
    // Concurrent uploads for the last two places: exactly two get in.
    const racing = Array.from({ length: 6 }, () => fresh());
    const statuses = (await Promise.all(racing.map((b) => uploadGallery(server, u.apiKey, b))))
      .map((r) => r.status)
      .sort();
    expect(statuses).toEqual([201, 201, 403, 403, 403, 403]);
    expect(await listAll(u)).toHaveLength(CAP);
    expect(await objects(u)).toHaveLength(CAP);

    const over = await uploadGallery(server, u.apiKey, fresh());
    expect(over.status).toBe(403);
    expect(await over.json()).toEqual({
      code: 'FORBIDDEN',
      message: `Your gallery is full (${CAP} images); delete an image first`,
    });
    expect((await uploadGallery(server, u.apiKey, stored[0]!)).status).toBe(200);
    expect(await objects(u)).toHaveLength(CAP);
    // Another account's gallery is counted apart.
    const other = await server.user();
    expect((await uploadGallery(server, other.apiKey, fresh())).status).toBe(201);

    expect((await deleteImage(u, sha256Of(stored[0]!))).response.status).toBe(204);
    expect((await uploadGallery(server, u.apiKey, fresh())).status).toBe(201);
    expect(await listAll(u)).toHaveLength(CAP);
  });
});

describe('GET /social/gallery', () => {
  it('lists the caller’s images newest first, in pages that neither drop nor repeat one (equal createdAt included)', async () => {
    const u = await server.user();
    const other = await server.user();
    await addGalleryImage(server, other, fresh());
    const expected: Array<{ sha256: string; createdAt: number }> = [];
    for (let i = 0; i < CAP; i++) {
      if (i !== 2) now += 1000; // images 1 and 2 share a createdAt
      const bytes = fresh();
      await addGalleryImage(server, u, bytes);
      expected.push({ sha256: sha256Of(bytes), createdAt: now });
    }
    const order = [...expected].sort((a, b) => b.createdAt - a.createdAt || (a.sha256 < b.sha256 ? 1 : -1));
    const first = await u.api.GET('/api/v1/social/gallery');
    expect(first.data!.nextCursor).toBeNull();
    expect(first.data!.items.map((i) => [i.sha256, i.createdAt])).toEqual(order.map((i) => [i.sha256, i.createdAt]));
    expect(first.data!.items[0]).toEqual({
      sha256: order[0]!.sha256,
      url: `/api/v1/social/gallery/${order[0]!.sha256}`,
      contentType: 'image/png',
      byteSize: PNG.length + `#gallery-${counter}`.length,
      createdAt: order[0]!.createdAt,
    });
    for (const limit of [1, 2, 3])
      expect(
        (await listAll(u, limit)).map((i) => i.sha256),
        `limit ${limit}`,
      ).toEqual(order.map((i) => i.sha256));

    expect((await other.api.GET('/api/v1/social/gallery')).data!.items).toHaveLength(1);
    const bad = await u.api.GET('/api/v1/social/gallery', { params: { query: { cursor: 'not-a-cursor' } } });
    expect(bad.response.status).toBe(400);
    expect((await u.api.GET('/api/v1/social/gallery', { params: { query: { limit: 0 } } })).response.status).toBe(400);
    expect((await u.api.GET('/api/v1/social/gallery', { params: { query: { limit: 201 } } })).response.status).toBe(
      400,
    );
  });
});

describe('GET /social/gallery/{sha256}', () => {
  it('the owner gets its own images only: unknown and other accounts’ images are the same 404', async () => {
    const u = await server.user();
    const other = await server.user();
    const theirs = await addGalleryImage(server, other, fresh());
    const unknown = await fetchImage(u, `/api/v1/social/gallery/${'a'.repeat(64)}`);
    expect(unknown.status).toBe(404);
    expect(await unknown.json()).toEqual(NOT_FOUND);
    const foreign = await fetchImage(u, theirs);
    expect(foreign.status).toBe(404);
    expect(await foreign.json()).toEqual(NOT_FOUND);
    expect((await fetchImage(u, '/api/v1/social/gallery/ABC')).status).toBe(400);
    expect((await fetchImage(u, `${theirs}?ownerUserId=not-a-uuid`)).status).toBe(400);
  });

  it('friend matrix: only an accepted friend without a block, through a badge it may see, gets the image; every other case is the 404 of an unknown image', async () => {
    const bodies = new Set<string>();
    const expectHidden = async (res: Response, what: string) => {
      expect(res.status, what).toBe(404);
      const text = await res.text();
      expect(JSON.parse(text), what).toEqual(NOT_FOUND);
      bodies.add(text);
    };
    for (const relationship of RELATIONSHIPS) {
      const owner = await server.user();
      const viewer = await server.user();
      const bytes = fresh();
      const url = await addGalleryImage(server, owner, bytes);
      await addBadge(owner, [url], 'friends_only');
      await relate(owner, viewer, relationship);
      const res = await fetchImage(viewer, friendUrl(url, owner));
      if (relationship === 'accepted') {
        expect(res.status).toBe(200);
        expect(Buffer.from(await res.arrayBuffer()).equals(bytes)).toBe(true);
      } else {
        await expectHidden(res, relationship);
      }
    }

    const owner = await server.user();
    const viewer = await server.user();
    await befriend(owner, viewer);
    const shown = await addGalleryImage(server, owner, fresh());
    const hidden = await addGalleryImage(server, owner, fresh());
    const unused = await addGalleryImage(server, owner, fresh());
    await addBadge(owner, [shown], 'public');
    const privateBadge = await addBadge(owner, [hidden], 'private');
    expect((await fetchImage(viewer, friendUrl(shown, owner))).status).toBe(200);
    await expectHidden(await fetchImage(viewer, friendUrl(hidden, owner)), 'widget private');
    await expectHidden(await fetchImage(viewer, friendUrl(unused, owner)), 'no widget shows it');
    await expectHidden(
      await fetchImage(viewer, friendUrl(`/api/v1/social/gallery/${'b'.repeat(64)}`, owner)),
      'unknown image',
    );
    await expectHidden(await fetchImage(viewer, friendUrl(shown, { userId: UNKNOWN_ID } as TestUser)), 'unknown owner');
    // Without ownerUserId the viewer asks its own gallery.
    await expectHidden(await fetchImage(viewer, shown), 'no ownerUserId');
    // Another owner's image id under this owner: the badge of that other account does not count.
    const stranger = await server.user();
    const strangers = await addGalleryImage(server, stranger, fresh());
    await addBadge(stranger, [strangers], 'public');
    await expectHidden(await fetchImage(viewer, friendUrl(strangers, owner)), 'another owner’s image under this owner');
    await expectHidden(await fetchImage(viewer, friendUrl(strangers, stranger)), 'an account that is not a friend');
    // The widget becomes visible: the image is served; private again: hidden again.
    expect((await patchWidget(owner, privateBadge, { visibility: 'logged_in' })).response.status).toBe(200);
    expect((await fetchImage(viewer, friendUrl(hidden, owner))).status).toBe(200);
    expect((await patchWidget(owner, privateBadge, { visibility: 'private' })).response.status).toBe(200);
    await expectHidden(await fetchImage(viewer, friendUrl(hidden, owner)), 'private again');
    expect(bodies.size).toBe(1);
  });

  it('mutuals_only badges show their images only to a friend who shares a mutual friend', async () => {
    const owner = await server.user();
    const viewer = await server.user();
    await befriend(owner, viewer);
    const url = await addGalleryImage(server, owner, fresh());
    await addBadge(owner, [url], 'mutuals_only');
    expect((await fetchImage(viewer, friendUrl(url, owner))).status).toBe(404);
    const mutual = await server.user();
    await befriend(owner, mutual);
    await befriend(mutual, viewer);
    expect((await fetchImage(viewer, friendUrl(url, owner))).status).toBe(200);
  });

  it('GET /friends/{friendUserId}/social tags badge URLs with the owner, and each fetches with the viewer’s key; the owner’s own section keeps bare URLs', async () => {
    const owner = await server.user();
    const viewer = await server.user();
    await befriend(owner, viewer);
    const images = [fresh('image/gif'), fresh('image/webp')];
    const urls = [];
    for (const [i, bytes] of images.entries())
      urls.push(await addGalleryImage(server, owner, bytes, i === 0 ? 'image/gif' : 'image/webp'));
    const widgetId = await addBadge(owner, urls, 'friends_only');
    const own = await owner.api.GET('/api/v1/social');
    expect(own.data!.widgets.find((w) => w.id === widgetId)!.config).toEqual({ kind: 'custom_badge', imageUrls: urls });
    const seen = await viewer.api.GET('/api/v1/friends/{friendUserId}/social', {
      params: { path: { friendUserId: owner.userId } },
    });
    expect(seen.response.status).toBe(200);
    const config = seen.data!.widgets.find((w) => w.id === widgetId)!.config as { imageUrls: string[] };
    expect(config.imageUrls).toEqual(urls.map((u) => `${u}?ownerUserId=${owner.userId}`));
    for (const [i, url] of config.imageUrls.entries()) {
      const got = await fetchImage(viewer, url);
      expect(got.status).toBe(200);
      expect(got.headers.get('content-type')).toBe(i === 0 ? 'image/gif' : 'image/webp');
      expect(Buffer.from(await got.arrayBuffer()).equals(images[i]!)).toBe(true);
    }
  });
});

describe('custom_badge imageUrls must name the caller’s gallery images', () => {
  it('create: a URL of no gallery image, of another account’s image, or with a query is 400 for the whole list and nothing is stored', async () => {
    const u = await server.user();
    const other = await server.user();
    const mine = await addGalleryImage(server, u, fresh());
    const theirs = await addGalleryImage(server, other, fresh());
    const bad = [
      [mine, galleryUrlOf(fresh())],
      [theirs],
      [mine, theirs],
      [`${mine}?ownerUserId=${u.userId}`],
      [`${theirs}?ownerUserId=${other.userId}`],
    ];
    for (const imageUrls of bad) {
      const res = await createBadge(u, imageUrls);
      expect(res.response.status, imageUrls.join(' ')).toBe(400);
      expect(res.error).toEqual({ code: 'BAD_REQUEST', message: BADGE_MESSAGE });
    }
    expect((await u.api.GET('/api/v1/social')).data!.widgets).toEqual([]);
    // Your own images, repeated or not, and the empty list are accepted.
    expect((await createBadge(u, [mine, mine])).response.status).toBe(201);
    expect((await createBadge(u, [])).response.status).toBe(201);
  });

  it('PATCH: the same rule; a refused PATCH changes nothing', async () => {
    const u = await server.user();
    const other = await server.user();
    const [a, b] = [await addGalleryImage(server, u, fresh()), await addGalleryImage(server, u, fresh())];
    const theirs = await addGalleryImage(server, other, fresh());
    const widgetId = await addBadge(u, [a]);
    const status = (
      await u.api.POST('/api/v1/social/widgets', {
        body: {
          type: 'status',
          config: { kind: 'status', statusText: 'hi' },
          visibility: 'public',
          size: 'small',
        } as never,
      })
    ).data!.widgetId;
    for (const imageUrls of [[a, theirs], [galleryUrlOf(fresh())]]) {
      const res = await patchWidget(u, widgetId, { config: { kind: 'custom_badge', imageUrls }, title: 'changed' });
      expect(res.response.status).toBe(400);
      expect(res.error!.message).toBe(BADGE_MESSAGE);
      // A widget changing kind into a badge is checked too.
      expect(
        (await patchWidget(u, status, { type: 'custom_badge', config: { kind: 'custom_badge', imageUrls } })).response
          .status,
      ).toBe(400);
    }
    const widgets = (await u.api.GET('/api/v1/social')).data!.widgets;
    expect(widgets.find((w) => w.id === widgetId)).toMatchObject({
      title: null,
      config: { kind: 'custom_badge', imageUrls: [a] },
    });
    expect(widgets.find((w) => w.id === status)!.config).toEqual({ kind: 'status', statusText: 'hi' });
    expect(
      (await patchWidget(u, widgetId, { config: { kind: 'custom_badge', imageUrls: [b, a] } })).response.status,
    ).toBe(200);
    // A PATCH without config does not re-check the images.
    expect((await patchWidget(u, widgetId, { title: 'Badges' })).response.status).toBe(200);
  });
});

describe('DELETE /social/gallery/{sha256}', () => {
  it('409 while a badge shows the image; 204 once none does, and the object goes; unknown and foreign images are 404', async () => {
    const u = await server.user();
    const other = await server.user();
    const bytes = fresh();
    const url = await addGalleryImage(server, u, bytes);
    const keep = await addGalleryImage(server, u, fresh());
    const sha = sha256Of(bytes);
    const first = await addBadge(u, [url, keep]);
    const second = await addBadge(u, [url]);

    const refused = await deleteImage(u, sha);
    expect(refused.response.status).toBe(409);
    expect(refused.error).toEqual({
      code: 'CONFLICT',
      message: 'A custom_badge widget shows this image; take it out of the widget first',
    });
    expect((await fetchImage(u, url)).status).toBe(200);
    expect((await patchWidget(u, first, { config: { kind: 'custom_badge', imageUrls: [keep] } })).response.status).toBe(
      200,
    );
    expect((await deleteImage(u, sha)).response.status).toBe(409);
    expect(
      (await u.api.DELETE('/api/v1/social/widgets/{widgetId}', { params: { path: { widgetId: second } } })).response
        .status,
    ).toBe(204);

    const theirs = await addGalleryImage(server, other, bytes); // the same bytes in another gallery
    expect((await deleteImage(u, sha)).response.status).toBe(204);
    expect(await objects(u)).toEqual([`u/${u.userId}/social-gallery/${keep.split('/').pop()}`]);
    const gone = await fetchImage(u, url);
    expect(gone.status).toBe(404);
    expect(await gone.json()).toEqual(NOT_FOUND);
    expect((await listAll(u)).map((i) => i.sha256)).toEqual([keep.split('/').pop()]);
    // A badge can no longer name it.
    expect((await createBadge(u, [url])).response.status).toBe(400);
    // The other account's copy is untouched.
    expect((await fetchImage(other, theirs)).status).toBe(200);

    const again = await deleteImage(u, sha);
    expect(again.response.status).toBe(404);
    expect(again.error).toEqual(NOT_FOUND);
    expect((await deleteImage(u, 'c'.repeat(64))).response.status).toBe(404);
    const foreign = await addGalleryImage(server, other, fresh());
    expect((await deleteImage(u, foreign.split('/').pop()!)).error).toEqual(NOT_FOUND);
    expect((await fetchImage(other, foreign)).status).toBe(200);
  });
});

describe('storage', () => {
  it('garbage collection leaves gallery images alone', async () => {
    const u = await server.user();
    const url = await addGalleryImage(server, u, fresh());
    await addGalleryImage(server, u, fresh());
    const before = await objects(u);
    const result = await collectGarbage({
      db: server.deps.db.knex,
      storage: server.deps.storage!,
      now: now + 365 * 86_400_000,
      log: createLogger('silent'),
      graceMs: 0,
    });
    expect(result.failures).toBe(0);
    expect(await objects(u)).toEqual(before);
    expect((await fetchImage(u, url)).status).toBe(200);
  });

  it('without object storage every gallery route is 503 PRECONDITION_FAILED', async () => {
    const bare = await new TestServer().start({ env: { OBJECT_STORAGE: 'none' } });
    try {
      const u = await bare.user();
      const sha = sha256Of(PNG);
      const calls = [
        bare.fetch('/api/v1/social/gallery', { headers: bearer(u.apiKey) }),
        bare.fetch('/api/v1/social/gallery', {
          method: 'POST',
          headers: { ...bearer(u.apiKey), 'Content-Type': 'image/png' },
          body: new Uint8Array(PNG),
        }),
        bare.fetch(`/api/v1/social/gallery/${sha}`, { headers: bearer(u.apiKey) }),
        bare.fetch(`/api/v1/social/gallery/${sha}?ownerUserId=${UNKNOWN_ID}`, { headers: bearer(u.apiKey) }),
        bare.fetch(`/api/v1/social/gallery/${sha}`, { method: 'DELETE', headers: bearer(u.apiKey) }),
      ];
      for (const res of await Promise.all(calls)) {
        expect(res.status).toBe(503);
        expect(await res.json()).toEqual({
          code: 'PRECONDITION_FAILED',
          message: 'Object storage is not configured on this server',
        });
      }
    } finally {
      await bare.close();
    }
  });
});

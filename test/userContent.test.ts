/**
 * Bytes an account uploaded or the server fetched are served inert: every response that carries
 * them — member media, social gallery images, re-hosted note images and signed storage downloads
 * (message attachments, space icons), owner and friend branches, 200 and 304 alike — has
 * `X-Content-Type-Options: nosniff` and `Content-Security-Policy: default-src 'none'; sandbox`
 * (server/storage/serve.ts USER_CONTENT_HEADERS). The uploads here are a valid PNG with an HTML
 * page after its end marker: accepted (the type is sniffed from the magic bytes) and served back
 * byte for byte as image/png.
 */
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createEntry, createMember } from './helpers/fixtures.ts';
import { befriend, friendsSharing, shareMember } from './helpers/friends.ts';
import { uploadGallery } from './helpers/gallery.ts';
import { PNG } from './helpers/images.ts';
import { startLoopbackServer, type LoopbackServer } from './helpers/imageServer.ts';
import { bearer, useServer, type TestUser } from './helpers/server.ts';

const server = useServer({ env: { FETCH_ALLOW_PRIVATE: 'true' } });

/** A PNG a browser sniffing the body could take for a page. */
const POLYGLOT = Buffer.concat([PNG, Buffer.from('<html><script>alert(1)</script></html>')]);
const USER_CONTENT = {
  'x-content-type-options': 'nosniff',
  'content-security-policy': "default-src 'none'; sandbox",
};

function expectUserContentHeaders(res: Response, label: string): void {
  for (const [name, value] of Object.entries(USER_CONTENT))
    expect(res.headers.get(name), `${label}: ${name}`).toBe(value);
}

/** GET `url` (200: exact bytes, image/png, both headers), then again with its ETag (304, both headers). */
async function expectInertImage(url: string, viewer: TestUser, label: string): Promise<void> {
  const res = await server.fetch(url, { headers: bearer(viewer.apiKey) });
  expect(res.status, label).toBe(200);
  expect(res.headers.get('content-type'), label).toBe('image/png');
  expectUserContentHeaders(res, `${label} 200`);
  expect(Buffer.from(await res.arrayBuffer()).equals(POLYGLOT), `${label}: bytes as uploaded`).toBe(true);
  const etag = res.headers.get('etag');
  expect(etag, label).toBeTruthy();
  const cached = await server.fetch(url, { headers: { ...bearer(viewer.apiKey), 'If-None-Match': etag! } });
  expect(cached.status, label).toBe(304);
  expectUserContentHeaders(cached, `${label} 304`);
}

let images: LoopbackServer;
beforeAll(async () => {
  images = await startLoopbackServer({ '/polyglot.png': { type: 'image/png', body: POLYGLOT } });
});
afterAll(() => images.close());

describe('responses that carry user bytes', () => {
  it('member media (own and a friend’s): nosniff and the sandbox CSP on 200 and 304, bytes and type as uploaded', async () => {
    const { owner, viewer, bucketId } = await friendsSharing(server, { members_view: 'read', member_avatar: 'read' });
    const memberId = await createMember(owner.api, 'Robin');
    await shareMember(owner, memberId, [bucketId]);
    const put = await server.fetch(`/api/v1/members/${memberId}/media?kind=avatar`, {
      method: 'PUT',
      headers: { ...bearer(owner.apiKey), 'Content-Type': 'image/png' },
      body: new Uint8Array(POLYGLOT),
    });
    expect(put.status, await put.clone().text()).toBe(200);
    const { avatarUrl } = (await put.json()) as { avatarUrl: string };
    await expectInertImage(avatarUrl, owner, 'own member media');
    await expectInertImage(`${avatarUrl}&ownerUserId=${owner.userId}`, viewer, 'friend member media');
  });

  it('social gallery images (own and a friend’s): nosniff and the sandbox CSP on 200 and 304, bytes and type as uploaded', async () => {
    const owner = await server.user();
    const viewer = await server.user();
    await befriend(owner, viewer);
    const upload = await uploadGallery(server, owner.apiKey, POLYGLOT, 'image/png');
    expect(upload.status).toBe(201);
    const { url } = (await upload.json()) as { url: string };
    const badge = await owner.api.POST('/api/v1/social/widgets', {
      body: {
        type: 'custom_badge',
        config: { kind: 'custom_badge', imageUrls: [url] },
        visibility: 'friends_only',
        size: 'small',
      } as never,
    });
    expect(badge.response.status, JSON.stringify(badge.error)).toBe(201);
    await expectInertImage(url, owner, 'own gallery image');
    await expectInertImage(`${url}?ownerUserId=${owner.userId}`, viewer, 'friend gallery image');
  });

  it('re-hosted note images (/entry-images): nosniff and the sandbox CSP on 200 and 304, bytes and type as fetched', async () => {
    const owner = await server.user();
    const entryId = await createEntry(owner.api, `![x](${images.url('/polyglot.png')})`);
    const { data } = await owner.api.GET('/api/v1/entries/{entryId}', { params: { path: { entryId } } });
    const stored = /\/api\/v1\/entry-images\/[0-9a-f]{64}/.exec(data!.content)?.[0];
    expect(stored, data!.content).toBeDefined();
    await expectInertImage(stored!, owner, 'note image');
  });

  it('signed storage downloads (message attachments, space icons): nosniff and the sandbox CSP, bytes and type as uploaded', async () => {
    const user = await server.user();
    const { api } = user;
    const absolute = (url: string) => (url.startsWith('/') ? server.baseUrl + url : url);
    const post = (path: string, body: Record<string, unknown>) =>
      server.fetch(path, {
        method: 'POST',
        headers: { ...bearer(user.apiKey), 'Content-Type': 'application/json' },
        body: JSON.stringify(body),
      });
    /** Intent, PUT to the presigned URL, complete: the staging id. */
    async function stage(intentPath: string, extra: Record<string, unknown>): Promise<string> {
      const res = await post(intentPath, { ...extra, contentType: 'image/png', byteSize: POLYGLOT.length });
      expect(res.status, intentPath).toBe(201);
      const intent = (await res.json()) as {
        stagingId: string;
        upload: { url: string; headers: Record<string, string> };
      };
      const put = await fetch(absolute(intent.upload.url), {
        method: 'PUT',
        headers: intent.upload.headers,
        body: new Uint8Array(POLYGLOT),
      });
      expect(put.status, await put.clone().text()).toBe(200);
      const done = await post(intentPath.replace('upload-intent', 'complete'), { stagingId: intent.stagingId });
      expect(done.status, intentPath).toBe(204);
      return intent.stagingId;
    }
    async function expectInertDownload(url: string, label: string): Promise<void> {
      const res = await fetch(absolute(url));
      expect(res.status, label).toBe(200);
      expect(res.headers.get('content-type'), label).toBe('image/png');
      expectUserContentHeaders(res, label);
      expect(Buffer.from(await res.arrayBuffer()).equals(POLYGLOT), `${label}: bytes as uploaded`).toBe(true);
    }

    const memberId = await createMember(api, 'Robin');
    const iconId = await stage('/api/v1/messaging/spaces/icon/upload-intent', {});
    const space = await api.POST('/api/v1/messaging/spaces', { body: { name: 'Home', iconStagingId: iconId } });
    expect(space.response.status, JSON.stringify(space.error)).toBe(201);
    await expectInertDownload(space.data!.iconUrl!, 'space icon');

    const channel = await api.POST('/api/v1/messaging/spaces/{spaceId}/channels', {
      params: { path: { spaceId: space.data!.id } },
      body: { name: 'general' },
    });
    const channelId = channel.data!.id;
    const attachmentId = await stage('/api/v1/messaging/attachments/upload-intent', { channelId, fileName: 'x.png' });
    const sent = await api.POST('/api/v1/messaging/channels/{channelId}/messages', {
      params: { path: { channelId } },
      body: { memberId, stagedAttachmentIds: [attachmentId] },
    });
    expect(sent.response.status, JSON.stringify(sent.error)).toBe(201);
    const access = await api.GET('/api/v1/messaging/attachments/{attachmentId}/access-url', {
      params: { path: { attachmentId } },
    });
    expect(access.response.status).toBe(200);
    await expectInertDownload(access.data!.url, 'message attachment');
  });

  it('the contract declares both headers on every response that carries user bytes, and on their 304s', () => {
    const spec = JSON.parse(readFileSync(new URL('../generated/openapi.json', import.meta.url), 'utf8')) as {
      paths: Record<string, Record<string, { operationId?: string; responses?: Record<string, ResponseObject> }>>;
      components: { headers: Record<string, unknown> };
    };
    type ResponseObject = { content?: Record<string, unknown>; headers?: Record<string, { $ref?: string }> };
    // The server's own documents: the docs page (its own CSP) and the metrics text.
    const ownDocuments = new Set(['getDocs', 'getMetrics']);
    const checked: string[] = [];
    for (const item of Object.values(spec.paths)) {
      for (const op of Object.values(item)) {
        if (!op || typeof op !== 'object' || !op.responses || ownDocuments.has(op.operationId ?? '')) continue;
        const carriesBytes = Object.values(op.responses).some((r) =>
          Object.keys(r.content ?? {}).some((t) => t !== 'application/json'),
        );
        if (!carriesBytes) continue;
        for (const [status, response] of Object.entries(op.responses)) {
          const bytes = Object.keys(response.content ?? {}).some((t) => t !== 'application/json');
          if (!bytes && status !== '304') continue;
          checked.push(`${op.operationId} ${status}`);
          expect(response.headers?.['X-Content-Type-Options']?.$ref, `${op.operationId} ${status}`).toBe(
            '#/components/headers/XContentTypeOptions',
          );
          expect(response.headers?.['Content-Security-Policy']?.$ref, `${op.operationId} ${status}`).toBe(
            '#/components/headers/UserContentSecurityPolicy',
          );
        }
      }
    }
    expect(checked.sort()).toEqual([
      'createBackup 200',
      'downloadStoredObject 200',
      'getEntryImage 200',
      'getEntryImage 304',
      'getMemberMedia 200',
      'getMemberMedia 304',
      'getSocialGalleryImage 200',
      'getSocialGalleryImage 304',
      'streamEvents 200',
    ]);
  });
});

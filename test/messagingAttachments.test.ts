import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ApiClient, components } from '../client/index.ts';
import { createLogger } from '../server/logger.ts';
import { collectGarbage } from '../server/storage/gc.ts';
import { createMember, UNKNOWN_ID } from './helpers/fixtures.ts';
import { GIF, PNG } from './helpers/images.ts';
import { S3_ACCESS_KEY_ID, S3_SECRET_ACCESS_KEY, startTestS3, type TestS3Server } from './helpers/s3server.ts';
import { TestServer } from './helpers/server.ts';

type Intent = components['schemas']['MessagingUploadIntent'];

const PDF = Buffer.concat([Buffer.from('%PDF-1.7\n'), Buffer.alloc(200, 0x20), Buffer.from('\n%%EOF\n')]);
const MAX = 4096;
const STAGING_TTL = 3_600_000;

/** Real time plus an offset a test may move (expiry of staged uploads). */
let offset = 0;
const clock = () => Date.now() + offset;

let s3: TestS3Server;
const servers = { filesystem: new TestServer(), s3: new TestServer(), none: new TestServer() };
const ICON_MAX = 2048;
const common = {
  SPACE_ICON_MAX_BYTES: String(ICON_MAX),
  MESSAGE_ATTACHMENT_MAX_BYTES: String(MAX),
  STORAGE_STAGING_TTL_MS: String(STAGING_TTL),
  STORAGE_UPLOAD_URL_TTL_SECONDS: '600',
};

beforeAll(async () => {
  s3 = await startTestS3(['media']);
  await servers.filesystem.start({ clock, env: common });
  await servers.s3.start({
    clock,
    env: {
      ...common,
      OBJECT_STORAGE: 's3',
      S3_ENDPOINT: s3.endpoint,
      S3_BUCKET: 'media',
      S3_ACCESS_KEY_ID,
      S3_SECRET_ACCESS_KEY,
      S3_FORCE_PATH_STYLE: 'true',
    },
  });
  await servers.none.start({ clock, env: { OBJECT_STORAGE: 'none' } });
});

afterAll(async () => {
  await servers.filesystem.close();
  await servers.s3.close();
  await servers.none.close();
  await s3?.close();
});

async function setup(api: ApiClient) {
  const memberId = await createMember(api, 'Robin');
  const spaceId = (await api.POST('/api/v1/messaging/spaces', { body: { name: 'S' } })).data!.id;
  const newChannel = async (name: string) =>
    (await api.POST('/api/v1/messaging/spaces/{spaceId}/channels', { params: { path: { spaceId } }, body: { name } }))
      .data!.id;
  return { memberId, spaceId, channelId: await newChannel('general'), newChannel };
}

const ch = (channelId: string) => ({ params: { path: { channelId } } });

describe.each(['filesystem', 's3'] as const)('%s backend', (kind) => {
  const server = () => servers[kind];
  const absolute = (url: string) => (url.startsWith('/') ? server().baseUrl + url : url);

  it('round-trips: intent, PUT to the presigned URL, complete, send, read back through the access URL', async () => {
    const { api } = await server().user();
    const { memberId, channelId } = await setup(api);
    const created = await api.POST('/api/v1/messaging/attachments/upload-intent', {
      body: { channelId, fileName: 'receipt.pdf', contentType: 'application/pdf', byteSize: PDF.length },
    });
    expect(created.response.status).toBe(201);
    const intent: Intent = created.data!;
    expect(intent.upload.method).toBe('PUT');
    expect(intent.upload.headers['Content-Type']).toBe('application/pdf');
    expect(intent.expiresAt).toBeGreaterThan(clock() + STAGING_TTL - 60_000);
    const put = await fetch(absolute(intent.upload.url), {
      method: 'PUT',
      headers: intent.upload.headers,
      body: new Uint8Array(PDF),
    });
    expect(put.status, await put.clone().text()).toBe(200);

    const done = await api.POST('/api/v1/messaging/attachments/complete', { body: { stagingId: intent.stagingId } });
    expect(done.response.status).toBe(204);
    // Completing twice changes nothing.
    expect(
      (await api.POST('/api/v1/messaging/attachments/complete', { body: { stagingId: intent.stagingId } })).response
        .status,
    ).toBe(204);

    const sent = await api.POST('/api/v1/messaging/channels/{channelId}/messages', {
      ...ch(channelId),
      body: { memberId, stagedAttachmentIds: [intent.stagingId] },
    });
    expect(sent.response.status, JSON.stringify(sent.error)).toBe(201);
    const attachment = {
      id: intent.stagingId,
      fileName: 'receipt.pdf',
      contentType: 'application/pdf',
      byteSize: PDF.length,
      width: null,
      height: null,
      durationMs: null,
    };
    expect(sent.data!.content).toBeNull();
    expect(sent.data!.attachments).toEqual([attachment]);
    const page = (await api.GET('/api/v1/messaging/channels/{channelId}/messages', ch(channelId))).data!;
    expect(page.items.map((m) => [m.content, m.attachments])).toEqual([[null, [attachment]]]);

    const access = await api.GET('/api/v1/messaging/attachments/{attachmentId}/access-url', {
      params: { path: { attachmentId: intent.stagingId } },
    });
    expect(access.response.status).toBe(200);
    expect(access.data!.expiresAt).toBeLessThanOrEqual(clock() + 300_000);
    const got = await fetch(absolute(access.data!.url));
    expect(got.status).toBe(200);
    expect(Buffer.from(await got.arrayBuffer()).equals(PDF)).toBe(true);

    // The staged upload is used up: its row and staging object are gone, and it cannot be sent again.
    const storage = server().deps.storage!;
    expect(await server().deps.db.knex('staged_uploads').where({ id: intent.stagingId })).toEqual([]);
    expect(
      await storage.head(
        `staging/${(await server().deps.db.knex('messaging_attachments').where({ id: intent.stagingId }).first('user_id')).user_id}/${intent.stagingId}`,
      ),
    ).toBeNull();
    const again = await api.POST('/api/v1/messaging/channels/{channelId}/messages', {
      ...ch(channelId),
      body: { memberId, content: 'again', stagedAttachmentIds: [intent.stagingId] },
    });
    expect(again.response.status).toBe(400);
  });

  it('space icons: intent, PUT, complete, iconStagingId on create and update; iconUrl downloads the icon; a replaced icon is deleted', async () => {
    const { api, userId } = await server().user();
    const storage = server().deps.storage!;
    async function icon(bytes: Buffer, contentType: string): Promise<string> {
      const intent = await api.POST('/api/v1/messaging/spaces/icon/upload-intent', {
        body: { contentType: contentType as 'image/png', byteSize: bytes.length },
      });
      expect(intent.response.status).toBe(201);
      const put = await fetch(absolute(intent.data!.upload.url), {
        method: 'PUT',
        headers: intent.data!.upload.headers,
        body: new Uint8Array(bytes),
      });
      expect(put.status).toBe(200);
      expect(
        (await api.POST('/api/v1/messaging/spaces/icon/complete', { body: { stagingId: intent.data!.stagingId } }))
          .response.status,
      ).toBe(204);
      return intent.data!.stagingId;
    }
    const download = async (url: string | null) => Buffer.from(await (await fetch(absolute(url!))).arrayBuffer());
    const first = await icon(PNG, 'image/png');
    const created = await api.POST('/api/v1/messaging/spaces', { body: { name: 'Home', iconStagingId: first } });
    expect(created.response.status).toBe(201);
    expect((await download(created.data!.iconUrl)).equals(PNG)).toBe(true);
    const spaceId = created.data!.id;
    const listed = (await api.GET('/api/v1/messaging/spaces')).data!.find((x) => x.id === spaceId)!;
    expect((await download(listed.iconUrl)).equals(PNG)).toBe(true);
    const boot = (await api.GET('/api/v1/messaging/bootstrap')).data!.spaces.find((x) => x.id === spaceId)!;
    expect((await download(boot.iconUrl)).equals(PNG)).toBe(true);
    const firstKey = `u/${userId}/messaging/space-icons/${first}`;
    expect(await storage.head(firstKey)).not.toBeNull();

    const second = await icon(GIF, 'image/gif');
    const updated = await api.PATCH('/api/v1/messaging/spaces/{spaceId}', {
      params: { path: { spaceId } },
      body: { iconStagingId: second },
    });
    expect(updated.response.status).toBe(200);
    expect((await download(updated.data!.iconUrl)).equals(GIF)).toBe(true);
    expect(await storage.head(firstKey)).toBeNull();
    // Renaming keeps the icon.
    expect(
      (await api.PATCH('/api/v1/messaging/spaces/{spaceId}', { params: { path: { spaceId } }, body: { name: 'Flat' } }))
        .data!.iconUrl,
    ).not.toBeNull();
    const removed = await api.PATCH('/api/v1/messaging/spaces/{spaceId}', {
      params: { path: { spaceId } },
      body: { iconStagingId: null },
    });
    expect(removed.data!.iconUrl).toBeNull();
    expect(await storage.head(`u/${userId}/messaging/space-icons/${second}`)).toBeNull();
    expect((await api.POST('/api/v1/messaging/spaces', { body: { name: 'Plain' } })).data!.iconUrl).toBeNull();
  });

  it('iconStorageRef: another space gets its own copy of an icon, so replacing or removing one never touches the other', async () => {
    const { api, userId } = await server().user();
    const storage = server().deps.storage!;
    const download = async (url: string | null) => Buffer.from(await (await fetch(absolute(url!))).arrayBuffer());
    const key = (ref: string | null) => `u/${userId}/messaging/space-icons/${ref}`;
    async function icon(bytes: Buffer, contentType: 'image/png' | 'image/gif'): Promise<string> {
      const intent = (
        await api.POST('/api/v1/messaging/spaces/icon/upload-intent', { body: { contentType, byteSize: bytes.length } })
      ).data!;
      expect(
        (
          await fetch(absolute(intent.upload.url), {
            method: 'PUT',
            headers: intent.upload.headers,
            body: new Uint8Array(bytes),
          })
        ).status,
      ).toBe(200);
      expect(
        (await api.POST('/api/v1/messaging/spaces/icon/complete', { body: { stagingId: intent.stagingId } })).response
          .status,
      ).toBe(204);
      return intent.stagingId;
    }
    const spaceOf = async (id: string) => (await api.GET('/api/v1/messaging/spaces')).data!.find((x) => x.id === id)!;

    const a = (
      await api.POST('/api/v1/messaging/spaces', { body: { name: 'A', iconStagingId: await icon(PNG, 'image/png') } })
    ).data!;
    expect(a.iconStorageRef).toEqual(expect.stringMatching(/^[0-9a-f-]{36}$/));
    expect((await spaceOf(a.id)).iconStorageRef).toBe(a.iconStorageRef);
    expect((await api.GET('/api/v1/messaging/bootstrap')).data!.spaces.find((x) => x.id === a.id)!.iconStorageRef).toBe(
      a.iconStorageRef,
    );
    expect((await api.POST('/api/v1/messaging/spaces', { body: { name: 'None' } })).data!.iconStorageRef).toBeNull();

    const created = await api.POST('/api/v1/messaging/spaces', {
      body: { name: 'B', iconStorageRef: a.iconStorageRef! },
    });
    expect(created.response.status).toBe(201);
    const b = created.data!;
    expect(b.iconStorageRef).not.toBeNull();
    expect(b.iconStorageRef).not.toBe(a.iconStorageRef);
    expect((await download(b.iconUrl)).equals(PNG)).toBe(true);
    expect(await storage.head(key(b.iconStorageRef))).toMatchObject({ contentType: 'image/png', size: PNG.length });

    // Replacing A's icon deletes A's object only; B keeps its copy.
    const replacedA = (
      await api.PATCH('/api/v1/messaging/spaces/{spaceId}', {
        params: { path: { spaceId: a.id } },
        body: { iconStagingId: await icon(GIF, 'image/gif') },
      })
    ).data!;
    expect(await storage.head(key(a.iconStorageRef))).toBeNull();
    expect((await download((await spaceOf(b.id)).iconUrl)).equals(PNG)).toBe(true);

    // PATCH with a reference: B takes a copy of A's new icon, its previous copy goes; naming its own icon changes nothing.
    const patched = (
      await api.PATCH('/api/v1/messaging/spaces/{spaceId}', {
        params: { path: { spaceId: b.id } },
        body: { iconStorageRef: replacedA.iconStorageRef! },
      })
    ).data!;
    expect(patched.iconStorageRef).not.toBe(replacedA.iconStorageRef);
    expect((await download(patched.iconUrl)).equals(GIF)).toBe(true);
    expect(await storage.head(key(b.iconStorageRef))).toBeNull();
    const same = (
      await api.PATCH('/api/v1/messaging/spaces/{spaceId}', {
        params: { path: { spaceId: b.id } },
        body: { iconStorageRef: patched.iconStorageRef!.toUpperCase() },
      })
    ).data!;
    expect(same.iconStorageRef).toBe(patched.iconStorageRef);
    expect(await storage.head(key(patched.iconStorageRef))).not.toBeNull();

    // Removing B's icon leaves A's.
    await api.PATCH('/api/v1/messaging/spaces/{spaceId}', {
      params: { path: { spaceId: b.id } },
      body: { iconStagingId: null },
    });
    expect(await storage.head(key(patched.iconStorageRef))).toBeNull();
    expect((await download((await spaceOf(a.id)).iconUrl)).equals(GIF)).toBe(true);
  });
});

describe('rules (filesystem backend)', () => {
  const server = () => servers.filesystem;
  const absolute = (url: string) => (url.startsWith('/') ? server().baseUrl + url : url);

  async function staged(
    api: ApiClient,
    channelId: string,
    bytes: Buffer = PNG,
    contentType = 'image/png',
    extra: Record<string, unknown> = {},
  ): Promise<string> {
    const intent = (
      await api.POST('/api/v1/messaging/attachments/upload-intent', {
        body: { channelId, fileName: 'f', contentType, byteSize: bytes.length, ...extra },
      })
    ).data!;
    const put = await fetch(absolute(intent.upload.url), {
      method: 'PUT',
      headers: intent.upload.headers,
      body: new Uint8Array(bytes),
    });
    expect(put.status).toBe(200);
    return intent.stagingId;
  }
  async function completed(
    api: ApiClient,
    channelId: string,
    bytes: Buffer = PNG,
    contentType = 'image/png',
    extra: Record<string, unknown> = {},
  ): Promise<string> {
    const id = await staged(api, channelId, bytes, contentType, extra);
    expect(
      (await api.POST('/api/v1/messaging/attachments/complete', { body: { stagingId: id } })).response.status,
    ).toBe(204);
    return id;
  }

  it('upload intent: a live channel of the caller, an allowed type, a size within the limit, a clean file name', async () => {
    const { api } = await server().user();
    const other = await server().user();
    const { channelId, newChannel } = await setup(api);
    const theirs = (await setup(other.api)).channelId;
    const archived = await newChannel('old');
    await api.DELETE('/api/v1/messaging/channels/{channelId}', ch(archived));
    const ok = { channelId, fileName: 'a.png', contentType: 'image/png', byteSize: MAX };
    const cases: Array<[Record<string, unknown>, string | null]> = [
      [{ ...ok, channelId: UNKNOWN_ID }, 'channelId is not a live channel of this account'],
      [{ ...ok, channelId: theirs }, 'channelId is not a live channel of this account'],
      [{ ...ok, channelId: archived }, 'channelId is not a live channel of this account'],
      [{ ...ok, contentType: 'text/html' }, 'Attachments of type text/html are not accepted'],
      // Verifiable by the storage layer, but not on the default attachment allow-list.
      [{ ...ok, contentType: 'application/zip' }, 'Attachments of type application/zip are not accepted'],
      [{ ...ok, byteSize: MAX + 1 }, `byteSize must be at most ${MAX}`],
      [{ ...ok, byteSize: 0 }, null],
      [{ ...ok, fileName: '' }, null],
      [{ ...ok, fileName: 'a/b.png' }, null],
      [{ ...ok, fileName: 'x'.repeat(256) }, null],
      [{ ...ok, width: 0 }, null],
      [{ ...ok, durationMs: -1 }, null],
      [{ ...ok, extra: 1 }, null],
    ];
    for (const [body, message] of cases) {
      const res = await api.POST('/api/v1/messaging/attachments/upload-intent', { body: body as never });
      expect(res.response.status, JSON.stringify(body)).toBe(400);
      if (message) expect(res.error!.message).toBe(message);
      expect(JSON.stringify(res.error)).not.toContain(theirs);
    }
    const accepted = await api.POST('/api/v1/messaging/attachments/upload-intent', {
      body: { ...ok, fileName: 'x'.repeat(255), width: 10, height: 20, durationMs: 0 },
    });
    expect(accepted.response.status).toBe(201);
  });

  it('complete: the caller’s attachment upload, uploaded, of the declared size and type; a bad upload is deleted', async () => {
    const { api, userId } = await server().user();
    const other = await server().user();
    const { channelId } = await setup(api);
    const storage = server().deps.storage!;
    const complete = (stagingId: string, client = api) =>
      client.POST('/api/v1/messaging/attachments/complete', { body: { stagingId } });

    expect((await complete(UNKNOWN_ID)).error).toEqual({
      code: 'BAD_REQUEST',
      message: 'stagingId is not a staged attachment upload of this account',
    });
    const mine = await staged(api, channelId);
    const stolen = await complete(mine, other.api);
    expect(stolen.response.status).toBe(400);
    expect(JSON.stringify(stolen.error)).not.toContain(mine);

    const notYet = (
      await api.POST('/api/v1/messaging/attachments/upload-intent', {
        body: { channelId, fileName: 'f', contentType: 'image/png', byteSize: PNG.length },
      })
    ).data!;
    expect((await complete(notYet.stagingId)).error).toEqual({
      code: 'BAD_REQUEST',
      message: 'Nothing has been uploaded for this staged upload yet',
    });

    // Bytes that reached the bucket some other way (S3 does not sniff): wrong type, wrong size.
    const key = `staging/${userId}/${notYet.stagingId}`;
    await storage.put(key, Buffer.concat([GIF, Buffer.alloc(PNG.length - GIF.length)]), 'image/png');
    expect((await complete(notYet.stagingId)).error).toEqual({
      code: 'BAD_REQUEST',
      message: 'The uploaded bytes are not image/png',
    });
    expect(await storage.head(key)).toBeNull();
    await storage.put(key, Buffer.concat([PNG, Buffer.from('xx')]), 'image/png');
    expect((await complete(notYet.stagingId)).error!.message).toBe(
      `The upload has ${PNG.length + 2} bytes; ${PNG.length} were declared`,
    );
    expect(await storage.head(key)).toBeNull();
    // The intent stays: a correct upload completes it.
    await storage.put(key, PNG, 'image/png');
    expect((await complete(notYet.stagingId)).response.status).toBe(204);
  });

  it('send: staged ids must be completed, unexpired, the caller’s, for this channel and unused; a refused send changes nothing', async () => {
    const { api } = await server().user();
    const other = await server().user();
    const { memberId, channelId, newChannel } = await setup(api);
    const otherChannel = await newChannel('other');
    const theirChannel = (await setup(other.api)).channelId;
    const send = (body: Record<string, unknown>) =>
      api.POST('/api/v1/messaging/channels/{channelId}/messages', {
        ...ch(channelId),
        body: { memberId, ...body } as never,
      });

    const good = await completed(api, channelId);
    const pending = await staged(api, channelId);
    const forOther = await completed(api, otherChannel);
    const theirs = await completed(other.api, theirChannel);
    for (const ids of [[pending], [forOther], [theirs], [UNKNOWN_ID], [good, pending]]) {
      const res = await send({ content: 'x', stagedAttachmentIds: ids });
      expect(res.response.status, JSON.stringify(ids)).toBe(400);
      expect(res.error!.message).toMatch(
        /^stagedAttachmentIds: .* is not a completed, unused attachment upload for this channel$/,
      );
      expect(JSON.stringify(res.error)).not.toContain(theirChannel);
    }
    for (const body of [
      { content: '' },
      {},
      { content: null },
      { stagedAttachmentIds: [] },
      { stagedAttachmentIds: [good, good] },
      { stagedAttachmentIds: Array.from({ length: 11 }, () => good) },
    ]) {
      expect((await send(body)).response.status, JSON.stringify(body)).toBe(400);
    }
    expect((await send({})).error!.message).toBe('content is required unless attachments or a GIF are sent');
    // Nothing was sent, and `good` is still there to use.
    expect((await api.GET('/api/v1/messaging/channels/{channelId}/messages', ch(channelId))).data!.items).toEqual([]);
    const sent = await send({
      content: 'two files',
      stagedAttachmentIds: [
        good,
        await completed(api, channelId, PDF, 'application/pdf', { width: 3, height: 4, durationMs: 5 }),
      ],
    });
    expect(sent.response.status).toBe(201);
    expect(sent.data!.content).toBe('two files');
    expect(sent.data!.attachments.map((a) => [a.id, a.contentType, a.width, a.height, a.durationMs])).toEqual([
      [good, 'image/png', null, null, null],
      [expect.any(String), 'application/pdf', 3, 4, 5],
    ]);
    expect((await send({ content: 'reuse', stagedAttachmentIds: [good] })).response.status).toBe(400);

    // Expired: past the staging TTL the upload is gone for sending, and garbage collection takes it.
    const late = await completed(api, channelId);
    offset = STAGING_TTL + 1000;
    try {
      expect((await send({ stagedAttachmentIds: [late] })).response.status).toBe(400);
      await collectGarbage({
        db: server().deps.db.knex,
        storage: server().deps.storage!,
        now: clock(),
        log: createLogger('silent'),
        graceMs: 0,
      });
    } finally {
      offset = 0;
    }
    expect(await server().deps.db.knex('staged_uploads').where({ id: late })).toEqual([]);
    expect((await server().deps.storage!.list(`staging/`)).filter((k) => k.endsWith(late))).toEqual([]);
  });

  it('an idempotent retry with attachments returns the first message (200), even concurrently', async () => {
    const { api } = await server().user();
    const { memberId, channelId } = await setup(api);
    const id = await completed(api, channelId);
    const body = { memberId, stagedAttachmentIds: [id], clientMutationId: 'm-1' };
    const results = await Promise.all(
      [1, 2, 3].map(() => api.POST('/api/v1/messaging/channels/{channelId}/messages', { ...ch(channelId), body })),
    );
    expect(results.map((r) => r.response.status).sort()).toEqual([200, 200, 201]);
    expect(new Set(results.map((r) => r.data!.id)).size).toBe(1);
    for (const r of results) expect(r.data!.attachments.map((a) => a.id)).toEqual([id]);
    expect(await server().deps.db.knex('messaging_attachments').where({ id })).toHaveLength(1);
  });

  it('access URL: only for attachments of the caller’s live messages in live channels (404 otherwise, nothing leaked)', async () => {
    const { api } = await server().user();
    const other = await server().user();
    const { memberId, channelId, spaceId } = await setup(api);
    const url = (attachmentId: string, client = api) =>
      client.GET('/api/v1/messaging/attachments/{attachmentId}/access-url', { params: { path: { attachmentId } } });
    const id = await completed(api, channelId);
    const sent = await api.POST('/api/v1/messaging/channels/{channelId}/messages', {
      ...ch(channelId),
      body: { memberId, stagedAttachmentIds: [id] },
    });
    expect(sent.response.status).toBe(201);
    expect((await url(id)).response.status).toBe(200);

    const theirs = await url(id, other.api);
    expect(theirs.error).toEqual({ code: 'NOT_FOUND', message: 'Attachment not found' });
    expect(JSON.stringify(theirs.error)).not.toContain(id);
    expect((await url(UNKNOWN_ID)).response.status).toBe(404);
    // A staged (unsent) upload is not an attachment.
    expect((await url(await completed(api, channelId))).response.status).toBe(404);

    await api.DELETE('/api/v1/messaging/spaces/{spaceId}', { params: { path: { spaceId } } });
    expect((await url(id)).response.status).toBe(404);

    const again = await setup(api);
    const id2 = await completed(api, again.channelId);
    const msg2 = (
      await api.POST('/api/v1/messaging/channels/{channelId}/messages', {
        ...ch(again.channelId),
        body: { memberId: again.memberId, stagedAttachmentIds: [id2] },
      })
    ).data!;
    await api.DELETE('/api/v1/messaging/messages/{messageId}', { params: { path: { messageId: msg2.id } } });
    expect((await url(id2)).response.status).toBe(404);

    const readOnly = await server().user({ scopes: { messaging: 'read' } });
    expect((await url(UNKNOWN_ID, readOnly.api)).response.status).toBe(404);
    expect(
      (await readOnly.api.POST('/api/v1/messaging/attachments/complete', { body: { stagingId: UNKNOWN_ID } })).response
        .status,
    ).toBe(403);
  });

  it('space icons: image types only, within SPACE_ICON_MAX_BYTES; only completed, unused icon uploads of the caller are taken', async () => {
    const { api } = await server().user();
    const other = await server().user();
    const { memberId, channelId } = await setup(api);
    const intent = (body: Record<string, unknown>) =>
      api.POST('/api/v1/messaging/spaces/icon/upload-intent', { body: body as never });
    for (const body of [
      { contentType: 'image/svg+xml', byteSize: 10 },
      { contentType: 'application/pdf', byteSize: 10 },
      { contentType: 'image/png', byteSize: 0 },
      { contentType: 'image/png' },
      { contentType: 'image/png', byteSize: 10, channelId },
    ]) {
      expect((await intent(body)).response.status, JSON.stringify(body)).toBe(400);
    }
    expect((await intent({ contentType: 'image/png', byteSize: ICON_MAX + 1 })).error).toEqual({
      code: 'BAD_REQUEST',
      message: `byteSize must be at most ${ICON_MAX}`,
    });
    expect((await intent({ contentType: 'image/png', byteSize: ICON_MAX })).response.status).toBe(201);

    async function iconUpload(client: ApiClient, complete = true): Promise<string> {
      const created = (
        await client.POST('/api/v1/messaging/spaces/icon/upload-intent', {
          body: { contentType: 'image/png', byteSize: PNG.length },
        })
      ).data!;
      expect(
        (
          await fetch(absolute(created.upload.url), {
            method: 'PUT',
            headers: created.upload.headers,
            body: new Uint8Array(PNG),
          })
        ).status,
      ).toBe(200);
      if (complete)
        expect(
          (await client.POST('/api/v1/messaging/spaces/icon/complete', { body: { stagingId: created.stagingId } }))
            .response.status,
        ).toBe(204);
      return created.stagingId;
    }
    const attachment = await completed(api, channelId);
    // The two flows do not mix: an attachment upload is not an icon, and the other way round.
    expect(
      (await api.POST('/api/v1/messaging/spaces/icon/complete', { body: { stagingId: attachment } })).error,
    ).toEqual({ code: 'BAD_REQUEST', message: 'stagingId is not a staged space-icon upload of this account' });
    const iconId = await iconUpload(api);
    expect(
      (await api.POST('/api/v1/messaging/attachments/complete', { body: { stagingId: iconId } })).error!.message,
    ).toBe('stagingId is not a staged attachment upload of this account');
    expect(
      (
        await api.POST('/api/v1/messaging/channels/{channelId}/messages', {
          ...ch(channelId),
          body: { memberId, stagedAttachmentIds: [iconId] },
        })
      ).response.status,
    ).toBe(400);
    expect(
      (await api.POST('/api/v1/messaging/spaces/icon/complete', { body: { stagingId: iconId } })).response.status,
    ).toBe(204);
    expect(
      (await api.POST('/api/v1/messaging/spaces/icon/complete', { body: { stagingId: UNKNOWN_ID } })).response.status,
    ).toBe(400);

    const before = (await api.GET('/api/v1/messaging/spaces')).data!.length;
    const refused = 'iconStagingId is not a completed, unused space-icon upload of this account';
    const theirs = await iconUpload(other.api);
    for (const stagingId of [attachment, await iconUpload(api, false), theirs, UNKNOWN_ID]) {
      const res = await api.POST('/api/v1/messaging/spaces', { body: { name: 'X', iconStagingId: stagingId } });
      expect(res.error, stagingId).toEqual({ code: 'BAD_REQUEST', message: refused });
    }
    expect((await api.GET('/api/v1/messaging/spaces')).data!.length).toBe(before);
    const space = (await api.POST('/api/v1/messaging/spaces', { body: { name: 'X', iconStagingId: iconId } })).data!;
    expect(space.iconUrl).not.toBeNull();
    // Used once: neither another space nor an update can take it again, and the refused update changes nothing.
    expect(
      (await api.POST('/api/v1/messaging/spaces', { body: { name: 'Y', iconStagingId: iconId } })).error!.message,
    ).toBe(refused);
    const again = await api.PATCH('/api/v1/messaging/spaces/{spaceId}', {
      params: { path: { spaceId: space.id } },
      body: { name: 'Z', iconStagingId: iconId },
    });
    expect(again.error!.message).toBe(refused);
    expect((await api.GET('/api/v1/messaging/spaces')).data!.find((x) => x.id === space.id)!.name).toBe('X');
    const theirsSpace = (await other.api.POST('/api/v1/messaging/spaces', { body: { name: 'T' } })).data!;
    const foreign = await api.PATCH('/api/v1/messaging/spaces/{spaceId}', {
      params: { path: { spaceId: theirsSpace.id } },
      body: { iconStagingId: null },
    });
    expect(foreign.response.status).toBe(404);
    expect(JSON.stringify(foreign.error)).not.toContain(theirsSpace.id);
  });

  it('iconStorageRef: only the icon of a live space of the caller, and not together with iconStagingId', async () => {
    const { api, userId } = await server().user();
    const other = await server().user();
    const withIcon = async (client: ApiClient, name: string) => {
      const intent = (
        await client.POST('/api/v1/messaging/spaces/icon/upload-intent', {
          body: { contentType: 'image/png', byteSize: PNG.length },
        })
      ).data!;
      await fetch(absolute(intent.upload.url), {
        method: 'PUT',
        headers: intent.upload.headers,
        body: new Uint8Array(PNG),
      });
      await client.POST('/api/v1/messaging/spaces/icon/complete', { body: { stagingId: intent.stagingId } });
      return (await client.POST('/api/v1/messaging/spaces', { body: { name, iconStagingId: intent.stagingId } })).data!;
    };
    const mine = await withIcon(api, 'Mine');
    const theirs = await withIcon(other.api, 'Theirs');
    const archived = await withIcon(api, 'Archived');
    await api.DELETE('/api/v1/messaging/spaces/{spaceId}', { params: { path: { spaceId: archived.id } } });
    const target = (await api.POST('/api/v1/messaging/spaces', { body: { name: 'Target' } })).data!;
    const objects = async () => (await server().deps.storage!.list(`u/${userId}/messaging/space-icons/`)).sort();
    const stored = await objects();
    const count = (await api.GET('/api/v1/messaging/spaces')).data!.length;

    const refused = { code: 'BAD_REQUEST', message: 'iconStorageRef is not the icon of a live space of this account' };
    // A staging id, another account's icon, an archived space's icon, an unknown id.
    for (const ref of [theirs.iconStorageRef!, archived.iconStorageRef!, UNKNOWN_ID, target.id]) {
      const created = await api.POST('/api/v1/messaging/spaces', { body: { name: 'X', iconStorageRef: ref } });
      expect([created.response.status, created.error], ref).toEqual([400, refused]);
      const patched = await api.PATCH('/api/v1/messaging/spaces/{spaceId}', {
        params: { path: { spaceId: target.id } },
        body: { iconStorageRef: ref },
      });
      expect([patched.response.status, patched.error], ref).toEqual([400, refused]);
      expect(JSON.stringify(created.error)).not.toContain(theirs.id);
    }
    const both = { code: 'BAD_REQUEST', message: 'Send iconStagingId or iconStorageRef, not both' };
    expect(
      (
        await api.POST('/api/v1/messaging/spaces', {
          body: { name: 'X', iconStorageRef: mine.iconStorageRef!, iconStagingId: UNKNOWN_ID },
        })
      ).error,
    ).toEqual(both);
    expect(
      (
        await api.PATCH('/api/v1/messaging/spaces/{spaceId}', {
          params: { path: { spaceId: target.id } },
          body: { iconStorageRef: mine.iconStorageRef!, iconStagingId: null },
        })
      ).error,
    ).toEqual(both);
    for (const bad of ['not-a-uuid', null, 7]) {
      expect(
        (await api.POST('/api/v1/messaging/spaces', { body: { name: 'X', iconStorageRef: bad as never } })).response
          .status,
        String(bad),
      ).toBe(400);
    }
    // Nothing was created, changed or copied.
    expect((await api.GET('/api/v1/messaging/spaces')).data!.length).toBe(count);
    expect(
      (await api.GET('/api/v1/messaging/spaces')).data!.find((x) => x.id === target.id)!.iconStorageRef,
    ).toBeNull();
    expect(await objects()).toEqual(stored);
  });
});

describe('without object storage', () => {
  it('answers 503 PRECONDITION_FAILED on every attachment route and on a send with attachments', async () => {
    const { api } = await servers.none.user();
    const { memberId, channelId } = await setup(api);
    const unavailable = { code: 'PRECONDITION_FAILED', message: 'Object storage is not configured on this server' };
    const intent = await api.POST('/api/v1/messaging/attachments/upload-intent', {
      body: { channelId, fileName: 'a.png', contentType: 'image/png', byteSize: 10 },
    });
    expect([intent.response.status, intent.error]).toEqual([503, unavailable]);
    const complete = await api.POST('/api/v1/messaging/attachments/complete', { body: { stagingId: UNKNOWN_ID } });
    expect([complete.response.status, complete.error]).toEqual([503, unavailable]);
    const access = await api.GET('/api/v1/messaging/attachments/{attachmentId}/access-url', {
      params: { path: { attachmentId: UNKNOWN_ID } },
    });
    expect([access.response.status, access.error]).toEqual([503, unavailable]);
    const send = await api.POST('/api/v1/messaging/channels/{channelId}/messages', {
      ...ch(channelId),
      body: { memberId, stagedAttachmentIds: [UNKNOWN_ID] },
    });
    expect([send.response.status, send.error]).toEqual([503, unavailable]);
    const iconIntent = await api.POST('/api/v1/messaging/spaces/icon/upload-intent', {
      body: { contentType: 'image/png', byteSize: 10 },
    });
    expect([iconIntent.response.status, iconIntent.error]).toEqual([503, unavailable]);
    const iconComplete = await api.POST('/api/v1/messaging/spaces/icon/complete', { body: { stagingId: UNKNOWN_ID } });
    expect([iconComplete.response.status, iconComplete.error]).toEqual([503, unavailable]);
    const withIcon = await api.POST('/api/v1/messaging/spaces', { body: { name: 'I', iconStagingId: UNKNOWN_ID } });
    expect([withIcon.response.status, withIcon.error]).toEqual([503, unavailable]);
    const withRef = await api.POST('/api/v1/messaging/spaces', { body: { name: 'I', iconStorageRef: UNKNOWN_ID } });
    expect([withRef.response.status, withRef.error]).toEqual([503, unavailable]);
    // Text still works, and spaces read without icons.
    expect((await api.GET('/api/v1/messaging/spaces')).data!.map((x) => x.iconUrl)).toEqual([null]);
    expect(
      (
        await api.POST('/api/v1/messaging/channels/{channelId}/messages', {
          ...ch(channelId),
          body: { memberId, content: 'hi' },
        })
      ).response.status,
    ).toBe(201);
  });
});

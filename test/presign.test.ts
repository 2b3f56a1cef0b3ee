/**
 * Presigned uploads and downloads, staging and storage garbage collection, on both backends: a
 * server with the filesystem default (its URLs come back to this server's /storage/v1/objects) and
 * a server on the S3-compatible test server (its URLs go to the bucket, whose proxy verifies SigV4
 * query signatures, expiry included). Every URL is used over real HTTP.
 */
import { randomUUID } from 'node:crypto';
import { readdirSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { migrations } from '../server/db/migrations/index.ts';
import { JobQueue } from '../server/jobs/queue.ts';
import { createLogger } from '../server/logger.ts';
import { collectGarbage } from '../server/storage/gc.ts';
import { defineStorageGc, scheduleStorageGc, STORAGE_GC_QUEUE } from '../server/storage/gcJob.ts';
import { FilesystemObjectStorage, type ObjectStorage, type PresignedRequest } from '../server/storage/index.ts';
import { noteImageKey } from '../server/storage/noteImages.ts';
import {
  completeUpload,
  consumeStagedUpload,
  createUploadIntent,
  stagingKey,
  StagingError,
} from '../server/storage/staging.ts';
import { startLoopbackServer, type LoopbackServer } from './helpers/imageServer.ts';
import { GIF, PNG } from './helpers/images.ts';
import { S3_ACCESS_KEY_ID, S3_SECRET_ACCESS_KEY, startTestS3, type TestS3Server } from './helpers/s3server.ts';
import { TestServer } from './helpers/server.ts';

const BUCKET = 'media';
const log = createLogger('silent');
const HTML = Buffer.from('<!doctype html><html><script>alert(document.cookie)</script></html>');
const PDF = Buffer.concat([Buffer.from('%PDF-1.7\n'), Buffer.alloc(200, 0x20), Buffer.from('\n%%EOF\n')]);

/** The servers' clock: real time plus an offset a test may move (to sign URLs that are already past). */
let offset = 0;
const clock = () => Date.now() + offset;

let s3: TestS3Server;
let images: LoopbackServer;
const servers: Record<'filesystem' | 's3', TestServer> = { filesystem: new TestServer(), s3: new TestServer() };

beforeAll(async () => {
  s3 = await startTestS3([BUCKET]);
  images = await startLoopbackServer({
    '/a.png': { type: 'image/png', body: PNG },
    '/b.gif': { type: 'image/gif', body: GIF },
  });
  const common = { FETCH_ALLOW_PRIVATE: 'true', STORAGE_GC_GRACE_MS: '60000' };
  await servers.filesystem.start({ clock, env: common });
  await servers.s3.start({
    clock,
    env: {
      ...common,
      OBJECT_STORAGE: 's3',
      S3_ENDPOINT: s3.endpoint,
      S3_BUCKET: BUCKET,
      S3_ACCESS_KEY_ID,
      S3_SECRET_ACCESS_KEY,
      S3_FORCE_PATH_STYLE: 'true',
    },
  });
});

afterAll(async () => {
  await servers.filesystem.close();
  await servers.s3.close();
  await images?.close();
  await s3?.close();
});

async function signedInPast<T>(ms: number, fn: () => Promise<T>): Promise<T> {
  offset = -ms;
  try {
    return await fn();
  } finally {
    offset = 0;
  }
}

describe.each(['filesystem', 's3'] as const)('%s backend', (kind) => {
  let server: TestServer;
  let storage: ObjectStorage;
  beforeAll(() => {
    server = servers[kind];
    storage = server.deps.storage!;
    expect(storage.kind).toBe(kind);
  });

  /** Filesystem URLs are relative to this server; S3 ones are absolute. */
  const absolute = (url: string) => (url.startsWith('/') ? server.baseUrl + url : url);
  const send = (req: PresignedRequest, body?: Buffer, headers: Record<string, string> = req.headers) =>
    fetch(absolute(req.url), { method: req.method, headers, ...(body ? { body: new Uint8Array(body) } : {}) });
  const key = (name = 'obj') => `t/${randomUUID()}/${name}`;

  describe('presigned URLs', () => {
    it('round-trips: PUT to the upload URL, GET from the download URL, with type, size and ETag', async () => {
      const k = key();
      const put = await storage.presignPut(k, 'image/png', PNG.length, 60);
      expect(put.method).toBe('PUT');
      expect(put.headers['Content-Type']).toBe('image/png');
      expect(put.expiresAt).toBeGreaterThan(Date.now() + 55_000);
      expect(put.expiresAt).toBeLessThanOrEqual(Date.now() + 60_000);
      if (kind === 'filesystem') expect(put.url).toMatch(/^\/storage\/v1\/objects\/t~[0-9a-f-]{36}~obj\?/);
      else
        expect(put.url).toMatch(
          new RegExp(`^${s3.endpoint}/${BUCKET}/${k}\\?.*X-Amz-SignedHeaders=content-length%3Bcontent-type%3Bhost`),
        );
      const res = await send(put, PNG);
      expect(res.status, await res.clone().text()).toBe(200);
      expect(res.headers.get('etag')).toMatch(/^"[0-9a-f]{32,64}"$/);

      const head = await storage.head(k);
      expect(head).toEqual({
        contentType: 'image/png',
        size: PNG.length,
        etag: expect.stringMatching(/^"[0-9a-f]+"$/),
      });

      const get = await storage.presignGet(k, 60);
      const got = await send(get);
      expect(got.status).toBe(200);
      expect(got.headers.get('content-type')).toBe('image/png');
      expect(Buffer.from(await got.arrayBuffer()).equals(PNG)).toBe(true);
    });

    it('refuses an expired upload URL and an expired download URL with 403', async () => {
      const k = key();
      await storage.put(k, PNG, 'image/png');
      const put = await signedInPast(3_600_000, () => storage.presignPut(key(), 'image/png', PNG.length, 60));
      const get = await signedInPast(3_600_000, () => storage.presignGet(k, 60));
      expect(put.expiresAt).toBeLessThan(Date.now());
      const refusedPut = await send(put, PNG);
      const refusedGet = await send(get);
      expect(refusedPut.status).toBe(403);
      expect(refusedGet.status).toBe(403);
      if (kind === 'filesystem') {
        expect(await refusedPut.json()).toEqual({ code: 'FORBIDDEN', message: 'This URL has expired' });
        expect(await refusedGet.json()).toEqual({ code: 'FORBIDDEN', message: 'This URL has expired' });
      } else {
        expect(await refusedPut.text()).toMatch(/Request has expired/);
      }
    });

    it('refuses a URL whose signature, key, type or size was tampered with (403), and stores nothing', async () => {
      const k = key();
      const put = await storage.presignPut(k, 'image/png', PNG.length, 60);
      const url = new URL(absolute(put.url));
      const sigParam = kind === 'filesystem' ? 'signature' : 'X-Amz-Signature';
      const sig = url.searchParams.get(sigParam)!;
      const tampered: string[] = [];
      const flipped = new URL(url);
      flipped.searchParams.set(sigParam, (sig[0] === 'a' ? 'b' : 'a') + sig.slice(1));
      tampered.push(flipped.toString());
      // The signature of one object does not open another.
      tampered.push(url.toString().replace(k.split('/')[1]!, randomUUID()));
      if (kind === 'filesystem') {
        const bigger = new URL(url);
        bigger.searchParams.set('byteSize', String(PNG.length + 1000));
        tampered.push(bigger.toString());
        const otherType = new URL(url);
        otherType.searchParams.set('contentType', 'image/gif');
        tampered.push(otherType.toString());
      }
      for (const target of tampered) {
        const res = await fetch(target, { method: 'PUT', headers: put.headers, body: new Uint8Array(PNG) });
        expect(res.status, target).toBe(403);
        if (kind === 'filesystem')
          expect(await res.json()).toEqual({ code: 'FORBIDDEN', message: "This URL's signature is not valid" });
        else expect(await res.text()).toMatch(/SignatureDoesNotMatch/);
      }
      expect(await storage.head(k)).toBeNull();
      // A download URL cannot be used to upload.
      const get = await storage.presignGet(k, 60);
      expect(
        (await fetch(absolute(get.url), { method: 'PUT', headers: put.headers, body: new Uint8Array(PNG) })).status,
      ).toBe(kind === 'filesystem' ? 400 : 403);
    });

    it('refuses a body larger than the signed size, and stores nothing', async () => {
      const k = key();
      const put = await storage.presignPut(k, 'image/png', PNG.length, 60);
      const res = await send(put, Buffer.concat([PNG, Buffer.alloc(100)]), { 'Content-Type': 'image/png' });
      // S3 signs Content-Length, so another length is another signature; this server says why.
      expect(res.status).toBe(kind === 'filesystem' ? 413 : 403);
      if (kind === 'filesystem')
        expect(await res.json()).toEqual({
          code: 'PAYLOAD_TOO_LARGE',
          message: `Upload exceeds the signed size of ${PNG.length} bytes`,
        });
      expect(await storage.head(k)).toBeNull();
    });

    it('refuses a Content-Type other than the signed one (403)', async () => {
      const k = key();
      const put = await storage.presignPut(k, 'image/png', GIF.length, 60);
      const res = await send(put, GIF, { 'Content-Type': 'image/gif' });
      expect(res.status).toBe(403);
      expect(await storage.head(k)).toBeNull();
    });

    it('downloads are 404 for a missing object', async () => {
      const res = await send(await storage.presignGet(key('never'), 60));
      expect(res.status).toBe(404);
    });

    it('validates presign arguments', async () => {
      await expect(storage.presignPut('../x', 'image/png', 1, 60)).rejects.toThrow(/Invalid object key/);
      await expect(storage.presignPut(key(), 'image/png; x', 1, 60)).rejects.toThrow(/Invalid content type/);
      await expect(storage.presignPut(key(), 'image/png', -1, 60)).rejects.toThrow(RangeError);
      await expect(storage.presignGet(key(), 0)).rejects.toThrow(RangeError);
      await expect(storage.presignGet(key(), 8 * 86_400)).rejects.toThrow(RangeError);
    });
  });

  describe('staged uploads', () => {
    const intent = async (userId: string, contentType: string, byteSize: number, now = clock()) =>
      createUploadIntent(server.deps.db.knex, storage, {
        userId,
        purpose: 'message-attachment',
        contentType,
        byteSize,
        maxBytes: 10_000,
        now,
        urlTtlSeconds: 60,
        stagingTtlMs: 3_600_000,
        metadata: { fileName: 'x' },
      });

    it('intent → upload → complete → consume moves the object to its final key', async () => {
      const { userId } = await server.user();
      const { stagingId, upload, expiresAt } = await intent(userId, 'application/pdf', PDF.length);
      expect(expiresAt).toBeGreaterThan(clock() + 3_500_000);
      expect((await send(upload, PDF)).status).toBe(200);
      const done = await completeUpload(server.deps.db.knex, storage, { userId, stagingId, now: clock() });
      expect(done).toMatchObject({
        state: 'ready',
        contentType: 'application/pdf',
        byteSize: PDF.length,
        metadata: { fileName: 'x' },
      });
      // Idempotent.
      expect((await completeUpload(server.deps.db.knex, storage, { userId, stagingId, now: clock() })).state).toBe(
        'ready',
      );
      const finalKey = `u/${userId}/attachments/${randomUUID()}`;
      await expect(
        server.deps.db.knex.transaction((trx) =>
          consumeStagedUpload(trx, storage, { userId, stagingId, purpose: 'space-icon', finalKey, now: clock() }),
        ),
      ).rejects.toMatchObject({ reason: 'not_found' });
      const consumed = await server.deps.db.knex.transaction((trx) =>
        consumeStagedUpload(trx, storage, { userId, stagingId, purpose: 'message-attachment', finalKey, now: clock() }),
      );
      expect(consumed.key).toBe(finalKey);
      expect(await storage.head(stagingKey(userId, stagingId))).toBeNull();
      expect((await storage.get(finalKey))?.body.equals(PDF)).toBe(true);
      await expect(
        completeUpload(server.deps.db.knex, storage, { userId, stagingId, now: clock() }),
      ).rejects.toMatchObject({ reason: 'not_found' });
    });

    it("refuses what cannot be verified, what is too big, and another account's intent", async () => {
      const { userId } = await server.user();
      const other = await server.user();
      await expect(intent(userId, 'text/html', 10)).rejects.toMatchObject({ reason: 'unsupported_type' });
      await expect(intent(userId, 'image/svg+xml', 10)).rejects.toMatchObject({ reason: 'unsupported_type' });
      await expect(intent(userId, 'image/png', 10_001)).rejects.toMatchObject({ reason: 'too_large' });
      const { stagingId } = await intent(userId, 'image/png', PNG.length);
      await expect(
        completeUpload(server.deps.db.knex, storage, { userId: other.userId, stagingId, now: clock() }),
      ).rejects.toMatchObject({ reason: 'not_found' });
      await expect(
        completeUpload(server.deps.db.knex, storage, { userId, stagingId, now: clock() }),
      ).rejects.toMatchObject({ reason: 'not_uploaded' });
      await expect(
        server.deps.db.knex.transaction((trx) =>
          consumeStagedUpload(trx, storage, {
            userId,
            stagingId,
            purpose: 'message-attachment',
            finalKey: `u/${userId}/a`,
            now: clock(),
          }),
        ),
      ).rejects.toMatchObject({ reason: 'not_completed' });
    });

    it('bytes that do not match the declared type are refused (415 at the upload here; at complete on S3) and removed', async () => {
      const { userId } = await server.user();
      const { stagingId, upload } = await intent(userId, 'image/png', HTML.length);
      const res = await send(upload, HTML);
      if (kind === 'filesystem') {
        expect(res.status).toBe(415);
        expect(await res.json()).toEqual({
          code: 'UNSUPPORTED_MEDIA_TYPE',
          message: 'The uploaded bytes are not image/png',
        });
        await expect(
          completeUpload(server.deps.db.knex, storage, { userId, stagingId, now: clock() }),
        ).rejects.toMatchObject({ reason: 'not_uploaded' });
      } else {
        // The bucket cannot look at the bytes; complete does.
        expect(res.status).toBe(200);
        const err = await completeUpload(server.deps.db.knex, storage, { userId, stagingId, now: clock() }).catch(
          (e: unknown) => e,
        );
        expect(err).toBeInstanceOf(StagingError);
        expect(err).toMatchObject({ reason: 'type_mismatch', message: 'The uploaded bytes are not image/png' });
      }
      expect(await storage.head(stagingKey(userId, stagingId))).toBeNull();
      // A text file declared as PDF, and a PDF declared as text, fail the same way at complete.
      const pdfAsText = await intent(userId, 'text/plain', PDF.length);
      await storage.put(stagingKey(userId, pdfAsText.stagingId), PDF, 'text/plain');
      await expect(
        completeUpload(server.deps.db.knex, storage, { userId, stagingId: pdfAsText.stagingId, now: clock() }),
      ).rejects.toMatchObject({ reason: 'type_mismatch' });
      const sizeLie = await intent(userId, 'image/png', PNG.length + 5);
      await storage.put(stagingKey(userId, sizeLie.stagingId), PNG, 'image/png');
      await expect(
        completeUpload(server.deps.db.knex, storage, { userId, stagingId: sizeLie.stagingId, now: clock() }),
      ).rejects.toMatchObject({ reason: 'size_mismatch' });
    });
  });

  describe('garbage collection', () => {
    const gc = (now: number) => collectGarbage({ db: server.deps.db.knex, storage, now, log, graceMs: 60_000 });

    it('deletes expired staged uploads (object and row) and orphaned staged objects, and keeps live ones', async () => {
      const { userId } = await server.user();
      const now = clock();
      const make = async (at: number) => {
        const created = await createUploadIntent(server.deps.db.knex, storage, {
          userId,
          purpose: 'message-attachment',
          contentType: 'image/png',
          byteSize: PNG.length,
          maxBytes: 10_000,
          now: at,
          urlTtlSeconds: 60,
          stagingTtlMs: 3_600_000,
        });
        await storage.put(stagingKey(userId, created.stagingId), PNG, 'image/png');
        return created.stagingId;
      };
      const expired = await make(now - 3_700_000);
      const live = await make(now);
      const orphan = stagingKey(randomUUID(), randomUUID());
      await storage.put(orphan, PNG, 'image/png');
      const foreign = `staging/not-a-staging-key/${randomUUID()}/x`;
      await storage.put(foreign, PNG, 'image/png');

      const result = await gc(now);
      expect(result.expiredStagedUploads).toBeGreaterThanOrEqual(1);
      expect(result.orphanedStagedObjects).toBeGreaterThanOrEqual(1);
      expect(result.failures).toBe(0);
      expect(await storage.head(stagingKey(userId, expired))).toBeNull();
      expect(await server.deps.db.knex('staged_uploads').where({ id: expired }).first()).toBeUndefined();
      expect(await storage.head(orphan)).toBeNull();
      expect(await storage.head(stagingKey(userId, live))).not.toBeNull();
      expect(await server.deps.db.knex('staged_uploads').where({ id: live }).first()).toBeDefined();
      expect(await storage.head(foreign)).not.toBeNull();
    });

    it('keeps note images that notes (trashed ones too) reference, and deletes unreferenced ones only after the grace period', async () => {
      const user = await server.user();
      const imageHash = async (content: string) => {
        const created = await user.api.POST('/api/v1/entries', { body: { content } });
        expect(created.response.status, JSON.stringify(created.error)).toBe(201);
        const entry = await user.api.GET('/api/v1/entries/{entryId}', {
          params: { path: { entryId: created.data!.id } },
        });
        return { id: created.data!.id, sha: /\/api\/v1\/entry-images\/([0-9a-f]{64})/.exec(entry.data!.content)![1]! };
      };
      const kept = await imageHash(`![a](${images.url('/a.png')})`);
      const trashed = await imageHash(`![b](${images.url('/b.gif')})`);
      expect(trashed.sha).not.toBe(kept.sha);
      const registered = await server.deps.db.knex('note_images').where({ user_id: user.userId }).pluck('sha256');
      expect(registered.sort()).toEqual([kept.sha, trashed.sha].sort());

      // Trashed (restorable) notes still hold their image.
      expect(
        (await user.api.DELETE('/api/v1/entries/{entryId}', { params: { path: { entryId: trashed.id } } })).response
          .status,
      ).toBe(204);
      await gc(clock() + 3_600_000);
      for (const sha of [kept.sha, trashed.sha])
        expect(await storage.head(noteImageKey(user.userId, sha))).not.toBeNull();

      // Purged: unreferenced, but within the grace period of its last store it stays.
      expect(
        (
          await user.api.DELETE('/api/v1/entries/{entryId}', {
            params: { path: { entryId: trashed.id }, query: { permanent: 'true' } },
          })
        ).response.status,
      ).toBe(204);
      await gc(clock() + 30_000);
      expect(await storage.head(noteImageKey(user.userId, trashed.sha))).not.toBeNull();

      const result = await gc(clock() + 61_000);
      expect(result.noteImages).toBeGreaterThanOrEqual(1);
      expect(await storage.head(noteImageKey(user.userId, trashed.sha))).toBeNull();
      expect(await storage.head(noteImageKey(user.userId, kept.sha))).not.toBeNull();
      expect(await server.deps.db.knex('note_images').where({ user_id: user.userId }).pluck('sha256')).toEqual([
        kept.sha,
      ]);
      const served = await server.fetch(`/api/v1/entry-images/${trashed.sha}`, {
        headers: { Authorization: `Bearer ${user.apiKey}` },
      });
      expect(served.status).toBe(404);
      await served.arrayBuffer();

      // Re-hosting the same image again refreshes its grace period and registration.
      const again = await imageHash(`![b](${images.url('/b.gif')})`);
      expect(again.sha).toBe(trashed.sha);
      await gc(clock() + 61_000);
      expect(await storage.head(noteImageKey(user.userId, again.sha))).not.toBeNull();
    });

    it('runs as a scheduled job of the durable queue', async () => {
      const { userId } = await server.user();
      const orphan = stagingKey(userId, randomUUID());
      await storage.put(orphan, PNG, 'image/png');
      // The server's own queue, as runtime.ts defines it; its first slot is due now here.
      const queue = server.deps.jobs;
      await scheduleStorageGc(queue, { enabled: true, intervalMs: 3_600_000, firstRunAfter: clock() });
      const schedule = await server.deps.db.knex('job_schedules').where({ name: STORAGE_GC_QUEUE }).first();
      expect(Number(schedule.every_ms)).toBe(3_600_000);
      expect(await queue.runDue()).toBeGreaterThanOrEqual(1);
      expect(await storage.head(orphan)).toBeNull();
      // Interval 0 (or no storage) removes the schedule.
      await scheduleStorageGc(queue, { enabled: true, intervalMs: 0, firstRunAfter: clock() });
      expect(await server.deps.db.knex('job_schedules').where({ name: STORAGE_GC_QUEUE }).first()).toBeUndefined();
      // A queue of another process defines the same handler.
      const other = new JobQueue(server.deps.db.knex, { clock, logger: log });
      defineStorageGc(other, { db: server.deps.db.knex, storage, clock, logger: log, graceMs: 60_000 });
      expect(() =>
        defineStorageGc(other, { db: server.deps.db.knex, storage, clock, logger: log, graceMs: 60_000 }),
      ).toThrow(/already defined/);
    });
  });
});

describe('filesystem upload route specifics', () => {
  const server = () => servers.filesystem;

  /** A chunked PUT (no Content-Length), so only the byte counter can notice the excess. */
  function chunkedPut(
    path: string,
    contentType: string,
    chunks: Buffer[],
    stopOnAnswer = true,
  ): Promise<{ status: number; body: string }> {
    return new Promise((resolve, reject) => {
      const url = new URL(server().baseUrl + path);
      const req = httpRequest(
        {
          host: url.hostname,
          port: url.port,
          path: `${url.pathname}${url.search}`,
          method: 'PUT',
          headers: { 'Content-Type': contentType, 'Transfer-Encoding': 'chunked' },
        },
        (res) => {
          let body = '';
          res.on('data', (c: Buffer) => (body += c.toString()));
          res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
        },
      );
      // Once the server has answered it may close the connection while chunks are still being written.
      let answered = false;
      req.on('response', () => (answered = true));
      req.on('error', (err) => {
        if (!answered) reject(err);
      });
      (async () => {
        for (const chunk of chunks) {
          if (req.destroyed || (answered && stopOnAnswer)) break;
          req.write(chunk);
          await new Promise((r) => setTimeout(r, 5));
        }
        req.end();
      })().catch(reject);
    });
  }

  const tempFiles = (root: string) => readdirSync(root, { recursive: true }).filter((f) => String(f).endsWith('.tmp'));

  it('stops a chunked body as soon as it passes the signed size: 413, no object, no temp file', async () => {
    const storage = server().deps.storage as FilesystemObjectStorage;
    const k = `t/${randomUUID()}/chunked`;
    const put = await storage.presignPut(k, 'image/png', PNG.length + 10, 60);
    // 4 MiB more than signed, in 64 KiB chunks: the answer comes at the first chunk past the limit.
    const res = await chunkedPut(put.url, 'image/png', [
      PNG,
      ...Array.from({ length: 64 }, () => Buffer.alloc(64 * 1024)),
    ]);
    expect(res.status).toBe(413);
    expect(JSON.parse(res.body)).toEqual({
      code: 'PAYLOAD_TOO_LARGE',
      message: `Upload exceeds the signed size of ${PNG.length + 10} bytes`,
    });
    expect(await storage.head(k)).toBeNull();
    expect(tempFiles(storage.root)).toEqual([]);
    // A client that ignores the early answer and writes its whole body still gets to read it.
    const stubborn = await chunkedPut(
      put.url,
      'image/png',
      [PNG, ...Array.from({ length: 32 }, () => Buffer.alloc(64 * 1024))],
      false,
    );
    expect(stubborn.status).toBe(413);
    expect(await storage.head(k)).toBeNull();
  });

  it('a chunked body shorter than the signed size is a 400 and stores nothing; an exact one is stored', async () => {
    const storage = server().deps.storage as FilesystemObjectStorage;
    const k = `t/${randomUUID()}/short`;
    const short = await storage.presignPut(k, 'image/png', PNG.length + 10, 60);
    const res = await chunkedPut(short.url, 'image/png', [PNG]);
    expect(res.status).toBe(400);
    expect(JSON.parse(res.body).message).toBe(
      `Upload ended after ${PNG.length} of the ${PNG.length + 10} signed bytes`,
    );
    expect(await storage.head(k)).toBeNull();
    const exact = await storage.presignPut(k, 'image/png', PNG.length, 60);
    expect((await chunkedPut(exact.url, 'image/png', [PNG.subarray(0, 10), PNG.subarray(10)])).status).toBe(200);
    expect((await storage.get(k))?.body.equals(PNG)).toBe(true);
    expect(tempFiles(storage.root)).toEqual([]);
  });

  it('answers HEAD, marks non-image types as attachments and never lets browsers sniff', async () => {
    const storage = server().deps.storage as FilesystemObjectStorage;
    const k = `t/${randomUUID()}/doc`;
    await storage.put(k, PDF, 'application/pdf');
    const get = await storage.presignGet(k, 60);
    const res = await server().fetch(get.url);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('application/pdf');
    expect(res.headers.get('content-length')).toBe(String(PDF.length));
    expect(res.headers.get('content-disposition')).toBe('attachment');
    expect(res.headers.get('x-content-type-options')).toBe('nosniff');
    expect(Buffer.from(await res.arrayBuffer()).equals(PDF)).toBe(true);
    const head = await server().fetch(get.url, { method: 'HEAD' });
    expect(head.status).toBe(200);
    expect(head.headers.get('content-length')).toBe(String(PDF.length));
    expect(head.headers.get('etag')).toBe(res.headers.get('etag'));
  });

  it('refuses malformed signed-URL parameters with 400 and unknown ones too', async () => {
    const storage = server().deps.storage as FilesystemObjectStorage;
    const get = await storage.presignGet(`t/${randomUUID()}/x`, 60);
    for (const broken of [
      get.url.replace(/signature=[^&]+/, 'signature=short'),
      get.url.replace(/expires=\d+/, 'expires=soon'),
      `${get.url}&extra=1`,
      get.url.replace(/&?signature=[^&]+/, ''),
    ]) {
      const res = await server().fetch(broken);
      expect(res.status, broken).toBe(400);
      expect((await res.json()).code).toBe('BAD_REQUEST');
    }
  });

  it('signs absolute URLs under STORAGE_PUBLIC_URL; servers sharing STORAGE_SIGNING_KEY accept the same URLs', async () => {
    const s = await new TestServer().start({
      env: { STORAGE_PUBLIC_URL: 'https://api.example.org/base/', STORAGE_SIGNING_KEY: 'k'.repeat(32) },
    });
    try {
      const put = await s.deps.storage!.presignPut('a/b', 'image/png', 1, 60);
      expect(put.url).toMatch(
        /^https:\/\/api\.example\.org\/base\/storage\/v1\/objects\/a~b\?expires=\d+&contentType=image%2Fpng&byteSize=1&signature=[A-Za-z0-9_-]{43}$/,
      );
      // The same key signs the same URL: another server with it accepts this one's URLs.
      const other = new FilesystemObjectStorage('/nonexistent', {
        signingKey: Buffer.from('k'.repeat(32)),
        publicBaseUrl: 'https://api.example.org/base',
      });
      const query = new URL(put.url).searchParams;
      expect(() =>
        other.verifySignedUpload(
          {
            key: 'a/b',
            expires: Number(query.get('expires')),
            contentType: 'image/png',
            byteSize: 1,
            signature: query.get('signature')!,
          },
          Date.now(),
        ),
      ).not.toThrow();
    } finally {
      await s.close();
    }
  });
});

describe('migration 0010', () => {
  it('registers the images that existing notes (trashed ones too) link to, so they are collected once unreferenced', async () => {
    const server = servers.filesystem;
    const db = server.deps.db.knex;
    const user = await server.user();
    const shaA = 'a'.repeat(64);
    const shaB = 'b'.repeat(64);
    const created = await user.api.POST('/api/v1/entries', {
      body: {
        content: `![x](/api/v1/entry-images/${shaA}) and ![y](/api/v1/entry-images/${shaB}) twice ![z](/api/v1/entry-images/${shaA})`,
      },
    });
    expect(created.response.status).toBe(201);
    await user.api.DELETE('/api/v1/entries/{entryId}', { params: { path: { entryId: created.data!.id } } });
    // As before the migration: tables gone, then created and filled from the notes.
    const storageMigration = migrations.find((m) => m.name === '0010_storage')!;
    await storageMigration.down(db);
    const before = Date.now();
    await storageMigration.up(db);
    const rows = await db('note_images').where({ user_id: user.userId }).orderBy('sha256');
    expect(rows.map((r: { sha256: string }) => r.sha256)).toEqual([shaA, shaB]);
    for (const row of rows) expect(Number(row.stored_at)).toBeGreaterThanOrEqual(before - 1000);
  });
});

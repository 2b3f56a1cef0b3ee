/**
 * Object storage: one behavioural suite, run against the filesystem backend (temp dir) and against
 * a real S3-compatible server (s3rver behind a SigV4-verifying proxy), plus config and image sniffing.
 */
import { createHash, randomUUID } from 'node:crypto';
import { existsSync, mkdtempSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConfigError, loadConfig, type S3Config } from '../server/config.ts';
import {
  ALLOWED_IMAGE_TYPES,
  createObjectStorage,
  deletePrefix,
  FilesystemObjectStorage,
  InvalidObjectKeyError,
  ObjectStorageError,
  S3ObjectStorage,
  keyToUrlSegment,
  resolveSigningKey,
  SignedUrlError,
  sniffContentType,
  sniffImageType,
  UploadRejectedError,
  urlSegmentToKey,
  VERIFIABLE_CONTENT_TYPES,
  contentMatchesType,
  type ObjectStorage,
} from '../server/storage/index.ts';
import { verifySigV4 } from './helpers/sigv4.ts';
import {
  loopbackFetch,
  S3_ACCESS_KEY_ID,
  S3_SECRET_ACCESS_KEY,
  startTestS3,
  type TestS3Server,
} from './helpers/s3server.ts';

const BUCKET = 'media';
const sha256Etag = (body: Buffer) => `"${createHash('sha256').update(body).digest('hex')}"`;
const avatarKey = (body: Buffer) =>
  `u/${randomUUID()}/members/${randomUUID()}/avatar/${createHash('sha256').update(body).digest('hex')}`;
const uniqueKey = (name = 'obj') => `t/${randomUUID()}/${name}`;
const buffer = async (stream: AsyncIterable<unknown>) => {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
};

const fsRoot = mkdtempSync(join(tmpdir(), 'ada-objects-'));
let s3: TestS3Server;

beforeAll(async () => {
  s3 = await startTestS3([BUCKET]);
});
afterAll(async () => {
  await s3?.close();
  rmSync(fsRoot, { recursive: true, force: true });
});

function s3Config(overrides: Partial<S3Config> = {}): S3Config {
  return {
    endpoint: s3.endpoint,
    region: 'us-east-1',
    bucket: BUCKET,
    accessKeyId: S3_ACCESS_KEY_ID,
    secretAccessKey: S3_SECRET_ACCESS_KEY,
    forcePathStyle: true,
    ...overrides,
  };
}

const backends: Array<[string, () => ObjectStorage]> = [
  ['filesystem', () => new FilesystemObjectStorage(fsRoot)],
  ['s3 (path-style)', () => new S3ObjectStorage(s3Config(), { retries: 0 })],
  [
    's3 (virtual-host)',
    () =>
      new S3ObjectStorage(s3Config({ endpoint: s3.vhostEndpoint, forcePathStyle: false }), {
        retries: 0,
        fetch: loopbackFetch(s3.port),
      }),
  ],
];

const BAD_KEYS = [
  '',
  '/u/1/avatar',
  'u//avatar',
  'u/1/',
  '..',
  '../escape',
  'u/../../escape',
  'u/./avatar',
  '.',
  'u/a..b',
  'u/with space',
  'u\\windows',
  'u/ümlaut',
  'u/%2e%2e',
  'u/a?b',
  'u/a#b',
  'u/a~obj',
  `u/${'x'.repeat(1030)}`,
];

describe.each(backends)('%s backend', (name, make) => {
  let storage: ObjectStorage;
  beforeAll(() => {
    storage = make();
  });

  it('reports its kind', () => {
    expect(storage.kind).toBe(name.startsWith('s3') ? 's3' : 'filesystem');
  });

  it('stores and returns the bytes, the content type and a sha256 ETag', async () => {
    const body = Buffer.from('first avatar bytes');
    const key = avatarKey(body);
    const put = await storage.put(key, body, 'image/png');
    expect(put.etag).toBe(sha256Etag(body));
    const got = await storage.get(key);
    expect(got).not.toBeNull();
    expect(got!.body.equals(body)).toBe(true);
    expect(got!.contentType).toBe('image/png');
    expect(got!.etag).toBe(put.etag);
  });

  it('round-trips binary content exactly, including newlines, NUL bytes and an empty body', async () => {
    const all = Buffer.from(Array.from({ length: 512 }, (_, i) => (i * 7 + 10) % 256));
    const withLeadingNewline = Buffer.concat([Buffer.from('\n\n{"contentType":"text/html"}\n'), all]);
    for (const body of [all, withLeadingNewline, Buffer.alloc(0)]) {
      const key = uniqueKey();
      await storage.put(key, body, 'application/octet-stream');
      const got = await storage.get(key);
      expect(got?.body.equals(body)).toBe(true);
      expect(got?.etag).toBe(sha256Etag(body));
    }
  });

  it('round-trips a 1 MiB object', async () => {
    const body = Buffer.alloc(1_048_576, 0xab);
    body.write('end', body.length - 3);
    const key = uniqueKey('big');
    await storage.put(key, body, 'image/jpeg');
    const got = await storage.get(key);
    expect(got?.body.length).toBe(body.length);
    expect(got?.body.equals(body)).toBe(true);
  });

  it('keeps each content type as given', async () => {
    for (const type of ['image/jpeg', 'image/webp', 'image/gif', 'application/octet-stream', 'image/svg+xml']) {
      const key = uniqueKey();
      await storage.put(key, Buffer.from(type), type);
      expect((await storage.get(key))?.contentType).toBe(type);
    }
  });

  it('refuses content types that are not a bare media type', async () => {
    for (const type of ['', 'png', 'image/png\r\nx-injected: 1', 'image/png; charset=x', 'image /png']) {
      await expect(storage.put(uniqueKey(), Buffer.from('x'), type)).rejects.toThrow(/Invalid content type/);
    }
  });

  it('overwrites: the last put wins for bytes, content type and ETag', async () => {
    const key = uniqueKey('banner');
    const first = Buffer.from('version one');
    const second = Buffer.from('version two, longer than the first');
    const a = await storage.put(key, first, 'image/png');
    const b = await storage.put(key, second, 'image/webp');
    expect(b.etag).not.toBe(a.etag);
    const got = await storage.get(key);
    expect(got?.body.equals(second)).toBe(true);
    expect(got?.contentType).toBe('image/webp');
    expect(got?.etag).toBe(b.etag);
  });

  it('deletes, and deleting again or deleting a never-written key is fine', async () => {
    const key = uniqueKey();
    await storage.put(key, Buffer.from('to be deleted'), 'image/gif');
    await storage.delete(key);
    expect(await storage.get(key)).toBeNull();
    await expect(storage.delete(key)).resolves.toBeUndefined();
    await expect(storage.delete(uniqueKey('never'))).resolves.toBeUndefined();
  });

  it('returns null for a missing key, also under a missing prefix', async () => {
    expect(await storage.get(uniqueKey('missing'))).toBeNull();
    expect(await storage.get(`nothing-here-${randomUUID()}/deep/key`)).toBeNull();
  });

  it('gives equal content the same ETag at any key and after re-upload, and different content a different one', async () => {
    const body = Buffer.from('same bytes');
    const k1 = uniqueKey();
    const k2 = uniqueKey();
    const e1 = (await storage.put(k1, body, 'image/png')).etag;
    const e2 = (await storage.put(k2, body, 'image/jpeg')).etag;
    const e3 = (await storage.put(k1, Buffer.from(body), 'image/png')).etag;
    expect(e2).toBe(e1);
    expect(e3).toBe(e1);
    expect((await storage.get(k2))?.etag).toBe(e1);
    expect((await storage.put(uniqueKey(), Buffer.from('same bytes!'), 'image/png')).etag).not.toBe(e1);
  });

  it('holds a key and a key below it side by side (a and a/b)', async () => {
    const base = uniqueKey('a');
    await storage.put(base, Buffer.from('parent'), 'image/png');
    await storage.put(`${base}/b`, Buffer.from('child'), 'image/png');
    expect((await storage.get(base))?.body.toString()).toBe('parent');
    expect((await storage.get(`${base}/b`))?.body.toString()).toBe('child');
  });

  it('lists every key under a folder prefix (nested ones too, not those of a sibling prefix), and deletePrefix empties it', async () => {
    const root = uniqueKey('owner');
    const keys = [
      `${root}/x`,
      `${root}/members/m1/avatar/d1`,
      `${root}/members/m1/banner/d2`,
      `${root}/entry-images/abc`,
    ];
    for (const key of keys) await storage.put(key, Buffer.from(key), 'image/png');
    await storage.put(`${root}x/other`, Buffer.from('sibling'), 'image/png');
    expect((await storage.list(`${root}/`)).sort()).toEqual([...keys].sort());
    expect((await storage.list(`${root}/members/`)).sort()).toEqual(keys.slice(1, 3).sort());
    expect(await storage.list(`${uniqueKey('nobody')}/`)).toEqual([]);
    expect(await deletePrefix(storage, `${root}/`)).toBe(4);
    expect(await storage.list(`${root}/`)).toEqual([]);
    for (const key of keys) expect(await storage.get(key)).toBeNull();
    expect((await storage.get(`${root}x/other`))?.body.toString()).toBe('sibling');
    for (const bad of ['no-slash', '/abs/', '../up/', 'a//'])
      await expect(storage.list(bad)).rejects.toBeInstanceOf(InvalidObjectKeyError);
  });

  it('heads an object: type, size and the ETag put returned; null when missing', async () => {
    const body = Buffer.from('head me, not my bytes');
    const key = uniqueKey('head');
    const { etag } = await storage.put(key, body, 'image/webp');
    expect(await storage.head(key)).toEqual({ contentType: 'image/webp', size: body.length, etag });
    expect(await storage.head(uniqueKey('missing'))).toBeNull();
    await storage.put(key, Buffer.alloc(0), 'image/png');
    expect(await storage.head(key)).toEqual({ contentType: 'image/png', size: 0, etag: sha256Etag(Buffer.alloc(0)) });
  });

  it('streams an object, whole or one byte range, without buffering it', async () => {
    const body = Buffer.from(Array.from({ length: 300_000 }, (_, i) => (i * 31) % 256));
    const key = uniqueKey('stream');
    const { etag } = await storage.put(key, body, 'application/octet-stream');
    const whole = await storage.getStream(key);
    expect(whole).toMatchObject({ contentType: 'application/octet-stream', size: body.length, etag });
    expect((await buffer(whole!.body)).equals(body)).toBe(true);
    const part = await storage.getStream(key, { range: { start: 10, end: 99 } });
    expect(part?.size).toBe(body.length);
    expect((await buffer(part!.body)).equals(body.subarray(10, 100))).toBe(true);
    const pastEnd = await storage.getStream(key, { range: { start: body.length - 5, end: body.length + 100 } });
    expect((await buffer(pastEnd!.body)).equals(body.subarray(body.length - 5))).toBe(true);
    expect(await storage.getStream(uniqueKey('missing'))).toBeNull();
    const emptyKey = uniqueKey('empty');
    await storage.put(emptyKey, Buffer.alloc(0), 'text/plain');
    // s3rver never answers a range request on an empty object (S3 answers 416, handled as empty).
    const empty = await storage.getStream(emptyKey, name === 'filesystem' ? { range: { start: 0, end: 511 } } : {});
    expect(empty?.size).toBe(0);
    expect((await buffer(empty!.body)).length).toBe(0);
  });

  it('uploads a streamed body of a known size, opened again for each pass, with the sha256 ETag put gives', async () => {
    const body = Buffer.from(Array.from({ length: 1_500_000 }, (_, i) => (i * 7) % 251));
    const key = uniqueKey('upload');
    let opened = 0;
    // In chunks, as a stream from a file arrives.
    const open = () => {
      opened++;
      return Readable.from(Array.from({ length: 23 }, (_, i) => body.subarray(i * 65_536, (i + 1) * 65_536)));
    };
    const { etag } = await storage.upload(key, open, 'application/x-tar', body.length);
    expect(etag).toBe(sha256Etag(body));
    expect(opened).toBe(name === 'filesystem' ? 1 : 2);
    expect(await storage.head(key)).toEqual({ contentType: 'application/x-tar', size: body.length, etag });
    expect((await storage.get(key))!.body.equals(body)).toBe(true);
    await expect(storage.upload(uniqueKey('short'), open, 'application/x-tar', body.length + 1)).rejects.toThrow(
      ObjectStorageError,
    );
  });

  it('moves an object with its type; a repeated move is done already; moving nothing is false', async () => {
    const body = Buffer.from('moving house');
    const from = uniqueKey('from');
    const to = `${uniqueKey('to')}/deeper/key`;
    const { etag } = await storage.put(from, body, 'image/gif');
    expect(await storage.move(from, to)).toBe(true);
    expect(await storage.get(from)).toBeNull();
    expect(await storage.get(to)).toMatchObject({ contentType: 'image/gif', etag });
    expect((await storage.head(to))?.etag).toBe(etag);
    expect(await storage.move(from, to)).toBe(true);
    expect(await storage.move(uniqueKey('none'), uniqueKey('none'))).toBe(false);
  });

  it.each(BAD_KEYS)('refuses the bad key %j on put, get and delete', async (key) => {
    await expect(storage.put(key, Buffer.from('x'), 'image/png')).rejects.toBeInstanceOf(InvalidObjectKeyError);
    await expect(storage.get(key)).rejects.toBeInstanceOf(InvalidObjectKeyError);
    await expect(storage.delete(key)).rejects.toBeInstanceOf(InvalidObjectKeyError);
  });
});

describe('filesystem backend specifics', () => {
  it('never writes outside its root for an escaping key', async () => {
    const root = mkdtempSync(join(tmpdir(), 'ada-objects-jail-'));
    try {
      const storage = new FilesystemObjectStorage(join(root, 'inner'));
      await expect(storage.put('../escape', Buffer.from('x'), 'image/png')).rejects.toBeInstanceOf(
        InvalidObjectKeyError,
      );
      expect(readdirSync(root)).toEqual([]);
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  });

  it('leaves no temporary files behind and keeps objects across instances', async () => {
    const root = mkdtempSync(join(tmpdir(), 'ada-objects-persist-'));
    try {
      const first = new FilesystemObjectStorage(root);
      const body = Buffer.from('persisted');
      await first.put('u/1/avatar/x', body, 'image/png');
      await first.put('u/1/avatar/x', body, 'image/png');
      const files = readdirSync(root, { recursive: true, withFileTypes: true }).filter((d) => d.isFile());
      expect(files.map((f) => f.name)).toEqual(['x~obj']);
      const again = await new FilesystemObjectStorage(root).get('u/1/avatar/x');
      expect(again?.body.equals(body)).toBe(true);
      expect(again?.contentType).toBe('image/png');
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  });

  it('concurrent overwrites of one key leave one complete version, never a mix', async () => {
    const storage = new FilesystemObjectStorage(fsRoot);
    const key = uniqueKey('race');
    const versions = Array.from({ length: 12 }, (_, i) => Buffer.alloc(64 * 1024 + i, i + 1));
    await Promise.all(versions.map((v, i) => storage.put(key, v, i % 2 ? 'image/png' : 'image/gif')));
    const got = await storage.get(key);
    const winner = versions.findIndex((v) => got?.body.equals(v));
    expect(winner).toBeGreaterThanOrEqual(0);
    expect(got?.contentType).toBe(winner % 2 ? 'image/png' : 'image/gif');
  });

  it('reads objects written before the hash was recorded (header with the content type only)', async () => {
    const root = mkdtempSync(join(tmpdir(), 'ada-objects-legacy-'));
    try {
      const body = Buffer.from('written by the first version');
      writeFileSync(join(root, 'old~obj'), Buffer.concat([Buffer.from('ADOBJ1\n{"contentType":"image/png"}\n'), body]));
      const storage = new FilesystemObjectStorage(root);
      expect(await storage.head('old')).toEqual({
        contentType: 'image/png',
        size: body.length,
        etag: sha256Etag(body),
      });
      expect((await buffer((await storage.getStream('old'))!.body)).equals(body)).toBe(true);
      expect((await storage.get('old'))?.body.equals(body)).toBe(true);
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  });

  it('putStream writes exactly the signed size and refuses more, less, or bytes the verifier rejects, leaving nothing', async () => {
    const root = mkdtempSync(join(tmpdir(), 'ada-objects-stream-'));
    try {
      const storage = new FilesystemObjectStorage(root);
      const body = Buffer.alloc(200_000, 7);
      const chunks = (b: Buffer) => Readable.from([b.subarray(0, 1000), b.subarray(1000)]);
      const stored = await storage.putStream('s/ok', chunks(body), 'application/octet-stream', {
        byteSize: body.length,
      });
      expect(stored).toEqual({ etag: sha256Etag(body), size: body.length });
      expect(await storage.head('s/ok')).toEqual({
        contentType: 'application/octet-stream',
        size: body.length,
        etag: sha256Etag(body),
      });
      expect((await storage.get('s/ok'))?.body.equals(body)).toBe(true);
      await expect(
        storage.putStream('s/big', chunks(body), 'image/png', { byteSize: body.length - 1 }),
      ).rejects.toMatchObject({ reason: 'too_large' });
      await expect(
        storage.putStream('s/short', chunks(body), 'image/png', { byteSize: body.length + 1 }),
      ).rejects.toMatchObject({ reason: 'too_short' });
      await expect(
        storage.putStream('s/html', chunks(body), 'image/png', { byteSize: body.length, verifyHead: () => false }),
      ).rejects.toBeInstanceOf(UploadRejectedError);
      expect(
        readdirSync(root, { recursive: true })
          .map(String)
          .filter((f) => f.endsWith('~obj') || f.endsWith('.tmp')),
      ).toEqual(['s/ok~obj']);
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  });

  it('reports a corrupt object file as a storage error, not as data', async () => {
    const root = mkdtempSync(join(tmpdir(), 'ada-objects-corrupt-'));
    try {
      writeFileSync(join(root, 'junk~obj'), 'not an object file');
      await expect(new FilesystemObjectStorage(root).get('junk')).rejects.toBeInstanceOf(ObjectStorageError);
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  });
});

describe('s3 backend specifics', () => {
  it('addresses path-style as /<bucket>/<key> and virtual-host style as <bucket>.<host>/<key>', async () => {
    const key = uniqueKey('styles');
    const pathStyle = new S3ObjectStorage(s3Config(), { retries: 0 });
    const vhost = new S3ObjectStorage(s3Config({ endpoint: s3.vhostEndpoint, forcePathStyle: false }), {
      retries: 0,
      fetch: loopbackFetch(s3.port),
    });
    expect(pathStyle.objectUrl(key)).toBe(`${s3.endpoint}/${BUCKET}/${key}`);
    expect(vhost.objectUrl(key)).toBe(`http://${BUCKET}.s3.test.invalid:${s3.port}/${key}`);

    s3.seen.length = 0;
    await vhost.put(key, Buffer.from('written virtual-host style'), 'image/png');
    // Same object, read the other way: both styles address one bucket.
    expect((await pathStyle.get(key))?.body.toString()).toBe('written virtual-host style');
    expect(s3.seen).toEqual([
      { method: 'PUT', host: `${BUCKET}.s3.test.invalid:${s3.port}`, url: `/${key}` },
      { method: 'GET', host: `127.0.0.1:${s3.port}`, url: `/${BUCKET}/${key}` },
    ]);
  });

  it('signs requests: a wrong secret is refused by the server', async () => {
    const wrong = new S3ObjectStorage(s3Config({ secretAccessKey: 'not-the-secret' }), { retries: 0 });
    await expect(wrong.put(uniqueKey(), Buffer.from('x'), 'image/png')).rejects.toThrow(/SignatureDoesNotMatch/);
    await expect(wrong.get(uniqueKey())).rejects.toThrow(/SignatureDoesNotMatch/);
  });

  it('reports a missing bucket as an error instead of a missing object', async () => {
    const storage = new S3ObjectStorage(s3Config({ bucket: 'no-such-bucket' }), { retries: 0 });
    await expect(storage.get(uniqueKey())).rejects.toThrow(/does not exist/);
    await expect(storage.put(uniqueKey(), Buffer.from('x'), 'image/png')).rejects.toBeInstanceOf(ObjectStorageError);
  });

  it('gives the same ETag as the filesystem backend for the same bytes', async () => {
    const body = Buffer.from('identical across backends');
    const fromFs = await new FilesystemObjectStorage(fsRoot).put(uniqueKey(), body, 'image/png');
    const key = uniqueKey();
    const fromS3 = await new S3ObjectStorage(s3Config(), { retries: 0 }).put(key, body, 'image/png');
    expect(fromS3.etag).toBe(fromFs.etag);
    expect((await new S3ObjectStorage(s3Config()).get(key))?.etag).toBe(fromFs.etag);
  });

  it('the SigV4 verifier in front of s3rver agrees with the AWS documentation example', () => {
    // "GET Object" example from the AWS S3 SigV4 reference; anchors the verifier to AWS, not to our signer.
    const headers = {
      host: 'examplebucket.s3.amazonaws.com',
      range: 'bytes=0-9',
      'x-amz-content-sha256': 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855',
      'x-amz-date': '20130524T000000Z',
      authorization:
        'AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request,SignedHeaders=host;range;x-amz-content-sha256;x-amz-date,Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41',
    };
    const secrets = new Map([['AKIAIOSFODNN7EXAMPLE', 'wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY']]);
    expect(verifySigV4({ method: 'GET', url: '/test.txt', headers }, Buffer.alloc(0), secrets).ok).toBe(true);
    expect(verifySigV4({ method: 'GET', url: '/test2.txt', headers }, Buffer.alloc(0), secrets).ok).toBe(false);
  });
});

describe('presigned S3 URLs against the verifier', () => {
  it('the query-signature verifier agrees with the AWS documentation example, expiry included', () => {
    // "Example: a presigned GET" from the AWS S3 SigV4 query-string reference.
    const url =
      '/test.txt?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIAIOSFODNN7EXAMPLE%2F20130524%2Fus-east-1%2Fs3%2Faws4_request&X-Amz-Date=20130524T000000Z&X-Amz-Expires=86400&X-Amz-SignedHeaders=host&X-Amz-Signature=aeeed9bbccd4d02ee5c0109b86d86835f995330da4c265957d157751f604d404';
    const headers = { host: 'examplebucket.s3.amazonaws.com' };
    const secrets = new Map([['AKIAIOSFODNN7EXAMPLE', 'wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY']]);
    const signedAt = Date.UTC(2013, 4, 24);
    expect(verifySigV4({ method: 'GET', url, headers }, Buffer.alloc(0), secrets, signedAt + 3_600_000)).toEqual({
      ok: true,
      accessKeyId: 'AKIAIOSFODNN7EXAMPLE',
    });
    expect(verifySigV4({ method: 'GET', url, headers }, Buffer.alloc(0), secrets, signedAt + 86_401_000)).toMatchObject(
      { ok: false, message: 'Request has expired' },
    );
    expect(verifySigV4({ method: 'PUT', url, headers }, Buffer.alloc(0), secrets, signedAt)).toMatchObject({
      ok: false,
      code: 'SignatureDoesNotMatch',
    });
    expect(
      verifySigV4(
        { method: 'GET', url: url.replace('test.txt', 'other.txt'), headers },
        Buffer.alloc(0),
        secrets,
        signedAt,
      ),
    ).toMatchObject({ ok: false, code: 'SignatureDoesNotMatch' });
  });

  it('a presigned PUT signs Content-Type and Content-Length, and expires X-Amz-Expires seconds after its X-Amz-Date', async () => {
    const now = Date.UTC(2030, 0, 2, 3, 4, 5, 678);
    const storage = new S3ObjectStorage(s3Config(), { retries: 0, clock: () => now });
    const put = await storage.presignPut('a/b', 'image/png', 1234, 600);
    const url = new URL(put.url);
    expect(url.pathname).toBe(`/${BUCKET}/a/b`);
    expect(url.searchParams.get('X-Amz-Date')).toBe('20300102T030405Z');
    expect(url.searchParams.get('X-Amz-Expires')).toBe('600');
    expect(url.searchParams.get('X-Amz-SignedHeaders')).toBe('content-length;content-type;host');
    expect(put.headers).toEqual({ 'Content-Type': 'image/png', 'Content-Length': '1234' });
    expect(put.expiresAt).toBe(Date.UTC(2030, 0, 2, 3, 14, 5));
    const get = await storage.presignGet('a/b', 60);
    expect(new URL(get.url).searchParams.get('X-Amz-SignedHeaders')).toBe('host');
    expect(get.headers).toEqual({});
  });
});

describe('signing keys (filesystem signed URLs)', () => {
  it('uses STORAGE_SIGNING_KEY when set, else generates one into the data directory once, else one per process', () => {
    const dir = mkdtempSync(join(tmpdir(), 'ada-signing-'));
    try {
      expect(resolveSigningKey('x'.repeat(32), dir)).toEqual({ key: Buffer.from('x'.repeat(32)), source: 'env' });
      const first = resolveSigningKey(undefined, dir);
      expect(first.source).toBe('generated');
      expect(first.key.length).toBe(32);
      expect((statSync(join(dir, 'storage-signing-key')).mode & 0o777).toString(8)).toBe('600');
      const again = resolveSigningKey(undefined, dir);
      expect(again.source).toBe('data-dir');
      expect(again.key.equals(first.key)).toBe(true);
      const a = resolveSigningKey(undefined, undefined);
      expect(a.source).toBe('process');
      expect(a.key.equals(resolveSigningKey(undefined, undefined).key)).toBe(false);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('a URL signed with one key is refused under another, and keys shorter than 32 bytes are refused', async () => {
    const root = mkdtempSync(join(tmpdir(), 'ada-signing-'));
    try {
      const a = new FilesystemObjectStorage(root, { signingKey: Buffer.alloc(32, 1) });
      const b = new FilesystemObjectStorage(root, { signingKey: Buffer.alloc(32, 2) });
      const put = await a.presignPut('k', 'image/png', 5, 60);
      const q = new URL(put.url, 'http://x').searchParams;
      const params = {
        key: 'k',
        expires: Number(q.get('expires')),
        contentType: 'image/png',
        byteSize: 5,
        signature: q.get('signature')!,
      };
      expect(() => a.verifySignedUpload(params, Date.now())).not.toThrow();
      expect(() => b.verifySignedUpload(params, Date.now())).toThrow(SignedUrlError);
      expect(() => a.verifySignedUpload({ ...params, byteSize: 6 }, Date.now())).toThrow(/signature is not valid/);
      expect(() => a.verifySignedUpload(params, params.expires)).toThrow(/expired/);
      // Download and upload signatures are not interchangeable.
      expect(() =>
        a.verifySignedDownload({ key: 'k', expires: params.expires, signature: params.signature }, Date.now()),
      ).toThrow(SignedUrlError);
      expect(() => new FilesystemObjectStorage(root, { signingKey: Buffer.alloc(16) })).toThrow(/at least 32 bytes/);
      await expect(new FilesystemObjectStorage(root).presignGet('k', 60)).rejects.toBeInstanceOf(ObjectStorageError);
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  });

  it('object keys map to one URL path segment and back', () => {
    expect(keyToUrlSegment('staging/u/1')).toBe('staging~u~1');
    expect(urlSegmentToKey('staging~u~1')).toBe('staging/u/1');
  });
});

describe('createObjectStorage', () => {
  const dir = join(fsRoot, 'factory');

  it('returns null when storage is switched off', () => {
    expect(createObjectStorage({ objectStorage: 'none', objectStorageDir: dir, s3: undefined })).toBeNull();
  });

  it('builds the filesystem backend on the configured directory', async () => {
    const storage = createObjectStorage({ objectStorage: 'filesystem', objectStorageDir: dir, s3: undefined });
    expect(storage?.kind).toBe('filesystem');
    await storage!.put('probe', Buffer.from('x'), 'image/png');
    expect(existsSync(join(dir, 'probe~obj'))).toBe(true);
  });

  it('builds the S3 backend from s3 settings', () => {
    expect(createObjectStorage({ objectStorage: 's3', objectStorageDir: dir, s3: s3Config() })?.kind).toBe('s3');
  });

  it('refuses s3 without settings, without a bucket, or with a non-http endpoint', () => {
    expect(() => createObjectStorage({ objectStorage: 's3', objectStorageDir: dir, s3: undefined })).toThrow(
      ConfigError,
    );
    expect(() =>
      createObjectStorage({ objectStorage: 's3', objectStorageDir: dir, s3: s3Config({ bucket: '' }) }),
    ).toThrow(/s3\.bucket/);
    expect(() =>
      createObjectStorage({ objectStorage: 's3', objectStorageDir: dir, s3: s3Config({ secretAccessKey: '' }) }),
    ).toThrow(ConfigError);
    expect(() =>
      createObjectStorage({ objectStorage: 's3', objectStorageDir: dir, s3: s3Config({ endpoint: 'ftp://x' }) }),
    ).toThrow(ConfigError);
  });
});

describe('storage configuration from the environment', () => {
  const s3Env = { OBJECT_STORAGE: 's3', S3_BUCKET: 'media', S3_ACCESS_KEY_ID: 'AKID', S3_SECRET_ACCESS_KEY: 'secret' };

  it('defaults to the filesystem under DATA_DIR/objects with a 5 MiB media limit', () => {
    const config = loadConfig({ DATA_DIR: '/srv/ada' });
    expect(config.objectStorage).toBe('filesystem');
    expect(config.objectStorageDir).toBe('/srv/ada/objects');
    expect(config.s3).toBeUndefined();
    expect(config.mediaMaxBytes).toBe(5 * 1_048_576);
  });

  it('honours OBJECT_STORAGE_DIR, OBJECT_STORAGE=none and MEDIA_MAX_BYTES', () => {
    expect(loadConfig({ DATA_DIR: '/srv/ada', OBJECT_STORAGE_DIR: '/mnt/media' }).objectStorageDir).toBe('/mnt/media');
    expect(loadConfig({ OBJECT_STORAGE: 'none' }).objectStorage).toBe('none');
    expect(loadConfig({ MEDIA_MAX_BYTES: '2048' }).mediaMaxBytes).toBe(2048);
  });

  it('reads S3 settings with their defaults', () => {
    expect(loadConfig(s3Env).s3).toEqual({
      endpoint: 'https://s3.us-east-1.amazonaws.com',
      region: 'us-east-1',
      bucket: 'media',
      accessKeyId: 'AKID',
      secretAccessKey: 'secret',
      forcePathStyle: true,
    });
    const custom = loadConfig({
      ...s3Env,
      S3_ENDPOINT: 'http://minio:9000/',
      S3_REGION: 'eu-west-1',
      S3_FORCE_PATH_STYLE: 'false',
    }).s3;
    expect(custom).toMatchObject({ endpoint: 'http://minio:9000', region: 'eu-west-1', forcePathStyle: false });
  });

  it('reads the storage URL, staging and GC settings with their defaults', () => {
    expect(loadConfig({})).toMatchObject({
      storageSigningKey: undefined,
      storagePublicUrl: undefined,
      storageUploadUrlTtlSeconds: 900,
      storageDownloadUrlTtlSeconds: 300,
      storageStagingTtlMs: 86_400_000,
      storageGcGraceMs: 3_600_000,
      storageGcIntervalMs: 3_600_000,
    });
    const custom = loadConfig({
      STORAGE_SIGNING_KEY: 's'.repeat(40),
      STORAGE_PUBLIC_URL: 'https://api.example.org/',
      STORAGE_UPLOAD_URL_TTL_SECONDS: '60',
      STORAGE_DOWNLOAD_URL_TTL_SECONDS: '30',
      STORAGE_STAGING_TTL_MS: '600000',
      STORAGE_GC_GRACE_MS: '0',
      STORAGE_GC_INTERVAL_MS: '0',
    });
    expect(custom).toMatchObject({
      storageSigningKey: 's'.repeat(40),
      storagePublicUrl: 'https://api.example.org',
      storageUploadUrlTtlSeconds: 60,
      storageDownloadUrlTtlSeconds: 30,
      storageStagingTtlMs: 600_000,
      storageGcGraceMs: 0,
      storageGcIntervalMs: 0,
    });
    expect(() => loadConfig({ STORAGE_SIGNING_KEY: 'short' })).toThrow(
      /STORAGE_SIGNING_KEY must be at least 32 characters/,
    );
    expect(() => loadConfig({ STORAGE_PUBLIC_URL: 'api.example.org' })).toThrow(/STORAGE_PUBLIC_URL must be an http/);
    expect(() => loadConfig({ STORAGE_PUBLIC_URL: 'https://api.example.org/?x=1' })).toThrow(
      /without credentials, query or fragment/,
    );
    expect(() => loadConfig({ STORAGE_UPLOAD_URL_TTL_SECONDS: '3600', STORAGE_STAGING_TTL_MS: '600000' })).toThrow(
      /must outlive its upload URL/,
    );
    expect(() => loadConfig({ STORAGE_UPLOAD_URL_TTL_SECONDS: '999999999' })).toThrow(/between 10 and 604800/);
  });

  it('names what is wrong', () => {
    expect(() => loadConfig({ OBJECT_STORAGE: 'gcs' })).toThrow(/OBJECT_STORAGE must be one of filesystem, s3, none/);
    expect(() => loadConfig({ ...s3Env, S3_BUCKET: '' })).toThrow(/OBJECT_STORAGE=s3 requires S3_BUCKET/);
    expect(() => loadConfig({ OBJECT_STORAGE: 's3' })).toThrow(/S3_BUCKET, S3_ACCESS_KEY_ID, S3_SECRET_ACCESS_KEY/);
    expect(() => loadConfig({ ...s3Env, S3_BUCKET: 'Bad_Bucket' })).toThrow(/S3_BUCKET must be/);
    expect(() => loadConfig({ ...s3Env, S3_ENDPOINT: 'minio:9000' })).toThrow(/S3_ENDPOINT must be an http/);
    expect(() => loadConfig({ ...s3Env, S3_FORCE_PATH_STYLE: 'maybe' })).toThrow(
      /S3_FORCE_PATH_STYLE must be true or false/,
    );
    expect(() => loadConfig({ MEDIA_MAX_BYTES: '5MB' })).toThrow(/MEDIA_MAX_BYTES must be an integer/);
    for (const env of [{ OBJECT_STORAGE: 'gcs' }, { OBJECT_STORAGE: 's3' }])
      expect(() => loadConfig(env)).toThrow(ConfigError);
  });
});

describe('contentMatchesType (declared type against the first bytes)', () => {
  const png = Buffer.from(
    'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mNkYAAAAAYAAjCB0C8AAAAASUVORK5CYII=',
    'base64',
  );
  const mp4 = Buffer.concat([Buffer.from([0, 0, 0, 0x18]), Buffer.from('ftypisom'), Buffer.alloc(12)]);
  const mov = Buffer.concat([Buffer.from([0, 0, 0, 0x14]), Buffer.from('ftypqt  '), Buffer.alloc(8)]);
  const m4a = Buffer.concat([Buffer.from([0, 0, 0, 0x18]), Buffer.from('ftypM4A '), Buffer.alloc(12)]);
  const webm = Buffer.concat([
    Buffer.from([0x1a, 0x45, 0xdf, 0xa3, 0x9f, 0x42, 0x86, 0x81, 0x01]),
    Buffer.from('B\x82\x84webm'),
  ]);
  const ogg = Buffer.from('OggS\0\x02\0\0', 'latin1');
  const mp3 = Buffer.from('ID3\x04\0\0\0\0\0\0', 'latin1');
  const mp3Frame = Buffer.from([0xff, 0xfb, 0x90, 0x64, 0, 0, 0, 0]);
  const wav = Buffer.concat([
    Buffer.from('RIFF'),
    Buffer.from([36, 0, 0, 0]),
    Buffer.from('WAVEfmt '),
    Buffer.alloc(8),
  ]);
  const pdf = Buffer.from('%PDF-1.7\n');
  const zip = Buffer.from('PK\x03\x04\x14\0', 'latin1');
  const text = Buffer.from('Hello — plain text, with UTF-8 ✓ and\ttabs\r\n');
  const html = Buffer.from('<!doctype html><script>alert(1)</script>');

  it.each([
    ['image/png', png],
    ['video/mp4', mp4],
    ['video/quicktime', mov],
    ['audio/mp4', m4a],
    ['video/webm', webm],
    ['audio/ogg', ogg],
    ['audio/mpeg', mp3],
    ['audio/mpeg', mp3Frame],
    ['audio/wav', wav],
    ['application/pdf', pdf],
    ['application/zip', zip],
    ['text/plain', text],
    ['text/plain', Buffer.alloc(0)],
    ['IMAGE/PNG', png],
  ] as const)('accepts %s for its own bytes', (type, bytes) => {
    expect(contentMatchesType(type, bytes)).toBe(true);
  });

  it.each([
    ['image/png', html],
    ['image/png', pdf],
    ['image/gif', png],
    ['video/mp4', mov],
    ['video/mp4', m4a],
    ['audio/wav', Buffer.concat([Buffer.from('RIFF'), Buffer.alloc(4), Buffer.from('WEBPVP8 '), Buffer.alloc(8)])],
    ['application/pdf', text],
    ['text/plain', png],
    ['text/plain', pdf],
    ['text/plain', Buffer.from([0x68, 0x69, 0x00, 0x21])],
    ['text/plain', Buffer.from([0xc3, 0x28])],
    ['text/html', html],
    ['image/svg+xml', Buffer.from('<svg xmlns="http://www.w3.org/2000/svg"/>')],
    ['application/octet-stream', png],
  ] as const)('refuses %s for bytes of another kind', (type, bytes) => {
    expect(contentMatchesType(type, bytes)).toBe(false);
  });

  it('allows a UTF-8 character cut at the end of the sample', () => {
    const cut = Buffer.from('ab✓').subarray(0, 4);
    expect(contentMatchesType('text/plain', cut)).toBe(true);
    expect(sniffContentType(Buffer.from('%PDF-1.4'))).toBe('application/pdf');
    expect(VERIFIABLE_CONTENT_TYPES).toContain('text/plain');
    expect(VERIFIABLE_CONTENT_TYPES).not.toContain('text/html');
  });
});

describe('sniffImageType', () => {
  // Real, complete 1x1 images (the JPEG is the well-known 134-byte minimal JFIF).
  const png = Buffer.from(
    'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mNkYAAAAAYAAjCB0C8AAAAASUVORK5CYII=',
    'base64',
  );
  const gif = Buffer.from('R0lGODlhAQABAIAAAAAAAP///yH5BAEAAAAALAAAAAABAAEAAAIBRAA7', 'base64');
  const webpLossless = Buffer.from('UklGRhoAAABXRUJQVlA4TA0AAAAvAAAAEAcQERGIiP4HAA==', 'base64');
  const webpLossy = Buffer.from('UklGRiQAAABXRUJQVlA4IBgAAAAwAQCdASoBAAEAAwA0JaQAA3AA/vuUAAA=', 'base64');
  const jpeg = Buffer.from(
    '/9j/4AAQSkZJRgABAQEASABIAAD/2wBDAP//////////////////////////////////////////////////////////////////////////////////////wgALCAABAAEBAREA/8QAFBABAAAAAAAAAAAAAAAAAAAAAP/aAAgBAQABPxA=',
    'base64',
  );
  const exifJpegHeader = Buffer.from([0xff, 0xd8, 0xff, 0xe1, 0x00, 0x18, 0x45, 0x78, 0x69, 0x66, 0x00, 0x00]);
  const gif87Header = Buffer.concat([Buffer.from('GIF87a'), Buffer.from([1, 0, 1, 0, 0, 0, 0])]);

  it.each([
    ['PNG', png, 'image/png'],
    ['JPEG (JFIF)', jpeg, 'image/jpeg'],
    ['JPEG (Exif header)', exifJpegHeader, 'image/jpeg'],
    ['GIF89a', gif, 'image/gif'],
    ['GIF87a header', gif87Header, 'image/gif'],
    ['WebP lossless', webpLossless, 'image/webp'],
    ['WebP lossy', webpLossy, 'image/webp'],
  ] as const)('recognises %s', (_name, bytes, type) => {
    expect(sniffImageType(bytes)).toBe(type);
    expect(ALLOWED_IMAGE_TYPES).toContain(type);
  });

  it.each([
    ['empty', Buffer.alloc(0)],
    ['plain text', Buffer.from('hello, this is not an image')],
    ['HTML', Buffer.from('<!doctype html><script>alert(1)</script>')],
    ['SVG', Buffer.from('<?xml version="1.0"?><svg xmlns="http://www.w3.org/2000/svg" onload="alert(1)"/>')],
    ['bare SVG', Buffer.from('<svg xmlns="http://www.w3.org/2000/svg"><rect/></svg>')],
    ['PNG signature only', png.subarray(0, 8)],
    ['PNG cut inside the signature', png.subarray(0, 5)],
    ['JPEG SOI only', jpeg.subarray(0, 2)],
    ['GIF signature only', gif.subarray(0, 6)],
    ['text starting with GIF8', Buffer.from('GIF8 is a word here')],
    ['WebP cut before the chunk', webpLossless.subarray(0, 12)],
    [
      'RIFF WAVE audio',
      Buffer.concat([Buffer.from('RIFF'), Buffer.from([36, 0, 0, 0]), Buffer.from('WAVEfmt '), Buffer.alloc(8)]),
    ],
    ['PDF', Buffer.from('%PDF-1.7\n%\xe2\xe3\xcf\xd3\n')],
    ['PNG bytes not at the start', Buffer.concat([Buffer.from(' '), png])],
  ])('refuses %s', (_name, bytes) => {
    expect(sniffImageType(bytes)).toBeNull();
  });
});

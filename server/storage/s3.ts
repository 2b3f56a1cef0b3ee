/**
 * S3-compatible backend (AWS S3, MinIO, Ceph RGW, R2, ...) over plain fetch, signed with SigV4 by
 * aws4fetch: a handful of calls (PUT, GET, HEAD, copy, DELETE, ListObjectsV2) do not justify the
 * AWS SDK's size.
 *
 * Presigned URLs use aws4fetch's query signing (AwsV4Signer with signQuery) rather than
 * @aws-sdk/s3-request-presigner: it is the same SigV4 algorithm the rest of this file already
 * trusts aws4fetch with, maintained, dependency-free, and it can sign every header (`allHeaders`),
 * which a presigned PUT needs: Content-Type and Content-Length are signed, so S3 itself refuses an
 * upload of another type or another size (SignatureDoesNotMatch). test/helpers/sigv4.ts checks the
 * query signatures (expiry included) independently of aws4fetch, anchored to AWS's documented example.
 */
import { createHash } from 'node:crypto';
import { Readable } from 'node:stream';
import type { ReadableStream as WebReadableStream } from 'node:stream/web';
import { AwsClient, AwsV4Signer } from 'aws4fetch';
import { ConfigError, type S3Config } from '../config.ts';
import {
  assertPresignArgs,
  assertValidContentType,
  assertValidKey,
  assertValidPrefix,
  etagOf,
  ObjectStorageError,
  type ByteRange,
  type ObjectHead,
  type ObjectStorage,
  type ObjectStream,
  type PresignedRequest,
  type StoredObject,
} from './types.ts';

export interface S3StorageOptions {
  /** Replaces the global fetch (a proxy-aware client, or tests that resolve a virtual host to loopback). */
  fetch?: (request: Request) => Promise<Response>;
  /** Deadline of one attempt. */
  timeoutMs?: number;
  /** Extra attempts after a 5xx, 429 or network error; every S3 call used here is idempotent. */
  retries?: number;
  /** Clock of presigned URLs (their X-Amz-Date); tests move it to sign URLs that have already expired. */
  clock?: () => number;
}

/** Metadata header holding the body's sha256 (hex), so HEAD and streamed GETs know the ETag `put` gave. */
const SHA256_META = 'x-amz-meta-sha256';

type Method = 'PUT' | 'GET' | 'HEAD' | 'DELETE';

const RETRYABLE_STATUS = new Set([429, 500, 502, 503, 504]);

/** A request's headers and body: bytes, or a stream opened anew for each attempt. */
interface SendInit {
  headers?: Record<string, string>;
  body?: Buffer;
  stream?: () => ReadableStream<Uint8Array>;
}

/** Structural checks for configs built in code; loadConfig already reports env mistakes by variable name. */
export function assertS3Config(config: S3Config | undefined): asserts config is S3Config {
  if (!config)
    throw new ConfigError('S3 object storage needs s3 settings (S3_BUCKET, S3_ACCESS_KEY_ID, S3_SECRET_ACCESS_KEY)');
  for (const field of ['endpoint', 'region', 'bucket', 'accessKeyId', 'secretAccessKey'] as const) {
    if (typeof config[field] !== 'string' || config[field] === '')
      throw new ConfigError(`S3 object storage needs s3.${field}`);
  }
  let url: URL;
  try {
    url = new URL(config.endpoint);
  } catch {
    throw new ConfigError(`s3.endpoint must be an http:// or https:// URL, got "${config.endpoint}"`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new ConfigError(`s3.endpoint must be an http:// or https:// URL, got "${config.endpoint}"`);
  }
}

/** `<Code>` and `<Message>` of an S3 XML error body, for logs. */
function describeError(status: number, xml: string): { code: string | undefined; text: string } {
  const code = /<Code>([^<]*)<\/Code>/.exec(xml)?.[1];
  const message = /<Message>([^<]*)<\/Message>/.exec(xml)?.[1];
  return { code, text: `HTTP ${status}${code ? ` ${code}` : ''}${message ? `: ${message}` : ''}` };
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

export class S3ObjectStorage implements ObjectStorage {
  readonly kind = 's3' as const;
  private readonly aws: AwsClient;
  private readonly baseUrl: string;
  private readonly fetchImpl: (request: Request) => Promise<Response>;
  private readonly timeoutMs: number;
  private readonly retries: number;
  private readonly clock: () => number;

  constructor(
    private readonly config: S3Config,
    options: S3StorageOptions = {},
  ) {
    assertS3Config(config);
    // Retries are ours (below): aws4fetch's default is 10 with backoff, far too long behind an HTTP request.
    this.aws = new AwsClient({
      accessKeyId: config.accessKeyId,
      secretAccessKey: config.secretAccessKey,
      service: 's3',
      region: config.region,
      retries: 0,
    });
    const endpoint = new URL(config.endpoint);
    const basePath = endpoint.pathname.replace(/\/+$/, '');
    this.baseUrl = config.forcePathStyle
      ? `${endpoint.origin}${basePath}/${config.bucket}`
      : `${endpoint.protocol}//${config.bucket}.${endpoint.host}${basePath}`;
    this.fetchImpl = options.fetch ?? ((request) => fetch(request));
    this.timeoutMs = options.timeoutMs ?? 30_000;
    this.retries = options.retries ?? 2;
    this.clock = options.clock ?? Date.now;
  }

  /** Keys are restricted to URL-safe characters, so they go into the path unencoded. */
  objectUrl(key: string): string {
    assertValidKey(key);
    return `${this.baseUrl}/${key}`;
  }

  private send(method: Method, key: string, init: SendInit = {}): Promise<Response> {
    return this.sendUrl(method, this.objectUrl(key), key, init);
  }

  /** `what` names the object (or listing) in errors. */
  private async sendUrl(method: Method, url: string, what: string, init: SendInit = {}): Promise<Response> {
    let lastError: unknown;
    for (let attempt = 0; attempt <= this.retries; attempt++) {
      if (attempt > 0) await sleep(100 * 2 ** (attempt - 1) * (0.5 + Math.random()));
      try {
        // Signed per attempt: the signature covers the request time.
        const request = await this.aws.sign(url, {
          method,
          headers: init.headers,
          // A copy typed as a plain ArrayBuffer view, which is what fetch's BodyInit accepts; or a fresh stream.
          body: init.stream ? init.stream() : init.body ? new Uint8Array(init.body) : undefined,
          signal: AbortSignal.timeout(this.timeoutMs),
        });
        const response = await this.fetchImpl(request);
        if (!RETRYABLE_STATUS.has(response.status) || attempt === this.retries) return response;
        lastError = new ObjectStorageError(
          `S3 ${method} ${what} failed: ${describeError(response.status, await response.text()).text}`,
        );
      } catch (error) {
        lastError = error;
      }
    }
    throw new ObjectStorageError(
      `S3 ${method} ${what} failed: ${lastError instanceof Error ? lastError.message : String(lastError)}`,
      {
        cause: lastError,
      },
    );
  }

  private async fail(method: string, key: string, response: Response): Promise<never> {
    const { text } = describeError(response.status, await response.text());
    throw new ObjectStorageError(`S3 ${method} ${key} in bucket ${this.config.bucket} failed: ${text}`);
  }

  async put(key: string, body: Buffer, contentType: string): Promise<{ etag: string }> {
    assertValidKey(key);
    assertValidContentType(contentType);
    const sha256 = createHash('sha256').update(body).digest('hex');
    const response = await this.send('PUT', key, {
      // The real payload hash (not UNSIGNED-PAYLOAD): S3 rejects the upload if the bytes arrive altered.
      headers: { 'content-type': contentType, 'x-amz-content-sha256': sha256, [SHA256_META]: sha256 },
      body,
    });
    if (!response.ok) return this.fail('PUT', key, response);
    await response.body?.cancel();
    return { etag: etagOf(body) };
  }

  /**
   * A streamed PUT: the body is read once to hash it (so S3 checks the bytes it receives against
   * the real payload hash, and the object carries the same sha256 ETag as a `put`), then sent with
   * its length, each attempt from a fresh `open()`. One PUT: S3 takes objects up to 5 GiB this way.
   */
  async upload(key: string, open: () => Readable, contentType: string, byteSize: number): Promise<{ etag: string }> {
    assertValidKey(key);
    assertValidContentType(contentType);
    const hash = createHash('sha256');
    let size = 0;
    for await (const chunk of open()) {
      hash.update(chunk as Buffer);
      size += (chunk as Buffer).length;
    }
    if (size !== byteSize)
      throw new ObjectStorageError(`Could not write object ${key}: ${size} bytes, not ${byteSize}`);
    const sha256 = hash.digest('hex');
    const response = await this.send('PUT', key, {
      headers: {
        'content-type': contentType,
        'content-length': String(byteSize),
        'x-amz-content-sha256': sha256,
        [SHA256_META]: sha256,
      },
      stream: () => Readable.toWeb(open()) as ReadableStream<Uint8Array>,
    });
    if (!response.ok) return this.fail('PUT', key, response);
    await response.body?.cancel();
    return { etag: `"${sha256}"` };
  }

  async get(key: string): Promise<StoredObject | null> {
    assertValidKey(key);
    const response = await this.send('GET', key);
    if (response.status === 404) {
      const xml = await response.text();
      // A missing bucket is a misconfiguration, not a missing object: make it loud.
      if (describeError(404, xml).code === 'NoSuchBucket')
        throw new ObjectStorageError(`S3 bucket ${this.config.bucket} does not exist`);
      return null;
    }
    if (!response.ok) return this.fail('GET', key, response);
    const body = Buffer.from(await response.arrayBuffer());
    return {
      body,
      contentType: response.headers.get('content-type') ?? 'application/octet-stream',
      // Not S3's ETag (MD5, or not a content hash at all for multipart uploads): the same hash the filesystem gives.
      etag: etagOf(body),
    };
  }

  /** Our sha256 ETag when the object carries it (written by put), S3's own ETag otherwise (a presigned upload). */
  private etagOf(response: Response): string {
    const sha256 = response.headers.get(SHA256_META);
    if (sha256 && /^[0-9a-f]{64}$/.test(sha256)) return `"${sha256}"`;
    const etag = response.headers.get('etag') ?? '';
    return etag.startsWith('"') || etag.startsWith('W/') ? etag : `"${etag}"`;
  }

  async head(key: string): Promise<ObjectHead | null> {
    assertValidKey(key);
    const response = await this.send('HEAD', key);
    await response.body?.cancel();
    // A HEAD answer has no body to tell a missing bucket from a missing key; GET and PUT report it.
    if (response.status === 404) return null;
    if (!response.ok)
      throw new ObjectStorageError(`S3 HEAD ${key} in bucket ${this.config.bucket} failed: HTTP ${response.status}`);
    return {
      contentType: response.headers.get('content-type') ?? 'application/octet-stream',
      size: Number(response.headers.get('content-length') ?? 0),
      etag: this.etagOf(response),
    };
  }

  async getStream(key: string, options: { range?: ByteRange } = {}): Promise<ObjectStream | null> {
    assertValidKey(key);
    const range = options.range;
    const response = await this.send(
      'GET',
      key,
      range ? { headers: { range: `bytes=${range.start}-${range.end}` } } : {},
    );
    if (response.status === 404) {
      const xml = await response.text();
      if (describeError(404, xml).code === 'NoSuchBucket')
        throw new ObjectStorageError(`S3 bucket ${this.config.bucket} does not exist`);
      return null;
    }
    if (response.status === 416) {
      // A range past the end (any range of an empty object): no bytes, but the object exists.
      await response.body?.cancel();
      const head = await this.head(key);
      return head ? { ...head, body: Readable.from([]) } : null;
    }
    if (!response.ok) return this.fail('GET', key, response);
    // 206 carries the whole size after the slash of Content-Range; 200 in Content-Length.
    const total =
      /\/(\d+)$/.exec(response.headers.get('content-range') ?? '')?.[1] ??
      response.headers.get('content-length') ??
      '0';
    return {
      body: response.body ? Readable.fromWeb(response.body as WebReadableStream<Uint8Array>) : Readable.from([]),
      contentType: response.headers.get('content-type') ?? 'application/octet-stream',
      size: Number(total),
      etag: this.etagOf(response),
    };
  }

  /** CopyObject (metadata copied along), then DELETE of the source. */
  async move(fromKey: string, toKey: string): Promise<boolean> {
    assertValidKey(fromKey);
    assertValidKey(toKey);
    const response = await this.send('PUT', toKey, {
      headers: { 'x-amz-copy-source': `/${this.config.bucket}/${fromKey}`, 'x-amz-metadata-directive': 'COPY' },
    });
    const xml = await response.text();
    if (response.status === 404) {
      if (describeError(404, xml).code === 'NoSuchBucket')
        throw new ObjectStorageError(`S3 bucket ${this.config.bucket} does not exist`);
      // No source: moved already when the target is there.
      return (await this.head(toKey)) !== null;
    }
    // A copy can fail after S3 has answered 200: the error is then in the body.
    if (!response.ok || xml.includes('<Error>')) {
      throw new ObjectStorageError(
        `S3 copy ${fromKey} to ${toKey} in bucket ${this.config.bucket} failed: ${describeError(response.status, xml).text}`,
      );
    }
    await this.delete(fromKey);
    return true;
  }

  /** SigV4 query signing; `extraHeaders` become signed headers the client must send as given. */
  private async presign(
    method: 'GET' | 'PUT',
    key: string,
    expiresInSeconds: number,
    extraHeaders: Record<string, string>,
  ): Promise<PresignedRequest> {
    const now = this.clock();
    const url = new URL(this.objectUrl(key));
    url.searchParams.set('X-Amz-Expires', String(expiresInSeconds));
    const signer = new AwsV4Signer({
      method,
      url: url.toString(),
      headers: extraHeaders,
      accessKeyId: this.config.accessKeyId,
      secretAccessKey: this.config.secretAccessKey,
      service: 's3',
      region: this.config.region,
      signQuery: true,
      // Content-Type and Content-Length are on aws4fetch's "unsignable" list by default; here they must be signed.
      allHeaders: true,
      datetime: new Date(now).toISOString().replace(/[:-]|\.\d{3}/g, ''),
    });
    const signed = await signer.sign();
    // X-Amz-Date has whole seconds: the URL expires at that second plus X-Amz-Expires.
    return {
      method,
      url: signed.url.toString(),
      headers: extraHeaders,
      expiresAt: Math.floor(now / 1000) * 1000 + expiresInSeconds * 1000,
    };
  }

  async presignPut(
    key: string,
    contentType: string,
    byteSize: number,
    expiresInSeconds: number,
  ): Promise<PresignedRequest> {
    assertValidKey(key);
    assertValidContentType(contentType);
    assertPresignArgs(byteSize, expiresInSeconds);
    return this.presign('PUT', key, expiresInSeconds, {
      'Content-Type': contentType,
      'Content-Length': String(byteSize),
    });
  }

  async presignGet(key: string, expiresInSeconds: number): Promise<PresignedRequest> {
    assertValidKey(key);
    assertPresignArgs(undefined, expiresInSeconds);
    return this.presign('GET', key, expiresInSeconds, {});
  }

  /** HEAD on the bucket (s3:ListBucket): one cheap signed request, no retries; readiness has its own deadline. */
  async check(signal?: AbortSignal): Promise<void> {
    let response: Response;
    try {
      const request = await this.aws.sign(`${this.baseUrl}/`, {
        method: 'HEAD',
        signal: signal ?? AbortSignal.timeout(this.timeoutMs),
      });
      response = await this.fetchImpl(request);
    } catch (error) {
      throw new ObjectStorageError(
        `S3 bucket ${this.config.bucket} is not reachable: ${error instanceof Error ? error.message : String(error)}`,
        { cause: error },
      );
    }
    await response.body?.cancel();
    if (!response.ok)
      throw new ObjectStorageError(`S3 HEAD bucket ${this.config.bucket} failed: HTTP ${response.status}`);
  }

  async delete(key: string): Promise<void> {
    assertValidKey(key);
    const response = await this.send('DELETE', key);
    if (response.status === 404) {
      const xml = await response.text();
      if (describeError(404, xml).code === 'NoSuchBucket')
        throw new ObjectStorageError(`S3 bucket ${this.config.bucket} does not exist`);
      return;
    }
    if (!response.ok) return this.fail('DELETE', key, response);
    await response.body?.cancel();
  }

  /** ListObjectsV2, following continuation tokens (1,000 keys a page). */
  async list(prefix: string): Promise<string[]> {
    assertValidPrefix(prefix);
    const keys: string[] = [];
    let token: string | undefined;
    do {
      const query = new URLSearchParams({
        'list-type': '2',
        prefix,
        ...(token ? { 'continuation-token': token } : {}),
      });
      const response = await this.sendUrl('GET', `${this.baseUrl}/?${query}`, `list ${prefix}`);
      if (!response.ok) return this.fail('GET', `list ${prefix}`, response);
      const xml = await response.text();
      for (const m of xml.matchAll(/<Key>([^<]*)<\/Key>/g)) keys.push(decodeXml(m[1]!));
      token = /<IsTruncated>true<\/IsTruncated>/.test(xml)
        ? /<NextContinuationToken>([^<]*)<\/NextContinuationToken>/.exec(xml)?.[1]
        : undefined;
      if (token) token = decodeXml(token);
    } while (token);
    return keys;
  }
}

function decodeXml(text: string): string {
  return text.replace(
    /&(lt|gt|quot|apos|amp);/g,
    (_m, e: string) => ({ lt: '<', gt: '>', quot: '"', apos: "'", amp: '&' })[e]!,
  );
}

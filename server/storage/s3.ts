/**
 * S3-compatible backend (AWS S3, MinIO, Ceph RGW, R2, ...) over plain fetch, signed with SigV4 by
 * aws4fetch: four calls (PUT, GET, DELETE, ListObjectsV2) do not justify the AWS SDK's size.
 */
import { createHash } from 'node:crypto';
import { AwsClient } from 'aws4fetch';
import { ConfigError, type S3Config } from '../config.ts';
import { assertValidContentType, assertValidKey, assertValidPrefix, etagOf, ObjectStorageError, type ObjectStorage, type StoredObject } from './types.ts';

export interface S3StorageOptions {
  /** Replaces the global fetch (a proxy-aware client, or tests that resolve a virtual host to loopback). */
  fetch?: (request: Request) => Promise<Response>;
  /** Deadline of one attempt. */
  timeoutMs?: number;
  /** Extra attempts after a 5xx, 429 or network error; every S3 call used here is idempotent. */
  retries?: number;
}

const RETRYABLE_STATUS = new Set([429, 500, 502, 503, 504]);

/** Structural checks for configs built in code; loadConfig already reports env mistakes by variable name. */
export function assertS3Config(config: S3Config | undefined): asserts config is S3Config {
  if (!config) throw new ConfigError('S3 object storage needs s3 settings (S3_BUCKET, S3_ACCESS_KEY_ID, S3_SECRET_ACCESS_KEY)');
  for (const field of ['endpoint', 'region', 'bucket', 'accessKeyId', 'secretAccessKey'] as const) {
    if (typeof config[field] !== 'string' || config[field] === '') throw new ConfigError(`S3 object storage needs s3.${field}`);
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
  }

  /** Keys are restricted to URL-safe characters, so they go into the path unencoded. */
  objectUrl(key: string): string {
    assertValidKey(key);
    return `${this.baseUrl}/${key}`;
  }

  private send(method: 'PUT' | 'GET' | 'DELETE', key: string, init: { headers?: Record<string, string>; body?: Buffer } = {}): Promise<Response> {
    return this.sendUrl(method, this.objectUrl(key), key, init);
  }

  /** `what` names the object (or listing) in errors. */
  private async sendUrl(
    method: 'PUT' | 'GET' | 'DELETE',
    url: string,
    what: string,
    init: { headers?: Record<string, string>; body?: Buffer } = {},
  ): Promise<Response> {
    let lastError: unknown;
    for (let attempt = 0; attempt <= this.retries; attempt++) {
      if (attempt > 0) await sleep(100 * 2 ** (attempt - 1) * (0.5 + Math.random()));
      try {
        // Signed per attempt: the signature covers the request time.
        const request = await this.aws.sign(url, {
          method,
          headers: init.headers,
          // A copy typed as a plain ArrayBuffer view, which is what fetch's BodyInit accepts.
          body: init.body ? new Uint8Array(init.body) : undefined,
          signal: AbortSignal.timeout(this.timeoutMs),
        });
        const response = await this.fetchImpl(request);
        if (!RETRYABLE_STATUS.has(response.status) || attempt === this.retries) return response;
        lastError = new ObjectStorageError(`S3 ${method} ${what} failed: ${describeError(response.status, await response.text()).text}`);
      } catch (error) {
        lastError = error;
      }
    }
    throw new ObjectStorageError(`S3 ${method} ${what} failed: ${lastError instanceof Error ? lastError.message : String(lastError)}`, {
      cause: lastError,
    });
  }

  private async fail(method: string, key: string, response: Response): Promise<never> {
    const { text } = describeError(response.status, await response.text());
    throw new ObjectStorageError(`S3 ${method} ${key} in bucket ${this.config.bucket} failed: ${text}`);
  }

  async put(key: string, body: Buffer, contentType: string): Promise<{ etag: string }> {
    assertValidKey(key);
    assertValidContentType(contentType);
    const response = await this.send('PUT', key, {
      // The real payload hash (not UNSIGNED-PAYLOAD): S3 rejects the upload if the bytes arrive altered.
      headers: { 'content-type': contentType, 'x-amz-content-sha256': createHash('sha256').update(body).digest('hex') },
      body,
    });
    if (!response.ok) return this.fail('PUT', key, response);
    await response.body?.cancel();
    return { etag: etagOf(body) };
  }

  async get(key: string): Promise<StoredObject | null> {
    assertValidKey(key);
    const response = await this.send('GET', key);
    if (response.status === 404) {
      const xml = await response.text();
      // A missing bucket is a misconfiguration, not a missing object: make it loud.
      if (describeError(404, xml).code === 'NoSuchBucket') throw new ObjectStorageError(`S3 bucket ${this.config.bucket} does not exist`);
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
      throw new ObjectStorageError(`S3 bucket ${this.config.bucket} is not reachable: ${error instanceof Error ? error.message : String(error)}`, { cause: error });
    }
    await response.body?.cancel();
    if (!response.ok) throw new ObjectStorageError(`S3 HEAD bucket ${this.config.bucket} failed: HTTP ${response.status}`);
  }

  async delete(key: string): Promise<void> {
    assertValidKey(key);
    const response = await this.send('DELETE', key);
    if (response.status === 404) {
      const xml = await response.text();
      if (describeError(404, xml).code === 'NoSuchBucket') throw new ObjectStorageError(`S3 bucket ${this.config.bucket} does not exist`);
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
      const query = new URLSearchParams({ 'list-type': '2', prefix, ...(token ? { 'continuation-token': token } : {}) });
      const response = await this.sendUrl('GET', `${this.baseUrl}/?${query}`, `list ${prefix}`);
      if (!response.ok) return this.fail('GET', `list ${prefix}`, response);
      const xml = await response.text();
      for (const m of xml.matchAll(/<Key>([^<]*)<\/Key>/g)) keys.push(decodeXml(m[1]!));
      token = /<IsTruncated>true<\/IsTruncated>/.test(xml) ? /<NextContinuationToken>([^<]*)<\/NextContinuationToken>/.exec(xml)?.[1] : undefined;
      if (token) token = decodeXml(token);
    } while (token);
    return keys;
  }
}

function decodeXml(text: string): string {
  return text.replace(/&(lt|gt|quot|apos|amp);/g, (_m, e: string) => ({ lt: '<', gt: '>', quot: '"', apos: "'", amp: '&' })[e]!);
}

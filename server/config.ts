/** Environment → typed configuration, validated once at start-up with messages an operator can act on. */
import { resolve } from 'node:path';
import { addressAllowList } from './net/addresses.ts';
import { VERIFIABLE_CONTENT_TYPES } from './storage/sniff.ts';

export interface Config {
  port: number;
  host: string;
  /** postgres://… when set; otherwise the embedded PGlite database under dataDir. */
  databaseUrl: string | undefined;
  dataDir: string;
  adminToken: string | undefined;
  /** Bearer token GET /metrics requires; undefined leaves it open. */
  metricsToken: string | undefined;
  redisUrl: string | undefined;
  logLevel: string;
  nodeEnv: string;
  /** Response validation against the contract: on except in production unless forced. */
  validateResponses: boolean;
  rateLimitPerMinute: number;
  bodyLimitBytes: number;
  dbPoolMax: number;
  /** PostgreSQL only: connections of the pool that runs the named prepared statements of the hot reads. */
  dbReadPoolMax: number;
  /** How long an authenticated key may be served from the in-process cache. */
  apiKeyCacheTtlMs: number;
  /** Comma-separated origins allowed by CORS; empty means no CORS headers. */
  corsOrigins: string[];
  /** Seed a demo account on the first start of an empty embedded database. */
  seedDemo: boolean;
  /** Where media objects live; `none` disables media (callers answer 503). */
  objectStorage: 'filesystem' | 's3' | 'none';
  /** Root of the filesystem backend: `<dataDir>/objects` unless OBJECT_STORAGE_DIR is set. */
  objectStorageDir: string;
  /** S3-compatible bucket settings; present exactly when objectStorage is `s3`. */
  s3: S3Config | undefined;
  /**
   * HMAC key of the URLs the filesystem backend signs (STORAGE_SIGNING_KEY, at least 32 characters);
   * undefined: a key generated once and kept in DATA_DIR (server/storage/signing.ts).
   */
  storageSigningKey: string | undefined;
  /** Origin clients reach this server at, for absolute signed storage URLs; undefined: relative URLs. */
  storagePublicUrl: string | undefined;
  /** How long a presigned upload URL works. */
  storageUploadUrlTtlSeconds: number;
  /** How long a presigned download URL works. */
  storageDownloadUrlTtlSeconds: number;
  /** How long a staged upload waits to be used before garbage collection deletes it. */
  storageStagingTtlMs: number;
  /** Age below which an unreferenced re-hosted note image is kept (its note may be about to commit). */
  storageGcGraceMs: number;
  /** How often storage garbage collection runs when scheduled; 0 turns it off. */
  storageGcIntervalMs: number;
  /** Largest avatar or banner upload accepted (raw request-body limit); re-hosted note images are bounded by fetchMaxBytes. */
  mediaMaxBytes: number;
  /** Images one account's social gallery may hold (SOCIAL_GALLERY_MAX_IMAGES); a new image beyond it is 403. */
  socialGalleryMaxImages: number;
  /** Outbound fetches may reach loopback/private addresses (tests, trusted intranets only). */
  fetchAllowPrivate: boolean;
  /** Addresses or CIDR ranges outbound fetches may reach although private (FETCH_ALLOW_ADDRESSES), e.g. one internal proxy. */
  fetchAllowAddresses: string[];
  /** Overall deadline of one outbound fetch, redirects included. */
  fetchTimeoutMs: number;
  /** Largest response body an outbound fetch reads. */
  fetchMaxBytes: number;
  /** Redirect hops an outbound fetch follows. */
  fetchMaxRedirects: number;
  /** External images of one note fetched at the same time while re-hosting them. */
  noteImageFetchConcurrency: number;
  /** Deadline for re-hosting every external image of one note (the per-fetch deadline still applies). */
  noteImagesTimeoutMs: number;
  /** Active notes one member may be linked to, per plan (403 NOTE_LIMIT_REACHED on create; 400 on PATCH or restore). */
  noteCaps: { free: number; pro: number; pro_plus: number };
  /** Days a trashed item is kept before the retention job purges it (accounts may override). */
  trashRetentionDays: number;
  /** How often the retention job runs; 0 turns it off. */
  trashPurgeIntervalMs: number;
  /** Embedded database only: how often VACUUM (ANALYZE) runs (PGlite has no autovacuum); 0 turns it off. */
  embeddedMaintenanceIntervalMs: number;
  /** How often an idle job worker looks for due jobs and recurring schedules. */
  jobPollIntervalMs: number;
  /** Embedded database only: PGlite's shared_buffers, resident in the server process (e.g. 16MB). */
  embeddedSharedBuffers: string;
  /** Embedded database only: V8 set for a small footprint (baseline-compiled WebAssembly, tighter heap growth). */
  embeddedV8LowMemory: boolean;
  /**
   * Keys that encrypt message text at rest (MESSAGE_ENCRYPTION_KEYS: `id:base64key,…`, 32-byte keys,
   * the first is the primary that new writes use). Empty when unset: the runtime then generates one
   * into DATA_DIR on the embedded default and refuses to start with DATABASE_URL.
   */
  messageEncryptionKeys: MessageKey[];
  /** Messages one re-encryption batch rewrites after a key rotation (one transaction per batch). */
  messageReencryptBatchSize: number;
  /** Largest message attachment accepted by an upload intent (MESSAGE_ATTACHMENT_MAX_BYTES). */
  messageAttachmentMaxBytes: number;
  /** Content types a message attachment may declare (MESSAGE_ATTACHMENT_TYPES); each one has a byte check (server/storage/sniff.ts). */
  messageAttachmentTypes: string[];
  /** Largest space icon accepted by an upload intent (SPACE_ICON_MAX_BYTES); icons are PNG, JPEG, WebP or GIF. */
  spaceIconMaxBytes: number;
  /** The GIF provider the messaging GIF proxy calls (GIF_PROVIDER: Tenor API v2 or GIPHY). */
  gifProvider: GifProviderName;
  /** Its API key (GIF_API_KEY); undefined: the GIF routes answer 503. */
  gifApiKey: string | undefined;
  /** Its API base URL (GIF_API_BASE_URL; default per provider, see GIF_DEFAULT_BASE_URLS); tests point it at a loopback fake. */
  gifApiBaseUrl: string;
  /** How long a provider answer is reused (GIF_CACHE_TTL_MS; 0 turns the cache off). */
  gifCacheTtlMs: number;
  /** Most provider answers kept in memory at once (GIF_CACHE_MAX_ENTRIES); the oldest go first. */
  gifCacheMaxEntries: number;
  /** Most bytes of a linked page a link-preview fetch reads (LINK_PREVIEW_HTML_MAX_BYTES); the rest is never downloaded. */
  linkPreviewHtmlMaxBytes: number;
  /** Largest preview image re-hosted (LINK_PREVIEW_IMAGE_MAX_BYTES); a bigger one leaves the preview without an image. */
  linkPreviewImageMaxBytes: number;
  /** Link-preview fetches one process runs at the same time (LINK_PREVIEW_CONCURRENCY). */
  linkPreviewConcurrency: number;
}

export type GifProviderName = 'tenor' | 'giphy';

/** The API each GIF provider answers at unless GIF_API_BASE_URL says otherwise. */
export const GIF_DEFAULT_BASE_URLS: Record<GifProviderName, string> = {
  tenor: 'https://tenor.googleapis.com/v2',
  giphy: 'https://api.giphy.com/v1/gifs',
};

/** One key of the message keyring. */
export interface MessageKey {
  /** Stored with each ciphertext, so a read finds the key it was written with. */
  id: string;
  /** 32 bytes (AES-256). */
  key: Buffer;
}

export interface S3Config {
  /** Base URL of the S3 API, e.g. https://s3.eu-west-1.amazonaws.com or http://minio:9000. */
  endpoint: string;
  region: string;
  bucket: string;
  accessKeyId: string;
  secretAccessKey: string;
  /** `true`: <endpoint>/<bucket>/<key>; `false`: <bucket>.<endpoint host>/<key>. */
  forcePathStyle: boolean;
}

const MiB = 1_048_576;

/** Outbound fetch limits when nothing is configured; the fetcher uses the same values as its own defaults. */
export const FETCH_DEFAULTS = { allowPrivate: false, timeoutMs: 10_000, maxBytes: 10 * MiB, maxRedirects: 3 } as const;

export class ConfigError extends Error {}

type Env = Record<string, string | undefined>;

function int(env: Env, name: string, fallback: number, min: number, max: number): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  if (!/^\d+$/.test(raw)) throw new ConfigError(`${name} must be an integer, got "${raw}"`);
  const value = Number(raw);
  if (value < min || value > max) throw new ConfigError(`${name} must be between ${min} and ${max}, got ${value}`);
  return value;
}

function bool(env: Env, name: string, fallback: boolean): boolean {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  if (/^(1|true|yes|on)$/i.test(raw)) return true;
  if (/^(0|false|no|off)$/i.test(raw)) return false;
  throw new ConfigError(`${name} must be true or false, got "${raw}"`);
}

const OBJECT_STORAGE_KINDS = ['filesystem', 's3', 'none'] as const;

// S3 bucket naming rules; a virtual-host-style bucket must also be a valid DNS label sequence.
const BUCKET_NAME = /^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/;

function objectStorageKind(env: Env): Config['objectStorage'] {
  const raw = env.OBJECT_STORAGE || 'filesystem';
  const kind = OBJECT_STORAGE_KINDS.find((k) => k === raw);
  if (!kind) throw new ConfigError(`OBJECT_STORAGE must be one of ${OBJECT_STORAGE_KINDS.join(', ')}, got "${raw}"`);
  return kind;
}

function s3Config(env: Env): S3Config {
  const region = env.S3_REGION || 'us-east-1';
  if (!/^[a-z0-9-]+$/.test(region)) throw new ConfigError(`S3_REGION must look like us-east-1, got "${region}"`);
  // AWS itself needs no endpoint; MinIO, R2, Ceph and the like do.
  const endpoint = (env.S3_ENDPOINT || `https://s3.${region}.amazonaws.com`).replace(/\/+$/, '');
  let url: URL;
  try {
    url = new URL(endpoint);
  } catch {
    throw new ConfigError(`S3_ENDPOINT must be an http:// or https:// URL, got "${endpoint}"`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new ConfigError(`S3_ENDPOINT must be an http:// or https:// URL, got "${endpoint}"`);
  }
  if (url.search || url.hash || url.username || url.password) {
    throw new ConfigError('S3_ENDPOINT must not contain credentials, a query or a fragment');
  }
  const missing = ['S3_BUCKET', 'S3_ACCESS_KEY_ID', 'S3_SECRET_ACCESS_KEY'].filter((name) => !env[name]);
  if (missing.length > 0) throw new ConfigError(`OBJECT_STORAGE=s3 requires ${missing.join(', ')}`);
  const bucket = env.S3_BUCKET!;
  if (!BUCKET_NAME.test(bucket) || bucket.includes('..')) {
    throw new ConfigError(`S3_BUCKET must be 3-63 characters of a-z, 0-9, '.' and '-', got "${bucket}"`);
  }
  return {
    endpoint,
    region,
    bucket,
    accessKeyId: env.S3_ACCESS_KEY_ID!,
    secretAccessKey: env.S3_SECRET_ACCESS_KEY!,
    forcePathStyle: bool(env, 'S3_FORCE_PATH_STYLE', true),
  };
}

/** A PostgreSQL memory size as shared_buffers takes it, between 128kB and 1GB (PGlite's memory is at most 2 GiB). */
function memorySize(env: Env, name: string, fallback: string): string {
  const raw = env[name] || fallback;
  const m = /^(\d+)(kB|MB|GB)$/.exec(raw);
  const kb = m ? Number(m[1]) * { kB: 1, MB: 1024, GB: 1024 * 1024 }[m[2] as 'kB' | 'MB' | 'GB'] : NaN;
  if (!(kb >= 128 && kb <= 1024 * 1024))
    throw new ConfigError(`${name} must be a size between 128kB and 1GB such as 16MB, got "${raw}"`);
  return raw;
}

/** An http(s) origin, optionally with a path prefix, without query, fragment or credentials; trailing slashes dropped. */
function publicUrl(env: Env, name: string): string | undefined {
  const raw = env[name];
  if (!raw) return undefined;
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new ConfigError(`${name} must be an http:// or https:// URL, got "${raw}"`);
  }
  if (
    (url.protocol !== 'http:' && url.protocol !== 'https:') ||
    url.search ||
    url.hash ||
    url.username ||
    url.password
  ) {
    throw new ConfigError(
      `${name} must be an http:// or https:// URL without credentials, query or fragment, got "${raw}"`,
    );
  }
  return raw.replace(/\/+$/, '');
}

/** Message attachments accepted by default: images, video, audio and the common documents that have a byte check. */
const DEFAULT_ATTACHMENT_TYPES = [
  'image/png',
  'image/jpeg',
  'image/webp',
  'image/gif',
  'video/mp4',
  'video/quicktime',
  'video/webm',
  'audio/mpeg',
  'audio/mp4',
  'audio/ogg',
  'audio/wav',
  'application/pdf',
  'text/plain',
] as const;

function contentTypeList(env: Env, name: string, fallback: readonly string[]): string[] {
  const raw = env[name];
  if (raw === undefined || raw.trim() === '') return [...fallback];
  const types = [
    ...new Set(
      raw
        .split(',')
        .map((t) => t.trim().toLowerCase())
        .filter(Boolean),
    ),
  ];
  const unknown = types.filter((t) => !VERIFIABLE_CONTENT_TYPES.includes(t));
  if (unknown.length > 0)
    throw new ConfigError(
      `${name}: ${unknown.join(', ')} cannot be checked byte by byte; accepted types are ${VERIFIABLE_CONTENT_TYPES.join(', ')}`,
    );
  return types;
}

function gifProvider(env: Env): GifProviderName {
  const raw = env.GIF_PROVIDER || 'tenor';
  if (raw !== 'tenor' && raw !== 'giphy')
    throw new ConfigError(`GIF_PROVIDER must be tenor (Tenor API v2) or giphy (GIPHY API v1), got "${raw}"`);
  return raw;
}

/** Comma-separated IP addresses or CIDR ranges, each checked as the fetcher will read it. */
function addressList(env: Env, name: string): string[] {
  const entries = (env[name] ?? '')
    .split(',')
    .map((e) => e.trim())
    .filter(Boolean);
  try {
    addressAllowList(entries);
  } catch (err) {
    throw new ConfigError(
      `${name}: ${(err as Error).message} (expected addresses or CIDR ranges such as 10.1.2.3,fd00::/8)`,
    );
  }
  return entries;
}

const MESSAGE_KEY_ID = /^[A-Za-z0-9_.-]{1,32}$/;

/** `id:base64key,…` (base64 or base64url of exactly 32 bytes); the first entry is the primary key. */
export function parseMessageKeys(raw: string | undefined, name = 'MESSAGE_ENCRYPTION_KEYS'): MessageKey[] {
  if (raw === undefined || raw.trim() === '') return [];
  const keys: MessageKey[] = [];
  for (const part of raw
    .split(',')
    .map((p) => p.trim())
    .filter(Boolean)) {
    const colon = part.indexOf(':');
    const id = colon > 0 ? part.slice(0, colon) : '';
    const encoded = part.slice(colon + 1);
    if (!MESSAGE_KEY_ID.test(id))
      throw new ConfigError(
        `${name}: each entry must be <id>:<base64 key> with an id of 1-32 characters A-Z a-z 0-9 _ . -`,
      );
    if (!/^[A-Za-z0-9+/_-]+={0,2}$/.test(encoded)) throw new ConfigError(`${name}: the key of "${id}" is not base64`);
    const key = Buffer.from(encoded.replace(/-/g, '+').replace(/_/g, '/'), 'base64');
    if (key.length !== 32)
      throw new ConfigError(
        `${name}: the key of "${id}" must be 32 bytes (base64 of 32 random bytes), got ${key.length}`,
      );
    if (keys.some((k) => k.id === id)) throw new ConfigError(`${name}: key id "${id}" appears twice`);
    keys.push({ id, key });
  }
  return keys;
}

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];

export function loadConfig(env: Env = process.env): Config {
  const databaseUrl = env.DATABASE_URL || undefined;
  if (databaseUrl && !/^postgres(ql)?:\/\//.test(databaseUrl)) {
    throw new ConfigError('DATABASE_URL must start with postgres:// or postgresql://');
  }
  const redisUrl = env.REDIS_URL || undefined;
  if (redisUrl && !/^rediss?:\/\//.test(redisUrl))
    throw new ConfigError('REDIS_URL must start with redis:// or rediss://');
  const adminToken = env.ADMIN_TOKEN || undefined;
  if (adminToken !== undefined && adminToken.length < 16)
    throw new ConfigError('ADMIN_TOKEN must be at least 16 characters');
  const metricsToken = env.METRICS_TOKEN || undefined;
  if (metricsToken !== undefined && metricsToken.length < 16)
    throw new ConfigError('METRICS_TOKEN must be at least 16 characters');
  const logLevel = env.LOG_LEVEL || 'info';
  if (!LOG_LEVELS.includes(logLevel)) throw new ConfigError(`LOG_LEVEL must be one of ${LOG_LEVELS.join(', ')}`);
  const nodeEnv = env.NODE_ENV || 'development';
  const dataDir = resolve(env.DATA_DIR || './data');
  const objectStorage = objectStorageKind(env);
  const storageSigningKey = env.STORAGE_SIGNING_KEY || undefined;
  if (storageSigningKey !== undefined && storageSigningKey.length < 32)
    throw new ConfigError('STORAGE_SIGNING_KEY must be at least 32 characters');
  const storageUploadUrlTtlSeconds = int(env, 'STORAGE_UPLOAD_URL_TTL_SECONDS', 900, 10, 7 * 86_400);
  const storageStagingTtlMs = int(env, 'STORAGE_STAGING_TTL_MS', 86_400_000, 60_000, 30 * 86_400_000);
  const gif = gifProvider(env);
  if (storageStagingTtlMs < storageUploadUrlTtlSeconds * 1000) {
    throw new ConfigError(
      'STORAGE_STAGING_TTL_MS must be at least STORAGE_UPLOAD_URL_TTL_SECONDS (in ms): a staged upload must outlive its upload URL',
    );
  }
  return {
    port: int(env, 'PORT', 3000, 0, 65535),
    host: env.HOST || '127.0.0.1',
    databaseUrl,
    dataDir,
    adminToken,
    metricsToken,
    redisUrl,
    logLevel,
    nodeEnv,
    validateResponses: bool(env, 'VALIDATE_RESPONSES', nodeEnv !== 'production'),
    rateLimitPerMinute: int(env, 'RATE_LIMIT_PER_MINUTE', 1000, 1, 10_000_000),
    bodyLimitBytes: int(env, 'BODY_LIMIT_BYTES', 1_048_576, 1024, 100 * 1_048_576),
    dbPoolMax: int(env, 'DB_POOL_MAX', 10, 1, 200),
    dbReadPoolMax: int(env, 'DB_READ_POOL_MAX', 10, 1, 200),
    apiKeyCacheTtlMs: int(env, 'API_KEY_CACHE_TTL_MS', 5000, 0, 300_000),
    corsOrigins: (env.CORS_ORIGINS || '')
      .split(',')
      .map((s) => s.trim())
      .filter(Boolean),
    seedDemo: bool(env, 'SEED_DEMO', true),
    objectStorage,
    objectStorageDir: env.OBJECT_STORAGE_DIR ? resolve(env.OBJECT_STORAGE_DIR) : resolve(dataDir, 'objects'),
    s3: objectStorage === 's3' ? s3Config(env) : undefined,
    storageSigningKey,
    storagePublicUrl: publicUrl(env, 'STORAGE_PUBLIC_URL'),
    storageUploadUrlTtlSeconds,
    storageDownloadUrlTtlSeconds: int(env, 'STORAGE_DOWNLOAD_URL_TTL_SECONDS', 300, 10, 7 * 86_400),
    storageStagingTtlMs,
    storageGcGraceMs: int(env, 'STORAGE_GC_GRACE_MS', 3_600_000, 0, 30 * 86_400_000),
    storageGcIntervalMs: int(env, 'STORAGE_GC_INTERVAL_MS', 3_600_000, 0, 7 * 86_400_000),
    mediaMaxBytes: int(env, 'MEDIA_MAX_BYTES', 5 * MiB, 1024, 1024 * MiB),
    socialGalleryMaxImages: int(env, 'SOCIAL_GALLERY_MAX_IMAGES', 200, 1, 100_000),
    fetchAllowPrivate: bool(env, 'FETCH_ALLOW_PRIVATE', FETCH_DEFAULTS.allowPrivate),
    fetchAllowAddresses: addressList(env, 'FETCH_ALLOW_ADDRESSES'),
    fetchTimeoutMs: int(env, 'FETCH_TIMEOUT_MS', FETCH_DEFAULTS.timeoutMs, 100, 300_000),
    fetchMaxBytes: int(env, 'FETCH_MAX_BYTES', FETCH_DEFAULTS.maxBytes, 1024, 1024 * MiB),
    fetchMaxRedirects: int(env, 'FETCH_MAX_REDIRECTS', FETCH_DEFAULTS.maxRedirects, 0, 20),
    noteImageFetchConcurrency: int(env, 'NOTE_IMAGE_FETCH_CONCURRENCY', 4, 1, 20),
    noteImagesTimeoutMs: int(env, 'NOTE_IMAGES_TIMEOUT_MS', 20_000, 100, 300_000),
    noteCaps: {
      free: int(env, 'NOTE_CAP_FREE', 100, 1, 10_000_000),
      pro: int(env, 'NOTE_CAP_PRO', 1000, 1, 10_000_000),
      pro_plus: int(env, 'NOTE_CAP_PRO_PLUS', 10_000, 1, 10_000_000),
    },
    trashRetentionDays: int(env, 'TRASH_RETENTION_DAYS', 30, 1, 3650),
    trashPurgeIntervalMs: int(env, 'TRASH_PURGE_INTERVAL_MS', 60_000, 0, 86_400_000),
    embeddedMaintenanceIntervalMs: int(env, 'EMBEDDED_MAINTENANCE_INTERVAL_MS', 900_000, 0, 86_400_000),
    jobPollIntervalMs: int(env, 'JOB_POLL_INTERVAL_MS', 1_000, 10, 60_000),
    embeddedSharedBuffers: memorySize(env, 'EMBEDDED_SHARED_BUFFERS', '16MB'),
    embeddedV8LowMemory: bool(env, 'EMBEDDED_V8_LOW_MEMORY', true),
    messageEncryptionKeys: parseMessageKeys(env.MESSAGE_ENCRYPTION_KEYS),
    messageReencryptBatchSize: int(env, 'MESSAGE_REENCRYPT_BATCH_SIZE', 500, 1, 10_000),
    messageAttachmentMaxBytes: int(env, 'MESSAGE_ATTACHMENT_MAX_BYTES', 25 * MiB, 1, 5 * 1024 * MiB),
    messageAttachmentTypes: contentTypeList(env, 'MESSAGE_ATTACHMENT_TYPES', DEFAULT_ATTACHMENT_TYPES),
    spaceIconMaxBytes: int(env, 'SPACE_ICON_MAX_BYTES', 2 * MiB, 1, 100 * MiB),
    gifProvider: gif,
    gifApiKey: env.GIF_API_KEY || undefined,
    gifApiBaseUrl: publicUrl(env, 'GIF_API_BASE_URL') ?? GIF_DEFAULT_BASE_URLS[gif],
    gifCacheTtlMs: int(env, 'GIF_CACHE_TTL_MS', 60_000, 0, 86_400_000),
    gifCacheMaxEntries: int(env, 'GIF_CACHE_MAX_ENTRIES', 500, 1, 100_000),
    linkPreviewHtmlMaxBytes: int(env, 'LINK_PREVIEW_HTML_MAX_BYTES', MiB, 1024, 10 * MiB),
    linkPreviewImageMaxBytes: int(env, 'LINK_PREVIEW_IMAGE_MAX_BYTES', 2 * MiB, 1024, 20 * MiB),
    linkPreviewConcurrency: int(env, 'LINK_PREVIEW_CONCURRENCY', 4, 1, 32),
  };
}

/**
 * Environment → typed configuration, validated once at start-up with messages an operator can act on.
 *
 * Every setting is declared once, in SETTINGS: its variable, type, default, bounds, description and
 * how it is read. `loadConfig` reads the environment through these declarations, and `npm run gen`
 * writes docs/configuration.md from them (`npm run gen:check` fails when the two drift).
 */
import { resolve } from 'node:path';
import { addressAllowList } from './net/addresses.ts';
import { VERIFIABLE_CONTENT_TYPES } from './storage/sniff.ts';

export class ConfigError extends Error {}

type Env = Record<string, string | undefined>;

const MiB = 1_048_576;

/** The sections of docs/configuration.md, in order. */
export const SETTING_GROUPS = [
  'Server',
  'HTTP',
  'Database',
  'Access',
  'Object storage',
  'Outbound fetches',
  'Notes and trash',
  'Messaging',
  'Imports and exports',
  'Events',
  'Idempotency keys',
  'Webhooks',
  'Background jobs',
  'Diagnostics',
] as const;
export type SettingGroup = (typeof SETTING_GROUPS)[number];

/** One environment variable: what docs/configuration.md says of it, and how it is read. */
export interface Setting<T> {
  readonly name: string;
  readonly group: SettingGroup;
  /** The kind of value, as the docs state it. */
  readonly type: string;
  /** The default as an operator would write it, or what happens when it is unset. */
  readonly default: string;
  /** Allowed values or range; '' when the type says it all. */
  readonly bounds: string;
  /** Markdown, one paragraph. */
  readonly description: string;
  read(env: Env): T;
}

interface Doc {
  group: SettingGroup;
  description: string;
}

const raw = (env: Env, name: string): string | undefined => {
  const value = env[name];
  return value === undefined || value === '' ? undefined : value;
};

/** 1048576 → "1048576 (1 MiB)", for the docs. */
function bytesText(n: number): string {
  if (n >= MiB && n % MiB === 0) return `${n} (${n / MiB} MiB)`;
  if (n >= 1024 && n % 1024 === 0) return `${n} (${n / 1024} KiB)`;
  return String(n);
}

function parseInteger(name: string, value: string | undefined, fallback: number, min: number, max: number): number {
  if (value === undefined) return fallback;
  if (!/^\d+$/.test(value)) throw new ConfigError(`${name} must be an integer, got "${value}"`);
  const n = Number(value);
  if (n < min || n > max) throw new ConfigError(`${name} must be between ${min} and ${max}, got ${n}`);
  return n;
}

function integer(
  name: string,
  o: Doc & { default: number; min: number; max: number; bytes?: boolean },
): Setting<number> {
  const show = o.bytes ? bytesText : String;
  return {
    name,
    group: o.group,
    type: o.bytes ? 'integer (bytes)' : 'integer',
    default: show(o.default),
    bounds: `${show(o.min)} – ${show(o.max)}`,
    description: o.description,
    read: (env) => parseInteger(name, raw(env, name), o.default, o.min, o.max),
  };
}

function parseBoolean(name: string, value: string | undefined, fallback: boolean): boolean {
  if (value === undefined) return fallback;
  if (/^(1|true|yes|on)$/i.test(value)) return true;
  if (/^(0|false|no|off)$/i.test(value)) return false;
  throw new ConfigError(`${name} must be true or false, got "${value}"`);
}

function boolean(
  name: string,
  o: (Doc & { default: boolean }) | (Doc & { default: (env: Env) => boolean; defaultText: string }),
): Setting<boolean> {
  return {
    name,
    group: o.group,
    type: 'boolean',
    default: typeof o.default === 'boolean' ? `\`${o.default}\`` : (o as { defaultText: string }).defaultText,
    bounds: '`true`/`false` (also 1/0, yes/no, on/off)',
    description: o.description,
    read: (env) => parseBoolean(name, raw(env, name), typeof o.default === 'boolean' ? o.default : o.default(env)),
  };
}

function oneOf<const V extends string>(
  name: string,
  values: readonly V[],
  o: Doc & { default: V /** The values as the error message names them. */; spoken?: string },
): Setting<V> {
  return {
    name,
    group: o.group,
    type: 'string',
    default: `\`${o.default}\``,
    bounds: values.map((v) => `\`${v}\``).join(', '),
    description: o.description,
    read: (env) => {
      const value = raw(env, name) ?? o.default;
      const found = values.find((v) => v === value);
      if (found === undefined)
        throw new ConfigError(`${name} must be ${o.spoken ?? `one of ${values.join(', ')}`}, got "${value}"`);
      return found;
    },
  };
}

/** A setting whose reading is its own (URLs, secrets, lists); the docs text is given as is. */
function custom<T>(
  name: string,
  o: Doc & { type: string; default: string; bounds?: string; read: (value: string | undefined, env: Env) => T },
): Setting<T> {
  return {
    name,
    group: o.group,
    type: o.type,
    default: o.default,
    bounds: o.bounds ?? '',
    description: o.description,
    read: (env) => o.read(raw(env, name), env),
  };
}

/** A secret of at least `min` characters; undefined when unset. */
function secret(name: string, min: number, o: Doc & { default: string }): Setting<string | undefined> {
  return custom(name, {
    ...o,
    type: 'string (secret)',
    bounds: `at least ${min} characters`,
    read: (value) => {
      if (value !== undefined && value.length < min)
        throw new ConfigError(`${name} must be at least ${min} characters`);
      return value;
    },
  });
}

/** An http(s) origin, optionally with a path prefix, without query, fragment or credentials; trailing slashes dropped. */
function httpUrl(name: string, value: string | undefined): string | undefined {
  if (value === undefined) return undefined;
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new ConfigError(`${name} must be an http:// or https:// URL, got "${value}"`);
  }
  if (
    (url.protocol !== 'http:' && url.protocol !== 'https:') ||
    url.search ||
    url.hash ||
    url.username ||
    url.password
  ) {
    throw new ConfigError(
      `${name} must be an http:// or https:// URL without credentials, query or fragment, got "${value}"`,
    );
  }
  return value.replace(/\/+$/, '');
}

/** A PostgreSQL memory size as shared_buffers takes it, between 128kB and 1GB (PGlite's memory is at most 2 GiB). */
function memorySize(name: string, value: string): string {
  const m = /^(\d+)(kB|MB|GB)$/.exec(value);
  const kb = m ? Number(m[1]) * { kB: 1, MB: 1024, GB: 1024 * 1024 }[m[2] as 'kB' | 'MB' | 'GB'] : NaN;
  if (!(kb >= 128 && kb <= 1024 * 1024))
    throw new ConfigError(`${name} must be a size between 128kB and 1GB such as 16MB, got "${value}"`);
  return value;
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

function contentTypeList(name: string, value: string | undefined, fallback: readonly string[]): string[] {
  if (value === undefined || value.trim() === '') return [...fallback];
  const types = [
    ...new Set(
      value
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

/** Comma-separated IP addresses or CIDR ranges, each checked as the fetcher will read it. */
function addressList(name: string, value: string | undefined): string[] {
  const entries = (value ?? '')
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

/** One key of the message keyring. */
export interface MessageKey {
  /** Stored with each ciphertext, so a read finds the key it was written with. */
  id: string;
  /** 32 bytes (AES-256). */
  key: Buffer;
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

export type GifProviderName = 'tenor' | 'giphy';

/** The API each GIF provider answers at unless GIF_API_BASE_URL says otherwise. */
export const GIF_DEFAULT_BASE_URLS: Record<GifProviderName, string> = {
  tenor: 'https://tenor.googleapis.com/v2',
  giphy: 'https://api.giphy.com/v1/gifs',
};

/** Outbound fetch limits when nothing is configured; the fetcher uses the same values as its own defaults. */
export const FETCH_DEFAULTS = { allowPrivate: false, timeoutMs: 10_000, maxBytes: 10 * MiB, maxRedirects: 3 } as const;

// S3 bucket naming rules; a virtual-host-style bucket must also be a valid DNS label sequence.
const BUCKET_NAME = /^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/;

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;

// Settings other settings' defaults derive from.
const DATA_DIR = custom('DATA_DIR', {
  group: 'Database',
  type: 'path',
  default: '`./data`',
  description:
    'The embedded database files, the generated admin token, signing and message keys, media (see `OBJECT_STORAGE_DIR`) and the `lock` file that keeps a second process out (docs/operations.md).',
  read: (value) => resolve(value ?? './data'),
});

const S3_REGION = custom('S3_REGION', {
  group: 'Object storage',
  type: 'string',
  default: '`us-east-1`',
  description: 'Region used in request signatures.',
  read: (value) => {
    const region = value ?? 'us-east-1';
    if (!/^[a-z0-9-]+$/.test(region)) throw new ConfigError(`S3_REGION must look like us-east-1, got "${region}"`);
    return region;
  },
});

const GIF_PROVIDER = oneOf('GIF_PROVIDER', ['tenor', 'giphy'] as const satisfies readonly GifProviderName[], {
  group: 'Messaging',
  default: 'tenor',
  spoken: 'tenor (Tenor API v2) or giphy (GIPHY API v1)',
  description:
    'The GIF provider of the messaging GIF proxy: Tenor API v2 or GIPHY API v1 (same `Gif` shape; with GIPHY, page cursors are result offsets).',
});

/** Every setting, by the Config field it fills (some fields combine several: see loadConfig). */
export const SETTINGS = {
  // Server
  port: integer('PORT', {
    group: 'Server',
    default: 3000,
    min: 0,
    max: 65535,
    description: 'Listening port (`0` picks a free one).',
  }),
  host: custom('HOST', {
    group: 'Server',
    type: 'string',
    default: '`127.0.0.1`',
    description: 'Listening address (`0.0.0.0` or `::` to expose the server beyond this machine).',
    read: (value) => value ?? '127.0.0.1',
  }),
  logLevel: oneOf('LOG_LEVEL', LOG_LEVELS, {
    group: 'Server',
    default: 'info',
    description:
      'pino log level; logs are JSON lines on standard output, each written as it is logged (synchronously: none is lost if the process dies, and a reader of standard output that stalls stalls the server).',
  }),
  nodeEnv: custom('NODE_ENV', {
    group: 'Server',
    type: 'string',
    default: '`development`',
    description: '`production` turns response validation off by default (`VALIDATE_RESPONSES`).',
    read: (value) => value ?? 'development',
  }),
  validateResponses: boolean('VALIDATE_RESPONSES', {
    group: 'Server',
    default: (env) => (raw(env, 'NODE_ENV') ?? 'development') !== 'production',
    defaultText: '`true` unless `NODE_ENV=production`',
    description:
      'Validate every response against the contract; a violation is answered with a 500 and logged (development and tests).',
  }),
  seedDemo: boolean('SEED_DEMO', {
    group: 'Server',
    default: true,
    description:
      'Create the `demo` account (and print an all-scopes key) on the first start of an empty embedded database.',
  }),
  seedExamples: boolean('SEED_EXAMPLES', {
    group: 'Server',
    default: false,
    description:
      "Fixture mode: on an empty database (embedded or PostgreSQL; refused otherwise), create the accounts, keys and data the contract's examples name, with their ids, and print the keys and the admin token at start, so that every documented example request answers as documented (docs/contract-testing.md). The keys, and the key that signs storage URLs (filesystem object storage; `STORAGE_SIGNING_KEY` must be unset), are fixed and published: never on a server others can reach. Replaces `SEED_DEMO`.",
  }),
  corsOrigins: custom('CORS_ORIGINS', {
    group: 'Server',
    type: 'comma-separated origins',
    default: 'unset (no CORS headers)',
    description: 'Browser origins allowed by CORS (`*` for any).',
    read: (value) =>
      (value ?? '')
        .split(',')
        .map((s) => s.trim())
        .filter(Boolean),
  }),

  // HTTP
  bodyLimitBytes: integer('BODY_LIMIT_BYTES', {
    group: 'HTTP',
    default: MiB,
    min: 1024,
    max: 100 * MiB,
    bytes: true,
    description: 'Largest JSON request body (413 above it).',
  }),
  httpHeadersTimeoutMs: integer('HTTP_HEADERS_TIMEOUT_MS', {
    group: 'HTTP',
    default: 10_000,
    min: 1000,
    max: 600_000,
    description:
      "How long a client may take to send a request's headers (Node's own default is 60 s); Node then answers 408 and closes the connection. At most `HTTP_UPLOAD_TIMEOUT_MS`.",
  }),
  httpRequestTimeoutMs: integer('HTTP_REQUEST_TIMEOUT_MS', {
    group: 'HTTP',
    default: 30_000,
    min: 1000,
    max: 3_600_000,
    description:
      "How long a client may take to send a request body once its headers are in, on every route but the signed upload. Past it the server answers 408 `REQUEST_TIMEOUT`, closes the connection and has changed nothing. Node's own bound is 300 s for the whole request, which lets a client that trickles a body hold a connection for five minutes. Media uploads (`PUT …/media`, at most `MEDIA_MAX_BYTES`) must arrive within it too.",
  }),
  httpUploadTimeoutMs: integer('HTTP_UPLOAD_TIMEOUT_MS', {
    group: 'HTTP',
    default: 900_000,
    min: 1000,
    max: 86_400_000,
    description:
      "How long a client may take to send a whole request to the signed upload route (`PUT /storage/v1/objects/{key}`, filesystem storage). That route streams message attachments of up to `MESSAGE_ATTACHMENT_MAX_BYTES` (25 MiB) to disk, often from phones on slow links: 15 minutes is 25 MiB at about 250 kbit/s, which the JSON routes' 30 s would cut off. It is also the outer bound of every other request. At least `HTTP_REQUEST_TIMEOUT_MS`.",
  }),
  httpKeepAliveTimeoutMs: integer('HTTP_KEEP_ALIVE_TIMEOUT_MS', {
    group: 'HTTP',
    default: 5_000,
    min: 1000,
    max: 600_000,
    description:
      "How long an idle kept-alive connection stays open after a response. Behind a load balancer or proxy that reuses connections, set it above the proxy's idle timeout (65000 behind a 60 s one), or the proxy may send a request on a connection the server is closing.",
  }),

  // Database
  databaseUrl: custom('DATABASE_URL', {
    group: 'Database',
    type: 'URL',
    default: 'unset (embedded PGlite in `DATA_DIR`)',
    bounds: '`postgres://…` or `postgresql://…`',
    description:
      'PostgreSQL 15 or later. Unset: the embedded database (PGlite) under `DATA_DIR`, one process at a time.',
    read: (value) => {
      if (value !== undefined && !/^postgres(ql)?:\/\//.test(value))
        throw new ConfigError('DATABASE_URL must start with postgres:// or postgresql://');
      return value;
    },
  }),
  dataDir: DATA_DIR,
  dbPoolMax: integer('DB_POOL_MAX', {
    group: 'Database',
    default: 10,
    min: 1,
    max: 200,
    description: 'PostgreSQL connection pool size.',
  }),
  dbReadPoolMax: integer('DB_READ_POOL_MAX', {
    group: 'Database',
    default: 10,
    min: 1,
    max: 200,
    description:
      "PostgreSQL only: size of the second pool, which runs the hot reads' named prepared statements with generic plans (docs/data-access.md). An instance opens up to `DB_POOL_MAX + DB_READ_POOL_MAX` connections.",
  }),
  embeddedSharedBuffers: custom('EMBEDDED_SHARED_BUFFERS', {
    group: 'Database',
    type: 'size',
    default: '`16MB`',
    bounds: '`128kB` – `1GB`',
    description:
      "Embedded database only: PGlite's `shared_buffers`, allocated and resident in the server process from the start. PostgreSQL's default `128MB` costs about 120 MB more memory for no throughput the API's reads can measure.",
    read: (value) => memorySize('EMBEDDED_SHARED_BUFFERS', value ?? '16MB'),
  }),
  embeddedV8LowMemory: boolean('EMBEDDED_V8_LOW_MEMORY', {
    group: 'Database',
    default: true,
    description:
      "Embedded database only: V8 compiles PGlite's WebAssembly with its baseline compiler only and lets the heap grow to 1.5× its live size between full collections. `false` leaves V8 as started: about 75 MB more memory idle and 150 MB more under load; CPU-heavy queries (large scans) run 1.1–1.4× faster.",
  }),

  // Access
  adminToken: secret('ADMIN_TOKEN', 16, {
    group: 'Access',
    default: 'unset',
    description:
      'Operator token for `/admin/v1`. Unset with the embedded default: generated once, kept in `DATA_DIR/admin-token` and printed at the first start. Unset with `DATABASE_URL`: the admin API is disabled.',
  }),
  metricsToken: secret('METRICS_TOKEN', 16, {
    group: 'Access',
    default: 'unset (`/metrics` is open)',
    description: 'Bearer token `GET /metrics` requires. Unset: keep `/metrics` off the public network.',
  }),
  redisUrl: custom('REDIS_URL', {
    group: 'Access',
    type: 'URL',
    default: 'unset',
    bounds: '`redis://…` or `rediss://…`',
    description:
      'Rate-limit counters in Redis. Unset: in PostgreSQL with `DATABASE_URL`, in memory on the embedded default. Redis must answer at start (else the server exits 1 naming `REDIS_URL`) and is part of `/readyz`.',
    read: (value) => {
      if (value !== undefined && !/^rediss?:\/\//.test(value))
        throw new ConfigError('REDIS_URL must start with redis:// or rediss://');
      return value;
    },
  }),
  rateLimitPerMinute: integer('RATE_LIMIT_PER_MINUTE', {
    group: 'Access',
    default: 1000,
    min: 1,
    max: 10_000_000,
    description: 'Requests per API key per 60-second window.',
  }),
  apiKeyCacheTtlMs: integer('API_KEY_CACHE_TTL_MS', {
    group: 'Access',
    default: 5000,
    min: 0,
    max: 300_000,
    description:
      'How long an authenticated key is served from the in-process cache (`0` disables it). Revocations reach every instance at once on PostgreSQL (`NOTIFY`); this is the bound when that fails.',
  }),

  // Object storage
  objectStorage: oneOf('OBJECT_STORAGE', ['filesystem', 's3', 'none'], {
    group: 'Object storage',
    default: 'filesystem',
    description:
      'Where media lives (avatars, banners, gallery and re-hosted note images, message attachments). `none`: media endpoints answer 503.',
  }),
  objectStorageDir: custom('OBJECT_STORAGE_DIR', {
    group: 'Object storage',
    type: 'path',
    default: '`DATA_DIR/objects`',
    description: 'Root directory of the filesystem backend.',
    read: (value, env) => resolve(value ?? resolve(DATA_DIR.read(env), 'objects')),
  }),
  s3Endpoint: custom('S3_ENDPOINT', {
    group: 'Object storage',
    type: 'URL',
    default: '`https://s3.<S3_REGION>.amazonaws.com`',
    description: 'S3-compatible API base URL (MinIO, Ceph RGW, R2, …).',
    read: (value, env) => {
      const region = S3_REGION.read(env);
      const endpoint = (value ?? `https://s3.${region}.amazonaws.com`).replace(/\/+$/, '');
      let url: URL;
      try {
        url = new URL(endpoint);
      } catch {
        throw new ConfigError(`S3_ENDPOINT must be an http:// or https:// URL, got "${endpoint}"`);
      }
      if (url.protocol !== 'http:' && url.protocol !== 'https:')
        throw new ConfigError(`S3_ENDPOINT must be an http:// or https:// URL, got "${endpoint}"`);
      if (url.search || url.hash || url.username || url.password)
        throw new ConfigError('S3_ENDPOINT must not contain credentials, a query or a fragment');
      return endpoint;
    },
  }),
  s3Region: S3_REGION,
  s3Bucket: custom('S3_BUCKET', {
    group: 'Object storage',
    type: 'string',
    default: 'unset',
    bounds: "3–63 characters of a-z, 0-9, '.' and '-'",
    description:
      'Required with `OBJECT_STORAGE=s3`. Grant `s3:ListBucket` too, so that a missing object answers 404 rather than 403.',
    read: (value) => {
      if (value !== undefined && (!BUCKET_NAME.test(value) || value.includes('..')))
        throw new ConfigError(`S3_BUCKET must be 3-63 characters of a-z, 0-9, '.' and '-', got "${value}"`);
      return value;
    },
  }),
  s3AccessKeyId: custom('S3_ACCESS_KEY_ID', {
    group: 'Object storage',
    type: 'string',
    default: 'unset',
    description: 'Required with `OBJECT_STORAGE=s3`.',
    read: (value) => value,
  }),
  s3SecretAccessKey: custom('S3_SECRET_ACCESS_KEY', {
    group: 'Object storage',
    type: 'string (secret)',
    default: 'unset',
    description: 'Required with `OBJECT_STORAGE=s3`.',
    read: (value) => value,
  }),
  s3ForcePathStyle: boolean('S3_FORCE_PATH_STYLE', {
    group: 'Object storage',
    default: true,
    description: '`true`: `<endpoint>/<bucket>/<key>`; `false`: virtual-host style `<bucket>.<endpoint host>/<key>`.',
  }),
  storageSigningKey: secret('STORAGE_SIGNING_KEY', 32, {
    group: 'Object storage',
    default: 'generated into `DATA_DIR/storage-signing-key`',
    description:
      'Filesystem storage only: HMAC key of the upload and download URLs the server signs itself. Set it, the same on every instance, when several instances serve one `OBJECT_STORAGE_DIR`. Refused with `SEED_EXAMPLES`, which signs with a published key.',
  }),
  storagePublicUrl: custom('STORAGE_PUBLIC_URL', {
    group: 'Object storage',
    type: 'URL',
    default: 'unset (relative URLs)',
    description:
      'Filesystem storage only: the origin clients reach this server at (e.g. `https://api.example.org`), making signed URLs absolute.',
    read: (value) => httpUrl('STORAGE_PUBLIC_URL', value),
  }),
  storageUploadUrlTtlSeconds: integer('STORAGE_UPLOAD_URL_TTL_SECONDS', {
    group: 'Object storage',
    default: 900,
    min: 10,
    max: 7 * 86_400,
    description: 'How long a presigned upload URL works.',
  }),
  storageDownloadUrlTtlSeconds: integer('STORAGE_DOWNLOAD_URL_TTL_SECONDS', {
    group: 'Object storage',
    default: 300,
    min: 10,
    max: 7 * 86_400,
    description: 'How long a presigned download URL works.',
  }),
  storageStagingTtlMs: integer('STORAGE_STAGING_TTL_MS', {
    group: 'Object storage',
    default: 86_400_000,
    min: 60_000,
    max: 30 * 86_400_000,
    description:
      "How long a staged upload waits to be used before garbage collection deletes it; at least the upload URL's life (`STORAGE_UPLOAD_URL_TTL_SECONDS`).",
  }),
  storageGcGraceMs: integer('STORAGE_GC_GRACE_MS', {
    group: 'Object storage',
    default: 3_600_000,
    min: 0,
    max: 30 * 86_400_000,
    description:
      'A re-hosted note image no note links to is kept this long after it was last stored (its note may be about to commit).',
  }),
  storageGcIntervalMs: integer('STORAGE_GC_INTERVAL_MS', {
    group: 'Object storage',
    default: 3_600_000,
    min: 0,
    max: 7 * 86_400_000,
    description: 'How often storage garbage collection runs (a schedule of the durable job queue; `0` turns it off).',
  }),
  mediaMaxBytes: integer('MEDIA_MAX_BYTES', {
    group: 'Object storage',
    default: 5 * MiB,
    min: 1024,
    max: 1024 * MiB,
    bytes: true,
    description: 'Largest media upload accepted: member avatars and banners, social gallery images.',
  }),
  socialGalleryMaxImages: integer('SOCIAL_GALLERY_MAX_IMAGES', {
    group: 'Object storage',
    default: 200,
    min: 1,
    max: 100_000,
    description: "Images one account's social gallery holds (a new image beyond it is 403 until one is deleted).",
  }),

  // Outbound fetches
  fetchAllowPrivate: boolean('FETCH_ALLOW_PRIVATE', {
    group: 'Outbound fetches',
    default: FETCH_DEFAULTS.allowPrivate,
    description:
      'Let outbound fetches (note image re-hosting, link previews) reach loopback and private addresses. Only for tests and trusted intranets.',
  }),
  fetchAllowAddresses: custom('FETCH_ALLOW_ADDRESSES', {
    group: 'Outbound fetches',
    type: 'comma-separated addresses or CIDR ranges',
    default: 'unset',
    description:
      'Addresses outbound fetches may reach although private (one internal proxy, say: `10.1.2.3,fd00::/8`); every other private address stays refused, redirect targets included.',
    read: (value) => addressList('FETCH_ALLOW_ADDRESSES', value),
  }),
  fetchTimeoutMs: integer('FETCH_TIMEOUT_MS', {
    group: 'Outbound fetches',
    default: FETCH_DEFAULTS.timeoutMs,
    min: 100,
    max: 300_000,
    description: 'Deadline of one outbound fetch, redirects included.',
  }),
  fetchMaxBytes: integer('FETCH_MAX_BYTES', {
    group: 'Outbound fetches',
    default: FETCH_DEFAULTS.maxBytes,
    min: 1024,
    max: 1024 * MiB,
    bytes: true,
    description: 'Largest response body an outbound fetch reads.',
  }),
  fetchMaxRedirects: integer('FETCH_MAX_REDIRECTS', {
    group: 'Outbound fetches',
    default: FETCH_DEFAULTS.maxRedirects,
    min: 0,
    max: 20,
    description: 'Redirects an outbound fetch follows.',
  }),

  // Notes and trash
  noteImageFetchConcurrency: integer('NOTE_IMAGE_FETCH_CONCURRENCY', {
    group: 'Notes and trash',
    default: 4,
    min: 1,
    max: 20,
    description: 'External images of one note fetched at the same time while they are re-hosted.',
  }),
  noteImagesTimeoutMs: integer('NOTE_IMAGES_TIMEOUT_MS', {
    group: 'Notes and trash',
    default: 20_000,
    min: 100,
    max: 300_000,
    description:
      'Deadline for re-hosting all external images of one note (400 beyond it, nothing saved); each fetch also has `FETCH_TIMEOUT_MS`.',
  }),
  noteCapFree: integer('NOTE_CAP_FREE', {
    group: 'Notes and trash',
    default: 100,
    min: 1,
    max: 10_000_000,
    description:
      'Active notes one member may be linked to on the Free plan (403 `NOTE_LIMIT_REACHED` on create beyond it; 400 on restore or PATCH).',
  }),
  noteCapPro: integer('NOTE_CAP_PRO', {
    group: 'Notes and trash',
    default: 1000,
    min: 1,
    max: 10_000_000,
    description: 'The same on the Pro plan.',
  }),
  noteCapProPlus: integer('NOTE_CAP_PRO_PLUS', {
    group: 'Notes and trash',
    default: 10_000,
    min: 1,
    max: 10_000_000,
    description: 'The same on the Pro+ plan.',
  }),
  trashRetentionDays: integer('TRASH_RETENTION_DAYS', {
    group: 'Notes and trash',
    default: 30,
    min: 1,
    max: 3650,
    description:
      'Days a trashed item is kept before the retention job purges it; an account can override it (`PATCH /api/v1/trash/settings`).',
  }),

  // Messaging
  messageEncryptionKeys: custom('MESSAGE_ENCRYPTION_KEYS', {
    group: 'Messaging',
    type: 'comma-separated `<id>:<base64 key>`',
    default: 'embedded: generated into `DATA_DIR/message-encryption-keys`; PostgreSQL: required',
    bounds: 'keys of 32 bytes; ids of 1–32 characters `A-Z a-z 0-9 _ . -`',
    description:
      'Keys that encrypt message text (and link previews) at rest with AES-256-GCM; the first is the primary for new writes. Rotate by putting a new key first and keeping the old ones: a re-encryption job rewrites old rows (docs/messaging.md).',
    read: (value) => parseMessageKeys(value),
  }),
  messageReencryptBatchSize: integer('MESSAGE_REENCRYPT_BATCH_SIZE', {
    group: 'Messaging',
    default: 500,
    min: 1,
    max: 10_000,
    description: 'Messages one re-encryption batch (one transaction) rewrites after a key rotation.',
  }),
  importMaxBytes: integer('IMPORT_MAX_BYTES', {
    group: 'Imports and exports',
    default: 200 * MiB,
    min: 1,
    max: 2 * 1024 * MiB,
    bytes: true,
    description:
      'Largest export file `POST /api/v1/imports` accepts (413 above; a gzipped upload counts its unzipped size). The upload goes through a temporary file (TMPDIR needs this much free space per upload in flight, and the job copies the stored file there again) and is never held in memory; the import job reads the file a document at a time but holds the mapped entities while it writes them: a Simply Plural export of 87 MB took the server to 705 MB resident (992 MB when imported again; docs/portability.md), so size the server for about ten times the largest file you expect.',
  }),
  exportTtlHours: integer('EXPORT_TTL_HOURS', {
    group: 'Imports and exports',
    default: 72,
    min: 1,
    max: 24 * 365,
    description:
      'Hours a finished native export (`POST /api/v1/exports`) stays downloadable; storage garbage collection then deletes its archive.',
  }),
  messageAttachmentMaxBytes: integer('MESSAGE_ATTACHMENT_MAX_BYTES', {
    group: 'Messaging',
    default: 25 * MiB,
    min: 1,
    max: 5 * 1024 * MiB,
    bytes: true,
    description: 'Largest message attachment an upload intent accepts.',
  }),
  messageAttachmentTypes: custom('MESSAGE_ATTACHMENT_TYPES', {
    group: 'Messaging',
    type: 'comma-separated content types',
    default: DEFAULT_ATTACHMENT_TYPES.map((t) => `\`${t}\``).join(', '),
    bounds: `types with a byte check: ${VERIFIABLE_CONTENT_TYPES.map((t) => `\`${t}\``).join(', ')}`,
    description: 'Content types a message attachment may declare; any other stops start-up.',
    read: (value) => contentTypeList('MESSAGE_ATTACHMENT_TYPES', value, DEFAULT_ATTACHMENT_TYPES),
  }),
  spaceIconMaxBytes: integer('SPACE_ICON_MAX_BYTES', {
    group: 'Messaging',
    default: 2 * MiB,
    min: 1,
    max: 100 * MiB,
    bytes: true,
    description: 'Largest messaging space icon an upload intent accepts (PNG, JPEG, WebP or GIF).',
  }),
  gifProvider: GIF_PROVIDER,
  gifApiKey: custom('GIF_API_KEY', {
    group: 'Messaging',
    type: 'string (secret)',
    default: 'unset (the GIF routes answer 503)',
    description: "The GIF provider's API key.",
    read: (value) => value,
  }),
  gifApiBaseUrl: custom('GIF_API_BASE_URL', {
    group: 'Messaging',
    type: 'URL',
    default: `per provider: ${Object.values(GIF_DEFAULT_BASE_URLS)
      .map((u) => `\`${u}\``)
      .join(', ')}`,
    description:
      "Base URL of the provider's API (operator-chosen, so it may be a private address; redirects are not followed).",
    read: (value, env) => httpUrl('GIF_API_BASE_URL', value) ?? GIF_DEFAULT_BASE_URLS[GIF_PROVIDER.read(env)],
  }),
  gifCacheTtlMs: integer('GIF_CACHE_TTL_MS', {
    group: 'Messaging',
    default: 60_000,
    min: 0,
    max: 86_400_000,
    description: 'How long a provider answer is reused (`0` turns the cache off).',
  }),
  gifCacheMaxEntries: integer('GIF_CACHE_MAX_ENTRIES', {
    group: 'Messaging',
    default: 500,
    min: 1,
    max: 100_000,
    description: 'Most provider answers cached in memory per process; the oldest go first.',
  }),
  linkPreviewHtmlMaxBytes: integer('LINK_PREVIEW_HTML_MAX_BYTES', {
    group: 'Messaging',
    default: MiB,
    min: 1024,
    max: 10 * MiB,
    bytes: true,
    description:
      'Most bytes of a linked page a link-preview fetch reads: past it the connection is dropped and the start of the page is parsed.',
  }),
  linkPreviewImageMaxBytes: integer('LINK_PREVIEW_IMAGE_MAX_BYTES', {
    group: 'Messaging',
    default: 2 * MiB,
    min: 1024,
    max: 20 * MiB,
    bytes: true,
    description:
      'Largest preview image re-hosted into object storage; a larger one leaves the preview without an image.',
  }),
  linkPreviewConcurrency: integer('LINK_PREVIEW_CONCURRENCY', {
    group: 'Messaging',
    default: 4,
    min: 1,
    max: 32,
    description: 'Link-preview fetches one process runs at the same time; each also has `FETCH_TIMEOUT_MS`.',
  }),

  // Events
  eventRetentionHours: integer('EVENT_RETENTION_HOURS', {
    group: 'Events',
    default: 72,
    min: 1,
    max: 8760,
    description:
      'Hours the event log keeps an event: a stream resumed from an older cursor gets a `reset` message. Pruned by a recurring job (`EVENT_PRUNE_INTERVAL_MS`).',
  }),
  eventsMaxStreamsPerKey: integer('EVENTS_MAX_STREAMS_PER_KEY', {
    group: 'Events',
    default: 5,
    min: 1,
    max: 1000,
    description: 'Event streams (`GET /api/v1/events`) one API key may have open at once on one instance; 429 beyond.',
  }),
  eventsHeartbeatSeconds: integer('EVENTS_HEARTBEAT_SECONDS', {
    group: 'Events',
    default: 15,
    min: 1,
    max: 300,
    description: 'Seconds between the comment lines an idle event stream sends, so that proxies keep it open.',
  }),
  eventPruneIntervalMs: integer('EVENT_PRUNE_INTERVAL_MS', {
    group: 'Events',
    default: 600_000,
    min: 0,
    max: 86_400_000,
    description:
      'How often events older than `EVENT_RETENTION_HOURS` are deleted: a recurring job on the durable queue (`0` turns it off).',
  }),

  // Idempotency keys
  idempotencyTtlHours: integer('IDEMPOTENCY_TTL_HOURS', {
    group: 'Idempotency keys',
    default: 24,
    min: 1,
    max: 720,
    description:
      "Hours a POST's response stays stored under its `Idempotency-Key`: a retry with the key within this time gets it replayed. Pruned by a recurring job (`IDEMPOTENCY_PRUNE_INTERVAL_MS`).",
  }),
  idempotencyPruneIntervalMs: integer('IDEMPOTENCY_PRUNE_INTERVAL_MS', {
    group: 'Idempotency keys',
    default: 600_000,
    min: 0,
    max: 86_400_000,
    description:
      'How often idempotency keys older than `IDEMPOTENCY_TTL_HOURS` are deleted: a recurring job on the durable queue (`0` turns it off).',
  }),

  // Webhooks
  webhookTimeoutMs: integer('WEBHOOK_TIMEOUT_MS', {
    group: 'Webhooks',
    default: 10_000,
    min: 100,
    max: 60_000,
    description:
      'How long one webhook delivery attempt may take, connecting and answering included; longer is a failed attempt (`timeout`), retried.',
  }),
  webhookDisableAfterHours: integer('WEBHOOK_DISABLE_AFTER_HOURS', {
    group: 'Webhooks',
    default: 72,
    min: 1,
    max: 8760,
    description:
      'A webhook whose deliveries keep failing with no success for this long is disabled (`disabledReason: failing`).',
  }),
  webhookConcurrency: integer('WEBHOOK_CONCURRENCY', {
    group: 'Webhooks',
    default: 8,
    min: 1,
    max: 256,
    description:
      'Webhooks one process sends to at the same time (each webhook receives its deliveries one at a time, in order).',
  }),
  webhookSweepIntervalMs: integer('WEBHOOK_SWEEP_INTERVAL_MS', {
    group: 'Webhooks',
    default: 2_000,
    min: 100,
    max: 600_000,
    description:
      'How often the recurring `webhook_sweep` job queues the delivery job of every webhook whose next delivery (a retry, say) is due.',
  }),

  // Background jobs
  jobPollIntervalMs: integer('JOB_POLL_INTERVAL_MS', {
    group: 'Background jobs',
    default: 1_000,
    min: 10,
    max: 60_000,
    description: 'How often an idle job worker looks for due jobs and recurring schedules.',
  }),
  trashPurgeIntervalMs: integer('TRASH_PURGE_INTERVAL_MS', {
    group: 'Background jobs',
    default: 60_000,
    min: 0,
    max: 86_400_000,
    description:
      'How often the trash retention purge runs: a recurring job on the durable queue, so one instance runs each slot however many are up (`0` turns it off).',
  }),
  embeddedMaintenanceIntervalMs: integer('EMBEDDED_MAINTENANCE_INTERVAL_MS', {
    group: 'Background jobs',
    default: 900_000,
    min: 0,
    max: 86_400_000,
    description:
      'Embedded database only: how often `VACUUM (ANALYZE)` runs, table by table (PGlite has no autovacuum; without statistics the planner can skip indexes). `0` turns it off.',
  }),

  // Diagnostics
  sqlCaptureFile: custom('SQL_CAPTURE_FILE', {
    group: 'Diagnostics',
    type: 'path',
    default: 'unset',
    description:
      'For `npm run bench`: append every SQL statement the server runs (with its values, and the name of a prepared statement) to this file as JSON lines.',
    read: (value) => value,
  }),
} as const satisfies Record<string, Setting<unknown>>;

type Settings = typeof SETTINGS;
type Values = { -readonly [K in keyof Settings]: ReturnType<Settings[K]['read']> };

/** Settings that Config holds combined rather than one field each. */
type Combined =
  | 'noteCapFree'
  | 'noteCapPro'
  | 'noteCapProPlus'
  | 's3Endpoint'
  | 's3Region'
  | 's3Bucket'
  | 's3AccessKeyId'
  | 's3SecretAccessKey'
  | 's3ForcePathStyle';

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

/** The typed configuration: one field per setting of SETTINGS (see there), note caps and S3 combined. */
export type Config = Omit<Values, Combined> & {
  /** Active notes one member may be linked to, per plan. */
  noteCaps: { free: number; pro: number; pro_plus: number };
  /** The S3-compatible bucket; present exactly when objectStorage is `s3`. */
  s3: S3Config | undefined;
};

export function loadConfig(env: Env = process.env): Config {
  const values = Object.fromEntries(
    Object.entries(SETTINGS).map(([key, setting]) => [key, setting.read(env)]),
  ) as Values;
  const {
    noteCapFree,
    noteCapPro,
    noteCapProPlus,
    s3Endpoint,
    s3Region,
    s3Bucket,
    s3AccessKeyId,
    s3SecretAccessKey,
    s3ForcePathStyle,
    ...config
  } = values;
  if (config.storageStagingTtlMs < config.storageUploadUrlTtlSeconds * 1000) {
    throw new ConfigError(
      'STORAGE_STAGING_TTL_MS must be at least STORAGE_UPLOAD_URL_TTL_SECONDS (in ms): a staged upload must outlive its upload URL',
    );
  }
  if (config.seedExamples && config.storageSigningKey) {
    throw new ConfigError(
      'SEED_EXAMPLES=true signs storage URLs with the published example key (server/fixtures/keys.ts); unset STORAGE_SIGNING_KEY',
    );
  }
  if (config.httpHeadersTimeoutMs > config.httpUploadTimeoutMs) {
    throw new ConfigError('HTTP_HEADERS_TIMEOUT_MS must be at most HTTP_UPLOAD_TIMEOUT_MS');
  }
  if (config.httpUploadTimeoutMs < config.httpRequestTimeoutMs) {
    throw new ConfigError('HTTP_UPLOAD_TIMEOUT_MS must be at least HTTP_REQUEST_TIMEOUT_MS');
  }
  let s3: S3Config | undefined;
  if (config.objectStorage === 's3') {
    const missing = (
      [
        ['S3_BUCKET', s3Bucket],
        ['S3_ACCESS_KEY_ID', s3AccessKeyId],
        ['S3_SECRET_ACCESS_KEY', s3SecretAccessKey],
      ] as const
    )
      .filter(([, value]) => !value)
      .map(([name]) => name);
    if (missing.length > 0) throw new ConfigError(`OBJECT_STORAGE=s3 requires ${missing.join(', ')}`);
    s3 = {
      endpoint: s3Endpoint,
      region: s3Region,
      bucket: s3Bucket!,
      accessKeyId: s3AccessKeyId!,
      secretAccessKey: s3SecretAccessKey!,
      forcePathStyle: s3ForcePathStyle,
    };
  }
  return { ...config, noteCaps: { free: noteCapFree, pro: noteCapPro, pro_plus: noteCapProPlus }, s3 };
}

/** docs/configuration.md: every setting of SETTINGS by group (written by `npm run gen`). */
export function configurationReference(): string {
  const cell = (text: string) => text.replace(/\|/g, '\\|').replace(/\n/g, ' ');
  const lines = [
    '# Configuration',
    '',
    '<!-- Generated by `npm run gen` from the declarations in server/config.ts. Do not edit by hand. -->',
    '',
    'The server reads its settings from environment variables when it starts and refuses to start',
    '(exit code 2, one line naming the variable) when one is invalid. An empty variable counts as unset.',
    '',
  ];
  for (const group of SETTING_GROUPS) {
    lines.push(`## ${group}`, '', '| Variable | Type | Default | Allowed | Description |', '|---|---|---|---|---|');
    for (const s of Object.values(SETTINGS) as Setting<unknown>[]) {
      if (s.group !== group) continue;
      lines.push(
        `| \`${s.name}\` | ${cell(s.type)} | ${cell(s.default)} | ${cell(s.bounds)} | ${cell(s.description)} |`,
      );
    }
    lines.push('');
  }
  return lines.join('\n');
}

/** Environment → typed configuration, validated once at start-up with messages an operator can act on. */
import { resolve } from 'node:path';

export interface Config {
  port: number;
  host: string;
  /** postgres://… when set; otherwise the embedded PGlite database under dataDir. */
  databaseUrl: string | undefined;
  dataDir: string;
  adminToken: string | undefined;
  redisUrl: string | undefined;
  logLevel: string;
  nodeEnv: string;
  /** Response validation against the contract: on except in production unless forced. */
  validateResponses: boolean;
  rateLimitPerMinute: number;
  bodyLimitBytes: number;
  dbPoolMax: number;
  /** How long an authenticated key may be served from the in-process cache. */
  apiKeyCacheTtlMs: number;
  /** Comma-separated origins allowed by CORS; empty means no CORS headers. */
  corsOrigins: string[];
  /** Seed a demo account on the first start of an empty embedded database. */
  seedDemo: boolean;
}

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

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];

export function loadConfig(env: Env = process.env): Config {
  const databaseUrl = env.DATABASE_URL || undefined;
  if (databaseUrl && !/^postgres(ql)?:\/\//.test(databaseUrl)) {
    throw new ConfigError('DATABASE_URL must start with postgres:// or postgresql://');
  }
  const redisUrl = env.REDIS_URL || undefined;
  if (redisUrl && !/^rediss?:\/\//.test(redisUrl)) throw new ConfigError('REDIS_URL must start with redis:// or rediss://');
  const adminToken = env.ADMIN_TOKEN || undefined;
  if (adminToken !== undefined && adminToken.length < 16) throw new ConfigError('ADMIN_TOKEN must be at least 16 characters');
  const logLevel = env.LOG_LEVEL || 'info';
  if (!LOG_LEVELS.includes(logLevel)) throw new ConfigError(`LOG_LEVEL must be one of ${LOG_LEVELS.join(', ')}`);
  const nodeEnv = env.NODE_ENV || 'development';
  return {
    port: int(env, 'PORT', 3000, 0, 65535),
    host: env.HOST || '127.0.0.1',
    databaseUrl,
    dataDir: resolve(env.DATA_DIR || './data'),
    adminToken,
    redisUrl,
    logLevel,
    nodeEnv,
    validateResponses: bool(env, 'VALIDATE_RESPONSES', nodeEnv !== 'production'),
    rateLimitPerMinute: int(env, 'RATE_LIMIT_PER_MINUTE', 1000, 1, 10_000_000),
    bodyLimitBytes: int(env, 'BODY_LIMIT_BYTES', 1_048_576, 1024, 100 * 1_048_576),
    dbPoolMax: int(env, 'DB_POOL_MAX', 10, 1, 200),
    apiKeyCacheTtlMs: int(env, 'API_KEY_CACHE_TTL_MS', 5000, 0, 300_000),
    corsOrigins: (env.CORS_ORIGINS || '').split(',').map((s) => s.trim()).filter(Boolean),
    seedDemo: bool(env, 'SEED_DEMO', true),
  };
}

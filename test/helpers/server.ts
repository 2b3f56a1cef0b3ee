/**
 * Starts the real app on a loopback port with a fresh database, and gives tests the typed
 * client, the admin API and a record of contract violations (which fail the test).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Server } from 'node:http';
import { afterAll, beforeAll } from 'vitest';
import { createApiClient, type ApiClient, type components } from '../../client/index.ts';
import { createApp } from '../../server/app.ts';
import { createHttpServer } from '../../server/http/server.ts';
import { loadConfig, type Config } from '../../server/config.ts';
import type { AppDeps, ResponseViolation } from '../../server/deps.ts';
import { createLogger } from '../../server/logger.ts';
import { createRuntime, type Runtime } from '../../server/runtime.ts';
import { SCOPES } from '../../server/http/spec.ts';
import { createTestDatabase } from './db.ts';
import { unwatch, watch } from './violations.ts';

export type ScopeMap = components['schemas']['ScopeMap'];
export const ALL_SCOPES: ScopeMap = Object.fromEntries(SCOPES.map((s) => [s, 'read_write']));

export interface TestUser {
  userId: string;
  username: string;
  apiKey: string;
  keyId: string;
  api: ApiClient;
}

export interface TestServerOptions {
  env?: Record<string, string>;
  clock?: () => number;
  rateLimitStore?: 'memory' | 'postgres' | 'redis';
  /** Run on this existing PostgreSQL database (another TestServer's `databaseUrl`) instead of a fresh one; it is not dropped. */
  databaseUrl?: string;
  /** Embedded runs: start from this dump of a cluster (`deps.db.dumpEmbedded()`, a restart) instead of the template. */
  embeddedTemplate?: Blob;
  /** Where the server's JSON logs go (default: discarded unless TEST_LOG_LEVEL is set). */
  logStream?: { write(line: string): void };
  /** `false`: start without ADMIN_TOKEN (the admin API disabled); `admin` still sends the would-be token. */
  adminToken?: false;
}

let userCounter = 0;

/**
 * Every server started, whether from useServer() or ad hoc inside a test, reports its contract
 * violations to test/helpers/violations.ts: the global afterEach (test/helpers/setup.ts) fails a test
 * during which any of them answered outside the contract.
 */
export { takeViolations } from './violations.ts';

export class TestServer {
  readonly violations: ResponseViolation[] = [];
  admin!: ApiClient;
  deps!: AppDeps;
  runtime!: Runtime;
  baseUrl!: string;
  adminToken = 'test-admin-token-0123456789abcdef';
  private server!: Server;
  private closeRuntime!: () => Promise<void>;
  private dropDb!: () => Promise<void>;
  private objectsDir = mkdtempSync(join(tmpdir(), 'ada-objects-'));

  /** The PostgreSQL database this server runs on (undefined on the embedded one). */
  databaseUrl: string | undefined;

  async start(options: TestServerOptions = {}): Promise<this> {
    const db = options.databaseUrl
      ? { databaseUrl: options.databaseUrl, embeddedTemplate: undefined, drop: async () => {} }
      : options.embeddedTemplate
        ? { databaseUrl: undefined, embeddedTemplate: options.embeddedTemplate, drop: async () => {} }
        : await createTestDatabase();
    this.dropDb = db.drop;
    this.databaseUrl = db.databaseUrl;
    const config: Config = loadConfig({
      LOG_LEVEL: process.env.TEST_LOG_LEVEL ?? 'silent',
      NODE_ENV: 'test',
      ...(options.adminToken === false ? {} : { ADMIN_TOKEN: this.adminToken }),
      ...(db.databaseUrl ? { DATABASE_URL: db.databaseUrl } : {}),
      DB_POOL_MAX: '4',
      // Tests idle for seconds between requests (seeding a table straight through knex, say). With a
      // 5 s keep-alive the server may close a kept-alive socket just as the client reuses it
      // (ECONNRESET on a loaded machine); idle sockets stay open longer than any test idles instead.
      HTTP_KEEP_ALIVE_TIMEOUT_MS: '120000',
      OBJECT_STORAGE_DIR: this.objectsDir,
      ...options.env,
    });
    const runtime = await createRuntime(config, {
      logger: createLogger(config.logLevel, options.logStream),
      embeddedDir: 'memory',
      embeddedTemplate: db.embeddedTemplate,
      clock: options.clock,
      rateLimitStore: options.rateLimitStore,
      onResponseViolation: (v) => this.violations.push(v),
    });
    this.deps = runtime.deps;
    this.runtime = runtime;
    this.closeRuntime = runtime.close;
    const app = createApp(runtime.deps);
    const server = createHttpServer(app, config);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    this.server = server;
    this.baseUrl = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
    this.admin = createApiClient({ baseUrl: this.baseUrl, apiKey: this.adminToken });
    watch(this);
    return this;
  }

  client(apiKey: string): ApiClient {
    return createApiClient({ baseUrl: this.baseUrl, apiKey });
  }

  async createAccount(
    body: Partial<components['schemas']['CreateAccountRequest']> = {},
  ): Promise<{ userId: string; username: string }> {
    const username = body.username ?? `user_${process.pid}_${++userCounter}`;
    const { data, error } = await this.admin.POST('/admin/v1/accounts', { body: { plan: 'pro', ...body, username } });
    if (!data) throw new Error(`createAccount failed: ${JSON.stringify(error)}`);
    return data;
  }

  async createKey(userId: string, scopes: ScopeMap = ALL_SCOPES): Promise<{ apiKey: string; keyId: string }> {
    const { data, error } = await this.admin.POST('/admin/v1/accounts/{userId}/api-keys', {
      params: { path: { userId } },
      body: { scopes },
    });
    if (!data) throw new Error(`createKey failed: ${JSON.stringify(error)}`);
    return { apiKey: data.apiKey, keyId: data.id };
  }

  /** A new account (Pro by default, so several keys are allowed) with one key. */
  async user(
    options: { scopes?: ScopeMap; account?: Partial<components['schemas']['CreateAccountRequest']> } = {},
  ): Promise<TestUser> {
    const { userId, username } = await this.createAccount(options.account);
    const { apiKey, keyId } = await this.createKey(userId, options.scopes ?? ALL_SCOPES);
    return { userId, username, apiKey, keyId, api: this.client(apiKey) };
  }

  /** Raw fetch against the server, for requests the typed client cannot express. */
  fetch(path: string, init: RequestInit = {}): Promise<Response> {
    return fetch(this.baseUrl + path, init);
  }

  async close(): Promise<void> {
    unwatch(this);
    await new Promise<void>((resolve) => {
      this.server.close(() => resolve());
      this.server.closeAllConnections();
    });
    await this.closeRuntime();
    await this.dropDb();
    rmSync(this.objectsDir, { recursive: true, force: true });
  }
}

/** Starts one server for the file (contract violations fail the test: see takeViolations). */
export function useServer(options: TestServerOptions = {}): TestServer {
  const server = new TestServer();
  beforeAll(async () => {
    await server.start(options);
  });
  afterAll(async () => {
    await server.close();
  });
  return server;
}

export function bearer(apiKey: string): Record<string, string> {
  return { Authorization: `Bearer ${apiKey}` };
}

export function jsonHeaders(apiKey: string): Record<string, string> {
  return { Authorization: `Bearer ${apiKey}`, 'Content-Type': 'application/json' };
}

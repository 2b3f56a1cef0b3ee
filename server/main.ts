/**
 * Entry point: config → database and migrations → app → listen; graceful shutdown on SIGTERM/SIGINT.
 * `npm start` runs the bundle of this file (dist/main.js) with plain node, so the signals Docker,
 * systemd and Kubernetes send reach this process.
 */
import type { Server } from 'node:http';
import type { Express } from 'express';
import type { Logger } from 'pino';
import { createApp } from './app.ts';
import { backgroundContext } from './context.ts';
import { ConfigError, loadConfig, type Config } from './config.ts';
import { DataDirLockedError } from './db/dataDirLock.ts';
import { seedDemoAccount } from './features/accounts/demo.ts';
import {
  assertEmptyForExamples,
  ExamplesRefusedError,
  type SeededExamples,
  seedExamples,
} from './fixtures/examples.ts';
import { createHttpServer } from './http/server.ts';
import { createLogger } from './logger.ts';
import { loopbackUrl, recordServerAddress } from './localServer.ts';
import { createRuntime, StartupError, type Runtime } from './runtime.ts';

/** In-flight requests get this long after SIGTERM before their connections are closed. */
const SHUTDOWN_GRACE_MS = 10_000;
/** After an uncaught exception or unhandled rejection: a short grace, the state may be broken. */
const FATAL_GRACE_MS = 2_000;
/** Whatever happens while closing, the process is gone this long after the grace period. */
const CLOSE_DEADLINE_MS = 5_000;

function banner(
  config: Config,
  baseUrl: string,
  runtime: Runtime,
  demo: { username: string; apiKey: string } | undefined,
  examples: SeededExamples | undefined,
): string {
  const lines = [
    '',
    `Account Data API listening on ${baseUrl}`,
    `  database: ${config.databaseUrl ? 'PostgreSQL (DATABASE_URL)' : `embedded PGlite in ${config.dataDir}`}`,
    `  docs:     ${baseUrl}/docs`,
    `  contract: ${baseUrl}/openapi.json`,
  ];
  if (runtime.adminTokenSource === 'generated') {
    lines.push(`  admin token (kept in ${config.dataDir}/admin-token): ${runtime.deps.adminToken}`);
  } else if (runtime.adminTokenSource === 'data-dir') {
    // Printed once, when generated: logs are kept and shipped; the file is readable by its owner only.
    lines.push(`  admin token: in ${config.dataDir}/admin-token (printed on the first start only)`);
  } else if (runtime.adminTokenSource === 'none') {
    lines.push(
      '  admin API disabled (503): set ADMIN_TOKEN to enable /admin/v1; npm run admin -- --direct works on DATABASE_URL',
    );
  }
  if (demo) {
    lines.push(
      '',
      `First start: created account "${demo.username}" with an all-scopes API key (shown only now):`,
      `  ${demo.apiKey}`,
      'Try it:',
      `  curl -s -H "Authorization: Bearer ${demo.apiKey}" ${baseUrl}/api/v1/me`,
    );
  }
  if (examples) {
    const width = Math.max(...examples.keys.map((k) => `${k.username}, ${k.label}`.length));
    lines.push(
      '',
      "Fixture mode (SEED_EXAMPLES): the contract's example data, for contract tests only; these keys are published:",
      ...examples.accounts.map((a) => `  account ${a.username}: ${a.userId}`),
      ...examples.keys.map((k) => `  ${`${k.username}, ${k.label}`.padEnd(width)}  ${k.token}`),
      `  admin token: ${runtime.deps.adminToken ?? 'none (set ADMIN_TOKEN for the admin examples)'}`,
      `  storage URLs: ${
        runtime.deps.storage?.kind === 'filesystem'
          ? 'signed with the published example key (server/fixtures/keys.ts)'
          : runtime.deps.storage
            ? 'presigned by the S3-compatible bucket (the /storage/v1 examples answer 404)'
            : 'none (OBJECT_STORAGE=none: the media examples answer 503)'
      }`,
    );
  }
  return lines.join('\n') + '\n';
}

/**
 * Process state shared by start-up, the signal handlers and the fatal-error handlers: whatever has
 * been opened so far is closed on the way out, whichever way that is.
 */
const state: {
  logger: Logger | undefined;
  runtime: Runtime | undefined;
  server: Server | undefined;
  stopping: boolean;
  /** Non-zero once anything fatal happened, whatever stop() was asked for. */
  exitCode: number;
  /** A signal that arrived before the server was listening; honoured as soon as start-up returns. */
  pendingSignal: NodeJS.Signals | undefined;
  /** Removes DATA_DIR/server-address (embedded default), before the lock goes with the runtime. */
  forgetAddress: (() => void) | undefined;
} = {
  logger: undefined,
  runtime: undefined,
  server: undefined,
  stopping: false,
  exitCode: 0,
  pendingSignal: undefined,
  forgetAddress: undefined,
};

function log(level: 'info' | 'warn' | 'error' | 'fatal', obj: object, msg: string): void {
  if (state.logger) state.logger[level](obj, msg);
  else console.error(msg, obj);
}

/** Stops accepting, lets in-flight requests finish (up to `graceMs`), closes the runtime (database, lock), exits. */
function stop(reason: string, exitCode: number, graceMs: number): void {
  state.exitCode = Math.max(state.exitCode, exitCode);
  if (state.stopping) return;
  state.stopping = true;
  const { server, runtime } = state;
  const deadline = setTimeout(() => {
    log('error', { reason }, 'could not close in time; exiting');
    process.exit(1);
  }, graceMs + CLOSE_DEADLINE_MS);
  deadline.unref();
  const closeRuntime = async () => {
    try {
      state.forgetAddress?.();
      await runtime?.close();
      log('info', { reason }, 'stopped');
      process.exit(state.exitCode);
    } catch (err) {
      log('error', { err }, 'error while closing');
      process.exit(1);
    }
  };
  if (!server) {
    void closeRuntime();
    return;
  }
  log('info', { reason }, 'shutting down: no new connections, finishing in-flight requests');
  const force = setTimeout(() => {
    log('warn', {}, 'in-flight requests did not finish in time; closing connections');
    server.closeAllConnections();
  }, graceMs);
  force.unref();
  // close() ends the connections idle now; a kept-alive one whose in-flight request finishes later
  // would hold the close until its keep-alive timeout: end those as they fall idle.
  const idle = setInterval(() => server.closeIdleConnections(), 50);
  idle.unref();
  server.close(() => {
    clearInterval(idle);
    void closeRuntime();
  });
  server.closeIdleConnections();
  // Event streams never finish by themselves: end them so that their connections close too.
  void runtime?.endStreams().catch((err: unknown) => log('warn', { err }, 'could not end the event streams'));
}

function onSignal(signal: NodeJS.Signals): void {
  if (!state.server) {
    // Still starting: finish the step under way (never interrupt PGlite mid-write), then stop.
    state.pendingSignal ??= signal;
    return;
  }
  stop(signal, 0, SHUTDOWN_GRACE_MS);
}

/** A bug escaped every handler: log it with its stack and exit non-zero, closing what can be closed. */
function onFatal(kind: 'uncaughtException' | 'unhandledRejection', err: unknown): void {
  log('fatal', { err }, `${kind}: exiting`);
  if (!state.server && !state.runtime) process.exit(1); // nothing opened yet, nothing to close
  stop(kind, 1, FATAL_GRACE_MS);
}

/**
 * Listens on `port` and `host`, or rejects with the listen error. Not `app.listen`: in Express 5 its
 * callback also receives the error, so a promise resolved there resolves on EADDRINUSE too.
 */
function listen(app: Express, config: Config): Promise<Server> {
  return new Promise((resolve, reject) => {
    const server = createHttpServer(app, config);
    server.once('error', reject);
    server.listen(config.port, config.host, () => {
      server.off('error', reject);
      resolve(server);
    });
  });
}

/** Start-up failures an operator can fix get one line without a stack; anything else is a bug and keeps it. */
function failedToStart(err: unknown): never {
  if (err instanceof StartupError || err instanceof DataDirLockedError || err instanceof ExamplesRefusedError) {
    log('fatal', {}, `Cannot start: ${err.message}`);
  } else {
    log('fatal', { err }, `Cannot start: ${err instanceof Error ? err.message : String(err)}`);
  }
  process.exit(1);
}

async function main(): Promise<void> {
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);
  process.on('uncaughtException', (err) => onFatal('uncaughtException', err));
  process.on('unhandledRejection', (err) => onFatal('unhandledRejection', err));

  let config: Config;
  try {
    config = loadConfig();
  } catch (err) {
    if (err instanceof ConfigError) {
      console.error(`Configuration error: ${err.message}`);
      process.exit(2);
    }
    throw err;
  }
  const logger = createLogger(config.logLevel);
  state.logger = logger;
  let runtime: Runtime;
  try {
    runtime = await createRuntime(config, { logger });
  } catch (err) {
    failedToStart(err);
  }
  state.runtime = runtime;
  if (state.pendingSignal) return stop(state.pendingSignal, 0, 0);
  const seedContext = (job: string) =>
    backgroundContext({ ...runtime.deps, db: runtime.deps.db.knex }, { kind: 'system', job });
  if (config.seedExamples) {
    // Refused before the port is bound: a server that holds data never starts with the published keys.
    try {
      await assertEmptyForExamples(seedContext('examples_seed'));
    } catch (err) {
      await runtime.close().catch(() => undefined);
      failedToStart(err);
    }
  }
  const app = createApp(runtime.deps);

  // The port is bound before anything is written: a port in use ends start-up before the demo
  // account is seeded (and before the banner, which would announce a server that never answers).
  let server: Server;
  try {
    server = await listen(app, config);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    const message =
      code === 'EADDRINUSE'
        ? `port ${config.port} on ${config.host} is already in use (PORT, HOST)`
        : code === 'EADDRNOTAVAIL' || code === 'EACCES'
          ? `cannot listen on ${config.host}:${config.port} (${code}; PORT, HOST)`
          : undefined;
    await runtime.close().catch(() => undefined);
    failedToStart(message ? new StartupError(message) : err);
  }
  const examples = config.seedExamples ? await seedExamples(seedContext('examples_seed')) : undefined;
  const demo =
    !config.databaseUrl && config.seedDemo && !config.seedExamples
      ? await seedDemoAccount(seedContext('demo_seed'))
      : undefined;
  state.server = server;
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : config.port;
  // The embedded default tells `npm run admin` where it listens (server/localServer.ts): the CLI
  // sends DATA_DIR/admin-token only to the server that holds DATA_DIR and recorded this address.
  const lock = runtime.deps.db.dataDirLock;
  if (!config.databaseUrl && lock) {
    try {
      state.forgetAddress = recordServerAddress(config.dataDir, lock, loopbackUrl(config.host, port));
    } catch (err) {
      log(
        'warn',
        { err },
        `could not record the server address in ${config.dataDir}; npm run admin needs --url and --token`,
      );
    }
  }
  await runtime.startJobs();
  const host = config.host === '0.0.0.0' || config.host === '::' ? 'localhost' : config.host;
  process.stdout.write(banner(config, `http://${host}:${port}`, runtime, demo, examples));
  if (state.pendingSignal) stop(state.pendingSignal, 0, SHUTDOWN_GRACE_MS);
}

main().catch((err) => {
  if (state.logger) failedToStart(err);
  console.error('Failed to start:', err instanceof Error ? err.message : err);
  process.exit(1);
});

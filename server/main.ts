/** Entry point: config → database and migrations → app → listen; graceful shutdown on SIGTERM/SIGINT. */
import type { Server } from 'node:http';
import { createApp } from './app.ts';
import { ConfigError, loadConfig, type Config } from './config.ts';
import { seedDemoAccount } from './features/accounts/demo.ts';
import { createLogger } from './logger.ts';
import { createRuntime, type Runtime } from './runtime.ts';

const SHUTDOWN_GRACE_MS = 10_000;

function banner(config: Config, baseUrl: string, runtime: Runtime, demo: { username: string; apiKey: string } | undefined): string {
  const lines = [
    '',
    `Account Data API listening on ${baseUrl}`,
    `  database: ${config.databaseUrl ? 'PostgreSQL (DATABASE_URL)' : `embedded PGlite in ${config.dataDir}`}`,
    `  docs:     ${baseUrl}/docs`,
    `  contract: ${baseUrl}/openapi.json`,
  ];
  if (runtime.adminTokenSource === 'generated' || runtime.adminTokenSource === 'data-dir') {
    lines.push(`  admin token (kept in ${config.dataDir}/admin-token): ${runtime.deps.adminToken}`);
  } else if (runtime.adminTokenSource === 'none') {
    lines.push('  admin API disabled: set ADMIN_TOKEN to enable /admin/v1');
  }
  if (demo) {
    lines.push(
      '',
      `First start: created account "${demo.username}" with an all-scopes API key (shown only now):`,
      `  ${demo.apiKey}`,
      'Try it:',
      `  curl -s -H "Authorization: Bearer ${demo.apiKey}" ${baseUrl}/api/v1/appearance/reset -X POST`,
    );
  }
  return lines.join('\n') + '\n';
}

async function main(): Promise<void> {
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
  const runtime = await createRuntime(config, { logger });
  const demo = !config.databaseUrl && config.seedDemo ? await seedDemoAccount(runtime.deps.db.knex, Date.now()) : undefined;
  const app = createApp(runtime.deps);
  runtime.startJobs();

  const server: Server = await new Promise((resolve, reject) => {
    const s = app.listen(config.port, config.host, () => resolve(s));
    s.on('error', reject);
  });
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : config.port;
  const host = config.host === '0.0.0.0' || config.host === '::' ? 'localhost' : config.host;
  process.stdout.write(banner(config, `http://${host}:${port}`, runtime, demo));

  let stopping = false;
  const shutdown = (signal: string) => {
    if (stopping) return;
    stopping = true;
    logger.info({ signal }, 'shutting down: no new connections, finishing in-flight requests');
    const force = setTimeout(() => {
      logger.warn('in-flight requests did not finish in time; closing connections');
      server.closeAllConnections();
    }, SHUTDOWN_GRACE_MS);
    force.unref();
    server.close(async () => {
      try {
        await runtime.close();
        logger.info('stopped');
        process.exit(0);
      } catch (err) {
        logger.error({ err }, 'error while closing');
        process.exit(1);
      }
    });
    server.closeIdleConnections();
  };
  process.on('SIGTERM', () => shutdown('SIGTERM'));
  process.on('SIGINT', () => shutdown('SIGINT'));
}

main().catch((err) => {
  console.error('Failed to start:', err instanceof Error ? err.message : err);
  process.exit(1);
});

/**
 * Autovacuum for the embedded database. PGlite runs PostgreSQL in single-user mode, where no
 * autovacuum worker exists: without this job its tables would never get planner statistics (the
 * planner then guesses, and can pick a sort over the history index) and dead rows would never be
 * reclaimed. Every interval it runs VACUUM (ANALYZE) one table at a time, so requests queued on
 * the single connection wait for one table at most. On PostgreSQL the server's autovacuum does this.
 */
import type { Knex } from 'knex';
import type { Logger } from 'pino';

export class EmbeddedMaintenanceJob {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;

  constructor(
    private readonly db: Knex,
    private readonly logger: Logger,
  ) {}

  /** Runs once soon after start-up, then every interval. */
  start(intervalMs: number): void {
    if (intervalMs <= 0 || this.timer) return;
    const run = () => void this.runOnce().catch((err) => this.logger.error({ err }, 'embedded database maintenance failed'));
    setTimeout(run, 1_000).unref();
    this.timer = setInterval(run, intervalMs);
    this.timer.unref();
  }

  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    await this.running?.catch(() => undefined);
  }

  /** VACUUM (ANALYZE) of every table of the schema; overlapping calls share one run. */
  runOnce(): Promise<void> {
    this.running ??= this.pass().finally(() => {
      this.running = undefined;
    });
    return this.running;
  }

  private async pass(): Promise<void> {
    const started = Date.now();
    const tables = await this.db('pg_tables').where({ schemaname: 'public' }).orderBy('tablename').pluck<string[]>('tablename');
    for (const table of tables) await this.db.raw('vacuum (analyze) ??', [table]);
    this.logger.debug({ tables: tables.length, ms: Date.now() - started }, 'embedded database vacuumed and analyzed');
  }
}

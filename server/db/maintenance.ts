/**
 * Autovacuum for the embedded database. PGlite runs PostgreSQL in single-user mode, where no
 * autovacuum worker exists: without this job its tables would never get planner statistics (the
 * planner then guesses, and can pick a sort over the history index) and dead rows would never be
 * reclaimed. Every interval it runs VACUUM (ANALYZE) one table at a time, so requests queued on
 * the single connection wait for one table at most. On PostgreSQL the server's autovacuum does this.
 */
import type { Knex } from 'knex';
import type { Logger } from 'pino';
import { PeriodicJob } from '../jobs.ts';

export class EmbeddedMaintenanceJob extends PeriodicJob<void> {
  constructor(
    private readonly db: Knex,
    logger: Logger,
  ) {
    super('embedded database maintenance', logger);
  }

  /** Runs once soon after start-up, then every interval. */
  override start(intervalMs: number): void {
    super.start(intervalMs, 1_000);
  }

  /** VACUUM (ANALYZE) of every table of the schema. */
  protected async pass(): Promise<void> {
    const started = Date.now();
    const tables = await this.db('pg_tables').where({ schemaname: 'public' }).orderBy('tablename').pluck<string[]>('tablename');
    for (const table of tables) await this.db.raw('vacuum (analyze) ??', [table]);
    this.logger.debug({ tables: tables.length, ms: Date.now() - started }, 'embedded database vacuumed and analyzed');
  }
}

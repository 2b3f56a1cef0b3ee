/**
 * Autovacuum for the embedded database. PGlite runs PostgreSQL in single-user mode, where no
 * autovacuum worker exists: without this job its tables would never get planner statistics (the
 * planner then guesses, and can pick a sort over the history index) and dead rows would never be
 * reclaimed. The job queue runs it on a schedule (queue `embedded_maintenance`, first run a second
 * after start-up): VACUUM (ANALYZE) one table at a time, so requests queued on the single
 * connection wait for one table at most. On PostgreSQL the server's autovacuum does this.
 */
import type { Knex } from 'knex';
import type { Logger } from 'pino';
import { query, sql } from './sql.ts';

export class EmbeddedMaintenanceJob {
  constructor(
    private readonly db: Knex,
    private readonly logger: Logger,
  ) {}

  /** VACUUM (ANALYZE) of every table of the schema. */
  async runOnce(): Promise<void> {
    const started = Date.now();
    const tables = (
      await query<{ tablename: string }>(
        this.db,
        sql`select tablename from pg_tables where schemaname = 'public' order by tablename`,
      )
    ).map((row) => row.tablename);
    // Table names of the schema are plain lower-case identifiers (sql.id refuses anything else).
    for (const table of tables) await query(this.db, sql`vacuum (analyze) ${sql.id(table)}`);
    this.logger.debug({ tables: tables.length, ms: Date.now() - started }, 'embedded database vacuumed and analyzed');
  }
}

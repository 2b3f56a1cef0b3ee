/**
 * Whether the database answers: the readiness probe's first check (server/features/ops/readiness.ts).
 * It is a question about the connection, not a read of data, so it lives with the connection layer
 * and runs as a plain unnamed statement on the main pool, the pool requests use (a named statement
 * would go to the prepared pool on PostgreSQL, server/db/prepared.ts).
 */
import type { Knex } from 'knex';

export async function pingDatabase(knex: Knex): Promise<void> {
  await knex.raw('select 1');
}

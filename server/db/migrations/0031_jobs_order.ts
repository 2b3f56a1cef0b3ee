import type { Knex } from 'knex';

export const name = '0031_jobs_order';

/**
 * Jobs are claimed in the order they were queued: `seq` numbers them as they are inserted, and a
 * claim walks (run_after, seq). Ordered by (run_after, id), jobs queued in the same millisecond ran
 * in the order of their random ids.
 */
const UP = [
  'alter table jobs add column seq bigint generated always as identity',
  'drop index jobs_claim',
  `create index jobs_claim on jobs (queue, run_after, seq) where state = 'pending'`,
];

const DOWN = [
  'drop index jobs_claim',
  `create index jobs_claim on jobs (queue, run_after, id) where state = 'pending'`,
  'alter table jobs drop column seq',
];

export async function up(knex: Knex): Promise<void> {
  for (const statement of UP) await knex.raw(statement);
}

export async function down(knex: Knex): Promise<void> {
  for (const statement of DOWN) await knex.raw(statement);
}

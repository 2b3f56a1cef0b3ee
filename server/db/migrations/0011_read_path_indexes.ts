import type { Knex } from 'knex';
import { execScript } from '../sql.ts';

export const name = '0011_read_path_indexes';

/**
 * The one-statement reads of the active scope (server/access/systemScope.ts activeScopeRows) walk
 * a side system's live rows in list order up to a page. With the side system behind the account in
 * the index, the walk needs both equalities, and the planner multiplies their selectivities as if
 * independent (a side system belongs to one account): it expects a handful of rows, prefers
 * reading the whole side system through a bitmap and sorting it, and does so for every page. Led by
 * the side system, the index needs only that equality, whose estimate is the average side system,
 * and the ordered walk is the plan. Queries that name both account and side system use these
 * indexes as well (the account is then a filter on rows of one side system, which all match).
 *
 * The job queue's schedule claim (server/jobs/queue.ts) selects due schedules by next_run_after;
 * the table holds a handful of rows, but with the index the statement has an index path like every
 * other (the bench checks that each statement has one).
 */
export async function up(knex: Knex): Promise<void> {
  await execScript(
    knex,
    `
    create index entries_side_recent on entries (side_system_id, updated_at desc, id) where deleted_at is null;
    drop index entries_user_side_recent;
    create index members_side_page on members (side_system_id, created_at, id) where deleted_at is null;
    drop index members_user_side_page;
    create index job_schedules_due on job_schedules (next_run_after)
  `,
  );
}

export async function down(knex: Knex): Promise<void> {
  await execScript(
    knex,
    `
    drop index job_schedules_due;
    create index members_user_side_page on members (user_id, side_system_id, created_at, id) where deleted_at is null;
    drop index members_side_page;
    create index entries_user_side_recent on entries (user_id, side_system_id, updated_at desc, id) where deleted_at is null;
    drop index entries_side_recent
  `,
  );
}

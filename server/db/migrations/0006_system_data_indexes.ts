import type { Knex } from 'knex';
import { execScript } from '../sql.ts';

export const name = '0006_system_data_indexes';

/**
 * Deleting a side or sub system asks whether any row, trashed ones included, still sits in it.
 * The existing side indexes of members and entries are partial (live rows only) and directories
 * had none on sub_system_id, so the check scanned the account's rows; these make each question
 * one index probe.
 */
export async function up(knex: Knex): Promise<void> {
  await execScript(
    knex,
    `
    create index members_user_side_all on members (user_id, side_system_id);
    create index entries_user_side_all on entries (user_id, side_system_id);
    create index directories_sub on directories (sub_system_id) where sub_system_id is not null
  `,
  );
}

export async function down(knex: Knex): Promise<void> {
  await execScript(
    knex,
    `
    drop index directories_sub;
    drop index entries_user_side_all;
    drop index members_user_side_all
  `,
  );
}

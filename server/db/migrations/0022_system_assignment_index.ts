import type { Knex } from 'knex';
import { execScript } from '../sql.ts';

export const name = '0022_system_assignment_index';

/**
 * The owner's side and sub system assignments, by account: what the access engine reads once per
 * friend access to know which systems hide their members from that friend (`hidden_system_ids` in
 * server/access/ FRIEND_ACCESS_SQL). An account has a few such rows, so it is one short index
 * range. Before it, every member a friend read checked was probed for its side system and its sub
 * system (two index probes a row), or a generic plan hashed every account's system assignments.
 */
export async function up(knex: Knex): Promise<void> {
  await execScript(
    knex,
    `
    create index privacy_bucket_assignments_systems on privacy_bucket_assignments (user_id, content_id, bucket_id)
      where kind in ('side_system', 'sub_system')
  `,
  );
}

export async function down(knex: Knex): Promise<void> {
  await execScript(knex, 'drop index privacy_bucket_assignments_systems');
}

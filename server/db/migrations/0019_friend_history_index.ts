import type { Knex } from 'knex';
import { execScript } from '../sql.ts';

export const name = '0019_friend_history_index';

/**
 * A friend's history page when the friend sees few of the owner's members
 * (server/features/friendActivity/repo.ts, historyPage): each visible member's newest sessions after
 * the cursor, read in order from this index and merged, so the page costs the same however rarely
 * those members front and however deep the cursor. It replaces the plain member_id index (its
 * leading column serves every lookup by member, trashed sessions included), so the planner never
 * prefers reading a member's whole history and sorting it; deleted_at is included, so the live
 * filter needs no heap visit and the per-member reads can be index-only.
 */
export async function up(knex: Knex): Promise<void> {
  await execScript(
    knex,
    `
    create index front_sessions_member_recent on front_sessions (member_id, started_at desc, id desc) include (deleted_at);
    drop index front_sessions_member
  `,
  );
}

export async function down(knex: Knex): Promise<void> {
  await execScript(
    knex,
    `
    create index front_sessions_member on front_sessions (member_id);
    drop index front_sessions_member_recent
  `,
  );
}

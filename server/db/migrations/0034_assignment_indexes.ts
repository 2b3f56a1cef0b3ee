import type { Knex } from 'knex';
import { execScript } from '../sql.ts';

export const name = '0034_assignment_indexes';

/**
 * Two partial indexes of privacy_bucket_assignments for the friend reads (server/access/predicates.ts):
 * - the owner's profile-section assignments, by account and section: what a friend read asks once
 *   per statement ("does this owner give any member's avatar buckets of its own?", sectionOpenSql
 *   and memberSectionsSql) before probing the section's assignments of each member it shows. Most
 *   owners narrow no section, and their friends' reads then make no such probe at all;
 * - a member's own assignments, by member: what the member rule reads for every member a friend
 *   read shows or walks past (visibleMembersSql, memberLevelSql, memberRuleSql). The primary key
 *   serves it too, but leads with two text columns compared on every step of each descent; this
 *   one holds two uuids, and the probe is an index-only read of a smaller index.
 */
export async function up(knex: Knex): Promise<void> {
  await execScript(
    knex,
    `
    create index privacy_bucket_assignments_sections on privacy_bucket_assignments (user_id, section_key)
      where kind = 'profile_section';
    create index privacy_bucket_assignments_member on privacy_bucket_assignments (content_id, bucket_id)
      where kind = 'member' and section_key = '';
  `,
  );
}

export async function down(knex: Knex): Promise<void> {
  await execScript(
    knex,
    'drop index privacy_bucket_assignments_member;\ndrop index privacy_bucket_assignments_sections;',
  );
}

/**
 * The access rule of forFriend (./index.ts) as a SQL fragment over many pairs of accounts at once,
 * for list reads that show each row's account its own way (the friends list: may the caller see each
 * friend's profile fields?). One statement for the whole list, not one forFriend per row.
 */
import { PERMISSION_GROUPS, type PermissionGroup } from '../core/context.ts';
import { type Sql, sql } from '../db/sql.ts';

const COLUMN = /^[a-z_][a-z0-9_]*\.[a-z_][a-z0-9_]*$/;

/**
 * "The account in `ownerColumn` grants the account in `viewerColumn` at least read on `group`":
 * both friendship rows accepted (so no block either way) and one of the buckets the owner assigned
 * to the viewer maps `group` to read or read_write (buckets of the owner only; anything else is
 * none, fail closed). No values; the columns are qualified identifiers (sql.id), the group a
 * constant of the permission groups, never input.
 */
export function grantsReadSql(group: PermissionGroup, ownerColumn: string, viewerColumn: string): Sql {
  if (!COLUMN.test(ownerColumn) || !COLUMN.test(viewerColumn))
    throw new Error('grantsReadSql: columns must be qualified names');
  return sql`exists (
    select 1
      from friendships gfo
      join friendships gfv on gfv.user_id = gfo.friend_user_id and gfv.friend_user_id = gfo.user_id and gfv.status = 'accepted'
      join privacy_bucket_assignments gfa on gfa.kind = 'friend' and gfa.section_key = '' and gfa.user_id = gfo.user_id and gfa.content_id = gfo.friend_user_id
      join privacy_buckets gfb on gfb.id = gfa.bucket_id and gfb.user_id = gfo.user_id
     where gfo.user_id = ${sql.id(ownerColumn)} and gfo.friend_user_id = ${sql.id(viewerColumn)} and gfo.status = 'accepted'
       and gfb.friend_permissions ->> '${sql.constant(group, PERMISSION_GROUPS)}' in ('read', 'read_write'))`;
}

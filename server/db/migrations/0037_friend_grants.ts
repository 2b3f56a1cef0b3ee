import type { Knex } from 'knex';

export const name = '0037_friend_grants';

/**
 * `friend_grants`: per accepted friendship, what the owner's buckets grant the friend, one row per
 * (owner, viewer), read by primary key. It is the row every friend read used to aggregate in its
 * own statement (the friendships, the friend's bucket assignments, the buckets' permission maps,
 * the systems that narrow): server/access/predicates.ts reads it (friendAccessRow).
 *
 * Kept by triggers that run as the transaction of the change commits (deferred constraint triggers),
 * so a revoked friendship or a bucket taken away still takes effect with the commit that changes it
 * (docs/privacy.md), for every write path (the API, imports, cascades):
 * - a friendship row inserted, changed or deleted: both directions of the pair are recomputed (the
 *   row exists only while both sides read `accepted`);
 * - a `friend` assignment: that pair; a `side_system` or `sub_system` assignment: every friend of
 *   the owner (which systems narrow depends on them);
 * - a bucket's `friend_permissions` changed: every friend of its owner (a deleted bucket cascades
 *   to its assignments, which recompute).
 * Each recomputation first takes a transaction-scoped advisory lock on the owner, held to commit,
 * and then reads with a fresh snapshot: two transactions changing one owner's grants at once
 * recompute one after the other, and the last to commit has read everything the first committed.
 * Deferred to the commit, the lock is taken after every row lock of the transaction, so it never
 * waits in a cycle with them (a route that share-locks a bucket or a friendship and then writes
 * assignments would otherwise hold its row locks while another holds the owner's lock and waits
 * for them).
 *
 * Columns, as friendAccessRow names them: `bucket_ids` (the owner's buckets assigned to the
 * friend), per permission group `<group>_read` and `<group>_read_write` (those granting at least
 * that level; a missing or unknown level is none), and `hidden_system_ids` (the owner's side and
 * sub systems with buckets, none of them a held bucket granting members_view). Arrays in no order.
 */

/** The permission groups as of this migration (server/core/context.ts PERMISSION_GROUPS). */
const GROUPS = [
  'members_view',
  'member_profile',
  'member_avatar',
  'member_notes',
  'member_custom_fields',
  'member_statuses',
  'member_relationships',
  'groups',
  'front',
  'friend_data',
];

const columns = GROUPS.flatMap((g) => [`${g}_read`, `${g}_read_write`]);
const aggregates = GROUPS.flatMap((g) => [
  `coalesce(array_agg(b.id) filter (where b.friend_permissions ->> '${g}' in ('read', 'read_write')), '{}')`,
  `coalesce(array_agg(b.id) filter (where b.friend_permissions ->> '${g}' = 'read_write'), '{}')`,
]);

const statements = [
  `create table friend_grants (
     owner_id uuid not null references accounts (id) on delete cascade,
     viewer_id uuid not null references accounts (id) on delete cascade,
     bucket_ids uuid[] not null,
     ${columns.map((c) => `${c} uuid[] not null`).join(',\n     ')},
     hidden_system_ids uuid[] not null,
     primary key (owner_id, viewer_id)
   )`,
  // The owner's friends (all, or one when p_viewer is not null), recomputed from the source rows.
  `create function friend_grants_refresh(p_owner uuid, p_viewer uuid) returns void language plpgsql as $$
   begin
     perform pg_advisory_xact_lock(hashtextextended('friend grants:' || p_owner::text, 0));
     delete from friend_grants where owner_id = p_owner and (p_viewer is null or viewer_id = p_viewer);
     insert into friend_grants (owner_id, viewer_id, bucket_ids, ${columns.join(', ')}, hidden_system_ids)
       select o.user_id, o.friend_user_id, g.*, h.ids
         from friendships o
         join friendships v on v.user_id = o.friend_user_id and v.friend_user_id = o.user_id and v.status = 'accepted'
         cross join lateral (
           select coalesce(array_agg(b.id), '{}'), ${aggregates.join(',\n                  ')}
             from privacy_bucket_assignments a
             join privacy_buckets b on b.id = a.bucket_id and b.user_id = a.user_id
            where a.kind = 'friend' and a.section_key = '' and a.content_id = o.friend_user_id and a.user_id = o.user_id
         ) g (bucket_ids, ${columns.join(', ')})
         cross join lateral (
           select array(
             select sa.content_id from privacy_bucket_assignments sa
              where sa.user_id = o.user_id and sa.kind in ('side_system', 'sub_system')
              group by sa.content_id having not bool_or(sa.bucket_id = any (g.members_view_read))) as ids
         ) h
        where o.user_id = p_owner and (p_viewer is null or o.friend_user_id = p_viewer) and o.status = 'accepted';
   end $$`,
  `create function friend_grants_friendship_trigger() returns trigger language plpgsql as $$
   declare
     r record;
   begin
     -- Both owners of the pair, in one order (the locks of two owners are always taken alike).
     for r in
       select distinct x.a, x.b from (values
         (case when tg_op = 'DELETE' then old.user_id else new.user_id end,
          case when tg_op = 'DELETE' then old.friend_user_id else new.friend_user_id end),
         (case when tg_op = 'DELETE' then old.friend_user_id else new.friend_user_id end,
          case when tg_op = 'DELETE' then old.user_id else new.user_id end),
         (case when tg_op = 'UPDATE' then old.user_id end, case when tg_op = 'UPDATE' then old.friend_user_id end),
         (case when tg_op = 'UPDATE' then old.friend_user_id end, case when tg_op = 'UPDATE' then old.user_id end)
       ) as x (a, b) where x.a is not null order by x.a, x.b
     loop
       perform friend_grants_refresh(r.a, r.b);
     end loop;
     return null;
   end $$`,
  `create constraint trigger friend_grants_friendship after insert or update or delete on friendships
     deferrable initially deferred for each row execute function friend_grants_friendship_trigger()`,
  `create function friend_grants_assignment_trigger() returns trigger language plpgsql as $$
   begin
     if tg_op in ('UPDATE', 'DELETE') then
       if old.kind = 'friend' then
         perform friend_grants_refresh(old.user_id, old.content_id);
       elsif old.kind in ('side_system', 'sub_system') then
         perform friend_grants_refresh(old.user_id, null);
       end if;
     end if;
     if tg_op in ('INSERT', 'UPDATE') then
       if new.kind = 'friend' then
         perform friend_grants_refresh(new.user_id, new.content_id);
       elsif new.kind in ('side_system', 'sub_system') then
         perform friend_grants_refresh(new.user_id, null);
       end if;
     end if;
     return null;
   end $$`,
  `create constraint trigger friend_grants_assignment_insert after insert on privacy_bucket_assignments
     deferrable initially deferred for each row when (new.kind in ('friend', 'side_system', 'sub_system'))
     execute function friend_grants_assignment_trigger()`,
  `create constraint trigger friend_grants_assignment_delete after delete on privacy_bucket_assignments
     deferrable initially deferred for each row when (old.kind in ('friend', 'side_system', 'sub_system'))
     execute function friend_grants_assignment_trigger()`,
  `create constraint trigger friend_grants_assignment_update after update on privacy_bucket_assignments
     deferrable initially deferred for each row when (old.kind in ('friend', 'side_system', 'sub_system') or new.kind in ('friend', 'side_system', 'sub_system'))
     execute function friend_grants_assignment_trigger()`,
  `create function friend_grants_bucket_trigger() returns trigger language plpgsql as $$
   begin
     perform friend_grants_refresh(new.user_id, null);
     if old.user_id <> new.user_id then
       perform friend_grants_refresh(old.user_id, null);
     end if;
     return null;
   end $$`,
  `create constraint trigger friend_grants_bucket after update on privacy_buckets
     deferrable initially deferred for each row when (old.friend_permissions is distinct from new.friend_permissions or old.user_id is distinct from new.user_id)
     execute function friend_grants_bucket_trigger()`,
  // The grants of every friendship there is now.
  `select friend_grants_refresh(a.id, null) from accounts a
    where exists (select 1 from friendships f where f.user_id = a.id and f.status = 'accepted')`,
];

export async function up(knex: Knex): Promise<void> {
  for (const statement of statements) await knex.raw(statement);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('drop trigger friend_grants_bucket on privacy_buckets');
  await knex.raw('drop trigger friend_grants_assignment_update on privacy_bucket_assignments');
  await knex.raw('drop trigger friend_grants_assignment_delete on privacy_bucket_assignments');
  await knex.raw('drop trigger friend_grants_assignment_insert on privacy_bucket_assignments');
  await knex.raw('drop trigger friend_grants_friendship on friendships');
  await knex.raw('drop function friend_grants_bucket_trigger()');
  await knex.raw('drop function friend_grants_assignment_trigger()');
  await knex.raw('drop function friend_grants_friendship_trigger()');
  await knex.raw('drop function friend_grants_refresh(uuid, uuid)');
  await knex.raw('drop table friend_grants');
}

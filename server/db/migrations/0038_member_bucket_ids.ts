import type { Knex } from 'knex';

export const name = '0038_member_bucket_ids';

/**
 * `members.bucket_ids`: the member's own privacy buckets (its assignments of kind `member`), on the
 * member row, so the member rule (server/access/predicates.ts) is array comparisons on a row a
 * friend read has in hand instead of a read of the member's assignments per row: a friend's history
 * page checked 51 members that way, the front each fronter.
 *
 * Kept by statement triggers on privacy_bucket_assignments in the transaction of the change, for
 * every write path (the API, imports, a deleted bucket's cascade): rows added append their buckets
 * to their members, rows removed take theirs out, an update does both. The members are locked in
 * id order first, with the lock the update takes (concurrent changes of overlapping members then
 * queue instead of deadlocking; a route that checks members under a lock before writing their
 * assignments takes this one, in id order, rather than a share lock it would have to upgrade), and
 * each update computes from the row as it is when locked, so two transactions changing one
 * member's buckets at once both count. A deleted member takes its assignments with it
 * (privacy_forget_content); nothing is left to update. The assignments stay the source: the array
 * holds exactly their bucket ids, in no order.
 */
const MEMBER_ROWS = `kind = 'member' and section_key = ''`;

const statements = [
  `alter table members add column bucket_ids uuid[] not null default '{}'`,
  `update members m set bucket_ids = a.ids
     from (select content_id, array_agg(bucket_id) as ids from privacy_bucket_assignments where ${MEMBER_ROWS} group by content_id) a
    where m.id = a.content_id`,
  `create function member_bucket_ids_trigger() returns trigger language plpgsql as $$
   begin
     if tg_op in ('INSERT', 'UPDATE') then
       perform 1 from members m where m.id in (select content_id from added where ${MEMBER_ROWS}) order by m.id for no key update;
     end if;
     if tg_op in ('DELETE', 'UPDATE') then
       perform 1 from members m where m.id in (select content_id from removed where ${MEMBER_ROWS}) order by m.id for no key update;
       update members m set bucket_ids = array(select b from unnest(m.bucket_ids) b where b <> all (r.ids))
         from (select content_id, array_agg(bucket_id) as ids from removed where ${MEMBER_ROWS} group by content_id) r
        where m.id = r.content_id;
     end if;
     if tg_op in ('INSERT', 'UPDATE') then
       update members m set bucket_ids = m.bucket_ids || a.ids
         from (select content_id, array_agg(bucket_id) as ids from added where ${MEMBER_ROWS} group by content_id) a
        where m.id = a.content_id;
     end if;
     return null;
   end $$`,
  `create trigger member_bucket_ids_insert after insert on privacy_bucket_assignments
     referencing new table as added for each statement execute function member_bucket_ids_trigger()`,
  `create trigger member_bucket_ids_delete after delete on privacy_bucket_assignments
     referencing old table as removed for each statement execute function member_bucket_ids_trigger()`,
  `create trigger member_bucket_ids_update after update on privacy_bucket_assignments
     referencing old table as removed new table as added for each statement execute function member_bucket_ids_trigger()`,
];

export async function up(knex: Knex): Promise<void> {
  for (const statement of statements) await knex.raw(statement);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('drop trigger member_bucket_ids_update on privacy_bucket_assignments');
  await knex.raw('drop trigger member_bucket_ids_delete on privacy_bucket_assignments');
  await knex.raw('drop trigger member_bucket_ids_insert on privacy_bucket_assignments');
  await knex.raw('drop function member_bucket_ids_trigger()');
  await knex.raw('alter table members drop column bucket_ids');
}

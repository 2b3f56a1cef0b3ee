import type { Knex } from 'knex';

export const name = '0029_member_note_counts';

/**
 * The live notes linked to each member (`live`: links of notes not in the trash), the row the
 * per-member note cap is decided on (server/features/entries/). A note created in one statement
 * cannot count the links a concurrent writer commits while it waits for a lock: under READ
 * COMMITTED a statement reads other tables as of its start. It updates its members' counter rows
 * instead (`… where live < cap`), and PostgreSQL re-checks that condition on the newest committed
 * version of a row it had to wait for.
 *
 * Every member has a row (from its insert). Statement triggers keep `live` exact on every write
 * path (the API, imports, cascades), adding per statement what it changed: links added to or
 * removed from live notes, notes moved into or out of the trash. A removed link whose note is gone
 * (a note purged while live) cannot say whether it counted, so its member is counted again, after
 * its row is locked, with a snapshot that sees every change committed before.
 */
const statements = [
  `create table member_note_counts (
     member_id uuid primary key references members (id) on delete cascade,
     live integer not null default 0
   )`,
  `create function member_note_counts_members_added() returns trigger language plpgsql as $$
   begin
     insert into member_note_counts (member_id) select id from added order by id on conflict do nothing;
     return null;
   end $$`,
  `create trigger member_note_counts_members_added after insert on members
     referencing new table as added for each statement execute function member_note_counts_members_added()`,
  `create function member_note_counts_links_added() returns trigger language plpgsql as $$
   begin
     update member_note_counts c set live = c.live + d.n
       from (select a.member_id, count(*) as n from added a join entries e on e.id = a.entry_id
             where e.deleted_at is null group by a.member_id) d
       where c.member_id = d.member_id;
     return null;
   end $$`,
  `create trigger member_note_counts_links_added after insert on entry_members
     referencing new table as added for each statement execute function member_note_counts_links_added()`,
  `create function member_note_counts_links_removed() returns trigger language plpgsql as $$
   declare
     orphaned uuid[];
   begin
     update member_note_counts c set live = c.live - d.n
       from (select r.member_id, count(*) as n from removed r join entries e on e.id = r.entry_id
             where e.deleted_at is null group by r.member_id) d
       where c.member_id = d.member_id;
     orphaned := array(select distinct r.member_id from removed r
                       where not exists (select 1 from entries e where e.id = r.entry_id));
     if cardinality(orphaned) > 0 then
       perform 1 from member_note_counts where member_id = any (orphaned) order by member_id for update;
       update member_note_counts c set live = (
           select count(*) from members m
           join entry_members em on em.user_id = m.user_id and em.member_id = m.id
           join entries e on e.id = em.entry_id
           where m.id = c.member_id and e.deleted_at is null)
         where c.member_id = any (orphaned);
     end if;
     return null;
   end $$`,
  `create trigger member_note_counts_links_removed after delete on entry_members
     referencing old table as removed for each statement execute function member_note_counts_links_removed()`,
  `create function member_note_counts_entries_moved() returns trigger language plpgsql as $$
   begin
     update member_note_counts c set live = c.live + d.n
       from (select em.member_id, sum(case when n.deleted_at is null then 1 else -1 end) as n
             from old_rows o join new_rows n on n.id = o.id join entry_members em on em.entry_id = n.id
             where (o.deleted_at is null) <> (n.deleted_at is null)
             group by em.member_id) d
       where c.member_id = d.member_id;
     return null;
   end $$`,
  `create trigger member_note_counts_entries_moved after update on entries
     referencing old table as old_rows new table as new_rows for each statement execute function member_note_counts_entries_moved()`,
  `insert into member_note_counts (member_id, live)
     select m.id, (select count(*) from entry_members em join entries e on e.id = em.entry_id
                   where em.user_id = m.user_id and em.member_id = m.id and e.deleted_at is null)
     from members m`,
];

export async function up(knex: Knex): Promise<void> {
  for (const sql of statements) await knex.raw(sql);
}

export async function down(knex: Knex): Promise<void> {
  for (const sql of [
    'drop trigger member_note_counts_entries_moved on entries',
    'drop function member_note_counts_entries_moved()',
    'drop trigger member_note_counts_links_removed on entry_members',
    'drop function member_note_counts_links_removed()',
    'drop trigger member_note_counts_links_added on entry_members',
    'drop function member_note_counts_links_added()',
    'drop trigger member_note_counts_members_added on members',
    'drop function member_note_counts_members_added()',
    'drop table member_note_counts',
  ]) {
    await knex.raw(sql);
  }
}

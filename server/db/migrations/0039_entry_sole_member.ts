import type { Knex } from 'knex';

export const name = '0039_entry_sole_member';

/**
 * `entries.sole_member_id`: the member of the note's only link (entry_members), null when it has
 * none or several. A friend's notes list (server/features/friendActivity/repo.ts, friendNotes)
 * decides a one-link note from that member alone, without reading the note's links and
 * aggregating them; most notes link one member.
 *
 * Kept by statement triggers on entry_members in the transaction of the change, for every write
 * path (the API, imports, a purged member's or note's cascade): the notes whose links changed are
 * locked in id order, then each is recomputed from its links as they are when locked (so two
 * transactions changing one note's links at once both count). entry_members stays the source. Not
 * exported (nativeTables lists its columns): an import writes the links, and the triggers set it.
 */
const statements = [
  `alter table entries add column sole_member_id uuid`,
  `update entries e set sole_member_id = l.member_id
     from (select entry_id, (array_agg(member_id))[1] as member_id from entry_members group by entry_id having count(*) = 1) l
    where e.id = l.entry_id`,
  `create function entry_sole_member_trigger() returns trigger language plpgsql as $$
   declare
     changed uuid[];
   begin
     if tg_op = 'INSERT' then
       changed := array(select distinct entry_id from added);
     elsif tg_op = 'DELETE' then
       changed := array(select distinct entry_id from removed);
     else
       changed := array(select entry_id from added union select entry_id from removed);
     end if;
     perform 1 from entries e where e.id = any (changed) order by e.id for no key update;
     update entries e set sole_member_id = (
         select case when count(*) = 1 then (array_agg(em.member_id))[1] end from entry_members em where em.entry_id = e.id)
      where e.id = any (changed);
     return null;
   end $$`,
  `create trigger entry_sole_member_insert after insert on entry_members
     referencing new table as added for each statement execute function entry_sole_member_trigger()`,
  `create trigger entry_sole_member_delete after delete on entry_members
     referencing old table as removed for each statement execute function entry_sole_member_trigger()`,
  `create trigger entry_sole_member_update after update on entry_members
     referencing old table as removed new table as added for each statement execute function entry_sole_member_trigger()`,
];

export async function up(knex: Knex): Promise<void> {
  for (const statement of statements) await knex.raw(statement);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('drop trigger entry_sole_member_update on entry_members');
  await knex.raw('drop trigger entry_sole_member_delete on entry_members');
  await knex.raw('drop trigger entry_sole_member_insert on entry_members');
  await knex.raw('drop function entry_sole_member_trigger()');
  await knex.raw('alter table entries drop column sole_member_id');
}

import type { Knex } from 'knex';

export const name = '0040_sole_member_unchanged';

/**
 * `entries.sole_member_id` (migration 0039) rewritten only where it changes. A note's create sets
 * it in its own insert (createEntrySql), so the link trigger that follows finds it right and writes
 * nothing: before, every note created was updated again (a second version of its row, and the
 * statement triggers of entries run for it). The notes whose links changed are still locked in id
 * order first and recomputed from their links as they are once locked: comparing without the lock
 * could keep a value a concurrent change of the same note's links has made wrong. An update of
 * entries runs only when some value differs (a statement-level trigger of entries fires on an
 * update of no rows too).
 */
// The member of note `e`'s only link, or null (the definition of 0039).
const SOLE = `(select case when count(*) = 1 then (array_agg(em.member_id))[1] end
         from entry_members em where em.entry_id = e.id)`;

const CHANGED = `if tg_op = 'INSERT' then
       changed := array(select distinct entry_id from added);
     elsif tg_op = 'DELETE' then
       changed := array(select distinct entry_id from removed);
     else
       changed := array(select entry_id from added union select entry_id from removed);
     end if;
     perform 1 from entries e where e.id = any (changed) order by e.id for no key update;`;

const UP = `create or replace function entry_sole_member_trigger() returns trigger language plpgsql as $$
   declare
     changed uuid[];
     stale uuid[];
     sole uuid[];
   begin
     ${CHANGED}
     select array_agg(e.id), array_agg(s.member_id) into stale, sole
       from entries e cross join lateral (select ${SOLE} as member_id) s
       where e.id = any (changed) and e.sole_member_id is distinct from s.member_id;
     if stale is not null then
       update entries e set sole_member_id = u.member_id
         from unnest(stale, sole) as u(id, member_id) where e.id = u.id;
     end if;
     return null;
   end $$`;

const DOWN = `create or replace function entry_sole_member_trigger() returns trigger language plpgsql as $$
   declare
     changed uuid[];
   begin
     ${CHANGED}
     update entries e set sole_member_id = ${SOLE}
      where e.id = any (changed);
     return null;
   end $$`;

export async function up(knex: Knex): Promise<void> {
  await knex.raw(UP);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw(DOWN);
}

import type { Knex } from 'knex';

export const name = '0025_front_count_per_statement';

/**
 * The live front-session count (0005) gained one on every inserted session, through a row trigger
 * that upserts the account's counter row. Many sessions inserted in one transaction (an import's
 * front history) then update that one row again and again, and each update walks the chain of
 * versions the transaction has left on it: the cost of an insert grew with the sessions inserted
 * before it (300,000 sessions took minutes). Inserts now add to the counter once per statement,
 * from the statement's new rows (a transition table); updates and deletes keep the row trigger.
 */
const UP = [
  'drop trigger front_sessions_count on front_sessions',
  `create trigger front_sessions_count after delete or update of deleted_at, member_id on front_sessions
     for each row execute function front_sessions_count_trigger()`,
  `create function front_sessions_count_insert_trigger() returns trigger language plpgsql as $$
   begin
     insert into front_session_counts (user_id, live)
       select n.user_id, count(*) from inserted n
       where n.deleted_at is null and exists (select 1 from members m where m.id = n.member_id and m.deleted_at is null)
       group by n.user_id
     on conflict (user_id) do update set live = front_session_counts.live + excluded.live;
     return null;
   end $$`,
  `create trigger front_sessions_count_insert after insert on front_sessions
     referencing new table as inserted for each statement execute function front_sessions_count_insert_trigger()`,
];

const DOWN = [
  'drop trigger front_sessions_count_insert on front_sessions',
  'drop function front_sessions_count_insert_trigger()',
  'drop trigger front_sessions_count on front_sessions',
  `create trigger front_sessions_count after insert or delete or update of deleted_at, member_id on front_sessions
     for each row execute function front_sessions_count_trigger()`,
];

export async function up(knex: Knex): Promise<void> {
  for (const statement of UP) await knex.raw(statement);
}

export async function down(knex: Knex): Promise<void> {
  for (const statement of DOWN) await knex.raw(statement);
}

import type { Knex } from 'knex';

export const name = '0033_webhook_counts';

/**
 * Each account's number of webhooks (`n`), the row the per-account cap is decided on
 * (server/features/webhooks/). A webhook created in one statement cannot count the webhooks a
 * concurrent create commits while it waits: under READ COMMITTED a statement reads other tables as
 * of its start. It takes its account's counter row instead (`… where n < cap`), and PostgreSQL
 * re-checks that condition on the newest committed version of a row it had to wait for.
 *
 * Statement triggers keep `n` exact on every path (the API, cascades from a deleted account);
 * an account without webhooks may have no row.
 */
const statements = [
  `create table webhook_counts (
     user_id uuid primary key references accounts (id) on delete cascade,
     n integer not null default 0
   )`,
  `create function webhook_counts_added() returns trigger language plpgsql as $$
   begin
     insert into webhook_counts as c (user_id, n)
       select user_id, count(*) from added group by user_id order by user_id
       on conflict (user_id) do update set n = c.n + excluded.n;
     return null;
   end $$`,
  `create trigger webhook_counts_added after insert on webhooks
     referencing new table as added for each statement execute function webhook_counts_added()`,
  `create function webhook_counts_removed() returns trigger language plpgsql as $$
   begin
     update webhook_counts c set n = c.n - d.n
       from (select user_id, count(*) as n from removed group by user_id) d
       where c.user_id = d.user_id;
     return null;
   end $$`,
  `create trigger webhook_counts_removed after delete on webhooks
     referencing old table as removed for each statement execute function webhook_counts_removed()`,
  `insert into webhook_counts (user_id, n) select user_id, count(*) from webhooks group by user_id`,
];

export async function up(knex: Knex): Promise<void> {
  for (const sql of statements) await knex.raw(sql);
}

export async function down(knex: Knex): Promise<void> {
  for (const sql of [
    'drop trigger webhook_counts_removed on webhooks',
    'drop function webhook_counts_removed()',
    'drop trigger webhook_counts_added on webhooks',
    'drop function webhook_counts_added()',
    'drop table webhook_counts',
  ]) {
    await knex.raw(sql);
  }
}

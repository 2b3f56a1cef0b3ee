import type { Knex } from 'knex';

export const name = '0005_front_session_counts';

/**
 * An exact per-account count of the front sessions history shows (not trashed, member not
 * trashed), kept by triggers so every write path — API, cascades, member trash and restore —
 * keeps it right. GET /front/history reads it instead of counting a million rows.
 * No foreign key to accounts: a cascade deleting an account must not trip over its own counter.
 */
const statements = [
  `create table front_session_counts (
     user_id uuid primary key,
     live bigint not null default 0
   )`,
  `create function front_session_counts_add(uid uuid, delta bigint) returns void language plpgsql as $$
   begin
     insert into front_session_counts (user_id, live) values (uid, delta)
     on conflict (user_id) do update set live = front_session_counts.live + excluded.live;
   end $$`,
  `create function front_sessions_count_trigger() returns trigger language plpgsql as $$
   declare
     was_live boolean := false;
     is_live boolean := false;
   begin
     if tg_op in ('UPDATE', 'DELETE') then
       was_live := old.deleted_at is null and exists (select 1 from members m where m.id = old.member_id and m.deleted_at is null);
     end if;
     if tg_op in ('INSERT', 'UPDATE') then
       is_live := new.deleted_at is null and exists (select 1 from members m where m.id = new.member_id and m.deleted_at is null);
     end if;
     if was_live and not is_live then
       perform front_session_counts_add(old.user_id, -1);
     elsif is_live and not was_live then
       perform front_session_counts_add(new.user_id, 1);
     end if;
     return null;
   end $$`,
  `create trigger front_sessions_count after insert or delete or update of deleted_at, member_id on front_sessions
     for each row execute function front_sessions_count_trigger()`,
  `create function members_front_count_trigger() returns trigger language plpgsql as $$
   declare
     n bigint;
   begin
     if (old.deleted_at is null) = (new.deleted_at is null) then
       return null;
     end if;
     select count(*) into n from front_sessions s where s.member_id = new.id and s.deleted_at is null;
     if n > 0 then
       perform front_session_counts_add(new.user_id, case when new.deleted_at is null then n else -n end);
     end if;
     return null;
   end $$`,
  `create trigger members_front_count after update of deleted_at on members
     for each row execute function members_front_count_trigger()`,
  `insert into front_session_counts (user_id, live)
     select s.user_id, count(*) from front_sessions s join members m on m.id = s.member_id
     where s.deleted_at is null and m.deleted_at is null group by s.user_id`,
];

export async function up(knex: Knex): Promise<void> {
  for (const sql of statements) await knex.raw(sql);
}

export async function down(knex: Knex): Promise<void> {
  for (const sql of [
    'drop trigger members_front_count on members',
    'drop function members_front_count_trigger()',
    'drop trigger front_sessions_count on front_sessions',
    'drop function front_sessions_count_trigger()',
    'drop function front_session_counts_add(uuid, bigint)',
    'drop table front_session_counts',
  ]) {
    await knex.raw(sql);
  }
}

import type { Knex } from 'knex';

export const name = '0020_front_session_buckets';

/**
 * The owner's front sessions listed per privacy bucket of their member, newest first: what a
 * friend's history page walks (server/features/friendActivity/repo.ts, historyPage). A friend
 * holds a few buckets; its page is then a few index walks in history order, like the owner's own
 * walk of front_sessions_history, whatever share of the owner's members or sessions it sees and
 * however deep the cursor. Without it, the page took one index read per visible member.
 *
 * One row per (session, bucket of its member): kept by triggers, so every write path (the API,
 * imports, cascades) keeps it exact:
 * - a session inserted, or its member or start changed: its rows are (re)written from the member's
 *   assignments;
 * - a member assignment (kind `member`) added: the member's sessions are listed in that bucket;
 *   removed (or its bucket deleted, which cascades to the assignments): they are taken out;
 * - a session deleted (or its member or account purged): its rows go with it (foreign key).
 * The table only orders candidates: the friend read still checks every row's member and session
 * with the access engine, so a stale row could cost a skipped row, never show a hidden one.
 * Trashed sessions stay listed (the read skips them), as in front_sessions_member_recent.
 */
const statements = [
  `create table front_session_buckets (
     session_id uuid not null references front_sessions (id) on delete cascade,
     bucket_id uuid not null,
     member_id uuid not null,
     started_at bigint not null,
     primary key (session_id, bucket_id)
   )`,
  `create index front_session_buckets_recent on front_session_buckets (bucket_id, started_at desc, session_id desc)`,
  `create index front_session_buckets_member on front_session_buckets (member_id, bucket_id)`,
  `create function front_session_buckets_session_trigger() returns trigger language plpgsql as $$
   begin
     if tg_op = 'UPDATE' then
       if new.member_id = old.member_id and new.started_at = old.started_at then
         return null;
       end if;
       delete from front_session_buckets where session_id = old.id;
     end if;
     insert into front_session_buckets (session_id, bucket_id, member_id, started_at)
       select new.id, a.bucket_id, new.member_id, new.started_at from privacy_bucket_assignments a
       where a.kind = 'member' and a.content_id = new.member_id and a.section_key = '';
     return null;
   end $$`,
  `create trigger front_session_buckets_session after insert or update of member_id, started_at on front_sessions
     for each row execute function front_session_buckets_session_trigger()`,
  `create function front_session_buckets_assignment_trigger() returns trigger language plpgsql as $$
   begin
     if tg_op in ('UPDATE', 'DELETE') and old.kind = 'member' and old.section_key = '' then
       delete from front_session_buckets where member_id = old.content_id and bucket_id = old.bucket_id;
     end if;
     if tg_op in ('INSERT', 'UPDATE') and new.kind = 'member' and new.section_key = '' then
       insert into front_session_buckets (session_id, bucket_id, member_id, started_at)
         select s.id, new.bucket_id, s.member_id, s.started_at from front_sessions s where s.member_id = new.content_id
         on conflict do nothing;
     end if;
     return null;
   end $$`,
  `create trigger front_session_buckets_assignment after insert or delete or update on privacy_bucket_assignments
     for each row execute function front_session_buckets_assignment_trigger()`,
  `insert into front_session_buckets (session_id, bucket_id, member_id, started_at)
     select s.id, a.bucket_id, s.member_id, s.started_at
     from privacy_bucket_assignments a join front_sessions s on s.member_id = a.content_id
     where a.kind = 'member' and a.section_key = ''`,
  // Statistics now rather than at autovacuum's next pass: without them the friend history walk may
  // be planned as a read of a whole bucket's list and a sort (see historyPage).
  `analyze front_session_buckets`,
];

export async function up(knex: Knex): Promise<void> {
  for (const sql of statements) await knex.raw(sql);
}

export async function down(knex: Knex): Promise<void> {
  for (const sql of [
    'drop trigger front_session_buckets_assignment on privacy_bucket_assignments',
    'drop function front_session_buckets_assignment_trigger()',
    'drop trigger front_session_buckets_session on front_sessions',
    'drop function front_session_buckets_session_trigger()',
    'drop table front_session_buckets',
  ]) {
    await knex.raw(sql);
  }
}

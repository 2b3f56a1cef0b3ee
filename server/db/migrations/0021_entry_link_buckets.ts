import type { Knex } from 'knex';

export const name = '0021_entry_link_buckets';

/**
 * The owner's note links listed per privacy bucket of their member, newest note first: what a
 * friend's notes list walks (server/features/friendActivity/repo.ts, notes). A friend holds a few
 * buckets; its list is then a few index walks in the notes' order, down to the spec's window of
 * the owner's 500 most recent notes, touching only the links of members in those buckets. Without
 * it, the list probed the links of each of the window's 500 notes, whatever share it could see.
 *
 * One row per (note, linked member, bucket of that member), with the note's `updated_at` (the
 * list's order): kept by triggers, so every write path (the API, imports, cascades) keeps it exact:
 * - a link added (entry_members): it is listed in each of its member's buckets; removed (or its
 *   note or member purged, which cascades to the links): its rows are taken out;
 * - a note's `updated_at` changed: its rows follow;
 * - a member assignment (kind `member`) added: the member's links are listed in that bucket;
 *   removed (or its bucket deleted, which cascades to the assignments): they are taken out.
 * The table only orders candidates: the friend read still checks every walked row's member and
 * note with the access engine, so a stale row could cost a skipped row, never show a hidden note.
 * Trashed notes stay listed (the read skips them), as they keep their links.
 */
const statements = [
  `create table entry_link_buckets (
     entry_id uuid not null references entries (id) on delete cascade,
     member_id uuid not null,
     bucket_id uuid not null,
     updated_at bigint not null,
     primary key (entry_id, member_id, bucket_id)
   )`,
  `create index entry_link_buckets_recent on entry_link_buckets (bucket_id, updated_at desc, entry_id)`,
  `create index entry_link_buckets_member on entry_link_buckets (member_id, bucket_id)`,
  `create function entry_link_buckets_link_trigger() returns trigger language plpgsql as $$
   begin
     if tg_op in ('UPDATE', 'DELETE') then
       if tg_op = 'UPDATE' and new.entry_id = old.entry_id and new.member_id = old.member_id then
         return null;
       end if;
       delete from entry_link_buckets where entry_id = old.entry_id and member_id = old.member_id;
     end if;
     if tg_op in ('INSERT', 'UPDATE') then
       insert into entry_link_buckets (entry_id, member_id, bucket_id, updated_at)
         select new.entry_id, new.member_id, a.bucket_id, e.updated_at
         from privacy_bucket_assignments a join entries e on e.id = new.entry_id
         where a.kind = 'member' and a.content_id = new.member_id and a.section_key = ''
         on conflict do nothing;
     end if;
     return null;
   end $$`,
  `create trigger entry_link_buckets_link after insert or delete or update on entry_members
     for each row execute function entry_link_buckets_link_trigger()`,
  `create function entry_link_buckets_entry_trigger() returns trigger language plpgsql as $$
   begin
     update entry_link_buckets set updated_at = new.updated_at where entry_id = new.id;
     return null;
   end $$`,
  `create trigger entry_link_buckets_entry after update of updated_at on entries
     for each row when (new.updated_at is distinct from old.updated_at) execute function entry_link_buckets_entry_trigger()`,
  `create function entry_link_buckets_assignment_trigger() returns trigger language plpgsql as $$
   begin
     if tg_op in ('UPDATE', 'DELETE') and old.kind = 'member' and old.section_key = '' then
       delete from entry_link_buckets where member_id = old.content_id and bucket_id = old.bucket_id;
     end if;
     if tg_op in ('INSERT', 'UPDATE') and new.kind = 'member' and new.section_key = '' then
       insert into entry_link_buckets (entry_id, member_id, bucket_id, updated_at)
         select em.entry_id, em.member_id, new.bucket_id, e.updated_at
         from entry_members em join entries e on e.id = em.entry_id
         where em.user_id = new.user_id and em.member_id = new.content_id
         on conflict do nothing;
     end if;
     return null;
   end $$`,
  `create trigger entry_link_buckets_assignment after insert or delete or update on privacy_bucket_assignments
     for each row execute function entry_link_buckets_assignment_trigger()`,
  `insert into entry_link_buckets (entry_id, member_id, bucket_id, updated_at)
     select em.entry_id, em.member_id, a.bucket_id, e.updated_at
     from privacy_bucket_assignments a
     join entry_members em on em.user_id = a.user_id and em.member_id = a.content_id
     join entries e on e.id = em.entry_id
     where a.kind = 'member' and a.section_key = ''`,
  // Statistics now rather than at autovacuum's next pass, as for front_session_buckets (0020).
  `analyze entry_link_buckets`,
];

export async function up(knex: Knex): Promise<void> {
  for (const sql of statements) await knex.raw(sql);
}

export async function down(knex: Knex): Promise<void> {
  for (const sql of [
    'drop trigger entry_link_buckets_assignment on privacy_bucket_assignments',
    'drop function entry_link_buckets_assignment_trigger()',
    'drop trigger entry_link_buckets_entry on entries',
    'drop function entry_link_buckets_entry_trigger()',
    'drop trigger entry_link_buckets_link on entry_members',
    'drop function entry_link_buckets_link_trigger()',
    'drop table entry_link_buckets',
  ]) {
    await knex.raw(sql);
  }
}

import type { Knex } from 'knex';
import { execScript } from '../sql.ts';

export const name = '0012_privacy';

/**
 * Privacy buckets and friendships (docs/privacy.md).
 *
 * - privacy_buckets: an account's labels, each with a friend permission map (group → none, read or
 *   read_write). Built-in presets have fixed slugs, unique per account, so concurrent first reads
 *   that create them cannot duplicate them (insert … on conflict do nothing).
 * - privacy_bucket_assignments: which of the owner's buckets a piece of content — or a friend —
 *   carries. One table for every kind, so the access engine (server/access/) has one predicate
 *   shape: `exists (assignment of this content with a bucket the viewer holds)`, probed by the
 *   primary key (kind, content_id, section_key, bucket_id). Rows go with their bucket (cascade)
 *   and with their content (the triggers below), so an assignment never outlives either. The
 *   foreign key is (account, bucket): an account's assignment can only name its own bucket.
 * - privacy_bucket_defaults: the buckets given to new content of a kind created without explicit
 *   buckets.
 * - friendships: one row per side (user_id's view of friend_user_id). A pending request is an
 *   outgoing row for the requester and an incoming row for the recipient; a block is the
 *   blocker's row with status blocked (the blocked side's row, if any, reads revoked).
 * - accounts.appear_in_suggestions: whether the account may be suggested to friends of friends.
 * - Text-search indexes for the friend search routes.
 */
export async function up(knex: Knex): Promise<void> {
  await execScript(
    knex,
    `
    create table privacy_buckets (
      id uuid primary key,
      user_id uuid not null references accounts (id) on delete cascade,
      slug text not null,
      builtin boolean not null default false,
      name text not null,
      description text not null default '',
      icon text,
      icon_color_preset text,
      friend_permissions jsonb not null,
      created_at bigint not null,
      updated_at bigint not null
    );
    create unique index privacy_buckets_slug on privacy_buckets (user_id, slug);
    create index privacy_buckets_user on privacy_buckets (user_id, created_at, id);
    create unique index privacy_buckets_owner on privacy_buckets (user_id, id);

    create table privacy_bucket_assignments (
      user_id uuid not null references accounts (id) on delete cascade,
      bucket_id uuid not null,
      kind text not null check (kind in ('member', 'group', 'directory', 'custom_field', 'profile_section', 'side_system', 'sub_system', 'member_status', 'friend')),
      content_id uuid not null,
      section_key text not null default '' check (
        (kind = 'profile_section' and section_key in ('avatar', 'displayName', 'pronouns', 'about', 'profileStyle'))
        or (kind <> 'profile_section' and section_key = '')
      ),
      created_at bigint not null,
      primary key (kind, content_id, section_key, bucket_id),
      foreign key (user_id, bucket_id) references privacy_buckets (user_id, id) on delete cascade
    );
    create index privacy_bucket_assignments_bucket on privacy_bucket_assignments (bucket_id, kind, content_id);

    create table privacy_bucket_defaults (
      user_id uuid not null references accounts (id) on delete cascade,
      kind text not null check (kind in ('new_member', 'new_group', 'new_directory', 'new_custom_field', 'new_profile_section', 'new_friend')),
      bucket_id uuid not null,
      primary key (user_id, kind, bucket_id),
      foreign key (user_id, bucket_id) references privacy_buckets (user_id, id) on delete cascade
    );

    create table friendships (
      id uuid primary key,
      user_id uuid not null references accounts (id) on delete cascade,
      friend_user_id uuid not null references accounts (id) on delete cascade,
      status text not null check (status in ('pending', 'accepted', 'blocked', 'revoked')),
      direction text check (direction in ('outgoing', 'incoming')),
      block_reason text,
      created_at bigint not null,
      accepted_at bigint,
      updated_at bigint not null,
      check (user_id <> friend_user_id),
      check ((status = 'pending') = (direction is not null))
    );
    create unique index friendships_pair on friendships (user_id, friend_user_id);
    create index friendships_list on friendships (user_id, status, created_at, id);
    create index friendships_reverse on friendships (friend_user_id, status);
    create index friendships_page on friendships (user_id, created_at, id);

    -- Friend search (GET /friends/search…): word-prefix matching with the simple text-search
    -- configuration on what a friend may match (member names, note titles and text, group and
    -- folder names); each query also filters by owner and by the viewer's buckets.
    create index members_search on members using gin (to_tsvector('simple', name)) where deleted_at is null;
    create index entries_search on entries using gin (to_tsvector('simple', coalesce(title, '') || ' ' || content)) where deleted_at is null;
    create index directories_search on directories using gin (to_tsvector('simple', name)) where deleted_at is null;

    alter table accounts add column appear_in_suggestions boolean not null default true;

    -- Assignments go with their content. The kinds a deleted row may carry are the trigger's arguments.
    -- (The body is on one line: execScript splits at semicolons that end a line.)
    create function privacy_forget_content() returns trigger language plpgsql as $$ begin delete from privacy_bucket_assignments where content_id = old.id and kind = any (tg_argv::text[]); return old; end $$;
    create trigger members_privacy_forget after delete on members
      for each row execute function privacy_forget_content('member', 'profile_section');
    create trigger directories_privacy_forget after delete on directories
      for each row execute function privacy_forget_content('group', 'directory');
    create trigger custom_fields_privacy_forget after delete on custom_field_definitions
      for each row execute function privacy_forget_content('custom_field');
    create trigger side_systems_privacy_forget after delete on side_systems
      for each row execute function privacy_forget_content('side_system');
    create trigger sub_systems_privacy_forget after delete on sub_systems
      for each row execute function privacy_forget_content('sub_system');
    create trigger member_statuses_privacy_forget after delete on member_status_definitions
      for each row execute function privacy_forget_content('member_status');
    create trigger accounts_privacy_forget after delete on accounts
      for each row execute function privacy_forget_content('friend')
  `,
  );
}

export async function down(knex: Knex): Promise<void> {
  await execScript(
    knex,
    `
    drop trigger accounts_privacy_forget on accounts;
    drop trigger member_statuses_privacy_forget on member_status_definitions;
    drop trigger sub_systems_privacy_forget on sub_systems;
    drop trigger side_systems_privacy_forget on side_systems;
    drop trigger custom_fields_privacy_forget on custom_field_definitions;
    drop trigger directories_privacy_forget on directories;
    drop trigger members_privacy_forget on members;
    drop function privacy_forget_content();
    alter table accounts drop column appear_in_suggestions;
    drop index directories_search;
    drop index entries_search;
    drop index members_search;
    drop table friendships;
    drop table privacy_bucket_defaults;
    drop table privacy_bucket_assignments;
    drop table privacy_buckets
  `,
  );
}

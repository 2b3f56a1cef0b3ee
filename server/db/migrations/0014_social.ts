import type { Knex } from 'knex';
import { execScript } from '../sql.ts';

export const name = '0014_social';

/**
 * The social profile, its guestbook messages and poll ballots (docs/social.md).
 *
 * - social_profiles: one row per account once it changes anything social: the theme (jsonb, null
 *   when cleared) and `updated_at`, touched by every social write of the account.
 * - social_links / social_widgets: the account's links and widgets, each with a `sort_order`.
 *   A widget's `config` is the validated discriminated union (jsonb); `type` equals `config.kind`.
 * - guestbook_messages: messages on a guestbook widget (`user_id` = the guestbook's owner).
 *   Replies reference a top-level message of the same widget; deleting a widget or a top-level
 *   message deletes its messages or replies (cascade). Threads page by (widget, created_at, id).
 * - poll_ballots: one ballot per voter per poll widget (primary key), `option_indices` never
 *   empty (an empty vote deletes the ballot); `user_id` = the poll's owner.
 * - social_identities: verified external identities the operator registered for an account
 *   (admin API), read by POST /social/sync-oauth.
 */
export async function up(knex: Knex): Promise<void> {
  await execScript(
    knex,
    `
    create table social_profiles (
      user_id uuid primary key references accounts (id) on delete cascade,
      theme jsonb,
      updated_at bigint not null
    );

    create table social_links (
      id uuid primary key,
      user_id uuid not null references accounts (id) on delete cascade,
      platform text not null,
      display_name text not null,
      handle text,
      url text,
      description text,
      badge text,
      accent_color text,
      avatar_url text,
      visibility text not null,
      featured boolean not null default false,
      sort_order integer not null,
      created_at bigint not null,
      updated_at bigint not null
    );
    create index social_links_owner on social_links (user_id, sort_order, id);

    create table social_widgets (
      id uuid primary key,
      user_id uuid not null references accounts (id) on delete cascade,
      type text not null,
      title text,
      config jsonb not null,
      visibility text not null,
      size text not null,
      sort_order integer not null,
      pinned boolean not null default false,
      collapsed boolean not null default false,
      created_at bigint not null,
      updated_at bigint not null
    );
    create index social_widgets_owner on social_widgets (user_id, sort_order, id);

    create table guestbook_messages (
      id uuid primary key,
      user_id uuid not null references accounts (id) on delete cascade,
      widget_id uuid not null references social_widgets (id) on delete cascade,
      parent_message_id uuid references guestbook_messages (id) on delete cascade,
      author_user_id uuid not null references accounts (id) on delete cascade,
      posted_anonymously boolean not null default false,
      body text not null,
      hidden_by_owner boolean not null default false,
      created_at bigint not null
    );
    create index guestbook_threads on guestbook_messages (widget_id, created_at desc, id desc) where parent_message_id is null;
    create index guestbook_replies on guestbook_messages (parent_message_id, created_at, id);

    create table poll_ballots (
      widget_id uuid not null references social_widgets (id) on delete cascade,
      voter_user_id uuid not null references accounts (id) on delete cascade,
      user_id uuid not null references accounts (id) on delete cascade,
      option_indices integer[] not null,
      updated_at bigint not null,
      primary key (widget_id, voter_user_id)
    );

    create table social_identities (
      id uuid primary key,
      user_id uuid not null references accounts (id) on delete cascade,
      provider text not null,
      external_user_id text not null,
      handle text,
      url text,
      avatar_url text,
      verified_at bigint not null,
      unique (user_id, provider)
    );
  `,
  );
}

export async function down(knex: Knex): Promise<void> {
  await execScript(
    knex,
    `
    drop table social_identities;
    drop table poll_ballots;
    drop table guestbook_messages;
    drop table social_widgets;
    drop table social_links;
    drop table social_profiles;
  `,
  );
}

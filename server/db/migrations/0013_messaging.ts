import type { Knex } from 'knex';
import { execScript } from '../sql.ts';

export const name = '0013_messaging';

/**
 * In-account chat (docs/messaging.md).
 *
 * - messaging_spaces / _categories / _channels: an account's spaces, each with categories and
 *   channels ordered by `position`. Archive is `archived_at` (spaces, channels); a category is
 *   deleted for good after its channels move to uncategorised. Children reference their parent
 *   with the account in the key, so a row can never hang under another account's parent.
 * - Channels carry the account's read state: `last_seq` (the sequence number of the newest
 *   message), `read_seq` (the read marker) and `unread_count` (live messages after the marker),
 *   maintained by every send, delete and read, so bootstrap reads the counts off the channel rows.
 * - messaging_messages: text only as AES-256-GCM ciphertext (`content_enc`, with `key_id`), never in
 *   clear. Pages walk `(channel_id, created_at, id)` among live rows; `client_mutation_id` is unique
 *   per account (idempotent sends).
 * - messaging_pins; messaging_preferences (last viewed route, emoji and GIF settings);
 *   messaging_chat_as (the member an account posts as, per space or per channel).
 */
export async function up(knex: Knex): Promise<void> {
  await execScript(
    knex,
    `
    create table messaging_spaces (
      id uuid primary key,
      user_id uuid not null references accounts (id) on delete cascade,
      name text not null,
      description text,
      side_system_id uuid references side_systems (id),
      position integer not null,
      created_at bigint not null,
      updated_at bigint not null,
      archived_at bigint
    );
    create unique index messaging_spaces_owner on messaging_spaces (user_id, id);
    create index messaging_spaces_order on messaging_spaces (user_id, position, id) where archived_at is null;

    create table messaging_categories (
      id uuid primary key,
      user_id uuid not null,
      space_id uuid not null,
      name text not null,
      collapsed boolean not null default false,
      position integer not null,
      created_at bigint not null,
      updated_at bigint not null,
      foreign key (user_id, space_id) references messaging_spaces (user_id, id) on delete cascade
    );
    create unique index messaging_categories_owner on messaging_categories (user_id, id);
    create index messaging_categories_order on messaging_categories (user_id, space_id, position, id);

    create table messaging_channels (
      id uuid primary key,
      user_id uuid not null,
      space_id uuid not null,
      category_id uuid,
      name text not null,
      topic text,
      channel_type text not null check (channel_type in ('text', 'media')),
      position integer not null,
      last_seq bigint not null default 0,
      read_seq bigint not null default 0,
      unread_count integer not null default 0 check (unread_count >= 0),
      created_at bigint not null,
      updated_at bigint not null,
      archived_at bigint,
      foreign key (user_id, space_id) references messaging_spaces (user_id, id) on delete cascade,
      foreign key (user_id, category_id) references messaging_categories (user_id, id)
    );
    create unique index messaging_channels_owner on messaging_channels (user_id, id);
    create index messaging_channels_order on messaging_channels (user_id, space_id, position, id) where archived_at is null;
    create index messaging_channels_category on messaging_channels (category_id) where category_id is not null;

    create table messaging_messages (
      id uuid primary key,
      user_id uuid not null,
      channel_id uuid not null,
      seq bigint not null,
      author_member_id uuid not null,
      key_id text not null,
      content_enc bytea not null,
      reply_to_id uuid references messaging_messages (id),
      mention_member_ids uuid[] not null default '{}',
      client_mutation_id text,
      created_at bigint not null,
      edited_at bigint,
      deleted_at bigint,
      foreign key (user_id, channel_id) references messaging_channels (user_id, id) on delete cascade
    );
    create index messaging_messages_page on messaging_messages (channel_id, created_at, id) where deleted_at is null;
    create index messaging_messages_seq on messaging_messages (channel_id, seq) where deleted_at is null;
    create unique index messaging_messages_mutation on messaging_messages (user_id, client_mutation_id) where client_mutation_id is not null;
    create index messaging_messages_key on messaging_messages (key_id);
    create index messaging_messages_reply on messaging_messages (reply_to_id) where reply_to_id is not null;

    create table messaging_pins (
      user_id uuid not null,
      channel_id uuid not null,
      message_id uuid not null references messaging_messages (id) on delete cascade,
      pinned_at bigint not null,
      primary key (channel_id, message_id),
      foreign key (user_id, channel_id) references messaging_channels (user_id, id) on delete cascade
    );

    create table messaging_preferences (
      user_id uuid primary key references accounts (id) on delete cascade,
      last_space_id uuid,
      last_channel_id uuid,
      emoji jsonb,
      gif jsonb,
      updated_at bigint not null
    );

    create table messaging_chat_as (
      user_id uuid not null,
      space_id uuid not null,
      channel_key text not null,
      member_id uuid not null references members (id) on delete cascade,
      updated_at bigint not null,
      primary key (user_id, space_id, channel_key),
      foreign key (user_id, space_id) references messaging_spaces (user_id, id) on delete cascade
    )
  `,
  );
}

export async function down(knex: Knex): Promise<void> {
  await execScript(
    knex,
    `
    drop table messaging_chat_as;
    drop table messaging_preferences;
    drop table messaging_pins;
    drop table messaging_messages;
    drop table messaging_channels;
    drop table messaging_categories;
    drop table messaging_spaces
  `,
  );
}

import type { Knex } from 'knex';
import { execScript } from '../sql.ts';

export const name = '0004_entries_front_trash';

export async function up(knex: Knex): Promise<void> {
  await execScript(
    knex,
    `
    -- Notes. member_id is the legacy single link; member_ids is the list as the client set it
    -- (null when never set); entry_members holds the union of both for filtering and caps.
    create table entries (
      id uuid primary key,
      user_id uuid not null references accounts (id) on delete cascade,
      side_system_id uuid not null references side_systems (id),
      sub_system_id uuid references sub_systems (id),
      title text,
      content text not null,
      member_id uuid references members (id) on delete set null,
      member_ids jsonb,
      created_at bigint not null,
      updated_at bigint not null,
      deleted_at bigint
    );
    create index entries_user_recent on entries (user_id, updated_at desc, id) where deleted_at is null;
    create index entries_user_side_recent on entries (user_id, side_system_id, updated_at desc, id) where deleted_at is null;
    create index entries_trash on entries (user_id, deleted_at) where deleted_at is not null;
    create index entries_sub on entries (sub_system_id) where sub_system_id is not null;
    create index entries_member on entries (member_id) where member_id is not null;

    create table entry_members (
      entry_id uuid not null references entries (id) on delete cascade,
      member_id uuid not null references members (id) on delete cascade,
      user_id uuid not null references accounts (id) on delete cascade,
      position integer not null,
      primary key (entry_id, member_id)
    );
    create index entry_members_member on entry_members (user_id, member_id, entry_id);

    -- Front sessions: open while ended_at is null; position orders the current front.
    create table front_sessions (
      id uuid primary key,
      user_id uuid not null references accounts (id) on delete cascade,
      member_id uuid not null references members (id) on delete cascade,
      side_system_id uuid not null references side_systems (id),
      sub_system_id uuid references sub_systems (id),
      started_at bigint not null,
      ended_at bigint,
      note text,
      created_by uuid references members (id) on delete set null,
      position integer,
      created_at bigint not null,
      updated_at bigint not null,
      deleted_at bigint
    );
    create index front_sessions_history on front_sessions (user_id, started_at desc, id desc) where deleted_at is null;
    create unique index front_sessions_one_open on front_sessions (user_id, member_id) where ended_at is null and deleted_at is null;
    create index front_sessions_member on front_sessions (member_id);
    create index front_sessions_trash on front_sessions (user_id, deleted_at) where deleted_at is not null;
    create index front_sessions_sub on front_sessions (sub_system_id) where sub_system_id is not null;
    create index front_sessions_side on front_sessions (user_id, side_system_id);

    create table front_custom_tiers (
      id uuid primary key,
      user_id uuid not null references accounts (id) on delete cascade,
      display_name text not null,
      created_at bigint not null,
      updated_at bigint not null
    );
    create index front_custom_tiers_user on front_custom_tiers (user_id, created_at, id);

    create table front_tier_presence (
      user_id uuid not null references accounts (id) on delete cascade,
      member_id uuid not null references members (id) on delete cascade,
      tier_key text not null,
      note text,
      created_at bigint not null,
      updated_at bigint not null,
      primary key (user_id, member_id)
    );
    create index front_tier_presence_member on front_tier_presence (member_id);

    -- Trash retention per account; null means the server default (TRASH_RETENTION_DAYS).
    alter table accounts add column trash_retention_days integer check (trash_retention_days between 1 and 3650)
  `,
  );
}

export async function down(knex: Knex): Promise<void> {
  await execScript(
    knex,
    `
    alter table accounts drop column trash_retention_days;
    drop table front_tier_presence;
    drop table front_custom_tiers;
    drop table front_sessions;
    drop table entry_members;
    drop table entries
  `,
  );
}

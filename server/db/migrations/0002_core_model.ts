import type { Knex } from 'knex';
import { execScript } from '../sql.ts';

export const name = '0002_core_model';

export async function up(knex: Knex): Promise<void> {
  await execScript(
    knex,
    `
    create table side_systems (
      id uuid primary key,
      user_id uuid not null references accounts (id) on delete cascade,
      name text not null,
      description text,
      icon text,
      tag_code text,
      tag_color text,
      created_at bigint not null,
      updated_at bigint not null,
      deleted_at bigint
    );
    create index side_systems_user on side_systems (user_id, created_at, id) where deleted_at is null;

    create table directories (
      id uuid primary key,
      user_id uuid not null references accounts (id) on delete cascade,
      kind text not null check (kind in ('folder', 'group')),
      side_system_id uuid not null references side_systems (id),
      sub_system_id uuid,
      parent_id uuid references directories (id) on delete cascade,
      name text not null,
      description text,
      color text,
      created_at bigint not null,
      updated_at bigint not null,
      deleted_at bigint
    );
    create index directories_user_side on directories (user_id, side_system_id, kind);
    create index directories_parent on directories (parent_id) where parent_id is not null;
    create index directories_trash on directories (user_id, deleted_at) where deleted_at is not null;

    create table members (
      id uuid primary key,
      user_id uuid not null references accounts (id) on delete cascade,
      side_system_id uuid not null references side_systems (id),
      sub_system_id uuid,
      directory_id uuid references directories (id) on delete set null,
      name text not null,
      display_name text,
      pronouns text,
      description text,
      about_tags jsonb not null default '[]',
      profile_style jsonb,
      avatar jsonb,
      banner jsonb,
      archived_at bigint,
      version integer not null default 1,
      created_at bigint not null,
      updated_at bigint not null,
      deleted_at bigint
    );
    create index members_user_page on members (user_id, created_at, id) where deleted_at is null;
    create index members_user_side_page on members (user_id, side_system_id, created_at, id) where deleted_at is null;
    create index members_sub on members (sub_system_id) where sub_system_id is not null;
    create index members_directory on members (directory_id) where directory_id is not null;
    create index members_trash on members (user_id, deleted_at) where deleted_at is not null;

    create table sub_systems (
      id uuid primary key,
      user_id uuid not null references accounts (id) on delete cascade,
      side_system_id uuid not null references side_systems (id),
      linked_member_id uuid references members (id) on delete set null,
      parent_sub_system_id uuid references sub_systems (id),
      name text not null,
      description text,
      icon text,
      tag_code text,
      tag_color text,
      created_at bigint not null,
      updated_at bigint not null,
      deleted_at bigint
    );
    create index sub_systems_user on sub_systems (user_id, side_system_id) where deleted_at is null;
    create index sub_systems_parent on sub_systems (parent_sub_system_id) where parent_sub_system_id is not null;
    create index sub_systems_linked_member on sub_systems (linked_member_id) where linked_member_id is not null;
    alter table members add constraint members_sub_system_fk foreign key (sub_system_id) references sub_systems (id);
    alter table directories add constraint directories_sub_system_fk foreign key (sub_system_id) references sub_systems (id);

    create table active_system_context (
      user_id uuid primary key references accounts (id) on delete cascade,
      side_system_id uuid not null references side_systems (id),
      sub_system_id uuid references sub_systems (id),
      is_unified_view boolean not null default false,
      updated_at bigint not null
    );

    create table group_members (
      group_id uuid not null references directories (id) on delete cascade,
      member_id uuid not null references members (id) on delete cascade,
      user_id uuid not null references accounts (id) on delete cascade,
      added_at bigint not null,
      primary key (group_id, member_id)
    );
    create index group_members_member on group_members (member_id);

    create table directory_layouts (
      id uuid primary key,
      user_id uuid not null references accounts (id) on delete cascade,
      directory_id uuid references directories (id) on delete cascade,
      name text not null,
      item_ids jsonb not null,
      created_at bigint not null,
      updated_at bigint not null,
      deleted_at bigint
    );
    create index directory_layouts_user on directory_layouts (user_id, directory_id);
    create index directory_layouts_directory on directory_layouts (directory_id) where directory_id is not null;

    create table custom_field_definitions (
      id uuid primary key,
      user_id uuid not null references accounts (id) on delete cascade,
      name text not null,
      type text not null check (type in ('text', 'markdown', 'date', 'select', 'multiselect')),
      description text,
      options jsonb,
      sort_order integer not null,
      created_at bigint not null,
      updated_at bigint not null,
      deleted_at bigint
    );
    create index custom_field_definitions_user on custom_field_definitions (user_id, sort_order, id);

    create table custom_field_values (
      member_id uuid not null references members (id) on delete cascade,
      field_id uuid not null references custom_field_definitions (id) on delete cascade,
      user_id uuid not null references accounts (id) on delete cascade,
      value jsonb not null,
      updated_at bigint not null,
      primary key (member_id, field_id)
    );
    create index custom_field_values_field on custom_field_values (field_id);

    create table member_status_definitions (
      id uuid primary key,
      user_id uuid not null references accounts (id) on delete cascade,
      name text not null,
      color text not null,
      icon text,
      created_at bigint not null,
      updated_at bigint not null
    );
    create index member_status_definitions_user on member_status_definitions (user_id, created_at, id);

    create table member_status_assignments (
      member_id uuid not null references members (id) on delete cascade,
      status_id uuid not null references member_status_definitions (id) on delete cascade,
      user_id uuid not null references accounts (id) on delete cascade,
      assigned_at bigint not null,
      primary key (member_id, status_id)
    );
    create index member_status_assignments_status on member_status_assignments (status_id);

    -- Accounts created before this migration get their first side system, active.
    insert into side_systems (id, user_id, name, created_at, updated_at)
      select gen_random_uuid(), a.id, 'Main system', a.created_at, a.created_at from accounts a;
    insert into active_system_context (user_id, side_system_id, is_unified_view, updated_at)
      select s.user_id, s.id, false, s.created_at from side_systems s
  `,
  );
}

export async function down(knex: Knex): Promise<void> {
  await execScript(
    knex,
    `
    drop table member_status_assignments;
    drop table member_status_definitions;
    drop table custom_field_values;
    drop table custom_field_definitions;
    drop table directory_layouts;
    drop table group_members;
    drop table active_system_context;
    alter table members drop constraint members_sub_system_fk;
    alter table directories drop constraint directories_sub_system_fk;
    drop table sub_systems;
    drop table members;
    drop table directories;
    drop table side_systems
  `,
  );
}

import type { Knex } from 'knex';
import { execScript } from '../sql.ts';

export const name = '0001_foundation';

export async function up(knex: Knex): Promise<void> {
  await execScript(
    knex,
    `
    create table accounts (
      id uuid primary key,
      username text not null,
      display_name text not null,
      plan text not null default 'free' check (plan in ('free', 'pro', 'pro_plus')),
      is_admin boolean not null default false,
      pronouns text,
      status text,
      timezone text,
      country text,
      about_markdown text,
      banner_url text,
      image_url text,
      donor_supporter_unlocked boolean not null default false,
      closed_beta_participant_at bigint,
      created_at bigint not null,
      updated_at bigint not null
    );
    create unique index accounts_username_ci on accounts (lower(username));

    create table api_keys (
      id uuid primary key,
      user_id uuid not null references accounts (id) on delete cascade,
      name text,
      key_prefix text not null,
      key_hash text not null,
      scopes jsonb not null,
      created_at bigint not null,
      last_used_at bigint,
      revoked_at bigint
    );
    create unique index api_keys_hash on api_keys (key_hash);
    create index api_keys_user_active on api_keys (user_id) where revoked_at is null;

    create table app_meta (
      key text primary key,
      value text not null
    );

    -- One row per API key: a fixed window that starts at the key's first request.
    create table rate_limit_windows (
      key_id uuid primary key,
      window_start bigint not null,
      count integer not null
    );

    create table custom_color_schemes (
      id uuid primary key,
      user_id uuid not null references accounts (id) on delete cascade,
      name text not null,
      colors jsonb not null,
      created_at bigint not null,
      updated_at bigint not null
    );
    create index custom_color_schemes_user on custom_color_schemes (user_id, created_at, id);

    create table custom_fonts (
      id uuid primary key,
      user_id uuid not null references accounts (id) on delete cascade,
      name text not null,
      source_url text not null,
      created_at bigint not null,
      updated_at bigint not null
    );
    create index custom_fonts_user on custom_fonts (user_id, created_at, id);

    create table appearance_settings (
      id uuid primary key,
      user_id uuid not null unique references accounts (id) on delete cascade,
      theme_mode text not null,
      dark_variant text,
      color_scheme text not null,
      custom_color_scheme_id uuid references custom_color_schemes (id) on delete set null,
      font_family text not null,
      custom_font_id uuid references custom_fonts (id) on delete set null,
      font_size text not null,
      font_scale double precision,
      font_size_px double precision,
      amoled_base boolean,
      reduce_motion boolean not null,
      member_banner_gradients_enabled boolean not null,
      created_at bigint not null,
      updated_at bigint not null
    );
    create index appearance_settings_scheme on appearance_settings (custom_color_scheme_id) where custom_color_scheme_id is not null;
    create index appearance_settings_font on appearance_settings (custom_font_id) where custom_font_id is not null;
  `,
  );
}

export async function down(knex: Knex): Promise<void> {
  await execScript(
    knex,
    `
    drop table appearance_settings;
    drop table custom_fonts;
    drop table custom_color_schemes;
    drop table rate_limit_windows;
    drop table app_meta;
    drop table api_keys;
    drop table accounts;
  `,
  );
}

import type { Knex } from 'knex';
import { execScript } from '../sql.ts';

export const name = '0003_terminology';

export async function up(knex: Knex): Promise<void> {
  await execScript(
    knex,
    `
    -- The account-wide labels: one full document per account, created on first save or reset.
    create table terminology_settings (
      id uuid primary key,
      user_id uuid not null unique references accounts (id) on delete cascade,
      terms jsonb not null,
      actions jsonb not null,
      icons jsonb not null,
      created_at bigint not null,
      updated_at bigint not null
    );

    -- Sparse override layers: a side system's own (sub_system_id null) or one sub system's.
    -- Only labels that differ from the inherited layer are kept; an empty layer has no row.
    create table terminology_overrides (
      id uuid primary key,
      user_id uuid not null references accounts (id) on delete cascade,
      side_system_id uuid not null references side_systems (id) on delete cascade,
      sub_system_id uuid references sub_systems (id) on delete cascade,
      terms jsonb not null,
      actions jsonb not null,
      icons jsonb not null,
      created_at bigint not null,
      updated_at bigint not null
    );
    create unique index terminology_overrides_scope
      on terminology_overrides (user_id, side_system_id, sub_system_id) nulls not distinct;
  `,
  );
}

export async function down(knex: Knex): Promise<void> {
  await execScript(
    knex,
    `
    drop table terminology_overrides;
    drop table terminology_settings
  `,
  );
}

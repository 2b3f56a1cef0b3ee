import type { Knex } from 'knex';
import { execScript } from '../sql.ts';

export const name = '0007_accounts_admin';

/**
 * Operator listings and key expiry: accounts are paged by lower(username) in byte order (the C
 * collation, so a username-prefix filter is a range on the index whatever the database's locale),
 * an account's keys newest first; a key may carry an expiry.
 */
export async function up(knex: Knex): Promise<void> {
  await execScript(
    knex,
    `
    create index accounts_username_c on accounts ((lower(username) collate "C"));
    alter table api_keys add column expires_at bigint;
    create index api_keys_user_created on api_keys (user_id, created_at desc, id desc)
  `,
  );
}

export async function down(knex: Knex): Promise<void> {
  await execScript(
    knex,
    `
    drop index api_keys_user_created;
    alter table api_keys drop column expires_at;
    drop index accounts_username_c
  `,
  );
}

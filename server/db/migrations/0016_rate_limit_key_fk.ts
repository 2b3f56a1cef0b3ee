import type { Knex } from 'knex';
import { execScript } from '../sql.ts';

export const name = '0016_rate_limit_key_fk';

/**
 * Rate-limit windows belong to their key. The PostgreSQL store's upsert only inserts while the key
 * exists, but that check reads the committed state: a sync that ran while an account (or key) was
 * being deleted saw the key, waited on the window row the deletion had removed, and then inserted a
 * fresh row for a key that no longer existed. With the foreign key the insert checks the key under
 * a lock, waits for the deletion and fails (the store then treats the key as gone), and deleting a
 * key takes its window with it.
 */
export async function up(knex: Knex): Promise<void> {
  await execScript(
    knex,
    `
    delete from rate_limit_windows w where not exists (select 1 from api_keys k where k.id = w.key_id);
    alter table rate_limit_windows add constraint rate_limit_windows_key_fk
      foreign key (key_id) references api_keys (id) on delete cascade
  `,
  );
}

export async function down(knex: Knex): Promise<void> {
  await execScript(knex, `alter table rate_limit_windows drop constraint rate_limit_windows_key_fk`);
}

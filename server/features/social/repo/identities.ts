/** The SQL of verified external identities (social_identities, migration 0014), registered by the operator. */
import type { Knex } from 'knex';
import { sql } from '../../../db/sql.ts';
import { EXAMPLE_UUID, statement } from '../../../db/statements.ts';
import { AREA } from './shared.ts';

export interface IdentityRow {
  provider: string;
  handle: string | null;
  url: string | null;
  avatar_url: string | null;
}

export interface NewIdentity extends IdentityRow {
  id: string;
  user_id: string;
  external_user_id: string;
  verified_at: number;
}

/** The account row, locked for update; none when there is no such account. */
const lockAccount = statement<{ userId: string }, { id: string }>({
  name: 'social_identity_lock_account',
  area: AREA,
  variants: { 'the account': { userId: EXAMPLE_UUID } },
  build: ({ userId }) => sql`select id from accounts where id = ${userId} limit 1 for update`,
});

/** Records the identity, replacing the account's one at that provider. */
const upsertIdentity = statement<{ row: NewIdentity }, never>({
  name: 'social_identity_upsert',
  area: AREA,
  variants: {
    'an identity': {
      row: {
        id: EXAMPLE_UUID,
        user_id: EXAMPLE_UUID,
        provider: 'x',
        external_user_id: 'x',
        handle: null,
        url: null,
        avatar_url: null,
        verified_at: 0,
      },
    },
  },
  build: ({ row: r }) => sql`insert into social_identities
      (id, user_id, provider, external_user_id, handle, url, avatar_url, verified_at)
    values (${r.id}, ${r.user_id}, ${r.provider}, ${r.external_user_id}, ${r.handle}::text, ${r.url}::text,
      ${r.avatar_url}::text, ${r.verified_at})
    on conflict (user_id, provider) do update set external_user_id = excluded.external_user_id,
      handle = excluded.handle, url = excluded.url, avatar_url = excluded.avatar_url, verified_at = excluded.verified_at`,
});

const identitiesOf = statement<{ userId: string }, IdentityRow>({
  name: 'social_identities_of_account',
  area: AREA,
  variants: { 'the account': { userId: EXAMPLE_UUID } },
  build: ({ userId }) =>
    sql`select provider, handle, url, avatar_url from social_identities where user_id = ${userId} order by provider`,
});

export const identitiesRepo = {
  /** Locks the account row for update; false when there is no such account. */
  async lockAccount(db: Knex, userId: string): Promise<boolean> {
    return (await lockAccount(db, { userId })).length > 0;
  },
  async upsert(db: Knex, row: NewIdentity): Promise<void> {
    await upsertIdentity(db, { row });
  },
  /** The account's identities by provider. */
  of: (db: Knex, userId: string) => identitiesOf(db, { userId }),
};

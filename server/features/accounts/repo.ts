/**
 * The SQL of accounts and API keys (and the server's app_meta flags): every statement is named and
 * committed as generated/sql/accounts.sql.
 */
import type { Knex } from 'knex';
import { type Keyset, keysetAfterSql, keysetOrderSql } from '../../core/keyset.ts';
import type { Scope, ScopeLevel } from '../../core/scopes.ts';
import { type Sql, sql } from '../../db/sql.ts';
import { EXAMPLE_UUID, statement } from '../../db/statements.ts';
import type { PlanKey } from './plans.ts';
import { REVOCATION_CHANNEL } from './revocations.ts';

/** Admin account lists: lower(username) in byte order (usernames are unique case-insensitively). */
const ACCOUNT_ORDER: Keyset = {
  columns: [{ sql: sql`lower(a.username) collate "C"`, type: 'text' }],
  direction: 'asc',
};
const KEY_ORDER: Keyset = {
  columns: [
    { sql: sql`created_at`, type: 'bigint' },
    { sql: sql`id`, type: 'uuid' },
  ],
  direction: 'desc',
};

export interface AccountRow {
  id: string;
  username: string;
  display_name: string;
  plan: PlanKey;
  is_admin: boolean;
  pronouns: string | null;
  status: string | null;
  timezone: string | null;
  country: string | null;
  about_markdown: string | null;
  banner_url: string | null;
  image_url: string | null;
  donor_supporter_unlocked: boolean;
  closed_beta_participant_at: number | null;
  created_at: number;
  updated_at: number;
}

export type ScopeMap = Partial<Record<Scope, ScopeLevel>>;

export interface ApiKeyRow {
  id: string;
  user_id: string;
  name: string | null;
  key_prefix: string;
  key_hash: string;
  scopes: ScopeMap;
  created_at: number;
  last_used_at: number | null;
  revoked_at: number | null;
  expires_at: number | null;
}

/** An account as the operator sees it, with its number of usable keys. */
export interface AdminAccountRow extends AccountRow {
  active_api_keys: number;
}

const AREA = 'accounts';

const ACCOUNT_COLUMNS = sql.join(
  (
    [
      'id',
      'username',
      'display_name',
      'plan',
      'is_admin',
      'pronouns',
      'status',
      'timezone',
      'country',
      'about_markdown',
      'banner_url',
      'image_url',
      'donor_supporter_unlocked',
      'closed_beta_participant_at',
      'created_at',
      'updated_at',
    ] satisfies Array<keyof AccountRow>
  ).map((c) => sql.id(`a.${c}`)),
  ', ',
);

/** The key columns the reads return (never the hash or the display prefix). */
const KEY_COLUMNS = sql`id, user_id, name, scopes, created_at, last_used_at, revoked_at, expires_at`;

/** Usable keys of the account row `a`, as a column (the partial index on usable keys serves it). */
const adminKeyCount = (now: number) =>
  sql`(select count(*) from api_keys k where k.user_id = a.id and k.revoked_at is null and (k.expires_at is null or k.expires_at > ${now}))::int as active_api_keys`;

const insertAccount = statement<{ row: AccountRow }, never>({
  name: 'accounts_insert',
  area: AREA,
  variants: {
    'a new account': {
      row: {
        id: EXAMPLE_UUID,
        username: 'x',
        display_name: 'x',
        plan: 'free',
        is_admin: false,
        pronouns: null,
        status: null,
        timezone: null,
        country: null,
        about_markdown: null,
        banner_url: null,
        image_url: null,
        donor_supporter_unlocked: false,
        closed_beta_participant_at: null,
        created_at: 0,
        updated_at: 0,
      },
    },
  },
  build: ({ row }) => sql`insert into accounts (id, username, display_name, plan, is_admin, pronouns, status, timezone,
      country, about_markdown, banner_url, image_url, donor_supporter_unlocked, closed_beta_participant_at, created_at, updated_at)
    values (${row.id}, ${row.username}, ${row.display_name}, ${row.plan}, ${row.is_admin}, ${row.pronouns}, ${row.status},
      ${row.timezone}, ${row.country}, ${row.about_markdown}, ${row.banner_url}, ${row.image_url},
      ${row.donor_supporter_unlocked}, ${row.closed_beta_participant_at}, ${row.created_at}, ${row.updated_at})`,
});

const usernameTaken = statement<{ username: string }, { id: string }>({
  name: 'accounts_username_taken',
  area: AREA,
  variants: { 'a username': { username: 'x' } },
  build: ({ username }) => sql`select id from accounts where lower(username) = lower(${username}) limit 1`,
});

const findAccount = statement<{ id: string; lock: boolean }, AccountRow>({
  name: 'accounts_find',
  area: AREA,
  variants: { read: { id: EXAMPLE_UUID, lock: false }, 'locked for update': { id: EXAMPLE_UUID, lock: true } },
  build: ({ id, lock }) =>
    sql`select ${ACCOUNT_COLUMNS} from accounts a where a.id = ${id} limit 1${lock ? sql` for update` : sql.empty}`,
});

const countAccounts = statement<Record<string, never>, { count: number }>({
  name: 'accounts_count',
  area: AREA,
  variants: { all: {} },
  build: () => sql`select count(*)::int as count from accounts`,
});

const countActiveKeys = statement<{ userId: string; now: number }, { count: number }>({
  name: 'accounts_count_active_keys',
  area: AREA,
  variants: { 'an account': { userId: EXAMPLE_UUID, now: 0 } },
  build: ({ userId, now }) => sql`select count(*)::int as count from api_keys
    where user_id = ${userId} and revoked_at is null and (expires_at is null or expires_at > ${now})`,
});

interface AccountPageParams {
  limit: number;
  now: number;
  after?: string | undefined;
  prefix?: string | undefined;
}

const listAccounts = statement<AccountPageParams, AdminAccountRow>({
  name: 'accounts_admin_page',
  area: AREA,
  variants: {
    'first page': { limit: 50, now: 0 },
    'after a cursor': { limit: 50, now: 0, after: 'x' },
    'first page, username prefix': { limit: 50, now: 0, prefix: 'x' },
    'after a cursor, username prefix': { limit: 50, now: 0, after: 'x', prefix: 'x' },
  },
  build: ({ limit, now, after, prefix }) => {
    const where: Sql[] = [];
    if (prefix !== undefined) {
      // Usernames are [a-z0-9_] once lowered, all below '~' in byte order: [prefix, prefix~) is exactly "starts with".
      const lower = prefix.toLowerCase();
      const name = ACCOUNT_ORDER.columns[0]!.sql;
      where.push(sql`${name} >= ${lower}`, sql`${name} < ${`${lower}~`}`);
    }
    if (after !== undefined) where.push(keysetAfterSql(ACCOUNT_ORDER, [after]));
    return sql`select ${ACCOUNT_COLUMNS}, ${adminKeyCount(now)} from accounts a
      ${where.length > 0 ? sql`where ${sql.join(where, ' and ')} ` : sql.empty}${keysetOrderSql(ACCOUNT_ORDER, limit)}`;
  },
});

const findAdminAccount = statement<{ id: string; now: number }, AdminAccountRow>({
  name: 'accounts_admin_find',
  area: AREA,
  variants: { 'an account': { id: EXAMPLE_UUID, now: 0 } },
  build: ({ id, now }) =>
    sql`select ${ACCOUNT_COLUMNS}, ${adminKeyCount(now)} from accounts a where a.id = ${id} limit 1`,
});

const listKeys = statement<
  { userId: string; limit: number; after?: { createdAt: number; id: string } | undefined },
  ApiKeyRow
>({
  name: 'accounts_keys_page',
  area: AREA,
  variants: {
    'first page': { userId: EXAMPLE_UUID, limit: 50 },
    'after a cursor': { userId: EXAMPLE_UUID, limit: 50, after: { createdAt: 0, id: EXAMPLE_UUID } },
  },
  build: ({ userId, limit, after }) =>
    sql`select ${KEY_COLUMNS} from api_keys where user_id = ${userId}${
      after ? sql` and ${keysetAfterSql(KEY_ORDER, [after.createdAt, after.id])}` : sql.empty
    } ${keysetOrderSql(KEY_ORDER, limit)}`,
});

const findKey = statement<{ id: string }, ApiKeyRow>({
  name: 'accounts_key_find',
  area: AREA,
  variants: { 'a key': { id: EXAMPLE_UUID } },
  build: ({ id }) => sql`select ${KEY_COLUMNS} from api_keys where id = ${id} limit 1`,
});

const keyIds = statement<{ userId: string }, { id: string }>({
  name: 'accounts_key_ids',
  area: AREA,
  variants: { 'an account': { userId: EXAMPLE_UUID } },
  build: ({ userId }) => sql`select id from api_keys where user_id = ${userId}`,
});

const deleteAccount = statement<{ userId: string }, { id: string }>({
  name: 'accounts_delete',
  area: AREA,
  variants: { 'an account': { userId: EXAMPLE_UUID } },
  build: ({ userId }) => sql`delete from accounts where id = ${userId} returning id`,
});

const deleteSessionCount = statement<{ userId: string }, never>({
  name: 'accounts_delete_front_session_count',
  area: AREA,
  variants: { 'an account': { userId: EXAMPLE_UUID } },
  build: ({ userId }) => sql`delete from front_session_counts where user_id = ${userId}`,
});

const insertApiKey = statement<{ row: ApiKeyRow }, never>({
  name: 'accounts_key_insert',
  area: AREA,
  variants: {
    'a new key': {
      row: {
        id: EXAMPLE_UUID,
        user_id: EXAMPLE_UUID,
        name: null,
        key_prefix: 'x',
        key_hash: 'x',
        scopes: {},
        created_at: 0,
        last_used_at: null,
        revoked_at: null,
        expires_at: null,
      },
    },
  },
  build: ({
    row,
  }) => sql`insert into api_keys (id, user_id, name, key_prefix, key_hash, scopes, created_at, last_used_at, revoked_at, expires_at)
    values (${row.id}, ${row.user_id}, ${row.name}, ${row.key_prefix}, ${row.key_hash}, ${JSON.stringify(row.scopes)}::jsonb,
      ${row.created_at}, ${row.last_used_at}, ${row.revoked_at}, ${row.expires_at})`,
});

const findKeyByHash = statement<
  { hash: string },
  Pick<ApiKeyRow, 'id' | 'user_id' | 'scopes' | 'revoked_at' | 'expires_at'>
>({
  name: 'accounts_key_by_hash',
  area: AREA,
  variants: { 'a hash': { hash: 'x' } },
  build: ({ hash }) =>
    sql`select id, user_id, scopes, revoked_at, expires_at from api_keys where key_hash = ${hash} limit 1`,
});

const revokeKey = statement<{ id: string; now: number }, { user_id: string }>({
  name: 'accounts_key_revoke',
  area: AREA,
  variants: { 'a key': { id: EXAMPLE_UUID, now: 0 } },
  build: ({ id, now }) =>
    sql`update api_keys set revoked_at = coalesce(revoked_at, ${now}) where id = ${id} returning user_id`,
});

const touchKeys = statement<{ ids: readonly string[]; now: number }, never>({
  name: 'accounts_keys_touch',
  area: AREA,
  variants: { 'some keys': { ids: [EXAMPLE_UUID], now: 0 } },
  build: ({ ids, now }) => sql`update api_keys set last_used_at = ${now} where id = any (${[...ids]}::uuid[])`,
});

const getMeta = statement<{ key: string }, { value: string }>({
  name: 'accounts_meta_get',
  area: AREA,
  variants: { 'a key': { key: 'x' } },
  build: ({ key }) => sql`select value from app_meta where key = ${key} limit 1`,
});

const setMeta = statement<{ key: string; value: string }, never>({
  name: 'accounts_meta_set',
  area: AREA,
  variants: { 'a key': { key: 'x', value: 'x' } },
  build: ({ key, value }) =>
    sql`insert into app_meta (key, value) values (${key}, ${value}) on conflict (key) do update set value = excluded.value`,
});

const notifyRevocation = statement<{ keyId: string }, never>({
  name: 'accounts_notify_key_revoked',
  area: AREA,
  variants: { 'a key': { keyId: EXAMPLE_UUID } },
  build: ({ keyId }) => sql`select pg_notify(${REVOCATION_CHANNEL}, ${keyId})`,
});

export const accountsRepo = {
  async insertAccount(db: Knex, row: AccountRow): Promise<void> {
    await insertAccount(db, { row });
  },

  async usernameTaken(db: Knex, username: string): Promise<boolean> {
    return (await usernameTaken(db, { username })).length > 0;
  },

  async findAccount(db: Knex, id: string): Promise<AccountRow | undefined> {
    return (await findAccount(db, { id, lock: false }))[0];
  },

  async lockAccount(trx: Knex.Transaction, id: string): Promise<AccountRow | undefined> {
    return (await findAccount(trx, { id, lock: true }))[0];
  },

  async countAccounts(db: Knex): Promise<number> {
    return (await countAccounts(db, {}))[0]?.count ?? 0;
  },

  async countActiveKeys(db: Knex, userId: string, now: number): Promise<number> {
    return (await countActiveKeys(db, { userId, now }))[0]?.count ?? 0;
  },

  /** A page (`limit` + 1 rows) of accounts in lower(username) byte order after `after`, optionally only those starting with `prefix`. */
  listAccounts(
    db: Knex,
    options: { limit: number; now: number; after?: string | undefined; prefix?: string | undefined },
  ): Promise<AdminAccountRow[]> {
    return listAccounts(db, options);
  },

  async findAdminAccount(db: Knex, id: string, now: number): Promise<AdminAccountRow | undefined> {
    return (await findAdminAccount(db, { id, now }))[0];
  },

  /** A page (`limit` + 1 rows) of an account's keys, newest first, after the (created_at, id) cursor. */
  listKeys(db: Knex, userId: string, limit: number, after?: { createdAt: number; id: string }): Promise<ApiKeyRow[]> {
    return listKeys(db, { userId, limit, after });
  },

  async findKey(db: Knex, id: string): Promise<ApiKeyRow | undefined> {
    return (await findKey(db, { id }))[0];
  },

  /** Ids of every key of the account, revoked ones included. */
  async keyIds(db: Knex, userId: string): Promise<string[]> {
    return (await keyIds(db, { userId })).map((r) => r.id);
  },

  /**
   * Deletes the account; every table that holds account data references accounts with ON DELETE
   * CASCADE (the rate-limit windows through their keys), except the history counter, cleaned here:
   * it is kept by triggers, deliberately without a foreign key.
   */
  async deleteAccount(trx: Knex.Transaction, userId: string): Promise<boolean> {
    const deleted = await deleteAccount(trx, { userId });
    await deleteSessionCount(trx, { userId });
    return deleted.length > 0;
  },

  async insertApiKey(db: Knex, row: ApiKeyRow): Promise<void> {
    await insertApiKey(db, { row });
  },

  async findKeyByHash(
    db: Knex,
    hash: string,
  ): Promise<Pick<ApiKeyRow, 'id' | 'user_id' | 'scopes' | 'revoked_at' | 'expires_at'> | undefined> {
    return (await findKeyByHash(db, { hash }))[0];
  },

  /** Marks the key revoked (keeping an earlier revocation time); its account's id, or null for an unknown key. */
  async revokeKey(db: Knex, id: string, now: number): Promise<string | null> {
    return (await revokeKey(db, { id, now }))[0]?.user_id ?? null;
  },

  async touchKeys(db: Knex, ids: string[], now: number): Promise<void> {
    if (ids.length === 0) return;
    await touchKeys(db, { ids, now });
  },

  async getMeta(db: Knex, key: string): Promise<string | undefined> {
    return (await getMeta(db, { key }))[0]?.value;
  },

  async setMeta(db: Knex, key: string, value: string): Promise<void> {
    await setMeta(db, { key, value });
  },

  /** Tells every listening instance that the key is revoked (delivered when the caller's transaction commits). */
  async announceRevocation(db: Knex, keyId: string): Promise<void> {
    await notifyRevocation(db, { keyId });
  },
};

import type { Knex } from 'knex';
import { keysetPage, type Keyset } from '../../core/keyset.ts';
import { sql, toKnex } from '../../db/sql.ts';
import type { Scope, ScopeLevel } from '../../core/scopes.ts';
import type { PlanKey } from './plans.ts';

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

/** A key is usable while it is neither revoked nor past its expiry. */
function usable(q: Knex.QueryBuilder, now: number, alias = 'api_keys'): Knex.QueryBuilder {
  return q
    .whereNull(`${alias}.revoked_at`)
    .where((w) => w.whereNull(`${alias}.expires_at`).orWhere(`${alias}.expires_at`, '>', now));
}

/** Usable keys of the account row `a`, as a column (the partial index on usable keys serves it). */
function adminKeyCount(db: Knex, now: number): Knex.Raw {
  return db.raw(
    `(select count(*) from api_keys k where k.user_id = a.id and k.revoked_at is null and (k.expires_at is null or k.expires_at > ?))::int as active_api_keys`,
    [now],
  );
}

export const accountsRepo = {
  async insertAccount(db: Knex, row: AccountRow): Promise<void> {
    await db('accounts').insert(row);
  },

  async usernameTaken(db: Knex, username: string): Promise<boolean> {
    const row = await db('accounts').whereRaw('lower(username) = lower(?)', [username]).first('id');
    return row !== undefined;
  },

  async findAccount(db: Knex, id: string): Promise<AccountRow | undefined> {
    return db('accounts').where({ id }).first();
  },

  async lockAccount(trx: Knex.Transaction, id: string): Promise<AccountRow | undefined> {
    return trx('accounts').where({ id }).forUpdate().first();
  },

  async countAccounts(db: Knex): Promise<number> {
    const row = await db('accounts').count<{ count: number }[]>('* as count').first();
    return Number(row?.count ?? 0);
  },

  async countActiveKeys(db: Knex, userId: string, now: number): Promise<number> {
    const row = await usable(db('api_keys').where({ user_id: userId }), now)
      .count<{ count: number }[]>('* as count')
      .first();
    return Number(row?.count ?? 0);
  },

  /** A page (`limit` + 1 rows) of accounts in lower(username) byte order after `after`, optionally only those starting with `prefix`. */
  listAccounts(
    db: Knex,
    options: { limit: number; now: number; after?: string; prefix?: string },
  ): Promise<AdminAccountRow[]> {
    const key = toKnex(ACCOUNT_ORDER.columns[0]!.sql);
    const name = db.raw(key.sql, key.bindings as Knex.RawBinding[]);
    const q = db('accounts as a').select('a.*', adminKeyCount(db, options.now));
    if (options.prefix !== undefined) {
      // Usernames are [a-z0-9_] once lowered, all below '~' in byte order: [prefix, prefix~) is exactly "starts with".
      const lower = options.prefix.toLowerCase();
      q.where(name, '>=', lower).where(name, '<', `${lower}~`);
    }
    return keysetPage(q, ACCOUNT_ORDER, options.limit, options.after !== undefined ? [options.after] : undefined);
  },

  findAdminAccount(db: Knex, id: string, now: number): Promise<AdminAccountRow | undefined> {
    return db('accounts as a').where('a.id', id).first('a.*', adminKeyCount(db, now));
  },

  /** A page (`limit` + 1 rows) of an account's keys, newest first, after the (created_at, id) cursor. */
  listKeys(db: Knex, userId: string, limit: number, after?: { createdAt: number; id: string }): Promise<ApiKeyRow[]> {
    const q = db('api_keys')
      .where({ user_id: userId })
      .select('id', 'user_id', 'name', 'scopes', 'created_at', 'last_used_at', 'revoked_at', 'expires_at');
    return keysetPage(q, KEY_ORDER, limit, after && [after.createdAt, after.id]);
  },

  findKey(db: Knex, id: string): Promise<ApiKeyRow | undefined> {
    return db('api_keys')
      .where({ id })
      .first('id', 'user_id', 'name', 'scopes', 'created_at', 'last_used_at', 'revoked_at', 'expires_at');
  },

  /** Ids of every key of the account, revoked ones included. */
  keyIds(db: Knex, userId: string): Promise<string[]> {
    return db('api_keys').where({ user_id: userId }).pluck('id');
  },

  /**
   * Deletes the account; every table that holds account data references accounts with ON DELETE
   * CASCADE (the rate-limit windows through their keys), except the history counter, cleaned here:
   * it is kept by triggers, deliberately without a foreign key.
   */
  async deleteAccount(trx: Knex.Transaction, userId: string): Promise<boolean> {
    const deleted = await trx('accounts').where({ id: userId }).delete();
    await trx('front_session_counts').where({ user_id: userId }).delete();
    return deleted > 0;
  },

  async insertApiKey(db: Knex, row: ApiKeyRow): Promise<void> {
    await db('api_keys').insert({ ...row, scopes: JSON.stringify(row.scopes) });
  },

  async findKeyByHash(
    db: Knex,
    hash: string,
  ): Promise<Pick<ApiKeyRow, 'id' | 'user_id' | 'scopes' | 'revoked_at' | 'expires_at'> | undefined> {
    return db('api_keys').where({ key_hash: hash }).first('id', 'user_id', 'scopes', 'revoked_at', 'expires_at');
  },

  /** Marks the key revoked (keeping an earlier revocation time); its account's id, or null for an unknown key. */
  async revokeKey(db: Knex, id: string, now: number): Promise<string | null> {
    const rows: Array<{ user_id: string }> = await db('api_keys')
      .where({ id })
      .update({ revoked_at: db.raw('coalesce(revoked_at, ?)', [now]) })
      .returning('user_id');
    return rows[0]?.user_id ?? null;
  },

  async touchKeys(db: Knex, ids: string[], now: number): Promise<void> {
    if (ids.length === 0) return;
    await db('api_keys').whereIn('id', ids).update({ last_used_at: now });
  },

  async getMeta(db: Knex, key: string): Promise<string | undefined> {
    const row = await db('app_meta').where({ key }).first('value');
    return row?.value;
  },

  async setMeta(db: Knex, key: string, value: string): Promise<void> {
    await db('app_meta').insert({ key, value }).onConflict('key').merge();
  },
};

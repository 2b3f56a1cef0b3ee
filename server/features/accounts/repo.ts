import type { Knex } from 'knex';
import type { Scope, ScopeLevel } from '../../http/spec.ts';
import type { PlanKey } from './plans.ts';

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

  async countActiveKeys(db: Knex, userId: string): Promise<number> {
    const row = await db('api_keys').where({ user_id: userId }).whereNull('revoked_at').count<{ count: number }[]>('* as count').first();
    return Number(row?.count ?? 0);
  },

  async insertApiKey(db: Knex, row: ApiKeyRow): Promise<void> {
    await db('api_keys').insert({ ...row, scopes: JSON.stringify(row.scopes) });
  },

  async findKeyByHash(db: Knex, hash: string): Promise<Pick<ApiKeyRow, 'id' | 'user_id' | 'scopes' | 'revoked_at'> | undefined> {
    return db('api_keys').where({ key_hash: hash }).first('id', 'user_id', 'scopes', 'revoked_at');
  },

  async revokeKey(db: Knex, id: string, now: number): Promise<boolean> {
    const rows = await db('api_keys').where({ id }).update({ revoked_at: db.raw('coalesce(revoked_at, ?)', [now]) }).returning('id');
    return rows.length > 0;
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

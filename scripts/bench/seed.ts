/**
 * Bench data, written straight through SQL (generate_series) so a million rows take seconds:
 * one large account, one small one, and noise accounts so every query must filter by account.
 * Accounts and API keys go through the real services, so they are exactly what the app expects.
 */
import type { Knex } from 'knex';
import { loadConfig } from '../../server/config.ts';
import { backgroundContext, backgroundContextFor } from '../../server/context.ts';
import { SCOPES, type Scope, type ScopeLevel } from '../../server/core/scopes.ts';
import { createAccount, createApiKey } from '../../server/features/accounts/service.ts';
import { createLogger } from '../../server/logger.ts';

export interface AccountSize {
  members: number;
  entries: number;
  sessions: number;
}

export interface SeedPlan {
  large: AccountSize;
  small: AccountSize;
  noise: AccountSize & { accounts: number };
}

export const FULL_PLAN: SeedPlan = {
  large: { members: 10_000, entries: 200_000, sessions: 1_000_000 },
  small: { members: 1_000, entries: 1_000, sessions: 1_000 },
  noise: { accounts: 50, members: 200, entries: 2_000, sessions: 10_000 },
};

export const SMOKE_PLAN: SeedPlan = {
  large: { members: 500, entries: 5_000, sessions: 20_000 },
  small: { members: 100, entries: 100, sessions: 100 },
  noise: { accounts: 3, members: 50, entries: 100, sessions: 200 },
};

export interface SeededAccount {
  userId: string;
  apiKey: string;
  sideSystemId: string;
  /** Members to front in the write scenario (not in the open front). */
  frontPool: string[];
}

const ALL_SCOPES = Object.fromEntries(SCOPES.map((s) => [s, 'read_write'])) as Record<Scope, ScopeLevel>;
const NOW = Date.now();
const YEAR = 365 * 86_400_000;

async function seedAccount(knex: Knex, username: string, size: AccountSize, withKey: boolean): Promise<SeededAccount> {
  const parts = { db: knex, config: loadConfig({}), logger: createLogger('silent') };
  const actor = { kind: 'system', job: 'bench_seed' } as const;
  const { userId } = await createAccount(backgroundContext({ ...parts, clock: () => NOW - 5 * YEAR }, actor), { username, plan: 'pro_plus' });
  const apiKey = withKey ? (await createApiKey(backgroundContextFor({ ...parts, clock: () => NOW }, actor, userId), { name: 'bench', scopes: ALL_SCOPES })).apiKey : '';
  const { side_system_id: side } = await knex('active_system_context').where({ user_id: userId }).first('side_system_id');
  const t0 = NOW - 5 * YEAR;

  await knex.raw(
    `insert into members (id, user_id, side_system_id, name, display_name, pronouns, description, about_tags, version, created_at, updated_at)
     select gen_random_uuid(), ?, ?, 'Member ' || g, case when g % 3 = 0 then 'Display ' || g end, 'they/them', 'About member ' || g,
            '["bench"]'::jsonb, 1, ?::bigint + g * 1000, ?::bigint + g * 1000
     from generate_series(1, ?) g`,
    [userId, side, t0, t0, size.members],
  );
  // Numbered members to spread the rows over them deterministically.
  await knex.raw(`create temporary table bench_m as select id, (row_number() over (order by created_at, id))::int as rn from members where user_id = ?`, [userId]);
  await knex.raw(`create index on bench_m (rn)`);

  await knex.raw(
    `insert into entries (id, user_id, side_system_id, title, content, member_id, member_ids, created_at, updated_at)
     select gen_random_uuid(), ?, ?, 'Note ' || g,
            'Note ' || g || ': we talked about **boundaries**, sleep and the plan for next week. ' || repeat('Detail. ', 10),
            m.id, jsonb_build_array(m.id), ?::bigint + g * 700, ?::bigint + g * 700
     from generate_series(1, ?) g join bench_m m on m.rn = 1 + (g % ?)`,
    [userId, side, t0, t0, size.entries, size.members],
  );
  await knex.raw(`insert into entry_members (entry_id, member_id, user_id, position) select id, member_id, user_id, 0 from entries where user_id = ?`, [userId]);

  // Closed sessions spread back over the years, one every 2.5 minutes, the newest ending an hour ago.
  // The per-row counting trigger is off for the bulk insert; the count is set in one statement after.
  await knex.raw('alter table front_sessions disable trigger front_sessions_count');
  await knex.raw(
    `insert into front_sessions (id, user_id, member_id, side_system_id, started_at, ended_at, note, created_at, updated_at)
     select gen_random_uuid(), ?, m.id, ?, ?::bigint - g * 150000, ?::bigint - g * 150000 + 120000,
            case when g % 10 = 0 then 'switch ' || g end, ?::bigint - g * 150000, ?::bigint - g * 150000
     from generate_series(1, ?::bigint) g join bench_m m on m.rn = 1 + ((g * 7919) % ?)`,
    [userId, side, NOW - 3_600_000, NOW - 3_600_000, NOW - 3_600_000, NOW - 3_600_000, size.sessions, size.members],
  );
  await knex.raw('alter table front_sessions enable trigger front_sessions_count');
  await knex.raw(
    `insert into front_session_counts (user_id, live) select ?, count(*) from front_sessions where user_id = ?
     on conflict (user_id) do update set live = excluded.live`,
    [userId, userId],
  );
  // An open front of three, and tier presence for two more.
  const open = (await knex('bench_m').whereIn('rn', [1, 2, 3]).orderBy('rn').select('id')).map((r) => r.id as string);
  for (const [i, memberId] of open.entries()) {
    await knex('front_sessions').insert({ id: knex.raw('gen_random_uuid()'), user_id: userId, member_id: memberId, side_system_id: side, started_at: NOW - 600_000 + i, ended_at: null, position: i, note: i === 0 ? 'morning' : null, created_at: NOW, updated_at: NOW });
  }
  const tiered = (await knex('bench_m').whereIn('rn', [4, 5]).orderBy('rn').select('id')).map((r) => r.id as string);
  for (const memberId of tiered) {
    await knex('front_tier_presence').insert({ user_id: userId, member_id: memberId, tier_key: 'coConscious', note: 'around', created_at: NOW, updated_at: NOW });
  }
  const frontPool = (await knex('bench_m').where('rn', '>', 10).orderBy('rn').limit(200).select('id')).map((r) => r.id as string);
  await knex.raw('drop table bench_m');
  return { userId, apiKey, sideSystemId: side, frontPool };
}

export async function seed(knex: Knex, plan: SeedPlan, log: (message: string) => void): Promise<{ large: SeededAccount; small: SeededAccount }> {
  const started = Date.now();
  const large = await seedAccount(knex, 'bench_large', plan.large, true);
  log(`seeded large account in ${((Date.now() - started) / 1000).toFixed(1)} s`);
  const small = await seedAccount(knex, 'bench_small', plan.small, true);
  for (let i = 0; i < plan.noise.accounts; i++) await seedAccount(knex, `bench_noise_${i}`, plan.noise, false);
  await knex.raw('analyze');
  log(`seeded everything in ${((Date.now() - started) / 1000).toFixed(1)} s`);
  return { large, small };
}

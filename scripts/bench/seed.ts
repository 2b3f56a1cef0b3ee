/**
 * Bench data, written straight through SQL (generate_series) so a million rows take seconds:
 * one large account, one small one, and noise accounts so every query must filter by account.
 * Accounts and API keys go through the real services, so they are exactly what the app expects.
 */
import { randomUUID } from 'node:crypto';
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
  const { userId } = await createAccount(backgroundContext({ ...parts, clock: () => NOW - 5 * YEAR }, actor), {
    username,
    plan: 'pro_plus',
  });
  const apiKey = withKey
    ? (
        await createApiKey(backgroundContextFor({ ...parts, clock: () => NOW }, actor, userId), {
          name: 'bench',
          scopes: ALL_SCOPES,
        })
      ).apiKey
    : '';
  const { side_system_id: side } = await knex('active_system_context')
    .where({ user_id: userId })
    .first('side_system_id');
  const t0 = NOW - 5 * YEAR;

  await knex.raw(
    `insert into members (id, user_id, side_system_id, name, display_name, pronouns, description, about_tags, version, created_at, updated_at)
     select gen_random_uuid(), ?, ?, 'Member ' || g, case when g % 3 = 0 then 'Display ' || g end, 'they/them', 'About member ' || g,
            '["bench"]'::jsonb, 1, ?::bigint + g * 1000, ?::bigint + g * 1000
     from generate_series(1, ?) g`,
    [userId, side, t0, t0, size.members],
  );
  // Numbered members to spread the rows over them deterministically.
  await knex.raw(
    `create temporary table bench_m as select id, (row_number() over (order by created_at, id))::int as rn from members where user_id = ?`,
    [userId],
  );
  await knex.raw(`create index on bench_m (rn)`);

  await knex.raw(
    `insert into entries (id, user_id, side_system_id, title, content, member_id, member_ids, created_at, updated_at)
     select gen_random_uuid(), ?, ?, 'Note ' || g,
            'Note ' || g || ': we talked about **boundaries**, sleep and the plan for next week. ' || repeat('Detail. ', 10),
            m.id, jsonb_build_array(m.id), ?::bigint + g * 700, ?::bigint + g * 700
     from generate_series(1, ?) g join bench_m m on m.rn = 1 + (g % ?)`,
    [userId, side, t0, t0, size.entries, size.members],
  );
  await knex.raw(
    `insert into entry_members (entry_id, member_id, user_id, position) select id, member_id, user_id, 0 from entries where user_id = ?`,
    [userId],
  );

  // Closed sessions spread back over the years, one every 2.5 minutes, the newest ending an hour ago.
  // One statement: the live-session counter gains the whole insert at once (its per-statement trigger).
  await knex.raw(
    `insert into front_sessions (id, user_id, member_id, side_system_id, started_at, ended_at, note, created_at, updated_at)
     select gen_random_uuid(), ?, m.id, ?, ?::bigint - g * 150000, ?::bigint - g * 150000 + 120000,
            case when g % 10 = 0 then 'switch ' || g end, ?::bigint - g * 150000, ?::bigint - g * 150000
     from generate_series(1, ?::bigint) g join bench_m m on m.rn = 1 + ((g * 7919) % ?)`,
    [userId, side, NOW - 3_600_000, NOW - 3_600_000, NOW - 3_600_000, NOW - 3_600_000, size.sessions, size.members],
  );
  // An open front of three, and tier presence for two more.
  const open = (await knex('bench_m').whereIn('rn', [1, 2, 3]).orderBy('rn').select('id')).map((r) => r.id as string);
  for (const [i, memberId] of open.entries()) {
    await knex('front_sessions').insert({
      id: knex.raw('gen_random_uuid()'),
      user_id: userId,
      member_id: memberId,
      side_system_id: side,
      started_at: NOW - 600_000 + i,
      ended_at: null,
      position: i,
      note: i === 0 ? 'morning' : null,
      created_at: NOW,
      updated_at: NOW,
    });
  }
  const tiered = (await knex('bench_m').whereIn('rn', [4, 5]).orderBy('rn').select('id')).map((r) => r.id as string);
  for (const memberId of tiered) {
    await knex('front_tier_presence').insert({
      user_id: userId,
      member_id: memberId,
      tier_key: 'coConscious',
      note: 'around',
      created_at: NOW,
      updated_at: NOW,
    });
  }
  const frontPool = (await knex('bench_m').where('rn', '>', 10).orderBy('rn').limit(200).select('id')).map(
    (r) => r.id as string,
  );
  await knex.raw('drop table bench_m');
  return { userId, apiKey, sideSystemId: side, frontPool };
}

/** The awkward account: small, but with every case the JSON of the read scenarios has to get right. */
export interface AwkwardAccount {
  userId: string;
  apiKey: string;
  /** A key with `members: read` only (the front and the notes answer 403). */
  membersOnlyKey: string;
  /** The active side system as seeded, a second side system and a sub system of the first. */
  sideSystemId: string;
  otherSideSystemId: string;
  subSystemId: string;
}

interface AwkwardMember {
  id: string;
  side?: 'other';
  sub?: boolean;
  name: string;
  display_name?: string | null;
  pronouns?: string | null;
  description?: string | null;
  about_tags?: unknown[];
  profile_style?: Record<string, unknown> | null;
  avatar?: Record<string, unknown> | null;
  banner?: Record<string, unknown> | null;
  archived?: boolean;
  /** Put in the trash after its sessions and presence are written (what a race can leave behind). */
  trashed?: boolean;
  created_at: number;
}

/**
 * Members with object and legacy-URL avatars and banners, empty and missing display names,
 * JSON with Unicode and escapes, archived and trashed members (a trashed one still holding an
 * open session at the head of the front order, a presence and history), members of a second side
 * system and of a sub system, custom tiers (one presence names a deleted tier), equal sort keys,
 * trashed sessions and notes, notes linked to several members in an order that is not id order.
 * Enough rows that the first pages of the read scenarios have a next page.
 */
async function seedAwkward(knex: Knex): Promise<AwkwardAccount> {
  const parts = { db: knex, config: loadConfig({}), logger: createLogger('silent') };
  const actor = { kind: 'system', job: 'bench_seed' } as const;
  const { userId } = await createAccount(backgroundContext({ ...parts, clock: () => NOW - 2 * YEAR }, actor), {
    username: 'bench_awkward',
    plan: 'pro_plus',
  });
  const keyCtx = backgroundContextFor({ ...parts, clock: () => NOW }, actor, userId);
  const { apiKey } = await createApiKey(keyCtx, { name: 'bench awkward', scopes: ALL_SCOPES });
  const { apiKey: membersOnlyKey } = await createApiKey(keyCtx, {
    name: 'members only ✓',
    scopes: { members: 'read' },
  });
  const { side_system_id: side } = await knex('active_system_context')
    .where({ user_id: userId })
    .first('side_system_id');
  const t0 = NOW - YEAR;
  const other = randomUUID();
  const sub = randomUUID();
  await knex('side_systems').insert({
    id: other,
    user_id: userId,
    name: 'Zweites System 🌙',
    created_at: t0,
    updated_at: t0,
  });
  await knex('sub_systems').insert({
    id: sub,
    user_id: userId,
    side_system_id: side,
    name: 'Sub ✨',
    created_at: t0,
    updated_at: t0,
  });

  const m = (name: string, extra: Partial<AwkwardMember> & { created_at: number }): AwkwardMember => ({
    id: randomUUID(),
    name,
    ...extra,
  });
  const robin = m('Robin', {
    display_name: 'Róbín 🌿',
    pronouns: 'she/they',
    description:
      'Gatekeeper. Likes "tea" \\ biscuits,\nnew lines,\u2028separators, \u05e9\u05dc\u05d5\u05dd and \u{1F600}.',
    about_tags: ['gatekeeper', 'ünï 😀', 'tab\there'],
    profile_style: { color: '#ff0000', nested: { a: [1, 2.5, { b: null }], ключ: 'значение' }, emoji: '🎨', z: true },
    avatar: {
      source: 'object',
      key: `u/${userId}/members/robin/avatar/abc`,
      contentType: 'image/png',
      etag: '"0f3a-ü"',
    },
    banner: { source: 'url', url: 'https://example.com/banner.png?size=large&v=2' },
    created_at: t0 + 1_000,
  });
  const sage = m('Sage', {
    display_name: '',
    avatar: { source: 'url', url: 'https://bilder.example/äva tar.png?x=1&y=2' },
    created_at: t0 + 2_000,
  });
  const archived = m('Ärchived', {
    archived: true,
    avatar: { source: 'object', key: 'k', contentType: 'image/webp', etag: 'W/"weak"' },
    description: '',
    created_at: t0 + 3_000,
  });
  const trashed = m('Trashed 🗑', { trashed: true, display_name: 'In the trash', created_at: t0 + 4_000 });
  const subMember = m('Sub-member', { sub: true, display_name: 'שלום', created_at: t0 + 5_000 });
  const otherSide = m('Other side 🌙', { side: 'other', created_at: t0 + 6_000 });
  const zwj = m('👩‍👩‍👧 e\u0301', { display_name: null, pronouns: 'xe/xem', created_at: t0 + 7_000 });
  // Equal created_at: the page orders them by id.
  const twinA = m('Twin A', { created_at: t0 + 8_000 });
  const twinB = m('Twin B', { created_at: t0 + 8_000, about_tags: [] });
  const named = [robin, sage, archived, trashed, subMember, otherSide, zwj, twinA, twinB];
  const fillers = Array.from({ length: 130 }, (_, i) =>
    m(`Filler ${i} ${['α', 'β', 'γ', '😀', 'ß'][i % 5]}`, {
      created_at: t0 + 10_000 + i * 1_000,
      display_name: i % 7 === 0 ? `Display ${i}` : null,
      sub: i % 5 === 0,
      side: i % 9 === 0 ? 'other' : undefined,
      archived: i % 11 === 0,
      trashed: i % 13 === 0,
    }),
  );
  const all = [...named, ...fillers];
  await knex('members').insert(
    all.map((x) => ({
      id: x.id,
      user_id: userId,
      side_system_id: x.side === 'other' ? other : side,
      sub_system_id: x.sub ? sub : null,
      name: x.name,
      display_name: x.display_name ?? null,
      pronouns: x.pronouns ?? null,
      description: x.description ?? null,
      about_tags: JSON.stringify(x.about_tags ?? ['awkward']),
      profile_style: x.profile_style ? JSON.stringify(x.profile_style) : null,
      avatar: x.avatar ? JSON.stringify(x.avatar) : null,
      banner: x.banner ? JSON.stringify(x.banner) : null,
      archived_at: x.archived ? x.created_at + 500 : null,
      version: 3,
      created_at: x.created_at,
      updated_at: x.created_at + 700,
    })),
  );

  // The front: the trashed member first in the order, an open session without a place (after the
  // placed ones), a member of the other side system, and a trashed open session.
  const session = (memberId: string, startedAt: number, extra: Record<string, unknown> = {}) => ({
    id: randomUUID(),
    user_id: userId,
    member_id: memberId,
    side_system_id: side,
    started_at: startedAt,
    ended_at: null,
    note: null,
    position: null,
    created_at: startedAt,
    updated_at: startedAt,
    ...extra,
  });
  await knex('front_sessions').insert([
    session(trashed.id, NOW - 900_000, { position: 0, note: 'should not show' }),
    session(sage.id, NOW - 800_000, { position: 1, note: 'morning ☀️ "quoted" \\ back' }),
    session(robin.id, NOW - 700_000, { position: 2 }),
    session(otherSide.id, NOW - 650_000, { position: 3, note: 'Ω' }),
    session(archived.id, NOW - 950_000),
    session(zwj.id, NOW - 600_000, { position: 4, deleted_at: NOW - 100_000 }),
  ]);
  // History: closed sessions of nearly everyone (two with the same start), some trashed.
  const historyMembers = [robin, sage, archived, trashed, subMember, otherSide, zwj, ...fillers.slice(0, 20)];
  const closed = Array.from({ length: 160 }, (_, i) => {
    const started =
      NOW - 2_000_000 - Math.floor(i / 2) * 2 * 60_000 - (i % 2 === 0 ? 0 : 60_000) + (i === 7 ? 60_000 : 0);
    return session(historyMembers[(i * 7) % historyMembers.length]!.id, started, {
      ended_at: started + 30_000 + i,
      note: i % 4 === 0 ? `switch ${i} — ünï “curly” 😀` : i % 4 === 1 ? '' : null,
      deleted_at: i % 17 === 0 ? NOW : null,
    });
  });
  await knex('front_sessions').insert(closed);

  // Tiers: a custom one in use, one unused, a presence naming a deleted tier, and presence of a
  // trashed member; equal created_at orders by member id.
  const tier = randomUUID();
  await knex('front_custom_tiers').insert([
    { id: tier, user_id: userId, display_name: 'Nähe 💫', created_at: t0, updated_at: t0 },
    { id: randomUUID(), user_id: userId, display_name: 'Unused', created_at: t0 + 1, updated_at: t0 + 1 },
  ]);
  const presence = (memberId: string, tierKey: string, note: string | null, at: number) => ({
    user_id: userId,
    member_id: memberId,
    tier_key: tierKey,
    note,
    created_at: at,
    updated_at: at,
  });
  await knex('front_tier_presence').insert([
    presence(zwj.id, 'coConscious', null, NOW - 500_000),
    presence(fillers[1]!.id, tier, 'close by', NOW - 400_000),
    presence(fillers[2]!.id, randomUUID(), null, NOW - 400_000),
    presence(fillers[3]!.id, 'coFront', 'ñ ✓', NOW - 300_000),
    presence(trashed.id, 'coFront', null, NOW - 200_000),
    presence(subMember.id, 'coConscious', '', NOW - 100_000),
  ]);

  // Notes: several links in an order that is not id order (a trashed and an archived member
  // among them), none, a null title, equal update times, other scopes, one in the trash.
  const entries: Array<Record<string, unknown>> = [];
  const links: Array<Record<string, unknown>> = [];
  for (let i = 0; i < 70; i++) {
    const id = randomUUID();
    const linked =
      i % 5 === 0
        ? []
        : i % 5 === 1
          ? [trashed.id, robin.id, archived.id]
          : i % 5 === 2
            ? [fillers[i]!.id]
            : [zwj.id, sage.id];
    const at = t0 + 100_000 + Math.floor(i / 3) * 1_000;
    entries.push({
      id,
      user_id: userId,
      side_system_id: i % 10 === 3 ? other : side,
      sub_system_id: i % 4 === 0 ? sub : null,
      title: i % 6 === 0 ? null : `Nöte ${i} “${'🌿'.repeat(i % 3)}”`,
      content: `Line 1 \\ "quoted"\nLine 2 NUL-free, <b>html</b> & ${'é'.repeat(i % 4)} ${i}`,
      member_id: linked[0] ?? null,
      member_ids: JSON.stringify(linked),
      created_at: at - 5_000,
      updated_at: at,
      deleted_at: i === 69 ? NOW : null,
    });
    for (const [position, memberId] of linked.entries()) {
      links.push({ entry_id: id, member_id: memberId, user_id: userId, position });
    }
  }
  await knex('entries').insert(entries);
  await knex('entry_members').insert(links);

  // Into the trash last: the counting triggers take the member's sessions out of the history count.
  await knex('members')
    .whereIn(
      'id',
      all.filter((x) => x.trashed).map((x) => x.id),
    )
    .update({ deleted_at: NOW - 50_000 });
  return { userId, apiKey, membersOnlyKey, sideSystemId: side, otherSideSystemId: other, subSystemId: sub };
}

export async function seed(
  knex: Knex,
  plan: SeedPlan,
  log: (message: string) => void,
): Promise<{ large: SeededAccount; small: SeededAccount; viewer: SeededAccount; awkward: AwkwardAccount }> {
  const started = Date.now();
  const large = await seedAccount(knex, 'bench_large', plan.large, true);
  log(`seeded large account in ${((Date.now() - started) / 1000).toFixed(1)} s`);
  const small = await seedAccount(knex, 'bench_small', plan.small, true);
  // The friend of the large and the small account in the friend scenarios (scripts/bench/areas.ts).
  const viewer = await seedAccount(knex, 'bench_friend', { members: 0, entries: 0, sessions: 0 }, true);
  for (let i = 0; i < plan.noise.accounts; i++) await seedAccount(knex, `bench_noise_${i}`, plan.noise, false);
  const awkward = await seedAwkward(knex);
  await knex.raw('analyze');
  log(`seeded everything in ${((Date.now() - started) / 1000).toFixed(1)} s`);
  return { large, small, viewer, awkward };
}

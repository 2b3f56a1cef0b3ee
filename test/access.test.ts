/** The access module (server/access/) and the domain-error mapping at the HTTP edge. */
import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import {
  assertCanWrite,
  contentLevels,
  contentVisible,
  EXAMPLE_ACCESS,
  type FriendAccessColumn,
  forFriend,
  friendAccessRow,
  friendInStatement,
  grantArray,
  fullAccess,
  levelsOn,
  memberLevelSql,
  memberRuleSql,
  mergeMax,
  narrowedSql,
  noAccess,
  onBehalfOf,
  ownAccount,
  permissionMap,
  requireVisible,
  sectionOpenSql,
  sectionVisibleSql,
  viewerCeiling,
  ownerRowsOf,
  visibleContentSql,
  visibleMemberRowsSql,
  visibleMembersSql,
  withFriendAccess,
} from '../server/access/index.ts';
import {
  type Access,
  type FriendAccess,
  type InStatementFriendAccess,
  PERMISSION_GROUPS,
  type PermissionGroup,
  type PermissionMap,
} from '../server/core/context.ts';
import { query, type Sql, sql, toKnex } from '../server/db/sql.ts';
import type { Knex } from 'knex';
import { DomainError, type DomainErrorKind } from '../server/core/errors.ts';
import { fromDomainError } from '../server/http/errors.ts';
import { createMember, UNKNOWN_ID } from './helpers/fixtures.ts';
import { createBucket, expectNoneOf, giveFriend, relate, RELATIONSHIPS, shareMember } from './helpers/friends.ts';
import { useServer } from './helpers/server.ts';

const server = useServer();
const knex = () => server.deps.db.knex;
const friend: FriendAccess = { ...EXAMPLE_ACCESS.friend, ownerId: UNKNOWN_ID };

/** A predicate fragment as a knex where-callback, for the tests that read rows with knex. */
const where =
  (fragment: Sql) =>
  (qb: Knex.QueryBuilder): void => {
    const { sql: text, bindings } = toKnex(fragment);
    qb.whereRaw(text, bindings as Knex.RawBinding[]);
  };

describe('access', () => {
  it('an owner route works on the key’s own account at level owner; the operator acts with the owner’s rights', () => {
    expect(ownAccount({ kind: 'key', accountId: 'a', keyId: 'k', scopes: {} })).toEqual({
      ownerId: 'a',
      level: 'owner',
    });
    expect(onBehalfOf('b')).toEqual({ ownerId: 'b', level: 'owner' });
  });

  it('an owner read filters on the owner’s account alone (ownerRowsOf)', () => {
    expect(ownerRowsOf(onBehalfOf('owner-1'))).toBe('owner-1');
    expect(ownerRowsOf(ownAccount({ kind: 'key', accountId: 'a', keyId: 'k', scopes: {} }))).toBe('a');
  });

  it('the owner sees all of its rows and none of another account’s', async () => {
    const a = await server.user();
    const b = await server.user();
    const mine = [await createMember(a.api, 'A1'), await createMember(a.api, 'A2')];
    await createMember(b.api, 'B1');
    const ids = (
      await query<{ id: string }>(
        knex(),
        sql`select id from members where user_id = ${ownerRowsOf(onBehalfOf(a.userId))}`,
      )
    ).map((r) => r.id);
    expect(ids.sort()).toEqual(mine.sort());
  });

  it('a friend access has no owner-wide predicate and no owner write; no friendship, no access', async () => {
    expect(() => ownerRowsOf(friend)).toThrow(/filter by buckets/);
    expect(() => assertCanWrite(friend)).toThrow(DomainError);
    expect(() => assertCanWrite(onBehalfOf('x'))).not.toThrow();
    const a = await server.user();
    const b = await server.user();
    expect(await forFriend(knex(), a.userId, b.userId)).toBeNull();
  });

  it('what a viewer may not see is not found (the same answer as an unknown id)', () => {
    expect(requireVisible({ id: 1 }, 'Member')).toEqual({ id: 1 });
    for (const hidden of [null, undefined]) {
      try {
        requireVisible(hidden, 'Member');
        expect.unreachable();
      } catch (err) {
        expect(err).toBeInstanceOf(DomainError);
        expect(fromDomainError(err as DomainError)).toMatchObject({
          status: 404,
          code: 'NOT_FOUND',
          message: 'Member not found',
        });
      }
    }
  });
});

// ---- The privacy engine (docs/privacy.md). Friendships and buckets are written straight into the
// tables here, so the engine is tested on its own; the routes that write them have their own tests.

type Status = 'pending' | 'accepted' | 'blocked' | 'revoked';

async function friendship(a: string, b: string, aStatus: Status | null, bStatus: Status | null): Promise<void> {
  const now = Date.now();
  const row = (user: string, other: string, status: Status, direction: string | null) => ({
    id: randomUUID(),
    user_id: user,
    friend_user_id: other,
    status,
    direction: status === 'pending' ? direction : null,
    created_at: now,
    accepted_at: status === 'accepted' ? now : null,
    updated_at: now,
  });
  if (aStatus) await knex()('friendships').insert(row(a, b, aStatus, 'outgoing'));
  if (bStatus) await knex()('friendships').insert(row(b, a, bStatus, 'incoming'));
}

async function bucket(owner: string, permissions: Partial<PermissionMap>): Promise<string> {
  const id = randomUUID();
  const now = Date.now();
  await knex()('privacy_buckets').insert({
    id,
    user_id: owner,
    slug: `u_${id.slice(0, 8)}`,
    name: 'Bucket',
    friend_permissions: JSON.stringify(permissions),
    created_at: now,
    updated_at: now,
  });
  return id;
}

async function assign(
  owner: string,
  bucketId: string,
  kind: string,
  contentId: string,
  sectionKey = '',
): Promise<void> {
  await knex()('privacy_bucket_assignments').insert({
    user_id: owner,
    bucket_id: bucketId,
    kind,
    content_id: contentId,
    section_key: sectionKey,
    created_at: Date.now(),
  });
}

/** Counts the statements `work` sends to the database. */
/**
 * The statements `work` sends that read `table` (the server's background jobs share the instance,
 * so their statements are left out by what they read).
 */
async function statements<T>(work: () => Promise<T>, table: RegExp): Promise<{ result: T; count: number }> {
  let count = 0;
  const onQuery = (q: { sql: string }) => {
    if (table.test(q.sql)) count++;
  };
  knex().on('query', onQuery);
  try {
    return { result: await work(), count };
  } finally {
    knex().removeListener('query', onQuery);
  }
}

describe('privacy engine: who is a friend', () => {
  it('only an accepted friendship on both sides with no block grants an access; everything else is null', async () => {
    const cases: Array<[Status | null, Status | null]> = [
      [null, null],
      ['pending', 'pending'],
      ['revoked', 'revoked'],
      ['blocked', null],
      ['blocked', 'revoked'],
      ['revoked', 'blocked'],
      ['accepted', null],
      ['accepted', 'revoked'],
      ['accepted', 'blocked'],
      ['blocked', 'accepted'],
      ['accepted', 'pending'],
    ];
    for (const [ownerSide, viewerSide] of cases) {
      const owner = await server.user();
      const viewer = await server.user();
      await friendship(owner.userId, viewer.userId, ownerSide, viewerSide);
      expect(await forFriend(knex(), viewer.userId, owner.userId), `${ownerSide}/${viewerSide}`).toBeNull();
      expect(
        await okInStatement(viewer.userId, owner.userId),
        `${ownerSide}/${viewerSide}, resolved in the statement`,
      ).toBe(false);
    }
    const owner = await server.user();
    expect(await forFriend(knex(), owner.userId, owner.userId), 'the owner is not its own friend').toBeNull();
    expect(() => friendInStatement(owner.userId, owner.userId)).toThrow(
      expect.objectContaining({ kind: 'not_found', message: 'Friend not found' }),
    );
    const viewer = await server.user();
    await friendship(owner.userId, viewer.userId, 'accepted', 'accepted');
    expect(await forFriend(knex(), viewer.userId, owner.userId)).toMatchObject({
      ownerId: owner.userId,
      level: 'friend',
      viewerId: viewer.userId,
      bucketIds: [],
    });
    expect(await okInStatement(viewer.userId, owner.userId)).toBe(true);
    // An access resolved in the statement has no grants in JS: the questions that need them refuse it
    // at compile time (and have nothing to read at run time).
    const deferred = friendInStatement(viewer.userId, owner.userId);
    // @ts-expect-error levelsOn needs the grants of a resolved access
    expect(() => levelsOn(deferred, [])).toThrow();
    // @ts-expect-error viewerCeiling needs the grants of a resolved access
    expect(() => viewerCeiling(deferred)).toThrow();
  });

  it('friend_access in a statement reads only the columns its text reads, each as the full row has it', async () => {
    const owner = await server.user();
    const viewer = await server.user();
    await friendship(owner.userId, viewer.userId, 'accepted', 'accepted');
    const front = await bucket(owner.userId, { members_view: 'read', front: 'read_write' });
    const notes = await bucket(owner.userId, { member_notes: 'read' });
    const notHeld = await bucket(owner.userId, fullAccess());
    for (const b of [front, notes]) await assign(owner.userId, b, 'friend', viewer.userId);
    const side = (await knex()('side_systems').where({ user_id: owner.userId }).first('id')) as { id: string };
    await assign(owner.userId, notHeld, 'side_system', side.id);
    const full = await accessRow(viewer.userId, owner.userId);
    expect(full.values).toBe(2);
    expect(full.row).toMatchObject({
      ok: true,
      front_read: [front],
      front_read_write: [front],
      member_notes_read: [notes],
      member_notes_read_write: [],
      hidden_system_ids: [side.id],
    });
    expect(Object.keys(full.row)).toHaveLength(3 + 2 * PERMISSION_GROUPS.length);
    // The grants alone: the columns asked for and `ok`, from the one row of friend_grants.
    const grants = await accessRow(viewer.userId, owner.userId, ['front_read_write', 'member_notes_read']);
    expect(grants.values).toBe(2);
    expect(Object.keys(grants.row).sort()).toEqual(['front_read_write', 'member_notes_read', 'ok']);
    const hidden = await accessRow(viewer.userId, owner.userId, ['hidden_system_ids', 'bucket_ids']);
    expect(hidden.values).toBe(2);
    expect(Object.keys(hidden.row).sort()).toEqual(['bucket_ids', 'hidden_system_ids', 'ok']);
    // A statement's CTE reads the columns its fragments read (their marks), nothing else.
    const deferred = friendInStatement(viewer.userId, owner.userId);
    const [used] = await query<Record<string, unknown>>(
      knex(),
      withFriendAccess(
        deferred,
        sql`used as (select ${grantArray(deferred, 'front', 'read_write')} as a, ${grantArray(deferred, 'member_notes', 'read')} as b) select f.* from friend_access f, used`,
      ),
    );
    expect(Object.keys(used!).sort()).toEqual(['front_read_write', 'member_notes_read', 'ok']);
    const asSet = (v: unknown) => (Array.isArray(v) ? new Set(v) : v);
    for (const row of [grants.row, hidden.row])
      for (const [column, value] of Object.entries(row)) expect(asSet(value), column).toEqual(asSet(full.row[column]));
  });

  it('friend_grants follows every change to its sources (friendships, friend and system assignments, bucket permissions, deletes)', async () => {
    const owner = await server.user();
    const viewer = await server.user();
    const other = await server.user();
    const exact = async (step: string) => {
      const [kept, live] = await Promise.all([
        grantsKept([owner.userId, viewer.userId]),
        grantsLive([owner.userId, viewer.userId]),
      ]);
      expect(kept, step).toEqual(live);
      return kept;
    };
    expect(await exact('no friendship')).toEqual([]);
    await friendship(owner.userId, viewer.userId, 'accepted', 'pending');
    expect(await exact('one side accepted')).toEqual([]);
    await knex()('friendships')
      .where({ user_id: viewer.userId, friend_user_id: owner.userId })
      .update({ status: 'accepted', direction: null });
    expect(await exact('both accepted')).toHaveLength(2);
    const front = await bucket(owner.userId, { members_view: 'read', front: 'read_write' });
    const notes = await bucket(owner.userId, { member_notes: 'read' });
    await assign(owner.userId, front, 'friend', viewer.userId);
    await assign(owner.userId, notes, 'friend', viewer.userId);
    await assign(owner.userId, notes, 'friend', other.userId);
    const [row] = (await exact('two buckets held')).filter((r) => r.owner_id === owner.userId);
    expect(row).toMatchObject({
      bucket_ids: [front, notes].sort(),
      front_read_write: [front],
      member_notes_read: [notes],
    });
    await knex()('privacy_buckets')
      .where({ id: notes })
      .update({ friend_permissions: JSON.stringify({ member_notes: 'read_write', groups: 'read' }) });
    await exact('a bucket’s permissions changed');
    const side = (await knex()('side_systems').where({ user_id: owner.userId }).first('id')) as { id: string };
    const elsewhere = await bucket(owner.userId, fullAccess());
    await assign(owner.userId, elsewhere, 'side_system', side.id);
    expect((await exact('a side system narrows')).find((r) => r.owner_id === owner.userId)!.hidden_system_ids).toEqual([
      side.id,
    ]);
    await assign(owner.userId, front, 'side_system', side.id);
    expect((await exact('a held bucket opens it')).find((r) => r.owner_id === owner.userId)!.hidden_system_ids).toEqual(
      [],
    );
    await knex()('privacy_bucket_assignments').where({ bucket_id: front, kind: 'side_system' }).del();
    await exact('the side system’s held bucket removed');
    await knex()('privacy_bucket_assignments')
      .where({ bucket_id: notes, kind: 'friend', content_id: viewer.userId })
      .update({ bucket_id: elsewhere });
    await exact('an assignment moved to another bucket');
    await knex()('privacy_buckets').where({ id: front }).del();
    await exact('a held bucket deleted');
    await knex()('friendships')
      .where({ user_id: viewer.userId, friend_user_id: owner.userId })
      .update({ status: 'blocked' });
    expect(await exact('blocked by the viewer')).toEqual([]);
    await knex()('friendships')
      .where({ user_id: viewer.userId, friend_user_id: owner.userId })
      .update({ status: 'accepted' });
    expect(await exact('accepted again')).toHaveLength(2);
    await knex()('friendships').where({ user_id: owner.userId, friend_user_id: viewer.userId }).del();
    expect(await exact('one row deleted')).toEqual([]);
    await friendship(owner.userId, viewer.userId, 'accepted', null);
    expect(await exact('the row back')).toHaveLength(2);
    await knex()('accounts').where({ id: viewer.userId }).del();
    expect(await exact('the viewer’s account deleted')).toEqual([]);
  });

  it('two transactions changing one owner’s grants at once both commit, and the row has both changes', async () => {
    const owner = await server.user();
    const viewer = await server.user();
    await friendship(owner.userId, viewer.userId, 'accepted', 'accepted');
    const first = await bucket(owner.userId, { members_view: 'read' });
    const second = await bucket(owner.userId, { front: 'read' });
    await assign(owner.userId, first, 'friend', viewer.userId);
    const t1 = await knex().transaction();
    try {
      await t1('privacy_buckets')
        .where({ id: first })
        .update({ friend_permissions: JSON.stringify({ members_view: 'read', groups: 'read_write' }) });
      // The grants are recomputed as a transaction commits (deferred triggers); this one now, so it
      // holds the owner's lock. The second's commit waits for it (on PGlite, for the one connection).
      await t1.raw('set constraints all immediate');
      const t2 = knex().transaction(async (trx) => {
        await trx('privacy_bucket_assignments').insert({
          user_id: owner.userId,
          bucket_id: second,
          kind: 'friend',
          content_id: viewer.userId,
          section_key: '',
          created_at: Date.now(),
        });
      });
      await new Promise((resolve) => setTimeout(resolve, 200));
      await t1.commit();
      await t2;
    } finally {
      if (!t1.isCompleted()) await t1.rollback();
    }
    const kept = await grantsKept([owner.userId]);
    expect(kept).toEqual(await grantsLive([owner.userId]));
    expect(kept[0]).toMatchObject({
      bucket_ids: [first, second].sort(),
      groups_read_write: [first],
      front_read: [second],
    });
  });

  it('members.bucket_ids holds its member’s own buckets through every write (one row, many, updates, a bucket deleted)', async () => {
    const owner = await server.user();
    const members = [
      await createMember(owner.api, 'A'),
      await createMember(owner.api, 'B'),
      await createMember(owner.api, 'C'),
    ];
    const exact = async (step: string) => {
      const kept = await knex()('members').whereIn('id', members).orderBy('id').select('id', 'bucket_ids');
      const live = await knex()('privacy_bucket_assignments')
        .where({ kind: 'member', section_key: '' })
        .whereIn('content_id', members)
        .select('content_id', 'bucket_id');
      const expected = [...members].sort().map((id) => ({
        id,
        bucket_ids: live
          .filter((a) => a.content_id === id)
          .map((a) => a.bucket_id as string)
          .sort(),
      }));
      expect(
        kept.map((r) => ({ id: r.id, bucket_ids: [...r.bucket_ids].sort() })),
        step,
      ).toEqual(expected);
    };
    await exact('no buckets');
    const [b1, b2, b3] = [
      await bucket(owner.userId, {}),
      await bucket(owner.userId, {}),
      await bucket(owner.userId, {}),
    ];
    await assign(owner.userId, b1, 'member', members[0]!);
    await exact('one row');
    await knex()('privacy_bucket_assignments').insert(
      [b2, b3].flatMap((b) =>
        members.map((m) => ({
          user_id: owner.userId,
          bucket_id: b,
          kind: 'member',
          content_id: m,
          section_key: '',
          created_at: 0,
        })),
      ),
    );
    await exact('six rows in one statement');
    // Other kinds of the same ids are not the member's own buckets.
    await assign(owner.userId, b1, 'profile_section', members[1]!, 'avatar');
    await exact('a profile section');
    await knex()('privacy_bucket_assignments')
      .where({ kind: 'member', content_id: members[2], bucket_id: b3 })
      .update({ bucket_id: b1 });
    await exact('an assignment moved to another bucket');
    await knex()('privacy_bucket_assignments').where({ kind: 'member', bucket_id: b2 }).del();
    await exact('a bucket’s rows deleted');
    await knex()('privacy_buckets').where({ id: b3 }).del();
    await exact('a bucket deleted');
  });

  it('two transactions adding buckets to one member at once both count', async () => {
    const owner = await server.user();
    const member = await createMember(owner.api, 'A');
    const [b1, b2] = [await bucket(owner.userId, {}), await bucket(owner.userId, {})];
    const row = (b: string) => ({
      user_id: owner.userId,
      bucket_id: b,
      kind: 'member',
      content_id: member,
      section_key: '',
      created_at: 0,
    });
    const t1 = await knex().transaction();
    try {
      await t1('privacy_bucket_assignments').insert(row(b1));
      // The second waits for the first's lock on the member row (on PGlite, for the one connection).
      const t2 = knex().transaction(async (trx) => {
        await trx('privacy_bucket_assignments').insert(row(b2));
      });
      await new Promise((resolve) => setTimeout(resolve, 200));
      await t1.commit();
      await t2;
    } finally {
      if (!t1.isCompleted()) await t1.rollback();
    }
    const { bucket_ids } = await knex()('members').where({ id: member }).first('bucket_ids');
    expect([...bucket_ids].sort()).toEqual([b1, b2].sort());
  });

  it('an accepted friend with no bucket gets nothing: every group none, every content predicate false', async () => {
    const owner = await server.user();
    const viewer = await server.user();
    await friendship(owner.userId, viewer.userId, 'accepted', 'accepted');
    const member = await createMember(owner.api, 'Hidden');
    const b = await bucket(owner.userId, fullAccess());
    await assign(owner.userId, b, 'member', member);
    const access = (await forFriend(knex(), viewer.userId, owner.userId))!;
    expect(viewerCeiling(access)).toEqual(noAccess());
    expect(levelsOn(access, [b])).toEqual(noAccess());
    const ids = await knex()('members as m')
      .where('m.user_id', owner.userId)
      .where(where(visibleContentSql(access, { kind: 'member', column: 'm.id' }, 'members_view')))
      .pluck('m.id');
    expect(ids).toEqual([]);
  });

  it('the buckets come from the owner’s assignment to this viewer only, never from another owner’s or a foreign bucket', async () => {
    const owner = await server.user();
    const other = await server.user();
    const viewer = await server.user();
    await friendship(owner.userId, viewer.userId, 'accepted', 'accepted');
    await friendship(other.userId, viewer.userId, 'accepted', 'accepted');
    const mine = await bucket(owner.userId, { members_view: 'read' });
    const theirs = await bucket(other.userId, { members_view: 'read_write', front: 'read_write' });
    await assign(owner.userId, mine, 'friend', viewer.userId);
    await assign(other.userId, theirs, 'friend', viewer.userId);
    // The database refuses an assignment that names another account's bucket.
    const foreign = await bucket(other.userId, fullAccess());
    await expect(assign(owner.userId, foreign, 'friend', viewer.userId)).rejects.toThrow(/foreign key/);
    const access = (await forFriend(knex(), viewer.userId, owner.userId))!;
    expect(access.bucketIds).toEqual([mine]);
    expect(viewerCeiling(access)).toEqual({ ...noAccess(), members_view: 'read' });
  });
});

describe('privacy engine: levels', () => {
  it('stored maps are read fail-closed and merged by the maximum per group', () => {
    expect(permissionMap({ members_view: 'read', front: 'everything', bogus: 'read_write' })).toEqual({
      ...noAccess(),
      members_view: 'read',
    });
    expect(permissionMap(null)).toEqual(noAccess());
    const merged = mergeMax([
      { ...noAccess(), members_view: 'read', front: 'read_write' },
      { ...noAccess(), members_view: 'read_write', member_notes: 'read' },
    ]);
    expect(merged).toEqual({ ...noAccess(), members_view: 'read_write', front: 'read_write', member_notes: 'read' });
    expect(Object.keys(fullAccess())).toEqual([...PERMISSION_GROUPS]);
  });

  // The worked example of docs/privacy.md: two buckets, three members, one friend.
  it('worked example: a friend sees the members it shares a bucket with, at the maximum level of the shared buckets', async () => {
    const ada = await server.user();
    const bea = await server.user();
    await friendship(ada.userId, bea.userId, 'accepted', 'accepted');
    const friends = await bucket(ada.userId, { members_view: 'read', member_profile: 'read', front: 'read' });
    const close = await bucket(ada.userId, {
      members_view: 'read',
      member_profile: 'read',
      member_notes: 'read_write',
      front: 'read_write',
    });
    const sam = await createMember(ada.api, 'Sam');
    const robin = await createMember(ada.api, 'Robin');
    const kit = await createMember(ada.api, 'Kit');
    await assign(ada.userId, friends, 'member', sam);
    await assign(ada.userId, friends, 'member', robin);
    await assign(ada.userId, close, 'member', robin);
    const visible = async (
      access: Access,
      group: 'members_view' | 'member_notes',
      level: 'read' | 'read_write' = 'read',
    ) =>
      (await knex()('members as m')
        .where('m.user_id', ada.userId)
        .where(where(visibleContentSql(access, { kind: 'member', column: 'm.id' }, group, level)))
        .orderBy('m.name')
        .pluck('m.name')) as string[];

    // Bea holds Friends only.
    await assign(ada.userId, friends, 'friend', bea.userId);
    let access = (await forFriend(knex(), bea.userId, ada.userId))!;
    expect(await visible(access, 'members_view')).toEqual(['Robin', 'Sam']);
    expect(await visible(access, 'member_notes')).toEqual([]);
    let levels = await contentLevels(knex(), access, 'member', [sam, robin, kit]);
    expect(levels.get(sam)).toEqual({ ...noAccess(), members_view: 'read', member_profile: 'read', front: 'read' });
    expect(levels.get(robin)).toEqual(levels.get(sam));
    expect(levels.get(kit)).toEqual(noAccess());

    // Ada adds Close to Bea: Robin (in both) merges to the maximum; Sam (Friends only) is unchanged; Kit stays hidden.
    await assign(ada.userId, close, 'friend', bea.userId);
    access = (await forFriend(knex(), bea.userId, ada.userId))!;
    expect(await visible(access, 'members_view')).toEqual(['Robin', 'Sam']);
    expect(await visible(access, 'member_notes', 'read_write')).toEqual(['Robin']);
    levels = await contentLevels(knex(), access, 'member', [sam, robin, kit]);
    expect(levels.get(robin)).toEqual({
      ...noAccess(),
      members_view: 'read',
      member_profile: 'read',
      member_notes: 'read_write',
      front: 'read_write',
    });
    expect(levels.get(sam)).toEqual({ ...noAccess(), members_view: 'read', member_profile: 'read', front: 'read' });
    expect(levels.get(kit)).toEqual(noAccess());
    expect(viewerCeiling(access)).toEqual({
      ...noAccess(),
      members_view: 'read',
      member_profile: 'read',
      member_notes: 'read_write',
      front: 'read_write',
    });

    // The owner sees everything of its own, without a query.
    const own = await statements(
      () =>
        contentLevels(knex(), ownAccount({ kind: 'key', accountId: ada.userId, keyId: 'k', scopes: {} }), 'member', [
          kit,
        ]),
      /privacy_bucket_assignments/,
    );
    expect(own.result.get(kit)).toEqual(fullAccess());
    expect(own.count).toBe(0);

    // Ada revokes: nothing is left.
    await knex()('friendships')
      .where({ user_id: ada.userId, friend_user_id: bea.userId })
      .update({ status: 'revoked' });
    expect(await forFriend(knex(), bea.userId, ada.userId)).toBeNull();
  });

  it('a content kind only matches its own assignments (a group bucket does not reveal a member with the same id, sections are separate)', async () => {
    const owner = await server.user();
    const viewer = await server.user();
    await friendship(owner.userId, viewer.userId, 'accepted', 'accepted');
    const b = await bucket(owner.userId, fullAccess());
    await assign(owner.userId, b, 'friend', viewer.userId);
    const member = await createMember(owner.api, 'Sectioned');
    await assign(owner.userId, b, 'profile_section', member, 'pronouns');
    const access = (await forFriend(knex(), viewer.userId, owner.userId))!;
    const asMember = await knex()('members as m')
      .where('m.id', member)
      .where(where(visibleContentSql(access, { kind: 'member', column: 'm.id' }, 'members_view')))
      .pluck('m.id');
    expect(asMember).toEqual([]);
    const pronouns = await knex()('members as m')
      .where('m.id', member)
      .where(
        where(
          visibleContentSql(access, { kind: 'profile_section', column: 'm.id', section: 'pronouns' }, 'member_profile'),
        ),
      )
      .pluck('m.id');
    expect(pronouns).toEqual([member]);
    const about = await knex()('members as m')
      .where('m.id', member)
      .where(
        where(
          visibleContentSql(access, { kind: 'profile_section', column: 'm.id', section: 'about' }, 'member_profile'),
        ),
      )
      .pluck('m.id');
    expect(about).toEqual([]);
    expect(() => contentVisible({ kind: 'profile_section', column: 'm.id' }, sql`null`)).toThrow(/section/);
    expect(() => contentVisible({ kind: 'member', column: 'm.id; drop table members' }, sql`null`)).toThrow(
      /not a plain identifier/,
    );
  });

  it('kinds that narrow: a side system or profile section without buckets of its own does not narrow; with buckets, the friend must share one', async () => {
    const owner = await server.user();
    const viewer = await server.user();
    await friendship(owner.userId, viewer.userId, 'accepted', 'accepted');
    const held = await bucket(owner.userId, { members_view: 'read', member_profile: 'read' });
    const notHeld = await bucket(owner.userId, fullAccess());
    await assign(owner.userId, held, 'friend', viewer.userId);
    const plain = await createMember(owner.api, 'Plain');
    const narrowed = await createMember(owner.api, 'Narrowed');
    const shared = await createMember(owner.api, 'Shared');
    for (const m of [plain, narrowed, shared]) await assign(owner.userId, held, 'member', m);
    await assign(owner.userId, notHeld, 'profile_section', narrowed, 'about');
    await assign(owner.userId, notHeld, 'profile_section', shared, 'about');
    await assign(owner.userId, held, 'profile_section', shared, 'about');
    const access = (await forFriend(knex(), viewer.userId, owner.userId))!;
    const aboutVisible = await knex()('members as m')
      .where('m.user_id', owner.userId)
      .where(where(visibleContentSql(access, { kind: 'member', column: 'm.id' }, 'members_view')))
      .where(
        where(narrowedSql(access, { kind: 'profile_section', column: 'm.id', section: 'about' }, 'member_profile')),
      )
      .orderBy('m.name')
      .pluck('m.name');
    expect(aboutVisible).toEqual(['Plain', 'Shared']);
    // A friend whose buckets grant the group to nothing sees only content that does not narrow.
    const none = await knex()('members as m')
      .where('m.user_id', owner.userId)
      .where(where(narrowedSql(access, { kind: 'profile_section', column: 'm.id', section: 'about' }, 'member_notes')))
      .orderBy('m.name')
      .pluck('m.name');
    expect(none).toEqual(['Plain']);
  });

  it('a section shown with the member rule (memberRuleSql and sectionOpenSql) is decided as sectionVisibleSql decides it', async () => {
    const owner = await server.user();
    const viewer = await server.user();
    await friendship(owner.userId, viewer.userId, 'accepted', 'accepted');
    const avatar = await bucket(owner.userId, { members_view: 'read', front: 'read', member_avatar: 'read' });
    const plain = await bucket(owner.userId, { members_view: 'read', front: 'read' });
    const notHeld = await bucket(owner.userId, fullAccess());
    await assign(owner.userId, avatar, 'friend', viewer.userId);
    await assign(owner.userId, plain, 'friend', viewer.userId);
    const open = await createMember(owner.api, 'Open');
    const noGrant = await createMember(owner.api, 'NoGrant');
    const narrowed = await createMember(owner.api, 'Narrowed');
    const shared = await createMember(owner.api, 'Shared');
    const heldNoGrant = await createMember(owner.api, 'HeldNoGrant');
    const hidden = await createMember(owner.api, 'Hidden');
    for (const m of [open, narrowed, shared, heldNoGrant]) await assign(owner.userId, avatar, 'member', m);
    await assign(owner.userId, plain, 'member', noGrant);
    await assign(owner.userId, notHeld, 'member', hidden);
    // The avatar section: buckets the friend does not hold (narrowed away), one it holds granting the
    // avatar too (shared), one it holds granting no avatar (narrowed away).
    await assign(owner.userId, notHeld, 'profile_section', narrowed, 'avatar');
    await assign(owner.userId, notHeld, 'profile_section', shared, 'avatar');
    await assign(owner.userId, avatar, 'profile_section', shared, 'avatar');
    await assign(owner.userId, plain, 'profile_section', heldNoGrant, 'avatar');
    const deferred = friendInStatement(viewer.userId, owner.userId);
    const access = (await forFriend(knex(), viewer.userId, owner.userId))!;
    for (const a of [access, deferred]) {
      const how = a.inStatement ? 'in the statement' : 'bound';
      const rows = await query<{ name: string; visible: boolean; shown: boolean; reference: boolean }>(
        knex(),
        withFriendAccess(
          a,
          sql`x as (select m.name, mr.visible, mr.section_granted and ${sectionOpenSql(a, 'm.id', 'avatar')} as shown,
              ${visibleMembersSql(a, 'm', 'front', 'read')} and ${sectionVisibleSql(a, 'm.id', 'avatar')} as reference
            from members m cross join lateral (${memberRuleSql(a, 'm', 'front', 'read', 'avatar')}) mr where m.user_id = ${owner.userId})
          select * from x order by name`,
        ),
      );
      expect(
        rows.filter((r) => r.visible).map((r) => r.name),
        how,
      ).toEqual(['HeldNoGrant', 'Narrowed', 'NoGrant', 'Open', 'Shared']);
      expect(
        rows.filter((r) => r.visible && r.shown).map((r) => r.name),
        how,
      ).toEqual(['Open', 'Shared']);
      expect(
        rows.filter((r) => r.visible && r.shown).map((r) => r.name),
        how,
      ).toEqual(rows.filter((r) => r.reference).map((r) => r.name));
    }
  });

  it('visibleMembers: the member’s buckets grant members_view (and the asked group); a side or sub system with buckets the friend lacks hides its members', async () => {
    const owner = await server.user();
    const viewer = await server.user();
    await friendship(owner.userId, viewer.userId, 'accepted', 'accepted');
    const view = await bucket(owner.userId, { members_view: 'read' });
    const notes = await bucket(owner.userId, { members_view: 'read', member_notes: 'read_write' });
    const other = await bucket(owner.userId, fullAccess());
    await assign(owner.userId, view, 'friend', viewer.userId);
    await assign(owner.userId, notes, 'friend', viewer.userId);
    // A held bucket that grants no members_view: its members alone are not visible.
    const profileOnly = await bucket(owner.userId, { member_profile: 'read' });
    await assign(owner.userId, profileOnly, 'friend', viewer.userId);
    const side = (await knex()('active_system_context').where('user_id', owner.userId).first())
      .side_system_id as string;
    const inMain = await createMember(owner.api, 'InMain');
    const withNotes = await createMember(owner.api, 'WithNotes');
    const sub = await createMember(owner.api, 'SubLink');
    const inSub = await createMember(owner.api, 'InSub');
    for (const m of [inMain, sub, inSub]) await assign(owner.userId, view, 'member', m);
    await assign(owner.userId, notes, 'member', withNotes);
    // member_notes at read only: level 1 of memberLevelSql.
    const notesRead = await bucket(owner.userId, { members_view: 'read', member_notes: 'read' });
    await assign(owner.userId, notesRead, 'friend', viewer.userId);
    await assign(owner.userId, notesRead, 'member', await createMember(owner.api, 'ReadNotes'));
    await assign(owner.userId, profileOnly, 'member', inMain);
    await assign(owner.userId, profileOnly, 'member', await createMember(owner.api, 'ProfileOnly'));
    const subId = randomUUID();
    await knex()('sub_systems').insert({
      id: subId,
      user_id: owner.userId,
      side_system_id: side,
      linked_member_id: sub,
      name: 'Sub',
      created_at: Date.now(),
      updated_at: Date.now(),
    });
    await knex()('members').where('id', inSub).update({ sub_system_id: subId });
    const deferred = friendInStatement(viewer.userId, owner.userId);
    // The rule four ways, which must agree: the predicate over the owner's members, the visible
    // set (visibleMemberRowsSql), the member's level (memberLevelSql) and the rule read with a
    // section's grant (memberRuleSql's `visible`), each with the grants
    // bound (an access resolved now: it holds the grants and hidden systems of this moment) and
    // resolved in the statement.
    const names = async (group?: 'member_notes', level?: 'read' | 'read_write') => {
      const access = (await forFriend(knex(), viewer.userId, owner.userId))!;
      const byPredicate = await knex()('members as m')
        .where('m.user_id', owner.userId)
        .where(where(visibleMembersSql(access, 'm', group, level)))
        .orderBy('m.name')
        .pluck('m.name');
      for (const a of [access, deferred]) {
        const how = a.inStatement ? 'in the statement' : 'bound';
        expect(await visibleSetNames(a, group, level), how).toEqual(byPredicate);
        expect(await levelNames(a, owner.userId, group ?? 'members_view', level === 'read_write' ? 2 : 1), how).toEqual(
          byPredicate,
        );
        expect(await ruleNames(a, owner.userId, group ?? 'members_view', level ?? 'read'), how).toEqual(byPredicate);
      }
      return byPredicate;
    };
    expect(await names()).toEqual(['InMain', 'InSub', 'ReadNotes', 'SubLink', 'WithNotes']);
    expect(await names('member_notes', 'read')).toEqual(['ReadNotes', 'WithNotes']);
    expect(await names('member_notes', 'read_write')).toEqual(['WithNotes']);
    // The sub system gets a bucket the friend does not hold: its members disappear, the others stay.
    await assign(owner.userId, other, 'sub_system', subId);
    expect(await names()).toEqual(['InMain', 'ReadNotes', 'SubLink', 'WithNotes']);
    // The side system gets one too: everything in it disappears.
    await assign(owner.userId, other, 'side_system', side);
    expect(await names()).toEqual([]);
    expect(await names('member_notes', 'read')).toEqual([]);
    // A held bucket that grants no members_view does not bring them back.
    await assign(owner.userId, profileOnly, 'side_system', side);
    expect(await names()).toEqual([]);
    // Sharing the side system's bucket with the friend brings back those not narrowed by the sub system.
    await assign(owner.userId, view, 'side_system', side);
    expect(await names()).toEqual(['InMain', 'ReadNotes', 'SubLink', 'WithNotes']);
    expect(await names('member_notes', 'read')).toEqual(['ReadNotes', 'WithNotes']);
    expect(await names('member_notes', 'read_write')).toEqual(['WithNotes']);
  });

  it('deciding the levels of a page of 100 members costs one statement, and the list predicate keeps it one statement', async () => {
    const owner = await server.user();
    const viewer = await server.user();
    await friendship(owner.userId, viewer.userId, 'accepted', 'accepted');
    const shared = await bucket(owner.userId, { members_view: 'read' });
    await assign(owner.userId, shared, 'friend', viewer.userId);
    const now = Date.now();
    const side = (await knex()('active_system_context').where('user_id', owner.userId).first())
      .side_system_id as string;
    const rows = Array.from({ length: 100 }, (_, i) => ({
      id: randomUUID(),
      user_id: owner.userId,
      side_system_id: side,
      name: `M${String(i).padStart(3, '0')}`,
      created_at: now + i,
      updated_at: now + i,
    }));
    await knex()('members').insert(rows);
    await knex()('privacy_bucket_assignments').insert(
      rows
        .filter((_, i) => i % 2 === 0)
        .map((r) => ({ user_id: owner.userId, bucket_id: shared, kind: 'member', content_id: r.id, created_at: now })),
    );
    const access = (await forFriend(knex(), viewer.userId, owner.userId))!;
    const levels = await statements(
      () =>
        contentLevels(
          knex(),
          access,
          'member',
          rows.map((r) => r.id),
        ),
      /privacy_bucket_assignments/,
    );
    expect(levels.count).toBe(1);
    expect([...levels.result.values()].filter((l) => l.members_view === 'read')).toHaveLength(50);
    const page = await statements(
      () =>
        knex()('members as m')
          .where('m.user_id', owner.userId)
          .whereNull('m.deleted_at')
          .where(where(visibleContentSql(access, { kind: 'member', column: 'm.id' }, 'members_view')))
          .orderBy(['m.created_at', 'm.id'])
          .limit(20)
          .pluck('m.name'),
      /"members"/,
    );
    expect(page.count).toBe(1);
    expect(page.result).toEqual(
      rows
        .filter((_, i) => i % 2 === 0)
        .slice(0, 20)
        .map((r) => r.name),
    );
  });

  it('assignments go with their content: purging a member or deleting a bucket removes its rows', async () => {
    const owner = await server.user();
    const b = await bucket(owner.userId, fullAccess());
    const member = await createMember(owner.api, 'Gone');
    await assign(owner.userId, b, 'member', member);
    await assign(owner.userId, b, 'profile_section', member, 'about');
    await knex()('members').where('id', member).delete();
    expect(await knex()('privacy_bucket_assignments').where('content_id', member).count({ n: '*' })).toEqual([
      { n: expect.anything() },
    ]);
    expect(
      Number((await knex()('privacy_bucket_assignments').where('content_id', member).count({ n: '*' }))[0]!.n),
    ).toBe(0);
    const other = await createMember(owner.api, 'Stays');
    await assign(owner.userId, b, 'member', other);
    await knex()('privacy_buckets').where('id', b).delete();
    expect(
      Number((await knex()('privacy_bucket_assignments').where('content_id', other).count({ n: '*' }))[0]!.n),
    ).toBe(0);
  });
});

describe('privacy engine: the relationship matrix through the routes', () => {
  it('only an accepted friendship yields an access (and only it sees the shared member); every other relationship reads as an unknown id', async () => {
    for (const relationship of RELATIONSHIPS) {
      const owner = await server.user();
      const viewer = await server.user();
      const canary = `Canary ${randomUUID()}`;
      const member = await createMember(owner.api, canary);
      const shared = await createBucket(owner, { members_view: 'read' });
      await shareMember(owner, member, [shared]);
      await relate(owner, viewer, relationship);
      const access = await forFriend(knex(), viewer.userId, owner.userId);
      if (relationship === 'accepted') {
        await giveFriend(owner, viewer, [shared]);
        const granted = (await forFriend(knex(), viewer.userId, owner.userId))!;
        const seen = await knex()('members as m')
          .where('m.user_id', owner.userId)
          .where(where(visibleMembersSql(granted, 'm')))
          .pluck('m.name');
        expect(seen, relationship).toEqual([canary]);
        continue;
      }
      expect(access, relationship).toBeNull();
      const card = await server.fetch(`/api/v1/friends/${owner.userId}`, {
        headers: { authorization: `Bearer ${viewer.apiKey}` },
      });
      expect(card.status, relationship).toBe(404);
      const body = await card.text();
      expectNoneOf(body, [canary, member, owner.username]);
    }
  });
});

describe('domain errors at the HTTP edge', () => {
  it('each kind maps to its status and envelope code; a specific code wins', () => {
    const expected: Record<DomainErrorKind, [number, string]> = {
      invalid: [400, 'BAD_REQUEST'],
      unauthenticated: [401, 'UNAUTHORIZED'],
      forbidden: [403, 'FORBIDDEN'],
      not_found: [404, 'NOT_FOUND'],
      conflict: [409, 'CONFLICT'],
      unsupported_media: [415, 'UNSUPPORTED_MEDIA_TYPE'],
      unavailable: [503, 'PRECONDITION_FAILED'],
    };
    for (const [kind, [status, code]] of Object.entries(expected)) {
      expect(fromDomainError(new DomainError(kind as DomainErrorKind, 'm'))).toMatchObject({
        status,
        code,
        message: 'm',
      });
    }
    expect(fromDomainError(new DomainError('forbidden', 'cap', 'NOTE_LIMIT_REACHED'))).toMatchObject({
      status: 403,
      code: 'NOTE_LIMIT_REACHED',
    });
  });

  it('a service’s domain error reaches the client as the envelope', async () => {
    const { api } = await server.user();
    const res = await api.GET('/api/v1/members/{memberId}', { params: { path: { memberId: UNKNOWN_ID } } });
    expect(res.response.status).toBe(404);
    expect(res.error).toEqual({ code: 'NOT_FOUND', message: 'Member not found' });
  });
});

/** The rows of friend_grants of these owners, arrays sorted, by owner and viewer. */
async function grantsKept(owners: string[]): Promise<Array<Record<string, string | string[]>>> {
  const rows = await knex()('friend_grants').whereIn('owner_id', owners).orderBy(['owner_id', 'viewer_id']);
  return rows.map(sortedArrays);
}

/**
 * The same rows computed from the sources as each friend read computed them before migration 0037
 * (friendships, the friend's bucket assignments, the buckets' permission maps, the systems that
 * narrow): the oracle friend_grants must agree with after every change.
 */
async function grantsLive(owners: string[]): Promise<Array<Record<string, string | string[]>>> {
  const groups = PERMISSION_GROUPS.flatMap((g) => [
    `coalesce(array_agg(b.id) filter (where b.friend_permissions ->> '${g}' in ('read', 'read_write')), '{}') as ${g}_read`,
    `coalesce(array_agg(b.id) filter (where b.friend_permissions ->> '${g}' = 'read_write'), '{}') as ${g}_read_write`,
  ]);
  const { rows } = (await knex().raw(
    `select g.*, array(select sa.content_id from privacy_bucket_assignments sa
        where sa.user_id = g.owner_id and sa.kind in ('side_system', 'sub_system')
        group by sa.content_id having not bool_or(sa.bucket_id = any (g.members_view_read))) as hidden_system_ids
      from (select o.user_id as owner_id, o.friend_user_id as viewer_id,
                   coalesce(array_agg(b.id) filter (where b.id is not null), '{}') as bucket_ids, ${groups.join(', ')}
              from friendships o
              join friendships v on v.user_id = o.friend_user_id and v.friend_user_id = o.user_id and v.status = 'accepted'
              left join privacy_bucket_assignments a on a.kind = 'friend' and a.section_key = '' and a.content_id = o.friend_user_id and a.user_id = o.user_id
              left join privacy_buckets b on b.id = a.bucket_id and b.user_id = o.user_id
             where o.status = 'accepted' and o.user_id = any (?::uuid[])
             group by o.user_id, o.friend_user_id) g
     order by g.owner_id, g.viewer_id`,
    [owners],
  )) as { rows: Array<Record<string, unknown>> };
  return rows.map(sortedArrays);
}

function sortedArrays(row: Record<string, unknown>): Record<string, string | string[]> {
  return Object.fromEntries(
    Object.entries(row)
      .sort(([a], [b]) => a.localeCompare(b))
      .map(([k, v]) => [k, Array.isArray(v) ? [...(v as string[])].sort() : (v as string)]),
  );
}

/** The friendship row (friendAccessRow) with the columns `wanted` (every column without), and how many values it binds. */
async function accessRow(
  viewerId: string,
  ownerId: string,
  wanted?: FriendAccessColumn[],
): Promise<{ row: Record<string, unknown>; values: number }> {
  const row = friendAccessRow(ownerId, viewerId, wanted && new Set(wanted));
  const [result] = await query<Record<string, unknown>>(
    knex(),
    sql`with friend_access as materialized (${row}) select * from friend_access`,
  );
  return { row: result!, values: row.values.length };
}

/** The `ok` of friend_access for an access resolved in the statement: the same with every column and with `ok` alone. */
async function okInStatement(viewerId: string, ownerId: string): Promise<boolean> {
  const full = (await accessRow(viewerId, ownerId)).row;
  const lean = await accessRow(viewerId, ownerId, []);
  expect(Object.keys(lean.row)).toEqual(['ok']);
  expect(lean.row.ok).toBe(full.ok);
  return full.ok as boolean;
}

/** The names of the owner's members whose level (memberLevelSql) in `group` is at least `rank`. */
async function levelNames(
  access: FriendAccess | InStatementFriendAccess,
  ownerId: string,
  group: PermissionGroup,
  rank: 1 | 2,
): Promise<string[]> {
  const rows = await query<{ name: string }>(
    knex(),
    withFriendAccess(
      access,
      sql`levels as (select m.name, ${memberLevelSql(access, 'm', group)} as level from members m where m.user_id = ${ownerId})
        select name from levels where level >= ${rank} order by name`,
    ),
  );
  return rows.map((r) => r.name);
}

/** The names of the owner's members that memberRuleSql lets through (`visible`) in `group` at `level`. */
async function ruleNames(
  access: FriendAccess | InStatementFriendAccess,
  ownerId: string,
  group: PermissionGroup,
  level: 'read' | 'read_write',
): Promise<string[]> {
  const rows = await query<{ name: string }>(
    knex(),
    withFriendAccess(
      access,
      sql`r as (select m.name, mr.visible from members m cross join lateral (${memberRuleSql(access, 'm', group, level, 'avatar')}) mr where m.user_id = ${ownerId})
        select name from r where visible order by name`,
    ),
  );
  return rows.map((r) => r.name);
}

/** The names in the engine's visible set of members (visibleMemberRowsSql) for `access`. */
async function visibleSetNames(
  access: FriendAccess | InStatementFriendAccess,
  group: PermissionGroup = 'members_view',
  level: 'read' | 'read_write' = 'read',
): Promise<string[]> {
  const set = visibleMemberRowsSql(access, group, level, { columns: ['id', 'name'] });
  const rows = await query<{ name: string }>(
    knex(),
    withFriendAccess(access, sql`vis as (${set}) select name from vis order by name`),
  );
  return rows.map((r) => r.name);
}

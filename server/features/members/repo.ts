import type { Knex } from 'knex';
import { EXAMPLE_ACCESS, sectionVisibleSql, visibleMembersSql, visibleRows } from '../../access/index.ts';
import type { Access, FriendAccess } from '../../core/context.ts';
import { keysetPage, type Keyset } from '../../core/keyset.ts';
import { sql } from '../../db/sql.ts';
import { EXAMPLE_UUID, statement } from '../../db/statements.ts';
import { activeScopeRows, applyScope, type ReadScope } from '../../access/systemScope.ts';
import { prepared } from '../../db/prepared.ts';
import type { MemberRow } from '../../core/members.ts';

export type MemberChanges = Partial<Omit<MemberRow, 'id' | 'user_id' | 'created_at'>>;

const JSON_COLUMNS = ['about_tags', 'profile_style', 'avatar', 'banner'] as const;

/** jsonb columns are written as JSON text so arrays are not taken for Postgres arrays. */
function serialise(changes: MemberChanges | MemberRow): Record<string, unknown> {
  const out: Record<string, unknown> = { ...changes };
  for (const col of JSON_COLUMNS) {
    if (col in out && out[col] !== null && out[col] !== undefined) out[col] = JSON.stringify(out[col]);
  }
  return out;
}

/** Every column of a member row (deleted_at aside: the page reads live members only, so it is null). */
const MEMBER_COLUMNS =
  'x.id, x.user_id, x.side_system_id, x.sub_system_id, x.directory_id, x.name, x.display_name, x.pronouns, x.description, x.about_tags, x.profile_style, x.avatar, x.banner, x.archived_at, x.version, x.created_at, x.updated_at, null::bigint as deleted_at';

/**
 * A page of the live members of the active read scope in (created_at, id) order, in one statement
 * with the scope read from the context row (activeScopeRows). Binds: ([cursor created_at, cursor
 * id,] limit) three times, then the account.
 */
function activeScopePage(name: string, after: string) {
  return prepared<MemberRow>(
    name,
    `select m.* from active_system_context c
cross join lateral (${activeScopeRows('members', MEMBER_COLUMNS, 'x.created_at, x.id', after)}) m
where c.user_id = ?
order by m.created_at, m.id`,
  );
}
const activePageFirst = activeScopePage('members_page_first', '');
const activePageAfter = activeScopePage('members_page_after', ' and (x.created_at, x.id) > (?::bigint, ?::uuid)');

const MEMBER_ORDER: Keyset = {
  columns: [
    { sql: sql`created_at`, type: 'bigint' },
    { sql: sql`id`, type: 'uuid' },
  ],
  direction: 'asc',
};

export interface PageCursor {
  createdAt: number;
  id: string;
}

const AREA = 'members';

/**
 * A friend's view of a member's avatar and banner (both are the `avatar` profile section): the
 * member live, not archived and visible to the friend with member_avatar at read (the member rule),
 * and its avatar section not narrowing it away. One statement.
 */
const friendMedia = statement<{ access: FriendAccess; memberId: string }, Pick<MemberRow, 'avatar' | 'banner'>>({
  name: 'members_friend_media',
  area: AREA,
  variants: { "a friend's view": { access: EXAMPLE_ACCESS.friend, memberId: EXAMPLE_UUID } },
  build: ({ access, memberId }) =>
    sql`select m.avatar, m.banner from members m
      where m.id = ${memberId} and m.user_id = ${access.ownerId} and m.deleted_at is null and m.archived_at is null
        and ${visibleMembersSql(access, 'm', 'member_avatar', 'read')} and ${sectionVisibleSql(access, 'm.id', 'avatar')}`,
});

export const membersRepo = {
  /** The member's avatar and banner as a friend may see them (friendMedia); undefined when it may not. */
  async friendMedia(
    db: Knex,
    access: FriendAccess,
    memberId: string,
  ): Promise<Pick<MemberRow, 'avatar' | 'banner'> | undefined> {
    return (await friendMedia(db, { access, memberId }))[0];
  },

  async insert(db: Knex, row: MemberRow): Promise<void> {
    await db('members').insert(serialise(row));
  },

  findLive(db: Knex, userId: string, id: string): Promise<MemberRow | undefined> {
    return db('members').where({ id, user_id: userId }).whereNull('deleted_at').first();
  },

  /** Live or trashed. */
  findAny(db: Knex, userId: string, id: string): Promise<MemberRow | undefined> {
    return db('members').where({ id, user_id: userId }).first();
  },

  /** The member whether trashed or not, locked for update until the transaction ends. */
  lockAny(trx: Knex.Transaction, userId: string, id: string): Promise<MemberRow | undefined> {
    return trx('members').where({ id, user_id: userId }).forUpdate().first();
  },

  lockLive(trx: Knex.Transaction, userId: string, id: string): Promise<MemberRow | undefined> {
    return trx('members').where({ id, user_id: userId }).whereNull('deleted_at').forUpdate().first();
  },

  async update(db: Knex, userId: string, id: string, changes: MemberChanges): Promise<MemberRow> {
    const [row] = await db('members').where({ id, user_id: userId }).update(serialise(changes)).returning('*');
    return row as MemberRow;
  },

  /** A page (`size` + 1 rows) of the live members of the scope the access may see, in (created_at, id) order after the cursor. */
  page(db: Knex, access: Access, scope: ReadScope, size: number, after?: PageCursor): Promise<MemberRow[]> {
    const q = db('members').where(visibleRows(access)).whereNull('deleted_at');
    applyScope(q, scope);
    return keysetPage(q, MEMBER_ORDER, size, after && [after.createdAt, after.id]);
  },

  /** A page (`size` + 1 rows) of the active read scope's live members after the cursor, in one statement (see activeScopePage). */
  activeScopePage(db: Knex, userId: string, size: number, after?: PageCursor): Promise<MemberRow[]> {
    return after
      ? activePageAfter(db, [
          ...Array<unknown[]>(3)
            .fill([after.createdAt, after.id, size + 1])
            .flat(),
          userId,
        ])
      : activePageFirst(db, [size + 1, size + 1, size + 1, userId]);
  },

  /** Members of this account among the ids (live only), for validating references in one query. */
  liveIds(
    db: Knex,
    userId: string,
    ids: string[],
  ): Promise<Array<Pick<MemberRow, 'id' | 'side_system_id' | 'archived_at'>>> {
    if (ids.length === 0) return Promise.resolve([]);
    return db('members')
      .where({ user_id: userId })
      .whereIn('id', ids)
      .whereNull('deleted_at')
      .select('id', 'side_system_id', 'archived_at');
  },

  /** The ids that are not live members of this account (or not in `sideSystemId` when given), in input order. */
  async missingLive(db: Knex, userId: string, ids: string[], sideSystemId?: string): Promise<string[]> {
    const found = await membersRepo.liveIds(db, userId, ids);
    const ok = new Set(
      found.filter((m) => sideSystemId === undefined || m.side_system_id === sideSystemId).map((m) => m.id),
    );
    return ids.filter((id) => !ok.has(id));
  },

  byIds(db: Knex, userId: string, ids: string[]): Promise<MemberRow[]> {
    if (ids.length === 0) return Promise.resolve([]);
    return db('members').where({ user_id: userId }).whereIn('id', ids);
  },
};

import type { Knex } from 'knex';
import type { MemberRow } from '../../core/members.ts';
import { sql } from '../../db/sql.ts';
import { EXAMPLE_UUID, statement } from '../../db/statements.ts';

const AREA = 'systems';

/**
 * A sub system's linked member, share-locked until the transaction ends: it cannot move to another
 * side system or go to the trash before the link commits.
 */
const shareLinkableMember = statement<{ userId: string; id: string }, Pick<MemberRow, 'id' | 'side_system_id'>>({
  name: 'systems_linked_member_share',
  area: AREA,
  variants: { 'the member': { userId: EXAMPLE_UUID, id: EXAMPLE_UUID } },
  build: ({ userId, id }) =>
    sql`select id, side_system_id from members where id = ${id} and user_id = ${userId} and deleted_at is null for share`,
});

/** The live, not archived members of a side system (who may be a sub system's linked member), by display name. */
const assignableMembers = statement<
  { userId: string; sideSystemId: string },
  Pick<MemberRow, 'id' | 'name' | 'display_name'>
>({
  name: 'systems_assignable_members',
  area: AREA,
  variants: { 'the side system': { userId: EXAMPLE_UUID, sideSystemId: EXAMPLE_UUID } },
  build: ({ userId, sideSystemId }) =>
    sql`select id, name, display_name from members
      where user_id = ${userId} and side_system_id = ${sideSystemId} and deleted_at is null and archived_at is null
      order by lower(coalesce(nullif(display_name, ''), name)), id`,
});

export interface SystemRow {
  id: string;
  user_id: string;
  name: string;
  description: string | null;
  icon: string | null;
  tag_code: string | null;
  tag_color: string | null;
  created_at: number;
  updated_at: number;
  deleted_at: number | null;
}

export interface SubSystemRow extends SystemRow {
  side_system_id: string;
  linked_member_id: string | null;
  parent_sub_system_id: string | null;
}

export interface ContextRow {
  user_id: string;
  side_system_id: string;
  sub_system_id: string | null;
  is_unified_view: boolean;
  updated_at: number;
}

export type SystemFields = Partial<Pick<SystemRow, 'name' | 'description' | 'icon' | 'tag_code' | 'tag_color'>>;

/**
 * Row lock for a find inside a transaction. Writes that place data in a system take `share`;
 * deleting the system takes `update`, so the two serialise and a delete's dependent-data count
 * sees every committed placement (and a placement never lands in a system deleted under it).
 */
export type RowLock = 'share' | 'update';

function withLock<T extends Knex.QueryBuilder>(qb: T, lock: RowLock | undefined): T {
  if (lock === 'share') qb.forShare();
  if (lock === 'update') qb.forUpdate();
  return qb;
}

export const systemsRepo = {
  /** The live member `id`, share-locked (see shareLinkableMember); undefined when it is not a live member of the account. */
  async shareLinkableMember(
    trx: Knex.Transaction,
    userId: string,
    id: string,
  ): Promise<Pick<MemberRow, 'id' | 'side_system_id'> | undefined> {
    return (await shareLinkableMember(trx, { userId, id }))[0];
  },
  listAssignableMembers(
    db: Knex,
    userId: string,
    sideSystemId: string,
  ): Promise<Array<Pick<MemberRow, 'id' | 'name' | 'display_name'>>> {
    return assignableMembers(db, { userId, sideSystemId });
  },

  findSide(db: Knex, userId: string, id: string, lock?: RowLock): Promise<SystemRow | undefined> {
    return withLock(db('side_systems').where({ id, user_id: userId }).whereNull('deleted_at'), lock).first();
  },
  listSides(db: Knex, userId: string): Promise<SystemRow[]> {
    return db('side_systems')
      .where({ user_id: userId })
      .whereNull('deleted_at')
      .orderBy([{ column: 'created_at' }, { column: 'id' }]);
  },
  async insertSide(db: Knex, row: SystemRow): Promise<void> {
    await db('side_systems').insert(row);
  },
  /** Updates a live side system; undefined when it is unknown or deleted (also when deleted concurrently). */
  async updateSide(
    db: Knex,
    userId: string,
    id: string,
    changes: SystemFields & { updated_at: number },
  ): Promise<SystemRow | undefined> {
    const [row] = await db('side_systems')
      .where({ id, user_id: userId })
      .whereNull('deleted_at')
      .update(changes)
      .returning('*');
    return row as SystemRow | undefined;
  },
  async softDeleteSide(db: Knex, userId: string, id: string, now: number): Promise<void> {
    await db('side_systems').where({ id, user_id: userId }).update({ deleted_at: now, updated_at: now });
  },

  findSub(db: Knex, userId: string, id: string, lock?: RowLock): Promise<SubSystemRow | undefined> {
    return withLock(db('sub_systems').where({ id, user_id: userId }).whereNull('deleted_at'), lock).first();
  },
  /** Live sub systems of the side system whose linked member is `memberId`, by name. */
  subsLinkedTo(db: Knex, userId: string, sideSystemId: string, memberId: string): Promise<SubSystemRow[]> {
    return db('sub_systems')
      .where({ user_id: userId, side_system_id: sideSystemId, linked_member_id: memberId })
      .whereNull('deleted_at')
      .orderBy([{ column: 'name' }, { column: 'id' }]);
  },
  listSubs(db: Knex, userId: string): Promise<SubSystemRow[]> {
    return db('sub_systems')
      .where({ user_id: userId })
      .whereNull('deleted_at')
      .orderBy([{ column: 'created_at' }, { column: 'id' }]);
  },
  async countSubsOfSide(db: Knex, userId: string, sideId: string): Promise<number> {
    const row = await db('sub_systems')
      .where({ user_id: userId, side_system_id: sideId })
      .whereNull('deleted_at')
      .count<{ c: number }[]>('* as c')
      .first();
    return Number(row?.c ?? 0);
  },
  async countChildSubs(db: Knex, userId: string, subId: string): Promise<number> {
    const row = await db('sub_systems')
      .where({ user_id: userId, parent_sub_system_id: subId })
      .whereNull('deleted_at')
      .count<{ c: number }[]>('* as c')
      .first();
    return Number(row?.c ?? 0);
  },
  async insertSub(db: Knex, row: SubSystemRow): Promise<void> {
    await db('sub_systems').insert(row);
  },
  async updateSub(
    db: Knex,
    userId: string,
    id: string,
    changes: SystemFields &
      Partial<Pick<SubSystemRow, 'linked_member_id' | 'parent_sub_system_id'>> & { updated_at: number },
  ): Promise<SubSystemRow> {
    const [row] = await db('sub_systems').where({ id, user_id: userId }).update(changes).returning('*');
    return row as SubSystemRow;
  },
  async softDeleteSub(db: Knex, userId: string, id: string, now: number): Promise<void> {
    await db('sub_systems').where({ id, user_id: userId }).update({ deleted_at: now, updated_at: now });
  },

  getContext(db: Knex, userId: string, lock?: RowLock): Promise<ContextRow | undefined> {
    return withLock(db('active_system_context').where({ user_id: userId }), lock).first();
  },
  async lockContext(trx: Knex.Transaction, userId: string): Promise<ContextRow | undefined> {
    return trx('active_system_context').where({ user_id: userId }).forUpdate().first();
  },
  async upsertContext(db: Knex, row: ContextRow): Promise<ContextRow> {
    const [saved] = await db('active_system_context').insert(row).onConflict('user_id').merge().returning('*');
    return saved as ContextRow;
  },

  /**
   * Which of `tables` still hold a row (trashed ones included) in the given side or sub system:
   * one statement, one EXISTS per table, each an index probe (user_id, side_system_id) or
   * (sub_system_id) — see migration 0006.
   */
  async tablesHolding(
    db: Knex,
    tables: readonly string[],
    userId: string,
    column: 'side_system_id' | 'sub_system_id',
    id: string,
  ): Promise<string[]> {
    const probes = tables.map(
      (table) => `exists (select 1 from ${table} where user_id = ? and ${column} = ?) as "${table}"`,
    );
    const result = await db.raw<{ rows: Array<Record<string, boolean>> }>(
      `select ${probes.join(', ')}`,
      tables.flatMap(() => [userId, id]),
    );
    const row = result.rows[0] ?? {};
    return tables.filter((table) => row[table] === true);
  },

  /** Whether `ancestorId` is `subId` or one of its live ancestors: one recursive query up the parent chain. */
  async isSelfOrAncestor(db: Knex, userId: string, subId: string, ancestorId: string): Promise<boolean> {
    const result = await db.raw<{ rows: Array<{ found: boolean }> }>(
      `with recursive up (id, parent_id, depth) as (
         select id, parent_sub_system_id, 0 from sub_systems where user_id = ? and id = ? and deleted_at is null
         union all
         select s.id, s.parent_sub_system_id, up.depth + 1
           from up join sub_systems s on s.user_id = ? and s.id = up.parent_id and s.deleted_at is null
          where up.depth < 1000
       )
       select exists (select 1 from up where id = ?) as found`,
      [userId, subId, userId, ancestorId],
    );
    return result.rows[0]?.found === true;
  },
};

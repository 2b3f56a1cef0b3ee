import type { Knex } from 'knex';
import type { PendingEvent } from '../../core/context.ts';
import type { MemberRow } from '../../core/members.ts';
import { type Sql, sql } from '../../db/sql.ts';
import { EXAMPLE_UUID, statement } from '../../db/statements.ts';
import { appendEvents, EXAMPLE_EVENT, keyedExample, notifiedColumn } from '../../events/log.ts';

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

const LOCKS = { share: sql` for share`, update: sql` for update` } as const;
const lockSql = (lock: RowLock | undefined): Sql => (lock ? LOCKS[lock] : sql.empty);

/** Tables that hold side/sub-system data, checked before a side or sub system may be deleted. */
export const SYSTEM_SCOPED_TABLES = ['members', 'directories', 'entries', 'front_sessions'] as const;
export type SystemScopedTable = (typeof SYSTEM_SCOPED_TABLES)[number];

const EXAMPLE_SYSTEM: SystemRow = {
  id: EXAMPLE_UUID,
  user_id: EXAMPLE_UUID,
  name: '',
  description: null,
  icon: null,
  tag_code: null,
  tag_color: null,
  created_at: 0,
  updated_at: 0,
  deleted_at: null,
};

const LOCK_VARIANTS = { 'not locked': undefined, 'share-locked': 'share', 'locked for update': 'update' } as const;

/** A live side or sub system of the account (`table`), locked or not. */
function findSystem<Row>(name: string, table: 'side_systems' | 'sub_systems') {
  return statement<{ userId: string; id: string; lock?: RowLock }, Row>({
    name,
    area: AREA,
    variants: Object.fromEntries(
      Object.entries(LOCK_VARIANTS).map(([label, lock]) => [label, { userId: EXAMPLE_UUID, id: EXAMPLE_UUID, lock }]),
    ),
    build: ({ userId, id, lock }) =>
      sql`select * from ${sql.id(table)} where id = ${id} and user_id = ${userId} and deleted_at is null${lockSql(lock)}`,
  });
}
const findSide = findSystem<SystemRow>('systems_find_side', 'side_systems');
const findSub = findSystem<SubSystemRow>('systems_find_sub', 'sub_systems');

/** The live side or sub systems of the account (`table`), oldest first. */
function listSystems<Row>(name: string, table: 'side_systems' | 'sub_systems') {
  return statement<{ userId: string }, Row>({
    name,
    area: AREA,
    variants: { 'the account': { userId: EXAMPLE_UUID } },
    build: ({ userId }) =>
      sql`select * from ${sql.id(table)} where user_id = ${userId} and deleted_at is null order by created_at asc, id asc`,
  });
}
const listSides = listSystems<SystemRow>('systems_list_sides', 'side_systems');
const listSubs = listSystems<SubSystemRow>('systems_list_subs', 'sub_systems');

const insertSide = statement<{ row: SystemRow }, never>({
  name: 'systems_insert_side',
  area: AREA,
  variants: { 'a side system': { row: EXAMPLE_SYSTEM } },
  build: ({ row }) =>
    sql`insert into side_systems (id, user_id, name, description, icon, tag_code, tag_color, created_at, updated_at, deleted_at)
      values (${row.id}, ${row.user_id}, ${row.name}, ${row.description}, ${row.icon}, ${row.tag_code}, ${row.tag_color}, ${row.created_at}, ${row.updated_at}, ${row.deleted_at})`,
});

/**
 * A side system created in one statement (docs/data-access.md, "Writes in one statement"): the row
 * and `side_system.created`. No rule of the create depends on other writers (there is no cap on
 * side systems, nor a unique name), so it takes no lock but the event log's.
 */
const createSide = statement<{ row: SystemRow; events: readonly PendingEvent[] }, { notified: unknown }>({
  name: 'systems_create_side',
  area: AREA,
  variants: {
    'a side system': { row: EXAMPLE_SYSTEM, events: [EXAMPLE_EVENT] },
    'a side system, the request keyed (its response stored under the key)': {
      row: EXAMPLE_SYSTEM,
      events: keyedExample([EXAMPLE_EVENT]),
    },
  },
  build: ({ row, events }) => sql`with inserted as (
      insert into side_systems (id, user_id, name, description, icon, tag_code, tag_color, created_at, updated_at, deleted_at)
      values (${row.id}, ${row.user_id}, ${row.name}, ${row.description}, ${row.icon}, ${row.tag_code}, ${row.tag_color}, ${row.created_at}, ${row.updated_at}, ${row.deleted_at})
      returning id
    ),
    ${appendEvents(events, sql`exists (select 1 from inserted)`)}
    select ${notifiedColumn}`,
});

const insertSub = statement<{ row: SubSystemRow }, never>({
  name: 'systems_insert_sub',
  area: AREA,
  variants: {
    'a sub system': {
      row: { ...EXAMPLE_SYSTEM, side_system_id: EXAMPLE_UUID, linked_member_id: null, parent_sub_system_id: null },
    },
  },
  build: ({ row }) =>
    sql`insert into sub_systems (id, user_id, side_system_id, linked_member_id, parent_sub_system_id, name, description, icon, tag_code, tag_color, created_at, updated_at, deleted_at)
      values (${row.id}, ${row.user_id}, ${row.side_system_id}, ${row.linked_member_id}, ${row.parent_sub_system_id}, ${row.name}, ${row.description}, ${row.icon}, ${row.tag_code}, ${row.tag_color}, ${row.created_at}, ${row.updated_at}, ${row.deleted_at})`,
});

type SubChanges = SystemFields &
  Partial<Pick<SubSystemRow, 'linked_member_id' | 'parent_sub_system_id'>> & { updated_at: number };

const CASTS = ['text', 'uuid'] as const;
const FIELD_COLUMNS = ['name', 'description', 'icon', 'tag_code', 'tag_color'] as const;
const SUB_COLUMNS = ['linked_member_id', 'parent_sub_system_id'] as const;

/** `column = case when <given> then <value> else column end`: one text whichever columns a change sets. */
function setIfGiven(changes: SubChanges, column: keyof SubChanges & string, cast: (typeof CASTS)[number]): Sql {
  const given = changes[column] !== undefined;
  const id = sql.id(column);
  return sql`${id} = case when ${given}::boolean then ${given ? changes[column] : null}::${sql.constant(cast, CASTS)} else ${id} end`;
}

/** A side system's fields: one text whichever are given; only a live side system changes. */
const updateSide = statement<{ userId: string; id: string; changes: SystemFields & { updated_at: number } }, SystemRow>(
  {
    name: 'systems_update_side',
    area: AREA,
    variants: { 'any change': { userId: EXAMPLE_UUID, id: EXAMPLE_UUID, changes: { updated_at: 0 } } },
    build: ({ userId, id, changes }) =>
      sql`update side_systems set ${sql.join(
        FIELD_COLUMNS.map((c) => setIfGiven(changes, c, 'text')),
        ', ',
      )}, updated_at = ${changes.updated_at}
      where id = ${id} and user_id = ${userId} and deleted_at is null returning *`,
  },
);

const updateSub = statement<{ userId: string; id: string; changes: SubChanges }, SubSystemRow>({
  name: 'systems_update_sub',
  area: AREA,
  variants: { 'any change': { userId: EXAMPLE_UUID, id: EXAMPLE_UUID, changes: { updated_at: 0 } } },
  build: ({ userId, id, changes }) =>
    sql`update sub_systems set ${sql.join(
      [
        ...FIELD_COLUMNS.map((c) => setIfGiven(changes, c, 'text')),
        ...SUB_COLUMNS.map((c) => setIfGiven(changes, c, 'uuid')),
      ],
      ', ',
    )}, updated_at = ${changes.updated_at}
      where id = ${id} and user_id = ${userId} returning *`,
});

/** Marks a side or sub system (`table`) deleted. */
function softDelete(name: string, table: 'side_systems' | 'sub_systems') {
  return statement<{ userId: string; id: string; now: number }, never>({
    name,
    area: AREA,
    variants: { 'the system': { userId: EXAMPLE_UUID, id: EXAMPLE_UUID, now: 0 } },
    build: ({ userId, id, now }) =>
      sql`update ${sql.id(table)} set deleted_at = ${now}, updated_at = ${now} where id = ${id} and user_id = ${userId}`,
  });
}
const softDeleteSide = softDelete('systems_delete_side', 'side_systems');
const softDeleteSub = softDelete('systems_delete_sub', 'sub_systems');

const subsLinkedTo = statement<{ userId: string; sideSystemId: string; memberId: string }, SubSystemRow>({
  name: 'systems_subs_linked_to',
  area: AREA,
  variants: { 'the member': { userId: EXAMPLE_UUID, sideSystemId: EXAMPLE_UUID, memberId: EXAMPLE_UUID } },
  build: ({ userId, sideSystemId, memberId }) =>
    sql`select * from sub_systems
      where user_id = ${userId} and side_system_id = ${sideSystemId} and linked_member_id = ${memberId} and deleted_at is null
      order by name asc, id asc`,
});

/** The live sub systems of a side system, or the live children of a sub system. */
const countSubs = statement<
  { userId: string; column: 'side_system_id' | 'parent_sub_system_id'; id: string },
  { c: number }
>({
  name: 'systems_count_subs',
  area: AREA,
  variants: {
    'of a side system': { userId: EXAMPLE_UUID, column: 'side_system_id', id: EXAMPLE_UUID },
    'children of a sub system': { userId: EXAMPLE_UUID, column: 'parent_sub_system_id', id: EXAMPLE_UUID },
  },
  build: ({ userId, column, id }) =>
    sql`select count(*) as c from sub_systems where user_id = ${userId} and ${sql.id(column)} = ${id} and deleted_at is null`,
});

const getContext = statement<{ userId: string; lock?: RowLock }, ContextRow>({
  name: 'systems_context',
  area: AREA,
  variants: Object.fromEntries(
    Object.entries(LOCK_VARIANTS).map(([label, lock]) => [label, { userId: EXAMPLE_UUID, lock }]),
  ),
  build: ({ userId, lock }) => sql`select * from active_system_context where user_id = ${userId}${lockSql(lock)}`,
});

const upsertContext = statement<{ row: ContextRow }, ContextRow>({
  name: 'systems_upsert_context',
  area: AREA,
  variants: {
    'the context': {
      row: {
        user_id: EXAMPLE_UUID,
        side_system_id: EXAMPLE_UUID,
        sub_system_id: null,
        is_unified_view: false,
        updated_at: 0,
      },
    },
  },
  build: ({ row }) =>
    sql`insert into active_system_context (user_id, side_system_id, sub_system_id, is_unified_view, updated_at)
      values (${row.user_id}, ${row.side_system_id}, ${row.sub_system_id}, ${row.is_unified_view}, ${row.updated_at})
      on conflict (user_id) do update set side_system_id = excluded.side_system_id, sub_system_id = excluded.sub_system_id,
        is_unified_view = excluded.is_unified_view, updated_at = excluded.updated_at
      returning *`,
});

/**
 * Which of the system-scoped tables still hold a row (trashed ones included) in the given side or
 * sub system: one statement, one EXISTS per table, each an index probe (user_id, side_system_id) or
 * (sub_system_id) — see migration 0006.
 */
const tablesHolding = statement<
  { userId: string; column: 'side_system_id' | 'sub_system_id'; id: string },
  Record<SystemScopedTable, boolean>
>({
  name: 'systems_tables_holding',
  area: AREA,
  variants: {
    'a side system': { userId: EXAMPLE_UUID, column: 'side_system_id', id: EXAMPLE_UUID },
    'a sub system': { userId: EXAMPLE_UUID, column: 'sub_system_id', id: EXAMPLE_UUID },
  },
  build: ({ userId, column, id }) =>
    sql`select ${sql.join(
      SYSTEM_SCOPED_TABLES.map(
        (table) =>
          sql`exists (select 1 from ${sql.id(table)} where user_id = ${userId} and ${sql.id(column)} = ${id}) as ${sql.id(table)}`,
      ),
      ', ',
    )}`,
});

/** Whether `ancestorId` is `subId` or one of its live ancestors: one recursive query up the parent chain. */
const selfOrAncestor = statement<{ userId: string; subId: string; ancestorId: string }, { found: boolean }>({
  name: 'systems_self_or_ancestor',
  area: AREA,
  variants: { 'the chain': { userId: EXAMPLE_UUID, subId: EXAMPLE_UUID, ancestorId: EXAMPLE_UUID } },
  build: ({ userId, subId, ancestorId }) =>
    sql`with recursive up (id, parent_id, depth) as (
         select id, parent_sub_system_id, 0 from sub_systems where user_id = ${userId} and id = ${subId} and deleted_at is null
         union all
         select s.id, s.parent_sub_system_id, up.depth + 1
           from up join sub_systems s on s.user_id = ${userId} and s.id = up.parent_id and s.deleted_at is null
          where up.depth < 1000
       )
       select exists (select 1 from up where id = ${ancestorId}) as found`,
});

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

  async findSide(db: Knex, userId: string, id: string, lock?: RowLock): Promise<SystemRow | undefined> {
    return (await findSide(db, { userId, id, lock }))[0];
  },
  listSides(db: Knex, userId: string): Promise<SystemRow[]> {
    return listSides(db, { userId });
  },
  async insertSide(db: Knex, row: SystemRow): Promise<void> {
    await insertSide(db, { row });
  },
  /** Creates a side system with its events in one statement (see createSide). */
  async createSide(db: Knex, row: SystemRow, events: readonly PendingEvent[]): Promise<{ notified: unknown }> {
    return (await createSide(db, { row, events }))[0]!;
  },
  /** Updates a live side system; undefined when it is unknown or deleted (also when deleted concurrently). */
  async updateSide(
    db: Knex,
    userId: string,
    id: string,
    changes: SystemFields & { updated_at: number },
  ): Promise<SystemRow | undefined> {
    return (await updateSide(db, { userId, id, changes }))[0];
  },
  async softDeleteSide(db: Knex, userId: string, id: string, now: number): Promise<void> {
    await softDeleteSide(db, { userId, id, now });
  },

  async findSub(db: Knex, userId: string, id: string, lock?: RowLock): Promise<SubSystemRow | undefined> {
    return (await findSub(db, { userId, id, lock }))[0];
  },
  /** Live sub systems of the side system whose linked member is `memberId`, by name. */
  subsLinkedTo(db: Knex, userId: string, sideSystemId: string, memberId: string): Promise<SubSystemRow[]> {
    return subsLinkedTo(db, { userId, sideSystemId, memberId });
  },
  listSubs(db: Knex, userId: string): Promise<SubSystemRow[]> {
    return listSubs(db, { userId });
  },
  async countSubsOfSide(db: Knex, userId: string, sideId: string): Promise<number> {
    return Number((await countSubs(db, { userId, column: 'side_system_id', id: sideId }))[0]?.c ?? 0);
  },
  async countChildSubs(db: Knex, userId: string, subId: string): Promise<number> {
    return Number((await countSubs(db, { userId, column: 'parent_sub_system_id', id: subId }))[0]?.c ?? 0);
  },
  async insertSub(db: Knex, row: SubSystemRow): Promise<void> {
    await insertSub(db, { row });
  },
  async updateSub(db: Knex, userId: string, id: string, changes: SubChanges): Promise<SubSystemRow> {
    const [row] = await updateSub(db, { userId, id, changes });
    return row!;
  },
  async softDeleteSub(db: Knex, userId: string, id: string, now: number): Promise<void> {
    await softDeleteSub(db, { userId, id, now });
  },

  async getContext(db: Knex, userId: string, lock?: RowLock): Promise<ContextRow | undefined> {
    return (await getContext(db, { userId, lock }))[0];
  },
  async lockContext(trx: Knex.Transaction, userId: string): Promise<ContextRow | undefined> {
    return (await getContext(trx, { userId, lock: 'update' }))[0];
  },
  async upsertContext(db: Knex, row: ContextRow): Promise<ContextRow> {
    const [saved] = await upsertContext(db, { row });
    return saved!;
  },

  /** Which of SYSTEM_SCOPED_TABLES still hold a row (trashed ones included) in the side or sub system (tablesHolding). */
  async tablesHolding(
    db: Knex,
    userId: string,
    column: 'side_system_id' | 'sub_system_id',
    id: string,
  ): Promise<SystemScopedTable[]> {
    const row = (await tablesHolding(db, { userId, column, id }))[0];
    return SYSTEM_SCOPED_TABLES.filter((table) => row?.[table] === true);
  },

  /** Whether `ancestorId` is `subId` or one of its live ancestors: one recursive query up the parent chain. */
  async isSelfOrAncestor(db: Knex, userId: string, subId: string, ancestorId: string): Promise<boolean> {
    return (await selfOrAncestor(db, { userId, subId, ancestorId }))[0]?.found === true;
  },
};

/** The SQL of member status definitions and their assignments (generated/sql/memberStatuses.sql). */
import type { Knex } from 'knex';
import type { PendingEvent } from '../../core/context.ts';
import { sql } from '../../db/sql.ts';
import { EXAMPLE_UUID, statement } from '../../db/statements.ts';
import { appendEvents, EXAMPLE_EVENT, keyedExample, notifiedColumn } from '../../events/log.ts';

export interface StatusRow {
  id: string;
  user_id: string;
  name: string;
  color: string;
  icon: string | null;
  created_at: number;
  updated_at: number;
}

/** What an update may change (updated_at always). */
export type StatusChanges = Partial<Pick<StatusRow, 'name' | 'color' | 'icon'>> & { updated_at: number };

export interface AssignmentRow {
  id: string;
  name: string;
  color: string;
  icon: string | null;
  assigned_at: number;
}

const AREA = 'memberStatuses';

const listStatuses = statement<{ userId: string }, StatusRow>({
  name: 'member_statuses_list',
  area: AREA,
  variants: { 'an account': { userId: EXAMPLE_UUID } },
  build: ({ userId }) => sql`select * from member_status_definitions where user_id = ${userId} order by created_at, id`,
});

const findStatus = statement<{ userId: string; id: string }, StatusRow>({
  name: 'member_statuses_find',
  area: AREA,
  variants: { 'a status': { userId: EXAMPLE_UUID, id: EXAMPLE_UUID } },
  build: ({ userId, id }) =>
    sql`select * from member_status_definitions where id = ${id} and user_id = ${userId} limit 1`,
});

const EXAMPLE_STATUS: StatusRow = {
  id: EXAMPLE_UUID,
  user_id: EXAMPLE_UUID,
  name: 'x',
  color: 'x',
  icon: null,
  created_at: 0,
  updated_at: 0,
};

/**
 * A status created in one statement (docs/data-access.md, "Writes in one statement"): the row and
 * `member_status.created`, appended once the row is written.
 */
const createStatus = statement<{ row: StatusRow; events: readonly PendingEvent[] }, { notified: unknown }>({
  name: 'member_statuses_create',
  area: AREA,
  variants: {
    'a status': { row: EXAMPLE_STATUS, events: [EXAMPLE_EVENT] },
    'a status, the request keyed (its response stored under the key)': {
      row: EXAMPLE_STATUS,
      events: keyedExample([EXAMPLE_EVENT]),
    },
  },
  build: ({ row, events }) => sql`with inserted as (
      insert into member_status_definitions (id, user_id, name, color, icon, created_at, updated_at)
      values (${row.id}, ${row.user_id}, ${row.name}, ${row.color}, ${row.icon}, ${row.created_at}, ${row.updated_at})
      returning id
    ),
    ${appendEvents(events, sql`exists (select 1 from inserted)`)}
    select ${notifiedColumn}`,
});

/** One text whatever the changed columns: each column is kept or set by a bound flag. */
const updateStatus = statement<{ userId: string; id: string; changes: StatusChanges }, StatusRow>({
  name: 'member_statuses_update',
  area: AREA,
  variants: { 'any set of changed columns': { userId: EXAMPLE_UUID, id: EXAMPLE_UUID, changes: { updated_at: 0 } } },
  build: ({ userId, id, changes }) => {
    const has = (column: keyof StatusChanges) => sql`${changes[column] !== undefined}::boolean`;
    return sql`update member_status_definitions set
        name = case when ${has('name')} then ${changes.name ?? null}::text else name end,
        color = case when ${has('color')} then ${changes.color ?? null}::text else color end,
        icon = case when ${has('icon')} then ${changes.icon ?? null}::text else icon end,
        updated_at = ${changes.updated_at}
      where id = ${id} and user_id = ${userId}
      returning *`;
  },
});

const deleteStatus = statement<{ userId: string; id: string }, never>({
  name: 'member_statuses_delete',
  area: AREA,
  variants: { 'a status': { userId: EXAMPLE_UUID, id: EXAMPLE_UUID } },
  build: ({ userId, id }) => sql`delete from member_status_definitions where id = ${id} and user_id = ${userId}`,
});

const listAssignments = statement<{ userId: string; memberId: string }, AssignmentRow>({
  name: 'member_statuses_assignments',
  area: AREA,
  variants: { 'a member': { userId: EXAMPLE_UUID, memberId: EXAMPLE_UUID } },
  build: ({ userId, memberId }) => sql`select d.id, d.name, d.color, d.icon, a.assigned_at
    from member_status_assignments a
    join member_status_definitions d on d.id = a.status_id
    where a.user_id = ${userId} and a.member_id = ${memberId}
    order by a.assigned_at, d.id`,
});

const assign = statement<{ userId: string; memberId: string; statusId: string; now: number }, never>({
  name: 'member_statuses_assign',
  area: AREA,
  variants: {
    'a member and a status': { userId: EXAMPLE_UUID, memberId: EXAMPLE_UUID, statusId: EXAMPLE_UUID, now: 0 },
  },
  build: ({
    userId,
    memberId,
    statusId,
    now,
  }) => sql`insert into member_status_assignments (member_id, status_id, user_id, assigned_at)
    values (${memberId}, ${statusId}, ${userId}, ${now})
    on conflict (member_id, status_id) do nothing`,
});

const clear = statement<{ userId: string; memberId: string; statusId: string }, never>({
  name: 'member_statuses_clear',
  area: AREA,
  variants: { 'a member and a status': { userId: EXAMPLE_UUID, memberId: EXAMPLE_UUID, statusId: EXAMPLE_UUID } },
  build: ({ userId, memberId, statusId }) => sql`delete from member_status_assignments
    where member_id = ${memberId} and status_id = ${statusId} and user_id = ${userId}`,
});

export const memberStatusesRepo = {
  list: (db: Knex, userId: string): Promise<StatusRow[]> => listStatuses(db, { userId }),
  async find(db: Knex, userId: string, id: string): Promise<StatusRow | undefined> {
    return (await findStatus(db, { userId, id }))[0];
  },
  /** Inserts the status and appends its events, in one statement (`notified`: see notifiedColumn). */
  async create(db: Knex, row: StatusRow, events: readonly PendingEvent[]): Promise<{ notified: unknown }> {
    return (await createStatus(db, { row, events }))[0]!;
  },
  async update(db: Knex, userId: string, id: string, changes: StatusChanges): Promise<StatusRow | undefined> {
    return (await updateStatus(db, { userId, id, changes }))[0];
  },
  async delete(db: Knex, userId: string, id: string): Promise<void> {
    await deleteStatus(db, { userId, id });
  },
  assignments: (db: Knex, userId: string, memberId: string): Promise<AssignmentRow[]> =>
    listAssignments(db, { userId, memberId }),
  async assign(db: Knex, userId: string, memberId: string, statusId: string, now: number): Promise<void> {
    await assign(db, { userId, memberId, statusId, now });
  },
  async clear(db: Knex, userId: string, memberId: string, statusId: string): Promise<void> {
    await clear(db, { userId, memberId, statusId });
  },
};

/** The SQL of custom field definitions and their per-member values (generated/sql/customFields.sql). */
import type { Knex } from 'knex';
import type { PendingEvent } from '../../core/context.ts';
import { sql } from '../../db/sql.ts';
import { EXAMPLE_UUID, statement } from '../../db/statements.ts';
import { appendEvents, EXAMPLE_EVENT, notifiedColumn } from '../../events/log.ts';

export type FieldType = 'text' | 'markdown' | 'date' | 'select' | 'multiselect';
export type FieldValue = string | string[];

export interface FieldRow {
  id: string;
  user_id: string;
  name: string;
  type: FieldType;
  description: string | null;
  options: string[] | null;
  sort_order: number;
  created_at: number;
  updated_at: number;
  deleted_at: number | null;
}

/** What an update may change (updated_at always). */
export type FieldChanges = Partial<Pick<FieldRow, 'name' | 'description' | 'options' | 'sort_order' | 'deleted_at'>> & {
  updated_at: number;
};

const AREA = 'customFields';

const listLive = statement<{ userId: string }, FieldRow>({
  name: 'custom_fields_live',
  area: AREA,
  variants: { 'an account': { userId: EXAMPLE_UUID } },
  build: ({ userId }) => sql`select * from custom_field_definitions
    where user_id = ${userId} and deleted_at is null
    order by sort_order, created_at, id`,
});

/** `lock`: the row locked for an update, held to the end of the transaction. */
const findAny = statement<{ userId: string; id: string; lock: boolean }, FieldRow>({
  name: 'custom_fields_find',
  area: AREA,
  variants: {
    'a field, live or trashed': { userId: EXAMPLE_UUID, id: EXAMPLE_UUID, lock: false },
    'a field, locked for an update': { userId: EXAMPLE_UUID, id: EXAMPLE_UUID, lock: true },
  },
  build: ({ userId, id, lock }) =>
    sql`select * from custom_field_definitions where id = ${id} and user_id = ${userId} limit 1${lock ? sql` for update` : sql.empty}`,
});

const maxSortOrder = statement<{ userId: string }, { m: number | null }>({
  name: 'custom_fields_max_sort_order',
  area: AREA,
  variants: { 'an account': { userId: EXAMPLE_UUID } },
  build: ({ userId }) => sql`select max(sort_order) as m from custom_field_definitions where user_id = ${userId}`,
});

const insertField = statement<{ row: FieldRow }, never>({
  name: 'custom_fields_insert',
  area: AREA,
  variants: {
    'a field': {
      row: {
        id: EXAMPLE_UUID,
        user_id: EXAMPLE_UUID,
        name: 'x',
        type: 'text',
        description: null,
        options: null,
        sort_order: 0,
        created_at: 0,
        updated_at: 0,
        deleted_at: null,
      },
    },
  },
  build: ({ row }) => sql`insert into custom_field_definitions
      (id, user_id, name, type, description, options, sort_order, created_at, updated_at, deleted_at)
    values (${row.id}, ${row.user_id}, ${row.name}, ${row.type}, ${row.description},
      ${row.options ? JSON.stringify(row.options) : null}::jsonb, ${row.sort_order}, ${row.created_at}, ${row.updated_at}, ${row.deleted_at})`,
});

/** One text whatever the changed columns: each column is kept or set by a bound flag. */
const updateField = statement<{ userId: string; id: string; changes: FieldChanges }, FieldRow>({
  name: 'custom_fields_update',
  area: AREA,
  variants: { 'any set of changed columns': { userId: EXAMPLE_UUID, id: EXAMPLE_UUID, changes: { updated_at: 0 } } },
  build: ({ userId, id, changes }) => {
    const has = (column: keyof FieldChanges) => sql`${column in changes && changes[column] !== undefined}::boolean`;
    return sql`update custom_field_definitions set
        name = case when ${has('name')} then ${changes.name ?? null}::text else name end,
        description = case when ${has('description')} then ${changes.description ?? null}::text else description end,
        options = case when ${has('options')} then ${changes.options ? JSON.stringify(changes.options) : null}::jsonb else options end,
        sort_order = case when ${has('sort_order')} then ${changes.sort_order ?? null}::int else sort_order end,
        deleted_at = case when ${has('deleted_at')} then ${changes.deleted_at ?? null}::bigint else deleted_at end,
        updated_at = ${changes.updated_at}
      where id = ${id} and user_id = ${userId}
      returning *`;
  },
});

const valuesOfMember = statement<
  { userId: string; memberId: string },
  { field_id: string; value: FieldValue; updated_at: number }
>({
  name: 'custom_fields_values_of_member',
  area: AREA,
  variants: { 'a member': { userId: EXAMPLE_UUID, memberId: EXAMPLE_UUID } },
  build: ({ userId, memberId }) => sql`select field_id, value, updated_at from custom_field_values
    where user_id = ${userId} and member_id = ${memberId}`,
});

const valuesOfField = statement<{ userId: string; fieldId: string }, { member_id: string; value: FieldValue }>({
  name: 'custom_fields_values_of_field',
  area: AREA,
  variants: { 'a field': { userId: EXAMPLE_UUID, fieldId: EXAMPLE_UUID } },
  build: ({ userId, fieldId }) => sql`select member_id, value from custom_field_values
    where user_id = ${userId} and field_id = ${fieldId}`,
});

/** A member's value to write: `value` null clears it; otherwise `fits` and `items` say when the field takes it. */
export interface ValueWrite {
  userId: string;
  memberId: string;
  fieldId: string;
  value: FieldValue | null;
  /** The field types whose rules the value passes, option membership aside. */
  fits: readonly FieldType[];
  /** The options a select or multiselect field must have for the value: its items. */
  items: readonly string[];
  now: number;
}

/** What the value write decided: `ok` when it wrote; otherwise why not (the field as it is, for the message). */
export interface ValueVerdict {
  ok: boolean;
  /** The member is the account's and live. */
  member: boolean;
  /** The field, when it is the account's and live. */
  field: Pick<FieldRow, 'name' | 'type' | 'options'> | null;
}

/**
 * A member's value set or cleared in one statement (docs/data-access.md, "Writes in one
 * statement"): the member and the field share-locked, live and the account's (a concurrent trash
 * waits, or is waited for and seen), the value checked against the field as locked (its type among
 * `fits`, and for a select or multiselect field every item among its options), then the write and
 * `custom_field_value.changed`, only when all of that holds.
 */
const writeValue = statement<
  ValueWrite & { events: readonly PendingEvent[] },
  { ok: boolean; member: boolean; name: string | null; type: FieldType | null; options: string[] | null }
>({
  name: 'custom_fields_value_write',
  area: AREA,
  variants: {
    'set a value': {
      userId: EXAMPLE_UUID,
      memberId: EXAMPLE_UUID,
      fieldId: EXAMPLE_UUID,
      value: 'x',
      fits: ['text'],
      items: ['x'],
      now: 0,
      events: [EXAMPLE_EVENT],
    },
    'clear a value': {
      userId: EXAMPLE_UUID,
      memberId: EXAMPLE_UUID,
      fieldId: EXAMPLE_UUID,
      value: null,
      fits: [],
      items: [],
      now: 0,
      events: [EXAMPLE_EVENT],
    },
  },
  build: ({ userId, memberId, fieldId, value, fits, items, now, events }) => {
    const takes =
      value === null
        ? sql`true`
        : sql`f.type = any (${[...fits]}::text[])
            and (f.type not in ('select', 'multiselect') or coalesce(f.options, '[]'::jsonb) @> ${JSON.stringify(items)}::jsonb)`;
    const write =
      value === null
        ? sql`delete from custom_field_values
            where user_id = ${userId} and member_id = ${memberId} and field_id = ${fieldId} and (select ok from verdict)`
        : sql`insert into custom_field_values (user_id, member_id, field_id, value, updated_at)
            select ${userId}::uuid, ${memberId}::uuid, ${fieldId}::uuid, ${JSON.stringify(value)}::jsonb, ${now}::bigint
            from verdict where ok
            on conflict (member_id, field_id) do update set value = excluded.value, updated_at = excluded.updated_at`;
    return sql`with member as (
        select m.id from members m
        where m.id = ${memberId} and m.user_id = ${userId} and m.deleted_at is null
        for share
      ),
      field as (
        select f.name, f.type, f.options from custom_field_definitions f
        where f.id = ${fieldId} and f.user_id = ${userId} and f.deleted_at is null
        for share
      ),
      verdict as (
        select exists (select 1 from member) and exists (select 1 from field f where ${takes}) as ok
      ),
      written as (${write}),
      ${appendEvents(events, sql`(select ok from verdict)`)}
      select v.ok, exists (select 1 from member) as member, f.name, f.type, f.options, ${notifiedColumn}
      from verdict v left join field f on true`;
  },
});

export const customFieldsRepo = {
  listLive(db: Knex, userId: string): Promise<FieldRow[]> {
    return listLive(db, { userId });
  },
  async findAny(db: Knex, userId: string, id: string, lock = false): Promise<FieldRow | undefined> {
    return (await findAny(db, { userId, id, lock }))[0];
  },
  async nextSortOrder(db: Knex, userId: string): Promise<number> {
    const m = (await maxSortOrder(db, { userId }))[0]?.m;
    return m === null || m === undefined ? 0 : Number(m) + 1;
  },
  async insert(db: Knex, row: FieldRow): Promise<void> {
    await insertField(db, { row });
  },
  async update(db: Knex, userId: string, id: string, changes: FieldChanges): Promise<FieldRow> {
    const [row] = await updateField(db, { userId, id, changes });
    return row!;
  },
  valuesOfMember(
    db: Knex,
    userId: string,
    memberId: string,
  ): Promise<Array<{ field_id: string; value: FieldValue; updated_at: number }>> {
    return valuesOfMember(db, { userId, memberId });
  },
  valuesOfField(db: Knex, userId: string, fieldId: string): Promise<Array<{ member_id: string; value: FieldValue }>> {
    return valuesOfField(db, { userId, fieldId });
  },
  /** Sets or clears a member's value and appends its events in one statement, or writes nothing (see writeValue). */
  async writeValue(db: Knex, write: ValueWrite, events: readonly PendingEvent[]): Promise<ValueVerdict> {
    const { ok, member, name, type, options } = (await writeValue(db, { ...write, events }))[0]!;
    return { ok, member, field: type === null ? null : { name: name!, type, options } };
  },
};

/** The SQL of custom field definitions and their per-member values (generated/sql/customFields.sql). */
import type { Knex } from 'knex';
import { sql } from '../../db/sql.ts';
import { EXAMPLE_UUID, statement } from '../../db/statements.ts';

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

const findAny = statement<{ userId: string; id: string }, FieldRow>({
  name: 'custom_fields_find',
  area: AREA,
  variants: { 'a field, live or trashed': { userId: EXAMPLE_UUID, id: EXAMPLE_UUID } },
  build: ({ userId, id }) =>
    sql`select * from custom_field_definitions where id = ${id} and user_id = ${userId} limit 1`,
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

const setValue = statement<
  { userId: string; memberId: string; fieldId: string; value: FieldValue; now: number },
  never
>({
  name: 'custom_fields_value_set',
  area: AREA,
  variants: { 'a value': { userId: EXAMPLE_UUID, memberId: EXAMPLE_UUID, fieldId: EXAMPLE_UUID, value: 'x', now: 0 } },
  build: ({
    userId,
    memberId,
    fieldId,
    value,
    now,
  }) => sql`insert into custom_field_values (user_id, member_id, field_id, value, updated_at)
    values (${userId}, ${memberId}, ${fieldId}, ${JSON.stringify(value)}::jsonb, ${now})
    on conflict (member_id, field_id) do update set value = excluded.value, updated_at = excluded.updated_at`,
});

const clearValue = statement<{ userId: string; memberId: string; fieldId: string }, never>({
  name: 'custom_fields_value_clear',
  area: AREA,
  variants: { 'a value': { userId: EXAMPLE_UUID, memberId: EXAMPLE_UUID, fieldId: EXAMPLE_UUID } },
  build: ({ userId, memberId, fieldId }) => sql`delete from custom_field_values
    where user_id = ${userId} and member_id = ${memberId} and field_id = ${fieldId}`,
});

export const customFieldsRepo = {
  listLive(db: Knex, userId: string): Promise<FieldRow[]> {
    return listLive(db, { userId });
  },
  async findAny(db: Knex, userId: string, id: string): Promise<FieldRow | undefined> {
    return (await findAny(db, { userId, id }))[0];
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
  async setValue(
    db: Knex,
    userId: string,
    memberId: string,
    fieldId: string,
    value: FieldValue,
    now: number,
  ): Promise<void> {
    await setValue(db, { userId, memberId, fieldId, value, now });
  },
  async clearValue(db: Knex, userId: string, memberId: string, fieldId: string): Promise<void> {
    await clearValue(db, { userId, memberId, fieldId });
  },
};

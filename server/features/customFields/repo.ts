import type { Knex } from 'knex';

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

export const customFieldsRepo = {
  listLive(db: Knex, userId: string): Promise<FieldRow[]> {
    return db('custom_field_definitions')
      .where({ user_id: userId })
      .whereNull('deleted_at')
      .orderBy([{ column: 'sort_order' }, { column: 'created_at' }, { column: 'id' }]);
  },
  findAny(db: Knex, userId: string, id: string): Promise<FieldRow | undefined> {
    return db('custom_field_definitions').where({ id, user_id: userId }).first();
  },
  async nextSortOrder(db: Knex, userId: string): Promise<number> {
    const row = await db('custom_field_definitions')
      .where({ user_id: userId })
      .max<{ m: number | null }[]>('sort_order as m')
      .first();
    return row?.m === null || row?.m === undefined ? 0 : Number(row.m) + 1;
  },
  async insert(db: Knex, row: FieldRow): Promise<void> {
    await db('custom_field_definitions').insert({ ...row, options: row.options ? JSON.stringify(row.options) : null });
  },
  async update(db: Knex, userId: string, id: string, changes: Partial<FieldRow>): Promise<FieldRow> {
    const out: Record<string, unknown> = { ...changes };
    if (changes.options) out.options = JSON.stringify(changes.options);
    const [row] = await db('custom_field_definitions').where({ id, user_id: userId }).update(out).returning('*');
    return row as FieldRow;
  },
  valuesOfMember(
    db: Knex,
    userId: string,
    memberId: string,
  ): Promise<Array<{ field_id: string; value: FieldValue; updated_at: number }>> {
    return db('custom_field_values')
      .where({ user_id: userId, member_id: memberId })
      .select('field_id', 'value', 'updated_at');
  },
  valuesOfField(db: Knex, userId: string, fieldId: string): Promise<Array<{ member_id: string; value: FieldValue }>> {
    return db('custom_field_values').where({ user_id: userId, field_id: fieldId }).select('member_id', 'value');
  },
  async setValue(
    db: Knex,
    userId: string,
    memberId: string,
    fieldId: string,
    value: FieldValue,
    now: number,
  ): Promise<void> {
    await db('custom_field_values')
      .insert({
        user_id: userId,
        member_id: memberId,
        field_id: fieldId,
        value: JSON.stringify(value),
        updated_at: now,
      })
      .onConflict(['member_id', 'field_id'])
      .merge(['value', 'updated_at']);
  },
  async clearValue(db: Knex, userId: string, memberId: string, fieldId: string): Promise<void> {
    await db('custom_field_values').where({ user_id: userId, member_id: memberId, field_id: fieldId }).delete();
  },
};

/** Account-wide custom field definitions and their typed per-member values. */
import { randomUUID } from 'node:crypto';
import type { Knex } from 'knex';
import type { components } from '../../../generated/api.d.ts';
import { inTransaction, oneStatement, ownerOf, type PresetId, type ServiceContext } from '../../core/context.ts';
import { badRequest, notFound } from '../../core/errors.ts';
import { findLiveMember } from '../members/index.ts';
import { applyDefaults } from '../privacyBuckets/index.ts';
import { customFieldsRepo, type FieldChanges, type FieldRow, type FieldType, type FieldValue } from './repo.ts';

type Schemas = components['schemas'];

const MAX_LENGTH: Partial<Record<FieldType, number>> = { text: 1000, markdown: 20000 };
const WITH_OPTIONS: FieldType[] = ['select', 'multiselect'];

function toDefinition(row: FieldRow): Schemas['CustomFieldDefinition'] {
  return {
    _id: row.id,
    name: row.name,
    type: row.type,
    description: row.description,
    options: row.options,
    sortOrder: row.sort_order,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
  };
}

function isCalendarDate(value: string): boolean {
  const m = /^(\d{4})-(\d{2})-(\d{2})$/.exec(value);
  if (!m) return false;
  const d = new Date(Date.UTC(Number(m[1]), Number(m[2]) - 1, Number(m[3])));
  return d.getUTCFullYear() === Number(m[1]) && d.getUTCMonth() === Number(m[2]) - 1 && d.getUTCDate() === Number(m[3]);
}

/** Throws 400 unless the value has the shape and content its field type needs. */
export function validateValue(field: Pick<FieldRow, 'type' | 'options'>, value: FieldValue): FieldValue {
  const options = field.options ?? [];
  switch (field.type) {
    case 'text':
    case 'markdown':
      if (typeof value !== 'string') throw badRequest(`value must be a string for a ${field.type} field`);
      if (value.length > MAX_LENGTH[field.type]!)
        throw badRequest(`value must be at most ${MAX_LENGTH[field.type]} characters for a ${field.type} field`);
      return value;
    case 'date':
      if (typeof value !== 'string' || !isCalendarDate(value))
        throw badRequest('value must be a calendar date YYYY-MM-DD for a date field');
      return value;
    case 'select':
      if (typeof value !== 'string' || !options.includes(value))
        throw badRequest(`value must be one of: ${options.join(', ')}`);
      return value;
    case 'multiselect': {
      if (!Array.isArray(value)) throw badRequest('value must be an array of options for a multiselect field');
      const unknown = value.filter((v) => !options.includes(v));
      if (unknown.length) throw badRequest(`value contains unknown options: ${unknown.join(', ')}`);
      if (new Set(value).size !== value.length) throw badRequest('value must not repeat an option');
      return value;
    }
  }
}

function checkOptions(type: FieldType, options: string[] | undefined): string[] | null {
  if (WITH_OPTIONS.includes(type)) {
    if (!options || options.length === 0) throw badRequest(`options is required for a ${type} field`);
    return options.map((o) => o.trim());
  }
  if (options !== undefined) throw badRequest(`options only apply to select and multiselect fields`);
  return null;
}

export async function listFields(ctx: ServiceContext): Promise<Schemas['CustomFieldDefinition'][]> {
  const { db } = ctx;
  const userId = ownerOf(ctx);
  return (await customFieldsRepo.listLive(db, userId)).map(toDefinition);
}

export async function createField(
  ctx: ServiceContext,
  input: Schemas['CreateCustomFieldRequest'] & PresetId,
): Promise<{ id: string }> {
  const { now } = ctx;
  const userId = ownerOf(ctx);
  const options = checkOptions(input.type, input.options);
  return inTransaction(ctx, async (tx) => {
    const trx = tx.db;
    const row: FieldRow = {
      id: input.id ?? randomUUID(),
      user_id: userId,
      name: input.name.trim(),
      type: input.type,
      description: input.description ?? null,
      options,
      sort_order: await customFieldsRepo.nextSortOrder(trx, userId),
      created_at: now,
      updated_at: now,
      deleted_at: null,
    };
    await customFieldsRepo.insert(trx, row);
    await applyDefaults(trx, userId, 'new_custom_field', [row.id], now);
    await tx.events.emit(tx, { type: 'custom_field.created', area: 'customFields', data: { id: row.id } });
    return { id: row.id };
  });
}

async function liveField(db: Knex, userId: string, id: string, lock = false): Promise<FieldRow> {
  const row = await customFieldsRepo.findAny(db, userId, id, lock);
  if (!row || row.deleted_at !== null) throw notFound('Custom field not found');
  return row;
}

export async function updateField(
  ctx: ServiceContext,
  id: string,
  input: Schemas['UpdateCustomFieldRequest'],
): Promise<Schemas['CustomFieldDefinition']> {
  const { now } = ctx;
  const userId = ownerOf(ctx);
  return inTransaction(ctx, async (tx) => {
    const trx = tx.db;
    // Locked first: a value write takes the row `for share` and checks its options against it, so
    // once this holds the row, no value naming an option being removed can commit before the update.
    const row = await liveField(trx, userId, id, true);
    const changes: FieldChanges = { updated_at: now };
    if (input.name !== undefined) changes.name = input.name.trim();
    if (input.description !== undefined) changes.description = input.description;
    if (input.sortOrder !== undefined) changes.sort_order = input.sortOrder;
    if (input.options !== undefined) {
      const options = checkOptions(row.type, input.options)!;
      const removed = (row.options ?? []).filter((o) => !options.includes(o));
      if (removed.length) {
        const values = await customFieldsRepo.valuesOfField(trx, userId, id);
        const inUse = removed.filter((o) =>
          values.some((v) => (Array.isArray(v.value) ? v.value.includes(o) : v.value === o)),
        );
        if (inUse.length) throw badRequest(`Options in use by members cannot be removed: ${inUse.join(', ')}`);
      }
      changes.options = options;
    }
    const updated = toDefinition(await customFieldsRepo.update(trx, userId, id, changes));
    const fields = (['name', 'description', 'options', 'sortOrder'] as const).filter((f) => input[f] !== undefined);
    await tx.events.emit(tx, { type: 'custom_field.updated', area: 'customFields', data: { id, fields } });
    return updated;
  });
}

export async function trashField(ctx: ServiceContext, id: string): Promise<void> {
  const { now } = ctx;
  const userId = ownerOf(ctx);
  await inTransaction(ctx, async (tx) => {
    await liveField(tx.db, userId, id, true);
    await customFieldsRepo.update(tx.db, userId, id, { deleted_at: now, updated_at: now });
    await tx.events.emit(tx, { type: 'custom_field.trashed', area: 'customFields', data: { id } });
  });
}

export async function restoreField(ctx: ServiceContext, memberId: string, id: string): Promise<void> {
  const { db, now } = ctx;
  const userId = ownerOf(ctx);
  if (!(await findLiveMember(db, userId, memberId))) throw notFound('Member not found');
  await inTransaction(ctx, async (tx) => {
    const row = await customFieldsRepo.findAny(tx.db, userId, id, true);
    if (!row) throw notFound('Custom field not found');
    if (row.deleted_at === null) throw badRequest('Custom field is not in the trash');
    await customFieldsRepo.update(tx.db, userId, id, { deleted_at: null, updated_at: now });
    await tx.events.emit(tx, { type: 'custom_field.restored', area: 'customFields', data: { id } });
  });
}

export async function memberValues(ctx: ServiceContext, memberId: string): Promise<Schemas['CustomFieldValue'][]> {
  const { db } = ctx;
  const userId = ownerOf(ctx);
  if (!(await findLiveMember(db, userId, memberId))) throw notFound('Member not found');
  const [fields, values] = await Promise.all([
    customFieldsRepo.listLive(db, userId),
    customFieldsRepo.valuesOfMember(db, userId, memberId),
  ]);
  const byField = new Map(values.map((v) => [v.field_id, v]));
  return fields.map((f) => ({
    fieldId: f.id,
    name: f.name,
    type: f.type,
    options: f.options,
    value: byField.get(f.id)?.value ?? null,
    updatedAt: byField.get(f.id)?.updated_at ?? null,
  }));
}

/** Every field type, for the types a value fits (fittingTypes). */
const FIELD_TYPES: readonly FieldType[] = ['text', 'markdown', 'date', 'select', 'multiselect'];

/**
 * The field types whose rules `value` passes, option membership aside: validateValue against a
 * field of each type whose options are the value's own items. The statement checks the options.
 */
function fittingTypes(value: FieldValue, items: readonly string[]): FieldType[] {
  return FIELD_TYPES.filter((type) => {
    try {
      validateValue({ type, options: [...items] }, value);
      return true;
    } catch {
      return false;
    }
  });
}

export async function setMemberValue(
  ctx: ServiceContext,
  memberId: string,
  fieldId: string,
  value: FieldValue | null,
): Promise<Schemas['CustomFieldValue']> {
  const { now } = ctx;
  const userId = ownerOf(ctx);
  const items = value === null ? [] : Array.isArray(value) ? value : [value];
  const fits = value === null ? [] : fittingTypes(value, items);
  // One statement: the checks, the write and the event (customFieldsRepo.writeValue).
  const events = ctx.events.rows(ctx, [
    { type: 'custom_field_value.changed', area: 'customFields', data: { id: fieldId, memberId } },
  ]);
  const verdict = await oneStatement(ctx, (db) =>
    customFieldsRepo.writeValue(db, { userId, memberId, fieldId, value, fits, items, now }, events),
  );
  const { field } = verdict;
  if (!verdict.member) throw notFound('Member not found');
  if (!field) throw notFound('Custom field not found');
  if (!verdict.ok) {
    // The statement refused the value for this field: the same check says why.
    validateValue(field, value!);
    throw new Error(`custom field ${fieldId}: the value was refused but passes validateValue`);
  }
  return {
    fieldId,
    name: field.name,
    type: field.type,
    options: field.options,
    value,
    updatedAt: value === null ? null : now,
  };
}

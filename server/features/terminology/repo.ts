/** The SQL of terminology: the global document and the override layers (generated/sql/terminology.sql). */
import type { Knex } from 'knex';
import type { PendingEvent } from '../../core/context.ts';
import { type Sql, sql } from '../../db/sql.ts';
import { EXAMPLE_UUID, statement } from '../../db/statements.ts';
import { appendEvents, EXAMPLE_EVENT, notifiedColumn } from '../../events/log.ts';

type Noun = { singular: string; plural: string };

/** Labels as stored: complete in the global document, sparse in an override layer. */
export interface StoredLabels {
  terms: Record<string, Partial<Noun>>;
  actions: Record<string, string>;
  icons: Record<string, string>;
}

export interface TerminologyRow extends StoredLabels {
  id: string;
  user_id: string;
  created_at: number;
  updated_at: number;
}

export interface OverrideRow extends StoredLabels {
  id: string;
  user_id: string;
  side_system_id: string;
  /** null: the side system's own layer. */
  sub_system_id: string | null;
  created_at: number;
  updated_at: number;
}

const AREA = 'terminology';

/** The three label columns' values, bound as jsonb. */
const labelValues = (labels: StoredLabels) =>
  sql`${JSON.stringify(labels.terms)}::jsonb, ${JSON.stringify(labels.actions)}::jsonb, ${JSON.stringify(labels.icons)}::jsonb`;

const NO_LABELS: StoredLabels = { terms: {}, actions: {}, icons: {} };
const EXAMPLE_GLOBAL: TerminologyRow = {
  id: EXAMPLE_UUID,
  user_id: EXAMPLE_UUID,
  ...NO_LABELS,
  created_at: 0,
  updated_at: 0,
};

const findGlobal = statement<{ userId: string; lock: boolean }, TerminologyRow>({
  name: 'terminology_find',
  area: AREA,
  variants: { read: { userId: EXAMPLE_UUID, lock: false }, 'locked for update': { userId: EXAMPLE_UUID, lock: true } },
  build: ({ userId, lock }) =>
    sql`select * from terminology_settings where user_id = ${userId} limit 1${lock ? sql` for update` : sql.empty}`,
});

/** Inserts the document, or overwrites the labels of the existing one (id and created_at stay). */
const upsertGlobal = statement<{ row: TerminologyRow }, TerminologyRow>({
  name: 'terminology_insert',
  area: AREA,
  variants: { 'the document': { row: EXAMPLE_GLOBAL } },
  build: ({ row }) => sql`insert into terminology_settings (id, user_id, terms, actions, icons, created_at, updated_at)
    values (${row.id}, ${row.user_id}, ${labelValues(row)}, ${row.created_at}, ${row.updated_at})
    on conflict (user_id) do update set terms = excluded.terms, actions = excluded.actions, icons = excluded.icons, updated_at = excluded.updated_at returning *`,
});

/** `label` (a jsonb expression) when it is a label as overlay() takes one, a non-empty string; else null. */
const storedLabel = (label: Sql): Sql =>
  sql`case when jsonb_typeof(${label}) = 'string' and ${label} #>> '{}' <> '' then ${label} end`;

/**
 * One label column of the stored document (`s`) after a save, as overlay() and applyChanges() of
 * labels.ts make it: every key of the defaults (`p.defaults`), each label taken from the changes
 * (`p.changes`) when they set it, else from the stored document when it holds one there, else the
 * default. Keys the defaults do not have are dropped. `terms` holds a noun's two forms.
 */
function mergedSql(column: 'terms' | 'actions' | 'icons'): Sql {
  const name = sql.constant(column, ['terms', 'actions', 'icons']);
  if (column === 'terms')
    return sql`(select jsonb_object_agg(d.key, (
        select jsonb_object_agg(f.key, coalesce(p.changes -> 'terms' -> d.key -> f.key, ${storedLabel(sql`s.terms -> d.key -> f.key`)}, f.value))
        from jsonb_each(d.value) f))
      from patch p, jsonb_each(p.defaults -> 'terms') d)`;
  return sql`(select jsonb_object_agg(d.key, coalesce(p.changes -> '${name}' -> d.key, ${storedLabel(sql`s.${name} -> d.key`)}, d.value))
      from patch p, jsonb_each(p.defaults -> '${name}') d)`;
}

/**
 * A save of the global document in one statement (docs/data-access.md, "Writes in one
 * statement"): `row` (the defaults with the changes) inserted when the account has none, else the
 * stored labels merged with the changes (mergedSql) on the account's row, which the conflict locks
 * and reads at its newest committed version, so a concurrent save is never lost; then
 * `terminology.changed`. `defaults` are the product labels, `changes` the labels the patch sets
 * (changedLabels).
 */
const saveGlobal = statement<
  { row: TerminologyRow; defaults: StoredLabels; changes: StoredLabels; events: readonly PendingEvent[] },
  TerminologyRow & { notified: unknown }
>({
  name: 'terminology_save',
  area: AREA,
  variants: {
    'a patch': { row: EXAMPLE_GLOBAL, defaults: NO_LABELS, changes: NO_LABELS, events: [EXAMPLE_EVENT] },
  },
  build: ({ row, defaults, changes, events }) => sql`with patch as (
      select ${JSON.stringify(defaults)}::jsonb as defaults, ${JSON.stringify(changes)}::jsonb as changes
    ),
    saved as (
      insert into terminology_settings as s (id, user_id, terms, actions, icons, created_at, updated_at)
      values (${row.id}, ${row.user_id}, ${labelValues(row)}, ${row.created_at}, ${row.updated_at})
      on conflict (user_id) do update set terms = ${mergedSql('terms')}, actions = ${mergedSql('actions')},
        icons = ${mergedSql('icons')}, updated_at = excluded.updated_at
      returning *
    ),
    ${appendEvents(events, sql`exists (select 1 from saved)`)}
    select s.*, ${notifiedColumn} from saved s`,
});

/** The side system's own layer and, when subSystemId is given, that sub system's layer. */
const findOverrides = statement<{ userId: string; sideSystemId: string; subSystemId: string | null }, OverrideRow>({
  name: 'terminology_overrides',
  area: AREA,
  variants: {
    'a side system, and a sub system or none': { userId: EXAMPLE_UUID, sideSystemId: EXAMPLE_UUID, subSystemId: null },
  },
  build: ({ userId, sideSystemId, subSystemId }) => sql`select * from terminology_overrides
    where user_id = ${userId} and side_system_id = ${sideSystemId}
      and (sub_system_id is null or sub_system_id = ${subSystemId}::uuid)`,
});

const insertOverride = statement<{ row: OverrideRow }, never>({
  name: 'terminology_override_insert',
  area: AREA,
  variants: {
    'a layer': {
      row: { ...EXAMPLE_GLOBAL, side_system_id: EXAMPLE_UUID, sub_system_id: null },
    },
  },
  build: ({ row }) => sql`insert into terminology_overrides
      (id, user_id, side_system_id, sub_system_id, terms, actions, icons, created_at, updated_at)
    values (${row.id}, ${row.user_id}, ${row.side_system_id}, ${row.sub_system_id}, ${labelValues(row)}, ${row.created_at}, ${row.updated_at})`,
});

const updateOverride = statement<{ userId: string; id: string; labels: StoredLabels; now: number }, never>({
  name: 'terminology_override_update',
  area: AREA,
  variants: { 'a layer': { userId: EXAMPLE_UUID, id: EXAMPLE_UUID, labels: NO_LABELS, now: 0 } },
  build: ({ userId, id, labels, now }) => sql`update terminology_overrides
    set terms = ${JSON.stringify(labels.terms)}::jsonb, actions = ${JSON.stringify(labels.actions)}::jsonb,
      icons = ${JSON.stringify(labels.icons)}::jsonb, updated_at = ${now}
    where id = ${id} and user_id = ${userId}`,
});

const deleteOverride = statement<{ userId: string; sideSystemId: string; subSystemId: string | null }, never>({
  name: 'terminology_override_delete',
  area: AREA,
  variants: {
    "the side system's layer": { userId: EXAMPLE_UUID, sideSystemId: EXAMPLE_UUID, subSystemId: null },
    "a sub system's layer": { userId: EXAMPLE_UUID, sideSystemId: EXAMPLE_UUID, subSystemId: EXAMPLE_UUID },
  },
  build: ({ userId, sideSystemId, subSystemId }) => sql`delete from terminology_overrides
    where user_id = ${userId} and side_system_id = ${sideSystemId} and ${
      subSystemId ? sql`sub_system_id = ${subSystemId}` : sql`sub_system_id is null`
    }`,
});

const lockSideSystem = statement<{ userId: string; sideSystemId: string }, { id: string }>({
  name: 'terminology_lock_side_system',
  area: AREA,
  variants: { 'a side system': { userId: EXAMPLE_UUID, sideSystemId: EXAMPLE_UUID } },
  build: ({ userId, sideSystemId }) => sql`select id from side_systems
    where id = ${sideSystemId} and user_id = ${userId} and deleted_at is null
    limit 1 for update`,
});

export const terminologyRepo = {
  async findGlobal(
    db: Knex,
    userId: string,
    options: { forUpdate?: boolean } = {},
  ): Promise<TerminologyRow | undefined> {
    return (await findGlobal(db, { userId, lock: options.forUpdate === true }))[0];
  },

  /**
   * Saves the global document with its events in one statement (see saveGlobal): `row` when there
   * is none, else the stored labels with `changes` over them. The document as saved.
   */
  async saveGlobal(
    db: Knex,
    row: TerminologyRow,
    defaults: StoredLabels,
    changes: StoredLabels,
    events: readonly PendingEvent[],
  ): Promise<TerminologyRow> {
    const [saved] = await saveGlobal(db, { row, defaults, changes, events });
    return saved!;
  },

  /** Inserts the document, or overwrites every label of the existing one (id and created_at stay). */
  async upsertGlobal(db: Knex, row: TerminologyRow): Promise<TerminologyRow> {
    const [saved] = await upsertGlobal(db, { row });
    return saved!;
  },

  /** The side system's own layer and, when subSystemId is given, that sub system's layer. */
  findOverrides(db: Knex, userId: string, sideSystemId: string, subSystemId: string | null): Promise<OverrideRow[]> {
    return findOverrides(db, { userId, sideSystemId, subSystemId: subSystemId || null });
  },

  async insertOverride(db: Knex, row: OverrideRow): Promise<void> {
    await insertOverride(db, { row });
  },

  async updateOverride(db: Knex, userId: string, id: string, labels: StoredLabels, now: number): Promise<void> {
    await updateOverride(db, { userId, id, labels, now });
  },

  async deleteOverride(db: Knex, userId: string, sideSystemId: string, subSystemId: string | null): Promise<void> {
    await deleteOverride(db, { userId, sideSystemId, subSystemId });
  },

  /**
   * Locks a live side system of the account for the rest of the transaction, so override
   * writes of one side system (and its sub systems) are serialised. False when not found.
   */
  async lockSideSystem(trx: Knex.Transaction, userId: string, sideSystemId: string): Promise<boolean> {
    return (await lockSideSystem(trx, { userId, sideSystemId })).length > 0;
  },
};

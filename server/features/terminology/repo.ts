/** The SQL of terminology: the global document and the override layers (generated/sql/terminology.sql). */
import type { Knex } from 'knex';
import { sql } from '../../db/sql.ts';
import { EXAMPLE_UUID, statement } from '../../db/statements.ts';

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

/** Inserts the document, and on an existing one does nothing (`overwrite: false`) or overwrites its labels (id and created_at stay). */
const insertGlobal = statement<{ row: TerminologyRow; overwrite: boolean }, TerminologyRow>({
  name: 'terminology_insert',
  area: AREA,
  variants: {
    'unless it exists': { row: EXAMPLE_GLOBAL, overwrite: false },
    'or overwrite its labels': { row: EXAMPLE_GLOBAL, overwrite: true },
  },
  build: ({
    row,
    overwrite,
  }) => sql`insert into terminology_settings (id, user_id, terms, actions, icons, created_at, updated_at)
    values (${row.id}, ${row.user_id}, ${labelValues(row)}, ${row.created_at}, ${row.updated_at})
    ${
      overwrite
        ? sql`on conflict (user_id) do update set terms = excluded.terms, actions = excluded.actions, icons = excluded.icons, updated_at = excluded.updated_at returning *`
        : sql`on conflict (user_id) do nothing`
    }`,
});

const updateGlobal = statement<{ userId: string; labels: StoredLabels; now: number }, TerminologyRow>({
  name: 'terminology_update',
  area: AREA,
  variants: { 'an account': { userId: EXAMPLE_UUID, labels: NO_LABELS, now: 0 } },
  build: ({ userId, labels, now }) => sql`update terminology_settings
    set terms = ${JSON.stringify(labels.terms)}::jsonb, actions = ${JSON.stringify(labels.actions)}::jsonb,
      icons = ${JSON.stringify(labels.icons)}::jsonb, updated_at = ${now}
    where user_id = ${userId} returning *`,
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

  /** Creates the global document unless it exists; the caller then locks and reads it. */
  async insertGlobalIfMissing(db: Knex, row: TerminologyRow): Promise<void> {
    await insertGlobal(db, { row, overwrite: false });
  },

  async updateGlobal(db: Knex, userId: string, labels: StoredLabels, now: number): Promise<TerminologyRow> {
    const [row] = await updateGlobal(db, { userId, labels, now });
    return row!;
  },

  /** Inserts the document, or overwrites every label of the existing one (id and created_at stay). */
  async upsertGlobal(db: Knex, row: TerminologyRow): Promise<TerminologyRow> {
    const [saved] = await insertGlobal(db, { row, overwrite: true });
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

import type { Knex } from 'knex';

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

function jsonColumns(labels: StoredLabels): Record<'terms' | 'actions' | 'icons', string> {
  return {
    terms: JSON.stringify(labels.terms),
    actions: JSON.stringify(labels.actions),
    icons: JSON.stringify(labels.icons),
  };
}

export const terminologyRepo = {
  findGlobal(db: Knex, userId: string, options: { forUpdate?: boolean } = {}): Promise<TerminologyRow | undefined> {
    const qb = db('terminology_settings').where({ user_id: userId });
    if (options.forUpdate) qb.forUpdate();
    return qb.first();
  },

  /** Creates the global document unless it exists; the caller then locks and reads it. */
  async insertGlobalIfMissing(db: Knex, row: TerminologyRow): Promise<void> {
    await db('terminology_settings')
      .insert({ ...row, ...jsonColumns(row) })
      .onConflict('user_id')
      .ignore();
  },

  async updateGlobal(db: Knex, userId: string, labels: StoredLabels, now: number): Promise<TerminologyRow> {
    const [row] = await db('terminology_settings')
      .where({ user_id: userId })
      .update({ ...jsonColumns(labels), updated_at: now })
      .returning('*');
    return row as TerminologyRow;
  },

  /** Inserts the document, or overwrites every label of the existing one (id and created_at stay). */
  async upsertGlobal(db: Knex, row: TerminologyRow): Promise<TerminologyRow> {
    const columns = jsonColumns(row);
    const [saved] = await db('terminology_settings')
      .insert({ ...row, ...columns })
      .onConflict('user_id')
      .merge({ ...columns, updated_at: row.updated_at })
      .returning('*');
    return saved as TerminologyRow;
  },

  /** The side system's own layer and, when subSystemId is given, that sub system's layer. */
  findOverrides(db: Knex, userId: string, sideSystemId: string, subSystemId: string | null): Promise<OverrideRow[]> {
    return db('terminology_overrides')
      .where({ user_id: userId, side_system_id: sideSystemId })
      .where((qb) => {
        qb.whereNull('sub_system_id');
        if (subSystemId) qb.orWhere('sub_system_id', subSystemId);
      });
  },

  async insertOverride(db: Knex, row: OverrideRow): Promise<void> {
    await db('terminology_overrides').insert({ ...row, ...jsonColumns(row) });
  },

  async updateOverride(db: Knex, userId: string, id: string, labels: StoredLabels, now: number): Promise<void> {
    await db('terminology_overrides')
      .where({ id, user_id: userId })
      .update({ ...jsonColumns(labels), updated_at: now });
  },

  async deleteOverride(db: Knex, userId: string, sideSystemId: string, subSystemId: string | null): Promise<void> {
    const qb = db('terminology_overrides').where({ user_id: userId, side_system_id: sideSystemId });
    if (subSystemId) qb.where('sub_system_id', subSystemId);
    else qb.whereNull('sub_system_id');
    await qb.delete();
  },

  /**
   * Locks a live side system of the account for the rest of the transaction, so override
   * writes of one side system (and its sub systems) are serialised. False when not found.
   */
  async lockSideSystem(trx: Knex.Transaction, userId: string, sideSystemId: string): Promise<boolean> {
    const row = await trx('side_systems')
      .where({ id: sideSystemId, user_id: userId })
      .whereNull('deleted_at')
      .forUpdate()
      .first('id');
    return row !== undefined;
  },
};

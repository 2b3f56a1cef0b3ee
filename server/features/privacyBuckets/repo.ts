/**
 * SQL of the privacy-buckets area: buckets, their defaults, and the assignment rows of every kind
 * of content (and of friends). Every statement filters on the owner's account.
 */
import type { Knex } from 'knex';
import type { DefaultKind } from './presets.ts';

export interface BucketRow {
  id: string;
  user_id: string;
  slug: string;
  builtin: boolean;
  name: string;
  description: string;
  icon: string | null;
  icon_color_preset: string | null;
  friend_permissions: unknown;
  created_at: number;
  updated_at: number;
}

/** What can carry buckets (privacy_bucket_assignments.kind) and the rows that must exist for it. */
export type TargetKind =
  | 'member'
  | 'profile_section'
  | 'friend'
  | 'group'
  | 'directory'
  | 'custom_field'
  | 'side_system'
  | 'sub_system'
  | 'member_status';

interface Target {
  /** The owned, live rows of this kind among the `?::uuid[]` ids, as `id` (bindings: account, ids). */
  owned: string;
}

/**
 * The rows an id of each kind must name: the account's own, not in the trash (deleted); for a
 * friend, an account with which the owner has an accepted or a pending friendship.
 */
const TARGETS: Record<TargetKind, Target> = {
  member: { owned: `select id from members where user_id = ? and id = any (?::uuid[]) and deleted_at is null` },
  profile_section: {
    owned: `select id from members where user_id = ? and id = any (?::uuid[]) and deleted_at is null`,
  },
  friend: {
    owned: `select friend_user_id as id from friendships where user_id = ? and friend_user_id = any (?::uuid[]) and status in ('accepted', 'pending')`,
  },
  group: {
    owned: `select id from directories where user_id = ? and id = any (?::uuid[]) and kind = 'group' and deleted_at is null`,
  },
  directory: {
    owned: `select id from directories where user_id = ? and id = any (?::uuid[]) and kind = 'folder' and deleted_at is null`,
  },
  custom_field: {
    owned: `select id from custom_field_definitions where user_id = ? and id = any (?::uuid[]) and deleted_at is null`,
  },
  side_system: {
    owned: `select id from side_systems where user_id = ? and id = any (?::uuid[]) and deleted_at is null`,
  },
  sub_system: { owned: `select id from sub_systems where user_id = ? and id = any (?::uuid[]) and deleted_at is null` },
  member_status: { owned: `select id from member_status_definitions where user_id = ? and id = any (?::uuid[])` },
};

/** The content table and row kind behind each reverse list (GET /privacy-buckets/{id}/members|groups|directories). */
const REVERSE = {
  member: `select m.id, m.created_at from members m where m.id = a.content_id and m.user_id = b.user_id and m.deleted_at is null`,
  group: `select d.id, d.created_at from directories d where d.id = a.content_id and d.user_id = b.user_id and d.kind = 'group' and d.deleted_at is null`,
  directory: `select d.id, d.created_at from directories d where d.id = a.content_id and d.user_id = b.user_id and d.kind = 'folder' and d.deleted_at is null`,
} as const;
export type ReverseKind = keyof typeof REVERSE;

const buckets = (db: Knex) => db<BucketRow>('privacy_buckets');

export const bucketsRepo = {
  list(db: Knex, userId: string): Promise<BucketRow[]> {
    return buckets(db)
      .where({ user_id: userId })
      .orderBy([{ column: 'created_at' }, { column: 'id' }]);
  },

  find(db: Knex, userId: string, id: string): Promise<BucketRow | undefined> {
    return buckets(db).where({ id, user_id: userId }).first();
  },

  lock(trx: Knex.Transaction, userId: string, id: string): Promise<BucketRow | undefined> {
    return buckets(trx).where({ id, user_id: userId }).forUpdate().first();
  },

  async insert(db: Knex, row: BucketRow): Promise<BucketRow> {
    const [created] = await buckets(db)
      .insert({ ...row, friend_permissions: JSON.stringify(row.friend_permissions) })
      .returning('*');
    return created as BucketRow;
  },

  async update(db: Knex, userId: string, id: string, changes: Partial<BucketRow>): Promise<BucketRow> {
    const out =
      changes.friend_permissions === undefined
        ? changes
        : { ...changes, friend_permissions: JSON.stringify(changes.friend_permissions) };
    const [row] = await buckets(db).where({ id, user_id: userId }).update(out).returning('*');
    return row as BucketRow;
  },

  /** Deletes the bucket; its assignments and default entries go with it (on delete cascade). */
  async delete(db: Knex, userId: string, id: string): Promise<void> {
    await buckets(db).where({ id, user_id: userId }).delete();
  },

  /**
   * Which of `ids` are the account's buckets, locked against deletion until the transaction ends
   * (so an assignment is never written for a bucket being deleted). One statement.
   */
  async shareExisting(trx: Knex.Transaction, userId: string, ids: readonly string[]): Promise<Set<string>> {
    const rows: Array<{ id: string }> = await buckets(trx)
      .where({ user_id: userId })
      .whereIn('id', [...ids])
      .forShare()
      .select('id');
    return new Set(rows.map((r) => r.id));
  },

  /**
   * The bucket's live content of one kind, in creation order, in one statement: no row at all when
   * the bucket is not the account's; one row with a null id when it carries nothing.
   */
  async contentOf(db: Knex, userId: string, bucketId: string, kind: ReverseKind): Promise<string[] | null> {
    const { rows }: { rows: Array<{ id: string | null }> } = await db.raw(
      `select c.id from privacy_buckets b
       left join lateral (
         select x.id, x.created_at from privacy_bucket_assignments a
         cross join lateral (${REVERSE[kind]}) x
         where a.bucket_id = b.id and a.kind = ? and a.section_key = ''
       ) c on true
       where b.id = ? and b.user_id = ?
       order by c.created_at, c.id`,
      [kind, bucketId, userId],
    );
    if (rows.length === 0) return null;
    return rows.filter((r) => r.id !== null).map((r) => r.id as string);
  },
};

export const defaultsRepo = {
  /** The kind's default buckets, oldest bucket first. */
  async list(db: Knex, userId: string, kind: DefaultKind): Promise<string[]> {
    return db('privacy_bucket_defaults as d')
      .join('privacy_buckets as b', 'b.id', 'd.bucket_id')
      .where({ 'd.user_id': userId, 'd.kind': kind })
      .orderBy([{ column: 'b.created_at' }, { column: 'b.id' }])
      .pluck('b.id');
  },

  /** Replaces a kind's defaults; concurrent replacements of one account's defaults run one after the other. */
  async replace(trx: Knex.Transaction, userId: string, kind: DefaultKind, bucketIds: readonly string[]): Promise<void> {
    await trx('accounts').where({ id: userId }).forUpdate().select('id');
    await trx('privacy_bucket_defaults').where({ user_id: userId, kind }).delete();
    await trx('privacy_bucket_defaults').insert(
      bucketIds.map((bucketId) => ({ user_id: userId, kind, bucket_id: bucketId })),
    );
  },
};

export const assignmentsRepo = {
  /**
   * Which of `ids` name an existing target of `kind` for the account, in one statement. With
   * `lock`, those rows stay locked until the transaction ends: `share` keeps them from being purged
   * meanwhile (so no assignment outlives its content); `update` also serialises writers of the
   * same target, so concurrent replacements of its buckets run one after the other.
   */
  async ownedTargets(
    db: Knex,
    userId: string,
    kind: TargetKind,
    ids: readonly string[],
    lock: 'share' | 'update' | null = null,
  ): Promise<Set<string>> {
    const { rows }: { rows: Array<{ id: string }> } = await db.raw(
      `${TARGETS[kind].owned}${lock ? ` for ${lock}` : ''}`,
      [userId, [...ids]],
    );
    return new Set(rows.map((r) => r.id));
  },

  /**
   * The buckets of one target, oldest bucket first, in one statement: null when the target does
   * not exist for the account (unknown, another account's, in the trash, or no friendship).
   */
  async bucketsOf(db: Knex, userId: string, kind: TargetKind, id: string, section: string): Promise<string[] | null> {
    const { rows }: { rows: Array<{ bucket_id: string | null }> } = await db.raw(
      `select b.id as bucket_id
         from (${TARGETS[kind].owned}) t
         left join privacy_bucket_assignments a on a.kind = ? and a.content_id = t.id and a.section_key = ? and a.user_id = ?
         left join privacy_buckets b on b.id = a.bucket_id and b.user_id = a.user_id
        order by b.created_at, b.id`,
      [userId, [id], kind, section, userId],
    );
    if (rows.length === 0) return null;
    return rows.filter((r) => r.bucket_id !== null).map((r) => r.bucket_id as string);
  },

  /** Replaces the buckets of one target: one delete and one insert. */
  async replace(
    trx: Knex.Transaction,
    userId: string,
    kind: TargetKind,
    id: string,
    section: string,
    bucketIds: readonly string[],
    now: number,
  ): Promise<void> {
    await trx('privacy_bucket_assignments')
      .where({ user_id: userId, kind, content_id: id, section_key: section })
      .delete();
    await trx('privacy_bucket_assignments').insert(
      bucketIds.map((bucketId) => ({
        user_id: userId,
        bucket_id: bucketId,
        kind,
        content_id: id,
        section_key: section,
        created_at: now,
      })),
    );
  },

  /** Gives one bucket to many targets (those that have it keep it): one statement. */
  async addMany(
    trx: Knex.Transaction,
    userId: string,
    kind: TargetKind,
    bucketId: string,
    ids: readonly string[],
    now: number,
  ): Promise<void> {
    await trx.raw(
      `insert into privacy_bucket_assignments (user_id, bucket_id, kind, content_id, section_key, created_at)
       select ?, ?, ?, c.id, '', ? from unnest(?::uuid[]) as c(id)
       on conflict do nothing`,
      [userId, bucketId, kind, now, [...ids]],
    );
  },

  /** Takes one bucket from many targets: one statement. */
  async removeMany(
    trx: Knex.Transaction,
    userId: string,
    kind: TargetKind,
    bucketId: string,
    ids: readonly string[],
  ): Promise<void> {
    await trx('privacy_bucket_assignments')
      .where({ user_id: userId, kind, bucket_id: bucketId, section_key: '' })
      .whereIn('content_id', [...ids])
      .delete();
  },
};

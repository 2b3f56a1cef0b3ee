/**
 * SQL of the privacy-buckets area: buckets, their defaults, and the assignment rows of every kind
 * of content (and of friends). Every statement filters on the owner's account. The statements are
 * committed as generated/sql/privacyBuckets.sql.
 */
import type { Knex } from 'knex';
import type { PendingEvent, PermissionMap } from '../../core/context.ts';
import { type Sql, sql } from '../../db/sql.ts';
import { EXAMPLE_UUID, statement } from '../../db/statements.ts';
import { appendEvents, EXAMPLE_EVENT, keyedExample, notifiedColumn } from '../../events/log.ts';

const AREA = 'privacyBuckets';

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

/** Every column of privacy_buckets (BucketRow). */
const BUCKET_COLUMNS = sql`id, user_id, slug, builtin, name, description, icon, icon_color_preset, friend_permissions, created_at, updated_at`;

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

const TARGET_KINDS: readonly TargetKind[] = [
  'member',
  'profile_section',
  'friend',
  'group',
  'directory',
  'custom_field',
  'side_system',
  'sub_system',
  'member_status',
];

/**
 * The rows an id of each kind must name, as `id`: the account's own, not in the trash (deleted); for
 * a friend, an account with which the owner has an accepted or a pending friendship.
 */
function owned(kind: TargetKind, userId: string, ids: readonly string[]): Sql {
  const any = sql`any (${[...ids]}::uuid[])`;
  switch (kind) {
    case 'member':
    case 'profile_section':
      return sql`select id from members where user_id = ${userId} and id = ${any} and deleted_at is null`;
    case 'friend':
      return sql`select friend_user_id as id from friendships where user_id = ${userId} and friend_user_id = ${any} and status in ('accepted', 'pending')`;
    case 'group':
      return sql`select id from directories where user_id = ${userId} and id = ${any} and kind = 'group' and deleted_at is null`;
    case 'directory':
      return sql`select id from directories where user_id = ${userId} and id = ${any} and kind = 'folder' and deleted_at is null`;
    case 'custom_field':
      return sql`select id from custom_field_definitions where user_id = ${userId} and id = ${any} and deleted_at is null`;
    case 'side_system':
      return sql`select id from side_systems where user_id = ${userId} and id = ${any} and deleted_at is null`;
    case 'sub_system':
      return sql`select id from sub_systems where user_id = ${userId} and id = ${any} and deleted_at is null`;
    case 'member_status':
      return sql`select id from member_status_definitions where user_id = ${userId} and id = ${any}`;
  }
}

/** The content table and row kind behind each reverse list (GET /privacy-buckets/{id}/members|groups|directories). */
const REVERSE = {
  member: sql`select m.id, m.created_at from members m where m.id = a.content_id and m.user_id = b.user_id and m.deleted_at is null`,
  group: sql`select d.id, d.created_at from directories d where d.id = a.content_id and d.user_id = b.user_id and d.kind = 'group' and d.deleted_at is null`,
  directory: sql`select d.id, d.created_at from directories d where d.id = a.content_id and d.user_id = b.user_id and d.kind = 'folder' and d.deleted_at is null`,
} as const;
export type ReverseKind = keyof typeof REVERSE;

// ---- buckets ----

const bucketsList = statement<{ userId: string }, BucketRow>({
  name: 'privacy_buckets_list',
  area: AREA,
  variants: { 'the account': { userId: EXAMPLE_UUID } },
  build: ({ userId }) =>
    sql`select ${BUCKET_COLUMNS} from privacy_buckets where user_id = ${userId} order by created_at, id`,
});

const bucketFind = statement<{ userId: string; id: string; lock: boolean }, BucketRow>({
  name: 'privacy_bucket_find',
  area: AREA,
  variants: {
    read: { userId: EXAMPLE_UUID, id: EXAMPLE_UUID, lock: false },
    'locked for a write': { userId: EXAMPLE_UUID, id: EXAMPLE_UUID, lock: true },
  },
  build: ({ userId, id, lock }) =>
    sql`select ${BUCKET_COLUMNS} from privacy_buckets where id = ${id} and user_id = ${userId} limit 1${lock ? sql` for update` : sql.empty}`,
});

const EXAMPLE_BUCKET: BucketRow = {
  id: EXAMPLE_UUID,
  user_id: EXAMPLE_UUID,
  slug: 'u_0',
  builtin: false,
  name: 'n',
  description: '',
  icon: null,
  icon_color_preset: null,
  friend_permissions: {},
  created_at: 0,
  updated_at: 0,
};

/**
 * A bucket created in one statement (docs/data-access.md, "Writes in one statement"): the row and
 * `privacy_bucket.created`, appended once the row is written. Its slug is random; the unique
 * (account, slug) index refuses a collision as the insert did in a transaction.
 */
const bucketCreate = statement<{ row: BucketRow; events: readonly PendingEvent[] }, BucketRow & { notified: unknown }>({
  name: 'privacy_bucket_create',
  area: AREA,
  variants: {
    'a bucket': { events: [EXAMPLE_EVENT], row: EXAMPLE_BUCKET },
    'a bucket with its keyed answer': { events: keyedExample([EXAMPLE_EVENT]), row: EXAMPLE_BUCKET },
  },
  build: ({ row, events }) => sql`with inserted as (
      insert into privacy_buckets (${BUCKET_COLUMNS})
      values (${row.id}, ${row.user_id}, ${row.slug}, ${row.builtin}, ${row.name}, ${row.description}, ${row.icon},
        ${row.icon_color_preset}, ${JSON.stringify(row.friend_permissions)}::jsonb, ${row.created_at}, ${row.updated_at})
      returning ${BUCKET_COLUMNS}
    ),
    ${appendEvents(events, sql`exists (select 1 from inserted)`)}
    select ${BUCKET_COLUMNS}, ${notifiedColumn} from inserted`,
});

/** The columns PATCH may change (each when present; `icon` and `icon_color_preset` may be set to null). */
export interface BucketChanges {
  updated_at: number;
  name?: string;
  description?: string;
  icon?: string | null;
  icon_color_preset?: string | null;
  friend_permissions?: PermissionMap;
}

const bucketUpdate = statement<{ userId: string; id: string; changes: BucketChanges }, BucketRow>({
  name: 'privacy_bucket_update',
  area: AREA,
  variants: { 'any columns': { userId: EXAMPLE_UUID, id: EXAMPLE_UUID, changes: { updated_at: 0 } } },
  build: ({ userId, id, changes: c }) => {
    const permissions = c.friend_permissions === undefined ? null : JSON.stringify(c.friend_permissions);
    return sql`update privacy_buckets set
        name = case when ${c.name !== undefined}::boolean then ${c.name ?? null}::text else name end,
        description = case when ${c.description !== undefined}::boolean then ${c.description ?? null}::text else description end,
        icon = case when ${c.icon !== undefined}::boolean then ${c.icon ?? null}::text else icon end,
        icon_color_preset = case when ${c.icon_color_preset !== undefined}::boolean then ${c.icon_color_preset ?? null}::text else icon_color_preset end,
        friend_permissions = case when ${permissions !== null}::boolean then ${permissions}::jsonb else friend_permissions end,
        updated_at = ${c.updated_at}::bigint
      where id = ${id} and user_id = ${userId}
      returning ${BUCKET_COLUMNS}`;
  },
});

const bucketDelete = statement<{ userId: string; id: string }, never>({
  name: 'privacy_bucket_delete',
  area: AREA,
  variants: { 'one bucket': { userId: EXAMPLE_UUID, id: EXAMPLE_UUID } },
  build: ({ userId, id }) => sql`delete from privacy_buckets where id = ${id} and user_id = ${userId}`,
});

const bucketsShare = statement<{ userId: string; ids: readonly string[] }, { id: string }>({
  name: 'privacy_buckets_share_existing',
  area: AREA,
  variants: { 'some ids': { userId: EXAMPLE_UUID, ids: [] } },
  build: ({ userId, ids }) =>
    sql`select id from privacy_buckets where user_id = ${userId} and id = any (${[...ids]}::uuid[]) for share`,
});

const bucketContent = statement<{ userId: string; bucketId: string; kind: ReverseKind }, { id: string | null }>({
  name: 'privacy_bucket_content',
  area: AREA,
  variants: {
    members: { userId: EXAMPLE_UUID, bucketId: EXAMPLE_UUID, kind: 'member' },
    groups: { userId: EXAMPLE_UUID, bucketId: EXAMPLE_UUID, kind: 'group' },
    folders: { userId: EXAMPLE_UUID, bucketId: EXAMPLE_UUID, kind: 'directory' },
  },
  build: ({ userId, bucketId, kind }) => sql`select c.id from privacy_buckets b
       left join lateral (
         select x.id, x.created_at from privacy_bucket_assignments a
         cross join lateral (${REVERSE[kind]}) x
         where a.bucket_id = b.id and a.kind = ${kind}::text and a.section_key = ''
       ) c on true
       where b.id = ${bucketId} and b.user_id = ${userId}
       order by c.created_at, c.id`,
});

// ---- presets ----

export interface PresetRow {
  id: string;
  slug: string;
  name: string;
  description: string;
  icon: string;
  icon_color_preset: string;
  friend_permissions: PermissionMap;
  created_at: number;
}

/** The presets the account lacks (on the unique (account, slug) index; never a duplicate): the ones inserted. */
const presetsInsert = statement<
  { userId: string; rows: readonly PresetRow[]; now: number },
  { id: string; slug: string }
>({
  name: 'privacy_presets_insert',
  area: AREA,
  variants: {
    'the two presets': {
      userId: EXAMPLE_UUID,
      now: 0,
      rows: [0, 1].map((i) => ({
        id: EXAMPLE_UUID,
        slug: `p${i}`,
        name: 'n',
        description: '',
        icon: 'i',
        icon_color_preset: 'c',
        friend_permissions: {} as PermissionMap,
        created_at: 0,
      })),
    },
  },
  build: ({ userId, rows, now }) => {
    const values = rows.map(
      (r) =>
        sql`(${r.id}::uuid, ${userId}::uuid, ${r.slug}::text, true, ${r.name}::text, ${r.description}::text, ${r.icon}::text, ${r.icon_color_preset}::text, ${JSON.stringify(r.friend_permissions)}::jsonb, ${r.created_at}::bigint, ${now}::bigint)`,
    );
    return sql`insert into privacy_buckets (${BUCKET_COLUMNS})
        values ${sql.join(values, ', ')}
        on conflict (user_id, slug) do nothing
        returning id, slug`;
  },
});

const defaultAdd = statement<{ userId: string; kind: string; bucketId: string }, never>({
  name: 'privacy_default_add',
  area: AREA,
  variants: { 'one default': { userId: EXAMPLE_UUID, kind: 'new_friend', bucketId: EXAMPLE_UUID } },
  build: ({ userId, kind, bucketId }) => sql`insert into privacy_bucket_defaults (user_id, kind, bucket_id)
    values (${userId}::uuid, ${kind}::text, ${bucketId}::uuid)
    on conflict (user_id, kind, bucket_id) do nothing`,
});

interface DefaultsInput {
  userId: string;
  defaultKind: string;
  contentKind: string;
  contentIds: readonly string[];
  sections: readonly string[];
  now: number;
  /** In a write's own statement: the condition under which the content was written. */
  when?: Sql;
}

/** The insert that gives new content the account's default buckets (a statement, or a CTE of a write's own statement). */
function defaultsInsertSql({ userId, defaultKind, contentKind, contentIds, sections, now, when }: DefaultsInput): Sql {
  return sql`insert into privacy_bucket_assignments (user_id, bucket_id, kind, content_id, section_key, created_at)
     select d.user_id, d.bucket_id, ${contentKind}::text, c.id, s.key, ${now}::bigint
       from privacy_bucket_defaults d
       cross join unnest(${[...contentIds]}::uuid[]) as c(id)
       cross join unnest(${[...sections]}::text[]) as s(key)
      where d.user_id = ${userId} and d.kind = ${defaultKind}::text${when ? sql` and ${when}` : sql.empty}
     on conflict do nothing`;
}

/**
 * Gives new content the owner's default buckets of a kind: each content id (with each of
 * `sections`) gets every default bucket, in one statement whatever the number of ids.
 */
const defaultsApply = statement<DefaultsInput, never>({
  name: 'privacy_defaults_apply',
  area: AREA,
  variants: {
    'new content': {
      userId: EXAMPLE_UUID,
      defaultKind: 'new_member',
      contentKind: 'member',
      contentIds: [],
      sections: [''],
      now: 0,
    },
  },
  build: (input) => defaultsInsertSql(input),
});

// ---- defaults ----

const defaultsList = statement<{ userId: string; kind: string }, { id: string }>({
  name: 'privacy_defaults_list',
  area: AREA,
  variants: { 'one kind': { userId: EXAMPLE_UUID, kind: 'new_member' } },
  build: ({ userId, kind }) => sql`select b.id from privacy_bucket_defaults d
    join privacy_buckets b on b.id = d.bucket_id
    where d.user_id = ${userId} and d.kind = ${kind}::text
    order by b.created_at, b.id`,
});

const accountLock = statement<{ userId: string }, { id: string }>({
  name: 'privacy_defaults_lock_account',
  area: AREA,
  variants: { 'the account': { userId: EXAMPLE_UUID } },
  build: ({ userId }) => sql`select id from accounts where id = ${userId} for update`,
});

const defaultsDelete = statement<{ userId: string; kind: string }, never>({
  name: 'privacy_defaults_delete',
  area: AREA,
  variants: { 'one kind': { userId: EXAMPLE_UUID, kind: 'new_member' } },
  build: ({ userId, kind }) =>
    sql`delete from privacy_bucket_defaults where user_id = ${userId} and kind = ${kind}::text`,
});

const defaultsInsert = statement<{ userId: string; kind: string; bucketIds: readonly string[] }, never>({
  name: 'privacy_defaults_insert',
  area: AREA,
  variants: { 'some buckets': { userId: EXAMPLE_UUID, kind: 'new_member', bucketIds: [] } },
  build: ({ userId, kind, bucketIds }) => sql`insert into privacy_bucket_defaults (user_id, kind, bucket_id)
    select ${userId}::uuid, ${kind}::text, b.id from unnest(${[...bucketIds]}::uuid[]) with ordinality as b(id, n)
    order by b.n`,
});

// ---- assignments ----

type TargetLock = 'share' | 'no key update' | 'update';
const LOCKS: readonly string[] = ['for share', 'for no key update', 'for update'];

/** Kinds whose targets are checked with a share lock (the bulk routes). */
const BULK_KINDS: readonly TargetKind[] = ['friend', 'group', 'directory'];

const ownedTargets = statement<
  { userId: string; kind: TargetKind; ids: readonly string[]; lock: TargetLock },
  { id: string }
>({
  name: 'privacy_owned_targets',
  area: AREA,
  variants: Object.fromEntries([
    ...BULK_KINDS.map((kind) => [`${kind}, share-locked`, { userId: EXAMPLE_UUID, kind, ids: [], lock: 'share' }]),
    [
      'member, locked for the update of its buckets',
      { userId: EXAMPLE_UUID, kind: 'member', ids: [], lock: 'no key update' },
    ],
    ...TARGET_KINDS.map((kind) => [
      `${kind}, locked for update`,
      { userId: EXAMPLE_UUID, kind, ids: [], lock: 'update' },
    ]),
  ]),
  // In id order, so two requests locking overlapping targets queue instead of deadlocking.
  build: ({ userId, kind, ids, lock }) =>
    sql`${owned(kind, userId, ids)} order by id ${sql.constant(`for ${lock}`, LOCKS)}`,
});

const targetBuckets = statement<
  { userId: string; kind: TargetKind; id: string; section: string },
  { bucket_id: string | null }
>({
  name: 'privacy_target_buckets',
  area: AREA,
  variants: Object.fromEntries(
    TARGET_KINDS.map((kind) => [kind, { userId: EXAMPLE_UUID, kind, id: EXAMPLE_UUID, section: '' }]),
  ),
  build: ({ userId, kind, id, section }) => sql`select b.id as bucket_id
         from (${owned(kind, userId, [id])}) t
         left join privacy_bucket_assignments a on a.kind = ${kind}::text and a.content_id = t.id and a.section_key = ${section}::text and a.user_id = ${userId}
         left join privacy_buckets b on b.id = a.bucket_id and b.user_id = a.user_id
        order by b.created_at, b.id`,
});

const assignmentsDelete = statement<{ userId: string; kind: TargetKind; id: string; section: string }, never>({
  name: 'privacy_target_assignments_delete',
  area: AREA,
  variants: { 'one target': { userId: EXAMPLE_UUID, kind: 'member', id: EXAMPLE_UUID, section: '' } },
  build: ({ userId, kind, id, section }) => sql`delete from privacy_bucket_assignments
    where user_id = ${userId} and kind = ${kind}::text and content_id = ${id} and section_key = ${section}::text`,
});

const assignmentsInsert = statement<
  { userId: string; kind: TargetKind; id: string; section: string; bucketIds: readonly string[]; now: number },
  never
>({
  name: 'privacy_target_assignments_insert',
  area: AREA,
  variants: {
    'some buckets': { userId: EXAMPLE_UUID, kind: 'member', id: EXAMPLE_UUID, section: '', bucketIds: [], now: 0 },
  },
  build: ({ userId, kind, id, section, bucketIds, now }) =>
    sql`insert into privacy_bucket_assignments (user_id, bucket_id, kind, content_id, section_key, created_at)
    select ${userId}::uuid, b.id, ${kind}::text, ${id}::uuid, ${section}::text, ${now}::bigint
      from unnest(${[...bucketIds]}::uuid[]) with ordinality as b(id, n)
     order by b.n`,
});

const assignmentsAddMany = statement<
  { userId: string; kind: TargetKind; bucketId: string; ids: readonly string[]; now: number },
  never
>({
  name: 'privacy_bucket_add_many',
  area: AREA,
  variants: { 'some targets': { userId: EXAMPLE_UUID, kind: 'member', bucketId: EXAMPLE_UUID, ids: [], now: 0 } },
  build: ({ userId, kind, bucketId, ids, now }) =>
    sql`insert into privacy_bucket_assignments (user_id, bucket_id, kind, content_id, section_key, created_at)
       select ${userId}::uuid, ${bucketId}::uuid, ${kind}::text, c.id, '', ${now}::bigint from unnest(${[...ids]}::uuid[]) as c(id)
       on conflict do nothing`,
});

const assignmentsRemoveMany = statement<
  { userId: string; kind: TargetKind; bucketId: string; ids: readonly string[] },
  never
>({
  name: 'privacy_bucket_remove_many',
  area: AREA,
  variants: { 'some targets': { userId: EXAMPLE_UUID, kind: 'member', bucketId: EXAMPLE_UUID, ids: [] } },
  build: ({ userId, kind, bucketId, ids }) => sql`delete from privacy_bucket_assignments
    where user_id = ${userId} and kind = ${kind}::text and bucket_id = ${bucketId} and section_key = ''
      and content_id = any (${[...ids]}::uuid[])`,
});

export const bucketsRepo = {
  list: (db: Knex, userId: string): Promise<BucketRow[]> => bucketsList(db, { userId }),

  async find(db: Knex, userId: string, id: string): Promise<BucketRow | undefined> {
    const [row] = await bucketFind(db, { userId, id, lock: false });
    return row;
  },

  async lock(trx: Knex.Transaction, userId: string, id: string): Promise<BucketRow | undefined> {
    const [row] = await bucketFind(trx, { userId, id, lock: true });
    return row;
  },

  /** Inserts the bucket and appends its events, in one statement; the row as stored. */
  /** The row as written, with `notified` (a keyed create's oneStatement reads it). */
  async create(db: Knex, row: BucketRow, events: readonly PendingEvent[]): Promise<BucketRow & { notified: unknown }> {
    return (await bucketCreate(db, { row, events }))[0]!;
  },

  async update(db: Knex, userId: string, id: string, changes: BucketChanges): Promise<BucketRow> {
    const [row] = await bucketUpdate(db, { userId, id, changes });
    return row as BucketRow;
  },

  /** Deletes the bucket; its assignments and default entries go with it (on delete cascade). */
  async delete(db: Knex, userId: string, id: string): Promise<void> {
    await bucketDelete(db, { userId, id });
  },

  /**
   * Which of `ids` are the account's buckets, locked against deletion until the transaction ends
   * (so an assignment is never written for a bucket being deleted). One statement.
   */
  async shareExisting(trx: Knex.Transaction, userId: string, ids: readonly string[]): Promise<Set<string>> {
    const rows = await bucketsShare(trx, { userId, ids });
    return new Set(rows.map((r) => r.id));
  },

  /**
   * The bucket's live content of one kind, in creation order, in one statement: no row at all when
   * the bucket is not the account's; one row with a null id when it carries nothing.
   */
  async contentOf(db: Knex, userId: string, bucketId: string, kind: ReverseKind): Promise<string[] | null> {
    const rows = await bucketContent(db, { userId, bucketId, kind });
    if (rows.length === 0) return null;
    return rows.filter((r) => r.id !== null).map((r) => r.id as string);
  },
};

export const presetsRepo = {
  /** Inserts the presets the account lacks; the ones inserted. */
  insertMissing: (db: Knex, userId: string, rows: readonly PresetRow[], now: number) =>
    presetsInsert(db, { userId, rows, now }),
  /** Adds one default bucket of a kind (kept when it is there already). */
  async addDefault(db: Knex, userId: string, kind: string, bucketId: string): Promise<void> {
    await defaultAdd(db, { userId, kind, bucketId });
  },
  /** applyDefaults' insert as a fragment, for a write that makes it a CTE of its own statement. */
  defaultsSql: (input: DefaultsInput): Sql => defaultsInsertSql(input),

  /** Gives the content ids (with each of `sections`) the account's default buckets of `defaultKind`. */
  async applyDefaults(
    db: Knex,
    userId: string,
    defaultKind: string,
    contentKind: string,
    contentIds: readonly string[],
    sections: readonly string[],
    now: number,
  ): Promise<void> {
    await defaultsApply(db, { userId, defaultKind, contentKind, contentIds, sections, now });
  },
};

export const defaultsRepo = {
  /** The kind's default buckets, oldest bucket first. */
  async list(db: Knex, userId: string, kind: string): Promise<string[]> {
    return (await defaultsList(db, { userId, kind })).map((r) => r.id);
  },

  /** Replaces a kind's defaults; concurrent replacements of one account's defaults run one after the other. */
  async replace(trx: Knex.Transaction, userId: string, kind: string, bucketIds: readonly string[]): Promise<void> {
    await accountLock(trx, { userId });
    await defaultsDelete(trx, { userId, kind });
    await defaultsInsert(trx, { userId, kind, bucketIds });
  },
};

export const assignmentsRepo = {
  /**
   * Which of `ids` name an existing target of `kind` for the account, in one statement. Those rows
   * stay locked until the transaction ends: `share` keeps them from being purged meanwhile (so no
   * assignment outlives its content); `update` also serialises writers of the same target, so
   * concurrent replacements of its buckets run one after the other.
   */
  async ownedTargets(
    trx: Knex.Transaction,
    userId: string,
    kind: TargetKind,
    ids: readonly string[],
    lock: TargetLock,
  ): Promise<Set<string>> {
    const rows = await ownedTargets(trx, { userId, kind, ids, lock });
    return new Set(rows.map((r) => r.id));
  },

  /**
   * The buckets of one target, oldest bucket first, in one statement: null when the target does
   * not exist for the account (unknown, another account's, in the trash, or no friendship).
   */
  async bucketsOf(db: Knex, userId: string, kind: TargetKind, id: string, section: string): Promise<string[] | null> {
    const rows = await targetBuckets(db, { userId, kind, id, section });
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
    await assignmentsDelete(trx, { userId, kind, id, section });
    await assignmentsInsert(trx, { userId, kind, id, section, bucketIds, now });
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
    await assignmentsAddMany(trx, { userId, kind, bucketId, ids, now });
  },

  /** Takes one bucket from many targets: one statement. */
  async removeMany(
    trx: Knex.Transaction,
    userId: string,
    kind: TargetKind,
    bucketId: string,
    ids: readonly string[],
  ): Promise<void> {
    await assignmentsRemoveMany(trx, { userId, kind, bucketId, ids });
  },
};

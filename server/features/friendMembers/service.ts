/**
 * Friend-scoped data, members side (docs/privacy.md, "Friend data: members side"): what a friend
 * sees of an owner's members, folders and groups, member statuses and custom fields, and the one
 * write (a custom field value). Every "may this friend see this" is a predicate of server/access
 * applied in SQL (visibleMembers, visibleContent, memberSectionsSql); hidden rows are never loaded. Each
 * read costs a constant number of statements, whatever the number of rows.
 */
import type { Knex } from 'knex';
import type { components } from '../../../generated/api.d.ts';
import {
  delegatedWrite,
  friendAccessCte,
  heldBucketsOfMemberSql,
  memberSectionsSql,
  PROFILE_SECTIONS,
  requireFriendship,
  visibleContent,
  visibleMemberRowsSql,
  visibleMembers,
  type ProfileSection,
} from '../../access/index.ts';
import { inTransaction, type Access, type PermissionGroup, type ServiceContext } from '../../core/context.ts';
import { forbidden, notFound } from '../../core/errors.ts';
import { runBuilt } from '../../db/prepared.ts';
import { setMemberValue } from '../customFields/index.ts';
import { mediaUrl, type MemberRow } from '../members/index.ts';

type Schemas = components['schemas'];
type FriendMember = Schemas['FriendMember'];
type FieldValue = string | string[];

function friendAccess(ctx: ServiceContext): Access & { level: 'friend' } {
  if (ctx.access.level !== 'friend') throw new Error('a friend route needs a friend access');
  return ctx.access as Access & { level: 'friend' };
}

/**
 * `exists (select 1 where …)` over the engine's own predicates, as a boolean column named `as`.
 */
function probe(db: Knex, where: Array<(qb: Knex.QueryBuilder) => void>, as: string): Knex.Raw {
  const sub = db.queryBuilder().select(db.raw('1'));
  for (const w of where) sub.where(w);
  return db.raw(`exists (?) as ??`, [sub, as]);
}

/** A member row as the list selects it: hidden sections are null in SQL, and the show_ flags say which. */
type MemberSelectRow = Pick<
  MemberRow,
  | 'id'
  | 'name'
  | 'display_name'
  | 'pronouns'
  | 'description'
  | 'about_tags'
  | 'profile_style'
  | 'avatar'
  | 'banner'
  | 'created_at'
  | 'updated_at'
> &
  Record<`show_${ProfileSection}`, boolean>;

/** Each profile column and the section that shows it. */
const SECTION_COLUMNS: Array<[column: string, section: ProfileSection]> = [
  ['display_name', 'displayName'],
  ['pronouns', 'pronouns'],
  ['description', 'about'],
  ['about_tags', 'about'],
  ['profile_style', 'profileStyle'],
  ['avatar', 'avatar'],
  ['banner', 'avatar'],
];

/** The member columns a friend's member rows select (the sections' columns are then nulled when hidden). */
const LIST_COLUMNS = [
  'm.id',
  'm.name',
  'm.created_at',
  'm.updated_at',
  ...SECTION_COLUMNS.map(([column]) => `m.${column}`),
];

/**
 * One member or one folder's members (`only`) among the owner's live, non-archived members the
 * friend may see (members_view, and `group` too), with per-section visibility from the engine
 * (memberSectionsSql): a hidden section's columns are null in SQL, so a hidden value never leaves
 * the database, not even into the server's memory. The visible members come first (a materialized
 * CTE, `vis`), so their assignments are read once for every section. The list (listMembers) is the
 * same shape written as text, over the engine's visible set.
 */
function membersQuery(
  db: Knex,
  access: Access,
  group: PermissionGroup,
  only: (qb: Knex.QueryBuilder) => void,
): Knex.QueryBuilder {
  // One member or one folder: narrowed first, then checked (a primary-key or folder read), with
  // the held buckets each is in, as the list's visible set carries them.
  const held = heldBucketsOfMemberSql(access, 'm');
  const visible = db('members as m')
    .select(LIST_COLUMNS)
    .select(db.raw(`${held.sql} as held_buckets`, held.bindings as Knex.Value[]))
    .where('m.user_id', access.ownerId)
    .whereNull('m.deleted_at')
    .whereNull('m.archived_at')
    .where(visibleMembers(access, 'm', group, 'read'))
    .where(only);
  const sections = memberSectionsSql(access, 'm', 'select id from vis', 'sec');
  return db
    .queryBuilder()
    .withMaterialized('vis', visible)
    .from('vis as m')
    .joinRaw(sections.sql, sections.bindings as Knex.Value[])
    .select('m.id', 'm.name', 'm.created_at', 'm.updated_at')
    .select(
      SECTION_COLUMNS.map(([column, section]) =>
        db.raw(`case when sec."show_${section}" then m.${column} end as ${column}`),
      ),
    )
    .select(PROFILE_SECTIONS.map((section) => `sec.show_${section}`))
    .orderBy([{ column: 'm.created_at' }, { column: 'm.id' }]);
}

function toFriendMember(row: MemberSelectRow, ownerId: string): FriendMember {
  return {
    _id: row.id,
    ownerUserId: ownerId,
    name: row.name,
    displayName: row.show_displayName ? (row.display_name ?? '') : null,
    pronouns: row.show_pronouns ? (row.pronouns ?? '') : null,
    description: row.show_about ? (row.description ?? '') : null,
    aboutTags: row.show_about ? row.about_tags : null,
    profileStyle: row.show_profileStyle ? row.profile_style : null,
    avatarUrl: row.show_avatar ? mediaUrl(row.id, 'avatar', row.avatar, ownerId) : null,
    backgroundUrl: row.show_avatar ? mediaUrl(row.id, 'banner', row.banner, ownerId) : null,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
  };
}

/**
 * GET /friends/{id}/members: one statement, which resolves the friendship too (friendInStatement:
 * 404 without one). The rule is membersQuery's (the visible set with the list's columns, then the
 * sections), written as text: no query builder per request.
 */
export async function listMembers(fctx: ServiceContext): Promise<FriendMember[]> {
  const access = friendAccess(fctx);
  const visible = visibleMemberRowsSql(access, 'members_view', 'read', {
    active: true,
    columns: LIST_COLUMNS.join(', '),
  });
  const sections = memberSectionsSql(access, 'm', 'select id from vis', 'sec');
  const rest = `vis as materialized (${visible.sql})
      select fa.ok, x.* from friend_access fa left join (
        select m.id, m.name, m.created_at, m.updated_at,
          ${SECTION_COLUMNS.map(([column, section]) => `case when sec."show_${section}" then m.${column} end as ${column}`).join(', ')},
          ${PROFILE_SECTIONS.map((section) => `sec."show_${section}"`).join(', ')}
        from vis m ${sections.sql}
      ) x on true
      order by x.created_at, x.id`;
  const friendship = friendAccessCte(access, rest);
  const rows = await runBuilt<{ ok: boolean } & (MemberSelectRow | Record<keyof MemberSelectRow, null>)>(
    fctx.db,
    'friend_members',
    {
      sql: `with ${friendship.sql}, ${rest}`,
      bindings: [...friendship.bindings, ...visible.bindings, ...sections.bindings],
    },
  );
  requireFriendship(rows[0]?.ok);
  return rows
    .filter((r): r is { ok: boolean } & MemberSelectRow => r.id !== null)
    .map((r) => toFriendMember(r, access.ownerId));
}

/** GET /friends/{id}/members/{memberId}: also needs member_profile at read (members.profile.read). */
export async function getMember(fctx: ServiceContext, memberId: string): Promise<FriendMember> {
  const access = friendAccess(fctx);
  const row: MemberSelectRow | undefined = await membersQuery(fctx.db, access, 'member_profile', (qb) =>
    qb.where('m.id', memberId),
  ).first();
  if (!row) throw notFound('Member not found');
  return toFriendMember(row, access.ownerId);
}

// ---- Folders and groups ----

interface FolderRow {
  id: string;
  parent_id: string | null;
  name: string;
  description: string | null;
  color: string | null;
}

type FriendFolder = Schemas['FriendFolder'];

const toFolder = (r: FolderRow): FriendFolder => ({
  id: r.id,
  parentId: r.parent_id,
  name: r.name,
  description: r.description,
  color: r.color,
});

/**
 * The friend-visible folders as a recursive CTE `vis`: from the root down, each level live, a folder
 * of the owner, and visible through its own `directory` buckets (groups at read). A hidden or
 * trashed folder stops the walk, so its whole subtree stays out.
 */
function withVisibleFolders(db: Knex, access: Access): Knex.QueryBuilder {
  const visible = visibleContent(access, { kind: 'directory', column: 'd.id' }, 'groups');
  return db.queryBuilder().withRecursive('vis', (qb) => {
    qb.select('d.id', 'd.parent_id', 'd.name', 'd.description', 'd.color')
      .from('directories as d')
      .where({ 'd.user_id': access.ownerId, 'd.kind': 'folder' })
      .whereNull('d.deleted_at')
      .whereNull('d.parent_id')
      .where(visible)
      .unionAll((u) => {
        u.select('d.id', 'd.parent_id', 'd.name', 'd.description', 'd.color')
          .from('directories as d')
          .join('vis as p', 'p.id', 'd.parent_id')
          .where({ 'd.user_id': access.ownerId, 'd.kind': 'folder' })
          .whereNull('d.deleted_at')
          .where(visible);
      });
  });
}

/** GET /friends/{id}/groups: two statements (the visible folders; then the visible groups in them with their visible members). */
export async function groupTree(fctx: ServiceContext): Promise<Schemas['FriendDirectoryTree']> {
  const access = friendAccess(fctx);
  const { db } = fctx;
  const folders: FolderRow[] = await withVisibleFolders(db, access)
    .select('*')
    .from('vis')
    .orderBy([{ column: 'name' }, { column: 'id' }]);
  const folderIds = folders.map((f) => f.id);
  const members = db('group_members as gm')
    .join('members as m', function () {
      this.on('m.id', '=', 'gm.member_id').andOn('m.user_id', '=', 'gm.user_id');
    })
    .whereRaw('gm.group_id = g.id')
    .whereNull('m.deleted_at')
    .whereNull('m.archived_at')
    .where(visibleMembers(access, 'm'))
    .select(db.raw(`coalesce(json_agg(m.id order by m.created_at, m.id), '[]'::json)`));
  const groups: Array<FolderRow & { member_ids: string[] }> = await db('directories as g')
    .select('g.id', 'g.parent_id', 'g.name', 'g.description', 'g.color', db.raw('(?) as member_ids', [members]))
    .where({ 'g.user_id': access.ownerId, 'g.kind': 'group' })
    .whereNull('g.deleted_at')
    .where((qb) => {
      qb.whereNull('g.parent_id');
      if (folderIds.length > 0) qb.orWhereRaw('g.parent_id = any (?::uuid[])', [folderIds]);
    })
    .where(visibleContent(access, { kind: 'group', column: 'g.id' }, 'groups'))
    .orderBy([{ column: 'g.name' }, { column: 'g.id' }]);
  return {
    folders: folders.map(toFolder),
    groups: groups.map((g) => ({ ...toFolder(g), memberIds: g.member_ids })),
  };
}

/** GET /friends/{id}/groups/folder: two statements (the folder and its visible subfolders; the visible members in it). */
export async function folderContents(
  fctx: ServiceContext,
  folderId: string | null,
): Promise<Schemas['FriendFolderContents']> {
  const access = friendAccess(fctx);
  const { db } = fctx;
  const rows: FolderRow[] = await withVisibleFolders(db, access)
    .select('*')
    .from('vis')
    .where((qb) => {
      if (folderId === null) qb.whereNull('parent_id');
      else qb.where('id', folderId).orWhere('parent_id', folderId);
    })
    .orderBy([{ column: 'name' }, { column: 'id' }]);
  const folder = folderId === null ? null : rows.find((r) => r.id === folderId);
  if (folder === undefined) throw notFound('Folder not found');
  const members: MemberSelectRow[] = await membersQuery(db, access, 'members_view', (qb) => {
    if (folderId === null) qb.whereNull('m.directory_id');
    else qb.where('m.directory_id', folderId);
  });
  return {
    folder: folder ? toFolder(folder) : null,
    subfolders: rows.filter((r) => r.id !== folderId).map(toFolder),
    members: members.map((r) => {
      const m = toFriendMember(r, access.ownerId);
      return { id: m._id, name: m.name, displayName: m.displayName, avatarUrl: m.avatarUrl };
    }),
  };
}

// ---- Member statuses ----

type FriendMemberStatus = Schemas['FriendMemberStatus'];

/**
 * Status assignments on live, non-archived members visible with members_view and member_statuses,
 * of definitions whose own buckets grant member_statuses; with the owner's access (the caller's own
 * id), all of the caller's. One statement.
 */
function statusesQuery(db: Knex, access: Access): Knex.QueryBuilder {
  return db('member_status_assignments as a')
    .join('member_status_definitions as d', function () {
      this.on('d.id', '=', 'a.status_id').andOn('d.user_id', '=', 'a.user_id');
    })
    .join('members as m', function () {
      this.on('m.id', '=', 'a.member_id').andOn('m.user_id', '=', 'a.user_id');
    })
    .select('a.member_id', 'd.id as status_id', 'd.name', 'd.color', 'd.icon', 'a.assigned_at')
    .where('a.user_id', access.ownerId)
    .whereNull('m.deleted_at')
    .whereNull('m.archived_at')
    .where(visibleMembers(access, 'm', 'member_statuses', 'read'))
    .where(visibleContent(access, { kind: 'member_status', column: 'd.id' }, 'member_statuses'))
    .orderBy([{ column: 'm.created_at' }, { column: 'm.id' }, { column: 'a.assigned_at' }, { column: 'd.id' }]);
}

interface StatusSelectRow {
  member_id: string;
  status_id: string;
  name: string;
  color: string;
  icon: string | null;
  assigned_at: number;
}

const toStatus = (r: StatusSelectRow): FriendMemberStatus => ({
  memberId: r.member_id,
  statusId: r.status_id,
  name: r.name,
  color: r.color,
  icon: r.icon,
  assignedAt: r.assigned_at,
});

/** `ctx` is a friend context, or the caller's own (friendUserId = the caller). */
export async function listStatuses(ctx: ServiceContext): Promise<FriendMemberStatus[]> {
  const rows: StatusSelectRow[] = await statusesQuery(ctx.db, ctx.access);
  return rows.map(toStatus);
}

export async function memberStatuses(ctx: ServiceContext, memberId: string): Promise<FriendMemberStatus[]> {
  const { db, access } = ctx;
  const member = await db('members as m')
    .select('m.id')
    .where({ 'm.id': memberId, 'm.user_id': access.ownerId })
    .whereNull('m.deleted_at')
    .whereNull('m.archived_at')
    .where(visibleMembers(access, 'm', 'member_statuses', 'read'))
    .first();
  if (!member) throw notFound('Member not found');
  const rows: StatusSelectRow[] = await statusesQuery(db, access).where('a.member_id', memberId);
  return rows.map(toStatus);
}

// ---- Custom fields ----

interface MemberFieldAccess {
  id: string;
  cf_read: boolean;
  cf_write: boolean;
}

/** The member (live, not archived, members_view) and whether its buckets grant member_custom_fields at read / read_write. */
async function memberForFields(db: Knex, access: Access, memberId: string): Promise<MemberFieldAccess> {
  const member = { kind: 'member' as const, column: 'm.id' };
  const row: MemberFieldAccess | undefined = await db('members as m')
    .select('m.id')
    .select(
      probe(db, [visibleContent(access, member, 'member_custom_fields', 'read')], 'cf_read'),
      probe(db, [visibleContent(access, member, 'member_custom_fields', 'read_write')], 'cf_write'),
    )
    .where({ 'm.id': memberId, 'm.user_id': access.ownerId })
    .whereNull('m.deleted_at')
    .whereNull('m.archived_at')
    .where(visibleMembers(access, 'm'))
    .first();
  if (!row) throw notFound('Member not found');
  return row;
}

interface FieldSelectRow {
  id: string;
  name: string;
  type: Schemas['FriendCustomField']['type'];
  value: FieldValue | null;
  writable: boolean;
}

/** Live definitions whose own buckets grant member_custom_fields at read, with the member's value. */
function visibleFields(db: Knex, access: Access, memberId: string): Knex.QueryBuilder {
  const field = { kind: 'custom_field' as const, column: 'd.id' };
  return db('custom_field_definitions as d')
    .leftJoin('custom_field_values as v', function () {
      this.on('v.field_id', '=', 'd.id')
        .andOn('v.user_id', '=', 'd.user_id')
        .andOn('v.member_id', '=', db.raw('?', [memberId]));
    })
    .select(
      'd.id',
      'd.name',
      'd.type',
      'v.value',
      probe(db, [visibleContent(access, field, 'member_custom_fields', 'read_write')], 'writable'),
    )
    .where('d.user_id', access.ownerId)
    .whereNull('d.deleted_at')
    .where(visibleContent(access, field, 'member_custom_fields'));
}

/** GET /friends/{id}/custom-fields?memberId=: at most three statements. */
export async function customFields(fctx: ServiceContext, memberId: string): Promise<Schemas['FriendCustomFields']> {
  const access = friendAccess(fctx);
  const { db } = fctx;
  const member = await memberForFields(db, access, memberId);
  const rows: FieldSelectRow[] = member.cf_read
    ? await visibleFields(db, access, memberId).orderBy([
        { column: 'd.sort_order' },
        { column: 'd.created_at' },
        { column: 'd.id' },
      ])
    : [];
  let emptyHint: Schemas['FriendCustomFields']['emptyHint'] = null;
  if (rows.length === 0) {
    const any = await db('custom_field_definitions')
      .where('user_id', access.ownerId)
      .whereNull('deleted_at')
      .first(db.raw('1 as one'));
    emptyHint = any ? 'none_visible' : 'no_definitions';
  }
  return {
    fields: rows.map((r) => ({
      id: r.id,
      name: r.name,
      type: r.type,
      value: r.value ?? (r.type === 'multiselect' ? [] : ''),
      viewerCanWrite: member.cf_write && r.writable,
    })),
    emptyHint,
  };
}

/**
 * PUT /friends/{id}/custom-fields/{fieldId}/value: authorised here (member and field visible, else
 * 404; member_custom_fields read_write on both, else 403), then the owner's own service writes the
 * value (its validation included) and the audit record, in one transaction.
 */
export async function setCustomFieldValue(
  fctx: ServiceContext,
  fieldId: string,
  memberId: string,
  value: FieldValue,
): Promise<void> {
  const access = friendAccess(fctx);
  await inTransaction(fctx, async (tx) => {
    const member = await memberForFields(tx.db, access, memberId);
    const field: Pick<FieldSelectRow, 'id' | 'writable'> | undefined = member.cf_read
      ? await visibleFields(tx.db, access, memberId).where('d.id', fieldId).first()
      : undefined;
    if (!field) throw notFound('Custom field not found');
    if (!member.cf_write || !field.writable)
      throw forbidden('Your buckets do not allow changing this custom field value');
    const owner: ServiceContext = { ...tx, access: delegatedWrite(access) };
    await setMemberValue(owner, memberId, fieldId, value);
    await tx.audit.record(owner, {
      action: 'friend_write.custom_field.set_value',
      targetType: 'member',
      targetId: memberId,
      detail: { friendUserId: access.viewerId, fieldId },
    });
  });
}

/**
 * The SQL of the friend routes' members side: an owner's members, folders and groups, member
 * statuses and custom fields as one friend may see them. Every "may this friend see this" is a
 * predicate of server/access/ (the member rule, visibleContentSql, memberSectionsSql) inside the
 * statement; hidden rows are never loaded, and a hidden profile section's columns are null in SQL,
 * so a hidden value never leaves the database. The statements are committed as
 * generated/sql/friendMembers.sql.
 */
import type { Knex } from 'knex';
import type { components } from '../../../generated/api.d.ts';
import {
  EXAMPLE_ACCESS,
  FRIEND_READ_CACHE,
  memberSectionsSql,
  sectionGrantColumns,
  sectionGrantsOfMemberSql,
  PROFILE_SECTIONS,
  type ProfileSection,
  visibleContentSql,
  visibleMemberRowsSql,
  visibleMembersSql,
  withFriendAccess,
} from '../../access/index.ts';
import type { FriendAccess, InStatementFriendAccess, OwnerAccess, PermissionGroup } from '../../core/context.ts';
import { type Sql, sql } from '../../db/sql.ts';
import { EXAMPLE_UUID, statement } from '../../db/statements.ts';
import type { MemberRow } from '../members/index.ts';

const AREA = 'friendMembers';

/**
 * A member row as the reads select it: a hidden section's columns are null, and a shown section's
 * text is never null ('' when the member has none), so null says "hidden" on its own.
 */
export type MemberSelectRow = Pick<
  MemberRow,
  'id' | 'name' | 'about_tags' | 'profile_style' | 'avatar' | 'banner' | 'created_at' | 'updated_at'
> &
  Record<'display_name' | 'pronouns' | 'description', string | null>;

/** Each profile column, the section that shows it, and whether it is text shown as '' when empty. */
const SECTION_COLUMNS: ReadonlyArray<readonly [column: string, section: ProfileSection, text: boolean]> = [
  ['display_name', 'displayName', true],
  ['pronouns', 'pronouns', true],
  ['description', 'about', true],
  ['about_tags', 'about', false],
  ['profile_style', 'profileStyle', false],
  ['avatar', 'avatar', false],
  ['banner', 'avatar', false],
];

/** The member columns the reads select (the sections' columns are then nulled when hidden). */
const LIST_COLUMNS = ['id', 'name', 'created_at', 'updated_at', ...SECTION_COLUMNS.map(([column]) => column)];

const SHOW = PROFILE_SECTIONS.map((section) => `sec."show_${section}"`);

/**
 * The select list over `vis m` joined with the sections `sec` (memberSectionsSql): every profile
 * column behind its section's flag (about_tags is never null, so null is "hidden" for it too).
 */
function sectionedColumns(): Sql {
  const columns = SECTION_COLUMNS.map(([column, section, text]) => {
    const value = text ? sql`coalesce(${sql.id(`m.${column}`)}, '')` : sql.id(`m.${column}`);
    return sql`case when ${sql.constant(`sec."show_${section}"`, SHOW)} then ${value} end as ${sql.id(column)}`;
  });
  return sql`m.id, m.name, m.created_at, m.updated_at, ${sql.join(columns, ', ')}`;
}

/**
 * GET /friends/{id}/members in one statement, which also resolves the friendship (`ok`): the
 * visible set (visibleMemberRowsSql: live, not archived, members_view) with the list's columns,
 * then every profile section decided from one read of their section assignments.
 */
const friendMembersList = statement<
  { access: InStatementFriendAccess },
  { ok: boolean } & (MemberSelectRow | Record<keyof MemberSelectRow, null>)
>({
  name: 'friend_members',
  area: AREA,
  cache: FRIEND_READ_CACHE,
  variants: { 'friendship read in the statement': { access: EXAMPLE_ACCESS.inStatement } },
  build: ({ access }) =>
    withFriendAccess(
      access,
      sql`vis as not materialized (${visibleMemberRowsSql(access, 'members_view', 'read', { active: true, columns: LIST_COLUMNS })})
      select fa.ok, x.* from friend_access fa left join (
        select ${sectionedColumns()}
        from vis m ${memberSectionsSql(access, 'm', sql`select id from vis`, 'sec')}
      ) x on true
      order by x.created_at, x.id`,
    ),
});

type MemberSelection = { kind: 'member'; memberId: string } | { kind: 'folder'; folderId: string | null };

/**
 * One member, or one folder's members, among the owner's live, non-archived members the friend may
 * see (members_view, and `group` too): narrowed first, then checked (a primary-key or folder read),
 * with its section grants (sectionGrantsOfMemberSql), as the list's visible set carries them; then
 * the sections.
 */
const friendMemberRows = statement<
  { access: FriendAccess; group: PermissionGroup; only: MemberSelection },
  MemberSelectRow
>({
  name: 'friend_member_rows',
  area: AREA,
  variants: {
    'one member (member_profile)': {
      access: EXAMPLE_ACCESS.friend,
      group: 'member_profile',
      only: { kind: 'member', memberId: EXAMPLE_UUID },
    },
    'the members at the root': {
      access: EXAMPLE_ACCESS.friend,
      group: 'members_view',
      only: { kind: 'folder', folderId: null },
    },
    "a folder's members": {
      access: EXAMPLE_ACCESS.friend,
      group: 'members_view',
      only: { kind: 'folder', folderId: EXAMPLE_UUID },
    },
  },
  build: ({ access, group, only }) => {
    const which =
      only.kind === 'member'
        ? sql`m.id = ${only.memberId}`
        : only.folderId === null
          ? sql`m.directory_id is null`
          : sql`m.directory_id = ${only.folderId}`;
    const columns = sql.join(
      LIST_COLUMNS.map((c) => sql.id(`m.${c}`)),
      ', ',
    );
    return sql`with vis as materialized (
        select ${columns}, ${sectionGrantColumns('sg')}
        from members m cross join lateral (${sectionGrantsOfMemberSql(access, 'm')}) sg
        where m.user_id = ${access.ownerId} and m.deleted_at is null and m.archived_at is null
          and ${visibleMembersSql(access, 'm', group, 'read')} and ${which})
      select ${sectionedColumns()}
      from vis m ${memberSectionsSql(access, 'm', sql`select id from vis`, 'sec')}
      order by m.created_at, m.id`;
  },
});

export interface FolderRow {
  id: string;
  parent_id: string | null;
  name: string;
  description: string | null;
  color: string | null;
}

type FolderSelection = { kind: 'all' } | { kind: 'folder'; folderId: string | null };

/**
 * The friend-visible folders: a recursive walk from the root down, each level live, a folder of the
 * owner, and visible through its own `directory` buckets (groups at read). A hidden or trashed
 * folder stops the walk, so its whole subtree stays out. Then all of them, the root's, or one
 * folder and its subfolders; by name.
 */
const friendVisibleFolders = statement<{ access: FriendAccess; only: FolderSelection }, FolderRow>({
  name: 'friend_visible_folders',
  area: AREA,
  variants: {
    'every visible folder': { access: EXAMPLE_ACCESS.friend, only: { kind: 'all' } },
    'the root folders': { access: EXAMPLE_ACCESS.friend, only: { kind: 'folder', folderId: null } },
    'a folder and its subfolders': { access: EXAMPLE_ACCESS.friend, only: { kind: 'folder', folderId: EXAMPLE_UUID } },
  },
  build: ({ access, only }) => {
    const visible = visibleContentSql(access, { kind: 'directory', column: 'd.id' }, 'groups');
    const which =
      only.kind === 'all'
        ? sql.empty
        : only.folderId === null
          ? sql` where parent_id is null`
          : sql` where (id = ${only.folderId} or parent_id = ${only.folderId})`;
    return sql`with recursive vis as (
        select d.id, d.parent_id, d.name, d.description, d.color from directories d
        where d.user_id = ${access.ownerId} and d.kind = 'folder' and d.deleted_at is null and d.parent_id is null and ${visible}
        union all
        select d.id, d.parent_id, d.name, d.description, d.color from directories d join vis p on p.id = d.parent_id
        where d.user_id = ${access.ownerId} and d.kind = 'folder' and d.deleted_at is null and ${visible})
      select * from vis${which}
      order by name, id`;
  },
});

/** The visible groups at the root or in `folderIds`, each with its visible members (live, not archived) in member order. */
const friendGroups = statement<
  { access: FriendAccess; folderIds: readonly string[] },
  FolderRow & { member_ids: string[] }
>({
  name: 'friend_groups',
  area: AREA,
  variants: { 'resolved friend': { access: EXAMPLE_ACCESS.friend, folderIds: [] } },
  build: ({ access, folderIds }) => sql`select g.id, g.parent_id, g.name, g.description, g.color,
      (select coalesce(json_agg(m.id order by m.created_at, m.id), '[]'::json)
         from group_members gm join members m on m.id = gm.member_id and m.user_id = gm.user_id
        where gm.group_id = g.id and m.deleted_at is null and m.archived_at is null and ${visibleMembersSql(access, 'm')}) as member_ids
    from directories g
    where g.user_id = ${access.ownerId} and g.kind = 'group' and g.deleted_at is null
      and (g.parent_id is null or g.parent_id = any (${[...folderIds]}::uuid[]))
      and ${visibleContentSql(access, { kind: 'group', column: 'g.id' }, 'groups')}
    order by g.name, g.id`,
});

export interface StatusSelectRow {
  member_id: string;
  status_id: string;
  name: string;
  color: string;
  icon: string | null;
  assigned_at: number;
}

type StatusReader = OwnerAccess | FriendAccess;

/**
 * Status assignments on live, non-archived members visible with members_view and member_statuses,
 * of definitions whose own buckets grant member_statuses; with the owner's access (the caller's own
 * id), all of the caller's. Of every member, or of one.
 */
const friendStatuses = statement<{ access: StatusReader; memberId?: string | undefined }, StatusSelectRow>({
  name: 'friend_member_statuses',
  area: AREA,
  variants: {
    'a friend, every member': { access: EXAMPLE_ACCESS.friend },
    'a friend, one member': { access: EXAMPLE_ACCESS.friend, memberId: EXAMPLE_UUID },
    'the caller itself, every member': { access: EXAMPLE_ACCESS.owner },
    'the caller itself, one member': { access: EXAMPLE_ACCESS.owner, memberId: EXAMPLE_UUID },
  },
  build: ({ access, memberId }) => sql`select a.member_id, d.id as status_id, d.name, d.color, d.icon, a.assigned_at
    from member_status_assignments a
    join member_status_definitions d on d.id = a.status_id and d.user_id = a.user_id
    join members m on m.id = a.member_id and m.user_id = a.user_id
    where a.user_id = ${access.ownerId} and m.deleted_at is null and m.archived_at is null
      and ${visibleMembersSql(access, 'm', 'member_statuses', 'read')}
      and ${visibleContentSql(access, { kind: 'member_status', column: 'd.id' }, 'member_statuses')}${memberId === undefined ? sql.empty : sql` and a.member_id = ${memberId}`}
    order by m.created_at, m.id, a.assigned_at, d.id`,
});

/** The member, if live, not archived and visible with members_view and member_statuses. */
const friendStatusMember = statement<{ access: StatusReader; memberId: string }, { id: string }>({
  name: 'friend_status_member',
  area: AREA,
  variants: {
    'a friend': { access: EXAMPLE_ACCESS.friend, memberId: EXAMPLE_UUID },
    'the caller itself': { access: EXAMPLE_ACCESS.owner, memberId: EXAMPLE_UUID },
  },
  build: ({ access, memberId }) => sql`select m.id from members m
    where m.id = ${memberId} and m.user_id = ${access.ownerId} and m.deleted_at is null and m.archived_at is null
      and ${visibleMembersSql(access, 'm', 'member_statuses', 'read')}
    limit 1`,
});

export interface MemberFieldAccess {
  id: string;
  cf_read: boolean;
  cf_write: boolean;
}

/** The member (live, not archived, members_view) and whether its buckets grant member_custom_fields at read / read_write. */
const friendMemberFieldAccess = statement<{ access: FriendAccess; memberId: string }, MemberFieldAccess>({
  name: 'friend_member_field_access',
  area: AREA,
  variants: { 'resolved friend': { access: EXAMPLE_ACCESS.friend, memberId: EXAMPLE_UUID } },
  build: ({ access, memberId }) => {
    const member = { kind: 'member' as const, column: 'm.id' };
    return sql`select m.id,
        ${visibleContentSql(access, member, 'member_custom_fields', 'read')} as cf_read,
        ${visibleContentSql(access, member, 'member_custom_fields', 'read_write')} as cf_write
      from members m
      where m.id = ${memberId} and m.user_id = ${access.ownerId} and m.deleted_at is null and m.archived_at is null
        and ${visibleMembersSql(access, 'm')}
      limit 1`;
  },
});

export interface FieldSelectRow {
  id: string;
  name: string;
  type: components['schemas']['FriendCustomField']['type'];
  value: string | string[] | null;
  writable: boolean;
}

/** Live definitions whose own buckets grant member_custom_fields at read, with the member's value: all in order, or one. */
const friendFields = statement<
  { access: FriendAccess; memberId: string; fieldId?: string | undefined },
  FieldSelectRow
>({
  name: 'friend_custom_fields',
  area: AREA,
  variants: {
    'every visible field': { access: EXAMPLE_ACCESS.friend, memberId: EXAMPLE_UUID },
    'one field': { access: EXAMPLE_ACCESS.friend, memberId: EXAMPLE_UUID, fieldId: EXAMPLE_UUID },
  },
  build: ({ access, memberId, fieldId }) => {
    const field = { kind: 'custom_field' as const, column: 'd.id' };
    const which =
      fieldId === undefined ? sql` order by d.sort_order, d.created_at, d.id` : sql` and d.id = ${fieldId} limit 1`;
    return sql`select d.id, d.name, d.type, v.value,
        ${visibleContentSql(access, field, 'member_custom_fields', 'read_write')} as writable
      from custom_field_definitions d
      left join custom_field_values v on v.field_id = d.id and v.user_id = d.user_id and v.member_id = ${memberId}
      where d.user_id = ${access.ownerId} and d.deleted_at is null
        and ${visibleContentSql(access, field, 'member_custom_fields')}${which}`;
  },
});

/** Whether the owner has any live custom field definition (the empty list's hint). */
const ownerHasFields = statement<{ ownerId: string }, { one: number }>({
  name: 'friend_owner_has_fields',
  area: AREA,
  variants: { 'the owner': { ownerId: EXAMPLE_UUID } },
  build: ({ ownerId }) =>
    sql`select 1 as one from custom_field_definitions where user_id = ${ownerId} and deleted_at is null limit 1`,
});

export const friendMembersRepo = {
  list: (db: Knex, access: InStatementFriendAccess) => friendMembersList(db, { access }),
  async member(db: Knex, access: FriendAccess, memberId: string): Promise<MemberSelectRow | undefined> {
    const [row] = await friendMemberRows(db, { access, group: 'member_profile', only: { kind: 'member', memberId } });
    return row;
  },
  folderMembers: (db: Knex, access: FriendAccess, folderId: string | null) =>
    friendMemberRows(db, { access, group: 'members_view', only: { kind: 'folder', folderId } }),
  visibleFolders: (db: Knex, access: FriendAccess, only: FolderSelection) => friendVisibleFolders(db, { access, only }),
  groups: (db: Knex, access: FriendAccess, folderIds: readonly string[]) => friendGroups(db, { access, folderIds }),
  statuses: (db: Knex, access: StatusReader, memberId?: string) => friendStatuses(db, { access, memberId }),
  async statusMemberVisible(db: Knex, access: StatusReader, memberId: string): Promise<boolean> {
    return (await friendStatusMember(db, { access, memberId })).length > 0;
  },
  async memberFieldAccess(db: Knex, access: FriendAccess, memberId: string): Promise<MemberFieldAccess | undefined> {
    const [row] = await friendMemberFieldAccess(db, { access, memberId });
    return row;
  },
  fields: (db: Knex, access: FriendAccess, memberId: string) => friendFields(db, { access, memberId }),
  async field(db: Knex, access: FriendAccess, memberId: string, fieldId: string): Promise<FieldSelectRow | undefined> {
    const [row] = await friendFields(db, { access, memberId, fieldId });
    return row;
  },
  async ownerHasFields(db: Knex, ownerId: string): Promise<boolean> {
    return (await ownerHasFields(db, { ownerId })).length > 0;
  },
};

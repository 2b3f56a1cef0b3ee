/**
 * Friend-scoped data, members side (docs/privacy.md, "Friend data: members side"): what a friend
 * sees of an owner's members, folders and groups, member statuses and custom fields, and the one
 * write (a custom field value). Every "may this friend see this" is a predicate of server/access
 * applied in SQL (visibleMembers, visibleContent, memberSectionsSql); hidden rows are never loaded. Each
 * read costs a constant number of statements, whatever the number of rows.
 */
import type { components } from '../../../generated/api.d.ts';
import { delegatedWrite, requireFriendship } from '../../access/index.ts';
import {
  type FriendContext,
  type InStatementFriendContext,
  inTransaction,
  type OwnerContext,
  type ServiceContext,
} from '../../core/context.ts';
import { forbidden, notFound } from '../../core/errors.ts';
import { setMemberValue } from '../customFields/index.ts';
import { mediaUrl } from '../members/index.ts';
import { type FolderRow, friendMembersRepo, type MemberSelectRow, type StatusSelectRow } from './repo.ts';

type Schemas = components['schemas'];
type FriendMember = Schemas['FriendMember'];
type FieldValue = string | string[];

function toFriendMember(row: MemberSelectRow, ownerId: string): FriendMember {
  return {
    _id: row.id,
    ownerUserId: ownerId,
    name: row.name,
    displayName: row.display_name,
    pronouns: row.pronouns,
    description: row.description,
    aboutTags: row.about_tags,
    profileStyle: row.profile_style,
    avatarUrl: mediaUrl(row.id, 'avatar', row.avatar, ownerId),
    backgroundUrl: mediaUrl(row.id, 'banner', row.banner, ownerId),
    createdAt: row.created_at,
    updatedAt: row.updated_at,
  };
}

/** GET /friends/{id}/members: one statement, which resolves the friendship too (404 without one). */
export async function listMembers(fctx: InStatementFriendContext): Promise<FriendMember[]> {
  const rows = await friendMembersRepo.list(fctx.db, fctx.access);
  requireFriendship(rows[0]?.ok);
  return rows
    .filter((r): r is { ok: boolean } & MemberSelectRow => r.id !== null)
    .map((r) => toFriendMember(r, fctx.access.ownerId));
}

/** GET /friends/{id}/members/{memberId}: also needs member_profile at read (members.profile.read). */
export async function getMember(fctx: FriendContext, memberId: string): Promise<FriendMember> {
  const row = await friendMembersRepo.member(fctx.db, fctx.access, memberId);
  if (!row) throw notFound('Member not found');
  return toFriendMember(row, fctx.access.ownerId);
}

// ---- Folders and groups ----

type FriendFolder = Schemas['FriendFolder'];

const toFolder = (r: FolderRow): FriendFolder => ({
  id: r.id,
  parentId: r.parent_id,
  name: r.name,
  description: r.description,
  color: r.color,
});

/** GET /friends/{id}/groups: two statements (the visible folders; then the visible groups in them with their visible members). */
export async function groupTree(fctx: FriendContext): Promise<Schemas['FriendDirectoryTree']> {
  const { db, access } = fctx;
  const folders = await friendMembersRepo.visibleFolders(db, access, { kind: 'all' });
  const groups = await friendMembersRepo.groups(
    db,
    access,
    folders.map((f) => f.id),
  );
  return {
    folders: folders.map(toFolder),
    groups: groups.map((g) => ({ ...toFolder(g), memberIds: g.member_ids })),
  };
}

/** GET /friends/{id}/groups/folder: two statements (the folder and its visible subfolders; the visible members in it). */
export async function folderContents(
  fctx: FriendContext,
  folderId: string | null,
): Promise<Schemas['FriendFolderContents']> {
  const { db, access } = fctx;
  const rows = await friendMembersRepo.visibleFolders(db, access, { kind: 'folder', folderId });
  const folder = folderId === null ? null : rows.find((r) => r.id === folderId);
  if (folder === undefined) throw notFound('Folder not found');
  const members = await friendMembersRepo.folderMembers(db, access, folderId);
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

const toStatus = (r: StatusSelectRow): FriendMemberStatus => ({
  memberId: r.member_id,
  statusId: r.status_id,
  name: r.name,
  color: r.color,
  icon: r.icon,
  assignedAt: r.assigned_at,
});

/** `ctx` is a friend context, or the caller's own (friendUserId = the caller). */
export async function listStatuses(ctx: FriendContext | OwnerContext): Promise<FriendMemberStatus[]> {
  return (await friendMembersRepo.statuses(ctx.db, ctx.access)).map(toStatus);
}

export async function memberStatuses(
  ctx: FriendContext | OwnerContext,
  memberId: string,
): Promise<FriendMemberStatus[]> {
  if (!(await friendMembersRepo.statusMemberVisible(ctx.db, ctx.access, memberId))) throw notFound('Member not found');
  return (await friendMembersRepo.statuses(ctx.db, ctx.access, memberId)).map(toStatus);
}

// ---- Custom fields ----

/** GET /friends/{id}/custom-fields?memberId=: at most three statements. */
export async function customFields(fctx: FriendContext, memberId: string): Promise<Schemas['FriendCustomFields']> {
  const { db, access } = fctx;
  const member = await friendMembersRepo.memberFieldAccess(db, access, memberId);
  if (!member) throw notFound('Member not found');
  const rows = member.cf_read ? await friendMembersRepo.fields(db, access, memberId) : [];
  let emptyHint: Schemas['FriendCustomFields']['emptyHint'] = null;
  if (rows.length === 0)
    emptyHint = (await friendMembersRepo.ownerHasFields(db, access.ownerId)) ? 'none_visible' : 'no_definitions';
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
  fctx: FriendContext,
  fieldId: string,
  memberId: string,
  value: FieldValue,
): Promise<void> {
  const { access } = fctx;
  await inTransaction(fctx, async (tx) => {
    const member = await friendMembersRepo.memberFieldAccess(tx.db, access, memberId);
    if (!member) throw notFound('Member not found');
    const field = member.cf_read ? await friendMembersRepo.field(tx.db, access, memberId, fieldId) : undefined;
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

/** Folders (a tree; a member sits in at most one), groups (named sets of members) and saved layouts. */
import { randomUUID } from 'node:crypto';
import type { Knex } from 'knex';
import type { components } from '../../../generated/api.d.ts';
import { inTransaction, oneStatement, ownerOf, type PresetId, type ServiceContext } from '../../core/context.ts';
import { badRequest, notFound } from '../../core/errors.ts';
import { toMemberSummary } from '../../core/members.ts';
import { applyDefaults } from '../privacyBuckets/index.ts';
import { type ReadScope, resolveReadScope, resolveWriteScope, type ScopeQuery } from '../systems/index.ts';
import {
  directoriesRepo,
  groupMemberRowsRepo,
  groupMembersRepo,
  layoutsRepo,
  type DirectoryChanges,
  type DirectoryKind,
  type DirectoryRow,
  type LayoutRow,
} from './repo.ts';

type Schemas = components['schemas'];
type Folder = Schemas['Folder'];
type Group = Schemas['Group'];
type FolderNode = Schemas['FolderNode'];

const LABEL: Record<DirectoryKind, string> = { folder: 'Folder', group: 'Group' };

function base(row: DirectoryRow): Folder {
  return {
    _id: row.id,
    name: row.name,
    description: row.description,
    parentId: row.parent_id,
    sideSystemId: row.side_system_id,
    subSystemId: row.sub_system_id,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
  };
}

function toGroup(row: DirectoryRow, memberIds: string[]): Group {
  return { ...base(row), color: row.color, memberIds };
}

function toLayout(row: LayoutRow): Schemas['DirectoryLayout'] {
  return {
    _id: row.id,
    directoryId: row.directory_id,
    name: row.name,
    itemIds: row.item_ids,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
  };
}

/** The parent must be a live folder of the same side system. */
async function assertParentFolder(
  db: Knex,
  userId: string,
  parentId: string,
  sideSystemId: string,
): Promise<DirectoryRow> {
  const parent = await directoriesRepo.findLive(db, userId, parentId, 'folder');
  if (!parent) throw notFound('Parent folder not found');
  if (parent.side_system_id !== sideSystemId) throw badRequest('parentId must be a folder of the same side system');
  return parent;
}

async function assertMembers(db: Knex, userId: string, memberIds: string[], sideSystemId: string): Promise<void> {
  const bad = await groupMemberRowsRepo.notInSide(db, userId, memberIds, sideSystemId);
  if (bad.length) throw badRequest(`memberIds must be live members of the group's side system; not: ${bad.join(', ')}`);
}

async function createDirectory(
  ctx: ServiceContext,
  userId: string,
  kind: DirectoryKind,
  input: ScopeQuery & PresetId & { name: string; description?: string; parentId?: string; color?: string },
  now: number,
  after?: (trx: Knex.Transaction, row: DirectoryRow) => Promise<void>,
): Promise<{ id: string }> {
  const fields = {
    id: input.id ?? randomUUID(),
    user_id: userId,
    kind,
    parent_id: input.parentId ?? null,
    name: input.name.trim(),
    description: input.description ?? null,
    color: input.color?.toUpperCase() ?? null,
    created_at: now,
    updated_at: now,
    deleted_at: null,
  };
  // In the active scope, top level, nothing to do after: one statement (directoriesRepo.create).
  if (!input.sideSystemId && !input.subSystemId && !input.parentId && !after) {
    const events = ctx.events.rows(ctx, [{ type: `${kind}.created`, area: 'groups', data: { id: fields.id } }]);
    const written = await oneStatement(ctx, (db) => directoriesRepo.create(db, fields, events), {
      body: { id: fields.id },
    });
    if (!written.scoped) throw new Error(`account ${userId} has no live active side or sub system`);
    return { id: fields.id };
  }
  return inTransaction(ctx, async (tx) => {
    const trx = tx.db;
    const scope = await resolveWriteScope(trx, userId, input);
    if (input.parentId) await assertParentFolder(trx, userId, input.parentId, scope.sideSystemId);
    const row: DirectoryRow = { ...fields, side_system_id: scope.sideSystemId, sub_system_id: scope.subSystemId };
    await directoriesRepo.insert(trx, row);
    await applyDefaults(trx, userId, kind === 'group' ? 'new_group' : 'new_directory', [row.id], now);
    await after?.(trx, row);
    await tx.events.emit(tx, { type: `${kind}.created`, area: 'groups', data: { id: row.id } });
    return { id: row.id };
  });
}

export function createFolder(ctx: ServiceContext, input: Schemas['CreateFolderRequest'] & PresetId) {
  const { now } = ctx;
  const userId = ownerOf(ctx);
  return createDirectory(ctx, userId, 'folder', input, now);
}

export function createGroup(ctx: ServiceContext, input: Schemas['CreateGroupRequest'] & PresetId) {
  const { now } = ctx;
  const userId = ownerOf(ctx);
  const memberIds = input.memberIds ?? [];
  return createDirectory(
    ctx,
    userId,
    'group',
    input,
    now,
    memberIds.length === 0
      ? undefined
      : async (trx, row) => {
          await assertMembers(trx, userId, memberIds, row.side_system_id);
          await groupMembersRepo.replace(trx, userId, row.id, memberIds, now);
        },
  );
}

async function updateDirectory(
  ctx: ServiceContext,
  userId: string,
  kind: DirectoryKind,
  id: string,
  input: { name?: string; description?: string | null; parentId?: string | null; color?: string | null },
  now: number,
): Promise<DirectoryRow> {
  return inTransaction(ctx, async (tx) => {
    const trx = tx.db;
    const row = await directoriesRepo.findLive(trx, userId, id, kind);
    if (!row) throw notFound(`${LABEL[kind]} not found`);
    const changes: DirectoryChanges = { updated_at: now };
    if (input.name !== undefined) changes.name = input.name.trim();
    if (input.description !== undefined) changes.description = input.description;
    if (input.color !== undefined) changes.color = input.color?.toUpperCase() ?? null;
    if (input.parentId !== undefined) {
      if (input.parentId !== null) {
        if (input.parentId === id) throw badRequest('Cannot move a folder into itself or one of its subfolders');
        let cur: DirectoryRow | undefined = await assertParentFolder(trx, userId, input.parentId, row.side_system_id);
        // Walk up from the new parent: meeting this folder means the move would detach a cycle.
        const seen = new Set<string>();
        while (cur) {
          if (cur.id === id) throw badRequest('Cannot move a folder into itself or one of its subfolders');
          if (!cur.parent_id || seen.has(cur.id)) break;
          seen.add(cur.id);
          cur = await directoriesRepo.findAny(trx, userId, cur.parent_id);
        }
      }
      changes.parent_id = input.parentId;
    }
    const updated = await directoriesRepo.update(trx, userId, id, changes);
    await tx.events.emit(tx, { type: `${kind}.updated`, area: 'groups', data: { id, fields: Object.keys(input) } });
    return updated;
  });
}

export async function updateFolder(
  ctx: ServiceContext,
  id: string,
  input: Schemas['UpdateFolderRequest'],
): Promise<Folder> {
  const { now } = ctx;
  const userId = ownerOf(ctx);
  return base(await updateDirectory(ctx, userId, 'folder', id, input, now));
}

export async function updateGroup(
  ctx: ServiceContext,
  id: string,
  input: Schemas['UpdateGroupRequest'],
): Promise<Group> {
  const { db, now } = ctx;
  const userId = ownerOf(ctx);
  const row = await updateDirectory(ctx, userId, 'group', id, input, now);
  const members = await groupMembersRepo.memberIdsByGroup(db, userId, [id]);
  return toGroup(row, members.get(id) ?? []);
}

export async function setGroupMembers(ctx: ServiceContext, id: string, memberIds: string[]): Promise<void> {
  const { now } = ctx;
  const userId = ownerOf(ctx);
  await inTransaction(ctx, async (tx) => {
    const trx = tx.db;
    // Locked: two replacements of one group at once would otherwise both delete its rows and then
    // insert the same pairs, and the second would fail on the primary key.
    const group = await directoriesRepo.lockLive(trx, userId, id, 'group');
    if (!group) throw notFound('Group not found');
    await assertMembers(trx, userId, memberIds, group.side_system_id);
    await groupMembersRepo.replace(trx, userId, id, memberIds, now);
    await directoriesRepo.update(trx, userId, id, { updated_at: now });
    await tx.events.emit(tx, { type: 'group.members_changed', area: 'groups', data: { id } });
  });
}

export async function trashDirectory(ctx: ServiceContext, kind: DirectoryKind, id: string): Promise<void> {
  const { now } = ctx;
  const userId = ownerOf(ctx);
  await inTransaction(ctx, async (tx) => {
    const row = await directoriesRepo.findLive(tx.db, userId, id, kind);
    if (!row) throw notFound(`${LABEL[kind]} not found`);
    await directoriesRepo.update(tx.db, userId, id, { deleted_at: now, updated_at: now });
    await tx.events.emit(tx, { type: `${kind}.trashed`, area: 'groups', data: { id } });
  });
}

export async function restoreDirectory(ctx: ServiceContext, kind: DirectoryKind, id: string): Promise<void> {
  const { now } = ctx;
  const userId = ownerOf(ctx);
  await inTransaction(ctx, async (tx) => {
    const trx = tx.db;
    const row = await directoriesRepo.findAny(trx, userId, id, kind);
    if (!row) throw notFound(`${LABEL[kind]} not found`);
    if (row.deleted_at === null) throw badRequest(`${LABEL[kind]} is not in the trash`);
    // Coming back under a folder that is itself in the trash would keep it hidden: go to the root instead.
    let parentId = row.parent_id;
    const seen = new Set<string>();
    for (let cur = parentId; cur && !seen.has(cur); ) {
      seen.add(cur);
      const ancestor = await directoriesRepo.findAny(trx, userId, cur);
      if (!ancestor || ancestor.deleted_at !== null) {
        parentId = null;
        break;
      }
      cur = ancestor.parent_id;
    }
    await directoriesRepo.update(trx, userId, id, { deleted_at: null, parent_id: parentId, updated_at: now });
    await tx.events.emit(tx, { type: `${kind}.restored`, area: 'groups', data: { id } });
  });
}

function inScope(row: { side_system_id: string; sub_system_id: string | null }, scope: ReadScope): boolean {
  return (
    (!scope.sideSystemId || row.side_system_id === scope.sideSystemId) &&
    (!scope.subSystemId || row.sub_system_id === scope.subSystemId)
  );
}

/**
 * The folders as one flat list, parents before their children: depth first from the roots, siblings
 * in the order given (name, then id). A folder whose parent is not among them (outside the scope)
 * is a root.
 */
function flatten(folders: DirectoryRow[], nodes: Map<string, FolderNode>): FolderNode[] {
  const roots: DirectoryRow[] = [];
  const children = new Map<string, DirectoryRow[]>();
  for (const f of folders) {
    if (f.parent_id && nodes.has(f.parent_id)) {
      const siblings = children.get(f.parent_id);
      if (siblings) siblings.push(f);
      else children.set(f.parent_id, [f]);
    } else roots.push(f);
  }
  const out: FolderNode[] = [];
  const stack = roots.reverse();
  for (let f = stack.pop(); f; f = stack.pop()) {
    out.push(nodes.get(f.id)!);
    const kids = children.get(f.id);
    if (kids) for (let i = kids.length - 1; i >= 0; i--) stack.push(kids[i]!);
  }
  return out;
}

export async function getTree(ctx: ServiceContext, query: ScopeQuery): Promise<Schemas['DirectoryTree']> {
  const { db } = ctx;
  const userId = ownerOf(ctx);
  const scope = await resolveReadScope(db, userId, query);
  const all = await directoriesRepo.all(db, userId);
  const byId = new Map(all.map((d) => [d.id, d]));
  // Hidden: trashed directories and everything under them.
  const hidden = (d: DirectoryRow): boolean => {
    const seen = new Set<string>();
    for (
      let cur: DirectoryRow | undefined = d;
      cur && !seen.has(cur.id);
      cur = cur.parent_id ? byId.get(cur.parent_id) : undefined
    ) {
      if (cur.deleted_at !== null) return true;
      seen.add(cur.id);
    }
    return false;
  };
  const visible = all.filter((d) => !hidden(d) && inScope(d, scope));
  const visibleFolders = new Map(visible.filter((d) => d.kind === 'folder').map((d) => [d.id, d]));
  const groups = visible.filter((d) => d.kind === 'group');
  const [memberIds, members] = await Promise.all([
    groupMembersRepo.memberIdsByGroup(
      db,
      userId,
      groups.map((g) => g.id),
    ),
    groupMemberRowsRepo.tree(db, userId, scope),
  ]);

  const nodes = new Map<string, FolderNode>();
  for (const f of visibleFolders.values()) nodes.set(f.id, { ...base(f), members: [], groups: [] });
  const tree: Schemas['DirectoryTree'] = {
    folders: flatten([...visibleFolders.values()], nodes),
    groups: [],
    members: [],
  };
  for (const g of groups) {
    const parent = g.parent_id ? nodes.get(g.parent_id) : undefined;
    (parent ? parent.groups : tree.groups).push(toGroup(g, memberIds.get(g.id) ?? []));
  }
  for (const m of members) {
    const folder = m.directory_id ? nodes.get(m.directory_id) : undefined;
    (folder ? folder.members : tree.members).push(toMemberSummary(m));
  }
  return tree;
}

export async function listLayouts(ctx: ServiceContext, directoryId?: string): Promise<Schemas['DirectoryLayout'][]> {
  const { db } = ctx;
  const userId = ownerOf(ctx);
  return (await layoutsRepo.list(db, userId, directoryId)).map(toLayout);
}

export async function createLayout(
  ctx: ServiceContext,
  input: Schemas['CreateDirectoryLayoutRequest'] & PresetId,
): Promise<{ id: string }> {
  const { db, now } = ctx;
  const userId = ownerOf(ctx);
  if (input.directoryId && !(await directoriesRepo.findLive(db, userId, input.directoryId, 'folder')))
    throw notFound('Folder not found');
  const row: LayoutRow = {
    id: input.id ?? randomUUID(),
    user_id: userId,
    directory_id: input.directoryId,
    name: input.name.trim(),
    item_ids: input.itemIds,
    created_at: now,
    updated_at: now,
    deleted_at: null,
  };
  await inTransaction(ctx, async (tx) => {
    await layoutsRepo.insert(tx.db, row);
    await tx.events.emit(tx, { type: 'layout.created', area: 'groups', data: { id: row.id } });
  });
  return { id: row.id };
}

export async function trashLayout(ctx: ServiceContext, id: string): Promise<void> {
  const { db, now } = ctx;
  const userId = ownerOf(ctx);
  const row = await layoutsRepo.findAny(db, userId, id);
  if (!row || row.deleted_at !== null) throw notFound('Directory layout not found');
  await inTransaction(ctx, async (tx) => {
    await layoutsRepo.setDeleted(tx.db, userId, id, now, now);
    await tx.events.emit(tx, { type: 'layout.trashed', area: 'groups', data: { id } });
  });
}

export async function restoreLayout(ctx: ServiceContext, id: string): Promise<void> {
  const { db, now } = ctx;
  const userId = ownerOf(ctx);
  const row = await layoutsRepo.findAny(db, userId, id);
  if (!row) throw notFound('Directory layout not found');
  if (row.deleted_at === null) throw badRequest('Directory layout is not in the trash');
  await inTransaction(ctx, async (tx) => {
    await layoutsRepo.setDeleted(tx.db, userId, id, null, now);
    await tx.events.emit(tx, { type: 'layout.restored', area: 'groups', data: { id } });
  });
}

/** The account's live folder `id` (or undefined), for areas that place items in folders. */
export function findLiveFolder(db: Knex, userId: string, id: string): Promise<DirectoryRow | undefined> {
  return directoriesRepo.findLive(db, userId, id, 'folder');
}

/** Takes the member out of the groups of other side systems than `sideSystemId` (a member moving there). */
export function leaveOtherSideGroups(db: Knex, userId: string, memberId: string, sideSystemId: string): Promise<void> {
  return directoriesRepo.dropMemberFromOtherSideGroups(db, userId, memberId, sideSystemId);
}

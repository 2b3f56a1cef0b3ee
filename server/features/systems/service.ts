/** Side and sub systems, and the active scope (see scope.ts for how other areas use it). */
import { inTransaction, oneStatement, ownerOf, type PresetId, type ServiceContext } from '../../core/context.ts';
import { randomUUID } from 'node:crypto';
import type { Knex } from 'knex';
import type { components } from '../../../generated/api.d.ts';
import { badRequest, notFound } from '../../core/errors.ts';
import type { MemberRow } from '../../core/members.ts';
import {
  type SystemScopedTable,
  systemsRepo,
  type ContextRow,
  type SubSystemRow,
  type SystemFields,
  type SystemRow,
} from './repo.ts';

type Schemas = components['schemas'];
type SideSystem = Schemas['SideSystem'];
type SubSystem = Schemas['SubSystem'];
type ActiveContext = Schemas['ActiveSystemContext'];

/** Every account has one side system from creation on, and it is the active one. */
export async function createInitialSideSystem(
  trx: Knex.Transaction,
  userId: string,
  now: number,
  /** Fixture mode only (server/fixtures/): the id it gets. */
  presetId?: string,
): Promise<void> {
  const id = presetId ?? randomUUID();
  await systemsRepo.insertSide(trx, {
    id,
    user_id: userId,
    name: 'Main system',
    description: null,
    icon: null,
    tag_code: null,
    tag_color: null,
    created_at: now,
    updated_at: now,
    deleted_at: null,
  });
  await systemsRepo.upsertContext(trx, {
    user_id: userId,
    side_system_id: id,
    sub_system_id: null,
    is_unified_view: false,
    updated_at: now,
  });
}

function optional(row: SystemRow): Partial<SideSystem> {
  const out: Partial<SideSystem> = {};
  if (row.description !== null) out.description = row.description;
  if (row.icon !== null) out.icon = row.icon;
  if (row.tag_code !== null) out.tagCode = row.tag_code;
  if (row.tag_color !== null) out.tagColor = row.tag_color;
  return out;
}

export function toSideSystem(row: SystemRow): SideSystem {
  return {
    _id: row.id,
    userId: row.user_id,
    name: row.name,
    ...optional(row),
    createdAt: row.created_at,
    updatedAt: row.updated_at,
  };
}

export function toSubSystem(row: SubSystemRow): SubSystem {
  return {
    _id: row.id,
    userId: row.user_id,
    sideSystemId: row.side_system_id,
    linkedMemberId: row.linked_member_id,
    parentSubSystemId: row.parent_sub_system_id,
    name: row.name,
    ...optional(row),
    createdAt: row.created_at,
    updatedAt: row.updated_at,
  };
}

function toContext(row: ContextRow): ActiveContext {
  return {
    sideSystemId: row.side_system_id,
    subSystemId: row.sub_system_id,
    isUnifiedView: row.is_unified_view,
    updatedAt: row.updated_at,
  };
}

interface FieldInput {
  name?: string;
  description?: string | null;
  icon?: string | null;
  tagCode?: string | null;
  tagColor?: string | null;
}

function fields(input: FieldInput): SystemFields {
  const out: SystemFields = {};
  if (input.name !== undefined) out.name = input.name.trim();
  if (input.description !== undefined) out.description = input.description;
  if (input.icon !== undefined) out.icon = input.icon;
  if (input.tagCode !== undefined) out.tag_code = input.tagCode;
  if (input.tagColor !== undefined) out.tag_color = input.tagColor?.toUpperCase() ?? null;
  return out;
}

async function context(db: Knex, userId: string): Promise<ContextRow> {
  const ctx = await systemsRepo.getContext(db, userId);
  if (!ctx) throw new Error(`account ${userId} has no active system context`);
  return ctx;
}

/**
 * Locks the account's context row FOR UPDATE. Every change to the active scope and to the set of
 * side/sub systems takes it first, so those run one at a time per account, except a side
 * system's create (one statement): a side system created meanwhile can only make a delete refuse.
 */
async function lockedContext(trx: Knex.Transaction, userId: string): Promise<ContextRow> {
  const ctx = await systemsRepo.lockContext(trx, userId);
  if (!ctx) throw new Error(`account ${userId} has no active system context`);
  return ctx;
}

export async function getSystems(ctx: ServiceContext): Promise<Schemas['SystemsOverview']> {
  const { db } = ctx;
  const userId = ownerOf(ctx);
  const [active, sides, subs] = await Promise.all([
    context(db, userId),
    systemsRepo.listSides(db, userId),
    systemsRepo.listSubs(db, userId),
  ]);
  return { active: toContext(active), sideSystems: sides.map(toSideSystem), subSystems: subs.map(toSubSystem) };
}

/** The active side or sub system, or the unified view, changed. */
function scopeChanged(tx: ServiceContext, userId: string): Promise<void> {
  return tx.events.emit(tx, { type: 'system_scope.changed', area: 'systems', data: { id: userId } });
}

export async function setActive(
  ctx: ServiceContext,
  input: { sideSystemId: string; subSystemId?: string | null },
): Promise<ActiveContext> {
  const { now } = ctx;
  const userId = ownerOf(ctx);
  return inTransaction(ctx, async (tx) => {
    const trx = tx.db;
    // Under the context lock a concurrent delete cannot remove the side or sub between the check and the write.
    await lockedContext(trx, userId);
    if (!(await systemsRepo.findSide(trx, userId, input.sideSystemId))) throw notFound('Side system not found');
    if (input.subSystemId) {
      const sub = await systemsRepo.findSub(trx, userId, input.subSystemId);
      if (!sub || sub.side_system_id !== input.sideSystemId) throw notFound('Sub system not found in that side system');
    }
    const row = await systemsRepo.upsertContext(trx, {
      user_id: userId,
      side_system_id: input.sideSystemId,
      sub_system_id: input.subSystemId ?? null,
      is_unified_view: false,
      updated_at: now,
    });
    await scopeChanged(tx, userId);
    return toContext(row);
  });
}

export async function setUnifiedView(ctx: ServiceContext, enabled: boolean): Promise<ActiveContext> {
  const { now } = ctx;
  const userId = ownerOf(ctx);
  return inTransaction(ctx, async (tx) => {
    const trx = tx.db;
    const ctx = await lockedContext(trx, userId); // else a concurrent delete's scope move could be written back
    const row = await systemsRepo.upsertContext(trx, { ...ctx, is_unified_view: enabled, updated_at: now });
    await scopeChanged(tx, userId);
    return toContext(row);
  });
}

export async function createSideSystem(
  ctx: ServiceContext,
  input: FieldInput & PresetId & { name: string },
): Promise<SideSystem> {
  const { now } = ctx;
  const userId = ownerOf(ctx);
  const row: SystemRow = {
    id: input.id ?? randomUUID(),
    user_id: userId,
    name: '',
    description: null,
    icon: null,
    tag_code: null,
    tag_color: null,
    ...fields(input),
    created_at: now,
    updated_at: now,
    deleted_at: null,
  };
  // One statement: the row and its event (systemsRepo.createSide).
  const events = ctx.events.rows(ctx, [{ type: 'side_system.created', area: 'systems', data: { id: row.id } }]);
  const created = toSideSystem(row);
  await oneStatement(ctx, (db) => systemsRepo.createSide(db, row, events), { body: created });
  return created;
}

export async function updateSideSystem(ctx: ServiceContext, id: string, input: FieldInput): Promise<SideSystem> {
  const { now } = ctx;
  const userId = ownerOf(ctx);
  // One guarded UPDATE: a side system deleted before (or while) this runs is a 404, never changed.
  return inTransaction(ctx, async (tx) => {
    const row = await systemsRepo.updateSide(tx.db, userId, id, { ...fields(input), updated_at: now });
    if (!row) throw notFound('Side system not found');
    await tx.events.emit(tx, {
      type: 'side_system.updated',
      area: 'systems',
      data: { id, fields: Object.keys(input) },
    });
    return toSideSystem(row);
  });
}

/** What each system-scoped table holds, as a delete's refusal names it. */
const LABELS: Record<SystemScopedTable, string> = {
  members: 'members',
  directories: 'groups or folders',
  entries: 'notes',
  front_sessions: 'front data',
};

/** Labels of the data (trashed included) that still sits in a side or sub system. */
async function remainingData(
  db: Knex,
  userId: string,
  column: 'side_system_id' | 'sub_system_id',
  id: string,
): Promise<string[]> {
  return (await systemsRepo.tablesHolding(db, userId, column, id)).map((table) => LABELS[table]);
}

export async function deleteSideSystem(ctx: ServiceContext, id: string): Promise<void> {
  const { now } = ctx;
  const userId = ownerOf(ctx);
  await inTransaction(ctx, async (tx) => {
    const trx = tx.db;
    const ctx = await lockedContext(trx, userId);
    // FOR UPDATE waits for writes that placed data here (they share-lock the side) and blocks new ones.
    if (!(await systemsRepo.findSide(trx, userId, id, 'update'))) throw notFound('Side system not found');
    const sides = await systemsRepo.listSides(trx, userId);
    if (sides.length <= 1) throw badRequest('Cannot delete the last side system');
    const subs = await systemsRepo.countSubsOfSide(trx, userId, id);
    if (subs > 0)
      throw badRequest(`Side system still has ${subs} sub system${subs === 1 ? '' : 's'}; delete them first`);
    const held = await remainingData(trx, userId, 'side_system_id', id);
    if (held.length)
      throw badRequest(`Side system still holds ${held.join(', ')} (trashed items included); move or purge them first`);
    await systemsRepo.softDeleteSide(trx, userId, id, now);
    if (ctx.side_system_id === id) {
      const next = sides.find((s) => s.id !== id)!;
      await systemsRepo.upsertContext(trx, { ...ctx, side_system_id: next.id, sub_system_id: null, updated_at: now });
    }
    await tx.events.emit(tx, { type: 'side_system.deleted', area: 'systems', data: { id } });
  });
}

/**
 * Sub-system writes lock the context row, then the linked member (share). Notes lock in the same
 * order (context share, then their members for the cap check), and a member move holds only the
 * member and side/sub rows, never the context, so no pair of writers can wait on each other in a
 * cycle. The context lock keeps the side and parent live and stops concurrent re-parentings from
 * closing a cycle; the member's share lock keeps it from leaving the side before the link commits.
 */
async function lockForSubWrite(
  trx: Knex.Transaction,
  userId: string,
  linkedMemberId: string | undefined,
): Promise<LinkedMember | undefined> {
  await lockedContext(trx, userId);
  return linkedMemberId === undefined ? undefined : systemsRepo.shareLinkableMember(trx, userId, linkedMemberId);
}

type LinkedMember = Pick<MemberRow, 'id' | 'side_system_id'>;

function assertLinkedMember(member: LinkedMember | undefined, sideSystemId: string): void {
  if (!member || member.side_system_id !== sideSystemId)
    throw badRequest('linkedMemberId must be a member of the same side system');
}

async function assertParent(
  db: Knex,
  userId: string,
  parentId: string,
  sideSystemId: string,
  selfId?: string,
): Promise<void> {
  const parent = await systemsRepo.findSub(db, userId, parentId);
  if (!parent || parent.side_system_id !== sideSystemId)
    throw badRequest('parentSubSystemId must be a sub system of the same side system');
  if (!selfId) return;
  // The new parent, or one of its ancestors, being ourselves means the move would close a cycle.
  if (await systemsRepo.isSelfOrAncestor(db, userId, parentId, selfId))
    throw badRequest('parentSubSystemId would create a cycle');
}

export async function createSubSystem(
  ctx: ServiceContext,
  input: FieldInput &
    PresetId & { name: string; sideSystemId: string; linkedMemberId: string; parentSubSystemId?: string | null },
): Promise<SubSystem> {
  const { now } = ctx;
  const userId = ownerOf(ctx);
  return inTransaction(ctx, async (tx) => {
    const trx = tx.db;
    const member = await lockForSubWrite(trx, userId, input.linkedMemberId);
    if (!(await systemsRepo.findSide(trx, userId, input.sideSystemId))) throw notFound('Side system not found');
    assertLinkedMember(member, input.sideSystemId);
    if (input.parentSubSystemId) await assertParent(trx, userId, input.parentSubSystemId, input.sideSystemId);
    const row: SubSystemRow = {
      id: input.id ?? randomUUID(),
      user_id: userId,
      side_system_id: input.sideSystemId,
      linked_member_id: input.linkedMemberId,
      parent_sub_system_id: input.parentSubSystemId ?? null,
      name: '',
      description: null,
      icon: null,
      tag_code: null,
      tag_color: null,
      ...fields(input),
      created_at: now,
      updated_at: now,
      deleted_at: null,
    };
    await systemsRepo.insertSub(trx, row);
    await tx.events.emit(tx, { type: 'sub_system.created', area: 'systems', data: { id: row.id } });
    return toSubSystem(row);
  });
}

export async function updateSubSystem(
  ctx: ServiceContext,
  id: string,
  input: FieldInput & { linkedMemberId?: string; parentSubSystemId?: string | null },
): Promise<SubSystem> {
  const { now } = ctx;
  const userId = ownerOf(ctx);
  return inTransaction(ctx, async (tx) => {
    const trx = tx.db;
    const member = await lockForSubWrite(trx, userId, input.linkedMemberId);
    const sub = await systemsRepo.findSub(trx, userId, id);
    if (!sub) throw notFound('Sub system not found');
    const changes: Parameters<typeof systemsRepo.updateSub>[3] = { ...fields(input), updated_at: now };
    if (input.linkedMemberId !== undefined) {
      assertLinkedMember(member, sub.side_system_id);
      changes.linked_member_id = input.linkedMemberId;
    }
    if (input.parentSubSystemId !== undefined) {
      if (input.parentSubSystemId === id) throw badRequest('parentSubSystemId would create a cycle');
      if (input.parentSubSystemId !== null)
        await assertParent(trx, userId, input.parentSubSystemId, sub.side_system_id, id);
      changes.parent_sub_system_id = input.parentSubSystemId;
    }
    const row = await systemsRepo.updateSub(trx, userId, id, changes);
    await tx.events.emit(tx, { type: 'sub_system.updated', area: 'systems', data: { id, fields: Object.keys(input) } });
    return toSubSystem(row);
  });
}

export async function deleteSubSystem(ctx: ServiceContext, id: string): Promise<void> {
  const { now } = ctx;
  const userId = ownerOf(ctx);
  await inTransaction(ctx, async (tx) => {
    const trx = tx.db;
    const ctx = await lockedContext(trx, userId);
    if (!(await systemsRepo.findSub(trx, userId, id, 'update'))) throw notFound('Sub system not found');
    const held = await remainingData(trx, userId, 'sub_system_id', id);
    const children = await systemsRepo.countChildSubs(trx, userId, id);
    if (children > 0) held.push(`${children} child sub system${children === 1 ? '' : 's'}`);
    if (held.length) throw badRequest(`Sub system is still referenced by ${held.join(', ')} (trashed items included)`);
    await systemsRepo.softDeleteSub(trx, userId, id, now);
    if (ctx.sub_system_id === id)
      await systemsRepo.upsertContext(trx, { ...ctx, sub_system_id: null, updated_at: now });
    await tx.events.emit(tx, { type: 'sub_system.deleted', area: 'systems', data: { id } });
  });
}

export async function listAssignableMembers(
  ctx: ServiceContext,
  sideSystemId: string,
): Promise<Schemas['AssignableMember'][]> {
  const { db } = ctx;
  const userId = ownerOf(ctx);
  if (!(await systemsRepo.findSide(db, userId, sideSystemId))) throw notFound('Side system not found');
  const rows = await systemsRepo.listAssignableMembers(db, userId, sideSystemId);
  return rows.map((r) => ({ _id: r.id, name: r.display_name || r.name }));
}

/** The account's live side system `id`, or undefined. */
export function findSideSystem(db: Knex, userId: string, id: string): Promise<SystemRow | undefined> {
  return systemsRepo.findSide(db, userId, id);
}

/** The account's live sub system `id`, or undefined. */
export function findSubSystem(db: Knex, userId: string, id: string): Promise<SubSystemRow | undefined> {
  return systemsRepo.findSub(db, userId, id);
}

/** The live sub systems of the side system whose linked member is `memberId`, by name. */
export function subSystemsLinkedTo(
  db: Knex,
  userId: string,
  sideSystemId: string,
  memberId: string,
): Promise<SubSystemRow[]> {
  return systemsRepo.subsLinkedTo(db, userId, sideSystemId, memberId);
}

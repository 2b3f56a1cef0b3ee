/** Member status definitions (name, colour, icon) and their assignment to members. */
import { inTransaction, oneStatement, ownerOf, type PresetId, type ServiceContext } from '../../core/context.ts';
import { randomUUID } from 'node:crypto';
import type { Knex } from 'knex';
import type { components } from '../../../generated/api.d.ts';
import { notFound } from '../../core/errors.ts';
import { findLiveMember } from '../members/index.ts';
import { memberStatusesRepo, type StatusChanges, type StatusRow } from './repo.ts';

type Schemas = components['schemas'];

function toDefinition(row: StatusRow): Schemas['MemberStatusDefinition'] {
  return {
    _id: row.id,
    name: row.name,
    color: row.color,
    icon: row.icon,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
  };
}

async function findStatus(db: Knex, userId: string, id: string): Promise<StatusRow> {
  const row = await memberStatusesRepo.find(db, userId, id);
  if (!row) throw notFound('Member status not found');
  return row;
}

async function assertMember(db: Knex, userId: string, memberId: string): Promise<void> {
  if (!(await findLiveMember(db, userId, memberId))) throw notFound('Member not found');
}

export async function listStatuses(ctx: ServiceContext): Promise<Schemas['MemberStatusDefinition'][]> {
  const { db } = ctx;
  const userId = ownerOf(ctx);
  return (await memberStatusesRepo.list(db, userId)).map(toDefinition);
}

export async function createStatus(
  ctx: ServiceContext,
  input: Schemas['CreateMemberStatusRequest'] & PresetId,
): Promise<{ id: string }> {
  const { now } = ctx;
  const userId = ownerOf(ctx);
  const row: StatusRow = {
    id: input.id ?? randomUUID(),
    user_id: userId,
    name: input.name.trim(),
    color: input.color.toUpperCase(),
    icon: input.icon ?? null,
    created_at: now,
    updated_at: now,
  };
  // One statement: the row and its event (memberStatusesRepo.create).
  const events = ctx.events.rows(ctx, [
    { type: 'member_status.created', area: 'memberStatuses', data: { id: row.id } },
  ]);
  await oneStatement(ctx, (db) => memberStatusesRepo.create(db, row, events), { body: { id: row.id } });
  return { id: row.id };
}

export async function updateStatus(
  ctx: ServiceContext,
  id: string,
  input: Schemas['UpdateMemberStatusRequest'],
): Promise<Schemas['MemberStatusDefinition']> {
  const { now } = ctx;
  const userId = ownerOf(ctx);
  const changes: StatusChanges = { updated_at: now };
  if (input.name !== undefined) changes.name = input.name.trim();
  if (input.color !== undefined) changes.color = input.color.toUpperCase();
  if (input.icon !== undefined) changes.icon = input.icon;
  return inTransaction(ctx, async (tx) => {
    // One statement: a status deleted meanwhile is not found, never a half-done update.
    const row = await memberStatusesRepo.update(tx.db, userId, id, changes);
    if (!row) throw notFound('Member status not found');
    await tx.events.emit(tx, {
      type: 'member_status.updated',
      area: 'memberStatuses',
      data: { id: row.id, fields: Object.keys(input) },
    });
    return toDefinition(row);
  });
}

export async function deleteStatus(ctx: ServiceContext, id: string): Promise<void> {
  const userId = ownerOf(ctx);
  await inTransaction(ctx, async (tx) => {
    const status = await findStatus(tx.db, userId, id);
    await memberStatusesRepo.delete(tx.db, userId, id); // assignments go with it (on delete cascade)
    await tx.events.emit(tx, { type: 'member_status.deleted', area: 'memberStatuses', data: { id: status.id } });
  });
}

export async function listAssignments(
  ctx: ServiceContext,
  memberId: string,
): Promise<Schemas['MemberStatusAssignment'][]> {
  const { db } = ctx;
  const userId = ownerOf(ctx);
  await assertMember(db, userId, memberId);
  const rows = await memberStatusesRepo.assignments(db, userId, memberId);
  return rows.map((r) => ({ statusId: r.id, name: r.name, color: r.color, icon: r.icon, assignedAt: r.assigned_at }));
}

export async function assign(ctx: ServiceContext, memberId: string, statusId: string): Promise<void> {
  const { db, now } = ctx;
  const userId = ownerOf(ctx);
  await assertMember(db, userId, memberId);
  await findStatus(db, userId, statusId);
  await inTransaction(ctx, async (tx) => {
    await memberStatusesRepo.assign(tx.db, userId, memberId, statusId, now);
    await tx.events.emit(tx, {
      type: 'member_status.assigned',
      area: 'memberStatuses',
      data: { id: statusId, memberId },
    });
  });
}

export async function clear(ctx: ServiceContext, memberId: string, statusId: string): Promise<void> {
  const { db } = ctx;
  const userId = ownerOf(ctx);
  await assertMember(db, userId, memberId);
  await findStatus(db, userId, statusId);
  await inTransaction(ctx, async (tx) => {
    await memberStatusesRepo.clear(tx.db, userId, memberId, statusId);
    await tx.events.emit(tx, {
      type: 'member_status.cleared',
      area: 'memberStatuses',
      data: { id: statusId, memberId },
    });
  });
}

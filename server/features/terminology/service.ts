/**
 * Terminology rules: the global document, and the layers defaults → global → side → sub that
 * resolve into the labels in effect for a scope. Override layers store only what differs from
 * what they inherit, and disappear when nothing does.
 */
import { randomUUID } from 'node:crypto';
import type { Knex } from 'knex';
import type { components } from '../../../generated/api.d.ts';
import { inTransaction, oneStatement, ownerOf, type ServiceContext } from '../../core/context.ts';
import { badRequest, notFound } from '../../core/errors.ts';
import { findSideSystem, findSubSystem } from '../systems/index.ts';
import {
  applyChanges,
  changedLabels,
  DEFAULT_LABELS,
  diff,
  isEmptyLayer,
  overlay,
  readPatch,
  type Labels,
  type TerminologyPatch,
} from './labels.ts';
import { terminologyRepo, type OverrideRow, type TerminologyRow } from './repo.ts';

type Schemas = components['schemas'];
type TerminologyDocument = Schemas['TerminologyDocument'];
type ResolvedTerminology = Schemas['ResolvedTerminology'];
type TerminologyScope = Schemas['TerminologyScope'];

function toDocument(row: TerminologyRow): TerminologyDocument {
  const labels = overlay(DEFAULT_LABELS, row); // fills keys added after the row was written
  return { _id: row.id, _creationTime: row.created_at, userId: row.user_id, ...labels, updatedAt: row.updated_at };
}

function newGlobalRow(userId: string, labels: Labels, now: number): TerminologyRow {
  return { id: randomUUID(), user_id: userId, ...labels, created_at: now, updated_at: now };
}

export async function getTerminology(ctx: ServiceContext): Promise<TerminologyDocument | null> {
  const { db } = ctx;
  const userId = ownerOf(ctx);
  const row = await terminologyRepo.findGlobal(db, userId);
  return row ? toDocument(row) : null;
}

export async function updateTerminology(ctx: ServiceContext, patch: TerminologyPatch): Promise<TerminologyDocument> {
  const { now } = ctx;
  const userId = ownerOf(ctx);
  const changes = readPatch(patch, ''); // 400s before anything is written
  // One statement: the document created from the defaults, or its stored labels merged under its
  // row lock, with the changes over them (terminologyRepo.saveGlobal), and the event.
  const first = newGlobalRow(userId, applyChanges(DEFAULT_LABELS, changes, DEFAULT_LABELS), now);
  const events = ctx.events.rows(ctx, [{ type: 'terminology.changed', area: 'terminology', data: { id: userId } }]);
  const row = await oneStatement(ctx, (db) =>
    terminologyRepo.saveGlobal(db, first, DEFAULT_LABELS, changedLabels(changes, DEFAULT_LABELS), events),
  );
  return toDocument(row);
}

export async function resetTerminology(ctx: ServiceContext): Promise<TerminologyDocument> {
  const { now } = ctx;
  const userId = ownerOf(ctx);
  return inTransaction(ctx, async (tx) => {
    const doc = toDocument(await terminologyRepo.upsertGlobal(tx.db, newGlobalRow(userId, DEFAULT_LABELS, now)));
    await tx.events.emit(tx, { type: 'terminology.changed', area: 'terminology', data: { id: userId } });
    return doc;
  });
}

/** A side system's own layer (subSystemId null) or one sub system's layer. */
interface LayerScope {
  sideSystemId: string;
  subSystemId: string | null;
}

function scopeOf(target: LayerScope | null): TerminologyScope {
  if (!target) return { kind: 'global' };
  if (target.subSystemId) return { kind: 'sub', sideSystemId: target.sideSystemId, subSystemId: target.subSystemId };
  return { kind: 'side', sideSystemId: target.sideSystemId };
}

/** 404 unless the side system is the caller's and live, and the sub system (if any) sits in it. */
async function assertScope(db: Knex, userId: string, target: LayerScope, sideChecked = false): Promise<void> {
  if (!sideChecked && !(await findSideSystem(db, userId, target.sideSystemId))) throw notFound('Side system not found');
  if (target.subSystemId) {
    const sub = await findSubSystem(db, userId, target.subSystemId);
    if (!sub || sub.side_system_id !== target.sideSystemId) throw notFound('Sub system not found in that side system');
  }
}

interface Layers {
  global: TerminologyRow | undefined;
  side: OverrideRow | undefined;
  sub: OverrideRow | undefined;
}

async function loadOverrides(db: Knex, userId: string, target: LayerScope | null): Promise<Omit<Layers, 'global'>> {
  if (!target) return { side: undefined, sub: undefined };
  const overrides = await terminologyRepo.findOverrides(db, userId, target.sideSystemId, target.subSystemId);
  return {
    side: overrides.find((o) => o.sub_system_id === null),
    sub: target.subSystemId ? overrides.find((o) => o.sub_system_id === target.subSystemId) : undefined,
  };
}

async function loadLayers(db: Knex, userId: string, target: LayerScope | null): Promise<Layers> {
  return { global: await terminologyRepo.findGlobal(db, userId), ...(await loadOverrides(db, userId, target)) };
}

function resolve(userId: string, target: LayerScope | null, layers: Layers): ResolvedTerminology {
  const labels = overlay(overlay(overlay(DEFAULT_LABELS, layers.global), layers.side), layers.sub);
  const stored = [layers.global, layers.side, layers.sub].filter((l) => l !== undefined);
  return {
    _id: 'resolved',
    _creationTime: stored.length ? Math.min(...stored.map((l) => l.created_at)) : null,
    userId,
    ...labels,
    updatedAt: stored.length ? Math.max(...stored.map((l) => l.updated_at)) : null,
    scope: scopeOf(target),
    hasSideOverride: layers.side !== undefined,
    hasSubOverride: layers.sub !== undefined,
  };
}

export interface ResolvedQuery {
  sideSystemId?: string;
  subSystemId?: string;
}

/**
 * The global labels without a query; the side (and sub) layers only when `sideSystemId` names
 * them. The active side system does not choose a layer here: the spec asks for `sideSystemId`
 * to get a side or sub scope.
 */
export async function getResolvedTerminology(ctx: ServiceContext, query: ResolvedQuery): Promise<ResolvedTerminology> {
  const { db } = ctx;
  const userId = ownerOf(ctx);
  let target: LayerScope | null = null;
  if (query.sideSystemId !== undefined) {
    const subSystemId = query.subSystemId === undefined || query.subSystemId === 'null' ? null : query.subSystemId;
    target = { sideSystemId: query.sideSystemId, subSystemId };
    await assertScope(db, userId, target);
  } else if (query.subSystemId !== undefined) {
    throw badRequest('subSystemId needs sideSystemId');
  }
  return resolve(userId, target, await loadLayers(db, userId, target));
}

export async function updateScopedTerminology(
  ctx: ServiceContext,
  input: { sideSystemId: string; subSystemId?: string | null; terms: TerminologyPatch },
): Promise<ResolvedTerminology> {
  const { now } = ctx;
  const userId = ownerOf(ctx);
  const changes = readPatch(input.terms, 'terms.');
  const target: LayerScope = { sideSystemId: input.sideSystemId, subSystemId: input.subSystemId ?? null };
  return inTransaction(ctx, async (tx) => {
    const trx = tx.db;
    // Lock order: the global document (when it exists), then the side system. The inherited
    // labels cannot change under us, and writes to one side system's layers are serialised.
    const global = await terminologyRepo.findGlobal(trx, userId, { forUpdate: true });
    if (!(await terminologyRepo.lockSideSystem(trx, userId, target.sideSystemId)))
      throw notFound('Side system not found');
    await assertScope(trx, userId, target, true);
    const { side, sub } = await loadOverrides(trx, userId, target);

    let inherited = overlay(DEFAULT_LABELS, global);
    if (target.subSystemId) inherited = overlay(inherited, side);
    const own = target.subSystemId ? sub : side;
    const next = applyChanges(overlay(inherited, own), changes, inherited);
    const layer = diff(inherited, next);

    if (isEmptyLayer(layer)) {
      if (own) await terminologyRepo.deleteOverride(trx, userId, target.sideSystemId, target.subSystemId);
    } else if (own) {
      await terminologyRepo.updateOverride(trx, userId, own.id, layer, now);
    } else {
      await terminologyRepo.insertOverride(trx, {
        id: randomUUID(),
        user_id: userId,
        side_system_id: target.sideSystemId,
        sub_system_id: target.subSystemId,
        ...layer,
        created_at: now,
        updated_at: now,
      });
    }
    await tx.events.emit(tx, { type: 'terminology.changed', area: 'terminology', data: { id: userId } });
    return resolve(userId, target, await loadLayers(trx, userId, target));
  });
}

export async function resetScopedTerminology(
  ctx: ServiceContext,
  input: { sideSystemId: string; subSystemId?: string | null },
): Promise<ResolvedTerminology> {
  const userId = ownerOf(ctx);
  const target: LayerScope = { sideSystemId: input.sideSystemId, subSystemId: input.subSystemId ?? null };
  return inTransaction(ctx, async (tx) => {
    const trx = tx.db;
    if (!(await terminologyRepo.lockSideSystem(trx, userId, target.sideSystemId)))
      throw notFound('Side system not found');
    await assertScope(trx, userId, target, true);
    await terminologyRepo.deleteOverride(trx, userId, target.sideSystemId, target.subSystemId);
    await tx.events.emit(tx, { type: 'terminology.changed', area: 'terminology', data: { id: userId } });
    return resolve(userId, target, await loadLayers(trx, userId, target));
  });
}

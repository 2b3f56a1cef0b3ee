/**
 * Privacy buckets (docs/privacy.md): the account's buckets and their friend permissions, the
 * defaults given to new content, and which buckets each friend and each piece of content carries.
 *
 * Rules decided here:
 * - Ids in the path that are not the caller's live resource → 404 (the same answer as an unknown
 *   id); bucket ids and target ids in a body that are not the caller's → 400 naming the first, and
 *   nothing changes (the check runs before any write, in the writing transaction).
 * - Every write takes a constant number of statements whatever the number of ids: one check per
 *   kind of id (share-locking what it found, so nothing checked can be deleted before the commit),
 *   then one delete and/or one insert.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import type { Knex } from 'knex';
import type { components } from '../../../generated/api.d.ts';
import { fullAccess, permissionMap } from '../../access/index.ts';
import {
  type EventEntry,
  inTransaction,
  oneStatement,
  ownerOf,
  PERMISSION_GROUPS,
  type PermissionMap,
  type PresetId,
  type ServiceContext,
} from '../../core/context.ts';
import { badRequest, notFound } from '../../core/errors.ts';
import { ensurePresets, type DefaultKind } from './presets.ts';
import {
  assignmentsRepo,
  bucketsRepo,
  defaultsRepo,
  type BucketChanges,
  type BucketRow,
  type ReverseKind,
  type TargetKind,
} from './repo.ts';

type Schemas = components['schemas'];
type Bucket = Schemas['PrivacyBucket'];
type PermissionsPatch = Schemas['FriendPermissionsPatch'];

function storedPermissions(stored: unknown): PermissionMap {
  return permissionMap(typeof stored === 'string' ? JSON.parse(stored) : stored);
}

function toBucket(row: BucketRow): Bucket {
  return {
    _id: row.id,
    name: row.name,
    description: row.description,
    icon: row.icon,
    iconColorPreset: row.icon_color_preset,
    slug: row.slug,
    builtin: row.builtin,
    friendPermissions: storedPermissions(row.friend_permissions),
    createdAt: row.created_at,
    updatedAt: row.updated_at,
  };
}

/** `base` with the groups named in `patch` replaced. */
function merge(base: PermissionMap, patch: PermissionsPatch | undefined): PermissionMap {
  const out = { ...base };
  for (const group of PERMISSION_GROUPS) {
    const level = patch?.[group];
    if (level !== undefined) out[group] = level;
  }
  return out;
}

/** A new custom bucket's permissions before its own: full friend access. */
const FULL_FRIEND_ACCESS = fullAccess();

const BUCKET_NOT_FOUND = 'Privacy bucket not found';

export async function listBuckets(ctx: ServiceContext): Promise<Bucket[]> {
  const userId = ownerOf(ctx);
  await ensurePresets(ctx.db, userId, ctx.now);
  return (await bucketsRepo.list(ctx.db, userId)).map(toBucket);
}

export async function createBucket(
  ctx: ServiceContext,
  input: Schemas['CreatePrivacyBucketRequest'] & PresetId,
): Promise<Bucket> {
  const { now } = ctx;
  const id = input.id ?? randomUUID();
  // One statement: the row and its event (bucketsRepo.create).
  const events = ctx.events.rows(ctx, [{ type: 'privacy_bucket.created', area: 'privacyBuckets', data: { id } }]);
  const row: BucketRow = {
    id,
    user_id: ownerOf(ctx),
    slug: `u_${randomBytes(8).toString('hex')}`,
    builtin: false,
    name: input.name.trim(),
    description: input.description ?? '',
    icon: input.icon ?? null,
    icon_color_preset: input.iconColorPreset ?? null,
    friend_permissions: merge(FULL_FRIEND_ACCESS, input.friendPermissions),
    created_at: now,
    updated_at: now,
  };
  // The answer is known before the statement (toBucket orders the permissions itself, not as jsonb
  // stores them), so a keyed create stores it under the key in that statement.
  return toBucket(await oneStatement(ctx, (db) => bucketsRepo.create(db, row, events), { body: toBucket(row) }));
}

export async function getBucket(ctx: ServiceContext, id: string): Promise<Bucket> {
  const row = await bucketsRepo.find(ctx.db, ownerOf(ctx), id);
  if (!row) throw notFound(BUCKET_NOT_FOUND);
  return toBucket(row);
}

export async function updateBucket(
  ctx: ServiceContext,
  id: string,
  input: Schemas['UpdatePrivacyBucketRequest'],
): Promise<Bucket> {
  const userId = ownerOf(ctx);
  return inTransaction(ctx, async (tx) => {
    const row = await bucketsRepo.lock(tx.db, userId, id);
    if (!row) throw notFound(BUCKET_NOT_FOUND);
    const changes: BucketChanges = { updated_at: tx.now };
    if (input.name !== undefined) changes.name = input.name.trim();
    if (input.description !== undefined) changes.description = input.description;
    if (input.icon !== undefined) changes.icon = input.icon;
    if (input.iconColorPreset !== undefined) changes.icon_color_preset = input.iconColorPreset;
    if (input.friendPermissions !== undefined)
      changes.friend_permissions = merge(storedPermissions(row.friend_permissions), input.friendPermissions);
    const updated = toBucket(await bucketsRepo.update(tx.db, userId, id, changes));
    await tx.events.emit(tx, {
      type: 'privacy_bucket.updated',
      area: 'privacyBuckets',
      data: { id: updated._id, fields: Object.keys(input) },
    });
    return updated;
  });
}

export async function deleteBucket(ctx: ServiceContext, id: string): Promise<void> {
  const userId = ownerOf(ctx);
  await inTransaction(ctx, async (tx) => {
    const row = await bucketsRepo.lock(tx.db, userId, id);
    if (!row) throw notFound(BUCKET_NOT_FOUND);
    if (row.builtin) throw badRequest('Built-in privacy buckets cannot be deleted');
    await bucketsRepo.delete(tx.db, userId, id);
    await tx.events.emit(tx, { type: 'privacy_bucket.deleted', area: 'privacyBuckets', data: { id: row.id } });
  });
}

/** 400 unless every id is one of the account's buckets; share-locks them for the transaction. */
async function assertOwnBuckets(
  tx: ServiceContext & { db: Knex.Transaction },
  userId: string,
  field: string,
  ids: readonly string[],
): Promise<void> {
  const found = await bucketsRepo.shareExisting(tx.db, userId, ids);
  const foreign = ids.filter((id) => !found.has(id));
  if (foreign.length > 0) throw badRequest(`${field}: ${notA('privacy bucket', foreign)}`);
}

function notA(noun: string, ids: readonly string[]): string {
  return `not a ${noun} of this account: ${ids[0]}${ids.length > 1 ? ` (and ${ids.length - 1} more)` : ''}`;
}

export async function getDefaults(ctx: ServiceContext, kind: DefaultKind): Promise<Schemas['PrivacyBucketDefaults']> {
  return { kind, bucketIds: await defaultsRepo.list(ctx.db, ownerOf(ctx), kind) };
}

export async function setDefaults(ctx: ServiceContext, kind: DefaultKind, bucketIds: readonly string[]): Promise<void> {
  const userId = ownerOf(ctx);
  await inTransaction(ctx, async (tx) => {
    await assertOwnBuckets(tx, userId, 'bucketIds', bucketIds);
    await defaultsRepo.replace(tx.db, userId, kind, bucketIds);
    await tx.events.emit(tx, {
      type: 'privacy_bucket.defaults_changed',
      area: 'privacyBuckets',
      data: { id: userId, kind },
    });
  });
}

/** The live members, groups or folders carrying the bucket itself; null → 404. */
export async function contentOf(ctx: ServiceContext, bucketId: string, kind: ReverseKind): Promise<string[]> {
  const ids = await bucketsRepo.contentOf(ctx.db, ownerOf(ctx), bucketId, kind);
  if (!ids) throw notFound(BUCKET_NOT_FOUND);
  return ids;
}

/** How each kind of target is named in messages: the 404 of a path id, the noun of a 400. */
const TARGET_WORDS: Record<TargetKind, { notFound: string; noun: string }> = {
  member: { notFound: 'Member not found', noun: 'member' },
  profile_section: { notFound: 'Member not found', noun: 'member' },
  friend: { notFound: 'Friend not found', noun: 'friend' },
  group: { notFound: 'Group not found', noun: 'group' },
  directory: { notFound: 'Folder not found', noun: 'folder' },
  custom_field: { notFound: 'Custom field not found', noun: 'custom field' },
  side_system: { notFound: 'Side system not found', noun: 'side system' },
  sub_system: { notFound: 'Sub system not found', noun: 'sub system' },
  member_status: { notFound: 'Member status not found', noun: 'member status' },
};

export type BulkKind = Extract<TargetKind, 'friend' | 'member' | 'group' | 'directory'>;

export interface BulkInput {
  bucketId: string;
  mode: Schemas['BulkMode'];
  /** The body field holding the ids, for messages. */
  field: string;
  ids: readonly string[];
}

/** Adds or removes one bucket on many targets; any foreign id → 400 and nothing changes. */
export async function bulk(ctx: ServiceContext, kind: BulkKind, input: BulkInput): Promise<void> {
  const userId = ownerOf(ctx);
  await inTransaction(ctx, async (tx) => {
    await assertOwnBuckets(tx, userId, 'bucketId', [input.bucketId]);
    // A member's assignments update its row (members.bucket_ids, migration 0038): its lock is taken
    // here, in id order, rather than a share lock that two requests would both have to upgrade.
    const lock = kind === 'member' ? 'no key update' : 'share';
    const found = await assignmentsRepo.ownedTargets(tx.db, userId, kind, input.ids, lock);
    const foreign = input.ids.filter((id) => !found.has(id));
    if (foreign.length > 0) throw badRequest(`${input.field}: ${notA(TARGET_WORDS[kind].noun, foreign)}`);
    if (input.mode === 'add') await assignmentsRepo.addMany(tx.db, userId, kind, input.bucketId, input.ids, tx.now);
    else await assignmentsRepo.removeMany(tx.db, userId, kind, input.bucketId, input.ids);
    await tx.events.emitMany(
      tx,
      [...new Set(input.ids.map((i) => i.toLowerCase()))].map((id) => assignedEvent(kind, id)),
    );
  });
}

/** The buckets one target carries, oldest first; 404 when the target is not the account's (live) one. */
export async function bucketsOf(ctx: ServiceContext, kind: TargetKind, id: string, section = ''): Promise<string[]> {
  const ids = await assignmentsRepo.bucketsOf(ctx.db, ownerOf(ctx), kind, id, section);
  if (!ids) throw notFound(TARGET_WORDS[kind].notFound);
  return ids;
}

/** Replaces the buckets of one target: 404 for the target, then 400 for a foreign bucket; nothing changes on either. */
export async function setBucketsOf(
  ctx: ServiceContext,
  kind: TargetKind,
  id: string,
  bucketIds: readonly string[],
  section = '',
): Promise<void> {
  const userId = ownerOf(ctx);
  await inTransaction(ctx, async (tx) => {
    const found = await assignmentsRepo.ownedTargets(tx.db, userId, kind, [id], 'update');
    if (!found.has(id)) throw notFound(TARGET_WORDS[kind].notFound);
    await assertOwnBuckets(tx, userId, 'bucketIds', bucketIds);
    await assignmentsRepo.replace(tx.db, userId, kind, id, section, bucketIds, tx.now);
    await tx.events.emit(tx, assignedEvent(kind, id.toLowerCase()));
  });
}

/** `privacy_bucket.assigned` for one target (a friend's goes with that account: `about`). */
function assignedEvent(kind: TargetKind, id: string): EventEntry & { about?: string } {
  return {
    type: 'privacy_bucket.assigned',
    area: 'privacyBuckets',
    data: { id, kind },
    ...(kind === 'friend' ? { about: id } : {}),
  };
}

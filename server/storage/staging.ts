/**
 * Staged uploads: the upload-intent flow messaging (attachments, space icons) builds on.
 *
 *   1. createUploadIntent: a row in staged_uploads and a presigned PUT for staging/<user>/<id>,
 *      bound to the declared content type and exact byte size. The client uploads straight to the
 *      bucket (S3) or to this server (filesystem backend).
 *   2. completeUpload: the bytes are there, of the declared size, and their first bytes match the
 *      declared type (sniff.ts). A mismatch deletes the object (the intent stays, the client may
 *      upload again while its URL lasts).
 *   3. consumeStagedUpload, inside the feature's transaction: moves the object to its final key and
 *      deletes the row.
 *
 * Whatever is not consumed before `expires_at` is deleted, object and row, by garbage collection
 * (gc.ts), as are staged objects left without a row (an account deleted meanwhile).
 *
 * Errors are StagingError with a reason; the HTTP edge of each feature maps them (404, 409, 400, 415).
 */
import { randomUUID } from 'node:crypto';
import type { Knex } from 'knex';
import { sql } from '../db/sql.ts';
import { EXAMPLE_UUID, statement } from '../db/statements.ts';
import { contentMatchesType, isVerifiableContentType, SNIFF_BYTES } from './sniff.ts';
import type { ObjectStorage, PresignedRequest } from './types.ts';

export const STAGING_PREFIX = 'staging/';

export function stagingKey(userId: string, stagingId: string): string {
  return `${STAGING_PREFIX}${userId}/${stagingId}`;
}

export type StagingErrorReason =
  /** No such intent for this account (or purpose), or it has expired. */
  | 'not_found'
  /** The content type cannot be verified, so it cannot be staged. */
  | 'unsupported_type'
  /** Declared size above the caller's limit. */
  | 'too_large'
  /** Complete (or consume) before the bytes arrived. */
  | 'not_uploaded'
  /** Consume before complete. */
  | 'not_completed'
  /** Stored size differs from the declared one. */
  | 'size_mismatch'
  /** The bytes are not of the declared type. */
  | 'type_mismatch';

export class StagingError extends Error {
  constructor(
    readonly reason: StagingErrorReason,
    message: string,
  ) {
    super(message);
    this.name = 'StagingError';
  }
}

export interface StagedUpload {
  id: string;
  userId: string;
  purpose: string;
  key: string;
  contentType: string;
  byteSize: number;
  metadata: Record<string, unknown>;
  state: 'pending' | 'ready';
  etag: string | null;
  createdAt: number;
  expiresAt: number;
}

interface StagedRow {
  id: string;
  user_id: string;
  purpose: string;
  object_key: string;
  content_type: string;
  byte_size: number | string;
  metadata: Record<string, unknown> | string;
  state: 'pending' | 'ready';
  etag: string | null;
  created_at: number | string;
  completed_at: number | string | null;
  expires_at: number | string;
}

function toStaged(row: StagedRow): StagedUpload {
  return {
    id: row.id,
    userId: row.user_id,
    purpose: row.purpose,
    key: row.object_key,
    contentType: row.content_type,
    byteSize: Number(row.byte_size),
    metadata: typeof row.metadata === 'string' ? (JSON.parse(row.metadata) as Record<string, unknown>) : row.metadata,
    state: row.state,
    etag: row.etag,
    createdAt: Number(row.created_at),
    expiresAt: Number(row.expires_at),
  };
}

export interface UploadIntentInput {
  /** Fixture mode only (server/fixtures/, PresetId): the staging id instead of a random one. */
  id?: string;
  userId: string;
  /** What the upload is for (`message-attachment`, `space-icon`); consume checks it. */
  purpose: string;
  contentType: string;
  byteSize: number;
  /** The feature's own size limit for this purpose. */
  maxBytes: number;
  /** Content types the feature accepts for this purpose (each must be verifiable: sniff.ts). */
  allowedTypes?: readonly string[];
  /** Kept with the intent for the feature (file name, dimensions, …). */
  metadata?: Record<string, unknown>;
  now: number;
  /** Validity of the upload URL. */
  urlTtlSeconds: number;
  /** Life of the staged upload; longer than the URL's. */
  stagingTtlMs: number;
}

export interface UploadIntent {
  stagingId: string;
  upload: PresignedRequest;
  /** When the staged upload (not the URL) expires, epoch ms. */
  expiresAt: number;
}

const AREA = 'storage';

const insertStaged = statement<
  {
    id: string;
    userId: string;
    purpose: string;
    key: string;
    contentType: string;
    byteSize: number;
    metadata: string;
    now: number;
    expiresAt: number;
  },
  never
>({
  name: 'staged_upload_insert',
  area: AREA,
  variants: {
    'an intent': {
      id: EXAMPLE_UUID,
      userId: EXAMPLE_UUID,
      purpose: 'space-icon',
      key: 'staging/x',
      contentType: 'image/png',
      byteSize: 1,
      metadata: '{}',
      now: 0,
      expiresAt: 0,
    },
  },
  build: (p) =>
    sql`insert into staged_uploads (id, user_id, purpose, object_key, content_type, byte_size, metadata, state, created_at, expires_at)
      values (${p.id}::uuid, ${p.userId}::uuid, ${p.purpose}::text, ${p.key}::text, ${p.contentType}::text, ${p.byteSize}::bigint, ${p.metadata}::jsonb, 'pending', ${p.now}::bigint, ${p.expiresAt}::bigint)`,
});

const findLiveStaged = statement<{ userId: string; stagingId: string; now: number; lock: boolean }, StagedRow>({
  name: 'staged_upload_live',
  area: AREA,
  variants: {
    read: { userId: EXAMPLE_UUID, stagingId: EXAMPLE_UUID, now: 0, lock: false },
    'locked (consuming it)': { userId: EXAMPLE_UUID, stagingId: EXAMPLE_UUID, now: 0, lock: true },
  },
  build: ({ userId, stagingId, now, lock }) =>
    sql`select * from staged_uploads where id = ${stagingId}::uuid and user_id = ${userId}::uuid and expires_at > ${now}::bigint limit 1${lock ? sql` for update` : sql.empty}`,
});

const markStagedReady = statement<{ id: string; userId: string; etag: string | null; now: number }, StagedRow>({
  name: 'staged_upload_ready',
  area: AREA,
  variants: { 'bytes checked': { id: EXAMPLE_UUID, userId: EXAMPLE_UUID, etag: 'e', now: 0 } },
  build: ({ id, userId, etag, now }) =>
    sql`update staged_uploads set state = 'ready', etag = ${etag}::text, completed_at = ${now}::bigint
      where id = ${id}::uuid and user_id = ${userId}::uuid returning *`,
});

const deleteStaged = statement<{ id: string }, never>({
  name: 'staged_upload_delete',
  area: AREA,
  variants: { consumed: { id: EXAMPLE_UUID } },
  build: ({ id }) => sql`delete from staged_uploads where id = ${id}::uuid`,
});

/**
 * Registers an intent and presigns its upload. Pass the feature's transaction as `db` if it has
 * one: the URL is only handed out after the row commits, which is what lets garbage collection
 * delete any staged object that has no row.
 */
export async function createUploadIntent(
  db: Knex,
  storage: ObjectStorage,
  input: UploadIntentInput,
): Promise<UploadIntent> {
  const contentType = input.contentType.toLowerCase();
  if (!isVerifiableContentType(contentType) || (input.allowedTypes && !input.allowedTypes.includes(contentType))) {
    throw new StagingError('unsupported_type', `Uploads of ${input.contentType} are not accepted here`);
  }
  if (input.byteSize > input.maxBytes)
    throw new StagingError('too_large', `byteSize must be at most ${input.maxBytes}`);
  const id = input.id ?? randomUUID();
  const key = stagingKey(input.userId, id);
  const expiresAt = input.now + input.stagingTtlMs;
  const upload = await storage.presignPut(key, contentType, input.byteSize, input.urlTtlSeconds);
  await insertStaged(db, {
    id,
    userId: input.userId,
    purpose: input.purpose,
    key,
    contentType,
    byteSize: input.byteSize,
    metadata: JSON.stringify(input.metadata ?? {}),
    now: input.now,
    expiresAt,
  });
  return { stagingId: id, upload, expiresAt };
}

async function findLive(db: Knex, userId: string, stagingId: string, now: number, lock = false): Promise<StagedRow> {
  const [row] = await findLiveStaged(db, { userId, stagingId, now, lock });
  if (!row) throw new StagingError('not_found', 'Staged upload not found');
  return row;
}

/** The first bytes of an object (all of it when shorter). */
async function readHead(storage: ObjectStorage, key: string, size: number): Promise<Buffer | null> {
  if (size === 0) return Buffer.alloc(0);
  const object = await storage.getStream(key, { range: { start: 0, end: Math.min(size, SNIFF_BYTES) - 1 } });
  if (!object) return null;
  const chunks: Buffer[] = [];
  let length = 0;
  for await (const chunk of object.body) {
    chunks.push(chunk as Buffer);
    length += (chunk as Buffer).length;
    if (length >= SNIFF_BYTES) {
      object.body.destroy();
      break;
    }
  }
  return Buffer.concat(chunks).subarray(0, SNIFF_BYTES);
}

/**
 * Checks the uploaded bytes against the intent and marks it ready. Idempotent: completing a ready
 * upload returns it unchanged.
 */
export async function completeUpload(
  db: Knex,
  storage: ObjectStorage,
  input: { userId: string; stagingId: string; now: number },
): Promise<StagedUpload> {
  const row = await findLive(db, input.userId, input.stagingId, input.now);
  if (row.state === 'ready') return toStaged(row);
  const head = await storage.head(row.object_key);
  if (!head) throw new StagingError('not_uploaded', 'Nothing has been uploaded for this staged upload yet');
  const byteSize = Number(row.byte_size);
  if (head.size !== byteSize) {
    await storage.delete(row.object_key);
    throw new StagingError('size_mismatch', `The upload has ${head.size} bytes; ${byteSize} were declared`);
  }
  const first = await readHead(storage, row.object_key, head.size);
  if (!first) throw new StagingError('not_uploaded', 'Nothing has been uploaded for this staged upload yet');
  if (!contentMatchesType(row.content_type, first)) {
    await storage.delete(row.object_key);
    throw new StagingError('type_mismatch', `The uploaded bytes are not ${row.content_type}`);
  }
  const [updated] = await markStagedReady(db, { id: row.id, userId: input.userId, etag: head.etag, now: input.now });
  if (!updated) throw new StagingError('not_found', 'Staged upload not found');
  return toStaged(updated);
}

/**
 * Takes a completed upload for `purpose`: moves its object to `finalKey` and deletes the intent.
 * Call it inside the transaction that records the object's new owner (a message, a space), so the
 * row's deletion commits with that reference. If that transaction rolls back after the move, the
 * intent is back but its object already sits at `finalKey`: a retry finds it moved (the storage's
 * move treats that as done).
 */
export async function consumeStagedUpload(
  trx: Knex,
  storage: ObjectStorage,
  input: { userId: string; stagingId: string; purpose: string; finalKey: string; now: number },
): Promise<StagedUpload> {
  const row = await findLive(trx, input.userId, input.stagingId, input.now, true);
  if (row.purpose !== input.purpose) throw new StagingError('not_found', 'Staged upload not found');
  if (row.state !== 'ready') throw new StagingError('not_completed', 'The staged upload has not been completed');
  if (!(await storage.move(row.object_key, input.finalKey)))
    throw new StagingError('not_uploaded', 'The staged upload has no object');
  await deleteStaged(trx, { id: row.id });
  return { ...toStaged(row), key: input.finalKey };
}

/**
 * Native exports: `POST /api/v1/exports` queues a job of the durable queue that writes the
 * account's archive (nativeExport.ts) to object storage under `u/<account>/exports/<id>.tar`; the
 * export's row says how it went and, once it succeeded, hands out a short-lived download URL until
 * it expires (EXPORT_TTL_HOURS), when storage garbage collection deletes the archive.
 */
import { randomUUID } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { onBehalfOf } from '../../access/index.ts';
import {
  inTransaction,
  type OwnerContext,
  ownerOf,
  type PresetId,
  type ServerContext,
  type ServiceContext,
} from '../../core/context.ts';
import { decodeCursor, encodeCursor } from '../../core/cursor.ts';
import { notFound, unavailable } from '../../core/errors.ts';
import { pageOf } from '../../core/keyset.ts';
import type { JobQueue } from '../../jobs/queue.ts';
import type { components } from '../../../generated/api.d.ts';
import { writeNativeArchive } from './nativeExport.ts';
import { type ExportRow, exportsRepo } from './repo/exports.ts';
import { tarStream } from './tar.ts';

type Schemas = components['schemas'];

export const EXPORT_QUEUE = 'export';
/** A run longer than this is taken to have died with its worker, and another worker may start it again. */
const EXPORT_LEASE_MS = 60 * 60_000;

/** The key of an export's archive. */
export const exportKey = (userId: string, id: string) => `u/${userId}/exports/${id}.tar`;

async function toExport(ctx: ServerContext, row: ExportRow): Promise<Schemas['Export']> {
  const live =
    row.status === 'succeeded' && row.object_key !== null && row.expires_at !== null && row.expires_at > ctx.now;
  const url =
    live && ctx.storage
      ? (await ctx.storage.presignGet(row.object_key!, ctx.config.storageDownloadUrlTtlSeconds)).url
      : null;
  return {
    id: row.id,
    status: row.status,
    createdAt: row.created_at,
    startedAt: row.started_at,
    finishedAt: row.finished_at,
    expiresAt: row.expires_at,
    sizeBytes: row.size_bytes,
    downloadUrl: url,
    error: row.error,
    manifest: row.manifest,
  };
}

/** Queues the export (its row and its job commit together). */
export async function createExport(ctx: ServiceContext, preset: PresetId = {}): Promise<Schemas['ExportAccepted']> {
  if (!ctx.storage) throw unavailable('Object storage is not configured on this server: exports need it');
  const id = preset.id ?? randomUUID();
  return inTransaction(ctx, async (tx) => {
    const row = await exportsRepo.insert(tx.db, id, ownerOf(tx), tx.now);
    await tx.jobs.enqueue(tx.db, EXPORT_QUEUE, { exportId: id });
    await tx.audit.record(tx, { action: 'export.create', targetType: 'export', targetId: id });
    return { id: row.id, status: row.status };
  });
}

export async function getExport(ctx: ServiceContext, id: string): Promise<Schemas['Export']> {
  const row = await exportsRepo.find(ctx.db, ownerOf(ctx), id);
  if (!row) throw notFound('Export not found');
  return toExport(ctx, row);
}

export async function listExports(
  ctx: OwnerContext,
  query: { limit?: number; cursor?: string },
): Promise<Schemas['ExportPage']> {
  const size = query.limit ?? 50;
  const after = query.cursor ? decodeCursor<[number, string]>(query.cursor, ['integer', 'uuid']) : null;
  const rows = await exportsRepo.page(ctx.db, ownerOf(ctx), after, size);
  const { items, nextAfter } = pageOf(rows, size);
  return {
    items: await Promise.all(items.map((row) => toExport(ctx, row))),
    nextCursor: nextAfter ? encodeCursor([nextAfter.created_at, nextAfter.id]) : null,
  };
}

/**
 * One export job: claims the export, writes the archive into a temporary directory, streams it to
 * object storage and records the outcome. Anything unexpected fails the export (logged); the
 * temporary files go whatever happens. Not retried: the account can ask again.
 */
export async function runExport(base: ServerContext, exportId: string, clock: () => number): Promise<void> {
  const row = await exportsRepo.claim(base.db, exportId, base.now, base.now - EXPORT_LEASE_MS);
  if (!row) return;
  const ctx: OwnerContext = { ...base, access: onBehalfOf(row.user_id) };
  const failed = (error: string) =>
    exportsRepo.finish(base.db, row.id, {
      status: 'failed',
      objectKey: null,
      sizeBytes: null,
      manifest: null,
      error,
      finishedAt: clock(),
      expiresAt: null,
    });
  const { storage } = base;
  if (!storage) return void (await failed('Object storage is not configured on this server: exports need it'));
  const dir = await mkdtemp(join(tmpdir(), 'ada-export-'));
  const key = exportKey(row.user_id, row.id);
  try {
    const createdAt = clock();
    const archive = await writeNativeArchive(ctx, storage, dir, createdAt);
    const mtime = Math.floor(createdAt / 1000);
    await storage.upload(key, () => tarStream(archive.entries(), mtime), 'application/x-tar', archive.size);
    const finishedAt = clock();
    await exportsRepo.finish(base.db, row.id, {
      status: 'succeeded',
      objectKey: key,
      sizeBytes: archive.size,
      manifest: archive.manifest,
      error: null,
      finishedAt,
      expiresAt: finishedAt + base.config.exportTtlHours * 3_600_000,
    });
  } catch (err) {
    base.log.error({ err, exportId: row.id }, 'export failed');
    await storage.delete(key).catch(() => undefined);
    await failed('The export failed unexpectedly; the server log has the details');
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/** Registers the export queue; `context()` is taken when a job runs (the running server's settings and time). */
export function defineExports(jobs: JobQueue, context: () => ServerContext, clock: () => number): void {
  jobs.define(
    EXPORT_QUEUE,
    (job) => runExport(context(), String((job.payload as { exportId?: unknown }).exportId), clock),
    { concurrency: 1, maxAttempts: 1, leaseMs: EXPORT_LEASE_MS },
  );
}

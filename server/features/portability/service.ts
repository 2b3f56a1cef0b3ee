/**
 * Imports from other apps: the file is stored in object storage and a job of the durable queue
 * parses it (sources/*.ts) and writes it (apply.ts) in one transaction, all or nothing. A dry run
 * does the same work and rolls it back, so its report is exactly what a real run would report.
 */
import { randomUUID } from 'node:crypto';
import { createReadStream, createWriteStream } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pipeline } from 'node:stream/promises';
import type { Knex } from 'knex';
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
import type { ObjectStorage } from '../../storage/types.ts';
import { pageOf } from '../../core/keyset.ts';
import { SCOPES, type Scope } from '../../core/scopes.ts';
import type { JobQueue } from '../../jobs/queue.ts';
import type { components } from '../../../generated/api.d.ts';
import { type ApplyResult, applyBundle, entityCount } from './apply.ts';
import { CollectionsFile, NotJsonObject } from './collections.ts';
import { type ImportBundle, ImportFormatError, type ImportSource, KEPT_WARNINGS, type Streamed } from './bundle.ts';
import { type ImportOutcome, type ImportRow, importsRepo } from './repo.ts';
import { importNativeArchive } from './nativeImport.ts';
import { storableBundle, storableOutcome } from './storable.ts';
import { PLURALKIT_REVIVER, parsePluralKitFile } from './sources/pluralKit.ts';
import { parseSimplyPluralFile } from './sources/simplyPlural.ts';

type Schemas = components['schemas'];

export const IMPORT_QUEUE = 'import';
/**
 * A run longer than this is taken to have died with its worker: the queue gives the job to another
 * worker (a second attempt), which takes the import over (claim) unless the first run is still in
 * its transaction, which it then waits for (the import row's lock) and finds finished.
 */
const IMPORT_LEASE_MS = 30 * 60_000;

/** The media type each source's file is sent as (415 for another). */
export const IMPORT_MEDIA_TYPES: Record<ImportSource, string> = {
  simply_plural: 'application/json',
  pluralkit: 'application/json',
  native: 'application/x-tar',
};

/** The scopes an import of each source writes, in the order a missing one is named. */
export const IMPORT_SCOPES: Record<ImportSource, readonly Scope[]> = {
  pluralkit: ['members', 'groups', 'front', 'privacyBuckets'],
  simply_plural: ['members', 'groups', 'front', 'privacyBuckets', 'customFields', 'entries', 'messaging'],
  native: SCOPES,
};

function toImport(row: ImportRow): Schemas['Import'] {
  return {
    id: row.id,
    source: row.source,
    dryRun: row.dry_run,
    status: row.status,
    progress: { done: row.progress_done, total: row.progress_total },
    report: row.report,
    warnings: row.warnings,
    warningsOmitted: row.warnings_omitted,
    error: row.error,
    createdAt: row.created_at,
    startedAt: row.started_at,
    finishedAt: row.finished_at,
  };
}

/** An import's file as received (upload.ts): `size` bytes at `path`, until `dispose()` removes it. */
export interface ReceivedFile {
  path: string;
  size: number;
  dispose(): Promise<void>;
}

/** The object storage an import's file goes to: 503 before any of the body is read when there is none. */
export function requireImportStorage(ctx: Pick<ServiceContext, 'storage'>): ObjectStorage {
  if (!ctx.storage) throw unavailable('Object storage is not configured on this server: imports need it');
  return ctx.storage;
}

/**
 * Stores the received file (receiveImportFile: already checked) and queues its import, both or
 * neither. The file goes to object storage from disk, never held in memory.
 */
export async function createImport(
  ctx: ServiceContext,
  input: PresetId & { source: ImportSource; dryRun: boolean; file: ReceivedFile },
): Promise<Schemas['ImportAccepted']> {
  const storage = requireImportStorage(ctx);
  const native = input.source === 'native';
  const userId = ownerOf(ctx);
  const id = input.id ?? randomUUID();
  const key = `u/${userId}/imports/${id}.${native ? 'tar' : 'json'}`;
  const { path, size } = input.file;
  await storage.upload(key, () => createReadStream(path), IMPORT_MEDIA_TYPES[input.source], size);
  try {
    return await inTransaction(ctx, async (tx) => {
      const row = await importsRepo.insert(tx.db, {
        id,
        user_id: userId,
        source: input.source,
        dry_run: input.dryRun,
        status: 'queued',
        object_key: key,
        byte_size: size,
        progress_done: 0,
        progress_total: 0,
        report: {},
        warnings: [],
        warnings_omitted: 0,
        error: null,
        created_at: tx.now,
        started_at: null,
        finished_at: null,
      });
      await tx.jobs.enqueue(tx.db, IMPORT_QUEUE, { importId: id });
      await tx.audit.record(tx, {
        action: 'import.create',
        targetType: 'import',
        targetId: id,
        detail: { source: input.source, dryRun: input.dryRun, bytes: size },
      });
      return { id: row.id, status: row.status };
    });
  } catch (err) {
    await storage.delete(key).catch(() => undefined);
    throw err;
  }
}

export async function getImport(ctx: ServiceContext, id: string): Promise<Schemas['Import']> {
  const row = await importsRepo.find(ctx.db, ownerOf(ctx), id);
  if (!row) throw notFound('Import not found');
  return toImport(row);
}

export async function listImports(
  ctx: OwnerContext,
  query: { limit?: number; cursor?: string },
): Promise<Schemas['ImportPage']> {
  const size = query.limit ?? 50;
  const after = query.cursor ? decodeCursor<[number, string]>(query.cursor, ['integer', 'uuid']) : null;
  const rows = await importsRepo.page(ctx.db, ownerOf(ctx), after, size);
  const { items, nextAfter } = pageOf(rows, size);
  return {
    items: items.map(toImport),
    nextCursor: nextAfter ? encodeCursor([nextAfter.created_at, nextAfter.id]) : null,
  };
}

/** What a file that cannot be read as JSON fails with: the reason, never a 500. */
function readError(err: unknown): unknown {
  if (err instanceof RangeError) return new ImportFormatError('The file is nested too deeply to be read');
  if (err instanceof SyntaxError || err instanceof NotJsonObject)
    return new ImportFormatError(`The file is not valid JSON: ${err.message}`);
  return err;
}

/**
 * The stored file as a bundle, read a document at a time from `path` (collections.ts), so only the
 * bundle is held, never the file, its text or its parse. The small collections are read now; front
 * history and notes when the applier reads the bundle's streams, so the file stays open until
 * `close`. A document nested too deeply for the parser's stack, or bytes that are not JSON, are
 * refused with the reason (readError), now or while the streams are read.
 */
async function parse(
  source: Exclude<ImportSource, 'native'>,
  path: string,
  size: number,
): Promise<{ bundle: ImportBundle; file: CollectionsFile }> {
  const pluralKit = source === 'pluralkit';
  const file = await CollectionsFile.open(path, size, pluralKit ? { reviver: PLURALKIT_REVIVER } : {}).catch(
    (err: unknown) => {
      throw readError(err);
    },
  );
  const guarded = <T>(stream: Streamed<T>): Streamed<T> => ({
    total: stream.total,
    *read() {
      try {
        yield* stream.read();
      } catch (err) {
        throw readError(err);
      }
    },
  });
  try {
    const bundle = storableBundle(pluralKit ? parsePluralKitFile(file) : parseSimplyPluralFile(file));
    const chat = { ...bundle.chat, messages: guarded(bundle.chat.messages) };
    return { bundle: { ...bundle, sessions: guarded(bundle.sessions), notes: guarded(bundle.notes), chat }, file };
  } catch (err) {
    file.close();
    throw readError(err);
  }
}

/** The stored object copied to a temporary file (read more than once, never held in memory); null when it is gone. */
async function download(
  storage: ObjectStorage,
  key: string,
): Promise<{ path: string; size: number; dir: string } | null> {
  const stored = await storage.getStream(key);
  if (!stored) return null;
  const dir = await mkdtemp(join(tmpdir(), 'import-job-'));
  const path = join(dir, 'file');
  try {
    await pipeline(stored.body, createWriteStream(path));
  } catch (err) {
    await rm(dir, { recursive: true, force: true });
    throw err;
  }
  return { path, size: stored.size, dir };
}

/** Thrown inside a dry run's transaction to roll it back once the report is made. */
class DryRunRollback extends Error {}
/** Thrown when the import is no longer this run's (finished, or taken over after a lost lease). */
class Superseded extends Error {}

/** The report and the first KEPT_WARNINGS warnings, storable, with how many more there were. */
function outcomeOf(applied: ApplyResult): Pick<ImportOutcome, 'report' | 'warnings' | 'warningsOmitted'> {
  const { report, warnings } = storableOutcome(applied.report, applied.warnings.list);
  return {
    report,
    warnings: warnings.slice(0, KEPT_WARNINGS),
    warningsOmitted: applied.warnings.omitted + Math.max(0, warnings.length - KEPT_WARNINGS),
  };
}

/**
 * One import job: claims the import, reads and parses its file, applies it in one transaction
 * (rolled back for a dry run), and records the outcome. A file that cannot be imported fails the
 * import with the reason; an unexpected error fails it too (nothing was written) after logging.
 * Nothing is retried: the same file can be sent again.
 */
export async function runImport(
  base: ServerContext,
  importId: string,
  options: { progressDb: Knex | null; clock: () => number },
): Promise<void> {
  const { progressDb, clock } = options;
  const row = await importsRepo.claim(base.db, importId, base.now, base.now - IMPORT_LEASE_MS);
  if (!row) return;
  // The entities an import writes emit no event each: the event log's lock would be held from the
  // first of them to the import's commit, minutes on a large file, and every other write waits on it.
  // The import emits one `import.applied` as it commits instead (finishWith).
  const silent = { emit: async () => undefined, emitMany: async () => undefined, rows: () => [] };
  const ctx: OwnerContext = { ...base, events: silent, access: onBehalfOf(row.user_id) };
  const finish = (outcome: Omit<ImportOutcome, 'finishedAt'>) =>
    importsRepo.finish(base.db, row.id, { ...outcome, finishedAt: clock() });
  const failed = (error: string, total = 0) =>
    finish({ status: 'failed', report: {}, warnings: [], warningsOmitted: 0, error, done: 0, total });
  let superseded = false;
  try {
    // One import of an account at a time. A run that outlived its lease may be taken over
    // meanwhile (the claim moves started_at): the takeover waits here for this run, which then
    // finds it no longer owns the import and rolls back, and does the work itself.
    const own = async (tx: OwnerContext) => {
      await importsRepo.lockAccount(tx.db, row.user_id);
      const current = await importsRepo.find(tx.db, row.user_id, row.id);
      if (current?.status !== 'running' || current.started_at !== row.started_at) throw new Superseded();
    };
    let parseMs: number | undefined;
    const succeeded = (applied: ApplyResult): ImportOutcome => {
      base.log.info(
        {
          importId: row.id,
          source: row.source,
          dryRun: row.dry_run,
          bytes: row.byte_size,
          total: applied.total,
          parseMs,
          phasesMs: applied.phases,
        },
        'import applied',
      );
      return {
        status: 'succeeded',
        ...outcomeOf(applied),
        error: null,
        done: applied.done,
        total: applied.total,
        finishedAt: clock(),
      };
    };
    // Finished in the same transaction as the writes: never written without being reported.
    const finishWith = async (tx: OwnerContext, applied: ApplyResult) => {
      if (!(await importsRepo.finish(tx.db, row.id, succeeded(applied), row.started_at))) throw new Superseded();
      await base.events.emit(
        { ...tx, events: base.events },
        { type: 'import.applied', area: 'members', data: { id: row.id } },
      );
    };
    if (row.source === 'native') {
      if (!row.object_key || !base.storage)
        return void (await failed('The uploaded archive is no longer in object storage: send it again'));
      const setProgress = async (done: number, total: number) => {
        if (progressDb) await importsRepo.progress(progressDb, row.id, done, total);
      };
      try {
        const applied = await importNativeArchive(ctx, {
          objectKey: row.object_key,
          dryRun: row.dry_run,
          importId: row.id,
          onTotal: (total) => setProgress(0, total),
          onProgress: setProgress,
          begin: own,
          complete: finishWith,
        });
        if (row.dry_run) await importsRepo.finish(base.db, row.id, succeeded(applied));
      } catch (err) {
        if (err instanceof ImportFormatError) return void (await failed(err.message));
        if (!(err instanceof Superseded)) throw err;
        superseded = true;
      }
      return;
    }
    const stored = row.object_key && base.storage ? await download(base.storage, row.object_key) : null;
    if (!stored) return void (await failed('The uploaded file is no longer in object storage: send it again'));
    let parsed: { bundle: ImportBundle; file: CollectionsFile };
    const parseStarted = performance.now();
    try {
      parsed = await parse(row.source, stored.path, stored.size);
    } catch (err) {
      await rm(stored.dir, { recursive: true, force: true });
      if (err instanceof ImportFormatError) return void (await failed(err.message));
      throw err;
    }
    const { bundle, file } = parsed;
    const total = entityCount(bundle);
    parseMs = Math.round(performance.now() - parseStarted);
    if (progressDb) await importsRepo.progress(progressDb, row.id, 0, total);
    const onProgress = progressDb
      ? (done: number) => importsRepo.progress(progressDb, row.id, done, total).then(() => undefined)
      : async () => undefined;
    let dryResult: ApplyResult | undefined;
    try {
      await inTransaction(ctx, async (tx) => {
        await own(tx);
        const applied = await applyBundle(tx, bundle, onProgress);
        await tx.audit.record(tx, {
          action: 'import.apply',
          targetType: 'import',
          targetId: row.id,
          detail: { source: row.source, dryRun: row.dry_run, entities: total },
        });
        if (row.dry_run) {
          dryResult = applied;
          throw new DryRunRollback();
        }
        await finishWith(tx, applied);
      });
    } catch (err) {
      if (err instanceof Superseded) {
        superseded = true;
        return;
      }
      // A streamed document that is not JSON, or nested too deeply: the transaction is rolled back.
      if (err instanceof ImportFormatError) return void (await failed(err.message));
      if (!(err instanceof DryRunRollback)) throw err;
      await importsRepo.finish(base.db, row.id, succeeded(dryResult!));
    } finally {
      file.close();
      await rm(stored.dir, { recursive: true, force: true });
    }
  } catch (err) {
    base.log.error({ err, importId: row.id }, 'import failed');
    await failed('The import failed unexpectedly and wrote nothing; the server log has the details');
  } finally {
    if (row.object_key && !superseded) await base.storage?.delete(row.object_key).catch(() => undefined);
  }
}

/**
 * Registers the import queue. `progressDb` is a handle outside the import's transaction for its
 * progress (null on the embedded database, whose one connection the transaction holds: progress
 * then moves from 0 to the total when the import finishes).
 */
export function defineImports(
  jobs: JobQueue,
  context: () => ServerContext,
  options: { progressDb: Knex | null; clock: () => number },
): void {
  const run = (job: { payload: unknown }) =>
    runImport(context(), String((job.payload as { importId?: unknown }).importId), options);
  jobs.define(IMPORT_QUEUE, run, {
    concurrency: 1,
    maxAttempts: 2,
    leaseMs: IMPORT_LEASE_MS,
  });
}

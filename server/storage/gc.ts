/**
 * Storage garbage collection, one pass:
 *
 * 1. Expired staged uploads (staged_uploads.expires_at passed): object deleted, then the row.
 * 2. Staged objects without a row (the account was deleted, or a crash between the two deletes of
 *    step 1). An intent's row commits before its upload URL is handed out, so an object under
 *    staging/ whose row does not exist can never become valid again.
 * 3. Re-hosted note images (note_images) stored longer ago than the grace period that no note of
 *    their account references any more, trashed notes included (they can be restored). The
 *    reference check is SQL over one page of images at a time; each deletion then re-checks under
 *    a row lock, so a note re-hosting the same image meanwhile (which refreshes stored_at first)
 *    keeps it.
 * 4. Native exports past their expiry (exports.expires_at, EXPORT_TTL_HOURS after the archive was
 *    written): the archive deleted, then the row's key cleared (the row stays, as the account's
 *    record of the export).
 *
 * Every step works in pages and never loads a whole table. Failures to delete one object are
 * logged and retried by the next pass; the pass itself only fails on database errors.
 */
import type { Knex } from 'knex';
import type { Logger } from 'pino';
import { sql } from '../db/sql.ts';
import { EXAMPLE_UUID, statement } from '../db/statements.ts';
import { NOTE_IMAGE_REFERENCE_SQL_PATTERN, NOTE_IMAGE_URL_PREFIX, noteImageKey } from './noteImages.ts';
import { STAGING_PREFIX } from './staging.ts';
import type { ObjectStorage } from './types.ts';

export interface GarbageCollectionOptions {
  db: Knex;
  storage: ObjectStorage;
  /** Epoch ms of this pass. */
  now: number;
  log: Logger;
  /** Unreferenced note images younger than this are kept. */
  graceMs: number;
  /** Rows per page (default 200). */
  pageSize?: number;
}

export interface GarbageCollectionResult {
  expiredStagedUploads: number;
  orphanedStagedObjects: number;
  noteImages: number;
  expiredExports: number;
  /** Objects whose deletion failed (logged; retried next pass). */
  failures: number;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const AREA = 'storage';
const EXAMPLE_SHA256 = '0'.repeat(64);

/** One page of expired staged uploads, in (expires_at, id) order: the first, or the one after `after`. */
const expiredStaging = statement<
  { now: number; after?: { expires_at: number; id: string } | undefined; size: number },
  { id: string; object_key: string; expires_at: number | string }
>({
  name: 'storage_gc_expired_staging',
  area: AREA,
  variants: {
    'the first page': { now: 0, size: 200 },
    'a following page': { now: 0, after: { expires_at: 0, id: EXAMPLE_UUID }, size: 200 },
  },
  build: ({ now, after, size }) => sql`select id, object_key, expires_at from staged_uploads
    where expires_at <= ${now}::bigint${after ? sql` and (expires_at, id) > (${after.expires_at}::bigint, ${after.id}::uuid)` : sql.empty}
    order by expires_at, id
    limit ${size}::int`,
});

/** Deletes the staged uploads among `ids` that are still expired; the ids deleted. */
const deleteStaging = statement<{ ids: readonly string[]; now: number }, { id: string }>({
  name: 'storage_gc_delete_staging',
  area: AREA,
  variants: { 'some uploads': { ids: [], now: 0 } },
  build: ({ ids, now }) =>
    sql`delete from staged_uploads where id = any (${[...ids]}::uuid[]) and expires_at <= ${now}::bigint returning id`,
});

/** Which of the object keys a staged upload row names. */
const knownStaging = statement<{ keys: readonly string[] }, { object_key: string }>({
  name: 'storage_gc_known_staging',
  area: AREA,
  variants: { 'a page of keys': { keys: [] } },
  build: ({ keys }) => sql`select object_key from staged_uploads where object_key = any (${[...keys]}::text[])`,
});

/**
 * One page of note images past the grace period, in primary-key order, each with whether a note of
 * its account links to it: the notes of the page's accounts that mention the prefix at all are
 * scanned once for every image link they hold.
 */
const noteImagesPage = statement<
  { cutoff: number; after?: { user_id: string; sha256: string } | undefined; size: number },
  ImageCandidate
>({
  name: 'storage_gc_note_images',
  area: AREA,
  variants: {
    'the first page': { cutoff: 0, size: 200 },
    'a following page': { cutoff: 0, after: { user_id: EXAMPLE_UUID, sha256: EXAMPLE_SHA256 }, size: 200 },
  },
  build: ({ cutoff, after, size }) => sql`with page as (
         select user_id, sha256 from note_images
         where stored_at <= ${cutoff}::bigint${after ? sql` and (user_id, sha256) > (${after.user_id}::uuid, ${after.sha256}::text)` : sql.empty}
         order by user_id, sha256
         limit ${size}::int
       ),
       refs as (
         select distinct e.user_id, m[1] as sha256
         from entries e
         cross join lateral regexp_matches(e.content, ${NOTE_IMAGE_REFERENCE_SQL_PATTERN}::text, 'g') as m
         where e.user_id in (select distinct user_id from page) and strpos(e.content, ${NOTE_IMAGE_URL_PREFIX}::text) > 0
       )
       select p.user_id, p.sha256, (r.sha256 is not null) as referenced
       from page p left join refs r on r.user_id = p.user_id and r.sha256 = p.sha256
       order by p.user_id, p.sha256`,
});

/** The image's row if it is still past the grace period, locked (skipped when another pass holds it). */
const lockNoteImage = statement<{ userId: string; sha256: string; cutoff: number }, { sha256: string }>({
  name: 'storage_gc_lock_note_image',
  area: AREA,
  variants: { 'one image': { userId: EXAMPLE_UUID, sha256: EXAMPLE_SHA256, cutoff: 0 } },
  build: ({ userId, sha256, cutoff }) => sql`select sha256 from note_images
    where user_id = ${userId} and sha256 = ${sha256}::text and stored_at <= ${cutoff}::bigint
    limit 1
    for update skip locked`,
});

/** Whether a note of the account mentions the text (the image's URL). */
const noteMentions = statement<{ userId: string; text: string }, { found: number }>({
  name: 'storage_gc_note_mentions',
  area: AREA,
  variants: { 'one image': { userId: EXAMPLE_UUID, text: NOTE_IMAGE_URL_PREFIX } },
  build: ({ userId, text }) =>
    sql`select 1 as found from entries where user_id = ${userId} and strpos(content, ${text}::text) > 0 limit 1`,
});

const deleteNoteImage = statement<{ userId: string; sha256: string }, never>({
  name: 'storage_gc_delete_note_image',
  area: AREA,
  variants: { 'one image': { userId: EXAMPLE_UUID, sha256: EXAMPLE_SHA256 } },
  build: ({ userId, sha256 }) => sql`delete from note_images where user_id = ${userId} and sha256 = ${sha256}::text`,
});

/** One page of expired exports that still have an archive, in (expires_at, id) order. */
const expiredExports = statement<
  { now: number; after?: { expires_at: number; id: string } | undefined; size: number },
  { id: string; object_key: string; expires_at: number | string }
>({
  name: 'storage_gc_expired_exports',
  area: AREA,
  variants: {
    'the first page': { now: 0, size: 200 },
    'a following page': { now: 0, after: { expires_at: 0, id: EXAMPLE_UUID }, size: 200 },
  },
  build: ({ now, after, size }) => sql`select id, object_key, expires_at from exports
    where object_key is not null and expires_at <= ${now}::bigint${after ? sql` and (expires_at, id) > (${after.expires_at}::bigint, ${after.id}::uuid)` : sql.empty}
    order by expires_at, id
    limit ${size}::int`,
});

/** Clears an export's key once its archive is gone (only if it still names that archive). */
const forgetExport = statement<{ id: string; key: string }, { id: string }>({
  name: 'storage_gc_forget_export',
  area: AREA,
  variants: { 'one export': { id: EXAMPLE_UUID, key: 'u/x/exports/x.tar' } },
  build: ({ id, key }) =>
    sql`update exports set object_key = null where id = ${id} and object_key = ${key}::text returning id`,
});

export async function collectGarbage(options: GarbageCollectionOptions): Promise<GarbageCollectionResult> {
  const result: GarbageCollectionResult = {
    expiredStagedUploads: 0,
    orphanedStagedObjects: 0,
    noteImages: 0,
    expiredExports: 0,
    failures: 0,
  };
  await sweepExpiredStaging(options, result);
  await sweepOrphanedStaging(options, result);
  await sweepNoteImages(options, result);
  await sweepExpiredExports(options, result);
  options.log.info({ gc: result }, 'storage garbage collection finished');
  return result;
}

async function tryDelete(
  options: GarbageCollectionOptions,
  result: GarbageCollectionResult,
  key: string,
): Promise<boolean> {
  try {
    await options.storage.delete(key);
    return true;
  } catch (err) {
    result.failures++;
    options.log.warn({ err, key }, 'storage garbage collection could not delete an object');
    return false;
  }
}

async function sweepExpiredStaging(options: GarbageCollectionOptions, result: GarbageCollectionResult): Promise<void> {
  const { db, now } = options;
  const pageSize = options.pageSize ?? 200;
  let after: { expires_at: number; id: string } | undefined;
  for (;;) {
    const rows = await expiredStaging(db, { now, after, size: pageSize });
    if (rows.length === 0) return;
    const deleted: string[] = [];
    for (const row of rows) if (await tryDelete(options, result, row.object_key)) deleted.push(row.id);
    // Only rows still expired: an intent is never extended today, but the check costs nothing.
    if (deleted.length) result.expiredStagedUploads += (await deleteStaging(db, { ids: deleted, now })).length;
    const last = rows[rows.length - 1]!;
    after = { expires_at: Number(last.expires_at), id: last.id };
    if (rows.length < pageSize) return;
  }
}

async function sweepOrphanedStaging(options: GarbageCollectionOptions, result: GarbageCollectionResult): Promise<void> {
  const { db } = options;
  const pageSize = options.pageSize ?? 200;
  // staging/<userId>/<stagingId>; anything else under staging/ is not ours to judge and stays.
  const keys = (await options.storage.list(STAGING_PREFIX)).filter((key) => {
    const [, user, id, ...rest] = key.split('/');
    return rest.length === 0 && UUID.test(user ?? '') && UUID.test(id ?? '');
  });
  for (let i = 0; i < keys.length; i += pageSize) {
    const page = keys.slice(i, i + pageSize);
    const known = new Set((await knownStaging(db, { keys: page })).map((r) => r.object_key));
    for (const key of page) {
      if (!known.has(key) && (await tryDelete(options, result, key))) result.orphanedStagedObjects++;
    }
  }
}

async function sweepExpiredExports(options: GarbageCollectionOptions, result: GarbageCollectionResult): Promise<void> {
  const { db, now } = options;
  const pageSize = options.pageSize ?? 200;
  let after: { expires_at: number; id: string } | undefined;
  for (;;) {
    const rows = await expiredExports(db, { now, after, size: pageSize });
    if (rows.length === 0) return;
    for (const row of rows)
      if (await tryDelete(options, result, row.object_key))
        result.expiredExports += (await forgetExport(db, { id: row.id, key: row.object_key })).length;
    const last = rows[rows.length - 1]!;
    after = { expires_at: Number(last.expires_at), id: last.id };
    if (rows.length < pageSize) return;
  }
}

interface ImageCandidate {
  user_id: string;
  sha256: string;
  referenced: boolean;
}

async function sweepNoteImages(options: GarbageCollectionOptions, result: GarbageCollectionResult): Promise<void> {
  const { db, now } = options;
  const pageSize = options.pageSize ?? 200;
  const cutoff = now - options.graceMs;
  let after: { user_id: string; sha256: string } | undefined;
  for (;;) {
    const rows = await noteImagesPage(db, { cutoff, after, size: pageSize });
    if (rows.length === 0) return;
    for (const row of rows)
      if (!row.referenced) await collectNoteImage(options, result, row.user_id, row.sha256, cutoff);
    const last = rows[rows.length - 1]!;
    after = { user_id: last.user_id, sha256: last.sha256 };
    if (rows.length < pageSize) return;
  }
}

/**
 * Deletes one image if, under its row's lock, it is still past the grace period and still
 * unreferenced. The object goes first: if its deletion fails the row stays for the next pass.
 */
async function collectNoteImage(
  options: GarbageCollectionOptions,
  result: GarbageCollectionResult,
  userId: string,
  sha256: string,
  cutoff: number,
): Promise<void> {
  await options.db.transaction(async (trx) => {
    const [locked] = await lockNoteImage(trx, { userId, sha256, cutoff });
    if (!locked) return;
    const [referenced] = await noteMentions(trx, { userId, text: `${NOTE_IMAGE_URL_PREFIX}${sha256}` });
    if (referenced) return;
    if (!(await tryDelete(options, result, noteImageKey(userId, sha256)))) return;
    await deleteNoteImage(trx, { userId, sha256 });
    result.noteImages++;
  });
}

/**
 * `POST /api/v1/imports?source=native`: an archive of the native export (nativeExport.ts) written
 * into the importing account (docs/portability.md, "Importing a native archive").
 *
 * 1. The archive is read from object storage and unpacked into a temporary directory as it
 *    streams; the manifest is checked against every part (bytes, lines, SHA-256) and the media
 *    index against the objects. Anything that does not match fails the import before a byte is
 *    written, with the reason.
 * 2. The ids of the archive's rows are collected (remap.ts keeps them compactly), and the rows the
 *    account already has under another id are matched: its first side system takes the archive's
 *    first one, built-in privacy buckets match by slug, appearance and terminology settings are one
 *    per account.
 * 3. In the import's transaction (the caller's lock first: one import of an account at a time), the
 *    objects are copied under their new keys (the object key names the account and the row), then
 *    the rows are written table by table in batches with the import's refs and audit record: an
 *    upsert per batch inserts new rows, updates rows that differ and leaves equal rows alone
 *    (`unchanged`: importing the same archive again writes nothing). A failure rolls it all back
 *    and deletes the objects it created; a dry run does the same work, copies nothing and rolls back.
 */
import { createHash } from 'node:crypto';
import { once } from 'node:events';
import { createReadStream, createWriteStream } from 'node:fs';
import { mkdir, mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { inTransaction, type OwnerContext, ownerOf } from '../../core/context.ts';
import { MessageCipher } from '../../crypto/messageCipher.ts';
import { assertValidKey, type ObjectStorage } from '../../storage/types.ts';
import type { ApplyResult } from './apply.ts';
import { ImportFormatError, WarningLog } from './bundle.ts';
import { NATIVE_FORMAT, NATIVE_VERSION } from './nativeExport.ts';
import { archiveColumns, EXPORTED_TABLES, type ExportedTable, MEDIA_FOLDERS } from './nativeTables.ts';
import { type CollectionReport, importsRepo, type RefRow } from './repo.ts';
import { nativeRepo } from './repo/native.ts';
import { UuidSet } from './idSet.ts';
import { isUuid, Remapper } from './remap.ts';
import { readTar, TarFormatError } from './tar.ts';

type Row = Record<string, unknown>;

interface PartInfo {
  bytes: number;
  lines: number;
  sha256: string;
}

interface Manifest {
  accountId: string;
  parts: Array<{ path: string; table: string | null; rows: number; bytes: number; sha256: string }>;
  media: { objects: number };
}

interface MediaLine {
  key: string;
  contentType: string;
  bytes: number;
  sha256: string;
}

const MAX_MANIFEST_BYTES = 1_048_576;
const TABLES = new Map(EXPORTED_TABLES.map((t) => [t.name, t]));
const fail = (message: string): never => {
  throw new ImportFormatError(message);
};
const mediaPath = (dir: string, key: string) => join(dir, 'media', createHash('sha256').update(key).digest('hex'));

/** Unpacks the archive into `dir`: parts as data/<table>.jsonl, media.jsonl and manifest.json, objects under media/. */
async function unpack(
  storage: ObjectStorage,
  objectKey: string,
  dir: string,
): Promise<{ parts: Map<string, PartInfo>; objects: number }> {
  const stored = await storage.getStream(objectKey);
  if (!stored) return fail('The uploaded archive is no longer in object storage: send it again');
  await mkdir(join(dir, 'data'));
  await mkdir(join(dir, 'media'));
  const parts = new Map<string, PartInfo>();
  let objects = 0;
  try {
    for await (const entry of readTar(stored.body)) {
      const name = entry.path;
      if (entry.type !== 'file') fail(`The archive holds ${JSON.stringify(name)}, which is not a file`);
      let path: string;
      if (name.startsWith('media/')) {
        path = mediaPath(dir, name.slice('media/'.length));
        objects++;
      } else if (name === 'manifest.json' || name === 'media.jsonl') {
        if (name === 'manifest.json' && entry.size > MAX_MANIFEST_BYTES) fail('manifest.json is larger than 1 MiB');
        path = join(dir, name);
      } else {
        const table = /^data\/([a-z_]+)\.jsonl$/.exec(name)?.[1];
        if (!table || !TABLES.has(table))
          fail(`The archive holds ${JSON.stringify(name)}, which is not part of the format`);
        path = join(dir, 'data', `${table}.jsonl`);
      }
      if (!name.startsWith('media/') && parts.has(name)) fail(`The archive holds ${name} twice`);
      const hash = createHash('sha256');
      const out = createWriteStream(path);
      let lines = 0;
      for await (const chunk of entry.chunks()) {
        hash.update(chunk);
        for (const byte of chunk) if (byte === 0x0a) lines++;
        if (!out.write(chunk)) await once(out, 'drain');
      }
      out.end();
      await once(out, 'finish');
      if (!name.startsWith('media/')) parts.set(name, { bytes: entry.size, lines, sha256: hash.digest('hex') });
    }
  } catch (err) {
    if (err instanceof TarFormatError) fail(err.message);
    throw err;
  } finally {
    stored.body.destroy();
  }
  return { parts, objects };
}

/** Checks the manifest against the parts unpacked: every part listed, present, and as the manifest says. */
async function verify(dir: string, parts: Map<string, PartInfo>, objects: number): Promise<Manifest> {
  if (!parts.has('manifest.json')) fail('The archive has no manifest.json: it is not a native export');
  let manifest: Manifest & { format?: unknown; version?: unknown };
  try {
    manifest = JSON.parse(await readFile(join(dir, 'manifest.json'), 'utf8'));
  } catch {
    return fail('manifest.json is not valid JSON');
  }
  if (manifest?.format !== NATIVE_FORMAT) fail(`manifest.json does not name the format ${NATIVE_FORMAT}`);
  if (manifest.version !== NATIVE_VERSION)
    fail(
      `The archive is version ${JSON.stringify(manifest.version)} of the format; this server reads version ${NATIVE_VERSION}`,
    );
  if (!isUuid(manifest.accountId)) fail('manifest.json has no valid accountId');
  if (!Array.isArray(manifest.parts)) fail('manifest.json has no list of parts');
  const listed = new Set<string>();
  for (const part of manifest.parts) {
    const path = String(part?.path);
    const found = parts.get(path);
    if (!found) fail(`${path}, listed in the manifest, is not in the archive`);
    if (found!.sha256 !== part.sha256)
      fail(`${path}: its SHA-256 does not match the manifest (the archive is damaged or was changed)`);
    if (found!.bytes !== part.bytes || found!.lines !== part.rows)
      fail(`${path}: its size or line count does not match the manifest (the archive is damaged or was changed)`);
    listed.add(path);
  }
  for (const name of parts.keys())
    if (name !== 'manifest.json' && !listed.has(name)) fail(`${name} is in the archive but not in its manifest`);
  const index = parts.get('media.jsonl');
  if (!index) fail('The archive has no media.jsonl');
  if (index!.lines !== objects || manifest.media?.objects !== objects)
    fail(`The archive holds ${objects} media objects; its media index lists ${index!.lines}`);
  manifest.accountId = manifest.accountId.toLowerCase();
  return manifest;
}

/** A JSON Lines part's rows, a batch at a time, each with its line number. */
async function* batchesOf(path: string, size: number, name: string): AsyncGenerator<Array<{ n: number; row: Row }>> {
  let batch: Array<{ n: number; row: Row }> = [];
  let n = 0;
  for await (const line of createInterface({ input: createReadStream(path), crlfDelay: Number.POSITIVE_INFINITY })) {
    n++;
    let row: unknown;
    try {
      row = JSON.parse(line);
    } catch {
      fail(`${name} line ${n} is not JSON`);
    }
    if (row === null || typeof row !== 'object' || Array.isArray(row)) fail(`${name} line ${n} is not a JSON object`);
    batch.push({ n, row: row as Row });
    if (batch.length >= size) {
      yield batch;
      batch = [];
    }
  }
  if (batch.length > 0) yield batch;
}

const digestOf = (row: Row) => createHash('sha256').update(JSON.stringify(row)).digest('base64url');
const partPath = (dir: string, table: ExportedTable) => join(dir, 'data', `${table.name}.jsonl`);
const partName = (table: ExportedTable) => `data/${table.name}.jsonl`;

/**
 * The ids of the archive's rows, checking on the way that every row is the exported account's and
 * every id a uuid: rows of another account would otherwise be written into it.
 */
async function collectIds(dir: string, manifest: Manifest, present: Set<string>): Promise<UuidSet> {
  const ids = new UuidSet();
  for (const table of EXPORTED_TABLES) {
    if (!present.has(table.name)) continue;
    const hasId = table.columns.includes('id');
    for await (const batch of batchesOf(partPath(dir, table), 1000, partName(table))) {
      for (const { n, row } of batch) {
        const owner = row[table.owner];
        if (!isUuid(owner) || owner.toLowerCase() !== manifest.accountId)
          fail(`${partName(table)} line ${n} is not a row of the exported account`);
        if (hasId) {
          if (!isUuid(row.id)) fail(`${partName(table)} line ${n} has no valid id`);
          ids.add((row.id as string).toLowerCase());
        }
      }
    }
  }
  return ids;
}

/** Reads every row of a (small) table of the archive. */
async function rowsOf(dir: string, table: ExportedTable, present: Set<string>): Promise<Row[]> {
  if (!present.has(table.name)) return [];
  const rows: Row[] = [];
  for await (const batch of batchesOf(partPath(dir, table), 1000, partName(table)))
    rows.push(...batch.map((b) => b.row));
  return rows;
}

/** Matches the archive's rows to rows the account already has under another id (see the file's comment). */
async function matchExisting(ctx: OwnerContext, dir: string, present: Set<string>, remap: Remapper): Promise<void> {
  const { db } = ctx;
  const userId = ownerOf(ctx);
  const sides = (await rowsOf(dir, TABLES.get('side_systems')!, present))
    .filter((r) => r.deleted_at === null)
    .sort((a, b) => Number(a.created_at) - Number(b.created_at) || String(a.id).localeCompare(String(b.id)));
  const main = await nativeRepo.mainSideSystem(db, userId);
  if (sides[0] && main) remap.overrides.set(String(sides[0].id).toLowerCase(), main);
  const buckets = await rowsOf(dir, TABLES.get('privacy_buckets')!, present);
  const bySlug = new Map(
    (
      await nativeRepo.bucketsBySlug(
        db,
        userId,
        buckets.map((b) => String(b.slug)),
      )
    ).map((b) => [b.slug, b.id]),
  );
  for (const b of buckets) {
    const local = bySlug.get(String(b.slug));
    if (local) remap.overrides.set(String(b.id).toLowerCase(), local);
  }
  for (const name of ['appearance_settings', 'terminology_settings']) {
    const [row] = await rowsOf(dir, TABLES.get(name)!, present);
    const local = row ? await nativeRepo.singleton(db, name, userId) : undefined;
    if (row && local) remap.overrides.set(String(row.id).toLowerCase(), local);
  }
  const scopes = new Map(
    (await nativeRepo.overrideScopes(db, userId)).map((s) => [`${s.side_system_id}/${s.sub_system_id}`, s.id]),
  );
  for (const row of await rowsOf(dir, TABLES.get('terminology_overrides')!, present)) {
    const sub = row.sub_system_id === null ? null : remap.id(String(row.sub_system_id));
    const local = scopes.get(`${remap.id(String(row.side_system_id))}/${sub}`);
    if (local) remap.overrides.set(String(row.id).toLowerCase(), local);
  }
}

/** The media index, checked: each object under one of the account's media folders, present, with the bytes it names. */
async function* mediaLines(dir: string, source: string): AsyncGenerator<MediaLine & { path: string }> {
  const prefixes = MEDIA_FOLDERS.map((folder) => `u/${source}/${folder}`);
  for await (const batch of batchesOf(join(dir, 'media.jsonl'), 100, 'media.jsonl')) {
    for (const { n, row } of batch) {
      const line = row as unknown as MediaLine;
      const key = String(line.key);
      try {
        assertValidKey(key);
      } catch {
        fail(`media.jsonl line ${n} names an invalid object key`);
      }
      if (!prefixes.some((p) => key.startsWith(p)))
        fail(`media.jsonl line ${n} names an object outside the account's media`);
      if (typeof line.contentType !== 'string' || !Number.isSafeInteger(line.bytes))
        fail(`media.jsonl line ${n} is not a media entry`);
      yield { ...line, key, path: mediaPath(dir, key) };
    }
  }
}

async function sha256Of(path: string): Promise<{ sha256: string; bytes: number } | null> {
  const hash = createHash('sha256');
  let bytes = 0;
  try {
    for await (const chunk of createReadStream(path)) {
      hash.update(chunk as Buffer);
      bytes += (chunk as Buffer).length;
    }
  } catch {
    return null;
  }
  return { sha256: hash.digest('hex'), bytes };
}

class NativeImporter {
  readonly report: Record<string, CollectionReport> = {};
  readonly warnings = new WarningLog();
  done = 0;
  /** References set once every row is written: table → column → [row id, value]. */
  private readonly deferred: Array<{ table: ExportedTable; column: string; id: string; value: string }> = [];
  private readonly cipher: MessageCipher;
  private readonly userId: string;

  constructor(
    private readonly ctx: OwnerContext,
    private readonly remap: Remapper,
    private readonly onProgress: (done: number) => Promise<void>,
  ) {
    this.cipher = new MessageCipher(ctx.config.messageEncryptionKeys);
    this.userId = ownerOf(ctx);
  }

  /** Lists a collection in the report, even when it turns out to have nothing. */
  listed(collection: string): void {
    this.report[collection] ??= { created: 0, updated: 0, unchanged: 0, skipped: 0, failed: 0 };
  }

  count(collection: string, outcome: keyof CollectionReport, n = 1): void {
    this.report[collection] ??= { created: 0, updated: 0, unchanged: 0, skipped: 0, failed: 0 };
    this.report[collection][outcome] += n;
  }

  warn(collection: string, sourceId: string | null, message: string): void {
    this.warnings.push({ collection, sourceId, message });
  }

  /** A row of the archive as this account's row: ids remapped, the owner the importing account. */
  private remapped(table: ExportedTable, row: Row): Row {
    const out: Row = {};
    for (const column of archiveColumns(table)) {
      const value = row[column] ?? null;
      if (value === null) out[column] = null;
      else if (column === table.owner) out[column] = this.userId;
      else if (column === 'id' || table.refs?.includes(column))
        out[column] = Array.isArray(value) ? value.map((v) => this.remap.id(String(v))) : this.remap.id(String(value));
      else if (column === 'content_id') out[column] = row.kind === 'friend' ? value : this.remap.id(String(value));
      else if (table.accounts?.includes(column)) out[column] = this.remap.known(String(value)) ?? value;
      else out[column] = this.remap.deep(value);
    }
    return out;
  }

  /** Another account a row names (friendships, guestbook authors, voters, friend assignments). */
  private otherAccounts(table: ExportedTable, row: Row): string[] {
    const named = (table.accounts ?? []).map((c) => row[c]).filter((v) => typeof v === 'string') as string[];
    if (table.name === 'privacy_bucket_assignments' && row.kind === 'friend') named.push(String(row.content_id));
    return named;
  }

  async account(dir: string): Promise<void> {
    const table = TABLES.get('accounts')!;
    for await (const batch of batchesOf(partPath(dir, table), 1, partName(table))) {
      for (const { row } of batch) {
        const account = this.remapped(table, row);
        const changed = await nativeRepo.updateAccount(this.ctx.db, this.userId, account);
        this.count(table.name, changed ? 'updated' : 'unchanged');
        await importsRepo.saveRefs(this.ctx.db, this.userId, 'native', [
          {
            collection: table.name,
            source_id: String(row.id).toLowerCase(),
            local_id: this.userId,
            digest: digestOf(account),
          },
        ]);
        this.done++;
      }
    }
  }

  async skipped(dir: string, table: ExportedTable, reason: string): Promise<void> {
    let n = 0;
    for await (const batch of batchesOf(partPath(dir, table), 1000, partName(table))) n += batch.length;
    this.count(table.name, 'skipped', n);
    if (n > 0) this.warn(table.name, null, reason);
    this.done += n;
  }

  async rows(dir: string, table: ExportedTable): Promise<void> {
    const size = table.batch ?? 500;
    for await (const batch of batchesOf(partPath(dir, table), size, partName(table))) {
      await this.batch(
        table,
        batch.map((b) => b.row),
      );
      this.done += batch.length;
      await this.onProgress(this.done);
    }
  }

  private async batch(table: ExportedTable, source: Row[]): Promise<void> {
    const { db } = this.ctx;
    const keyOf = (row: Row) => table.key.map((k) => String(row[k])).join('/');
    const remapped = source.map((r) => this.remapped(table, r));
    // Rows naming another account this server does not have (or the importing account as its own friend) are skipped.
    const others = [...new Set(remapped.flatMap((r) => this.otherAccounts(table, r)))];
    const accounts = await nativeRepo.accounts(
      db,
      others.filter((id) => id !== this.userId),
    );
    const pairs =
      table.name === 'friendships'
        ? new Map(
            (await nativeRepo.friendshipsWith(db, this.userId, [...accounts])).map((f) => [f.friend_user_id, f.id]),
          )
        : new Map<string, string>();
    const rows: Array<{ source: Row; row: Row }> = [];
    const keys = new Set<string>();
    for (const [i, src] of source.entries()) {
      const row = remapped[i]!;
      const sourceId = typeof src.id === 'string' ? src.id : keyOf(src);
      const named = this.otherAccounts(table, row);
      const skip = (message: string) => {
        this.count(table.name, 'skipped');
        this.warn(table.name, sourceId, message);
      };
      if (
        named.some((id) => id === this.userId && table.name !== 'guestbook_messages' && table.name !== 'poll_ballots')
      )
        skip('names the importing account as another account (its own friend): not imported');
      else if (named.some((id) => id !== this.userId && !accounts.has(id)))
        skip('names another account that this server does not have: not imported');
      else if (
        table.name === 'friendships' &&
        pairs.has(String(row.friend_user_id)) &&
        pairs.get(String(row.friend_user_id)) !== row.id
      )
        skip('the account already has its own friendship with that account: kept as it is');
      else if (keys.has(keyOf(row))) skip('the same row as another of the archive once imported: not imported twice');
      else {
        keys.add(keyOf(row));
        rows.push({ source: src, row });
      }
    }
    if (rows.length === 0) return;
    await this.deferReferences(
      table,
      rows.map((r) => r.row),
    );
    if (table.name === 'messaging_messages') await this.freeMutationIds(rows.map((r) => r.row));
    const digests = rows.map(({ row }) => digestOf(row));
    if (table.sealed)
      await this.seal(
        table,
        rows.map((r) => r.row),
      );
    const written = await nativeRepo.upsert(
      db,
      table,
      this.userId,
      rows.map((r) => r.row),
    );
    let inserted = 0;
    for (const w of written) if (w.inserted) inserted++;
    this.count(table.name, 'created', inserted);
    this.count(table.name, 'updated', written.length - inserted);
    this.count(table.name, 'unchanged', rows.length - written.length);
    if (table.columns.includes('id')) {
      const refs: RefRow[] = rows.map(({ source: src, row }, i) => ({
        collection: table.name,
        source_id: String(src.id).toLowerCase(),
        local_id: String(row.id),
        digest: digests[i]!,
      }));
      await importsRepo.saveRefs(db, this.userId, 'native', refs);
    }
  }

  /**
   * A reference that may name a row written later (a parent further down the file, the member of
   * a sub system) is written empty when that row is not there yet, and set at the end.
   */
  private async deferReferences(table: ExportedTable, rows: Row[]): Promise<void> {
    for (const [column, target] of Object.entries(table.deferred ?? {})) {
      const values = [...new Set(rows.map((r) => r[column]).filter((v) => typeof v === 'string'))] as string[];
      const present = await nativeRepo.existing(this.ctx.db, target, this.userId, values);
      if (target === table.name) for (const r of rows) present.add(String(r.id));
      for (const row of rows) {
        const value = row[column];
        if (typeof value === 'string' && !present.has(value)) {
          this.deferred.push({ table, column, id: String(row.id), value });
          row[column] = null;
        }
      }
    }
  }

  /** A client mutation id is unique per account: one another message of the account carries is dropped. */
  private async freeMutationIds(rows: Row[]): Promise<void> {
    const ids = rows.map((r) => String(r.id));
    const mutationIds = rows.map((r) => r.client_mutation_id).filter((v) => typeof v === 'string') as string[];
    const taken = await nativeRepo.takenMutationIds(this.ctx.db, this.userId, mutationIds, ids);
    for (const row of rows) if (taken.has(String(row.client_mutation_id))) row.client_mutation_id = null;
  }

  /**
   * Seals the text in clear with this server's primary message key, bound to the new ids; a row
   * the account already has with the same text keeps its ciphertext (so it stays unchanged).
   */
  private async seal(table: ExportedTable, rows: Row[]): Promise<void> {
    const field = table.sealed!;
    const bytes = field === 'content' ? 'content_enc' : 'data_enc';
    const stored = new Map(
      (
        await nativeRepo.sealed(
          this.ctx.db,
          table,
          this.userId,
          rows.map((r) => String(r.id)),
        )
      ).map((s) => [s.id, s]),
    );
    for (const row of rows) {
      const text = field === 'data' ? JSON.stringify(row.data) : String(row.content ?? '');
      const id = String(row.id);
      const existing = stored.get(id);
      let sealed: { keyId: string; data: Buffer } | undefined;
      if (existing) {
        const before = { keyId: existing.key_id, data: Buffer.from(existing.data, 'base64') };
        try {
          if (this.cipher.open(this.userId, id, before) === text) sealed = before;
        } catch {
          // Unreadable here (another key): sealed anew below.
        }
      }
      sealed ??= this.cipher.seal(this.userId, id, text);
      row.key_id = sealed.keyId;
      row[bytes] = `\\x${sealed.data.toString('hex')}`;
      delete row[field];
    }
  }

  /** Sets the deferred references, now that every row is written; one naming a row not imported stays empty. */
  async settle(): Promise<void> {
    const groups = new Map<string, typeof this.deferred>();
    for (const d of this.deferred) {
      const k = `${d.table.name}.${d.column}`;
      const list = groups.get(k);
      if (list) list.push(d);
      else groups.set(k, [d]);
    }
    for (const list of groups.values()) {
      const { table, column } = list[0]!;
      for (let i = 0; i < list.length; i += 500) {
        const slice = list.slice(i, i + 500);
        const set = await nativeRepo.setDeferred(
          this.ctx.db,
          table,
          column,
          this.userId,
          slice.map((d) => ({ id: d.id, value: d.value })),
        );
        for (const d of slice)
          if (!set.has(d.id)) this.warn(table.name, d.id, `${column} names a row that was not imported: left empty`);
      }
    }
  }
}

/**
 * Verifies the archive at `objectKey` and writes it into the context's account (see the file's
 * comment). Throws ImportFormatError, with the reason, for an archive that cannot be imported.
 */
export async function importNativeArchive(
  ctx: OwnerContext,
  options: {
    objectKey: string;
    dryRun: boolean;
    importId: string;
    onTotal: (total: number) => Promise<void>;
    onProgress: (done: number, total: number) => Promise<void>;
    /** First in the import's transaction (the caller's lock and its check that the import is still this run's). */
    begin: (tx: OwnerContext) => Promise<void>;
    /** Last in the transaction, unless it is a dry run (the caller records the outcome with the writes). */
    complete: (tx: OwnerContext, result: ApplyResult) => Promise<void>;
  },
): Promise<ApplyResult> {
  const storage = ctx.storage!;
  const userId = ownerOf(ctx);
  const dir = await mkdtemp(join(tmpdir(), 'ada-import-'));
  const created: string[] = [];
  let committed = false;
  // Milliseconds per phase, for the import's log line.
  const phases: Record<string, number> = {};
  let started = performance.now();
  const lap = (name: string) => {
    const now = performance.now();
    phases[name] = Math.round(now - started);
    started = now;
  };
  try {
    const { parts, objects } = await unpack(storage, options.objectKey, dir);
    lap('unpack');
    const manifest = await verify(dir, parts, objects);
    const present = new Set(
      manifest.parts.flatMap((p) => (p.table !== null && TABLES.has(String(p.table)) ? [String(p.table)] : [])),
    );
    const total = manifest.parts.reduce((sum, p) => sum + (p.table === null ? 0 : p.rows), 0) + objects;
    await options.onTotal(total);
    const remap = new Remapper(manifest.accountId, userId, await collectIds(dir, manifest, present));
    await matchExisting(ctx, dir, present, remap);

    // Every object checked before anything is written, then copied under its new key.
    for await (const media of mediaLines(dir, manifest.accountId)) {
      const found = await sha256Of(media.path);
      if (!found) fail(`media/${media.key}, listed in media.jsonl, is not in the archive`);
      if (found!.sha256 !== media.sha256 || found!.bytes !== media.bytes)
        fail(`media/${media.key}: its SHA-256 does not match media.jsonl (the archive is damaged or was changed)`);
    }
    lap('verify');
    let result: ApplyResult | undefined;
    await inTransaction(ctx, async (tx) => {
      await options.begin(tx);
      lap('lock');
      const media: CollectionReport = { created: 0, updated: 0, unchanged: 0, skipped: 0, failed: 0 };
      for await (const object of mediaLines(dir, manifest.accountId)) {
        const key = remap.text(object.key);
        const head = await storage.head(key);
        if (head && head.size === object.bytes && head.etag === `"${object.sha256}"`) media.unchanged++;
        else {
          if (!options.dryRun) {
            await storage.upload(key, () => createReadStream(object.path), object.contentType, object.bytes);
            if (!head) created.push(key);
          }
          media[head ? 'updated' : 'created']++;
        }
      }
      lap('media');
      const run = new NativeImporter(tx, remap, (done) => options.onProgress(done, total));
      run.report.media = media;
      run.done = objects;
      for (const table of EXPORTED_TABLES) {
        if (!present.has(table.name)) continue;
        run.listed(table.name);
        const mode = table.import ?? 'rows';
        if (mode === 'account') await run.account(dir);
        else if (mode === 'skip')
          await run.skipped(
            dir,
            table,
            table.name === 'api_keys'
              ? 'API keys are not imported: a key is its secret, which an export never holds; create new keys here'
              : 'verified identities are registered by the operator of a server: not imported',
          );
        else await run.rows(dir, table);
      }
      await run.settle();
      lap('rows');
      await tx.audit.record(tx, {
        action: 'import.apply',
        targetType: 'import',
        targetId: options.importId,
        detail: { source: 'native', dryRun: options.dryRun, entities: total },
      });
      result = { report: run.report, warnings: run.warnings, done: run.done, total, phases };
      if (options.dryRun) throw new DryRunRollback();
      await options.complete(tx, result);
    }).catch((err: unknown) => {
      if (!(err instanceof DryRunRollback)) throw err;
    });
    committed = !options.dryRun;
    return result!;
  } finally {
    if (!committed) for (const key of created) await storage.delete(key).catch(() => undefined);
    await rm(dir, { recursive: true, force: true });
  }
}

/** Thrown inside a dry run's transaction to roll it back once the report is made. */
class DryRunRollback extends Error {}

/**
 * Simply Plural's account export (`export.json`) mapped onto the import bundle. The file is a raw
 * MongoDB dump: one top-level key per collection, each an array of the account's documents (some
 * exports hold a collection as a map keyed by id instead). There is no version marker; the account's
 * `private[0].latestVersion` tells the bucket era (≥ 300) from legacy privacy flags.
 *
 * Pure: the same document always gives the same bundle, in the file's order, and is never modified.
 * Warnings name collections, ids and counts, never the text of a document.
 */
import {
  type BundleBucket,
  type BundleCategory,
  type BundleChannel,
  type BundleField,
  type BundleGroup,
  type BundleMember,
  type BundleMessage,
  type BundleNote,
  type BundleSession,
  type BundleSystem,
  checkHeld,
  type ImportBundle,
  ImportFormatError,
  materialise,
  type ParsedBundle,
  type ParseTally,
  type SourceRef,
  WarningLog,
} from '../bundle.ts';
import { type CollectionDocument, type Collections, collectionsOf } from '../collections.ts';
import { StringIdSet } from '../idSet.ts';
import { cut, isObject } from './text.ts';

type Doc = Record<string, unknown>;

/** A document that passed the id checks. */
interface Entry {
  id: string;
  doc: Doc;
}

/** Collections in the dump that are never imported (secrets, logs, derived data, other accounts). */
const NEVER_IMPORTED = new Set([
  'tokens',
  'securityLogs',
  'avatarExports',
  'audit',
  'reports',
  'notifications',
  'queuedEvents',
  'undeliveredMessages',
  'usage',
  'sharedFront',
  'privateFront',
  'fronters',
  'friends',
  'pendingFriendRequests',
  'events',
  'serverData',
]);

/** Collections recognised but not mapped in this version. */
const NOT_YET_IMPORTED = new Set(['polls', 'boardMessages', 'automatedReminders', 'repeatedReminders']);

/** Collections read by this parser. */
const READ = new Set([
  'users',
  'private',
  'privacyBuckets',
  'customFields',
  'members',
  'frontStatuses',
  'customFronts',
  'groups',
  'frontHistory',
  'comments',
  'notes',
  'channelCategories',
  'channels',
  'chatMessages',
]);

/** Keys only Simply Plural files have: one of them must hold documents for the file to be read as one. */
const SIGNATURE = ['members', 'frontHistory', 'users', 'private', 'frontStatuses', 'customFronts', 'groups'];

const BUCKET_ERA_VERSION = 300;
const MAX_ID = 100;
const CDN = 'https://spaces.apparyllis.com/avatars';
const FIELD_VALUE_MAX = { text: 1000, markdown: 20000 } as const;

const FRIENDS_WARNING = "friendships are not imported: the other account's consent does not travel";

function has(doc: Doc, key: string): boolean {
  return Object.hasOwn(doc, key);
}

/** The value as a string with something besides spaces in it, trimmed; otherwise null. */
function text(value: unknown): string | null {
  if (typeof value !== 'string') return null;
  const trimmed = value.trim();
  return trimmed === '' ? null : trimmed;
}

/** Cuts to `max` UTF-16 units without splitting a surrogate pair (so the code point count fits too). */

function plural(n: number, one: string, many = `${one}s`): string {
  return `${n} ${n === 1 ? one : many}`;
}

const ISO_TIME =
  /^(\d{4})-(\d{2})-(\d{2})(?:[T ](\d{2}):(\d{2})(?::(\d{2})(?:\.(\d{1,9}))?)?)?\s*(Z|[+-]\d{2}(?::?\d{2})?)?$/i;
const MAX_EPOCH_MS = 8.64e15;

function validMs(ms: number): number | null {
  return Number.isFinite(ms) && Math.abs(ms) <= MAX_EPOCH_MS ? Math.trunc(ms) : null;
}

function calendarDate(year: number, month: number, day: number): boolean {
  const d = new Date(Date.UTC(year, month - 1, day));
  return d.getUTCFullYear() === year && d.getUTCMonth() === month - 1 && d.getUTCDate() === day;
}

/** Epoch ms from an ISO string; a string without a zone is UTC. */
function isoMs(value: string): number | null {
  const m = ISO_TIME.exec(value);
  if (!m) return null;
  const [year, month, day, hour, minute, second] = [m[1], m[2], m[3], m[4], m[5], m[6]].map((p) => Number(p ?? 0)) as [
    number,
    number,
    number,
    number,
    number,
    number,
  ];
  if (!calendarDate(year, month, day) || hour > 23 || minute > 59 || second > 59) return null;
  const fraction = m[7] ? Math.trunc(Number(`0.${m[7]}`) * 1000) : 0;
  let offset = 0;
  const zone = m[8]?.toUpperCase();
  if (zone && zone !== 'Z') {
    const digits = zone.slice(1).replace(':', '');
    const hours = Number(digits.slice(0, 2));
    const minutes = Number(digits.slice(2) || 0);
    if (hours > 23 || minutes > 59) return null;
    offset = (zone[0] === '-' ? -1 : 1) * (hours * 60 + minutes) * 60_000;
  }
  return validMs(Date.UTC(year, month - 1, day, hour, minute, second, fraction) - offset);
}

/** SP time fields: epoch ms numbers, numeric strings, ISO strings with or without zone, Firestore `{_seconds,_nanoseconds}`. */
function parseTime(value: unknown): number | null {
  if (typeof value === 'number') return validMs(value);
  if (typeof value === 'string') {
    const trimmed = value.trim();
    if (/^-?\d+(?:\.\d+)?$/.test(trimmed)) return validMs(Number(trimmed));
    return isoMs(trimmed);
  }
  if (isObject(value)) {
    const seconds = value._seconds ?? value.seconds;
    const nanos = value._nanoseconds ?? value.nanoseconds ?? 0;
    if (typeof seconds === 'number' && typeof nanos === 'number') return validMs(seconds * 1000 + nanos / 1e6);
  }
  return null;
}

/** A date-type field value as YYYY-MM-DD: the date an ISO string starts with, or the UTC date of epoch ms. */
function dateValue(value: string): string | null {
  const m = /^(\d{4})-(\d{2})-(\d{2})(?:$|[T ])/.exec(value);
  if (m) return calendarDate(Number(m[1]), Number(m[2]), Number(m[3])) ? value.slice(0, 10) : null;
  const ms = /^-?\d+$/.test(value) ? validMs(Number(value)) : null;
  if (ms === null) return null;
  const date = new Date(ms);
  const year = date.getUTCFullYear();
  return year >= 0 && year <= 9999 ? date.toISOString().slice(0, 10) : null;
}

/** Colors come as `#rrggbb`, `#rrggbbaa`, or either without `#`; anything else is not one. */
function normalisedColor(value: string): string | null {
  const m = /^#?([0-9a-f]{6}|[0-9a-f]{8})$/i.exec(value.trim());
  return m ? `#${m[1]!.toLowerCase()}` : null;
}

const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

function base64Bytes(value: unknown): Buffer | null {
  if (typeof value !== 'string') return null;
  const trimmed = value.trim();
  return trimmed !== '' && BASE64.test(trimmed) ? Buffer.from(trimmed, 'base64') : null;
}

/** Decodes as UTF-8 without control characters other than tab and line breaks. */
function isText(bytes: Buffer): boolean {
  for (const b of bytes) if ((b < 0x20 && b !== 0x09 && b !== 0x0a && b !== 0x0d) || b === 0x7f) return false;
  try {
    new TextDecoder('utf-8', { fatal: true }).decode(bytes);
    return true;
  } catch {
    return false;
  }
}

/** Still-encrypted chat message: its iv decodes to 16 bytes and its body base64-decodes to binary. */
function isCiphertext(doc: Doc): boolean {
  const iv = base64Bytes(doc.iv);
  if (!iv || iv.length !== 16) return false;
  const body = base64Bytes(doc.message ?? doc.content);
  return body !== null && !isText(body);
}

class Parse {
  readonly tally = new Map<string, ParseTally>();
  readonly warnings = new WarningLog();

  constructor(readonly file: Collections) {
    // Every top-level key of the file gets a tally entry.
    for (const key of file.keys()) this.count(key);
  }

  count(collection: string): ParseTally {
    let entry = this.tally.get(collection);
    if (!entry) {
      entry = { skipped: 0, failed: 0 };
      this.tally.set(collection, entry);
    }
    return entry;
  }

  warn(collection: string, sourceId: string | null, message: string): void {
    // Messages name collections, ids, counts and field names of the file format, never a document's content.
    this.warnings.push({ collection, sourceId, message });
  }

  fail(collection: string, sourceId: string | null, message: string): void {
    this.count(collection).failed++;
    this.warn(collection, sourceId, message);
  }

  skip(collection: string, n: number, message: string): void {
    if (n === 0) return;
    this.count(collection).skipped += n;
    this.warn(collection, null, message);
  }

  /**
   * The raw documents of a top-level collection (an array, or the documents of a map keyed by id,
   * whose key then stands in for a missing `_id`), one at a time; a value that holds no documents
   * is reported and read as empty.
   */
  documentsOf(collection: string): Iterable<CollectionDocument> {
    if (!this.file.has(collection)) return [];
    const docs = this.file.documents(collection);
    if (docs) return docs;
    const value = this.file.value(collection);
    if (value !== null && value !== undefined)
      this.warn(collection, null, 'not an array or map of documents: nothing read from it');
    return [];
  }

  /** How many raw documents documentsOf(collection) gives (reported as it reports), without reading them. */
  size(collection: string): number {
    if (!this.file.has(collection)) return 0;
    if (this.file.documents(collection)) return this.file.count(collection);
    this.documentsOf(collection);
    return 0;
  }

  /** The collection's documents with usable ids, in file order, one at a time. */
  *entries(collection: string): Generator<Entry> {
    // Compact: a streamed collection's ids may number millions.
    const seen = new StringIdSet();
    let index = -1;
    for (const { key, doc } of this.documentsOf(collection)) {
      index++;
      const where = key === null ? `the document at position ${index}` : 'the document';
      // Any document that is not an object: failed.
      if (!isObject(doc)) {
        this.fail(collection, key, `${where} is not an object`);
        continue;
      }
      const id = has(doc, '_id') ? doc._id : key;
      // Ids are opaque strings ≤100 chars (longer/non-string → failed).
      if (typeof id !== 'string' || id === '' || id.length > MAX_ID) {
        this.fail(collection, null, `${where} has no usable _id (a string of 1 to ${MAX_ID} characters)`);
        continue;
      }
      // Duplicate `_id` within a collection: keep the first, count the others failed with a warning.
      if (seen.has(id)) {
        this.fail(collection, id, 'duplicate _id: only the first document with it is read');
        continue;
      }
      seen.add(id);
      yield { id, doc };
    }
  }

  /** Cuts `value` to `max` with a warning naming `label` when it is longer. */
  limit(collection: string, id: string | null, label: string, value: string, max: number): string {
    const kept = cut(value, max);
    if (kept !== value) this.warn(collection, id, `${label} cut to ${max} characters`);
    return kept;
  }

  /** A trimmed name cut to 80 (the contract's 1–80), without the spaces a cut can leave at its end. */
  name(collection: string, id: string, value: string): string {
    return this.limit(collection, id, 'name', value, 80).trimEnd();
  }

  color(collection: string, id: string | null, value: unknown): string | null {
    if (value === undefined || value === null || value === '') return null;
    const color = typeof value === 'string' ? normalisedColor(value) : null;
    if (color === null) this.warn(collection, id, 'color dropped: not a hex color');
    return color;
  }
}

/** The account's single document in `users` / `private` (the first object); further ones are skipped. */
function accountDoc(p: Parse, collection: string): Doc | null {
  let found: Doc | null = null;
  let extra = 0;
  let index = -1;
  for (const { doc } of p.documentsOf(collection)) {
    index++;
    if (!isObject(doc)) p.fail(collection, null, `the document at position ${index} is not an object`);
    else if (found) extra++;
    else found = doc;
  }
  p.skip(collection, extra, `${plural(extra, 'further document')} not read: only the account's own document is`);
  return found;
}

interface Privacy {
  bucketEra: boolean;
  known: Set<string>;
}

/** Bucket source ids of a member, group, custom front or field. */
function bucketsOf(p: Parse, privacy: Privacy, collection: string, id: string, doc: Doc): string[] {
  if (!privacy.bucketEra) {
    // Legacy (update300's mapping, missing flag counts as true): private≠false & preventTrusted≠false → []; private≠false → ['trusted']; private false → ['friends','trusted'].
    if (doc.private !== false) return doc.preventTrusted !== false ? [] : ['trusted'];
    return ['friends', 'trusted'];
  }
  // Bucket era: `buckets` as given, ids not among the buckets dropped (warning), missing/empty = [] (fail closed).
  if (doc.buckets === undefined || doc.buckets === null) return [];
  if (!Array.isArray(doc.buckets)) {
    p.warn(collection, id, 'buckets is not a list: in no bucket');
    return [];
  }
  const out: string[] = [];
  let unknown = 0;
  for (const bucket of doc.buckets) {
    if (typeof bucket === 'string' && privacy.known.has(bucket)) {
      if (!out.includes(bucket)) out.push(bucket);
    } else unknown++;
  }
  if (unknown) p.warn(collection, id, `${plural(unknown, 'bucket reference')} dropped: not a bucket in the file`);
  return out;
}

function avatarUrl(
  p: Parse,
  collection: string,
  id: string | null,
  doc: Doc,
  accountUid: string | null,
): string | null {
  const uid = text(doc.uid) ?? accountUid;
  const uuid = text(doc.avatarUuid);
  // Avatar: `https://spaces.apparyllis.com/avatars/<uid>/<avatarUuid>`, else avatarUrl.
  if (uid && uuid) return `${CDN}/${encodeURIComponent(uid)}/${encodeURIComponent(uuid)}`;
  const url = text(doc.avatarUrl);
  if (url === null) return null;
  if (/^https?:\/\//i.test(url)) return url;
  p.warn(collection, id, 'avatarUrl dropped: not an http(s) URL');
  return null;
}

function systemOf(p: Parse, user: Doc | null, accountUid: string | null): BundleSystem | null {
  if (!user) return null;
  // system: name = username, description = desc, color, avatarUrl by the CDN rule; tag null.
  return {
    name: text(user.username),
    description: typeof user.desc === 'string' && user.desc !== '' ? user.desc : null,
    tag: null,
    avatarUrl: avatarUrl(p, 'users', accountUid, user, accountUid),
    color: p.color('users', accountUid, user.color),
  };
}

function bucketsFrom(p: Parse, privacy: Privacy): BundleBucket[] {
  if (!privacy.bucketEra) {
    const n = p.size('privacyBuckets');
    p.skip(
      'privacyBuckets',
      n,
      `${plural(n, 'bucket')} not read: the account uses legacy privacy (latestVersion below 300)`,
    );
    // Legacy: two synthetic buckets, Friends 🔓 and Trusted friends 🔒.
    return [
      { ref: { collection: 'synthetic', id: 'friends' }, name: 'Friends', description: '', icon: '🔓' },
      { ref: { collection: 'synthetic', id: 'trusted' }, name: 'Trusted friends', description: '', icon: '🔒' },
    ];
  }
  const out: Array<BundleBucket & { rank: string }> = [];
  for (const { id, doc } of p.entries('privacyBuckets')) {
    const name = text(doc.name);
    if (name === null) {
      p.fail('privacyBuckets', id, 'bucket has no name');
      continue;
    }
    // Bucket era: each privacyBuckets doc → bucket, name cut to 80, desc to 500, icon.
    out.push({
      ref: { collection: 'privacyBuckets', id },
      name: p.name('privacyBuckets', id, name),
      description: typeof doc.desc === 'string' ? p.limit('privacyBuckets', id, 'desc', doc.desc, 500) : '',
      icon: text(doc.icon),
      rank: typeof doc.rank === 'string' ? doc.rank : '',
    });
  }
  // In SP's own order (LexoRank `rank`, compared as strings); the sort is stable, so ties keep file order.
  out.sort((a, b) => (a.rank < b.rank ? -1 : a.rank > b.rank ? 1 : 0));
  return out.map(({ rank: _, ...bucket }) => bucket);
}

const FIELD_TYPES: Record<number, 'text' | 'date'> = {
  0: 'text',
  1: 'text',
  2: 'date',
  3: 'text',
  4: 'text',
  5: 'text',
  6: 'date',
  7: 'text',
};

function fieldType(p: Parse, collection: string, id: string, doc: Doc): BundleField['type'] {
  const type = typeof doc.type === 'string' && /^\d+$/.test(doc.type) ? Number(doc.type) : doc.type;
  // Type 0 text; 2 date, 6 timestamp → date; 1 color, 3 month, 4 year, 5 month+year, 7 month+day → text; supportMarkdown makes text markdown.
  let mapped = typeof type === 'number' ? FIELD_TYPES[type] : undefined;
  if (!mapped) {
    p.warn(collection, id, 'unknown field type: read as text');
    mapped = 'text';
  }
  return mapped === 'text' && doc.supportMarkdown === true ? 'markdown' : mapped;
}

/** Numbers (pre-migration orders) first, numerically; then LexoRank strings, as strings; then none. */
function compareOrder(a: unknown, b: unknown): number {
  const rank = (v: unknown) => (typeof v === 'number' && Number.isFinite(v) ? 0 : typeof v === 'string' ? 1 : 2);
  const ra = rank(a);
  const rb = rank(b);
  if (ra !== rb) return ra - rb;
  if (ra === 0) return (a as number) - (b as number);
  if (ra === 1) return (a as string) < (b as string) ? -1 : (a as string) > (b as string) ? 1 : 0;
  return 0;
}

interface Fields {
  list: BundleField[];
  byId: Map<string, BundleField>;
  /** Bucket era: migrated fields by their legacy key, for `info` keys update300 did not rename. */
  byOid: Map<string, BundleField>;
}

function fieldsFrom(p: Parse, privacy: Privacy, user: Doc | null): Fields {
  const drafts: Array<{ field: BundleField; order: unknown; id: string }> = [];
  const byOid = new Map<string, BundleField>();
  const add = (collection: string, id: string, doc: Doc) => {
    const name = text(doc.name);
    if (name === null) return p.fail(collection, id, 'field has no name');
    const field: BundleField = {
      ref: { collection, id },
      name: p.name(collection, id, name),
      type: fieldType(p, collection, id, doc),
      order: 0,
      buckets: bucketsOf(p, privacy, collection, id, doc),
    };
    drafts.push({ field, order: doc.order, id });
    const oid = text(doc.oid);
    if (oid !== null && !byOid.has(oid)) byOid.set(oid, field);
  };
  if (privacy.bucketEra) {
    // Bucket era: fields from `customFields`.
    for (const { id, doc } of p.entries('customFields')) add('customFields', id, doc);
  } else {
    const n = p.size('customFields');
    p.skip('customFields', n, `${plural(n, 'field')} not read: a legacy account's fields are in users.fields`);
    // Legacy: fields from the users[0].fields map (key = source id, collection `users.fields`).
    if (user && user.fields !== undefined && user.fields !== null) {
      const collection = 'users.fields';
      p.count(collection);
      if (!isObject(user.fields)) p.warn(collection, null, 'users.fields is not a map: no fields read');
      else {
        for (const [key, doc] of Object.entries(user.fields)) {
          if (key === '' || key.length > MAX_ID)
            p.fail(collection, null, `a field key is not a string of 1 to ${MAX_ID} characters`);
          else if (!isObject(doc)) p.fail(collection, key, 'field definition is not an object');
          else add(collection, key, doc);
        }
      }
    }
  }
  // Order by the `order` string (LexoRank: sort as strings; numbers numerically) then _id.
  drafts.sort((a, b) => compareOrder(a.order, b.order) || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  drafts.forEach((d, i) => {
    d.field.order = i;
  });
  const list = drafts.map((d) => d.field);
  return { list, byId: new Map(list.map((f) => [f.ref.id, f])), byOid };
}

/** Member `info` → field values, in the fields' order. */
function fieldValuesOf(
  p: Parse,
  fields: Fields,
  collection: string,
  id: string,
  info: unknown,
): BundleMember['fields'] {
  if (info === undefined || info === null) return [];
  if (!isObject(info)) {
    p.warn(collection, id, 'info is not a map: no field values read');
    return [];
  }
  const values = new Map<BundleField, string>();
  let notText = 0;
  let notDates = 0;
  // Keys that are field ids first, then keys naming a migrated field by its legacy key (`oid`).
  const keys = Object.keys(info);
  const direct = keys.filter((key) => fields.byId.has(key));
  const legacy = keys.filter((key) => !fields.byId.has(key) && fields.byOid.has(key));
  const missing = keys.length - direct.length - legacy.length;
  for (const key of [...direct, ...legacy]) {
    const field = (fields.byId.get(key) ?? fields.byOid.get(key)) as BundleField;
    if (values.has(field)) continue;
    const raw = info[key];
    // Non-strings converted to string (null/undefined/objects dropped with a warning), empty strings dropped.
    let value: string;
    if (typeof raw === 'string') value = raw;
    else if (typeof raw === 'number' || typeof raw === 'boolean') value = String(raw);
    else {
      notText++;
      continue;
    }
    if (value.trim() === '') continue;
    if (field.type === 'date') {
      // Date-type values normalised to YYYY-MM-DD when parseable, else kept as text with a warning.
      const date = dateValue(value.trim());
      if (date !== null) value = date;
      else notDates++;
    }
    const max = field.type === 'markdown' ? FIELD_VALUE_MAX.markdown : FIELD_VALUE_MAX.text;
    values.set(field, p.limit(collection, id, `value of field ${field.ref.id}`, value, max));
  }
  // Keys of missing fields dropped with one warning per member.
  if (missing)
    p.warn(
      collection,
      id,
      `${plural(missing, 'field value')} dropped: the field is not in the file or was not imported`,
    );
  if (notText) p.warn(collection, id, `${plural(notText, 'field value')} dropped: not text, a number or a boolean`);
  if (notDates) p.warn(collection, id, `${plural(notDates, 'date field value')} kept as text: not a date`);
  return [...values].sort(([a], [b]) => a.order - b.order).map(([field, value]) => ({ field: field.ref.id, value }));
}

interface Context {
  p: Parse;
  privacy: Privacy;
  fields: Fields;
  accountUid: string | null;
}

function memberOf(ctx: Context, collection: string, refCollection: string, { id, doc }: Entry): BundleMember | null {
  const { p } = ctx;
  const name = text(doc.name);
  // A member without a usable name: failed with a warning.
  if (name === null) {
    p.fail(collection, id, 'no name');
    return null;
  }
  const extra: Record<string, unknown> = {};
  // extra = { color, avatarUrl, pkId, archivedReason, frame when non-empty, supportDescMarkdown }, absent keys omitted.
  const color = p.color(collection, id, doc.color);
  if (color !== null) extra.color = color;
  const avatar = avatarUrl(p, collection, id, doc, ctx.accountUid);
  if (avatar !== null) extra.avatarUrl = avatar;
  const pkId = text(doc.pkId);
  if (pkId !== null) extra.pkId = pkId;
  const archivedReason = text(doc.archivedReason);
  if (archivedReason !== null) extra.archivedReason = archivedReason;
  if ((isObject(doc.frame) && Object.keys(doc.frame).length > 0) || text(doc.frame) !== null)
    extra.frame = structuredClone(doc.frame);
  if (typeof doc.supportDescMarkdown === 'boolean') extra.supportDescMarkdown = doc.supportDescMarkdown;
  return {
    ref: { collection: refCollection, id },
    // Name cut to 80 (warning), desc to 5000 (warning), pronouns to 80.
    name: p.name(collection, id, name),
    displayName: '',
    pronouns: typeof doc.pronouns === 'string' ? p.limit(collection, id, 'pronouns', doc.pronouns, 80) : '',
    description: typeof doc.desc === 'string' ? p.limit(collection, id, 'desc', doc.desc, 5000) : '',
    // Custom fronts get aboutTags ['custom front'].
    aboutTags: refCollection === 'frontStatuses' ? ['custom front'] : [],
    // archived from `archived`.
    archived: doc.archived === true,
    extra,
    buckets: bucketsOf(p, ctx.privacy, collection, id, doc),
    fields: fieldValuesOf(p, ctx.fields, collection, id, doc.info),
  };
}

/** Members and custom fronts by source id, members first. */
class Subjects {
  readonly members = new Map<string, SourceRef>();
  readonly customFronts = new Map<string, SourceRef>();

  resolve(id: unknown): SourceRef | null {
    if (typeof id !== 'string') return null;
    return this.members.get(id) ?? this.customFronts.get(id) ?? null;
  }
}

function groupsFrom(ctx: Context, subjects: Subjects): BundleGroup[] {
  const { p } = ctx;
  const collection = 'groups';
  const drafts = new Map<string, { group: BundleGroup; rawParent: unknown }>();
  for (const { id, doc } of p.entries(collection)) {
    const name = text(doc.name);
    if (name === null) {
      p.fail(collection, id, 'no name');
      continue;
    }
    // Members resolved against members ∪ custom fronts, dangling dropped with one warning per group.
    const members: SourceRef[] = [];
    let dangling = 0;
    for (const memberId of Array.isArray(doc.members) ? doc.members : []) {
      const ref = subjects.resolve(memberId);
      if (!ref) dangling++;
      else if (!members.includes(ref)) members.push(ref);
    }
    if (doc.members !== undefined && doc.members !== null && !Array.isArray(doc.members))
      p.warn(collection, id, 'members is not a list: the group is read empty');
    if (dangling) p.warn(collection, id, `${plural(dangling, 'member reference')} dropped: not a member in the file`);
    let color = p.color(collection, id, doc.color);
    if (color !== null && color.length === 9) {
      // Groups take #rrggbb only (the API's HexColor): the alpha is dropped.
      color = color.slice(0, 7);
      p.warn(collection, id, 'color alpha dropped: groups take #rrggbb');
    }
    drafts.set(id, {
      group: {
        ref: { collection, id },
        name: p.name(collection, id, name),
        description: typeof doc.desc === 'string' ? p.limit(collection, id, 'desc', doc.desc, 500) : '',
        color,
        parent: null,
        members,
        buckets: bucketsOf(p, ctx.privacy, collection, id, doc),
      },
      rawParent: doc.parent,
    });
  }
  for (const [id, draft] of drafts) {
    const parent = draft.rawParent;
    // Parent "root"/missing/empty → null; pointing to a missing group → null with a warning.
    if (parent === undefined || parent === null || parent === '' || parent === 'root') continue;
    if (typeof parent === 'string' && drafts.has(parent)) draft.group.parent = parent;
    else p.warn(collection, id, 'parent dropped: not a group in the file; the group is read as top level');
  }
  // Cycles broken: walking up from each group in file order, the group that closes the loop becomes top level.
  const state = new Map<string, 'open' | 'done'>();
  for (const start of drafts.values()) {
    const path: BundleGroup[] = [];
    let at: BundleGroup | undefined = start.group;
    while (at && !state.has(at.ref.id)) {
      state.set(at.ref.id, 'open');
      path.push(at);
      at = at.parent === null ? undefined : drafts.get(at.parent)?.group;
    }
    if (at && state.get(at.ref.id) === 'open') {
      const closer = path[path.length - 1]!;
      closer.parent = null;
      p.warn(collection, closer.ref.id, 'parent dropped: it closes a loop of groups; the group is read as top level');
    }
    for (const group of path) state.set(group.ref.id, 'done');
  }
  // Parents before their children (otherwise file order), so each parent exists when its children arrive.
  const out: BundleGroup[] = [];
  const placed = new Set<string>();
  for (const { group } of drafts.values()) {
    const chain: BundleGroup[] = [];
    for (let at: BundleGroup | undefined = group; at && !placed.has(at.ref.id); ) {
      chain.push(at);
      placed.add(at.ref.id);
      at = at.parent === null ? undefined : drafts.get(at.parent)?.group;
    }
    out.push(...chain.reverse());
  }
  return out;
}

interface Comment {
  time: number;
  text: string;
}

/** `comments` by the front history entry they belong to. */
function commentsFrom(p: Parse): Map<string, Comment[]> {
  const collection = 'comments';
  const bySession = new Map<string, Comment[]>();
  let otherCollection = 0;
  for (const { id, doc } of p.entries(collection)) {
    if (doc.collection !== undefined && doc.collection !== 'frontHistory') {
      otherCollection++;
      continue;
    }
    const time = parseTime(doc.time);
    if (time === null) {
      p.fail(collection, id, 'comment has no readable time');
      continue;
    }
    if (typeof doc.text !== 'string' || doc.text.trim() === '') {
      p.fail(collection, id, 'comment has no text');
      continue;
    }
    const session = typeof doc.documentId === 'string' ? doc.documentId : '';
    const list = bySession.get(session) ?? [];
    list.push({ time, text: doc.text });
    bySession.set(session, list);
  }
  p.skip(
    collection,
    otherCollection,
    `${plural(otherCollection, 'comment')} on other collections than frontHistory not imported`,
  );
  return bySession;
}

/** The front history, a document at a time; each session takes its comments out of `comments`. */
function* sessionsFrom(ctx: Context, subjects: Subjects, comments: Map<string, Comment[]>): Generator<BundleSession> {
  const { p } = ctx;
  const collection = 'frontHistory';
  for (const { id, doc } of p.entries(collection)) {
    // `member` resolved against members first, then custom fronts (`custom` ignored); unresolved → failed.
    const member = subjects.resolve(doc.member);
    if (!member) {
      p.fail(collection, id, 'member is not a member or custom front in the file (deleted?)');
      continue;
    }
    // startTime parsed (ms, numeric strings, ISO with or without zone, Firestore objects); unparseable → failed.
    const startedAt = parseTime(doc.startTime);
    if (startedAt === null) {
      p.fail(collection, id, 'startTime is missing or not a time');
      continue;
    }
    let endedAt: number | null = null;
    // live=true → endedAt null (endTime ignored); else endTime parsed, missing/null → failed.
    if (doc.live !== true) {
      if (doc.endTime === undefined || doc.endTime === null) {
        p.fail(collection, id, 'not live and has no endTime');
        continue;
      }
      endedAt = parseTime(doc.endTime);
      if (endedAt === null) {
        p.fail(collection, id, 'endTime is not a time');
        continue;
      }
      // endedAt < startedAt → failed.
      if (endedAt < startedAt) {
        p.fail(collection, id, 'endTime is before startTime');
        continue;
      }
    }
    const own = comments.get(id) ?? [];
    comments.delete(id);
    yield { ref: { collection, id }, member, startedAt, endedAt, note: noteOf(p, id, doc, own) };
  }
  let orphans = 0;
  for (const list of comments.values()) orphans += list.length;
  // Comments referencing missing sessions: counted skipped in `comments` with one warning.
  p.skip(
    'comments',
    orphans,
    `${plural(orphans, 'comment')} not imported: the front history entry is not in the file or was not imported`,
  );
}

/** customStatus, then the comments (collection and legacy embedded), sorted by time, one `<ISO time>: <text>` per line; ≤500. */
function noteOf(p: Parse, id: string, doc: Doc, comments: Comment[]): string | null {
  const collection = 'frontHistory';
  const all = [...comments];
  if (Array.isArray(doc.comments)) {
    let unreadable = 0;
    for (const legacy of doc.comments) {
      const time = isObject(legacy) ? parseTime(legacy.time) : null;
      if (time === null || !isObject(legacy) || typeof legacy.text !== 'string' || legacy.text.trim() === '')
        unreadable++;
      else all.push({ time, text: legacy.text });
    }
    if (unreadable)
      p.warn(collection, id, `${plural(unreadable, 'embedded comment')} dropped: no readable time or text`);
  }
  all.sort((a, b) => a.time - b.time);
  const lines = all.map((c) => `${new Date(c.time).toISOString()}: ${c.text.trim().replace(/\s*[\r\n]+\s*/g, ' ')}`);
  const status = text(doc.customStatus);
  if (status !== null) lines.unshift(status);
  if (lines.length === 0) return null;
  return p.limit(collection, id, 'note (customStatus and comments)', lines.join('\n'), 500);
}

function* notesFrom(ctx: Context, subjects: Subjects): Generator<BundleNote> {
  const { p } = ctx;
  const collection = 'notes';
  for (const { id, doc } of p.entries(collection)) {
    // createdAt = date parsed (missing → lastOperationTime → failed if neither).
    let createdAt = parseTime(doc.date);
    if (createdAt === null) {
      if (doc.date !== undefined && doc.date !== null)
        p.warn(collection, id, 'date is not a time: lastOperationTime used');
      createdAt = parseTime(doc.lastOperationTime);
    }
    if (createdAt === null) {
      p.fail(collection, id, 'neither date nor lastOperationTime is a time');
      continue;
    }
    // Member resolved (dangling → null with a warning, the note is kept).
    let member: SourceRef | null = null;
    if (doc.member !== undefined && doc.member !== null && doc.member !== '') {
      member = subjects.resolve(doc.member);
      if (!member) p.warn(collection, id, 'member dropped: not a member in the file (deleted?)');
    }
    const title = text(doc.title);
    yield {
      ref: { collection, id },
      // Title cut 200, content = `note` cut 100000.
      title: title === null ? null : p.limit(collection, id, 'title', title, 200),
      content: typeof doc.note === 'string' ? p.limit(collection, id, 'note', doc.note, 100000) : '',
      member,
      createdAt,
    };
  }
}

/** Mentions in a Simply Plural message's text. */
const SP_MENTION = /<###@([^#<>\s]{1,100})###>/g;

/**
 * Chat: categories in the account's order (private[0].categories, then the rest in file order);
 * channels by category (uncategorised first), each where its category's `channels` list puts it, or
 * by its own `parentCategory` / `order`; messages streamed.
 */
function chatFrom(ctx: Context, subjects: Subjects, priv: Doc | null): ImportBundle['chat'] {
  const { p } = ctx;
  const categories: Array<BundleCategory & { channels: unknown[]; index: number }> = [];
  for (const { id, doc } of p.entries('channelCategories')) {
    const name = text(doc.name);
    if (name === null) {
      p.fail('channelCategories', id, 'no name');
      continue;
    }
    if (text(doc.desc) !== null) p.warn('channelCategories', id, 'desc dropped: a category has no description here');
    categories.push({
      ref: { collection: 'channelCategories', id },
      name: p.name('channelCategories', id, name),
      order: 0,
      channels: Array.isArray(doc.channels) ? doc.channels : [],
      index: categories.length,
    });
  }
  const rank = new Map<string, number>();
  for (const [i, id] of (Array.isArray(priv?.categories) ? priv.categories : []).entries())
    if (typeof id === 'string' && !rank.has(id)) rank.set(id, i);
  const last = Number.MAX_SAFE_INTEGER;
  categories.sort((a, b) => (rank.get(a.ref.id) ?? last) - (rank.get(b.ref.id) ?? last) || a.index - b.index);
  const categoryAt = new Map<string, number>();
  for (const [i, c] of categories.entries()) {
    c.order = i;
    categoryAt.set(c.ref.id, i);
  }

  const listedIn = new Map<string, { category: string; index: number }>();
  for (const c of categories)
    for (const [i, channel] of c.channels.entries())
      if (typeof channel === 'string' && !listedIn.has(channel))
        listedIn.set(channel, { category: c.ref.id, index: i });
  const channels: Array<BundleChannel & { within: number; index: number }> = [];
  for (const { id, doc } of p.entries('channels')) {
    const name = text(doc.name);
    if (name === null) {
      p.fail('channels', id, 'no name');
      continue;
    }
    const topic = text(doc.desc);
    const listed = listedIn.get(id);
    const parent = typeof doc.parentCategory === 'string' && doc.parentCategory !== '' ? doc.parentCategory : null;
    let category = listed?.category ?? null;
    if (!category && parent !== null) {
      if (categoryAt.has(parent)) category = parent;
      else p.warn('channels', id, 'parentCategory dropped: not a category in the file');
    }
    channels.push({
      ref: { collection: 'channels', id },
      name: p.name('channels', id, name),
      topic: topic === null ? null : p.limit('channels', id, 'desc', topic, 1024),
      category,
      order: 0,
      within: listed?.index ?? (typeof doc.order === 'number' && Number.isFinite(doc.order) ? doc.order : last),
      index: channels.length,
    });
  }
  const known = new Set(channels.map((c) => c.ref.id));
  for (const c of categories) {
    const dangling = c.channels.filter((id) => typeof id !== 'string' || !known.has(id)).length;
    if (dangling)
      p.warn(
        'channelCategories',
        c.ref.id,
        `${plural(dangling, 'channel reference')} dropped: not a channel in the file`,
      );
  }
  const place = (c: BundleChannel) => (c.category === null ? -1 : categoryAt.get(c.category)!);
  channels.sort((a, b) => place(a) - place(b) || a.within - b.within || a.index - b.index);
  for (const [i, c] of channels.entries()) c.order = i;
  return {
    categories: categories.map(({ ref, name, order }) => ({ ref, name, order })),
    channels: channels.map(({ ref, name, topic, category, order }) => ({ ref, name, topic, category, order })),
    messages: { total: ctx.p.file.count('chatMessages'), read: () => messagesFrom(p, subjects, known) },
  };
}

/** Chat messages, a document at a time; those still encrypted counted skipped with one warning. */
function* messagesFrom(p: Parse, subjects: Subjects, channels: Set<string>): Generator<BundleMessage> {
  const collection = 'chatMessages';
  let encrypted = 0;
  for (const { id, doc } of p.entries(collection)) {
    if (isCiphertext(doc)) {
      encrypted++;
      continue;
    }
    if (typeof doc.channel !== 'string' || !channels.has(doc.channel)) {
      p.fail(collection, id, 'channel is not a channel in the file (deleted?)');
      continue;
    }
    // Simply Plural lets members write; a custom front (a member here) is taken too.
    const author = subjects.resolve(doc.writer);
    if (!author) {
      p.fail(collection, id, 'writer is not a member in the file (deleted?)');
      continue;
    }
    const body = typeof doc.message === 'string' ? doc.message : typeof doc.content === 'string' ? doc.content : null;
    if (body === null || body.trim() === '') {
      p.fail(collection, id, 'no text');
      continue;
    }
    const writtenAt = parseTime(doc.writtenAt);
    if (writtenAt === null) {
      p.fail(collection, id, 'writtenAt is missing or not a time');
      continue;
    }
    const updatedAt = parseTime(doc.updatedAt);
    const mentions = new Map<string, SourceRef>();
    for (const [, sourceId] of body.matchAll(SP_MENTION)) {
      const member = subjects.resolve(sourceId);
      if (member) mentions.set(sourceId!, member);
    }
    yield {
      ref: { collection, id },
      channel: doc.channel,
      author,
      content: p.limit(collection, id, 'message', body, 4000),
      mentions: [...mentions.values()],
      writtenAt,
      editedAt: updatedAt !== null && updatedAt > writtenAt ? updatedAt : null,
      replyTo: typeof doc.replyTo === 'string' && doc.replyTo !== '' ? doc.replyTo : null,
    };
  }
  p.skip(
    collection,
    encrypted,
    `${plural(encrypted, 'message')} still encrypted (the export was made before Simply Plural decrypted chat in exports): not imported`,
  );
}

/** Defaults from private[0].defaultPrivacySettings ?? defaultPrivacy, filtered to known buckets; legacy: none. */
function defaultsFrom(p: Parse, privacy: Privacy, priv: Doc | null, privId: string | null): ImportBundle['defaults'] {
  const defaults = { members: [] as string[], groups: [] as string[], fields: [] as string[] };
  if (!privacy.bucketEra || !priv) return defaults;
  const settings = priv.defaultPrivacySettings ?? priv.defaultPrivacy;
  if (!isObject(settings)) return defaults;
  let unknown = 0;
  const pick = (value: unknown): string[] => {
    const out: string[] = [];
    for (const bucket of Array.isArray(value) ? value : []) {
      if (typeof bucket === 'string' && privacy.known.has(bucket)) {
        if (!out.includes(bucket)) out.push(bucket);
      } else unknown++;
    }
    return out;
  };
  // {members, groups, customFields}; custom fronts use members'.
  defaults.members = pick(settings.members);
  defaults.groups = pick(settings.groups);
  defaults.fields = pick(settings.customFields);
  if (unknown)
    p.warn('private', privId, `${plural(unknown, 'default bucket reference')} dropped: not a bucket in the file`);
  return defaults;
}

/** Collections not read: every document counted skipped, one warning per non-empty collection, none of their content. */
function skipRest(p: Parse): void {
  for (const key of p.file.keys()) {
    if (READ.has(key)) continue;
    const n = p.size(key);
    if (key === 'friends') p.skip(key, n, FRIENDS_WARNING);
    else if (NOT_YET_IMPORTED.has(key))
      p.skip(key, n, `${plural(n, 'document')} not imported yet: this collection is not imported in this version`);
    else if (NEVER_IMPORTED.has(key))
      p.skip(key, n, `${plural(n, 'document')} not imported: this collection is never imported`);
    else p.skip(key, n, `${plural(n, 'document')} not imported: not a Simply Plural collection this importer knows`);
  }
}

function checkFormat(file: Collections): void {
  if (file.has('switches') && (file.has('version') || !file.has('frontHistory')))
    throw new ImportFormatError('this is a PluralKit export (it has switches), not a Simply Plural export');
  if (file.has('tuppers')) throw new ImportFormatError('this is a Tupperbox export, not a Simply Plural export');
  if (!SIGNATURE.some((key) => file.documents(key) !== null))
    throw new ImportFormatError(
      `not a Simply Plural export: none of its collections (${SIGNATURE.join(', ')}) is in the file`,
    );
}

/** Maps a parsed Simply Plural `export.json` onto an import bundle, read whole; throws ImportFormatError when it is not one. */
export function parseSimplyPlural(doc: unknown): ParsedBundle {
  if (!isObject(doc))
    throw new ImportFormatError('not a Simply Plural export: the file is not a JSON object of collections');
  return materialise(parseSimplyPluralFile(collectionsOf(doc)));
}

/**
 * Maps a Simply Plural `export.json` read a document at a time (collections.ts) onto an import
 * bundle; throws ImportFormatError when it is not one. Front history and notes are read from the
 * file when the bundle's streams are (the file stays open until then); the rest is read now.
 */
export function parseSimplyPluralFile(file: Collections): ImportBundle {
  checkFormat(file);
  checkHeld([
    [
      'members',
      file.count('members') + file.count('frontStatuses') + file.count('customFronts'),
      'members and custom fronts',
    ],
    ['groups', file.count('groups'), 'groups'],
    ['customFields', file.count('customFields'), 'custom fields'],
    ['privacyBuckets', file.count('privacyBuckets'), 'privacy buckets'],
    ['channelCategories', file.count('channelCategories'), 'chat categories'],
    ['channels', file.count('channels'), 'chat channels'],
    ['comments', file.count('comments'), 'comments'],
  ]);
  const p = new Parse(file);
  const user = accountDoc(p, 'users');
  const priv = accountDoc(p, 'private');
  const accountUid = text(user?.uid) ?? text(user?._id) ?? text(priv?.uid) ?? null;
  const latest = priv?.latestVersion;
  const version = typeof latest === 'string' && /^\d+(\.\d+)?$/.test(latest.trim()) ? Number(latest) : latest;
  // Bucket era: private[0].latestVersion ≥ 300; legacy below it or without `private`.
  const privacy: Privacy = {
    bucketEra: typeof version === 'number' && version >= BUCKET_ERA_VERSION,
    known: new Set(),
  };
  const buckets = bucketsFrom(p, privacy);
  privacy.known = new Set(buckets.map((b) => b.ref.id));
  const fields = fieldsFrom(p, privacy, user);
  const ctx: Context = { p, privacy, fields, accountUid };

  const members: BundleMember[] = [];
  const subjects = new Subjects();
  for (const entry of p.entries('members')) {
    const member = memberOf(ctx, 'members', 'members', entry);
    if (member) {
      members.push(member);
      subjects.members.set(member.ref.id, member.ref);
    }
  }
  // Custom fronts: `frontStatuses`, or `customFronts`; one id space, reported under the key they came from.
  for (const collection of ['frontStatuses', 'customFronts']) {
    for (const entry of p.entries(collection)) {
      if (subjects.customFronts.has(entry.id)) {
        p.fail(collection, entry.id, 'duplicate _id: a custom front with it was already read');
        continue;
      }
      const front = memberOf(ctx, collection, 'frontStatuses', entry);
      if (front) {
        members.push(front);
        subjects.customFronts.set(front.ref.id, front.ref);
      }
    }
  }

  const groups = groupsFrom(ctx, subjects);
  const comments = commentsFrom(p);
  const sessions = { total: file.count('frontHistory'), read: () => sessionsFrom(ctx, subjects, comments) };
  const notes = { total: file.count('notes'), read: () => notesFrom(ctx, subjects) };
  const chat = chatFrom(ctx, subjects, priv);
  const privId = text(priv?._id) ?? accountUid;
  const defaults = defaultsFrom(p, privacy, priv, privId);
  skipRest(p);

  return {
    source: 'simply_plural',
    system: systemOf(p, user, accountUid),
    buckets,
    fields: fields.list,
    members,
    groups,
    sessions,
    notes,
    chat,
    defaults,
    tally: Object.fromEntries(p.tally),
    warnings: p.warnings,
  };
}

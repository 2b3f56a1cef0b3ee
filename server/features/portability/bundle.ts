/**
 * What an import source's parser produces: the source's data mapped onto this service's model,
 * still keyed by the source's own ids. Parsers (sources/*.ts) are pure: no database, no clock, no
 * I/O. The applier (apply.ts) resolves the source ids through the account's import refs, so the
 * same file imported twice changes nothing.
 *
 * Limits are applied by the parser (text cut to the contract's lengths, with a warning), so the
 * applier only meets values the API itself would accept.
 */

/** The sources a file can come from (`native`: this server's own archive, nativeImport.ts; no bundle). */
export type ImportSource = 'simply_plural' | 'pluralkit' | 'native';

/**
 * A source entity's identity: the source collection it came from (Simply Plural's collection name,
 * PluralKit's `members` / `groups` / `switches` / `system`) and its id there. Together with the
 * account and the source it is the key of an import ref.
 */
export interface SourceRef {
  collection: string;
  id: string;
}

export interface ImportWarning {
  collection: string;
  /** The source id of the entity the warning is about; null for the file or a whole collection. */
  sourceId: string | null;
  message: string;
}

/** Per source collection: what the parser left out (`skipped`: by design; `failed`: unusable input). */
export interface ParseTally {
  skipped: number;
  failed: number;
}

/** A privacy bucket. `ref.collection` is `privacyBuckets`, or `synthetic` for legacy and PluralKit buckets. */
export interface BundleBucket {
  ref: SourceRef;
  name: string; // 1–80
  description: string; // ≤500
  /** An emoji or null. */
  icon: string | null;
}

export interface BundleField {
  ref: SourceRef;
  name: string; // 1–80
  type: 'text' | 'markdown' | 'date';
  /** Position among the file's fields, from 0. */
  order: number;
  /** Source ids of the buckets that may see the field's values. */
  buckets: string[];
}

export interface BundleMember {
  /** `ref.collection` is `members`, or `frontStatuses` for a Simply Plural custom front. */
  ref: SourceRef;
  name: string; // 1–80
  displayName: string; // ≤80, '' when unset
  pronouns: string; // ≤80
  description: string; // ≤5000
  /** Tags shown on the member's profile (≤30, each 1–40); a custom front carries `custom front`. */
  aboutTags: string[];
  /** Archived in the source (the applier stamps archivedAt with the import's time when it archives). */
  archived: boolean;
  /**
   * What the source says that the model has no column for: color, avatar and banner URLs, PluralKit
   * hid / proxy tags / birthday, Simply Plural pkId / archivedReason. Stored as the member's
   * profileStyle under `imported`, so it is visible, exported, and never lost.
   */
  extra: Record<string, unknown>;
  /** Source ids of the buckets the member is in (privacy: no bucket = no friend sees it). */
  buckets: string[];
  /** Custom field values: field source id → value (text; ISO date for date fields). */
  fields: Array<{ field: string; value: string }>;
}

export interface BundleGroup {
  ref: SourceRef;
  name: string; // 1–80
  description: string; // ≤500
  color: string | null;
  /** Source id of the parent group; null at the top. The parser guarantees no cycles. */
  parent: string | null;
  /** Member refs (members or custom fronts) in the group; dangling ones already dropped with a warning. */
  members: SourceRef[];
  buckets: string[];
}

/** One member's stretch at the front. */
export interface BundleSession {
  /** Simply Plural: the frontHistory document; PluralKit: `switches` / `<member uuid or hid>@<start timestamp>`. */
  ref: SourceRef;
  member: SourceRef;
  startedAt: number; // epoch ms
  /** null = fronting now. */
  endedAt: number | null;
  /** The session's note (Simply Plural customStatus, and its comments appended as `time: text` lines), ≤500. */
  note: string | null;
}

export interface BundleNote {
  ref: SourceRef;
  title: string | null; // ≤200
  content: string; // ≤100000, may be ''
  /** The member the note is about, or null. */
  member: SourceRef | null;
  /** Epoch ms: when the note was written (its `date`). */
  createdAt: number;
}

/** A chat category (Simply Plural channelCategories), in the one space the import creates. */
export interface BundleCategory {
  ref: SourceRef;
  name: string; // 1–80
  /** Position among the file's categories, from 0. */
  order: number;
}

/** A chat channel (Simply Plural channels). */
export interface BundleChannel {
  ref: SourceRef;
  name: string; // 1–80
  topic: string | null; // ≤1024
  /** Source id of its category, or null. */
  category: string | null;
  /** Position among the file's channels (by category, then within it), from 0. */
  order: number;
}

/** A chat message (Simply Plural chatMessages, already decrypted in the file). */
export interface BundleMessage {
  ref: SourceRef;
  /** Source id of its channel (one of the bundle's channels). */
  channel: string;
  /** The member who wrote it. */
  author: SourceRef;
  /** The text (1–4000), mentions still in the source's `<###@id###>` form. */
  content: string;
  /** Members the text mentions, by source ref, in order of first appearance (resolvable ones only). */
  mentions: SourceRef[];
  writtenAt: number; // epoch ms
  editedAt: number | null;
  /** Source id of the message it replies to, or null. */
  replyTo: string | null;
}

export interface BundleSystem {
  name: string | null;
  description: string | null;
  tag: string | null;
  avatarUrl: string | null;
  color: string | null;
}

/**
 * A collection that can be as large as the file (front history, notes): read while it is written,
 * a document at a time, never held whole. `read()` may be called once; `total` is the number of
 * source documents (what progress counts), known before reading.
 */
export interface Streamed<T> {
  readonly total: number;
  read(): Iterable<T>;
}

/** At most this many warnings are kept in memory per list; the rest are only counted. */
export const KEPT_WARNINGS = 1000;

/** Warnings in the order they were given: the first KEPT_WARNINGS kept, the rest counted. */
export class WarningLog {
  readonly list: ImportWarning[] = [];
  omitted = 0;
  push(warning: ImportWarning): void {
    if (this.list.length < KEPT_WARNINGS) this.list.push(warning);
    else this.omitted++;
  }
}

/**
 * A parsed import. Sessions and notes are streamed: their parse warnings and tallies are added to
 * `tally` and `warnings` as they are read, so both are complete only once they have been.
 */
export interface ImportBundle {
  source: ImportSource;
  system: BundleSystem | null;
  buckets: BundleBucket[];
  fields: BundleField[];
  members: BundleMember[];
  groups: BundleGroup[];
  sessions: Streamed<BundleSession>;
  notes: Streamed<BundleNote>;
  /** Chat: written into one space the import creates when there is a channel. */
  chat: { categories: BundleCategory[]; channels: BundleChannel[]; messages: Streamed<BundleMessage> };
  /** Buckets (source ids) new members / groups / custom fields get by default. */
  defaults: { members: string[]; groups: string[]; fields: string[] };
  /** Per source collection (including ones not imported at all, like `tokens`): what was left out and why it is not in the lists above. */
  tally: Record<string, ParseTally>;
  warnings: WarningLog;
}

/** A bundle read whole (tests, small files): its streams drained into lists, in the order the applier reads them. */
export interface ParsedBundle extends Omit<ImportBundle, 'sessions' | 'notes' | 'chat' | 'warnings'> {
  sessions: BundleSession[];
  notes: BundleNote[];
  chat: { categories: BundleCategory[]; channels: BundleChannel[]; messages: BundleMessage[] };
  warnings: ImportWarning[];
  warningsOmitted: number;
}

export function streamedOf<T>(items: T[]): Streamed<T> {
  return { total: items.length, read: () => items };
}

/** Reads a bundle's streams whole (sessions, notes, then messages, as apply.ts does). */
export function materialise(bundle: ImportBundle): ParsedBundle {
  const sessions = [...bundle.sessions.read()];
  const notes = [...bundle.notes.read()];
  const chat = { ...bundle.chat, messages: [...bundle.chat.messages.read()] };
  const { list, omitted } = bundle.warnings;
  return { ...bundle, notes, sessions, chat, warnings: list, warningsOmitted: omitted };
}

/**
 * The most documents of a collection that is held while it is written (not streamed) an import
 * takes; a file with more fails as a whole, before anything is read, so the job's memory stays
 * bounded. Far above what the apps allow or their users have.
 */
export const HELD_MAX: Record<string, number> = {
  members: 20_000,
  groups: 20_000,
  customFields: 1_000,
  privacyBuckets: 1_000,
  channelCategories: 1_000,
  channels: 1_000,
  comments: 500_000,
};

/** Fails the import when a held collection is larger than HELD_MAX allows. */
export function checkHeld(counts: Array<[collection: keyof typeof HELD_MAX, count: number, label: string]>): void {
  for (const [collection, count, label] of counts) {
    const max = HELD_MAX[collection]!;
    if (count > max)
      throw new ImportFormatError(
        `The file is too large to import: it holds ${count} ${label}, more than the ${max} an import takes`,
      );
  }
}

/** Thrown by a parser when the file as a whole cannot be imported (not JSON of that source, no members array, …). */
export class ImportFormatError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ImportFormatError';
  }
}

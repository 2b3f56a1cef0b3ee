/**
 * Writes a parsed import (bundle.ts) into the account, inside the caller's transaction: all or
 * nothing for the import, and each entity in a savepoint of its own, so an entity the rules refuse
 * fails alone (counted, with a warning) and is never half written.
 *
 * Entities are matched through the account's import refs, never by name: an entity the refs do
 * not know (or whose local row was purged since) is created; one whose digest (a hash of what the
 * file said about it) is unchanged is left alone; one whose digest changed is updated in place.
 * Writes go through the owning areas' services (their rules, defaults and audit rows), except
 * front history and the notes' dates, which no API writes: those are bulk statements of repo.ts.
 */
import { createHash, randomUUID } from 'node:crypto';
import { inTransaction, ownerOf, type OwnerContext } from '../../core/context.ts';
import { DomainError } from '../../core/errors.ts';
import { createField, setMemberValue, updateField } from '../customFields/index.ts';
import { type ImportedNote, insertImportedNotes, setImportedNoteTime, updateEntry } from '../entries/index.ts';
import { lockFront } from '../front/index.ts';
import { createFolder, createGroup, setGroupMembers, updateFolder, updateGroup } from '../groups/index.ts';
import { createMember, membersByIds, updateMember } from '../members/index.ts';
import { createBucket, setBucketsOf, setDefaults, updateBucket } from '../privacyBuckets/index.ts';
import { MessageCipher } from '../../crypto/messageCipher.ts';
import {
  createCategory,
  createChannel,
  createSpace,
  moveChannel,
  updateCategory,
  updateChannel,
} from '../messaging/index.ts';
import type {
  BundleBucket,
  BundleCategory,
  BundleChannel,
  BundleField,
  BundleGroup,
  BundleMember,
  BundleMessage,
  BundleNote,
  BundleSession,
  ImportBundle,
  SourceRef,
  WarningLog,
} from './bundle.ts';
import {
  type CollectionReport,
  importsRepo,
  type MessageRow,
  type RefRow,
  type RefTable,
  type SessionRow,
} from './repo.ts';
import { cut } from './sources/text.ts';

export interface ApplyResult {
  report: Record<string, CollectionReport>;
  /** The parser's warnings and the applier's, in the order they were given. */
  warnings: WarningLog;
  /** Entities written or found unchanged. */
  done: number;
  total: number;
  /** Milliseconds per phase (for the log). */
  phases: Record<string, number>;
}

const HEX_COLOR = /^#[0-9a-fA-F]{6}$/;

const keyOf = (ref: SourceRef) => `${ref.collection}\u0000${ref.id}`;
const digestOf = (value: unknown) => createHash('sha256').update(JSON.stringify(value)).digest('base64url');

/** The entities of a bundle (of the streamed ones, the documents the file holds). */
export function entityCount(bundle: ImportBundle): number {
  return (
    bundle.buckets.length +
    bundle.fields.length +
    bundle.members.length +
    bundle.groups.length +
    bundle.notes.total +
    bundle.sessions.total +
    bundle.chat.categories.length +
    bundle.chat.channels.length +
    bundle.chat.messages.total
  );
}

/** Streamed entities are read, checked against their refs and written this many at a time. */
const BATCH = 2000;

/** The source collections that are streamed (sessions, notes): their refs are read a batch at a time. */
const STREAMED = ['frontHistory', 'switches', 'notes', 'chatMessages'];

function* batches<T>(items: Iterable<T>, size: number): Generator<T[]> {
  let batch: T[] = [];
  for (const item of items) {
    batch.push(item);
    if (batch.length === size) {
      yield batch;
      batch = [];
    }
  }
  if (batch.length > 0) yield batch;
}

class Importer {
  private readonly counts: Record<string, CollectionReport> = {};
  /**
   * Source ref key → local id and digest, as the refs table had them, then as this run leaves them:
   * every ref of the small collections, and those of the streamed batch being written.
   */
  private readonly refs = new Map<string, { localId: string; digest: string }>();
  private readonly changedRefs: RefRow[] = [];
  done = 0;

  constructor(
    private readonly ctx: OwnerContext,
    private readonly bundle: ImportBundle,
    private readonly onProgress: (done: number) => Promise<void>,
  ) {}

  get warnings(): WarningLog {
    return this.bundle.warnings;
  }

  private count(collection: string, outcome: keyof CollectionReport): void {
    this.counts[collection] ??= { created: 0, updated: 0, unchanged: 0, skipped: 0, failed: 0 };
    this.counts[collection][outcome]++;
  }

  /** Per collection, what was written and the parser's tally (complete once the streams are read). */
  report(): Record<string, CollectionReport> {
    const report: Record<string, CollectionReport> = {};
    for (const [collection, tally] of Object.entries(this.bundle.tally))
      report[collection] = { created: 0, updated: 0, unchanged: 0, ...tally };
    for (const [collection, c] of Object.entries(this.counts)) {
      const t = this.bundle.tally[collection] ?? { skipped: 0, failed: 0 };
      report[collection] = { ...c, skipped: c.skipped + t.skipped, failed: c.failed + t.failed };
    }
    return report;
  }

  private warn(ref: SourceRef, message: string): void {
    this.warnings.push({ collection: ref.collection, sourceId: ref.id, message });
  }

  private async progressed(): Promise<void> {
    this.done++;
    if (this.done % 500 === 0) await this.onProgress(this.done);
  }

  /** Loads the refs of this source but the streamed ones, keeping only those whose local entity still exists. */
  async loadRefs(): Promise<void> {
    const { db } = this.ctx;
    const userId = ownerOf(this.ctx);
    const rows = await importsRepo.refs(db, userId, this.bundle.source, STREAMED);
    const byTable = new Map<RefTable, RefRow[]>();
    for (const row of rows) {
      const table = TABLE_OF[row.collection];
      if (!table) throw new Error(`import ref of unknown collection ${row.collection}`);
      const list = byTable.get(table);
      if (list) list.push(row);
      else byTable.set(table, [row]);
    }
    for (const [table, tableRows] of byTable) {
      const live = await importsRepo.existing(
        db,
        table,
        userId,
        tableRows.map((r) => r.local_id),
      );
      for (const r of tableRows)
        if (live.has(r.local_id))
          this.refs.set(`${r.collection}\u0000${r.source_id}`, { localId: r.local_id, digest: r.digest });
    }
  }

  localId(ref: SourceRef): string | undefined {
    return this.refs.get(keyOf(ref))?.localId;
  }

  /** The local ids of the buckets `sourceIds` name (each bucket's ref collection is looked up in both forms). */
  bucketIds(sourceIds: readonly string[]): string[] {
    const ids: string[] = [];
    for (const id of sourceIds) {
      const local = this.localId({ collection: 'privacyBuckets', id }) ?? this.localId({ collection: 'synthetic', id });
      if (local) ids.push(local);
    }
    return ids;
  }

  /**
   * Creates, updates or leaves one entity, in a savepoint: a refusal of the rules (a DomainError)
   * fails this entity alone, with a warning; anything else fails the import.
   */
  async upsert<E extends { ref: SourceRef }>(
    entity: E,
    digestInput: unknown,
    write: { create(ctx: OwnerContext): Promise<string>; update(ctx: OwnerContext, localId: string): Promise<void> },
    options: { counted: boolean } = { counted: true },
  ): Promise<void> {
    const { ref } = entity;
    const count = (outcome: keyof CollectionReport) => {
      if (options.counted) this.count(ref.collection, outcome);
    };
    const key = keyOf(ref);
    const digest = digestOf(digestInput);
    const known = this.refs.get(key);
    try {
      if (known && known.digest === digest) {
        count('unchanged');
      } else if (known) {
        await inTransaction(this.ctx, (tx) => write.update(tx, known.localId));
        this.refs.set(key, { localId: known.localId, digest });
        this.changedRefs.push({ collection: ref.collection, source_id: ref.id, local_id: known.localId, digest });
        count('updated');
      } else {
        const localId = await inTransaction(this.ctx, (tx) => write.create(tx));
        this.refs.set(key, { localId, digest });
        this.changedRefs.push({ collection: ref.collection, source_id: ref.id, local_id: localId, digest });
        count('created');
      }
    } catch (err) {
      if (!(err instanceof DomainError)) throw err;
      count('failed');
      this.warn(ref, `not imported: ${err.message}`);
    }
    if (options.counted) await this.progressed();
  }

  /** Records the refs this run created or moved since the last call. */
  async saveRefs(): Promise<void> {
    await importsRepo.saveRefs(this.ctx.db, ownerOf(this.ctx), this.bundle.source, this.changedRefs.splice(0));
  }

  /**
   * Runs `write` for one batch of streamed entities with their live refs loaded into `refs`, then
   * records the refs it changed and forgets the batch's.
   */
  private async inBatch(
    table: RefTable,
    batch: Array<{ ref: SourceRef }>,
    write: () => Promise<void>,
    also: SourceRef[] = [],
  ): Promise<void> {
    const byCollection = new Map<string, string[]>();
    for (const ref of [...batch.map((e) => e.ref), ...also]) {
      const ids = byCollection.get(ref.collection);
      if (ids) ids.push(ref.id);
      else byCollection.set(ref.collection, [ref.id]);
    }
    const { db } = this.ctx;
    const userId = ownerOf(this.ctx);
    for (const [collection, ids] of byCollection)
      for (const r of await importsRepo.liveRefsOf(db, table, userId, this.bundle.source, collection, ids))
        this.refs.set(`${r.collection}\u0000${r.source_id}`, { localId: r.local_id, digest: r.digest });
    await write();
    await this.saveRefs();
    for (const { ref } of batch) this.refs.delete(keyOf(ref));
    for (const ref of also) this.refs.delete(keyOf(ref));
  }

  async buckets(): Promise<void> {
    for (const b of this.bundle.buckets) await this.upsert(b, b, bucketWrite(b));
  }

  async fields(): Promise<void> {
    for (const f of this.bundle.fields) {
      const buckets = this.bucketIds(f.buckets);
      await this.upsert(f, { f, buckets }, fieldWrite(f, buckets));
    }
  }

  async members(): Promise<void> {
    for (const m of this.bundle.members) {
      const buckets = this.bucketIds(m.buckets);
      const values: Array<{ fieldId: string; value: string }> = [];
      for (const v of m.fields) {
        const fieldId = this.localId({ collection: this.fieldCollection(v.field), id: v.field });
        if (fieldId) values.push({ fieldId, value: v.value });
      }
      await this.upsert(
        m,
        { m, buckets, values },
        memberWrite(m, buckets, values, (message) => this.warn(m.ref, message)),
      );
    }
  }

  private fieldCollection(sourceId: string): string {
    return this.bundle.fields.find((f) => f.ref.id === sourceId)?.ref.collection ?? 'customFields';
  }

  /**
   * Groups here hold members and sit in folders; they do not nest in each other. A source group
   * with child groups therefore also becomes a folder of the same name (ref `<collection>#folder`,
   * not counted in the report): its children sit in that folder, and the group itself sits where
   * its own parent's folder is. Parents are written before children (the parser breaks cycles).
   */
  async groups(): Promise<void> {
    const byId = new Map(this.bundle.groups.map((g) => [g.ref.id, g]));
    const parentOf = (g: BundleGroup) => (g.parent && byId.has(g.parent) ? g.parent : null);
    const hasChildren = new Set(this.bundle.groups.map(parentOf).filter((p) => p !== null));
    const folderRef = (g: BundleGroup): SourceRef => ({ collection: `${g.ref.collection}#folder`, id: g.ref.id });
    const pending = new Map(this.bundle.groups.map((g) => [g.ref.id, g]));
    while (pending.size > 0) {
      const ready = [...pending.values()].filter((g) => {
        const parent = parentOf(g);
        return parent === null || !pending.has(parent);
      });
      for (const g of ready.length > 0 ? ready : [...pending.values()]) {
        pending.delete(g.ref.id);
        const parent = parentOf(g);
        const folderId = parent ? (this.localId(folderRef(byId.get(parent)!)) ?? null) : null;
        if (hasChildren.has(g.ref.id)) {
          const ref = folderRef(g);
          await this.upsert({ ref }, { name: g.name, description: g.description, folderId }, folderWrite(g, folderId), {
            counted: false,
          });
        }
        const memberIds = [...new Set(g.members.map((r) => this.localId(r)).filter((id) => id !== undefined))];
        const buckets = this.bucketIds(g.buckets);
        await this.upsert(g, { g, folderId, memberIds, buckets }, groupWrite(g, folderId, memberIds, buckets));
      }
    }
  }

  async defaults(): Promise<void> {
    const d = this.bundle.defaults;
    const sets: Array<[Parameters<typeof setDefaults>[1], string[]]> = [
      ['new_member', d.members],
      ['new_group', d.groups],
      ['new_custom_field', d.fields],
    ];
    for (const [kind, sourceIds] of sets) {
      if (sourceIds.length > 0) await setDefaults(this.ctx, kind, this.bucketIds(sourceIds));
    }
  }

  /** A batch at a time: changed notes one at a time, new ones in bulk (insertImportedNotes: the cap checked once per batch). */
  async notes(): Promise<void> {
    let read = 0;
    for (const batch of batches(this.bundle.notes.read(), BATCH)) {
      read += batch.length;
      await this.inBatch('entries', batch, () => this.notesBatch(batch));
      await this.onProgress(this.done);
    }
    this.done += Math.max(0, this.bundle.notes.total - read);
  }

  private async notesBatch(notes: BundleNote[]): Promise<void> {
    const fresh: ImportedNote[] = [];
    const pending = new Map<string, { ref: SourceRef; digest: string }>();
    for (const n of notes) {
      const memberId = n.member ? this.localId(n.member) : undefined;
      if (n.member && !memberId) this.warn(n.ref, 'its member was not imported: the note is kept without it');
      const digestInput = { n, memberId };
      const known = this.refs.get(keyOf(n.ref));
      if (known) {
        await this.upsert(n, digestInput, noteWrite(n, memberId ?? null));
        continue;
      }
      const id = randomUUID();
      fresh.push({ id, title: n.title, content: n.content, memberId: memberId ?? null, at: n.createdAt });
      pending.set(id, { ref: n.ref, digest: digestOf(digestInput) });
    }
    if (fresh.length === 0) return;
    const { written, refused } = await insertImportedNotes(this.ctx, fresh);
    for (const [id, { ref, digest }] of pending) {
      const localId = written.get(id);
      if (localId) {
        this.changedRefs.push({ collection: ref.collection, source_id: ref.id, local_id: localId, digest });
        this.count(ref.collection, 'created');
      } else {
        this.count(ref.collection, 'failed');
        this.warn(ref, `not imported: ${refused.get(id) ?? 'refused'}`);
      }
      this.done++;
    }
  }

  /** A batch at a time, each in two statements (new sessions, corrected ones), under the front's lock. */
  async sessions(): Promise<void> {
    const { db } = this.ctx;
    const userId = ownerOf(this.ctx);
    const stream = this.bundle.sessions;
    if (stream.total === 0) return;
    await lockFront(db as Parameters<typeof lockFront>[0], userId);
    const placement = new Map<string, { side: string; sub: string | null }>();
    const live = await importsRepo.liveMembers(db, userId);
    let read = 0;
    for (const batch of batches(stream.read(), BATCH)) {
      read += batch.length;
      const unplaced = [
        ...new Set(batch.map((s) => this.localId(s.member)).filter((id) => id !== undefined && !placement.has(id))),
      ] as string[];
      if (unplaced.length > 0)
        for (const row of await membersByIds(db, userId, unplaced))
          placement.set(row.id, { side: row.side_system_id, sub: row.sub_system_id });
      await this.inBatch('front_sessions', batch, () => this.sessionsBatch(batch, placement, live));
      await this.onProgress(this.done);
    }
    this.done += Math.max(0, stream.total - read);
  }

  private async sessionsBatch(
    sessions: BundleSession[],
    placement: Map<string, { side: string; sub: string | null }>,
    live: Set<string>,
  ): Promise<void> {
    const { db } = this.ctx;
    const userId = ownerOf(this.ctx);
    const inserts: SessionRow[] = [];
    const updates: SessionRow[] = [];
    for (const s of sessions) {
      const memberId = this.localId(s.member);
      const place = memberId ? placement.get(memberId) : undefined;
      const known = this.refs.get(keyOf(s.ref));
      const digest = digestOf(s);
      if (!memberId || !place) {
        this.count(s.ref.collection, 'failed');
        this.warn(s.ref, 'its member was not imported: session not imported');
      } else if (known && known.digest === digest) {
        this.count(s.ref.collection, 'unchanged');
      } else if (!known && s.endedAt === null && live.has(memberId)) {
        this.count(s.ref.collection, 'skipped');
        this.warn(s.ref, 'the member is fronting here already: its open session was not imported');
      } else {
        const row: SessionRow = {
          id: known?.localId ?? randomUUID(),
          member_id: memberId,
          side_system_id: place.side,
          sub_system_id: place.sub,
          started_at: s.startedAt,
          ended_at: s.endedAt,
          note: s.note,
        };
        if (s.endedAt === null) live.add(memberId);
        (known ? updates : inserts).push(row);
        this.changedRefs.push({ collection: s.ref.collection, source_id: s.ref.id, local_id: row.id, digest });
        this.count(s.ref.collection, known ? 'updated' : 'created');
      }
      this.done++;
    }
    await importsRepo.insertSessions(db, userId, this.ctx.now, inserts);
    await importsRepo.updateSessions(db, userId, this.ctx.now, updates);
  }

  /**
   * Chat: one space for the import (made with the first category or channel; renamed or moved
   * there, it is left as it is), categories and channels through the messaging area's services,
   * then messages a batch at a time (streamed, like front history).
   */
  async chat(): Promise<void> {
    const { categories, channels } = this.bundle.chat;
    if (categories.length > 0 || channels.length > 0)
      await this.upsert({ ref: SPACE_REF }, { name: SPACE_NAME }, spaceWrite(), { counted: false });
    const spaceId = this.localId(SPACE_REF);
    for (const c of categories) {
      if (!spaceId) this.spaceMissing(c.ref);
      else await this.upsert(c, c, categoryWrite(c, spaceId));
    }
    for (const c of channels) {
      const categoryId = c.category
        ? (this.localId({ collection: 'channelCategories', id: c.category }) ?? null)
        : null;
      if (!spaceId) this.spaceMissing(c.ref);
      else await this.upsert(c, { c, categoryId }, channelWrite(c, spaceId, categoryId));
    }
    const stream = this.bundle.chat.messages;
    let read = 0;
    for (const batch of batches(stream.read(), BATCH)) {
      read += batch.length;
      const replies = batch.flatMap((m) => (m.replyTo ? [{ collection: m.ref.collection, id: m.replyTo }] : []));
      await this.inBatch('messaging_messages', batch, () => this.messagesBatch(batch), replies);
      await this.onProgress(this.done);
    }
    this.done += Math.max(0, stream.total - read);
  }

  private spaceMissing(ref: SourceRef): void {
    this.count(ref.collection, 'failed');
    this.warn(ref, 'not imported: the chat space could not be created');
  }

  private async messagesBatch(messages: BundleMessage[]): Promise<void> {
    const userId = ownerOf(this.ctx);
    const cipher = new MessageCipher(this.ctx.config.messageEncryptionKeys);
    const inserts: MessageRow[] = [];
    const updates: MessageRow[] = [];
    for (const m of messages) {
      this.done++;
      const channelId = this.localId({ collection: 'channels', id: m.channel });
      const authorId = this.localId(m.author);
      if (!channelId || !authorId) {
        this.count(m.ref.collection, 'failed');
        this.warn(m.ref, `not imported: its ${channelId ? 'writer' : 'channel'} was not imported`);
        continue;
      }
      const mentioned = new Map<string, string>();
      for (const ref of m.mentions) {
        const local = this.localId(ref);
        if (local) mentioned.set(ref.id, local);
      }
      let content = m.content.replace(SP_MENTION, (all, id: string) => {
        const local = mentioned.get(id);
        return local ? `<@${local}>` : all;
      });
      if (content.length > MESSAGE_MAX) {
        content = cut(content, MESSAGE_MAX);
        this.warn(m.ref, `message cut to ${MESSAGE_MAX} characters (its mentions are longer here)`);
      }
      const key = keyOf(m.ref);
      const known = this.refs.get(key);
      const digest = digestOf({ m, channelId, authorId, mentioned: [...mentioned] });
      if (known && known.digest === digest) {
        this.count(m.ref.collection, 'unchanged');
        continue;
      }
      const id = known?.localId ?? randomUUID();
      let replyId: string | null = null;
      if (m.replyTo) {
        replyId = this.localId({ collection: m.ref.collection, id: m.replyTo }) ?? null;
        if (!replyId) this.warn(m.ref, 'replyTo dropped: the message it answers was not imported before it');
      }
      const sealed = cipher.seal(userId, id, content);
      const row: MessageRow = {
        id,
        channel_id: channelId,
        author_member_id: authorId,
        key_id: sealed.keyId,
        content_enc: sealed.data.toString('hex'),
        reply_to_id: replyId,
        mention_member_ids: [...new Set(mentioned.values())],
        created_at: m.writtenAt,
        edited_at: m.editedAt,
      };
      (known ? updates : inserts).push(row);
      // Known to later messages of this batch (replies), forgotten with the batch.
      this.refs.set(key, { localId: id, digest });
      this.changedRefs.push({ collection: m.ref.collection, source_id: m.ref.id, local_id: id, digest });
      this.count(m.ref.collection, known ? 'updated' : 'created');
    }
    await importsRepo.insertMessages(this.ctx.db, userId, this.ctx.now, inserts);
    await importsRepo.updateMessages(this.ctx.db, userId, updates);
  }
}

function spaceWrite() {
  return {
    create: async (ctx: OwnerContext) => (await createSpace(ctx, { name: SPACE_NAME })).id,
    update: async () => undefined,
  };
}

function categoryWrite(c: BundleCategory, spaceId: string) {
  return {
    create: async (ctx: OwnerContext) => (await createCategory(ctx, spaceId, c.name)).id,
    update: async (ctx: OwnerContext, id: string) => {
      await updateCategory(ctx, id, { name: c.name });
    },
  };
}

function channelWrite(c: BundleChannel, spaceId: string, categoryId: string | null) {
  return {
    create: async (ctx: OwnerContext) =>
      (await createChannel(ctx, spaceId, { name: c.name, topic: c.topic, ...(categoryId ? { categoryId } : {}) })).id,
    update: async (ctx: OwnerContext, id: string) => {
      await updateChannel(ctx, id, { name: c.name, topic: c.topic });
      await moveChannel(ctx, id, categoryId);
    },
  };
}

/** The space a Simply Plural import's chat goes into (not counted: the source has no spaces). */
const SPACE_REF: SourceRef = { collection: 'chat#space', id: 'simply_plural' };
const SPACE_NAME = 'Simply Plural';
/** Mentions in a Simply Plural message's text (as the parser finds them). */
const SP_MENTION = /<###@([^#<>\s]{1,100})###>/g;
const MESSAGE_MAX = 4000;

/** Which table a ref of a source collection points into. */
const TABLE_OF: Record<string, RefTable> = {
  privacyBuckets: 'privacy_buckets',
  synthetic: 'privacy_buckets',
  customFields: 'custom_field_definitions',
  'users.fields': 'custom_field_definitions',
  members: 'members',
  frontStatuses: 'members',
  customFronts: 'members',
  groups: 'directories',
  'groups#folder': 'directories',
  'chat#space': 'messaging_spaces',
  channelCategories: 'messaging_categories',
  channels: 'messaging_channels',
  chatMessages: 'messaging_messages',
  notes: 'entries',
  frontHistory: 'front_sessions',
  switches: 'front_sessions',
};

function bucketWrite(b: BundleBucket) {
  const input = { name: b.name, description: b.description, ...(b.icon ? { icon: b.icon } : {}) };
  return {
    create: async (ctx: OwnerContext) => (await createBucket(ctx, input))._id,
    update: async (ctx: OwnerContext, id: string) => {
      await updateBucket(ctx, id, { ...input, icon: b.icon });
    },
  };
}

function fieldWrite(f: BundleField, buckets: string[]) {
  return {
    create: async (ctx: OwnerContext) => {
      const { id } = await createField(ctx, { name: f.name, type: f.type });
      await setBucketsOf(ctx, 'custom_field', id, buckets);
      return id;
    },
    update: async (ctx: OwnerContext, id: string) => {
      await updateField(ctx, id, { name: f.name });
      await setBucketsOf(ctx, 'custom_field', id, buckets);
    },
  };
}

function memberWrite(
  m: BundleMember,
  buckets: string[],
  values: Array<{ fieldId: string; value: string }>,
  onRefused: (message: string) => void,
) {
  const details = {
    name: m.name,
    displayName: m.displayName,
    pronouns: m.pronouns,
    description: m.description,
    aboutTags: m.aboutTags,
    profileStyle: Object.keys(m.extra).length > 0 ? { imported: m.extra } : null,
    archived: m.archived,
  };
  const rest = async (ctx: OwnerContext, id: string) => {
    await setBucketsOf(ctx, 'member', id, buckets);
    // A value the field refuses (a date that is not one) is left out alone, not the member.
    for (const v of values) {
      try {
        await inTransaction(ctx, (tx) => setMemberValue(tx, id, v.fieldId, v.value));
      } catch (err) {
        if (!(err instanceof DomainError)) throw err;
        onRefused(`custom field value not imported: ${err.message}`);
      }
    }
  };
  return {
    create: async (ctx: OwnerContext) => {
      const { id } = await createMember(ctx, {
        name: m.name,
        displayName: m.displayName,
        pronouns: m.pronouns,
        description: m.description,
        aboutTags: m.aboutTags,
      });
      if (details.profileStyle || m.archived)
        await updateMember(ctx, id, { profileStyle: details.profileStyle, archived: m.archived });
      await rest(ctx, id);
      return id;
    },
    update: async (ctx: OwnerContext, id: string) => {
      await updateMember(ctx, id, details);
      await rest(ctx, id);
    },
  };
}

function folderWrite(g: BundleGroup, parentId: string | null) {
  return {
    create: async (ctx: OwnerContext) =>
      (await createFolder(ctx, { name: g.name, description: g.description, ...(parentId ? { parentId } : {}) })).id,
    update: async (ctx: OwnerContext, id: string) => {
      await updateFolder(ctx, id, { name: g.name, description: g.description, parentId });
    },
  };
}

function groupWrite(g: BundleGroup, parentId: string | null, memberIds: string[], buckets: string[]) {
  const color = g.color && HEX_COLOR.test(g.color) ? g.color : null;
  return {
    create: async (ctx: OwnerContext) => {
      const { id } = await createGroup(ctx, {
        name: g.name,
        description: g.description,
        ...(color ? { color } : {}),
        ...(parentId ? { parentId } : {}),
        memberIds,
      });
      await setBucketsOf(ctx, 'group', id, buckets);
      return id;
    },
    update: async (ctx: OwnerContext, id: string) => {
      await updateGroup(ctx, id, { name: g.name, description: g.description, color, parentId });
      await setGroupMembers(ctx, id, memberIds);
      await setBucketsOf(ctx, 'group', id, buckets);
    },
  };
}

/** An imported note an edited export changed (new ones are written in bulk by Importer.notes). */
function noteWrite(n: BundleNote, memberId: string | null) {
  return {
    create: async (): Promise<string> => {
      throw new Error('new notes are written in bulk');
    },
    update: async (ctx: OwnerContext, id: string) => {
      await updateEntry(ctx, id, { content: n.content, title: n.title, memberId });
      await setImportedNoteTime(ctx, id, n.createdAt);
    },
  };
}

/**
 * Applies the bundle with `ctx.db` a transaction the caller commits (or, for a dry run, rolls
 * back). `onProgress` is told the entities done so far, now and then.
 */
export async function applyBundle(
  ctx: OwnerContext,
  bundle: ImportBundle,
  onProgress: (done: number) => Promise<void>,
): Promise<ApplyResult> {
  const run = new Importer(ctx, bundle, onProgress);
  const phases: Record<string, number> = {};
  const phase = async (name: string, work: () => Promise<void>) => {
    const started = performance.now();
    await work();
    phases[name] = Math.round(performance.now() - started);
  };
  await phase('refs', () => run.loadRefs());
  await phase('buckets', () => run.buckets());
  await phase('fields', () => run.fields());
  await phase('members', () => run.members());
  await phase('groups', () => run.groups());
  await phase('defaults', () => run.defaults());
  await phase('sessions', () => run.sessions());
  await phase('notes', () => run.notes());
  await phase('chat', () => run.chat());
  await phase('saveRefs', () => run.saveRefs());
  return { report: run.report(), warnings: run.warnings, done: run.done, total: entityCount(bundle), phases };
}

/**
 * The Simply Plural export parser against two sample exports written from the format notes: a
 * bucket-era account (latestVersion 312) and a legacy one (latestVersion 142: privacy flags,
 * users[0].fields, Firestore times, embedded comments, `customFronts`, notes as a map keyed by id).
 * Cases the samples do not hold are run on edited copies of them.
 */
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { type ParsedBundle, ImportFormatError } from '../server/features/portability/bundle.ts';
import { parseSimplyPlural } from '../server/features/portability/sources/simplyPlural.ts';

type Json = Record<string, unknown>;
type Docs = Json[];

const fixtures = join(dirname(fileURLToPath(import.meta.url)), 'fixtures/imports');
const load = (name: string): Json => JSON.parse(readFileSync(join(fixtures, name), 'utf8')) as Json;
const BUCKET_ERA = load('simply-plural-export.json');
const LEGACY = load('simply-plural-legacy.json');

const B_FRIENDS = '65a1f0c2e4b0a1b2c3d4e5f6';
const B_TRUSTED = '65a1f0c2e4b0a1b2c3d4e5f7';
const B_PARTNERS = '65b20e1fa3c4d5e6f7a8b901';
const B_LONG = '65b20e1fa3c4d5e6f7a8b902';
const field = (n: number) => `65a1f1d4e4b0a1b2c3d4e6${n.toString(16).padStart(2, '0')}`;
const group = (n: number) => `65a1f4c0e4b0a1b2c3d4e8${n.toString(16).padStart(2, '0')}`;
const session = (n: number) => `65a1f5d0e4b0a1b2c3d4e9${n.toString(16).padStart(2, '0')}`;
const AURORA = '65a1f2a0e4b0a1b2c3d4e601';
const SOL = '65a1f2a0e4b0a1b2c3d4e609';
const DISSOCIATED = '65a1f3b0e4b0a1b2c3d4e701';
const TIRED = '65a1f3b0e4b0a1b2c3d4e702';
const UID = 'Xq3vT9pLm2WcR8sYk4HdN7bJf6A1';
const LEGACY_FIELD = (n: number) => `q4Wm8Zr2Tx6Vb0Nc3Hj5Lp${n}`;

const member = (id: string) => ({ collection: 'members', id });
const front = (id: string) => ({ collection: 'frontStatuses', id });

function parse(doc: unknown): ParsedBundle {
  return parseSimplyPlural(doc);
}

/** A copy of a sample with `edit` applied. */
function edited(base: Json, edit: (doc: Json) => void): Json {
  const doc = structuredClone(base);
  edit(doc);
  return doc;
}

function messages(bundle: ParsedBundle, collection: string, sourceId?: string | null): string[] {
  return bundle.warnings
    .filter((w) => w.collection === collection && (sourceId === undefined || w.sourceId === sourceId))
    .map((w) => w.message);
}

function byId<T extends { ref: { id: string } }>(list: T[], id: string): T {
  const found = list.find((x) => x.ref.id === id);
  if (!found) throw new Error(`${id} not in the bundle`);
  return found;
}

function deepFreeze(value: unknown): void {
  if (value === null || typeof value !== 'object') return;
  Object.freeze(value);
  for (const child of Object.values(value)) deepFreeze(child);
}

describe('a bucket-era export', () => {
  const bundle = parse(BUCKET_ERA);

  it('tallies every top-level key of the file, read or not', () => {
    expect(bundle.source).toBe('simply_plural');
    expect(Object.keys(bundle.tally)).toEqual(Object.keys(BUCKET_ERA));
    expect(bundle.tally).toEqual({
      avatarExports: { skipped: 1, failed: 0 },
      users: { skipped: 0, failed: 0 },
      private: { skipped: 0, failed: 0 },
      privacyBuckets: { skipped: 0, failed: 0 },
      customFields: { skipped: 0, failed: 0 },
      members: { skipped: 0, failed: 4 },
      frontStatuses: { skipped: 0, failed: 0 },
      groups: { skipped: 0, failed: 0 },
      frontHistory: { skipped: 0, failed: 6 },
      comments: { skipped: 2, failed: 1 },
      notes: { skipped: 0, failed: 1 },
      polls: { skipped: 2, failed: 0 },
      boardMessages: { skipped: 1, failed: 0 },
      automatedReminders: { skipped: 1, failed: 0 },
      repeatedReminders: { skipped: 1, failed: 0 },
      channelCategories: { skipped: 0, failed: 0 },
      channels: { skipped: 0, failed: 0 },
      // Three still encrypted; a deleted channel, a deleted writer, no text.
      chatMessages: { skipped: 3, failed: 3 },
      tokens: { skipped: 1, failed: 0 },
      securityLogs: { skipped: 1, failed: 0 },
      audit: { skipped: 1, failed: 0 },
      notifications: { skipped: 1, failed: 0 },
      reports: { skipped: 0, failed: 0 },
      queuedEvents: { skipped: 0, failed: 0 },
      undeliveredMessages: { skipped: 0, failed: 0 },
      usage: { skipped: 1, failed: 0 },
      sharedFront: { skipped: 1, failed: 0 },
      privateFront: { skipped: 1, failed: 0 },
      friends: { skipped: 2, failed: 0 },
      pendingFriendRequests: { skipped: 0, failed: 0 },
      events: { skipped: 0, failed: 0 },
      serverData: { skipped: 0, failed: 0 },
      webhooks: { skipped: 1, failed: 0 },
    });
  });

  it('reads the system from users[0], the avatar by the CDN rule', () => {
    expect(bundle.system).toEqual({
      name: 'aurora-collective',
      description: 'We are the Aurora Collective 🌌\nPlease ask before pinging a specific member.',
      tag: null,
      avatarUrl: `https://spaces.apparyllis.com/avatars/${UID}/3f0c1b2a-5d6e-4f70-8a9b-0c1d2e3f4a5b`,
      color: '#7e57c2',
    });
  });

  it('maps privacyBuckets to buckets in rank order, names cut to 80', () => {
    expect(bundle.buckets).toEqual([
      {
        ref: { collection: 'privacyBuckets', id: B_FRIENDS },
        name: 'Friends',
        description: 'A bucket for all your friends',
        icon: '🔓',
      },
      { ref: { collection: 'privacyBuckets', id: B_PARTNERS }, name: 'Partners', description: '', icon: '💞' },
      {
        ref: { collection: 'privacyBuckets', id: B_LONG },
        name: 'Close friends from the Tuesday support circle and the old art-school group chat',
        description: 'Tuesdays 🎨',
        icon: null,
      },
      {
        ref: { collection: 'privacyBuckets', id: B_TRUSTED },
        name: 'Trusted friends',
        description: 'A bucket for all your trusted friends',
        icon: '🔒',
      },
    ]);
    expect(messages(bundle, 'privacyBuckets', B_LONG)).toEqual(['name cut to 80 characters']);
  });

  it('maps customFields: types, order (numbers, then LexoRank strings, then _id), buckets filtered', () => {
    expect(bundle.fields).toEqual([
      { ref: { collection: 'customFields', id: field(7) }, name: 'Age', type: 'text', order: 0, buckets: [B_FRIENDS] },
      {
        ref: { collection: 'customFields', id: field(1) },
        name: 'Role',
        type: 'text',
        order: 1,
        buckets: [B_FRIENDS, B_TRUSTED],
      },
      {
        ref: { collection: 'customFields', id: field(5) },
        name: 'First noticed',
        type: 'date',
        order: 2,
        buckets: [B_FRIENDS],
      },
      { ref: { collection: 'customFields', id: field(6) }, name: 'Split', type: 'text', order: 3, buckets: [] },
      {
        ref: { collection: 'customFields', id: field(2) },
        name: 'Birthday',
        type: 'date',
        order: 4,
        buckets: [B_TRUSTED],
      },
      {
        ref: { collection: 'customFields', id: field(4) },
        name: 'Backstory',
        type: 'markdown',
        order: 5,
        buckets: [B_TRUSTED],
      },
      {
        ref: { collection: 'customFields', id: field(3) },
        name: 'Favourite colour',
        type: 'text',
        order: 6,
        buckets: [],
      },
      {
        ref: { collection: 'customFields', id: field(8) },
        name: 'Mood board',
        type: 'text',
        order: 7,
        buckets: [B_PARTNERS],
      },
    ]);
    expect(messages(bundle, 'customFields', field(4))).toEqual([
      '1 bucket reference dropped: not a bucket in the file',
    ]);
    expect(messages(bundle, 'customFields', field(8))).toEqual(['unknown field type: read as text']);
  });

  it('maps a member with every extra, its buckets and its info values in field order', () => {
    expect(byId(bundle.members, AURORA)).toEqual({
      ref: member(AURORA),
      name: 'Aurora',
      displayName: '',
      pronouns: 'she/her',
      description: 'Host most days. **Likes** tea and long walks.',
      aboutTags: [],
      archived: false,
      extra: {
        color: '#ff8a65',
        avatarUrl: `https://spaces.apparyllis.com/avatars/${UID}/9d8c7b6a-5f4e-4d3c-2b1a-0f9e8d7c6b5a`,
        pkId: 'abcde',
        frame: { bgShape: 'circle', bgClip: 'inner', bgStartColor: '#FF8A65', bgEndColor: '#7E57C2' },
        supportDescMarkdown: true,
      },
      buckets: [B_FRIENDS, B_TRUSTED],
      fields: [
        { field: field(7), value: '27' },
        { field: field(1), value: 'Host' },
        { field: field(5), value: '2023-11-14' },
        { field: field(2), value: '1998-04-12' },
        { field: field(4), value: 'Arrived in **2015**.' },
        { field: field(3), value: '#00ff00' },
      ],
    });
    // The duplicate with Aurora's _id comes later in the file and is not read. Warnings come in
    // file order: the documents are read one at a time.
    expect(messages(bundle, 'members', AURORA)).toEqual([
      '1 field value dropped: the field is not in the file or was not imported',
      'duplicate _id: only the first document with it is read',
    ]);
  });

  it('keeps PK-hid and plain-string ids, drops unusable info values, keeps a non-date as text', () => {
    expect(byId(bundle.members, 'qt7Rk')).toEqual({
      ref: member('qt7Rk'),
      name: 'Kit',
      displayName: '',
      pronouns: 'they/them',
      description: '',
      aboutTags: [],
      archived: false,
      extra: { color: '#c0ffee', avatarUrl: 'https://cdn.example.org/avatars/kit.png', pkId: 'qt7Rk' },
      buckets: [],
      fields: [
        { field: field(2), value: 'sometime in spring' },
        { field: field(8), value: 'true' },
      ],
    });
    expect(messages(bundle, 'members', 'qt7Rk')).toEqual([
      '2 field values dropped: not text, a number or a boolean',
      '1 date field value kept as text: not a date',
    ]);
    expect(byId(bundle.members, 'legacy-member-ember')).toMatchObject({
      archived: true,
      extra: { color: '#ff572280', archivedReason: 'Went dormant' },
      buckets: [B_PARTNERS],
      fields: [],
    });
    expect(messages(bundle, 'members', 'legacy-member-ember')).toEqual([
      '1 bucket reference dropped: not a bucket in the file',
    ]);
  });

  it('cuts long names, drops bad colors, and fails members without a name or usable id', () => {
    const long = byId(bundle.members, '65a1f2a0e4b0a1b2c3d4e604');
    expect(long.name).toBe('Aster of the Long Evening Light, Keeper of Lanterns, Who Waits by the Northern W');
    expect(long.extra).toEqual({});
    expect(messages(bundle, 'members', '65a1f2a0e4b0a1b2c3d4e604')).toEqual(['name cut to 80 characters']);
    expect(byId(bundle.members, SOL).extra).toEqual({ supportDescMarkdown: false });
    expect(messages(bundle, 'members', SOL)).toEqual(['color dropped: not a hex color']);
    expect(messages(bundle, 'members', '65a1f2a0e4b0a1b2c3d4e606')).toEqual(['no name']);
    expect(messages(bundle, 'members', null)).toEqual([
      'the document at position 6 is not an object',
      'the document at position 7 has no usable _id (a string of 1 to 100 characters)',
    ]);
    expect(bundle.members.map((m) => m.ref)).toEqual([
      member(AURORA),
      member('qt7Rk'),
      member('legacy-member-ember'),
      member('65a1f2a0e4b0a1b2c3d4e604'),
      member(SOL),
      front(DISSOCIATED),
      front(TIRED),
      front('blurry'),
    ]);
  });

  it('maps custom fronts as members tagged custom front', () => {
    expect(byId(bundle.members, DISSOCIATED)).toEqual({
      ref: front(DISSOCIATED),
      name: 'Dissociated',
      displayName: '',
      pronouns: '',
      description: 'Blurry, far away',
      aboutTags: ['custom front'],
      archived: false,
      extra: {
        color: '#9e9e9e',
        avatarUrl: `https://spaces.apparyllis.com/avatars/${UID}/0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d`,
        supportDescMarkdown: false,
      },
      buckets: [B_TRUSTED],
      fields: [],
    });
    expect(byId(bundle.members, TIRED)).toMatchObject({ name: 'Tired 😴', extra: {}, buckets: [] });
    // Legacy flags on a bucket-era document are stale: no buckets means no friend sees it.
    expect(byId(bundle.members, 'blurry')).toMatchObject({ extra: { color: '#abcdef12' }, buckets: [] });
  });

  it('maps groups parents first, breaking the cycle where it closes and dropping what does not resolve', () => {
    expect(bundle.groups.map((g) => [g.ref.id, g.name, g.parent])).toEqual([
      [group(1), 'Protectors', null],
      [group(2), 'Littles', group(1)],
      [group(8), 'Tiny ones', group(2)],
      [group(5), 'Loop C', null],
      [group(4), 'Loop B', group(5)],
      [group(3), 'Loop A', group(4)],
      [group(6), 'Orphaned', null],
      [group(7), 'Night shift', null],
      [group(9), 'Mirror', null],
    ]);
    expect(byId(bundle.groups, group(1))).toEqual({
      ref: { collection: 'groups', id: group(1) },
      name: 'Protectors',
      description: 'Keep us safe',
      color: '#4caf50',
      parent: null,
      members: [member(AURORA), member('qt7Rk'), front(DISSOCIATED)],
      buckets: [B_FRIENDS],
    });
    expect(messages(bundle, 'groups', group(1))).toEqual(['1 member reference dropped: not a member in the file']);
    expect(byId(bundle.groups, group(2)).color).toBe('#4caf50');
    expect(messages(bundle, 'groups', group(2))).toEqual(['color alpha dropped: groups take #rrggbb']);
    expect(byId(bundle.groups, group(6)).members).toEqual([front('blurry')]);
    expect(messages(bundle, 'groups', group(6))).toEqual([
      '1 member reference dropped: not a member in the file',
      'parent dropped: not a group in the file; the group is read as top level',
    ]);
    const loop = 'parent dropped: it closes a loop of groups; the group is read as top level';
    expect(messages(bundle, 'groups', group(5))).toEqual([loop]);
    expect(messages(bundle, 'groups', group(9))).toEqual([loop]);
    expect(messages(bundle, 'groups', group(3))).toEqual([]);
  });

  it('reads every time form, resolves members against members and custom fronts whatever `custom` says', () => {
    expect(bundle.sessions.map((s) => [s.ref.id, s.member, s.startedAt, s.endedAt])).toEqual([
      [session(1), member(AURORA), 1704067200000, 1704070800000],
      // custom: false on a custom front; numeric string start, ISO end with a zone.
      [session(2), front(DISSOCIATED), 1704074400000, Date.UTC(2024, 0, 1, 3, 30)],
      // custom: true on a member; zone-less ISO strings are UTC.
      [session(3), member('qt7Rk'), Date.UTC(2024, 0, 2, 8), Date.UTC(2024, 0, 2, 9, 15, 30, 250)],
      // Live: open whether endTime is absent or null.
      [session(4), member(AURORA), 1717000000000, null],
      [session(5), front(TIRED), 1717000500000, null],
      // Firestore {_seconds,_nanoseconds}.
      [session(10), member('legacy-member-ember'), 1704153600500, 1704157200000],
      [session(12), front(DISSOCIATED), 1704300000000, 1704303600000],
      [session(13), member(AURORA), 1704400000000, 1704400000000],
    ]);
  });

  it('fails sessions it cannot place in time or on a member', () => {
    expect(messages(bundle, 'frontHistory')).toEqual([
      'member is not a member or custom front in the file (deleted?)',
      'not live and has no endTime',
      'endTime is before startTime',
      'startTime is missing or not a time',
      'not live and has no endTime',
      'note (customStatus and comments) cut to 500 characters',
      'duplicate _id: only the first document with it is read',
    ]);
    expect(bundle.warnings.filter((w) => w.collection === 'frontHistory').map((w) => w.sourceId)).toEqual([
      session(6),
      session(7),
      session(8),
      session(9),
      session(11),
      session(12),
      session(1),
    ]);
  });

  it('writes customStatus and the comments sorted by time into the note, cut to 500', () => {
    expect(byId(bundle.sessions, session(1)).note).toBe(
      'Work meeting\n' +
        '2024-01-01T00:13:20.000Z: Started late because of the train\n' +
        '2024-01-01T00:30:00.000Z: Went well in the end',
    );
    expect(byId(bundle.sessions, session(2)).note).toBeNull();
    const long = byId(bundle.sessions, session(12)).note as string;
    expect(long).toHaveLength(500);
    expect(long.startsWith('Long day at the clinic\n2024-01-03T16:56:40.000Z: Waiting room was loud. ')).toBe(true);
    expect(messages(bundle, 'comments')).toEqual([
      'comment has no readable time',
      '2 comments not imported: the front history entry is not in the file or was not imported',
    ]);
  });

  it('maps notes, keeping those whose member is gone and dating undated ones by lastOperationTime', () => {
    expect(bundle.notes).toEqual([
      {
        ref: { collection: 'notes', id: '65a1f8a0e4b0a1b2c3d4ec01' },
        title: 'Therapy notes',
        content: 'Talked about grounding.\n- 5 things you can see',
        member: member(AURORA),
        createdAt: 1704100000000,
      },
      {
        ref: { collection: 'notes', id: '65a1f8a0e4b0a1b2c3d4ec02' },
        title: 'For Rowan',
        content: 'Rowan left in 2023.',
        member: null,
        createdAt: Date.UTC(2024, 1, 10, 12),
      },
      {
        ref: { collection: 'notes', id: '65a1f8a0e4b0a1b2c3d4ec03' },
        title: null,
        content: 'Undated scribble',
        member: member(SOL),
        createdAt: 1705000000000,
      },
      {
        ref: { collection: 'notes', id: '65a1f8a0e4b0a1b2c3d4ec05' },
        title: `Long title ${'x'.repeat(189)}`,
        content: '',
        member: member('qt7Rk'),
        createdAt: 1706000000000,
      },
    ]);
    expect(bundle.warnings.filter((w) => w.collection === 'notes')).toEqual([
      {
        collection: 'notes',
        sourceId: '65a1f8a0e4b0a1b2c3d4ec02',
        message: 'member dropped: not a member in the file (deleted?)',
      },
      {
        collection: 'notes',
        sourceId: '65a1f8a0e4b0a1b2c3d4ec04',
        message: 'neither date nor lastOperationTime is a time',
      },
      { collection: 'notes', sourceId: '65a1f8a0e4b0a1b2c3d4ec05', message: 'title cut to 200 characters' },
    ]);
  });

  it('takes the defaults from defaultPrivacySettings over defaultPrivacy, filtered to known buckets', () => {
    expect(bundle.defaults).toEqual({ members: [B_FRIENDS, B_TRUSTED], groups: [B_TRUSTED], fields: [B_TRUSTED] });
    expect(messages(bundle, 'private', UID)).toEqual(['1 default bucket reference dropped: not a bucket in the file']);
    const older = parse(
      edited(BUCKET_ERA, (doc) => {
        delete (doc.private as Docs)[0]!.defaultPrivacySettings;
      }),
    );
    expect(older.defaults).toEqual({ members: [B_PARTNERS], groups: [], fields: [] });
  });

  it('skips the collections it does not import with one warning each, counting ciphertext chat', () => {
    const skipped = bundle.warnings.filter(
      (w) => w.sourceId === null && !['members', 'comments'].includes(w.collection),
    );
    expect(skipped).toEqual([
      {
        collection: 'avatarExports',
        sourceId: null,
        message: '1 document not imported: this collection is never imported',
      },
      {
        collection: 'polls',
        sourceId: null,
        message: '2 documents not imported yet: this collection is not imported in this version',
      },
      {
        collection: 'boardMessages',
        sourceId: null,
        message: '1 document not imported yet: this collection is not imported in this version',
      },
      {
        collection: 'automatedReminders',
        sourceId: null,
        message: '1 document not imported yet: this collection is not imported in this version',
      },
      {
        collection: 'repeatedReminders',
        sourceId: null,
        message: '1 document not imported yet: this collection is not imported in this version',
      },
      { collection: 'tokens', sourceId: null, message: '1 document not imported: this collection is never imported' },
      {
        collection: 'securityLogs',
        sourceId: null,
        message: '1 document not imported: this collection is never imported',
      },
      { collection: 'audit', sourceId: null, message: '1 document not imported: this collection is never imported' },
      {
        collection: 'notifications',
        sourceId: null,
        message: '1 document not imported: this collection is never imported',
      },
      { collection: 'usage', sourceId: null, message: '1 document not imported: this collection is never imported' },
      {
        collection: 'sharedFront',
        sourceId: null,
        message: '1 document not imported: this collection is never imported',
      },
      {
        collection: 'privateFront',
        sourceId: null,
        message: '1 document not imported: this collection is never imported',
      },
      {
        collection: 'friends',
        sourceId: null,
        message: "friendships are not imported: the other account's consent does not travel",
      },
      {
        collection: 'webhooks',
        sourceId: null,
        message: '1 document not imported: not a Simply Plural collection this importer knows',
      },
      // Three AES-CTR bodies; the plaintext ones (one beside a stale iv, one that is itself base64 of text) are read.
      {
        collection: 'chatMessages',
        sourceId: null,
        message:
          '3 messages still encrypted (the export was made before Simply Plural decrypted chat in exports): not imported',
      },
    ]);
  });

  it('maps chat: categories in the account’s order, channels by category, messages with their writers, times, mentions and replies', () => {
    const id = (tail: string) => `65a1f${tail}`;
    expect(bundle.chat.categories).toEqual([
      { ref: { collection: 'channelCategories', id: id('6e0e4b0a1b2c3d4ea02') }, name: 'Outer world', order: 0 },
      { ref: { collection: 'channelCategories', id: id('6e0e4b0a1b2c3d4ea01') }, name: 'Inner world', order: 1 },
    ]);
    // "work" names its category itself (parentCategory); the others are listed in theirs.
    expect(bundle.chat.channels.map((c) => [c.ref.id, c.name, c.topic, c.category, c.order])).toEqual([
      [id('ce0e4b0a1b2c3d4f003'), 'work', null, id('6e0e4b0a1b2c3d4ea02'), 0],
      [id('ce0e4b0a1b2c3d4f001'), 'general', 'Anything goes', id('6e0e4b0a1b2c3d4ea01'), 1],
      [id('ce0e4b0a1b2c3d4f002'), 'planning', null, id('6e0e4b0a1b2c3d4ea01'), 2],
    ]);
    const aurora = { collection: 'members', id: id('2a0e4b0a1b2c3d4e601') };
    const sol = { collection: 'members', id: id('2a0e4b0a1b2c3d4e609') };
    expect(bundle.chat.messages).toEqual([
      {
        ref: { collection: 'chatMessages', id: id('df0e4b0a1b2c3d4f104') },
        channel: id('ce0e4b0a1b2c3d4f002'),
        author: aurora,
        content: 'Morning everyone!',
        mentions: [],
        writtenAt: 1717000400000,
        editedAt: null,
        replyTo: null,
      },
      {
        ref: { collection: 'chatMessages', id: id('df0e4b0a1b2c3d4f105') },
        channel: id('ce0e4b0a1b2c3d4f001'),
        author: sol,
        content: 'Lunch is ready 🍝',
        mentions: [],
        writtenAt: 1717000500000,
        editedAt: 1717000600000,
        replyTo: null,
      },
      {
        ref: { collection: 'chatMessages', id: id('df0e4b0a1b2c3d4f106') },
        channel: id('ce0e4b0a1b2c3d4f001'),
        author: aurora,
        content: 'b2s=',
        mentions: [],
        writtenAt: 1717000700000,
        editedAt: null,
        replyTo: null,
      },
      {
        ref: { collection: 'chatMessages', id: id('df0e4b0a1b2c3d4f107') },
        channel: id('ce0e4b0a1b2c3d4f002'),
        author: aurora,
        // The mention of a member not in the file stays as text.
        content: '<###@65a1f2a0e4b0a1b2c3d4e609###> can you check the planner? <###@goneMember###>',
        mentions: [sol],
        writtenAt: Date.parse('2024-05-29T17:00:00.000Z'),
        editedAt: null,
        replyTo: id('df0e4b0a1b2c3d4f104'),
      },
    ]);
    expect(messages(bundle, 'chatMessages', id('df0e4b0a1b2c3d4f108'))).toEqual([
      'channel is not a channel in the file (deleted?)',
    ]);
    expect(messages(bundle, 'chatMessages', id('df0e4b0a1b2c3d4f109'))).toEqual([
      'writer is not a member in the file (deleted?)',
    ]);
    expect(messages(bundle, 'chatMessages', id('df0e4b0a1b2c3d4f110'))).toEqual(['no text']);
    expect(messages(bundle, 'channelCategories', id('6e0e4b0a1b2c3d4ea01'))).toEqual([
      '1 channel reference dropped: not a channel in the file',
    ]);
  });

  it('never puts document content into a warning', () => {
    for (const w of bundle.warnings) {
      expect(typeof w.collection).toBe('string');
      expect(w.sourceId === null || typeof w.sourceId === 'string').toBe(true);
      expect(typeof w.message).toBe('string');
    }
    const text = JSON.stringify(bundle.warnings);
    for (const secret of [
      'SPTOKEN',
      '203.0.113.7',
      'whsec',
      '4c1e0f6a9b7d',
      'Talked about',
      'Rowan',
      'Waiting room',
      'oat milk',
      'Pizza',
      'sometime in spring',
      'rebeccapurple',
      'Pq8rS2tU4vW6xY8zA0bC2dE4fG6h',
      'qJaQPOlCmtGASJ3XTlQInsnoFC9',
      'Morning everyone',
    ])
      expect(text).not.toContain(secret);
  });
});

describe('a legacy (pre-300) export', () => {
  const bundle = parse(LEGACY);

  it('tallies every key, users.fields too', () => {
    expect(Object.keys(bundle.tally)).toEqual([...Object.keys(LEGACY), 'users.fields']);
    expect(bundle.tally).toMatchObject({
      members: { skipped: 0, failed: 0 },
      customFronts: { skipped: 0, failed: 0 },
      groups: { skipped: 0, failed: 0 },
      frontHistory: { skipped: 0, failed: 1 },
      comments: { skipped: 0, failed: 0 },
      notes: { skipped: 0, failed: 0 },
      fronters: { skipped: 1, failed: 0 },
      privacyBuckets: { skipped: 0, failed: 0 },
      customFields: { skipped: 0, failed: 0 },
      repeatedReminders: { skipped: 1, failed: 0 },
      tokens: { skipped: 1, failed: 0 },
      friends: { skipped: 1, failed: 0 },
      'users.fields': { skipped: 0, failed: 1 },
    });
    expect(messages(bundle, 'fronters')).toEqual(['1 document not imported: this collection is never imported']);
    expect(messages(bundle, 'friends')).toEqual([
      "friendships are not imported: the other account's consent does not travel",
    ]);
  });

  it('creates the two synthetic buckets and no defaults', () => {
    expect(bundle.buckets).toEqual([
      { ref: { collection: 'synthetic', id: 'friends' }, name: 'Friends', description: '', icon: '🔓' },
      { ref: { collection: 'synthetic', id: 'trusted' }, name: 'Trusted friends', description: '', icon: '🔒' },
    ]);
    expect(bundle.defaults).toEqual({ members: [], groups: [], fields: [] });
  });

  it("maps each flag combination by update300's mapping (a missing flag counts as true)", () => {
    const buckets = Object.fromEntries(bundle.members.map((m) => [m.name.split(' ')[0], m.buckets]));
    expect(buckets).toEqual({
      Juniper: ['friends', 'trusted'], // private false, preventTrusted false
      Moss: ['friends', 'trusted'], // private false, preventTrusted true
      Mira: ['trusted'], // private true, preventTrusted false
      Wren: [], // private true, preventTrusted true
      Quill: [], // no flags (its stale `buckets` is ignored)
      Sage: [], // private true, preventTrusted missing
      Rue: ['trusted'], // private missing, preventTrusted false
      'Bartholomew-Evander-Constantine-Mallory-Fitzgerald-Ignatius-Percival': ['friends', 'trusted'],
      Zoned: ['friends', 'trusted'],
      Sleepy: ['trusted'],
    });
    expect(bundle.groups.map((g) => g.buckets)).toEqual([['friends', 'trusted'], []]);
  });

  it('reads the field definitions from users[0].fields', () => {
    expect(bundle.fields).toEqual([
      {
        ref: { collection: 'users.fields', id: LEGACY_FIELD(11) },
        name: 'Likes',
        type: 'markdown',
        order: 0,
        buckets: ['trusted'],
      },
      {
        ref: { collection: 'users.fields', id: LEGACY_FIELD(10) },
        name: 'Age',
        type: 'text',
        order: 1,
        buckets: ['friends', 'trusted'],
      },
      {
        ref: { collection: 'users.fields', id: LEGACY_FIELD(12) },
        name: 'Birthday',
        type: 'date',
        order: 2,
        buckets: [],
      },
      { ref: { collection: 'users.fields', id: LEGACY_FIELD(13) }, name: 'Notes', type: 'text', order: 3, buckets: [] },
    ]);
    expect(messages(bundle, 'users.fields', LEGACY_FIELD(14))).toEqual(['field has no name']);
  });

  it('reads info values by legacy key, dates from ms, and drops values of missing fields', () => {
    expect(byId(bundle.members, 'hxqzv')).toEqual({
      ref: member('hxqzv'),
      name: 'Juniper',
      displayName: '',
      pronouns: 'she/her',
      description: 'Loves frogs.',
      aboutTags: [],
      archived: false,
      extra: {
        color: '#ff8800',
        avatarUrl:
          'https://spaces.apparyllis.com/avatars/Lg5aC7eE9gI1kM3oQ5sU7wY9/5e6f7a8b-9c0d-4e1f-a2b3-c4d5e6f7a8b9',
        pkId: 'hxqzv',
      },
      buckets: ['friends', 'trusted'],
      fields: [
        { field: LEGACY_FIELD(11), value: 'Frogs, *rain*' },
        { field: LEGACY_FIELD(10), value: '16' },
        { field: LEGACY_FIELD(12), value: '2008-03-02' },
      ],
    });
    expect(messages(bundle, 'members', 'hxqzv')).toEqual([
      '2 field values dropped: the field is not in the file or was not imported',
    ]);
    expect(byId(bundle.members, 'Rk9Qa')).toMatchObject({
      extra: { color: '#cc3366ff' },
      fields: [{ field: LEGACY_FIELD(10), value: '34' }],
    });
    expect(byId(bundle.members, 'mira-2019').fields).toEqual([{ field: LEGACY_FIELD(12), value: '2008-01-01' }]);
    expect(byId(bundle.members, '-MgX3k9LpQr7sT2uV4w').fields).toEqual([]);
    expect(messages(bundle, 'members', '-MgX3k9LpQr7sT2uV4w')).toEqual([
      '1 field value dropped: not text, a number or a boolean',
    ]);
    expect(byId(bundle.members, '5f2b8c9d0e1f2a3b4c5d6e04').name).toBe(
      'Bartholomew-Evander-Constantine-Mallory-Fitzgerald-Ignatius-Percival the Third,',
    );
  });

  it('reads `customFronts` as custom fronts, reported under that key', () => {
    expect(bundle.members.filter((m) => m.aboutTags.includes('custom front')).map((m) => m.ref)).toEqual([
      front('5f2b8c9d0e1f2a3b4c5d6f01'),
      front('5f2b8c9d0e1f2a3b4c5d6f02'),
    ]);
    expect(bundle.groups[1]!.members).toEqual([member('mira-2019'), front('5f2b8c9d0e1f2a3b4c5d6f01')]);
  });

  it('reads Firestore times and merges embedded and collection comments by time', () => {
    expect(bundle.sessions.map((s) => [s.ref.id, s.member, s.startedAt, s.endedAt, s.note])).toEqual([
      [
        '5f2b8c9d0e1f2a3b4c5d8001',
        member('hxqzv'),
        1577880000000,
        1577890000000,
        '2020-01-01T12:16:40.000Z: Legacy ms comment\n2020-01-01T13:23:20.000Z: Legacy comment one',
      ],
      ['5f2b8c9d0e1f2a3b4c5d8002', front('5f2b8c9d0e1f2a3b4c5d6f01'), 1577900000123, 1577903600000, null],
      ['5f2b8c9d0e1f2a3b4c5d8003', member('Rk9Qa'), 1609459200000, null, null],
      [
        '5f2b8c9d0e1f2a3b4c5d8004',
        member('mira-2019'),
        Date.UTC(2020, 5, 1, 10),
        Date.UTC(2020, 5, 1, 12),
        'Grocery run\n2020-06-01T10:00:00.000Z: Parking was full\n2020-06-01T11:00:00.000Z: Forgot the list',
      ],
    ]);
    expect(messages(bundle, 'frontHistory')).toEqual([
      '1 embedded comment dropped: no readable time or text',
      'member is not a member or custom front in the file (deleted?)',
    ]);
  });

  it('reads notes given as a map keyed by id, the key standing in for a missing _id', () => {
    expect(bundle.notes).toEqual([
      {
        ref: { collection: 'notes', id: 'note-001' },
        title: 'Frog facts',
        content: 'Frogs absorb water through their skin.',
        member: member('hxqzv'),
        createdAt: 1580000000000,
      },
      {
        ref: { collection: 'notes', id: '5f2b8c9d0e1f2a3b4c5da002' },
        title: "Moss's list",
        content: '1. Water the ferns',
        member: member('Rk9Qa'),
        createdAt: 1590000000000,
      },
    ]);
  });

  it('reads the system without avatarUuid from avatarUrl', () => {
    expect(bundle.system).toEqual({
      name: 'willow_grove',
      description: 'The Willow Grove system.',
      tag: null,
      avatarUrl: 'https://i.imgur.com/8bQf3kD.png',
      color: '#ffb74d',
    });
  });

  it('ignores privacyBuckets and customFields of an account that was never migrated', () => {
    const stray = parse(
      edited(LEGACY, (doc) => {
        doc.privacyBuckets = [{ _id: B_FRIENDS, name: 'Friends' }];
        doc.customFields = [{ _id: field(1), name: 'Role', type: 0 }];
      }),
    );
    expect(stray.buckets.map((b) => b.ref.id)).toEqual(['friends', 'trusted']);
    expect(stray.tally.privacyBuckets).toEqual({ skipped: 1, failed: 0 });
    expect(stray.tally.customFields).toEqual({ skipped: 1, failed: 0 });
    expect(messages(stray, 'privacyBuckets')).toEqual([
      '1 bucket not read: the account uses legacy privacy (latestVersion below 300)',
    ]);
    expect(messages(stray, 'customFields')).toEqual([
      "1 field not read: a legacy account's fields are in users.fields",
    ]);
    expect(stray.fields.map((f) => f.ref.collection)).toEqual(Array(4).fill('users.fields'));
  });
});

describe('edge cases on edited samples', () => {
  it('reads an account without `private` as legacy', () => {
    const bundle = parse(
      edited(BUCKET_ERA, (doc) => {
        delete doc.private;
      }),
    );
    expect(bundle.buckets.map((b) => b.ref)).toEqual([
      { collection: 'synthetic', id: 'friends' },
      { collection: 'synthetic', id: 'trusted' },
    ]);
    // Aurora: private true, preventTrusted false; the bucket-era `buckets` are not read.
    expect(byId(bundle.members, AURORA).buckets).toEqual(['trusted']);
    expect(bundle.tally.privacyBuckets).toEqual({ skipped: 4, failed: 0 });
    expect(bundle.fields).toEqual([
      {
        ref: { collection: 'users.fields', id: 'x7Kp2Qm9Rt4Vw6Yz8Ab1Cd0' },
        name: 'Role',
        type: 'text',
        order: 0,
        buckets: ['friends', 'trusted'],
      },
    ]);
  });

  it('resolves info keys that still name a migrated field by its legacy key', () => {
    const bundle = parse(
      edited(BUCKET_ERA, (doc) => {
        (doc.members as Docs)[2]!.info = { x7Kp2Qm9Rt4Vw6Yz8Ab1Cd0: 'Archivist' };
      }),
    );
    expect(byId(bundle.members, 'legacy-member-ember').fields).toEqual([{ field: field(1), value: 'Archivist' }]);
  });

  it('cuts descriptions, pronouns, custom field values and session notes without splitting a character', () => {
    const bundle = parse(
      edited(BUCKET_ERA, (doc) => {
        const sol = (doc.members as Docs)[8]!;
        sol.desc = 'd'.repeat(5001);
        sol.pronouns = `${'p'.repeat(79)}🌿🌿`; // 81 code points: the cut keeps the first leaf whole
        sol.info = { [field(1)]: 'v'.repeat(1001), [field(4)]: 'm'.repeat(20001) };
      }),
    );
    const sol = byId(bundle.members, SOL);
    expect(sol.description).toBe('d'.repeat(5000));
    expect(sol.pronouns).toBe(`${'p'.repeat(79)}🌿`);
    expect(sol.fields).toEqual([
      { field: field(1), value: 'v'.repeat(1000) },
      { field: field(4), value: 'm'.repeat(20000) },
    ]);
    expect(messages(bundle, 'members', SOL)).toEqual([
      'color dropped: not a hex color',
      'pronouns cut to 80 characters',
      'desc cut to 5000 characters',
      `value of field ${field(1)} cut to 1000 characters`,
      `value of field ${field(4)} cut to 20000 characters`,
    ]);
  });

  it('reads a numeric-string latestVersion, offsets without a colon, and fails unreadable ids', () => {
    const bundle = parse(
      edited(BUCKET_ERA, (doc) => {
        (doc.private as Docs)[0]!.latestVersion = '300';
        const history = doc.frontHistory as Docs;
        history[1]!.endTime = '2024-01-01T09:00:00+0530';
        history.push({ _id: 12345, member: AURORA, startTime: 1, endTime: 2 });
      }),
    );
    expect(bundle.buckets).toHaveLength(4);
    expect(byId(bundle.sessions, session(2)).endedAt).toBe(Date.UTC(2024, 0, 1, 3, 30));
    expect(bundle.tally.frontHistory).toEqual({ skipped: 0, failed: 7 });
    expect(messages(bundle, 'frontHistory', null)).toEqual([
      'the document at position 14 has no usable _id (a string of 1 to 100 characters)',
    ]);
  });

  it('reads zone-less times as UTC whatever the local zone', () => {
    const zone = process.env.TZ;
    process.env.TZ = 'America/New_York';
    try {
      expect(byId(parse(BUCKET_ERA).sessions, session(3)).startedAt).toBe(Date.UTC(2024, 0, 2, 8));
    } finally {
      if (zone === undefined) delete process.env.TZ;
      else process.env.TZ = zone;
    }
  });

  it('reads only live: true as open', () => {
    const bundle = parse(
      edited(BUCKET_ERA, (doc) => {
        doc.frontHistory = [
          { _id: 'no-live-flag', member: SOL, startTime: 1000, endTime: 2000 },
          { _id: 'live-as-string', member: SOL, startTime: 1000, live: 'true' },
        ];
      }),
    );
    expect(bundle.sessions.map((s) => [s.ref.id, s.endedAt])).toEqual([['no-live-flag', 2000]]);
    expect(messages(bundle, 'frontHistory', 'live-as-string')).toEqual(['not live and has no endTime']);
  });

  it('reports a collection that holds no documents and reads it as empty', () => {
    const bundle = parse(
      edited(BUCKET_ERA, (doc) => {
        doc.notes = 'corrupted';
      }),
    );
    expect(bundle.notes).toEqual([]);
    expect(bundle.tally.notes).toEqual({ skipped: 0, failed: 0 });
    expect(messages(bundle, 'notes')).toEqual(['not an array or map of documents: nothing read from it']);
  });

  it('reads both custom front keys as one id space', () => {
    const bundle = parse(
      edited(BUCKET_ERA, (doc) => {
        doc.customFronts = [
          { _id: DISSOCIATED, name: 'Again' },
          { _id: 'spaced', name: 'Spaced out' },
        ];
      }),
    );
    expect(bundle.members.filter((m) => m.ref.collection === 'frontStatuses').map((m) => m.name)).toEqual([
      'Dissociated',
      'Tired 😴',
      'Blurry',
      'Spaced out',
    ]);
    expect(bundle.tally.customFronts).toEqual({ skipped: 0, failed: 1 });
  });
});

describe('files that are not Simply Plural exports', () => {
  it.each([
    ['null', null],
    ['an array', [{ members: [] }]],
    ['a string', 'export.json'],
    ['a number', 42],
  ])('rejects %s', (_, doc) => {
    expect(() => parse(doc)).toThrow(ImportFormatError);
    expect(() => parse(doc)).toThrow('not a Simply Plural export: the file is not a JSON object of collections');
  });

  it('rejects an object without any Simply Plural collection', () => {
    for (const doc of [{}, { tokens: [{ _id: 'a' }], friends: [] }, { members: 'nope' }, { name: 'My system' }])
      expect(() => parse(doc)).toThrow(
        'not a Simply Plural export: none of its collections (members, frontHistory, users, private, frontStatuses, customFronts, groups) is in the file',
      );
  });

  it('rejects a PluralKit export', () => {
    const pk = {
      version: 2,
      id: 'exmpl',
      uuid: 'f0e1d2c3-b4a5-4968-8778-695a4b3c2d1e',
      name: 'PK system',
      members: [{ id: 'abcde', uuid: '1a2b3c4d-5e6f-4a7b-8c9d-0e1f2a3b4c5d', name: 'Alex' }],
      groups: [],
      switches: [{ timestamp: '2024-01-01T00:00:00Z', members: ['abcde'] }],
    };
    expect(() => parse(pk)).toThrow(ImportFormatError);
    expect(() => parse(pk)).toThrow('this is a PluralKit export (it has switches), not a Simply Plural export');
  });

  it('rejects a Tupperbox export', () => {
    expect(() => parse({ tuppers: [{ id: 1, name: 'Tup' }], groups: [] })).toThrow(
      'this is a Tupperbox export, not a Simply Plural export',
    );
  });

  it('fails a file with more members, custom fronts, groups or comments than an import takes, before reading them', () => {
    const many = (n: number) => Array.from({ length: n }, (_, i) => ({ _id: `d${i}`, name: `D${i}` }));
    expect(() => parse({ members: many(15_000), frontStatuses: many(5_001) })).toThrow(
      new ImportFormatError(
        'The file is too large to import: it holds 20001 members and custom fronts, more than the 20000 an import takes',
      ),
    );
    expect(() => parse({ members: [], groups: many(20_001) })).toThrow(/holds 20001 groups/);
    expect(() => parse({ members: [], channels: many(1_001) })).toThrow(/holds 1001 chat channels/);
    expect(() => parse({ members: [], comments: many(500_001) })).toThrow(/holds 500001 comments/);
    expect(parse({ members: many(20_000) }).members).toHaveLength(20_000);
  });

  it('reads an export with only empty collections as an empty bundle', () => {
    expect(parse({ members: [], frontHistory: [] })).toEqual({
      source: 'simply_plural',
      system: null,
      buckets: [
        { ref: { collection: 'synthetic', id: 'friends' }, name: 'Friends', description: '', icon: '🔓' },
        { ref: { collection: 'synthetic', id: 'trusted' }, name: 'Trusted friends', description: '', icon: '🔒' },
      ],
      fields: [],
      members: [],
      groups: [],
      sessions: [],
      notes: [],
      chat: { categories: [], channels: [], messages: [] },
      defaults: { members: [], groups: [], fields: [] },
      tally: { members: { skipped: 0, failed: 0 }, frontHistory: { skipped: 0, failed: 0 } },
      warnings: [],
      warningsOmitted: 0,
    });
  });
});

describe('purity', () => {
  it.each([
    ['bucket era', BUCKET_ERA],
    ['legacy', LEGACY],
  ])('gives the same bundle twice and leaves the %s input as it was', (_, sample) => {
    const input = structuredClone(sample);
    deepFreeze(input);
    const first = parse(input);
    const second = parse(input);
    expect(second).toEqual(first);
    expect(JSON.stringify(second)).toBe(JSON.stringify(first));
    expect(input).toEqual(sample);
  });

  it('does not hand out the input’s objects', () => {
    const input = structuredClone(BUCKET_ERA);
    const bundle = parse(input);
    const frame = byId(bundle.members, AURORA).extra.frame;
    expect(frame).toEqual((input.members as Docs)[0]!.frame);
    expect(frame).not.toBe((input.members as Docs)[0]!.frame);
  });
});

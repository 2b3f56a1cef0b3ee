/**
 * POST /api/v1/imports end to end: the file stored, the job run (runDue: test servers do not start
 * the worker), the report, what the account holds afterwards, re-imports, dry runs, bad input and
 * the scope and size rules. The parsers' mapping rules are unit-tested in importPluralKit.test.ts
 * and importSimplyPlural.test.ts.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { gzipSync } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import type { components } from '../client/index.ts';
import { bearer, type TestUser, useServer } from './helpers/server.ts';

type Import = components['schemas']['Import'];

const MAX_BYTES = 1024 * 1024;
const server = useServer({ env: { IMPORT_MAX_BYTES: String(MAX_BYTES) } });

const T = (iso: string) => Date.parse(iso);

/** A small PluralKit v2 file: three members (one private), a group, and four switches (newest first). */
function pluralKitFile(overrides: { robinName?: string } = {}) {
  return {
    version: 2,
    id: 'exmpl',
    uuid: '0d6d1c8e-8d0f-4a36-9b8e-2f4f6d8c1a01',
    name: 'Aurora',
    description: 'We are many.',
    tag: '| Aurora',
    avatar_url: null,
    color: 'ff8800',
    created: '2023-01-05T10:00:00.123456Z',
    webhook_url: null,
    privacy: {},
    config: { timezone: 'Europe/Berlin' },
    accounts: [],
    members: [
      {
        id: 'abcde',
        uuid: '11111111-1111-4111-8111-111111111111',
        name: overrides.robinName ?? 'Robin',
        display_name: 'Robin 🌿',
        color: '00aa88',
        birthday: '0004-03-14',
        pronouns: 'she/they',
        avatar_url: 'https://cdn.example/robin.png',
        banner: null,
        description: 'Gatekeeper.',
        created: '2023-01-05T10:00:00Z',
        proxy_tags: [{ prefix: 'r:', suffix: null }],
        keep_proxy: false,
        privacy: { visibility: 'public' },
      },
      {
        id: 'fghij',
        uuid: '22222222-2222-4222-8222-222222222222',
        name: 'Sage',
        display_name: null,
        color: null,
        birthday: null,
        pronouns: null,
        avatar_url: null,
        banner: null,
        description: null,
        created: '2023-01-05T10:00:00Z',
        proxy_tags: [],
        privacy: { visibility: 'private' },
      },
      {
        id: 'klmnop',
        uuid: '33333333-3333-4333-8333-333333333333',
        name: 'Wren',
        created: '2023-01-05T10:00:00Z',
        proxy_tags: [],
        privacy: { visibility: null },
      },
    ],
    groups: [
      {
        id: 'grpaa',
        uuid: '44444444-4444-4444-8444-444444444444',
        name: 'Protectors',
        display_name: null,
        description: 'They keep watch.',
        icon: null,
        banner: null,
        color: '3355ff',
        created: '2023-01-05T10:00:00Z',
        members: ['ABCDE', 'fgh-ij'],
        privacy: { visibility: 'public' },
      },
    ],
    switches: [
      { timestamp: '2024-05-01T12:00:00Z', members: ['abcde', 'klmnop'] },
      { timestamp: '2024-05-01T08:00:00.500Z', members: [] },
      { timestamp: '2024-04-30T20:00:00Z', members: ['abcde', 'fghij'] },
      { timestamp: '2024-04-30T18:00:00Z', members: ['abcde'] },
    ],
  };
}

async function postImport(
  user: TestUser,
  file: unknown,
  query: string,
  headers: Record<string, string> = {},
): Promise<Response> {
  return server.fetch(`/api/v1/imports?${query}`, {
    method: 'POST',
    headers: { ...bearer(user.apiKey), 'Content-Type': 'application/json', ...headers },
    body: typeof file === 'string' ? file : JSON.stringify(file),
  });
}

/** Sends the file, runs the queue, and returns the finished import. */
async function importFile(user: TestUser, file: unknown, query: string): Promise<Import> {
  const res = await postImport(user, file, query);
  expect(res.status).toBe(202);
  const accepted = (await res.json()) as { id: string; status: string };
  expect(accepted.status).toBe('queued');
  expect(res.headers.get('location')).toBe(`/api/v1/imports/${accepted.id}`);
  await server.runtime.jobs.runDue();
  const { data } = await user.api.GET('/api/v1/imports/{importId}', { params: { path: { importId: accepted.id } } });
  expect(data?.status === 'succeeded' || data?.status === 'failed').toBe(true);
  return data!;
}

async function membersOf(user: TestUser) {
  const { data } = await user.api.GET('/api/v1/members/page', { params: { query: { limit: 200 } } });
  return data!.items;
}

const zero = { created: 0, updated: 0, unchanged: 0, skipped: 0, failed: 0 };

describe('PluralKit import', () => {
  it('creates members, the group, the Public bucket and front history, and says what it did', async () => {
    const user = await server.user();
    const result = await importFile(user, pluralKitFile(), 'source=pluralkit');
    expect(result.status).toBe('succeeded');
    expect(result.error).toBeNull();
    expect(result.source).toBe('pluralkit');
    expect(result.dryRun).toBe(false);
    expect(result.report.members).toEqual({ ...zero, created: 3 });
    expect(result.report.groups).toEqual({ ...zero, created: 1 });
    expect(result.progress.done).toBe(result.progress.total);
    expect(result.startedAt).not.toBeNull();
    expect(result.finishedAt).not.toBeNull();

    const members = await membersOf(user);
    const byName = new Map(members.map((m) => [m.name, m]));
    expect([...byName.keys()].sort()).toEqual(['Robin', 'Sage', 'Wren']);
    const robin = byName.get('Robin')!;
    expect(robin.displayName).toBe('Robin 🌿');
    expect(robin.pronouns).toBe('she/they');
    expect(robin.description).toBe('Gatekeeper.');
    const imported = (robin.profileStyle as { imported: Record<string, unknown> }).imported;
    expect(imported.hid).toBe('abcde');
    expect(imported.birthday).toBe('--03-14');
    expect(imported.color).toBe('#00aa88');
    expect(imported.avatarUrl).toBe('https://cdn.example/robin.png');

    // The group, with the members its hids name in any spelling.
    const tree = await user.api.GET('/api/v1/groups', {});
    const text = JSON.stringify(tree.data);
    expect(text).toContain('Protectors');

    // Privacy: only public members are in the Public bucket.
    const buckets = await user.api.GET('/api/v1/privacy-buckets', {});
    const publicBucket = buckets.data!.find((b) => b.name === 'Public')!;
    expect(publicBucket).toBeDefined();
    const inPublic = await user.api.GET('/api/v1/privacy-buckets/{bucketId}/members', {
      params: { path: { bucketId: publicBucket._id } },
    });
    expect(new Set(inPublic.data!.memberIds)).toEqual(new Set([robin._id, byName.get('Wren')!._id]));

    // The newest switch's members front now; the rest is history.
    const front = await user.api.GET('/api/v1/front', {});
    const fronting = JSON.stringify(front.data);
    expect(fronting).toContain(robin._id);
    expect(fronting).toContain(byName.get('Wren')!._id);
    expect(fronting).not.toContain(byName.get('Sage')!._id);
    const history = await user.api.GET('/api/v1/front/history', { params: { query: { limit: 50 } } });
    const sessions = history.data!.items.map((item) => item.session);
    const sage = sessions.filter((s) => s.memberId === byName.get('Sage')!._id);
    expect(sage.map((s) => [s.startedAt, s.endedAt])).toEqual([
      [T('2024-04-30T20:00:00Z'), T('2024-05-01T08:00:00.500Z')],
    ]);
    const robins = sessions
      .filter((s) => s.memberId === robin._id)
      .map((s) => [s.startedAt, s.endedAt])
      .sort((a, b) => Number(a[0]) - Number(b[0]));
    expect(robins).toEqual([
      [T('2024-04-30T18:00:00Z'), T('2024-05-01T08:00:00.500Z')],
      [T('2024-05-01T12:00:00Z'), null],
    ]);
  });

  it('changes nothing when the same file comes again, and updates only what an edited file changed', async () => {
    const user = await server.user();
    await importFile(user, pluralKitFile(), 'source=pluralkit');
    const before = await membersOf(user);

    const again = await importFile(user, pluralKitFile(), 'source=pluralkit');
    expect(again.status).toBe('succeeded');
    expect(again.report.members).toEqual({ ...zero, unchanged: 3 });
    expect(again.report.groups).toEqual({ ...zero, unchanged: 1 });
    expect(again.report.switches?.created).toBe(0);
    expect(again.report.switches?.updated).toBe(0);
    expect(await membersOf(user)).toEqual(before);

    const edited = await importFile(user, pluralKitFile({ robinName: 'Robin R.' }), 'source=pluralkit');
    expect(edited.report.members).toEqual({ ...zero, updated: 1, unchanged: 2 });
    const after = await membersOf(user);
    expect(after.map((m) => m.name).sort()).toEqual(['Robin R.', 'Sage', 'Wren']);
    expect(after.find((m) => m.name === 'Robin R.')!._id).toBe(before.find((m) => m.name === 'Robin')!._id);
  });

  it('a dry run reports what a real run would and writes nothing', async () => {
    const user = await server.user();
    const dry = await importFile(user, pluralKitFile(), 'source=pluralkit&dryRun=true');
    expect(dry.status).toBe('succeeded');
    expect(dry.dryRun).toBe(true);
    expect(await membersOf(user)).toEqual([]);
    const front = await user.api.GET('/api/v1/front', {});
    expect(JSON.stringify(front.data)).not.toContain('startedAt":17');

    const real = await importFile(user, pluralKitFile(), 'source=pluralkit');
    expect(real.report).toEqual(dry.report);
    expect(real.warnings).toEqual(dry.warnings);
  });
});

const fixture = (name: string) => readFileSync(new URL(`./fixtures/imports/${name}`, import.meta.url), 'utf8');

/** Names of the buckets a member is in. */
async function bucketNamesOf(user: TestUser, memberId: string): Promise<string[]> {
  const buckets = (await user.api.GET('/api/v1/privacy-buckets', {})).data!;
  const { data } = await user.api.GET('/api/v1/privacy-buckets/assignments/members/{memberId}', {
    params: { path: { memberId } },
  });
  const names = new Map(buckets.map((b) => [b._id, b.name]));
  return data!.bucketIds.map((id) => names.get(id)!).sort();
}

describe('Simply Plural import', () => {
  it('maps members, custom fronts, buckets, fields, nested groups, front history and notes', async () => {
    const user = await server.user();
    const result = await importFile(user, fixture('simply-plural-export.json'), 'source=simply_plural');
    expect(result.status).toBe('succeeded');
    expect(result.report.members).toEqual({ ...zero, created: 5, failed: 4 });
    expect(result.report.frontStatuses).toEqual({ ...zero, created: 3 });
    expect(result.report.privacyBuckets).toEqual({ ...zero, created: 4 });
    expect(result.report.customFields).toEqual({ ...zero, created: 8 });
    expect(result.report.groups).toEqual({ ...zero, created: 9 });
    // 901–905, 90a, 90c, 90d; failed: a duplicate id, a deleted member, no end (twice), end before start, no start.
    expect(result.report.frontHistory).toEqual({ ...zero, created: 8, failed: 6 });
    expect(result.report.tokens).toEqual({ ...zero, skipped: 1 });
    expect(result.report.friends).toEqual({ ...zero, skipped: 2 });

    const members = await membersOf(user);
    const byName = new Map(members.map((m) => [m.name, m]));
    for (const name of ['Dissociated', 'Tired 😴', 'Blurry'])
      expect(byName.get(name)?.aboutTags).toEqual(['custom front']);
    expect(byName.get('Ember')!.archivedAt).not.toBeNull();
    expect(byName.get('Aurora')!.archivedAt).toBeNull();
    expect(await bucketNamesOf(user, byName.get('Aurora')!._id)).toEqual(['Friends', 'Trusted friends']);

    // A session whose `member` is a custom front, flagged custom: false, belongs to the custom front.
    const history = (await user.api.GET('/api/v1/front/history', { params: { query: { limit: 50 } } })).data!;
    const dissociated = history.items.filter((i) => i.session.memberId === byName.get('Dissociated')!._id);
    expect(dissociated.map((i) => [i.session.startedAt, i.session.endedAt]).sort()).toEqual([
      [1704074400000, Date.parse('2024-01-01T04:30:00+01:00')],
      [1704300000000, 1704303600000],
    ]);
    // Live documents are open sessions: fronting now.
    const front = JSON.stringify((await user.api.GET('/api/v1/front', {})).data);
    expect(front).toContain(byName.get('Aurora')!._id);
    expect(front).toContain(byName.get('Tired 😴')!._id);

    // Notes keep their date and member.
    const notes = (await user.api.GET('/api/v1/entries', { params: { query: { limit: 50 } } })).data!;
    const therapy = notes.find((n) => n.title === 'Therapy notes')!;
    expect(therapy.createdAt).toBe(1704100000000);
    expect(JSON.stringify(therapy.member)).toContain(byName.get('Aurora')!._id);

    // Nesting: a group with child groups is also a folder holding them (Protectors ⊃ Littles ⊃ Tiny ones).
    const tree = (await user.api.GET('/api/v1/groups', {})).data!;
    const folder = (name: string) => tree.folders.find((f) => f.name === name)!;
    expect(folder('Littles').parentId).toBe(folder('Protectors')._id);
    expect(folder('Littles').groups.map((g) => g.name)).toEqual(['Tiny ones']);
    expect(folder('Protectors').groups.map((g) => g.name)).toEqual(['Littles']);
    const protectors = tree.groups.find((g) => g.name === 'Protectors')!;
    expect(new Set(protectors.memberIds)).toEqual(
      new Set([byName.get('Aurora')!._id, byName.get('Kit')!._id, byName.get('Dissociated')!._id]),
    );

    // Chat: one space, the categories in the account's order, channels in them, the readable messages.
    expect(result.report.channelCategories).toEqual({ ...zero, created: 2 });
    expect(result.report.channels).toEqual({ ...zero, created: 3 });
    expect(result.report.chatMessages).toEqual({ ...zero, created: 4, skipped: 3, failed: 3 });
    const chat = (await user.api.GET('/api/v1/messaging/bootstrap')).data!;
    expect(chat.spaces.map((sp) => sp.name)).toEqual(['Simply Plural']);
    expect(chat.categories.map((c) => c.name)).toEqual(['Outer world', 'Inner world']);
    const categoryName = new Map(chat.categories.map((c) => [c.id, c.name]));
    expect(chat.channels.map((c) => [c.name, c.topic, categoryName.get(c.categoryId ?? '')])).toEqual([
      ['work', null, 'Outer world'],
      ['general', 'Anything goes', 'Inner world'],
      ['planning', null, 'Inner world'],
    ]);
    // Imported history arrives read.
    expect(Object.values(chat.unreadByChannelId).every((n) => n === 0)).toBe(true);
    const channelId = (name: string) => chat.channels.find((c) => c.name === name)!.id;
    const page = async (name: string) =>
      (
        await user.api.GET('/api/v1/messaging/channels/{channelId}/messages', {
          params: { path: { channelId: channelId(name) } },
        })
      ).data!.items;
    const solId = byName.get('Sol')!._id;
    // Pages are newest first.
    const planning = await page('planning');
    expect(
      planning.map((m) => ({
        content: m.content,
        createdAt: m.createdAt,
        editedAt: m.editedAt,
        author: m.authorMemberId,
      })),
    ).toEqual([
      {
        content: `<@${solId}> can you check the planner? <###@goneMember###>`,
        createdAt: Date.parse('2024-05-29T17:00:00.000Z'),
        editedAt: null,
        author: byName.get('Aurora')!._id,
      },
      { content: 'Morning everyone!', createdAt: 1717000400000, editedAt: null, author: byName.get('Aurora')!._id },
    ]);
    expect(planning[0]!.mentions.map((m) => m.memberId)).toEqual([solId]);
    expect(planning[0]!.replyTo?.messageId).toBe(planning[1]!.id);
    const general = await page('general');
    expect(general.map((m) => [m.content, m.editedAt])).toEqual([
      ['b2s=', null],
      ['Lunch is ready 🍝', 1717000600000],
    ]);

    const again = await importFile(user, fixture('simply-plural-export.json'), 'source=simply_plural');
    for (const collection of [
      'members',
      'frontStatuses',
      'privacyBuckets',
      'customFields',
      'groups',
      'notes',
      'frontHistory',
      'channelCategories',
      'channels',
      'chatMessages',
    ])
      expect(again.report[collection], collection).toEqual({
        ...result.report[collection],
        created: 0,
        unchanged: result.report[collection]!.created,
      });
    expect(await membersOf(user)).toEqual(members);
    expect((await user.api.GET('/api/v1/messaging/bootstrap')).data!.channels.length).toBe(3);
    expect(await page('planning')).toEqual(planning);
  });

  it('maps a legacy (pre-bucket) export’s private and preventTrusted flags as Simply Plural’s own migration did', async () => {
    const user = await server.user();
    const result = await importFile(user, fixture('simply-plural-legacy.json'), 'source=simply_plural');
    expect(result.status).toBe('succeeded');
    expect(result.report.synthetic).toEqual({ ...zero, created: 2 });
    const byName = new Map((await membersOf(user)).map((m) => [m.name, m]));
    const expected: Record<string, string[]> = {
      Juniper: ['Friends', 'Trusted friends'],
      Moss: ['Friends', 'Trusted friends'],
      Mira: ['Trusted friends'],
      Wren: [],
      Quill: [],
      Rue: ['Trusted friends'],
    };
    for (const [name, buckets] of Object.entries(expected))
      expect(await bucketNamesOf(user, byName.get(name)!._id), name).toEqual(buckets);
  });
});

describe('front history and notes, streamed from the file a batch at a time', () => {
  const uid = 'spUidBatches0123456789ab';
  /** 4,100 front history entries, 2,100 notes and 2,100 chat messages (each answering the one before): more than one of the applier's batches (2,000) of each. */
  function batchedFile(options: { endOf3333?: number; text2050?: string } = {}) {
    const start = 1_600_000_000_000;
    const history = Array.from({ length: 4100 }, (_, i) => ({
      _id: `h${i}`,
      member: 'm1',
      startTime: start + i * 10_000,
      endTime: i === 3333 && options.endOf3333 ? options.endOf3333 : start + i * 10_000 + 5_000,
    }));
    const notes = Array.from({ length: 2100 }, (_, i) => ({ _id: `n${i}`, note: `Text ${i}`, date: start + i }));
    const chatMessages = Array.from({ length: 2100 }, (_, i) => ({
      _id: `c${i}`,
      channel: 'ch1',
      writer: 'm1',
      message: i === 2050 && options.text2050 ? options.text2050 : `Message ${i}`,
      writtenAt: start + i * 1000,
      replyTo: i === 0 ? '' : `c${i - 1}`,
    }));
    return JSON.stringify({
      users: [{ _id: uid, uid, username: 'batches' }],
      private: [{ _id: uid, uid, latestVersion: 312 }],
      members: [{ _id: 'm1', uid, name: 'Robin', buckets: [] }],
      frontHistory: history,
      notes,
      channels: [{ _id: 'ch1', name: 'general' }],
      chatMessages,
    });
  }
  const counted = async (user: TestUser, table: string) =>
    Number((await server.deps.db.knex(table).where({ user_id: user.userId }).count({ n: '*' }))[0]!.n);

  it('writes every batch, re-imports them unchanged, and updates entries of a later batch', async () => {
    const user = await server.user();
    const first = await importFile(user, batchedFile(), 'source=simply_plural');
    expect(first.status).toBe('succeeded');
    expect(first.report.frontHistory).toEqual({ ...zero, created: 4100 });
    expect(first.report.notes).toEqual({ ...zero, created: 2100 });
    expect(first.report.chatMessages).toEqual({ ...zero, created: 2100 });
    expect(first.progress).toEqual({ done: 8302, total: 8302 });
    expect([await counted(user, 'front_sessions'), await counted(user, 'entries')]).toEqual([4100, 2100]);
    // Numbered 1…2,100 in time order; each answers the one before, across batches too.
    const chat = await server.deps.db
      .knex('messaging_messages as m')
      .leftJoin('messaging_messages as r', 'r.id', 'm.reply_to_id')
      .where('m.user_id', user.userId)
      .orderBy('m.seq')
      .select('m.seq', 'r.seq as reply_seq');
    expect(chat.map((m) => [Number(m.seq), m.reply_seq === null ? null : Number(m.reply_seq)])).toEqual(
      Array.from({ length: 2100 }, (_, i) => [i + 1, i === 0 ? null : i]),
    );

    const again = await importFile(user, batchedFile(), 'source=simply_plural');
    expect(again.report.frontHistory).toEqual({ ...zero, unchanged: 4100 });
    expect(again.report.notes).toEqual({ ...zero, unchanged: 2100 });
    expect(again.report.chatMessages).toEqual({ ...zero, unchanged: 2100 });

    const edited = await importFile(
      user,
      batchedFile({ endOf3333: 1_600_000_000_000 + 3333 * 10_000 + 9_000, text2050: 'Message 2050, edited' }),
      'source=simply_plural',
    );
    expect(edited.report.frontHistory).toEqual({ ...zero, unchanged: 4099, updated: 1 });
    expect(await counted(user, 'front_sessions')).toBe(4100);
    const moved = await server.deps.db
      .knex('front_sessions')
      .where({ user_id: user.userId, started_at: 1_600_000_000_000 + 3333 * 10_000 })
      .first('ended_at');
    expect(Number(moved.ended_at)).toBe(1_600_000_000_000 + 3333 * 10_000 + 9_000);
    expect(edited.report.chatMessages).toEqual({ ...zero, unchanged: 2099, updated: 1 });
    const channelId = (await user.api.GET('/api/v1/messaging/bootstrap')).data!.channels[0]!.id;
    const newest = (
      await user.api.GET('/api/v1/messaging/channels/{channelId}/messages', {
        params: { path: { channelId }, query: { limit: 50 } },
      })
    ).data!.items;
    expect(newest.find((m) => m.content?.startsWith('Message 2050'))?.content).toBe('Message 2050, edited');
    expect(await counted(user, 'messaging_messages')).toBe(2100);
  });
});

describe('notes and their caps', () => {
  it('imports notes with their dates, keeps the plan’s cap per member, and reports the notes over it', async () => {
    const user = await server.user({ account: { plan: 'free' } });
    const uid = 'spUid0123456789abcdefgh';
    const notes = Array.from({ length: 101 }, (_, i) => ({
      _id: `note${String(i).padStart(4, '0')}`,
      uid,
      title: `Note ${i}`,
      note: `Text ${i}`,
      member: 'm1',
      date: 1_700_000_000_000 + i * 1000,
    }));
    const file = {
      users: [{ _id: uid, uid, username: 'capped' }],
      private: [{ _id: uid, uid, latestVersion: 312 }],
      members: [{ _id: 'm1', uid, name: 'Robin', buckets: [] }],
      notes,
    };
    const result = await importFile(user, file, 'source=simply_plural');
    expect(result.status).toBe('succeeded');
    expect(result.report.notes).toEqual({ ...zero, created: 100, failed: 1 });
    expect(result.warnings).toContainEqual({
      collection: 'notes',
      sourceId: 'note0100',
      message: expect.stringMatching(
        /^not imported: Note limit of 100 per member on the Free plan reached for member /,
      ),
    });
    const stored = await server.deps.db.knex('entries').where({ user_id: user.userId }).count({ n: '*' });
    expect(Number(stored[0]!.n)).toBe(100);
    const listed = (await user.api.GET('/api/v1/entries', { params: { query: { limit: 100 } } })).data!;
    const first = listed.find((n) => n.title === 'Note 0')!;
    expect([first.createdAt, first.updatedAt]).toEqual([1_700_000_000_000, 1_700_000_000_000]);

    const again = await importFile(user, file, 'source=simply_plural');
    expect(again.report.notes).toEqual({ ...zero, unchanged: 100, failed: 1 });
  });

  it('re-hosts a note’s external images as any note’s, and reports a note whose images cannot be fetched', async () => {
    const user = await server.user();
    const uid = 'spUid0123456789abcdefgh';
    const file = {
      users: [{ _id: uid, uid, username: 'images' }],
      private: [{ _id: uid, uid, latestVersion: 312 }],
      members: [{ _id: 'm1', uid, name: 'Robin', buckets: [] }],
      notes: [
        { _id: 'plain', uid, title: 'Plain', note: 'No images.', member: 'm1', date: 1_700_000_000_000 },
        {
          _id: 'pic',
          uid,
          title: 'Pic',
          note: '![cat](http://127.0.0.1:9/cat.png)',
          member: 'm1',
          date: 1_700_000_000_000,
        },
      ],
    };
    const result = await importFile(user, file, 'source=simply_plural');
    expect(result.status).toBe('succeeded');
    expect(result.report.notes).toEqual({ ...zero, created: 1, failed: 1 });
    expect(result.warnings.find((w) => w.sourceId === 'pic')?.message).toMatch(/^not imported: /);
  });
});

describe('bad input', () => {
  it('refuses a body that is not one JSON object at the door (400), queueing nothing', async () => {
    const user = await server.user();
    for (const [body, where] of [
      ['{"version": 2, "members": [', 'unexpected end of the file at byte 27'],
      ['[1, 2]', 'expected a JSON object ({) at byte 0'],
      ['{"a": 1} trailing', 'unexpected data after the end of the object at byte 9'],
    ] as const) {
      const res = await postImport(user, body, 'source=pluralkit');
      expect(res.status, body).toBe(400);
      expect(await res.json()).toEqual({
        code: 'BAD_REQUEST',
        message: `The file is not a JSON object (${where}): send the export file unchanged`,
      });
    }
    expect((await user.api.GET('/api/v1/imports', {})).data!.items).toEqual([]);
  });

  it('refuses the body as soon as it stops being JSON, without waiting for the rest, and keeps no temporary file', async () => {
    const user = await server.user();
    const leftovers = () => readdirSync(tmpdir()).filter((name) => name.startsWith(`import-${user.userId}-`));
    // A chunked upload whose first chunk is already not JSON; the rest never comes. Checked only at
    // the end, this request would wait for the end forever.
    const answer = await new Promise<{ status: number; body: string }>((resolve, reject) => {
      const req = httpRequest(`${server.baseUrl}/api/v1/imports?source=pluralkit`, {
        method: 'POST',
        headers: { ...bearer(user.apiKey), 'Content-Type': 'application/json', 'Transfer-Encoding': 'chunked' },
      });
      req.on('response', (res) => {
        let body = '';
        res.on('data', (chunk: Buffer) => {
          body += chunk.toString();
        });
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
      });
      req.on('error', reject);
      req.write(`{"version": 2, "members": [{"id": "abcde"},, ${' '.repeat(64 * 1024)}`);
    });
    expect(answer.status).toBe(400);
    expect(JSON.parse(answer.body)).toEqual({
      code: 'BAD_REQUEST',
      message: 'The file is not a JSON object (unexpected character at byte 43): send the export file unchanged',
    });
    expect(leftovers()).toEqual([]);
    // Accepted: stored in object storage from the temporary file, which is gone afterwards.
    const ok = await postImport(user, pluralKitFile(), 'source=pluralkit');
    expect(ok.status).toBe(202);
    expect(leftovers()).toEqual([]);
    const big = await postImport(user, JSON.stringify({ pad: 'x'.repeat(MAX_BYTES) }), 'source=pluralkit');
    expect(big.status).toBe(413);
    expect(leftovers()).toEqual([]);
    await server.runtime.jobs.runDue();
    expect((await membersOf(user)).length).toBe(3);
  });

  it('fails an import of another source’s file with the reason, writing nothing', async () => {
    const user = await server.user();
    const tupperbox = await importFile(user, { tuppers: [], groups: [] }, 'source=pluralkit');
    expect(tupperbox.status).toBe('failed');
    expect(tupperbox.error).toMatch(/Tupperbox/i);
    const wrongSource = await importFile(user, pluralKitFile(), 'source=simply_plural');
    expect(wrongSource.status).toBe('failed');
    expect(wrongSource.error).not.toBeNull();
    expect(await membersOf(user)).toEqual([]);
  });

  it('replaces NULs and unpaired surrogates in the file’s text (the API’s bodies refuse them) and says where', async () => {
    const user = await server.user();
    const file = pluralKitFile();
    file.members[0]!.description = 'Gate\u0000keeper \ud800.';
    const result = await importFile(user, file, 'source=pluralkit');
    expect(result.status).toBe('succeeded');
    expect(result.report.members).toEqual({ ...zero, created: 3 });
    expect(result.warnings).toContainEqual({
      collection: 'members',
      sourceId: '11111111-1111-4111-8111-111111111111',
      message: 'held characters that cannot be stored (NUL or an unpaired surrogate): replaced with U+FFFD',
    });
    const robin = (await membersOf(user)).find((m) => m.name === 'Robin')!;
    expect(robin.description).toBe('Gate\ufffdkeeper \ufffd.');
  });

  it('fails a file with more members than an import takes with the reason, writing nothing', async () => {
    const user = await server.user();
    const members = Array.from({ length: 20_001 }, (_, i) => ({ _id: `m${i}`, name: `M${i}` }));
    const result = await importFile(user, { members }, 'source=simply_plural');
    expect(result.status).toBe('failed');
    expect(result.error).toBe(
      'The file is too large to import: it holds 20001 members and custom fronts, more than the 20000 an import takes',
    );
    expect(await membersOf(user)).toEqual([]);
  });

  it('fails a file whose data is nested too deeply to read with the reason, not a server error', async () => {
    const user = await server.user();
    const deep = `${'['.repeat(100_000)}${']'.repeat(100_000)}`;
    const member = `{"id":"abcde","uuid":"11111111-1111-4111-8111-111111111111","name":"Robin","deep":${deep}}`;
    const result = await importFile(user, `{"version":2,"members":[${member}]}`, 'source=pluralkit');
    expect(result.status).toBe('failed');
    expect(result.error).toBe('The file is nested too deeply to be read');
    expect(await membersOf(user)).toEqual([]);
    // The file is read a document at a time: a key the importer does not read is never parsed.
    const unread = await importFile(user, `{"version":2,"members":[],"deep":${deep}}`, 'source=pluralkit');
    expect(unread.status).toBe('succeeded');
  });

  it('takes a gzipped file, and refuses another encoding or a file labelled as another source’s (415)', async () => {
    const user = await server.user();
    const gz = await server.fetch('/api/v1/imports?source=pluralkit', {
      method: 'POST',
      headers: { ...bearer(user.apiKey), 'Content-Type': 'application/json', 'Content-Encoding': 'gzip' },
      body: gzipSync(JSON.stringify(pluralKitFile())),
    });
    expect(gz.status).toBe(202);
    await server.runtime.jobs.runDue();
    expect((await membersOf(user)).length).toBe(3);

    const broken = await server.fetch('/api/v1/imports?source=pluralkit', {
      method: 'POST',
      headers: { ...bearer(user.apiKey), 'Content-Type': 'application/json', 'Content-Encoding': 'gzip' },
      body: JSON.stringify(pluralKitFile()),
    });
    expect(broken.status).toBe(400);
    expect(await broken.json()).toEqual({
      code: 'BAD_REQUEST',
      message: 'Request body does not match its Content-Encoding (gzip)',
    });
    const odd = await postImport(user, pluralKitFile(), 'source=pluralkit', { 'Content-Encoding': 'x-unknown' });
    expect(odd.status).toBe(415);
    const tar = await postImport(user, pluralKitFile(), 'source=pluralkit', { 'Content-Type': 'application/x-tar' });
    expect(tar.status).toBe(415);
    expect(await tar.json()).toEqual({
      code: 'UNSUPPORTED_MEDIA_TYPE',
      message: 'Content-Type must be application/json here',
    });
    const json = await postImport(user, pluralKitFile(), 'source=native');
    expect(json.status).toBe(415);
  });

  it('refuses an empty body (400), a file over IMPORT_MAX_BYTES (413) and an unknown source (400)', async () => {
    const user = await server.user();
    const empty = await postImport(user, '', 'source=pluralkit');
    expect(empty.status).toBe(400);
    const big = await postImport(user, JSON.stringify({ pad: 'x'.repeat(MAX_BYTES) }), 'source=pluralkit');
    expect(big.status).toBe(413);
    expect(((await big.json()) as { code: string }).code).toBe('PAYLOAD_TOO_LARGE');
    const unknown = await postImport(user, pluralKitFile(), 'source=tupperbox');
    expect(unknown.status).toBe(400);
    const { data } = await user.api.GET('/api/v1/imports', {});
    expect(data!.items).toEqual([]);
  });

  it('needs read_write on every scope the source writes, and names the first one missing', async () => {
    const user = await server.user({
      scopes: { members: 'read_write', groups: 'read', front: 'read_write', privacyBuckets: 'read_write' },
    });
    const res = await postImport(user, pluralKitFile(), 'source=pluralkit');
    expect(res.status).toBe(403);
    expect(await res.json()).toEqual({
      code: 'FORBIDDEN',
      message: 'Missing API key scope: groups requires read_write',
    });
    const sp = await server.user({
      scopes: { members: 'read_write', groups: 'read_write', front: 'read_write', privacyBuckets: 'read_write' },
    });
    const spRes = await postImport(sp, {}, 'source=simply_plural');
    expect(spRes.status).toBe(403);
    expect(((await spRes.json()) as { message: string }).message).toBe(
      'Missing API key scope: customFields requires read_write',
    );
    // Simply Plural's chat goes to messaging.
    const noChat = await server.user({
      scopes: {
        members: 'read_write',
        groups: 'read_write',
        front: 'read_write',
        privacyBuckets: 'read_write',
        customFields: 'read_write',
        entries: 'read_write',
        messaging: 'read',
      },
    });
    const noChatRes = await postImport(noChat, {}, 'source=simply_plural');
    expect(noChatRes.status).toBe(403);
    expect(((await noChatRes.json()) as { message: string }).message).toBe(
      'Missing API key scope: messaging requires read_write',
    );
  });
});

describe('a worker that dies', () => {
  it('leaves its import to the next attempt once the lease has run out, and never runs one twice at once', async () => {
    const user = await server.user();
    const knex = server.deps.db.knex;
    const res = await postImport(user, pluralKitFile(), 'source=pluralkit');
    const { id } = (await res.json()) as { id: string };
    // Another worker holds it (started a minute ago): a job for it here leaves it alone.
    await knex('imports')
      .where({ id })
      .update({ status: 'running', started_at: Date.now() - 60_000 });
    await server.runtime.jobs.runDue();
    const held = await user.api.GET('/api/v1/imports/{importId}', { params: { path: { importId: id } } });
    expect(held.data!.status).toBe('running');
    expect(await membersOf(user)).toEqual([]);
    // That worker died 31 minutes ago (past the lease): the queue's next attempt takes it over.
    await knex('imports')
      .where({ id })
      .update({ started_at: Date.now() - 31 * 60_000 });
    await server.runtime.jobs.enqueue(knex, 'import', { importId: id });
    await server.runtime.jobs.runDue();
    const done = await user.api.GET('/api/v1/imports/{importId}', { params: { path: { importId: id } } });
    expect(done.data!.status).toBe('succeeded');
    expect((await membersOf(user)).map((m) => m.name).sort()).toEqual(['Robin', 'Sage', 'Wren']);
  });
});

describe('reading imports', () => {
  it('lists an account’s imports newest first, a page at a time, and hides other accounts’ imports', async () => {
    const user = await server.user();
    const first = await importFile(user, pluralKitFile(), 'source=pluralkit&dryRun=true');
    const second = await importFile(user, pluralKitFile(), 'source=pluralkit&dryRun=true');
    const page1 = await user.api.GET('/api/v1/imports', { params: { query: { limit: 1 } } });
    expect(page1.data!.items).toHaveLength(1);
    expect(page1.data!.nextCursor).not.toBeNull();
    const page2 = await user.api.GET('/api/v1/imports', {
      params: { query: { limit: 1, cursor: page1.data!.nextCursor! } },
    });
    expect(page2.data!.items).toHaveLength(1);
    expect(page2.data!.nextCursor).toBeNull();
    expect(new Set([page1.data!.items[0]!.id, page2.data!.items[0]!.id])).toEqual(new Set([first.id, second.id]));

    const other = await server.user();
    const hidden = await other.api.GET('/api/v1/imports/{importId}', { params: { path: { importId: first.id } } });
    expect(hidden.response.status).toBe(404);
    expect((await other.api.GET('/api/v1/imports', {})).data!.items).toEqual([]);
  });
});

describe('imports for the operator', () => {
  const run = promisify(execFile);
  /** Runs the CLI while this process plays the job worker (test servers do not start theirs). */
  async function cli(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
    let done = false;
    const child = run(process.execPath, ['--import', 'tsx', 'scripts/admin.ts', ...args], {
      env: { ...process.env, ADMIN_URL: server.baseUrl, ADMIN_TOKEN: server.adminToken },
    }).then(
      (r) => ({ code: 0, stdout: r.stdout, stderr: r.stderr }),
      (e: { code: number; stdout: string; stderr: string }) => ({ code: e.code, stdout: e.stdout, stderr: e.stderr }),
    );
    void child.finally(() => {
      done = true;
    });
    while (!done) {
      await server.runtime.jobs.runDue();
      await new Promise((r) => setTimeout(r, 100));
    }
    return child;
  }

  it('imports into any account through the admin API, and 404s for an unknown account', async () => {
    const user = await server.user();
    const adminHeaders = { ...bearer(server.adminToken), 'Content-Type': 'application/json' };
    const res = await server.fetch(`/admin/v1/accounts/${user.userId}/imports?source=pluralkit`, {
      method: 'POST',
      headers: adminHeaders,
      body: JSON.stringify(pluralKitFile()),
    });
    expect(res.status).toBe(202);
    const { id } = (await res.json()) as { id: string };
    expect(res.headers.get('location')).toBe(`/admin/v1/accounts/${user.userId}/imports/${id}`);
    await server.runtime.jobs.runDue();
    const got = await server.admin.GET('/admin/v1/accounts/{userId}/imports/{importId}', {
      params: { path: { userId: user.userId, importId: id } },
    });
    expect(got.data!.status).toBe('succeeded');
    expect((await membersOf(user)).length).toBe(3);
    // The account's own key sees the same import.
    const own = await user.api.GET('/api/v1/imports/{importId}', { params: { path: { importId: id } } });
    expect(own.data).toEqual(got.data);

    const unknown = await server.fetch(
      '/admin/v1/accounts/00000000-0000-4000-8000-00000000dead/imports?source=pluralkit',
      {
        method: 'POST',
        headers: adminHeaders,
        body: JSON.stringify(pluralKitFile()),
      },
    );
    expect(unknown.status).toBe(404);
    const other = await server.user();
    const elsewhere = await server.admin.GET('/admin/v1/accounts/{userId}/imports/{importId}', {
      params: { path: { userId: other.userId, importId: id } },
    });
    expect(elsewhere.response.status).toBe(404);
  });

  it('npm run admin -- export saves an account’s archive, which import --source native copies into another', async () => {
    const source = await server.user();
    await importFile(source, pluralKitFile(), 'source=pluralkit');
    const dir = mkdtempSync(join(tmpdir(), 'ada-export-'));
    const out = join(dir, 'account.tar');
    const exported = await cli(['export', '--user', source.userId, '--out', out]);
    expect(exported.code, exported.stderr).toBe(0);
    const summary = JSON.parse(exported.stdout) as { export: string; out: string; sizeBytes: number };
    expect(summary.out).toBe(out);
    expect(summary.sizeBytes).toBe(readFileSync(out).length);
    expect(readFileSync(out).subarray(257, 262).toString('latin1')).toBe('ustar');

    const copy = await server.user();
    const imported = await cli(['import', '--user', copy.userId, '--source', 'native', '--file', out]);
    expect(imported.code, imported.stderr).toBe(0);
    expect(JSON.parse(imported.stdout)).toMatchObject({ status: 'succeeded', source: 'native' });
    expect((await membersOf(copy)).map((m) => m.name).sort()).toEqual(['Robin', 'Sage', 'Wren']);

    const unknown = await cli([
      'export',
      '--user',
      '00000000-0000-4000-8000-00000000dead',
      '--out',
      join(dir, 'x.tar'),
    ]);
    expect(unknown.code).toBe(1);
    expect(JSON.parse(unknown.stderr)).toMatchObject({ code: 'NOT_FOUND' });
  });

  it('npm run admin -- import sends the file, waits, prints the import, and exits 1 when it failed', async () => {
    const user = await server.user();
    const dir = mkdtempSync(join(tmpdir(), 'ada-import-'));
    const good = join(dir, 'system.json');
    writeFileSync(good, JSON.stringify(pluralKitFile()));
    const dry = await cli(['import', '--user', user.userId, '--source', 'pluralkit', '--file', good, '--dry-run']);
    expect(dry.code).toBe(0);
    expect(JSON.parse(dry.stdout)).toMatchObject({ status: 'succeeded', dryRun: true });
    expect(await membersOf(user)).toEqual([]);
    const real = await cli(['import', '--user', user.userId, '--source', 'pluralkit', '--file', good]);
    expect(real.code).toBe(0);
    expect(JSON.parse(real.stdout).report.members).toEqual({ ...zero, created: 3 });
    expect((await membersOf(user)).length).toBe(3);

    const tupperbox = join(dir, 'tupperbox.json');
    writeFileSync(tupperbox, JSON.stringify({ tuppers: [], groups: [] }));
    const failed = await cli(['import', '--user', user.userId, '--source', 'pluralkit', '--file', tupperbox]);
    expect(failed.code).toBe(1);
    expect(JSON.parse(failed.stderr)).toMatchObject({ status: 'failed', error: expect.stringMatching(/Tupperbox/) });

    const usage = await cli(['import', '--user', user.userId, '--source', 'octocon', '--file', good]);
    expect(usage.code).toBe(2);
    expect(usage.stderr).toContain('--source must be simply_plural, pluralkit or native');
  });
});

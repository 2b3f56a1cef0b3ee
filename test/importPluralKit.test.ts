/**
 * The PluralKit export parser (server/features/portability/sources/pluralKit.ts) against sample
 * `system.json` files written from the format description (version 2 and the legacy version 1),
 * and against small files built here for one rule each.
 */
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { type ParsedBundle, ImportFormatError } from '../server/features/portability/bundle.ts';
import { parsePluralKit } from '../server/features/portability/sources/pluralKit.ts';

const fixture = (name: string) => readFileSync(resolve(import.meta.dirname, 'fixtures/imports', name), 'utf8');
const V2 = fixture('pluralkit-system-v2.json');
const V1 = fixture('pluralkit-system-v1.json');

const ASH = '0b6f7c52-91e4-4f0a-8a3d-7c2e5d9b1f40';
const BIRCH = '3e9d1a07-6c58-4b2f-b4e1-9f8a7c6d5e21';
const CINDER = 'a71c4e98-0d3b-4e6f-8f25-6b4a3c2d1e09';
const DOVE = 'd2f8b6a4-5c3e-4a1b-9d7f-0e1c2b3a4f58';
const WREN = '6c5b4a39-8e7d-4c6b-a5f4-3e2d1c0b9a87';
const FRONT_DESK = '9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d';
const LITTLES = '4b3a2f1e-0d9c-4b8a-9e7d-6f5e4d3c2b1a';

const member = (id: string) => ({ collection: 'members', id });
const ms = (iso: string) => Date.parse(iso); // only ever given 3-digit ISO strings here
const session = (memberId: string, start: string, end: string | null) => ({
  ref: { collection: 'switches', id: `${memberId}@${start}` },
  member: member(memberId),
  startedAt: ms(start),
  endedAt: end === null ? null : ms(end),
  note: null,
});

/** A small version-2 file: one member (hid `aaaaa`) unless `members` is given. */
const pk = (fields: Record<string, unknown> = {}) =>
  JSON.stringify({
    version: 2,
    id: 'sysaa',
    uuid: '11111111-2222-4333-8444-555555555555',
    name: 'S',
    members: [{ id: 'aaaaa', uuid: 'aaaaaaaa-0000-4000-8000-000000000001', name: 'A' }],
    groups: [],
    switches: [],
    ...fields,
  });
const warningsOf = (bundle: ParsedBundle, collection: string) =>
  bundle.warnings.filter((warning) => warning.collection === collection);

describe('version 2 file', () => {
  const bundle = parsePluralKit(V2);

  it('maps the system, its colour as #rrggbb lower-case', () => {
    expect(bundle.source).toBe('pluralkit');
    expect(bundle.system).toEqual({
      name: 'The Lantern Collective',
      description: "We're a system of five (that we know of).\nPing whoever's fronting, we'll sort it out.",
      tag: '| 🏮 Lanterns',
      avatarUrl: 'https://cdn.pluralkit.me/avatars/tqwkz/2f7a6c1e.webp',
      color: '#3a7bd5',
    });
  });

  it('has one synthetic Public bucket, no default buckets, no fields, no notes', () => {
    expect(bundle.buckets).toEqual([
      {
        ref: { collection: 'synthetic', id: 'public' },
        name: 'Public',
        description: 'Imported from PluralKit: members and groups that were public there',
        icon: '🌐',
      },
    ]);
    expect(bundle.defaults).toEqual({ members: [], groups: [], fields: [] });
    expect(bundle.fields).toEqual([]);
    expect(bundle.notes).toEqual([]);
  });

  it('maps a member with everything set; webhook_avatar_url equal to avatar_url is not repeated', () => {
    expect(bundle.members[0]).toEqual({
      ref: member(ASH),
      name: 'Ash',
      displayName: 'Ash 🌿',
      pronouns: 'she/her',
      description: 'Host-ish. Handles work, mail and most of the cooking.',
      aboutTags: [],
      archived: false,
      extra: {
        hid: 'qmzxa',
        color: '#a3c4f3',
        avatarUrl: 'https://cdn.pluralkit.me/avatars/qmzxa/9b1d0e44.webp',
        bannerUrl: 'https://cdn.pluralkit.me/banners/qmzxa/77aa01f3.webp',
        birthday: '1997-08-21',
        proxyTags: [
          { prefix: 'a:', suffix: null },
          { prefix: '[', suffix: ']' },
        ],
        keepProxy: false,
        tts: false,
        autoproxyEnabled: true,
        messageCount: 18204,
        created: '2020-03-14T17:05:12Z',
        privacy: {
          visibility: 'public',
          name_privacy: 'public',
          description_privacy: 'private',
          banner_privacy: 'public',
          birthday_privacy: 'private',
          pronoun_privacy: 'public',
          avatar_privacy: 'public',
          metadata_privacy: 'private',
          proxy_privacy: 'public',
        },
      },
      buckets: ['public'],
      fields: [],
    });
  });

  it('keeps a different webhook avatar, lower-cases the colour, omits null keys, leaves unset texts empty', () => {
    const birch = bundle.members[1];
    expect(birch).toMatchObject({ ref: member(BIRCH), name: 'Birch', displayName: '', description: '' });
    expect(birch?.extra).toEqual({
      hid: 'kdpwrn',
      color: '#ff8800',
      avatarUrl: 'https://cdn.pluralkit.me/avatars/kdpwrn/c0ffee12.webp',
      webhookAvatarUrl: 'https://cdn.pluralkit.me/avatars/kdpwrn/proxy-only.webp',
      birthday: '--02-29',
      proxyTags: [{ prefix: null, suffix: '-b' }],
      keepProxy: true,
      tts: false,
      autoproxyEnabled: false,
      messageCount: 311,
      created: '2024-06-02T10:41:09.512Z',
      privacy: expect.objectContaining({ visibility: 'private' }),
    });
    const cinder = bundle.members[2];
    expect(cinder?.pronouns).toBe('');
    expect(Object.keys(cinder?.extra ?? {})).toEqual([
      'hid',
      'birthday',
      'proxyTags',
      'keepProxy',
      'tts',
      'autoproxyEnabled',
      'messageCount',
      'created',
      'privacy',
    ]);
    expect(cinder?.extra.proxyTags).toEqual([]);
    // An empty suffix is no suffix.
    expect(bundle.members[3]?.extra.proxyTags).toEqual([{ prefix: 'd;', suffix: null }]);
  });

  it('writes birthdays as YYYY-MM-DD, or --MM-DD for the hidden years 0004 and 0001', () => {
    expect(bundle.members.map((m) => m.extra.birthday)).toEqual([
      '1997-08-21',
      '--02-29', // 0004-02-29
      '--11-05', // 0001-11-05
      undefined, // null
      '2003-12-01',
    ]);
  });

  it('puts a member in Public by its visibility: "public" and null yes, "private" and "" no', () => {
    expect(
      bundle.members.map((m) => [
        m.name.slice(0, 6),
        m.extra.privacy && (m.extra.privacy as { visibility: unknown }).visibility,
        m.buckets,
      ]),
    ).toEqual([
      ['Ash', 'public', ['public']],
      ['Birch', 'private', []],
      ['Cinder', null, ['public']],
      ['Dove', '', []],
      ['Wren-o', 'public', ['public']],
    ]);
  });

  it('cuts a name over 80 characters, with a warning', () => {
    const wren = bundle.members[4];
    expect(wren?.name).toBe('Wren-of-the-Quiet-Hours, who keeps the lamp lit between the last train and the f');
    expect([...(wren?.name ?? '')]).toHaveLength(80);
    expect(warningsOf(bundle, 'members')).toEqual([
      { collection: 'members', sourceId: WREN, message: 'name cut to 80 characters' },
    ]);
  });

  it('maps groups: members by normalised hid, unknown ones dropped, fields it cannot keep named', () => {
    expect(bundle.groups).toEqual([
      {
        ref: { collection: 'groups', id: FRONT_DESK },
        name: 'Front Desk',
        description: 'Who usually handles work and errands.',
        color: '#e0b040',
        parent: null,
        // "qmzxa", "KDPWRN", "YFG-TQC"
        members: [member(ASH), member(BIRCH), member(DOVE)],
        buckets: ['public'],
      },
      {
        ref: { collection: 'groups', id: LITTLES },
        name: 'Littles',
        description: expect.any(String),
        color: null,
        parent: null,
        // "bhxjd", "zzzzz" (unknown), "BHXJD" (the same member again)
        members: [member(CINDER)],
        buckets: [],
      },
    ]);
    const description = bundle.groups[1]?.description ?? '';
    expect(description).toHaveLength(500);
    expect(description.endsWith('leave a note in the system cha')).toBe(true);
    expect(warningsOf(bundle, 'groups')).toEqual([
      { collection: 'groups', sourceId: FRONT_DESK, message: 'group fields not kept: icon' },
      {
        collection: 'groups',
        sourceId: LITTLES,
        message: 'dropped from the group, not among the members imported: zzzzz',
      },
      { collection: 'groups', sourceId: LITTLES, message: 'group fields not kept: display_name, banner' },
      { collection: 'groups', sourceId: LITTLES, message: 'description cut to 500 characters' },
    ]);
  });

  it('turns the switches into sessions, oldest first, the newest switch’s members still fronting', () => {
    // The file's switches, oldest first:
    //   01-10 08:00:00      Ash
    //   01-10 12:30:15.5    Birch, Ash
    //   01-11 02:14:07.123  nobody
    //   01-11 09:45:00.123456 Dove  } same timestamp: one switch
    //   01-11 09:45:00.123456 Cinder }
    //   01-12 18:20:33.987654321 Cinder, Ash, xqqqq (not a member)
    //   01-13 07:00:00.25   Ash
    //   01-14 21:05:41      Ash, Wren
    expect(bundle.sessions).toEqual([
      session(ASH, '2024-01-10T08:00:00.000Z', '2024-01-11T02:14:07.123Z'),
      session(BIRCH, '2024-01-10T12:30:15.500Z', '2024-01-11T02:14:07.123Z'),
      session(CINDER, '2024-01-11T09:45:00.123Z', '2024-01-13T07:00:00.250Z'),
      session(DOVE, '2024-01-11T09:45:00.123Z', '2024-01-12T18:20:33.987Z'),
      session(ASH, '2024-01-12T18:20:33.987Z', null),
      session(WREN, '2024-01-14T21:05:41.000Z', null),
    ]);
  });

  it('leaves a switch member that is not among the members out of that switch, with a warning', () => {
    expect(warningsOf(bundle, 'switches')).toEqual([
      {
        collection: 'switches',
        sourceId: '2024-01-12T18:20:33.987Z',
        message: 'left out of this switch, not among the members imported: xqqqq',
      },
    ]);
  });

  it('reports accounts, the webhook and the config as skipped, the webhook URL nowhere', () => {
    expect(bundle.tally).toEqual({
      system: { skipped: 0, failed: 0 },
      members: { skipped: 0, failed: 0 },
      groups: { skipped: 0, failed: 0 },
      switches: { skipped: 0, failed: 0 },
      accounts: { skipped: 2, failed: 0 },
      webhook_url: { skipped: 1, failed: 0 },
      config: { skipped: 1, failed: 0 },
    });
    expect(bundle.warnings.slice(0, 3)).toEqual([
      { collection: 'accounts', sourceId: null, message: 'Discord account links are not imported' },
      {
        collection: 'webhook_url',
        sourceId: null,
        message: 'the dispatch webhook is not imported: register a webhook on this server instead',
      },
      { collection: 'system', sourceId: null, message: 'system fields not kept: pronouns, banner' },
    ]);
    expect(bundle.warnings).toHaveLength(3 + 1 + 4 + 1);
    expect(JSON.stringify(bundle)).not.toContain('hooks.example.net');
  });

  it('keeps no Discord id: JSON.parse would round them, the parser never hands one on', () => {
    // What plain JSON.parse makes of the file: 1234567890123456789 is not a double.
    const plain = JSON.parse(V2) as { accounts: number[] };
    expect(Number.isSafeInteger(plain.accounts[1])).toBe(false);
    expect(String(plain.accounts[1])).toBe('1234567890123456800');
    expect(String(plain.accounts[0])).toBe('466378653216014340');

    const numbers: number[] = [];
    const walk = (value: unknown): void => {
      if (typeof value === 'number') numbers.push(value);
      else if (value !== null && typeof value === 'object') Object.values(value).forEach(walk);
    };
    walk(bundle);
    expect(numbers.every((n) => Number.isSafeInteger(n) && n < 1e13)).toBe(true);
    const text = JSON.stringify(bundle);
    for (const digits of ['46637865321601', '12345678901234']) expect(text).not.toContain(digits);
  });

  it('reports no accounts when the list is empty', () => {
    const bundle = parsePluralKit(pk({ accounts: [] }));
    expect(bundle.tally.accounts).toEqual({ skipped: 0, failed: 0 });
    expect(bundle.warnings).toEqual([]);
  });

  it('gives the same bundle for the same file', () => {
    expect(parsePluralKit(V2)).toEqual(parsePluralKit(V2));
    expect(parsePluralKit(V1)).toEqual(parsePluralKit(V1));
  });
});

describe('version 1 file', () => {
  const bundle = parsePluralKit(V1);

  it('maps the system; top-level timezone and privacy keys are not imported', () => {
    expect(bundle.system).toEqual({
      name: 'Greenhouse',
      description: 'three of us, probably',
      tag: '🌱',
      avatarUrl: 'https://cdn.discordapp.com/attachments/574681536289882123/689120457733259264/greenhouse.png',
      color: null,
    });
    expect(bundle.tally).toEqual({
      system: { skipped: 0, failed: 0 },
      members: { skipped: 0, failed: 0 },
      groups: { skipped: 0, failed: 0 },
      switches: { skipped: 0, failed: 0 },
      accounts: { skipped: 1, failed: 0 },
      config: { skipped: 1, failed: 0 },
    });
    expect(bundle.warnings).toEqual([
      { collection: 'accounts', sourceId: null, message: 'Discord account links are not imported' },
    ]);
    expect(bundle.groups).toEqual([]);
  });

  it('keys members by hid (no uuid), prefix/suffix as one proxy tag, member-level privacy keys collected', () => {
    expect(bundle.members).toEqual([
      {
        ref: member('hjkrs'),
        name: 'Juniper',
        displayName: 'Juni',
        pronouns: 'she/her',
        description: "Hi! I'm usually around in the evenings.",
        aboutTags: [],
        archived: false,
        extra: {
          hid: 'hjkrs',
          color: '#5b8c5a',
          avatarUrl: 'https://cdn.discordapp.com/attachments/574681536289882123/689120533871271956/juni.png',
          birthday: '--04-12',
          proxyTags: [{ prefix: 'j:', suffix: null }],
          keepProxy: false,
          messageCount: 2043,
          created: '2019-05-02T11:23:45.123456Z',
          privacy: {
            visibility: 'public',
            name_privacy: 'public',
            description_privacy: 'public',
            avatar_privacy: 'public',
            birthday_privacy: 'private',
            pronoun_privacy: 'public',
            metadata_privacy: 'private',
          },
        },
        buckets: ['public'],
        fields: [],
      },
      {
        ref: member('vbnmq'),
        name: 'Moss',
        displayName: '',
        pronouns: 'he/him',
        description: '',
        aboutTags: [],
        archived: false,
        extra: {
          hid: 'vbnmq',
          birthday: '1999-10-31',
          proxyTags: [{ prefix: '{', suffix: '}' }],
          keepProxy: true,
          messageCount: 87,
          created: '2019-05-02T11:31:02Z',
          privacy: {
            visibility: 'private',
            name_privacy: 'public',
            description_privacy: 'private',
            avatar_privacy: 'public',
            birthday_privacy: 'public',
            pronoun_privacy: 'public',
            metadata_privacy: 'public',
          },
        },
        buckets: [],
        fields: [],
      },
      {
        ref: member('plokm'),
        name: 'Sable',
        displayName: '',
        pronouns: '',
        description: '',
        aboutTags: [],
        archived: false,
        // prefix and suffix both null: no tag; no privacy keys: public.
        extra: { hid: 'plokm', proxyTags: [], keepProxy: false, messageCount: 0, created: '2019-11-17T02:40:19.9Z' },
        buckets: ['public'],
        fields: [],
      },
    ]);
  });

  it('turns its switches into sessions', () => {
    expect(bundle.sessions).toEqual([
      session('hjkrs', '2020-01-03T22:00:00.000Z', '2020-01-05T19:00:00.500Z'),
      session('vbnmq', '2020-01-04T10:15:30.123Z', null),
    ]);
  });

  it('reads a version-1 privacy string as the level of every privacy key, as PluralKit does', () => {
    const bundle = parsePluralKit(
      JSON.stringify({
        version: 1,
        id: 'sysaa',
        members: [{ id: 'aaaaa', name: 'A', privacy: 'private' }],
        switches: [],
      }),
    );
    expect(bundle.members[0]?.buckets).toEqual([]);
    expect(bundle.members[0]?.extra.privacy).toEqual({
      visibility: 'private',
      name_privacy: 'private',
      description_privacy: 'private',
      avatar_privacy: 'private',
      birthday_privacy: 'private',
      pronoun_privacy: 'private',
      metadata_privacy: 'private',
    });
  });
});

describe('files it refuses', () => {
  const refused = (text: string) => {
    try {
      parsePluralKit(text);
    } catch (error) {
      expect(error).toBeInstanceOf(ImportFormatError);
      return (error as Error).message;
    }
    throw new Error('parsePluralKit accepted the file');
  };

  it('refuses text that is not JSON, or not a JSON object', () => {
    expect(refused('{"version": 2, "members": [')).toMatch(/^not a PluralKit export: the file is not valid JSON/);
    expect(refused('')).toMatch(/not valid JSON/);
    for (const text of ['[]', 'null', '"system"', '2']) {
      expect(refused(text)).toBe('not a PluralKit export: the file is not a JSON object');
    }
  });

  it('names a Tupperbox or a Simply Plural file as such', () => {
    expect(refused(JSON.stringify({ tuppers: [], groups: [] }))).toBe(
      'this is a Tupperbox export, not a PluralKit one: import it with a Tupperbox importer',
    );
    expect(refused(JSON.stringify({ members: [], frontHistory: [], customFronts: [], users: [] }))).toBe(
      'this is a Simply Plural export, not a PluralKit one: import it as Simply Plural',
    );
  });

  it('refuses a version other than 1 or 2', () => {
    for (const version of [3, 0, '2', null, undefined]) {
      expect(refused(pk({ version }))).toBe('not a PluralKit export this importer knows: "version" must be 1 or 2');
    }
  });

  it('refuses a file whose members are missing or not a list', () => {
    for (const members of [undefined, null, {}, 'aaaaa']) {
      expect(refused(pk({ members }))).toBe('not a PluralKit export: "members" is not a list');
    }
  });

  it('refuses more than 1 000 000 switches', () => {
    const text = pk({ switches: [] }).replace('"switches":[]', `"switches":[${'0,'.repeat(1_000_000)}0]`);
    expect(refused(text)).toBe('too many switches: 1000001, more than 1000000');
  });
});

describe('entries it fails without refusing the file', () => {
  it('fails a member without a name, or without uuid and id, and keeps the first of two with the same uuid or hid', () => {
    const bundle = parsePluralKit(
      pk({
        members: [
          { id: 'aaaaa', uuid: 'u-1', name: 'A' },
          { id: 'bbbbb', uuid: 'u-2', name: '' },
          { id: 'ccccc', uuid: 'u-3' },
          { id: 'AAAAA', uuid: 'u-4', name: 'A again by hid' },
          { id: 'ddddd', uuid: 'u-1', name: 'A again by uuid' },
          { name: 'No ids' },
          'not a member',
          { id: 'eee-ee', name: 'Hid only' },
        ],
      }),
    );
    expect(bundle.members.map((m) => [m.ref.id, m.name])).toEqual([
      ['u-1', 'A'],
      ['eeeee', 'Hid only'],
    ]);
    expect(bundle.tally.members).toEqual({ skipped: 0, failed: 6 });
    expect(warningsOf(bundle, 'members')).toEqual([
      { collection: 'members', sourceId: 'u-2', message: 'member has no name: not imported' },
      { collection: 'members', sourceId: 'u-3', message: 'member has no name: not imported' },
      {
        collection: 'members',
        sourceId: 'u-4',
        message: 'another member of the file has the same uuid or id: not imported',
      },
      {
        collection: 'members',
        sourceId: 'u-1',
        message: 'another member of the file has the same uuid or id: not imported',
      },
      { collection: 'members', sourceId: null, message: 'member 6 in the file has neither uuid nor id: not imported' },
      { collection: 'members', sourceId: null, message: 'member 7 in the file is not an object: not imported' },
    ]);
  });

  it('puts a member with an unknown visibility in no bucket, with a warning', () => {
    const bundle = parsePluralKit(
      pk({ members: [{ id: 'aaaaa', uuid: 'u-1', name: 'A', privacy: { visibility: 'Public' } }] }),
    );
    expect(bundle.members[0]?.buckets).toEqual([]);
    expect(bundle.warnings).toEqual([
      {
        collection: 'members',
        sourceId: 'u-1',
        message: 'visibility "Public" is neither public nor private: treated as private',
      },
    ]);
  });

  it('does not keep a colour or a birthday it cannot read', () => {
    const bundle = parsePluralKit(
      pk({
        members: [{ id: 'aaaaa', uuid: 'u-1', name: 'A', color: 'red', birthday: '2023-02-29', message_count: '5' }],
      }),
    );
    expect(bundle.members[0]?.extra).toEqual({ hid: 'aaaaa' });
    expect(bundle.warnings.map((w) => w.message)).toEqual([
      'color is not 6 hex digits: not kept',
      'birthday is not a YYYY-MM-DD date: not kept',
    ]);
  });

  it('fails a switch whose timestamp is not YYYY-MM-DDTHH:MM:SS[.fraction]Z, and nothing else', () => {
    const bad = [
      '2024-01-10 08:00:00Z',
      '2024-01-10T08:00:00',
      '2024-01-10T08:00:00+00:00',
      '2024-01-10T08:00:00.1234567890Z',
      '2024-02-30T08:00:00Z',
      '2024-01-10T24:00:00Z',
      '1704873600000',
    ];
    const bundle = parsePluralKit(
      pk({
        switches: [
          { timestamp: '2024-01-10T09:00:00.9999999Z', members: [] },
          ...bad.map((timestamp) => ({ timestamp, members: ['aaaaa'] })),
          { timestamp: 1704873600000, members: ['aaaaa'] },
          { timestamp: '2024-01-10T08:00:00Z' },
          { timestamp: '2024-01-10T08:00:00Z', members: ['aaaaa'] },
        ],
      }),
    );
    expect(bundle.tally.switches).toEqual({ skipped: 0, failed: bad.length + 2 });
    expect(warningsOf(bundle, 'switches')[0]).toEqual({
      collection: 'switches',
      sourceId: null,
      message: 'switch 2 in the file has no YYYY-MM-DDTHH:MM:SS[.fraction]Z timestamp or no members list: not imported',
    });
    // The fraction is cut to ms, not rounded up to the next second.
    expect(bundle.sessions).toEqual([
      session('aaaaaaaa-0000-4000-8000-000000000001', '2024-01-10T08:00:00.000Z', '2024-01-10T09:00:00.999Z'),
    ]);
  });

  it('fails a switch with more than 100 members, and only that switch', () => {
    const many = Array.from({ length: 101 }, () => 'aaaaa');
    const bundle = parsePluralKit(
      pk({
        switches: [
          { timestamp: '2024-01-03T00:00:00Z', members: [] },
          { timestamp: '2024-01-02T00:00:00Z', members: many },
          { timestamp: '2024-01-01T00:00:00Z', members: many.slice(1) },
        ],
      }),
    );
    expect(bundle.tally.switches).toEqual({ skipped: 0, failed: 1 });
    expect(warningsOf(bundle, 'switches')).toEqual([
      {
        collection: 'switches',
        sourceId: '2024-01-02T00:00:00.000Z',
        message: 'switch has 101 members, more than 100: not imported',
      },
    ]);
    expect(bundle.sessions).toEqual([
      session('aaaaaaaa-0000-4000-8000-000000000001', '2024-01-01T00:00:00.000Z', '2024-01-03T00:00:00.000Z'),
    ]);
  });

  it('keeps the newest 100 000 switches of a file with more, and fails the older ones', () => {
    const start = Date.UTC(2020, 0, 1);
    const timestamp = (i: number) => new Date(start + i * 60_000).toISOString().replace('.000Z', 'Z');
    // Newest first; the three oldest name the member, the others nobody.
    const switches = Array.from({ length: 100_002 }, (_, n) => {
      const i = 100_001 - n;
      return { timestamp: timestamp(i), members: i < 3 ? ['aaaaa'] : [] };
    });
    const bundle = parsePluralKit(pk({ switches }));
    expect(bundle.tally.switches).toEqual({ skipped: 0, failed: 2 });
    expect(warningsOf(bundle, 'switches')).toEqual([
      {
        collection: 'switches',
        sourceId: null,
        message: 'the file has more than 100000 switches: the 2 oldest are not imported',
      },
    ]);
    expect(bundle.sessions).toEqual([
      session(
        'aaaaaaaa-0000-4000-8000-000000000001',
        new Date(start + 2 * 60_000).toISOString(),
        new Date(start + 3 * 60_000).toISOString(),
      ),
    ]);
  });

  it('fails a group without a name and keeps the first of two with the same uuid or hid', () => {
    const bundle = parsePluralKit(
      pk({
        groups: [
          { id: 'ggggg', uuid: 'g-1', name: 'G', members: ['aaaaa'], privacy: { visibility: null } },
          { id: 'hhhhh', uuid: 'g-2', name: null },
          { id: 'GGGGG', uuid: 'g-3', name: 'G again' },
        ],
      }),
    );
    expect(bundle.groups).toEqual([
      {
        ref: { collection: 'groups', id: 'g-1' },
        name: 'G',
        description: '',
        color: null,
        parent: null,
        members: [member('aaaaaaaa-0000-4000-8000-000000000001')],
        buckets: ['public'],
      },
    ]);
    expect(bundle.tally.groups).toEqual({ skipped: 0, failed: 2 });
  });
});

describe('limits', () => {
  it('fails a file with more members or groups than an import takes, before reading them', () => {
    const many = (n: number) => Array.from({ length: n }, (_, i) => ({ id: `m${i}`, name: `M${i}` }));
    expect(() => parsePluralKit(pk({ members: many(20_001) }))).toThrow(
      new ImportFormatError(
        'The file is too large to import: it holds 20001 members, more than the 20000 an import takes',
      ),
    );
    expect(() => parsePluralKit(pk({ members: [], groups: many(20_001) }))).toThrow(/holds 20001 groups/);
    expect(parsePluralKit(pk({ members: many(20_000) })).members).toHaveLength(20_000);
  });

  it('cuts a 10 MB name to 80 characters with a warning', () => {
    const name = 'N'.repeat(10 * 1024 * 1024);
    const bundle = parsePluralKit(pk({ members: [{ id: 'aaaaa', uuid: 'u-1', name }] }));
    expect(bundle.members[0]?.name).toBe('N'.repeat(80));
    expect(bundle.warnings).toEqual([{ collection: 'members', sourceId: 'u-1', message: 'name cut to 80 characters' }]);
    expect(JSON.stringify(bundle).length).toBeLessThan(2000);
  });

  it('counts code points, never splitting one, and cuts display name, pronouns and description', () => {
    const bundle = parsePluralKit(
      pk({
        members: [
          {
            id: 'aaaaa',
            uuid: 'u-1',
            name: '🌿'.repeat(81),
            display_name: 'é'.repeat(80),
            pronouns: 'x'.repeat(81),
            description: 'd'.repeat(5001),
          },
        ],
      }),
    );
    const [cut] = bundle.members;
    expect(cut?.name).toBe('🌿'.repeat(80));
    expect(cut?.displayName).toBe('é'.repeat(80));
    expect(cut?.pronouns).toHaveLength(80);
    expect(cut?.description).toHaveLength(5000);
    expect(bundle.warnings.map((w) => w.message)).toEqual([
      'name cut to 80 characters',
      'pronouns cut to 80 characters',
      'description cut to 5000 characters',
    ]);
  });
});

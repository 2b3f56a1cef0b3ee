import { describe, expect, it } from 'vitest';
import type { components } from '../client/index.ts';
import { jsonHeaders, useServer, type TestUser } from './helpers/server.ts';
import { codeAndMessage } from './helpers/errors.ts';
import { captureStatements, REQUEST_WORK } from './helpers/plans.ts';

let now = 1_800_000_000_000;
const server = useServer({ clock: () => now });

type Resolved = components['schemas']['ResolvedTerminology'];

// The documented product defaults (openapi.yaml: TerminologyTerms, TerminologyActions, TerminologyIconId).
const DEFAULT_TERMS = {
  member: { singular: 'Member', plural: 'Members' },
  group: { singular: 'Group', plural: 'Groups' },
  folder: { singular: 'Group', plural: 'Groups' },
  system: { singular: 'System', plural: 'Systems' },
  front: { singular: 'Front', plural: 'Fronts' },
  friend: { singular: 'Friend', plural: 'Friends' },
  note: { singular: 'Note', plural: 'Notes' },
  privacyBucket: { singular: 'Privacy Bucket', plural: 'Privacy Buckets' },
  customField: { singular: 'Custom Field', plural: 'Custom Fields' },
  sideSystem: { singular: 'Side System', plural: 'Side Systems' },
  subSystem: { singular: 'Sub System', plural: 'Sub Systems' },
};
const DEFAULT_ACTIONS = {
  archiveMember: 'Archive Member',
  archivedMembers: 'Archived Members',
  trash: 'Trash',
  deleteMember: 'Delete Member',
  permanentlyDeleteMember: 'Permanently Delete Member',
  unarchiveMember: 'Unarchive Member',
  restoreFromTrash: 'Restore From Trash',
  mostFronted: 'Most Fronted',
};
const DEFAULT_ICONS = { trash: 'fa-tombstone-blank' };
const DEFAULTS = { terms: DEFAULT_TERMS, actions: DEFAULT_ACTIONS, icons: DEFAULT_ICONS };

const UNKNOWN_ID = '00000000-0000-4000-8000-00000000dead';

/** Full labels: the defaults with some terms, actions or icons replaced. */
function labels(
  terms: Partial<Record<keyof typeof DEFAULT_TERMS, { singular: string; plural: string }>> = {},
  actions: Partial<typeof DEFAULT_ACTIONS> = {},
  icons: Partial<typeof DEFAULT_ICONS> = {},
) {
  return {
    terms: { ...DEFAULT_TERMS, ...terms },
    actions: { ...DEFAULT_ACTIONS, ...actions },
    icons: { ...DEFAULT_ICONS, ...icons },
  };
}

async function activeSide(user: TestUser): Promise<string> {
  const { data } = await user.api.GET('/api/v1/systems');
  return data!.active.sideSystemId;
}

async function createSide(user: TestUser, name = 'Other side'): Promise<string> {
  const { data, error } = await user.api.POST('/api/v1/systems/side-systems', { body: { name } });
  if (!data) throw new Error(`createSide failed: ${JSON.stringify(error)}`);
  return data._id;
}

async function createSub(user: TestUser, sideSystemId: string, name = 'Littles'): Promise<string> {
  const member = await user.api.POST('/api/v1/members', { body: { name: `${name} host`, sideSystemId } });
  if (!member.data) throw new Error(`createMember failed: ${JSON.stringify(member.error)}`);
  const { data, error } = await user.api.POST('/api/v1/systems/sub-systems', {
    body: { name, sideSystemId, linkedMemberId: member.data.id },
  });
  if (!data) throw new Error(`createSub failed: ${JSON.stringify(error)}`);
  return data._id;
}

/** The override rows the database holds for an account, read directly. */
async function overrideRows(userId: string) {
  const rows = await server.deps.db
    .knex('terminology_overrides')
    .where({ user_id: userId })
    .select('side_system_id', 'sub_system_id', 'terms', 'actions', 'icons');
  return rows as Array<{
    side_system_id: string;
    sub_system_id: string | null;
    terms: unknown;
    actions: unknown;
    icons: unknown;
  }>;
}

async function resolved(
  user: TestUser,
  query: { sideSystemId?: string; subSystemId?: string } = {},
): Promise<Resolved> {
  const { data, error, response } = await user.api.GET('/api/v1/terminology/resolved', { params: { query } });
  if (response.status !== 200 || !data) throw new Error(`resolved failed: ${response.status} ${JSON.stringify(error)}`);
  return data;
}

function pick(doc: { terms: unknown; actions: unknown; icons: unknown }) {
  return { terms: doc.terms, actions: doc.actions, icons: doc.icons };
}

async function raw(
  apiKey: string,
  method: string,
  path: string,
  body: unknown,
): Promise<{ status: number; body: { code: string; message: string } }> {
  const res = await server.fetch(path, { method, headers: jsonHeaders(apiKey), body: JSON.stringify(body) });
  return { status: res.status, body: await res.json() };
}

describe('GET /terminology', () => {
  it('answers 200 with JSON null until the document is first saved', async () => {
    const { api, apiKey } = await server.user();
    const { data, response } = await api.GET('/api/v1/terminology');
    expect(response.status).toBe(200);
    expect(data).toBeNull();
    const res = await server.fetch('/api/v1/terminology', { headers: jsonHeaders(apiKey) });
    expect(res.headers.get('content-type')).toMatch(/^application\/json/);
    expect(await res.text()).toBe('null');
  });

  it('is per account', async () => {
    const a = await server.user();
    const b = await server.user();
    await a.api.PATCH('/api/v1/terminology', { body: { member: { singular: 'Headmate' } } });
    expect((await b.api.GET('/api/v1/terminology')).data).toBeNull();
    expect((await a.api.GET('/api/v1/terminology')).data?.userId).toBe(a.userId);
  });

  it('works with a read-only terminology key, which cannot write', async () => {
    const { api } = await server.user({ scopes: { terminology: 'read', systems: 'read' } });
    expect((await api.GET('/api/v1/terminology')).response.status).toBe(200);
    expect((await api.GET('/api/v1/terminology/resolved')).response.status).toBe(200);
    const write = await api.PATCH('/api/v1/terminology', { body: { member: { singular: 'Alter' } } });
    expect(write.response.status).toBe(403);
    expect(write.error).toEqual({
      code: 'FORBIDDEN',
      message: 'Missing API key scope: terminology requires read_write',
    });
  });
});

describe('PATCH /terminology', () => {
  it('creates the document from the defaults on first save, changing only the given labels', async () => {
    const { api, userId } = await server.user();
    now += 1000;
    const { data, response } = await api.PATCH('/api/v1/terminology', {
      body: { member: { singular: 'Headmate', plural: 'Headmates' } },
    });
    expect(response.status).toBe(200);
    expect(data).toEqual({
      _id: expect.stringMatching(/^[0-9a-f-]{36}$/),
      _creationTime: now,
      userId,
      ...labels({ member: { singular: 'Headmate', plural: 'Headmates' } }),
      updatedAt: now,
    });
    expect((await api.GET('/api/v1/terminology')).data).toEqual(data);
  });

  it('merges with the stored document: omitted keys, forms and actions keep their values', async () => {
    const { api, userId } = await server.user();
    now += 1000;
    const created = now;
    const first = await api.PATCH('/api/v1/terminology', {
      body: {
        member: { singular: 'Headmate', plural: 'Headmates' },
        actions: { trash: 'Bin', mostFronted: 'Top Fronters' },
        icons: { trash: 'fa-trash' },
      },
    });
    now += 5000;
    const second = await api.PATCH('/api/v1/terminology', {
      body: { member: { plural: 'Folks' }, note: { singular: 'Journal' }, actions: { trash: 'Compost' } },
    });
    expect(second.response.status).toBe(200);
    expect(second.data).toEqual({
      _id: first.data!._id,
      _creationTime: created,
      userId,
      ...labels(
        { member: { singular: 'Headmate', plural: 'Folks' }, note: { singular: 'Journal', plural: 'Notes' } },
        { trash: 'Compost', mostFronted: 'Top Fronters' },
        { trash: 'fa-trash' },
      ),
      updatedAt: now,
    });
    const third = await api.PATCH('/api/v1/terminology', { body: { icons: { trash: 'fa-tombstone-blank' } } });
    expect(pick(third.data!)).toEqual(
      labels(
        { member: { singular: 'Headmate', plural: 'Folks' }, note: { singular: 'Journal', plural: 'Notes' } },
        { trash: 'Compost', mostFronted: 'Top Fronters' },
      ),
    );
    expect((await api.GET('/api/v1/terminology')).data).toEqual(third.data);
  });

  it('trims labels and upper-cases the first letter of each word, keeping the rest as typed', async () => {
    const { api } = await server.user();
    const { data } = await api.PATCH('/api/v1/terminology', {
      body: {
        member: { singular: '  headmate ', plural: '\tlittle ones\n' },
        system: { singular: 'DID system', plural: 'mixed CASE words' },
        privacyBucket: { singular: 'circle  of   trust', plural: 'Circles' },
        actions: { restoreFromTrash: 'take out of the bin', archivedMembers: 'élan vital' },
      },
    });
    expect(data?.terms.member).toEqual({ singular: 'Headmate', plural: 'Little Ones' });
    expect(data?.terms.system).toEqual({ singular: 'DID System', plural: 'Mixed CASE Words' });
    expect(data?.terms.privacyBucket).toEqual({ singular: 'Circle  Of   Trust', plural: 'Circles' });
    expect(data?.actions.restoreFromTrash).toBe('Take Out Of The Bin');
    expect(data?.actions.archivedMembers).toBe('Élan Vital');
  });

  it('accepts 40 characters after trimming and refuses 41 with a 400 naming the field', async () => {
    const { api, apiKey } = await server.user();
    const forty = 'a'.repeat(40);
    const ok = await api.PATCH('/api/v1/terminology', {
      body: { member: { singular: forty }, actions: { trash: `   ${'b'.repeat(40)}   ` } },
    });
    expect(ok.response.status).toBe(200);
    expect(ok.data?.terms.member.singular).toBe(`A${'a'.repeat(39)}`);
    expect(ok.data?.actions.trash).toBe(`B${'b'.repeat(39)}`);

    const nounTooLong = await raw(apiKey, 'PATCH', '/api/v1/terminology', { member: { plural: 'a'.repeat(41) } });
    expect(nounTooLong).toEqual({
      status: 400,
      body: { code: 'BAD_REQUEST', message: 'member.plural must be at most 40 characters after trimming (got 41)' },
    });
    const actionTooLong = await raw(apiKey, 'PATCH', '/api/v1/terminology', {
      actions: { mostFronted: ` ${'x'.repeat(41)} ` },
    });
    expect(actionTooLong).toEqual({
      status: 400,
      body: {
        code: 'BAD_REQUEST',
        message: 'actions.mostFronted must be at most 40 characters after trimming (got 41)',
      },
    });
    // Nothing of a refused patch is applied, not even its valid parts.
    const mixed = await raw(apiKey, 'PATCH', '/api/v1/terminology', {
      note: { singular: 'Journal' },
      group: { singular: 'g'.repeat(41) },
    });
    expect(mixed.status).toBe(400);
    expect(mixed.body.message).toContain('group.singular');
    expect((await api.GET('/api/v1/terminology')).data).toEqual(ok.data);
  });

  it('loses no update when saves race, including the first one', async () => {
    const { api } = await server.user();
    const nouns = ['member', 'group', 'folder', 'system', 'front', 'friend', 'note', 'customField'] as const;
    const results = await Promise.all(
      nouns.map((noun) => api.PATCH('/api/v1/terminology', { body: { [noun]: { plural: `Many ${noun}` } } })),
    );
    expect(results.map((r) => r.response.status)).toEqual(nouns.map(() => 200));
    const { data } = await api.GET('/api/v1/terminology');
    for (const noun of nouns)
      expect(data?.terms[noun].plural).toBe(`Many ${noun.replace(/^./, (c) => c.toUpperCase())}`);
    expect(new Set(results.map((r) => r.data!._id))).toEqual(new Set([data!._id]));
  });

  it('costs one statement, first save or not: the document, merged under its row lock, and terminology.changed', async () => {
    const { api, userId } = await server.user();
    await api.GET('/api/v1/terminology'); // warms the key cache
    const knex = server.deps.db.knex;
    const bodies = [
      { member: { singular: 'Headmate' }, actions: { trash: 'Bin' } },
      { member: { plural: 'Folks' }, icons: { trash: 'fa-ghost' } },
    ];
    for (const body of bodies) {
      const statements = await captureStatements(knex, REQUEST_WORK, async () => {
        expect((await api.PATCH('/api/v1/terminology', { body })).response.status).toBe(200);
      });
      // One statement, outside any transaction (docs/data-access.md, "Writes in one statement").
      expect(
        statements.map((st) => st.sql.trim().split(/\s+/).slice(0, 3).join(' ')),
        JSON.stringify(statements.map((st) => st.sql)),
      ).toEqual(['with patch as']);
      expect(statements[0]!.sql).toMatch(/insert into terminology_settings[\s\S]*insert into events/);
    }
    expect(pick((await api.GET('/api/v1/terminology')).data!)).toEqual(
      labels({ member: { singular: 'Headmate', plural: 'Folks' } }, { trash: 'Bin' }, { trash: 'fa-ghost' }),
    );
    const { rows } = await knex.raw<{ rows: Array<{ data: unknown }> }>(
      `select data from events where account_id = ? and type = 'terminology.changed' order by id`,
      [userId],
    );
    expect(rows.map((r) => r.data)).toEqual([{ id: userId }, { id: userId }]);
  });

  it('keeps only the known, non-empty labels of a stored document when merging, as a read does', async () => {
    const { api, userId } = await server.user();
    await api.PATCH('/api/v1/terminology', { body: { member: { singular: 'Headmate' } } });
    // A document written before some keys existed or were checked: stale keys, empty and odd labels.
    await server.deps.db.knex.raw(
      `update terminology_settings set terms = terms || ?::jsonb, actions = ?::jsonb, icons = ?::jsonb where user_id = ?`,
      [
        JSON.stringify({ gone: { singular: 'Old' }, group: { singular: '', plural: 7 }, note: 'Journal' }),
        JSON.stringify({ trash: 'Bin', stale: 'Old' }),
        JSON.stringify({}),
        userId,
      ],
    );
    const read = (await api.GET('/api/v1/terminology')).data!;
    const { data } = await api.PATCH('/api/v1/terminology', { body: { front: { plural: 'Fronters' } } });
    expect(pick(data!)).toEqual({
      ...pick(read),
      terms: { ...read.terms, front: { singular: 'Front', plural: 'Fronters' } },
    });
    expect(pick(data!)).toEqual(
      labels(
        { member: { singular: 'Headmate', plural: 'Members' }, front: { singular: 'Front', plural: 'Fronters' } },
        {
          trash: 'Bin',
        },
      ),
    );
    const { rows } = await server.deps.db.knex.raw<{ rows: Array<{ terms: object; actions: object; icons: object }> }>(
      'select terms, actions, icons from terminology_settings where user_id = ?',
      [userId],
    );
    expect(rows[0]).toEqual(pick(data!));
  });

  it('creates nothing when the first save is refused', async () => {
    const { api, apiKey } = await server.user();
    expect((await raw(apiKey, 'PATCH', '/api/v1/terminology', { member: { singular: 'm'.repeat(41) } })).status).toBe(
      400,
    );
    expect((await api.GET('/api/v1/terminology')).data).toBeNull();
  });

  it('falls back to the default for an empty or blank label', async () => {
    const { api } = await server.user();
    await api.PATCH('/api/v1/terminology', {
      body: {
        member: { singular: 'Headmate', plural: 'Headmates' },
        folder: { singular: 'Folder', plural: 'Folders' },
        actions: { trash: 'Bin' },
      },
    });
    const { data } = await api.PATCH('/api/v1/terminology', {
      body: { member: { singular: '' }, folder: { plural: '   ' }, actions: { trash: '' } },
    });
    expect(pick(data!)).toEqual(
      labels({ member: { singular: 'Member', plural: 'Headmates' }, folder: { singular: 'Folder', plural: 'Groups' } }),
    );
    // On first save too.
    const fresh = await server.user();
    const first = await fresh.api.PATCH('/api/v1/terminology', { body: { front: { singular: '', plural: ' ' } } });
    expect(pick(first.data!)).toEqual(DEFAULTS);
  });

  it('takes the trash icon presets and other catalog ids', async () => {
    const { api } = await server.user();
    for (const icon of ['fa-trash', 'fa-tombstone-blank', 'fa-ghost', 'fa-user-group-2', `fa-${'a'.repeat(61)}`]) {
      const { data, response } = await api.PATCH('/api/v1/terminology', { body: { icons: { trash: icon } } });
      expect(response.status, icon).toBe(200);
      expect(data?.icons).toEqual({ trash: icon });
      expect((await api.GET('/api/v1/terminology')).data?.icons.trash).toBe(icon);
    }
  });

  it.each([
    '',
    'trash',
    'fa-',
    'fa-Trash',
    'fa-trash--can',
    'fa_trash',
    'fa-trash ',
    'FA-TRASH',
    `fa-${'a'.repeat(62)}`,
  ])('refuses the icon id %j with 400', async (icon) => {
    const { api, apiKey } = await server.user();
    await api.PATCH('/api/v1/terminology', { body: { icons: { trash: 'fa-trash' } } });
    const res = await raw(apiKey, 'PATCH', '/api/v1/terminology', { icons: { trash: icon } });
    expect(res.status).toBe(400);
    expect(res.body.code).toBe('BAD_REQUEST');
    expect(res.body.message).toContain('icons.trash');
    expect((await api.GET('/api/v1/terminology')).data?.icons.trash).toBe('fa-trash');
  });

  it.each([
    [{}, 'Request body must contain at least one field'],
    [{ members: { singular: 'Headmate' } }, "Unknown field 'members'"],
    [{ member: { singular: 'Headmate', gender: 'x' } }, "Unknown field 'member.gender'"],
    [{ actions: { fly: 'Fly' } }, "Unknown field 'actions.fly'"],
    [{ icons: { home: 'fa-house' } }, "Unknown field 'icons.home'"],
    [{ member: { singular: 5 } }, 'member.singular must be string'],
    [{ member: 'Headmate' }, 'member must be object'],
    [{ member: {} }, 'member must NOT have fewer than 1 properties'],
    [{ actions: {} }, 'actions must NOT have fewer than 1 properties'],
    [{ member: { singular: null } }, 'member.singular must be string'],
  ])('rejects %j with 400', async (body, message) => {
    const { api, apiKey } = await server.user();
    const res = await raw(apiKey, 'PATCH', '/api/v1/terminology', body);
    expect(res.status).toBe(400);
    expect(codeAndMessage(res.body)).toEqual({ code: 'BAD_REQUEST', message });
    expect((await api.GET('/api/v1/terminology')).data).toBeNull();
  });
});

describe('POST /terminology/reset', () => {
  it('creates the document with the defaults when none exists', async () => {
    const { api, userId } = await server.user();
    now += 1000;
    const { data, response } = await api.POST('/api/v1/terminology/reset');
    expect(response.status).toBe(200);
    expect(data).toEqual({ _id: expect.any(String), _creationTime: now, userId, ...DEFAULTS, updatedAt: now });
    expect((await api.GET('/api/v1/terminology')).data).toEqual(data);
  });

  it('restores every label and the icon, keeps the id and creation time, and leaves overrides alone', async () => {
    const { api, userId } = await server.user();
    const side = await activeSide({ api } as TestUser);
    now += 1000;
    const created = now;
    const first = await api.PATCH('/api/v1/terminology', {
      body: {
        member: { singular: 'Headmate', plural: 'Headmates' },
        friend: { singular: 'Pal', plural: 'Pals' },
        actions: { trash: 'Bin' },
        icons: { trash: 'fa-trash' },
      },
    });
    await api.PATCH('/api/v1/terminology/scoped', {
      body: { sideSystemId: side, terms: { note: { singular: 'Journal' } } },
    });
    now += 1000;
    const { data } = await api.POST('/api/v1/terminology/reset');
    expect(data).toEqual({ _id: first.data!._id, _creationTime: created, userId, ...DEFAULTS, updatedAt: now });
    expect(await overrideRows(userId)).toHaveLength(1);
    expect(pick(await resolved({ api } as TestUser, { sideSystemId: side }))).toEqual(
      labels({ note: { singular: 'Journal', plural: 'Notes' } }),
    );
  });
});

describe('GET /terminology/resolved', () => {
  it('fills in every default when nothing is stored', async () => {
    const user = await server.user();
    const side = await activeSide(user);
    const empty = {
      _id: 'resolved',
      _creationTime: null,
      userId: user.userId,
      ...DEFAULTS,
      updatedAt: null,
      hasSideOverride: false,
      hasSubOverride: false,
    };
    expect(await resolved(user)).toEqual({ ...empty, scope: { kind: 'global' } });
    expect(await resolved(user, { sideSystemId: side })).toEqual({
      ...empty,
      scope: { kind: 'side', sideSystemId: side },
    });
  });

  it('resolves global, then side, then sub', async () => {
    const user = await server.user();
    const { api } = user;
    const side = await activeSide(user);
    const sub = await createSub(user, side);
    now += 1000;
    const globalTime = now;
    await api.PATCH('/api/v1/terminology', {
      body: {
        member: { singular: 'Headmate', plural: 'Headmates' },
        note: { singular: 'Journal', plural: 'Journals' },
        actions: { trash: 'Bin' },
      },
    });
    now += 1000;
    await api.PATCH('/api/v1/terminology/scoped', {
      body: {
        sideSystemId: side,
        terms: {
          member: { singular: 'Alter', plural: 'Alters' },
          front: { singular: 'Switch' },
          actions: { trash: 'Skip' },
        },
      },
    });
    now += 1000;
    const subTime = now;
    await api.PATCH('/api/v1/terminology/scoped', {
      body: {
        sideSystemId: side,
        subSystemId: sub,
        terms: { member: { singular: 'Little' }, icons: { trash: 'fa-trash' } },
      },
    });

    const subDoc = await resolved(user, { sideSystemId: side, subSystemId: sub });
    expect(subDoc).toEqual({
      _id: 'resolved',
      _creationTime: globalTime,
      userId: user.userId,
      ...labels(
        {
          member: { singular: 'Little', plural: 'Alters' },
          front: { singular: 'Switch', plural: 'Fronts' },
          note: { singular: 'Journal', plural: 'Journals' },
        },
        { trash: 'Skip' },
        { trash: 'fa-trash' },
      ),
      updatedAt: subTime,
      scope: { kind: 'sub', sideSystemId: side, subSystemId: sub },
      hasSideOverride: true,
      hasSubOverride: true,
    });

    const sideDoc = await resolved(user, { sideSystemId: side });
    expect(sideDoc).toMatchObject({
      scope: { kind: 'side', sideSystemId: side },
      hasSideOverride: true,
      hasSubOverride: false,
      updatedAt: subTime - 1000,
    });
    expect(pick(sideDoc)).toEqual(
      labels(
        {
          member: { singular: 'Alter', plural: 'Alters' },
          front: { singular: 'Switch', plural: 'Fronts' },
          note: { singular: 'Journal', plural: 'Journals' },
        },
        { trash: 'Skip' },
      ),
    );
    // The literal `null` asks for the side layer only.
    expect(await resolved(user, { sideSystemId: side, subSystemId: 'null' })).toEqual(sideDoc);

    // A second side system without overrides sees the global labels.
    const other = await createSide(user);
    const otherDoc = await resolved(user, { sideSystemId: other });
    expect(pick(otherDoc)).toEqual(
      labels(
        { member: { singular: 'Headmate', plural: 'Headmates' }, note: { singular: 'Journal', plural: 'Journals' } },
        { trash: 'Bin' },
      ),
    );
    expect(otherDoc).toMatchObject({
      scope: { kind: 'side', sideSystemId: other },
      hasSideOverride: false,
      hasSubOverride: false,
      _creationTime: globalTime,
      updatedAt: globalTime,
    });
  });

  it('resolves the global labels when no query is given, whatever side or sub system is active', async () => {
    const user = await server.user();
    const { api } = user;
    const main = await activeSide(user);
    const other = await createSide(user, 'Second');
    const sub = await createSub(user, other);
    await api.PATCH('/api/v1/terminology', { body: { member: { singular: 'Headmate' } } });
    await api.PATCH('/api/v1/terminology/scoped', {
      body: { sideSystemId: main, terms: { member: { singular: 'Main One' } } },
    });
    await api.PATCH('/api/v1/terminology/scoped', {
      body: { sideSystemId: other, terms: { member: { singular: 'Second One' } } },
    });
    await api.PATCH('/api/v1/terminology/scoped', {
      body: { sideSystemId: other, subSystemId: sub, terms: { member: { plural: 'Sub Ones' } } },
    });
    const global = (await api.GET('/api/v1/terminology')).data!;
    const expected = {
      _id: 'resolved',
      _creationTime: global._creationTime,
      userId: user.userId,
      ...pick(global),
      updatedAt: global.updatedAt,
      scope: { kind: 'global' },
      hasSideOverride: false,
      hasSubOverride: false,
    };

    // The active side system has an override; the query-less read still ignores it.
    expect(await resolved(user)).toEqual(expected);
    expect((await resolved(user)).terms.member).toEqual({ singular: 'Headmate', plural: 'Members' });

    await api.PATCH('/api/v1/systems/active', { body: { sideSystemId: other, subSystemId: sub } });
    expect(await resolved(user)).toEqual(expected);
    await api.PATCH('/api/v1/systems/unified-view', { body: { enabled: true } });
    expect(await resolved(user)).toEqual(expected);

    // An explicit scope resolves its layers.
    expect((await resolved(user, { sideSystemId: main })).terms.member.singular).toBe('Main One');
    const onSub = await resolved(user, { sideSystemId: other, subSystemId: sub });
    expect(onSub).toMatchObject({
      scope: { kind: 'sub', sideSystemId: other, subSystemId: sub },
      hasSideOverride: true,
      hasSubOverride: true,
    });
    expect(onSub.terms.member).toEqual({ singular: 'Second One', plural: 'Sub Ones' });
  });

  it('is 404 for unknown, deleted or foreign side systems and for sub systems outside the side system', async () => {
    const user = await server.user();
    const stranger = await server.user();
    const side = await activeSide(user);
    const other = await createSide(user);
    const subOfOther = await createSub(user, other);
    const foreignSide = await activeSide(stranger);
    const foreignSub = await createSub(stranger, foreignSide);
    const deleted = await createSide(user, 'Gone');
    expect(
      (
        await user.api.DELETE('/api/v1/systems/side-systems/{sideSystemId}', {
          params: { path: { sideSystemId: deleted } },
        })
      ).response.status,
    ).toBe(200);

    const cases: Array<[{ sideSystemId: string; subSystemId?: string }, string]> = [
      [{ sideSystemId: UNKNOWN_ID }, 'Side system not found'],
      [{ sideSystemId: foreignSide }, 'Side system not found'],
      [{ sideSystemId: deleted }, 'Side system not found'],
      [{ sideSystemId: side, subSystemId: subOfOther }, 'Sub system not found in that side system'],
      [{ sideSystemId: side, subSystemId: UNKNOWN_ID }, 'Sub system not found in that side system'],
      [{ sideSystemId: foreignSide, subSystemId: foreignSub }, 'Side system not found'],
      [{ sideSystemId: side, subSystemId: foreignSub }, 'Sub system not found in that side system'],
    ];
    for (const [query, message] of cases) {
      const { response, error } = await user.api.GET('/api/v1/terminology/resolved', { params: { query } });
      expect(response.status, JSON.stringify(query)).toBe(404);
      expect(error).toEqual({ code: 'NOT_FOUND', message });
    }
    expect((await resolved(user, { sideSystemId: other, subSystemId: subOfOther })).scope).toEqual({
      kind: 'sub',
      sideSystemId: other,
      subSystemId: subOfOther,
    });
  });

  it('is 400 for subSystemId without sideSystemId and for malformed ids or unknown parameters', async () => {
    const user = await server.user();
    const side = await activeSide(user);
    const sub = await createSub(user, side);
    for (const subSystemId of [sub, 'null']) {
      const { response, error } = await user.api.GET('/api/v1/terminology/resolved', {
        params: { query: { subSystemId } },
      });
      expect(response.status).toBe(400);
      expect(error).toEqual({ code: 'BAD_REQUEST', message: 'subSystemId needs sideSystemId' });
    }
    for (const query of [
      'sideSystemId=not-a-uuid',
      `sideSystemId=${side}&subSystemId=nil`,
      `sideSystemId=${side}&scope=side`,
    ]) {
      const res = await server.fetch(`/api/v1/terminology/resolved?${query}`, { headers: jsonHeaders(user.apiKey) });
      expect(res.status, query).toBe(400);
      expect((await res.json()).code).toBe('BAD_REQUEST');
    }
  });
});

describe('PATCH /terminology/scoped', () => {
  it('stores only the labels that differ from the global ones', async () => {
    const user = await server.user();
    const { api, userId } = user;
    const side = await activeSide(user);
    await api.PATCH('/api/v1/terminology', {
      body: { member: { singular: 'Headmate', plural: 'Headmates' }, actions: { trash: 'Bin' } },
    });
    now += 1000;
    const { data, response } = await api.PATCH('/api/v1/terminology/scoped', {
      body: {
        sideSystemId: side,
        terms: {
          member: { singular: 'headmate', plural: 'alters' }, // singular equals the inherited label once normalised
          note: { singular: 'Note' }, // equals the default the global document holds
          actions: { trash: 'Bin', mostFronted: 'top fronters' },
          icons: { trash: 'fa-tombstone-blank' },
        },
      },
    });
    expect(response.status).toBe(200);
    expect(data).toMatchObject({
      _id: 'resolved',
      scope: { kind: 'side', sideSystemId: side },
      hasSideOverride: true,
      hasSubOverride: false,
      updatedAt: now,
      ...labels({ member: { singular: 'Headmate', plural: 'Alters' } }, { trash: 'Bin', mostFronted: 'Top Fronters' }),
    });
    expect(await overrideRows(userId)).toEqual([
      {
        side_system_id: side,
        sub_system_id: null,
        terms: { member: { plural: 'Alters' } },
        actions: { mostFronted: 'Top Fronters' },
        icons: {},
      },
    ]);
    expect(await resolved(user, { sideSystemId: side })).toEqual(data);
  });

  it('removes the override row once it equals the inherited labels, and never creates an empty one', async () => {
    const user = await server.user();
    const { api, userId } = user;
    const side = await activeSide(user);
    await api.PATCH('/api/v1/terminology', { body: { member: { singular: 'Headmate', plural: 'Headmates' } } });

    const same = await api.PATCH('/api/v1/terminology/scoped', {
      body: { sideSystemId: side, terms: { member: { singular: 'Headmate' }, icons: { trash: 'fa-tombstone-blank' } } },
    });
    expect(same.response.status).toBe(200);
    expect(same.data).toMatchObject({ hasSideOverride: false, hasSubOverride: false });
    expect(await overrideRows(userId)).toEqual([]);

    await api.PATCH('/api/v1/terminology/scoped', {
      body: { sideSystemId: side, terms: { member: { plural: 'Alters' }, icons: { trash: 'fa-trash' } } },
    });
    expect(await overrideRows(userId)).toHaveLength(1);
    const partly = await api.PATCH('/api/v1/terminology/scoped', {
      body: { sideSystemId: side, terms: { icons: { trash: 'fa-tombstone-blank' } } },
    });
    expect(partly.data).toMatchObject({ hasSideOverride: true, icons: { trash: 'fa-tombstone-blank' } });
    expect(await overrideRows(userId)).toEqual([
      { side_system_id: side, sub_system_id: null, terms: { member: { plural: 'Alters' } }, actions: {}, icons: {} },
    ]);

    const back = await api.PATCH('/api/v1/terminology/scoped', {
      body: { sideSystemId: side, terms: { member: { plural: 'Headmates' } } },
    });
    expect(back.data).toMatchObject({ hasSideOverride: false, hasSubOverride: false });
    expect(pick(back.data!)).toEqual(labels({ member: { singular: 'Headmate', plural: 'Headmates' } }));
    expect(await overrideRows(userId)).toEqual([]);
    expect((await resolved(user, { sideSystemId: side })).hasSideOverride).toBe(false);
  });

  it('clears a single override with an empty label, inheriting the layer below instead of the default', async () => {
    const user = await server.user();
    const { api, userId } = user;
    const side = await activeSide(user);
    await api.PATCH('/api/v1/terminology', { body: { member: { singular: 'Headmate' } } });
    await api.PATCH('/api/v1/terminology/scoped', {
      body: { sideSystemId: side, terms: { member: { singular: 'Alter' }, note: { singular: 'Journal' } } },
    });
    const { data } = await api.PATCH('/api/v1/terminology/scoped', {
      body: { sideSystemId: side, terms: { member: { singular: '  ' } } },
    });
    expect(data?.terms.member.singular).toBe('Headmate');
    expect(data?.terms.note.singular).toBe('Journal');
    expect(await overrideRows(userId)).toEqual([
      { side_system_id: side, sub_system_id: null, terms: { note: { singular: 'Journal' } }, actions: {}, icons: {} },
    ]);
    const cleared = await api.PATCH('/api/v1/terminology/scoped', {
      body: { sideSystemId: side, terms: { note: { singular: '' } } },
    });
    expect(cleared.data?.hasSideOverride).toBe(false);
    expect(await overrideRows(userId)).toEqual([]);
  });

  it('compares a sub system layer with global plus side, and keeps it apart from the side layer', async () => {
    const user = await server.user();
    const { api, userId } = user;
    const side = await activeSide(user);
    const sub = await createSub(user, side);
    await api.PATCH('/api/v1/terminology', { body: { member: { singular: 'Headmate', plural: 'Headmates' } } });
    await api.PATCH('/api/v1/terminology/scoped', {
      body: { sideSystemId: side, terms: { member: { singular: 'Alter' } } },
    });

    const inherited = await api.PATCH('/api/v1/terminology/scoped', {
      body: { sideSystemId: side, subSystemId: sub, terms: { member: { singular: 'Alter', plural: 'Headmates' } } },
    });
    expect(inherited.data).toMatchObject({
      scope: { kind: 'sub', sideSystemId: side, subSystemId: sub },
      hasSideOverride: true,
      hasSubOverride: false,
    });
    expect(await overrideRows(userId)).toHaveLength(1);

    // 'Member' differs from the inherited 'Alter' even though it is the product default.
    const own = await api.PATCH('/api/v1/terminology/scoped', {
      body: {
        sideSystemId: side,
        subSystemId: sub,
        terms: { member: { singular: 'Member', plural: 'Headmates' }, actions: { trash: 'Bin' } },
      },
    });
    expect(own.data).toMatchObject({ hasSideOverride: true, hasSubOverride: true });
    expect(own.data?.terms.member).toEqual({ singular: 'Member', plural: 'Headmates' });
    const rows = await overrideRows(userId);
    expect(rows).toHaveLength(2);
    expect(rows).toContainEqual({
      side_system_id: side,
      sub_system_id: null,
      terms: { member: { singular: 'Alter' } },
      actions: {},
      icons: {},
    });
    expect(rows).toContainEqual({
      side_system_id: side,
      sub_system_id: sub,
      terms: { member: { singular: 'Member' } },
      actions: { trash: 'Bin' },
      icons: {},
    });

    // The side layer does not see the sub layer's labels.
    expect((await resolved(user, { sideSystemId: side })).terms.member.singular).toBe('Alter');
    expect((await resolved(user, { sideSystemId: side })).actions.trash).toBe('Trash');

    // Back to the inherited labels: only the sub row goes.
    const gone = await api.PATCH('/api/v1/terminology/scoped', {
      body: { sideSystemId: side, subSystemId: sub, terms: { member: { singular: 'alter' }, actions: { trash: '' } } },
    });
    expect(gone.data).toMatchObject({ hasSideOverride: true, hasSubOverride: false });
    expect(await overrideRows(userId)).toEqual([
      { side_system_id: side, sub_system_id: null, terms: { member: { singular: 'Alter' } }, actions: {}, icons: {} },
    ]);
  });

  it('loses no update when scoped saves of one side system race', async () => {
    const user = await server.user();
    const side = await activeSide(user);
    const sub = await createSub(user, side);
    const nouns = ['member', 'group', 'note', 'friend'] as const;
    const writes = nouns.flatMap((noun) => [
      user.api.PATCH('/api/v1/terminology/scoped', {
        body: { sideSystemId: side, terms: { [noun]: { singular: `Side ${noun}` } } },
      }),
      user.api.PATCH('/api/v1/terminology/scoped', {
        body: { sideSystemId: side, subSystemId: sub, terms: { [noun]: { plural: `Sub ${noun}` } } },
      }),
    ]);
    expect((await Promise.all(writes)).map((r) => r.response.status)).toEqual(writes.map(() => 200));
    const doc = await resolved(user, { sideSystemId: side, subSystemId: sub });
    for (const noun of nouns) {
      expect(doc.terms[noun]).toEqual({
        singular: `Side ${noun.replace(/^./, (c) => c.toUpperCase())}`,
        plural: `Sub ${noun.replace(/^./, (c) => c.toUpperCase())}`,
      });
    }
    expect(await overrideRows(user.userId)).toHaveLength(2);
  });

  it('treats subSystemId null like an omitted one (the side layer)', async () => {
    const user = await server.user();
    const side = await activeSide(user);
    const { data } = await user.api.PATCH('/api/v1/terminology/scoped', {
      body: { sideSystemId: side, subSystemId: null, terms: { friend: { plural: 'Buddies' } } },
    });
    expect(data).toMatchObject({
      scope: { kind: 'side', sideSystemId: side },
      hasSideOverride: true,
      terms: { friend: { singular: 'Friend', plural: 'Buddies' } },
    });
    expect(await overrideRows(user.userId)).toEqual([
      { side_system_id: side, sub_system_id: null, terms: { friend: { plural: 'Buddies' } }, actions: {}, icons: {} },
    ]);
  });

  it('keeps overrides that a later global change happens to match', async () => {
    const user = await server.user();
    const side = await activeSide(user);
    await user.api.PATCH('/api/v1/terminology/scoped', {
      body: { sideSystemId: side, terms: { member: { singular: 'Alter' } } },
    });
    await user.api.PATCH('/api/v1/terminology', { body: { member: { singular: 'Alter' } } });
    await user.api.PATCH('/api/v1/terminology', { body: { member: { singular: 'Headmate' } } });
    const doc = await resolved(user, { sideSystemId: side });
    expect(doc.terms.member.singular).toBe('Alter');
    expect(doc.hasSideOverride).toBe(true);
  });

  it('applies the label rules, naming the field under terms', async () => {
    const user = await server.user();
    const side = await activeSide(user);
    const ok = await user.api.PATCH('/api/v1/terminology/scoped', {
      body: {
        sideSystemId: side,
        terms: { customField: { singular: '  trait  ', plural: 'c'.repeat(40) }, icons: { trash: 'fa-dumpster' } },
      },
    });
    expect(ok.data?.terms.customField).toEqual({ singular: 'Trait', plural: `C${'c'.repeat(39)}` });
    expect(ok.data?.icons.trash).toBe('fa-dumpster');
    const long = await raw(user.apiKey, 'PATCH', '/api/v1/terminology/scoped', {
      sideSystemId: side,
      terms: { member: { singular: 'm'.repeat(41) } },
    });
    expect(long).toEqual({
      status: 400,
      body: {
        code: 'BAD_REQUEST',
        message: 'terms.member.singular must be at most 40 characters after trimming (got 41)',
      },
    });
    const action = await raw(user.apiKey, 'PATCH', '/api/v1/terminology/scoped', {
      sideSystemId: side,
      terms: { actions: { trash: 't'.repeat(41) } },
    });
    expect(action.body.message).toBe('terms.actions.trash must be at most 40 characters after trimming (got 41)');
    const icon = await raw(user.apiKey, 'PATCH', '/api/v1/terminology/scoped', {
      sideSystemId: side,
      terms: { icons: { trash: 'dumpster' } },
    });
    expect(icon.status).toBe(400);
    expect(icon.body.message).toContain('terms.icons.trash');
    expect(await overrideRows(user.userId)).toEqual([
      {
        side_system_id: side,
        sub_system_id: null,
        terms: { customField: { singular: 'Trait', plural: `C${'c'.repeat(39)}` } },
        actions: {},
        icons: { trash: 'fa-dumpster' },
      },
    ]);
  });

  it.each([
    [
      (side: string) => ({ sideSystemId: side, terms: { member: { singular: 'A' } }, extra: true }),
      "Unknown field 'extra'",
    ],
    [
      (side: string) => ({ sideSystemId: side, terms: { members: { singular: 'A' } } }),
      "Unknown field 'terms.members'",
    ],
    [
      (side: string) => ({ sideSystemId: side, terms: { member: { singular: 'A', one: 'B' } } }),
      "Unknown field 'terms.member.one'",
    ],
    [
      (side: string) => ({ sideSystemId: side, terms: { actions: { fly: 'Fly' } } }),
      "Unknown field 'terms.actions.fly'",
    ],
    [(side: string) => ({ sideSystemId: side, terms: {} }), 'terms must NOT have fewer than 1 properties'],
    [(side: string) => ({ sideSystemId: side }), 'terms is required'],
    [() => ({ terms: { member: { singular: 'A' } } }), 'sideSystemId is required'],
    [() => ({ sideSystemId: 'side-one', terms: { member: { singular: 'A' } } }), 'sideSystemId must be a valid UUID'],
    [
      (side: string) => ({ sideSystemId: side, subSystemId: 'sub', terms: { member: { singular: 'A' } } }),
      'subSystemId must be a valid UUID',
    ],
    [(side: string) => ({ sideSystemId: side, member: { singular: 'A' } }), 'terms is required'], // nouns go under terms
  ])('rejects body %# with 400', async (build, message) => {
    const user = await server.user();
    const side = await activeSide(user);
    const res = await raw(user.apiKey, 'PATCH', '/api/v1/terminology/scoped', build(side));
    expect(res.status).toBe(400);
    expect(res.body.code).toBe('BAD_REQUEST');
    expect(res.body.message).toContain(message);
    expect(await overrideRows(user.userId)).toEqual([]);
  });

  it('is 404 for unknown or foreign side systems and for sub systems outside the side system, storing nothing', async () => {
    const user = await server.user();
    const stranger = await server.user();
    const side = await activeSide(user);
    const other = await createSide(user);
    const subOfOther = await createSub(user, other);
    const foreignSide = await activeSide(stranger);
    const foreignSub = await createSub(stranger, foreignSide);
    const terms = { member: { singular: 'Alter' } };
    const cases: Array<[{ sideSystemId: string; subSystemId?: string }, string]> = [
      [{ sideSystemId: UNKNOWN_ID }, 'Side system not found'],
      [{ sideSystemId: foreignSide }, 'Side system not found'],
      [{ sideSystemId: foreignSide, subSystemId: foreignSub }, 'Side system not found'],
      [{ sideSystemId: side, subSystemId: foreignSub }, 'Sub system not found in that side system'],
      [{ sideSystemId: side, subSystemId: subOfOther }, 'Sub system not found in that side system'],
      [{ sideSystemId: side, subSystemId: UNKNOWN_ID }, 'Sub system not found in that side system'],
    ];
    for (const [target, message] of cases) {
      const { response, error } = await user.api.PATCH('/api/v1/terminology/scoped', { body: { ...target, terms } });
      expect(response.status, JSON.stringify(target)).toBe(404);
      expect(error).toEqual({ code: 'NOT_FOUND', message });
    }
    expect(await overrideRows(user.userId)).toEqual([]);
    expect(await overrideRows(stranger.userId)).toEqual([]);
  });
});

describe('POST /terminology/scoped', () => {
  async function layered() {
    const user = await server.user();
    const side = await activeSide(user);
    const sub = await createSub(user, side);
    await user.api.PATCH('/api/v1/terminology', { body: { member: { singular: 'Headmate' } } });
    await user.api.PATCH('/api/v1/terminology/scoped', {
      body: { sideSystemId: side, terms: { member: { singular: 'Alter' }, note: { singular: 'Journal' } } },
    });
    await user.api.PATCH('/api/v1/terminology/scoped', {
      body: { sideSystemId: side, subSystemId: sub, terms: { front: { singular: 'Switch' } } },
    });
    expect(await overrideRows(user.userId)).toHaveLength(2);
    return { user, side, sub };
  }

  it('clears only the side layer when subSystemId is omitted or null', async () => {
    for (const subSystemId of [undefined, null]) {
      const { user, side, sub } = await layered();
      const { data, response } = await user.api.POST('/api/v1/terminology/scoped', {
        body: { sideSystemId: side, ...(subSystemId === null ? { subSystemId } : {}) },
      });
      expect(response.status).toBe(200);
      expect(data).toMatchObject({
        _id: 'resolved',
        scope: { kind: 'side', sideSystemId: side },
        hasSideOverride: false,
        hasSubOverride: false,
      });
      expect(pick(data!)).toEqual(labels({ member: { singular: 'Headmate', plural: 'Members' } }));
      expect(await overrideRows(user.userId)).toEqual([
        { side_system_id: side, sub_system_id: sub, terms: { front: { singular: 'Switch' } }, actions: {}, icons: {} },
      ]);
      const subDoc = await resolved(user, { sideSystemId: side, subSystemId: sub });
      expect(subDoc).toMatchObject({ hasSideOverride: false, hasSubOverride: true });
      expect(subDoc.terms.member.singular).toBe('Headmate');
      expect(subDoc.terms.front.singular).toBe('Switch');
    }
  });

  it('clears only the sub layer when subSystemId is given', async () => {
    const { user, side, sub } = await layered();
    const { data } = await user.api.POST('/api/v1/terminology/scoped', {
      body: { sideSystemId: side, subSystemId: sub },
    });
    expect(data).toMatchObject({
      scope: { kind: 'sub', sideSystemId: side, subSystemId: sub },
      hasSideOverride: true,
      hasSubOverride: false,
    });
    expect(pick(data!)).toEqual(
      labels({ member: { singular: 'Alter', plural: 'Members' }, note: { singular: 'Journal', plural: 'Notes' } }),
    );
    expect(await overrideRows(user.userId)).toEqual([
      {
        side_system_id: side,
        sub_system_id: null,
        terms: { member: { singular: 'Alter' }, note: { singular: 'Journal' } },
        actions: {},
        icons: {},
      },
    ]);
    // Nothing left to clear is still a success.
    const again = await user.api.POST('/api/v1/terminology/scoped', { body: { sideSystemId: side, subSystemId: sub } });
    expect(again.response.status).toBe(200);
    expect(again.data).toEqual(data);
  });

  it('is 404 for unknown or foreign scopes and 400 for a malformed body', async () => {
    const { user, side } = await layered();
    const stranger = await server.user();
    const foreignSide = await activeSide(stranger);
    const foreignSub = await createSub(stranger, foreignSide);
    const other = await createSide(user);
    const subOfOther = await createSub(user, other);
    const cases: Array<[{ sideSystemId: string; subSystemId?: string }, string]> = [
      [{ sideSystemId: UNKNOWN_ID }, 'Side system not found'],
      [{ sideSystemId: foreignSide }, 'Side system not found'],
      [{ sideSystemId: side, subSystemId: foreignSub }, 'Sub system not found in that side system'],
      [{ sideSystemId: side, subSystemId: subOfOther }, 'Sub system not found in that side system'],
    ];
    for (const [body, message] of cases) {
      const { response, error } = await user.api.POST('/api/v1/terminology/scoped', { body });
      expect(response.status, JSON.stringify(body)).toBe(404);
      expect(error).toEqual({ code: 'NOT_FOUND', message });
    }
    expect(await raw(user.apiKey, 'POST', '/api/v1/terminology/scoped', { sideSystemId: side, terms: {} })).toEqual({
      status: 400,
      body: {
        code: 'BAD_REQUEST',
        message: "Unknown field 'terms'",
        details: [{ in: 'body', pointer: '/terms', rule: 'additionalProperties', message: "Unknown field 'terms'" }],
      },
    });
    expect(await raw(user.apiKey, 'POST', '/api/v1/terminology/scoped', {})).toEqual({
      status: 400,
      body: {
        code: 'BAD_REQUEST',
        message: 'sideSystemId is required',
        details: [{ in: 'body', pointer: '/sideSystemId', rule: 'required', message: 'sideSystemId is required' }],
      },
    });
    expect(await overrideRows(user.userId)).toHaveLength(2);
  });
});

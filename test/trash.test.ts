import { describe, expect, it } from 'vitest';
import { createFolder, createGroup, createMember, createSide, createSub, UNKNOWN_ID } from './helpers/fixtures.ts';
import { PNG } from './helpers/images.ts';
import { captureStatements, explain, planNodes, REQUEST_WORK } from './helpers/plans.ts';
import { bearer, TestServer, useServer } from './helpers/server.ts';

const DAY = 86_400_000;
let now = 1_800_000_000_000;
const server = useServer({ clock: () => now });
type Api = Awaited<ReturnType<typeof server.user>>['api'];

async function entry(api: Api, body: Record<string, unknown>): Promise<string> {
  return (await api.POST('/api/v1/entries', { body: body as never })).data!.id;
}
const purge = (api: Api, items: Array<{ type: string; id: string }>) =>
  api.POST('/api/v1/trash/purge', { body: { items } as never });
const count = async (table: string, where: Record<string, unknown>) =>
  Number((await server.deps.db.knex(table).where(where).count<{ c: number }[]>('* as c').first())!.c);

describe('GET /trash', () => {
  it('merges every type newest deletedAt first, with name, purgeAt (30 days) and readable locations', async () => {
    const { api } = await server.user();
    const folder = await createFolder(api, 'Protectors');
    const inner = await createFolder(api, 'Night', { parentId: folder });
    const member = await createMember(api, 'Robin', { directoryId: inner, displayName: 'Rob' });
    const note = await entry(api, { title: 'Diary', content: 'text' });
    const untitled = await entry(api, { content: 'x'.repeat(100) });
    const field = (await api.POST('/api/v1/custom-fields', { body: { name: 'Role', type: 'text' } })).data!.id;
    const layout = (
      await api.POST('/api/v1/directory-layouts', { body: { directoryId: folder, name: 'Order', itemIds: [] } })
    ).data!.id;
    const group = await createGroup(api, 'Night shift');

    const steps: Array<[string, () => Promise<unknown>]> = [
      ['entry', () => api.DELETE('/api/v1/entries/{entryId}', { params: { path: { entryId: note } } })],
      ['entry', () => api.DELETE('/api/v1/entries/{entryId}', { params: { path: { entryId: untitled } } })],
      ['member', () => api.DELETE('/api/v1/members/{memberId}', { params: { path: { memberId: member } } })],
      [
        'customFieldDefinition',
        () => api.DELETE('/api/v1/custom-fields/{fieldId}', { params: { path: { fieldId: field } } }),
      ],
      [
        'directoryLayout',
        () => api.DELETE('/api/v1/directory-layouts/{layoutId}', { params: { path: { layoutId: layout } } }),
      ],
      ['directory', () => api.DELETE('/api/v1/groups/{groupId}', { params: { path: { groupId: group } } })],
      ['directory', () => api.DELETE('/api/v1/folders/{folderId}', { params: { path: { folderId: inner } } })],
    ];
    const deletedAt: number[] = [];
    for (const [, step] of steps) {
      now += 1000;
      deletedAt.push(now);
      await step();
    }
    const { data, response } = await api.GET('/api/v1/trash');
    expect(response.status).toBe(200);
    expect(data!.map((r) => r.type)).toEqual(steps.map(([t]) => t).reverse());
    expect(data!.map((r) => r.deletedAt)).toEqual([...deletedAt].reverse());
    for (const row of data!) expect(row.purgeAt).toBe(row.deletedAt + 30 * DAY);
    const byId = new Map(data!.map((r) => [r.id, r]));
    expect(byId.get(member)).toMatchObject({
      type: 'member',
      name: 'Rob',
      originalLocation: 'Main system / Protectors / Night',
    });
    expect(byId.get(note)).toMatchObject({ name: 'Diary', originalLocation: 'Main system' });
    expect(byId.get(untitled)!.name).toBe('x'.repeat(80));
    expect(byId.get(inner)).toMatchObject({
      type: 'directory',
      name: 'Night',
      originalLocation: 'Main system / Protectors',
    });
    expect(byId.get(layout)).toMatchObject({
      type: 'directoryLayout',
      name: 'Order',
      originalLocation: 'Main system / Protectors',
    });
    expect(byId.get(field)).toMatchObject({ type: 'customFieldDefinition', name: 'Role' });
    expect(byId.get(field)).not.toHaveProperty('originalLocation');

    const members = await api.GET('/api/v1/trash', { params: { query: { type: 'member' } } });
    expect(members.data!.map((r) => r.id)).toEqual([member]);
    const two = await api.GET('/api/v1/trash', { params: { query: { limit: 2 } } });
    expect(two.data!.map((r) => r.id)).toEqual([inner, group]);
  });

  it("is empty for a new account and never shows another account's items", async () => {
    const a = await server.user();
    const b = await server.user();
    const id = await entry(a.api, { content: 'x' });
    await a.api.DELETE('/api/v1/entries/{entryId}', { params: { path: { entryId: id } } });
    expect((await b.api.GET('/api/v1/trash')).data).toEqual([]);
    expect(
      (await b.api.POST('/api/v1/trash/purge', { body: { items: [{ type: 'entry', id }] } })).response.status,
    ).toBe(400);
  });

  it('validates the query: limit 1–500 (default 200), known types only', async () => {
    const { api, apiKey } = await server.user();
    for (let i = 0; i < 205; i++) {
      const id = await entry(api, { content: `n${i}` });
      await api.DELETE('/api/v1/entries/{entryId}', { params: { path: { entryId: id } } });
    }
    expect((await api.GET('/api/v1/trash')).data).toHaveLength(200);
    expect((await api.GET('/api/v1/trash', { params: { query: { limit: 500 } } })).data).toHaveLength(205);
    for (const [q, message] of [
      ['limit=0', 'limit must be >= 1'],
      ['limit=501', 'limit must be <= 500'],
      [
        'type=group',
        'type must be one of: entry, directory, member, directoryLayout, customFieldDefinition, frontSession',
      ],
    ]) {
      const res = await server.fetch(`/api/v1/trash?${q}`, { headers: bearer(apiKey) });
      expect(res.status).toBe(400);
      expect((await res.json()).message).toBe(message);
    }
  });

  it('purgeAt follows the account retention setting', async () => {
    const { api } = await server.user();
    expect((await api.GET('/api/v1/trash/settings')).data).toEqual({ retentionDays: 30, defaultRetentionDays: 30 });
    const id = await entry(api, { content: 'x' });
    await api.DELETE('/api/v1/entries/{entryId}', { params: { path: { entryId: id } } });
    const set = await api.PATCH('/api/v1/trash/settings', { body: { retentionDays: 7 } });
    expect(set.data).toEqual({ retentionDays: 7, defaultRetentionDays: 30 });
    const [row] = (await api.GET('/api/v1/trash')).data!;
    expect(row!.purgeAt).toBe(row!.deletedAt + 7 * DAY);
    expect((await api.PATCH('/api/v1/trash/settings', { body: { retentionDays: null } })).data?.retentionDays).toBe(30);
    expect((await api.PATCH('/api/v1/trash/settings', { body: { retentionDays: 0 } })).response.status).toBe(400);
    expect((await api.PATCH('/api/v1/trash/settings', { body: { retentionDays: 3651 } })).response.status).toBe(400);
  });
});

describe('PATCH /trash/settings', () => {
  type Change = { from: number | null; to: number | null };
  const changes = async (userId: string): Promise<Change[]> =>
    (
      await server.deps.db
        .knex('audit_events')
        .where({ user_id: userId, action: 'trash.settings.update' })
        .orderBy('created_at')
        .select<Array<{ detail: { retentionDays: Change } }>>('detail')
    ).map((r) => r.detail.retentionDays);

  it('costs one statement: the account row locked and updated, and the audit row with the value it replaced', async () => {
    const { api, userId, keyId } = await server.user();
    await api.GET('/api/v1/trash/settings'); // warms the key cache
    const knex = server.deps.db.knex;
    for (const [days, answer] of [
      [7, 7],
      [null, 30],
    ] as const) {
      now += 1000; // the audit rows' order
      const statements = await captureStatements(knex, REQUEST_WORK, async () => {
        const res = await api.PATCH('/api/v1/trash/settings', { body: { retentionDays: days } });
        expect(res.data).toEqual({ retentionDays: answer, defaultRetentionDays: 30 });
      });
      // One statement, outside any transaction (docs/data-access.md, "Writes in one statement").
      expect(
        statements.map((st) => st.sql.trim().split(/\s+/).slice(0, 3).join(' ')),
        JSON.stringify(statements.map((st) => st.sql)),
      ).toEqual(['with account as']);
      expect(statements[0]!.sql).toMatch(/update accounts[\s\S]*insert into audit_events/);
    }
    expect(await changes(userId)).toEqual([
      { from: null, to: 7 },
      { from: 7, to: null },
    ]);
    expect(await knex('audit_events').where({ user_id: userId, action: 'trash.settings.update' }).select()).toEqual([
      expect.objectContaining({ actor_kind: 'key', actor_key_id: keyId, target_type: 'account', target_id: userId }),
      expect.objectContaining({ actor_kind: 'key', actor_key_id: keyId, target_type: 'account', target_id: userId }),
    ]);
  });

  it('saves sent at once each audit the value the one before them left: the changes form one chain', async () => {
    const { api, userId } = await server.user();
    const days = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12];
    const results = await Promise.all(
      days.map((d) => api.PATCH('/api/v1/trash/settings', { body: { retentionDays: d } })),
    );
    expect(results.map((r) => r.response.status)).toEqual(days.map(() => 200));
    // Whatever order they ran in, each one's `from` is the `to` of the one before: from null to the value stored.
    const byFrom = new Map((await changes(userId)).map((c) => [c.from, c.to]));
    expect(byFrom.size).toBe(days.length);
    let value: number | null = null;
    for (let i = 0; i < days.length; i++) {
      expect(byFrom.has(value), `no save replaced ${value}`).toBe(true);
      value = byFrom.get(value)!;
    }
    expect((await api.GET('/api/v1/trash/settings')).data?.retentionDays).toBe(value);
  });
});

describe('GET /trash reads only what its page mentions', () => {
  it("builds originalLocation from the page's own folder chains and systems, not the account's whole tree", async () => {
    const { api, userId } = await server.user();
    const side = (await api.GET('/api/v1/systems')).data!.active.sideSystemId;
    const knex = server.deps.db.knex;
    // 2,000 folders and 200 side systems the page never mentions.
    await knex.raw(
      `insert into directories (id, user_id, kind, side_system_id, name, created_at, updated_at)
       select gen_random_uuid(), ?, 'folder', ?, 'filler ' || g, 1, 1 from generate_series(1, 2000) g`,
      [userId, side],
    );
    await knex.raw(
      `insert into side_systems (id, user_id, name, created_at, updated_at) select gen_random_uuid(), ?, 'side ' || g, 1, 1 from generate_series(1, 200) g`,
      [userId],
    );
    const top = await createFolder(api, 'Top');
    const mid = await createFolder(api, 'Mid', { parentId: top });
    const leaf = await createFolder(api, 'Leaf', { parentId: mid });
    const member = await createMember(api, 'Deep', { directoryId: leaf });
    await api.DELETE('/api/v1/members/{memberId}', { params: { path: { memberId: member } } });

    let rowsRead = 0;
    const count = (response: unknown) => {
      const rows = response as { rows?: unknown[] } | unknown[] | undefined;
      rowsRead += Array.isArray(rows) ? rows.length : (rows?.rows?.length ?? 0);
    };
    knex.on('query-response', count);
    let data: unknown;
    try {
      data = (await api.GET('/api/v1/trash')).data;
    } finally {
      knex.off('query-response', count);
    }
    expect(data).toEqual([
      expect.objectContaining({ type: 'member', id: member, originalLocation: 'Main system / Top / Mid / Leaf' }),
    ]);
    // The page row, the retention setting, three folders of the chain and one side system.
    expect(rowsRead).toBeLessThanOrEqual(10);
  });
});

describe('POST /trash/purge', () => {
  it('204 for an empty list', async () => {
    const { api } = await server.user();
    expect((await purge(api, [])).response.status).toBe(204);
  });

  it('deletes every listed item for good', async () => {
    const { api } = await server.user();
    const e = await entry(api, { content: 'x' });
    const m = await createMember(api);
    await api.DELETE('/api/v1/entries/{entryId}', { params: { path: { entryId: e } } });
    await api.DELETE('/api/v1/members/{memberId}', { params: { path: { memberId: m } } });
    expect(
      (
        await purge(api, [
          { type: 'entry', id: e },
          { type: 'member', id: m },
          { type: 'entry', id: e },
        ])
      ).response.status,
    ).toBe(204);
    expect(await count('entries', { id: e })).toBe(0);
    expect(await count('members', { id: m })).toBe(0);
    expect((await api.GET('/api/v1/trash')).data).toEqual([]);
  });

  it('takes ids in any case, as every other route does', async () => {
    const { api } = await server.user();
    const e = await entry(api, { content: 'x' });
    await api.DELETE('/api/v1/entries/{entryId}', { params: { path: { entryId: e } } });
    expect((await purge(api, [{ type: 'entry', id: e.toUpperCase() }])).response.status).toBe(204);
    expect(await count('entries', { id: e })).toBe(0);
  });

  it('is all or nothing: one item not in the trash, or not found, and nothing is purged', async () => {
    const { api } = await server.user();
    const trashed = await entry(api, { content: 'x' });
    await api.DELETE('/api/v1/entries/{entryId}', { params: { path: { entryId: trashed } } });
    const active = await entry(api, { content: 'y' });
    const notIn = await purge(api, [
      { type: 'entry', id: trashed },
      { type: 'entry', id: active },
    ]);
    expect(notIn.response.status).toBe(400);
    expect(notIn.error?.message).toBe(`entry ${active} is not in the trash`);
    const missing = await purge(api, [
      { type: 'entry', id: trashed },
      { type: 'member', id: UNKNOWN_ID },
    ]);
    expect(missing.response.status).toBe(400);
    expect(missing.error?.message).toBe(`member ${UNKNOWN_ID} not found`);
    const wrongType = await purge(api, [{ type: 'member', id: trashed }]);
    expect(wrongType.response.status).toBe(400);
    expect(await count('entries', { id: trashed })).toBe(1);
    expect((await api.GET('/api/v1/trash')).data!.map((r) => r.id)).toEqual([trashed]);
  });

  it('takes exactly 200 real trashed items; 201 is refused and nothing is purged', async () => {
    const { api, userId } = await server.user();
    const ids: string[] = [];
    for (let i = 0; i < 201; i++) {
      const id = await entry(api, { content: `n${i}` });
      expect(
        (await api.DELETE('/api/v1/entries/{entryId}', { params: { path: { entryId: id } } })).response.status,
      ).toBe(204);
      ids.push(id);
    }
    const items = ids.map((id) => ({ type: 'entry', id }));
    const over = await purge(api, items);
    expect(over.response.status).toBe(400);
    const tooMany = 'items must NOT have more than 200 items';
    expect(over.error).toEqual({
      code: 'BAD_REQUEST',
      message: tooMany,
      details: [{ in: 'body', pointer: '/items', rule: 'maxItems', message: tooMany }],
    });
    expect(await count('entries', { user_id: userId })).toBe(201);

    const atLimit = await purge(api, items.slice(0, 200));
    expect(atLimit.response.status).toBe(204);
    expect(await count('entries', { user_id: userId })).toBe(1);
    expect((await api.GET('/api/v1/trash', { params: { query: { limit: 500 } } })).data!.map((r) => r.id)).toEqual([
      ids[200],
    ]);
  });

  it('refuses more than 200 items, unknown types and unknown keys', async () => {
    const { api } = await server.user();
    const many = Array.from({ length: 201 }, () => ({ type: 'entry', id: UNKNOWN_ID }));
    const over = await purge(api, many);
    expect(over.response.status).toBe(400);
    expect(over.error?.message).toBe('items must NOT have more than 200 items');
    expect((await purge(api, [{ type: 'note', id: UNKNOWN_ID }])).response.status).toBe(400);
    expect((await api.POST('/api/v1/trash/purge', { body: { items: [], force: true } as never })).response.status).toBe(
      400,
    );
  });

  it('purging a member removes what depends on it and unlinks what only mentions it', async () => {
    const { api, apiKey } = await server.user();
    const m = await createMember(api, 'Gone');
    const keep = await createMember(api, 'Kept');
    const side = (await api.GET('/api/v1/systems')).data!.active.sideSystemId;
    const sub = await createSub(api, side, m);
    const group = await createGroup(api, 'G', { memberIds: [m, keep] });
    const field = (await api.POST('/api/v1/custom-fields', { body: { name: 'F', type: 'text' } })).data!.id;
    await api.PUT('/api/v1/members/{memberId}/custom-fields/{fieldId}', {
      params: { path: { memberId: m, fieldId: field } },
      body: { value: 'v' },
    });
    const status = (await api.POST('/api/v1/member-statuses', { body: { name: 'S', color: '#000000' } })).data!.id;
    await api.PUT('/api/v1/members/{memberId}/statuses/{statusId}', {
      params: { path: { memberId: m, statusId: status } },
    });
    await server.fetch(`/api/v1/members/${m}/media?kind=avatar`, {
      method: 'PUT',
      headers: { ...bearer(apiKey), 'Content-Type': 'image/png' },
      body: new Uint8Array(PNG),
    });
    const avatarKey = (await server.deps.db.knex('members').where({ id: m }).first()).avatar.key;
    const note = await entry(api, { content: 'about them', memberId: m, memberIds: [m, keep] });

    await api.DELETE('/api/v1/members/{memberId}', { params: { path: { memberId: m } } });
    expect((await purge(api, [{ type: 'member', id: m }])).response.status).toBe(204);

    expect(await count('group_members', { member_id: m })).toBe(0);
    expect(await count('custom_field_values', { member_id: m })).toBe(0);
    expect(await count('member_status_assignments', { member_id: m })).toBe(0);
    expect(await server.deps.storage!.get(avatarKey)).toBeNull();
    const noteNow = await api.GET('/api/v1/entries/{entryId}', { params: { path: { entryId: note } } });
    expect(noteNow.data).toMatchObject({ memberId: null, memberIds: [keep], members: [{ id: keep }] });
    const subNow = (await api.GET('/api/v1/systems')).data!.subSystems.find((s) => s._id === sub)!;
    expect(subNow.linkedMemberId).toBeNull();
    const tree = await api.GET('/api/v1/groups');
    expect(tree.data!.groups.find((g) => g._id === group)!.memberIds).toEqual([keep]);
  });

  it('purging a folder takes its subfolders, groups and layouts; its members move to the root', async () => {
    const { api } = await server.user();
    const top = await createFolder(api, 'Top');
    const inner = await createFolder(api, 'Inner', { parentId: top });
    const group = await createGroup(api, 'G', { parentId: inner });
    const layout = (
      await api.POST('/api/v1/directory-layouts', { body: { directoryId: inner, name: 'L', itemIds: [] } })
    ).data!.id;
    const m = await createMember(api, 'M', { directoryId: inner });
    await api.DELETE('/api/v1/folders/{folderId}', { params: { path: { folderId: top } } });
    expect((await purge(api, [{ type: 'directory', id: top }])).response.status).toBe(204);
    for (const id of [top, inner, group]) expect(await count('directories', { id })).toBe(0);
    expect(await count('directory_layouts', { id: layout })).toBe(0);
    expect(
      (await api.GET('/api/v1/members/{memberId}', { params: { path: { memberId: m } } })).data?.directoryId,
    ).toBeNull();
  });

  it('purging a custom field definition removes its values', async () => {
    const { api } = await server.user();
    const m = await createMember(api);
    const field = (await api.POST('/api/v1/custom-fields', { body: { name: 'F', type: 'text' } })).data!.id;
    await api.PUT('/api/v1/members/{memberId}/custom-fields/{fieldId}', {
      params: { path: { memberId: m, fieldId: field } },
      body: { value: 'v' },
    });
    await api.DELETE('/api/v1/custom-fields/{fieldId}', { params: { path: { fieldId: field } } });
    await purge(api, [{ type: 'customFieldDefinition', id: field }]);
    expect(await count('custom_field_values', { field_id: field })).toBe(0);
    expect(
      (
        await api.POST('/api/v1/members/{memberId}/custom-fields/{fieldId}/restore', {
          params: { path: { memberId: m, fieldId: field } },
        })
      ).response.status,
    ).toBe(404);
  });

  it("purging members finds their notes through the link table index, never by scanning the account's notes", async () => {
    const { api, userId } = await server.user();
    const [a, b, keep, filler] = [
      await createMember(api, 'A'),
      await createMember(api, 'B'),
      await createMember(api, 'Keep'),
      await createMember(api, 'Filler'),
    ];
    const knex = server.deps.db.knex;
    // 3,000 notes about another member straight into the tables, and a few that list the members.
    await knex.raw(
      `insert into entries (id, user_id, side_system_id, content, member_ids, created_at, updated_at)
       select gen_random_uuid(), m.user_id, m.side_system_id, 'filler', jsonb_build_array(m.id), ?::bigint, ?::bigint from members m, generate_series(1, 3000) g where m.id = ?`,
      [now, now, filler],
    );
    await knex.raw(
      `insert into entry_members (entry_id, member_id, user_id, position) select e.id, ?, e.user_id, 0 from entries e where e.user_id = ? and e.content = 'filler'`,
      [filler, userId],
    );
    const notes = [
      await entry(api, { content: 'x', memberIds: [a, keep] }),
      await entry(api, { content: 'y', memberIds: [b, a] }),
      await entry(api, { content: 'z', memberIds: [keep] }),
    ];
    if (server.runtime.maintenance) await server.runtime.maintenance.runOnce();
    else await knex.raw('analyze entries, entry_members');
    for (const id of [a, b]) await api.DELETE('/api/v1/members/{memberId}', { params: { path: { memberId: id } } });

    let status = 0;
    const [update] = await captureStatements(knex, /^update entries/, async () => {
      status = (
        await purge(api, [
          { type: 'member', id: a },
          { type: 'member', id: b },
        ])
      ).response.status;
    });
    expect(status).toBe(204);
    expect(update, 'one statement updates the notes of every purged member').toBeDefined();
    const nodes = planNodes(await explain(knex, update!));
    expect(nodes.filter((n) => n['Node Type'] === 'Seq Scan').map((n) => n['Relation Name'])).toEqual([]);
    expect(
      nodes.some((n) => n['Index Name'] === 'entry_members_member'),
      JSON.stringify(nodes.map((n) => [n['Node Type'], n['Index Name'] ?? n['Relation Name']])),
    ).toBe(true);

    const memberIds = async (id: string) =>
      (await api.GET('/api/v1/entries/{entryId}', { params: { path: { entryId: id } } })).data!.memberIds;
    expect([await memberIds(notes[0]!), await memberIds(notes[1]!), await memberIds(notes[2]!)]).toEqual([
      [keep],
      [],
      [keep],
    ]);
    expect(await count('entries', { user_id: userId })).toBe(3003);
  });

  it("a purged side system's data no longer blocks its deletion", async () => {
    const { api } = await server.user();
    const side = await createSide(api);
    const m = await createMember(api, 'M', { sideSystemId: side });
    await api.DELETE('/api/v1/members/{memberId}', { params: { path: { memberId: m } } });
    const del = () =>
      api.DELETE('/api/v1/systems/side-systems/{sideSystemId}', { params: { path: { sideSystemId: side } } });
    expect((await del()).response.status).toBe(400);
    await purge(api, [{ type: 'member', id: m }]);
    expect((await del()).response.status).toBe(200);
  });
});

describe('retention job', () => {
  it('purges items whose purgeAt has passed, per account retention, and leaves the rest', async () => {
    const a = await server.user();
    const b = await server.user();
    await b.api.PATCH('/api/v1/trash/settings', { body: { retentionDays: 2 } });
    const old = await entry(a.api, { content: 'old' });
    const fresh = await entry(a.api, { content: 'fresh' });
    const short = await entry(b.api, { content: 'short retention' });
    const live = await entry(a.api, { content: 'not trashed' });
    await a.api.DELETE('/api/v1/entries/{entryId}', { params: { path: { entryId: old } } });
    await b.api.DELETE('/api/v1/entries/{entryId}', { params: { path: { entryId: short } } });
    now += 20 * DAY;
    await a.api.DELETE('/api/v1/entries/{entryId}', { params: { path: { entryId: fresh } } });
    now += 3 * DAY;
    await server.runtime.trashRetention.runOnce();
    expect(await count('entries', { id: short })).toBe(0); // 23 days > 2
    expect(await count('entries', { id: old })).toBe(1); // 23 days < 30
    now += 8 * DAY;
    await server.runtime.trashRetention.runOnce();
    expect(await count('entries', { id: old })).toBe(0); // 31 days
    expect(await count('entries', { id: fresh })).toBe(1); // 11 days
    expect(await count('entries', { id: live })).toBe(1);
  });

  it('is safe when several instances run at once: every expired item is purged once, without errors', async () => {
    const { api, userId } = await server.user();
    const ids: string[] = [];
    for (let i = 0; i < 30; i++) {
      const id = await entry(api, { content: `n${i}` });
      await api.DELETE('/api/v1/entries/{entryId}', { params: { path: { entryId: id } } });
      ids.push(id);
    }
    now += 31 * DAY;
    const { TrashRetentionJob } = await import('../server/features/trash/retentionJob.ts');
    const other = new TrashRetentionJob(server.deps.db.knex, server.deps.storage, {
      defaultRetentionDays: 30,
      clock: () => now,
      logger: server.deps.logger,
    });
    const [x, y] = await Promise.all([server.runtime.trashRetention.runOnce(), other.runOnce()]);
    expect(x + y).toBeGreaterThanOrEqual(30);
    expect(await count('entries', { user_id: userId })).toBe(0);
  });

  it('runs on its interval when started', async () => {
    const s = await new TestServer().start({
      env: { TRASH_PURGE_INTERVAL_MS: '50', TRASH_RETENTION_DAYS: '1' },
      clock: () => now,
    });
    try {
      const { api } = await s.user();
      const id = (await api.POST('/api/v1/entries', { body: { content: 'x' } })).data!.id;
      await api.DELETE('/api/v1/entries/{entryId}', { params: { path: { entryId: id } } });
      now += 2 * DAY;
      await s.runtime.startJobs();
      for (let i = 0; i < 100 && (await s.deps.db.knex('entries').where({ id }).first()); i++)
        await new Promise((r) => setTimeout(r, 20));
      expect(await s.deps.db.knex('entries').where({ id }).first()).toBeUndefined();
    } finally {
      await s.close();
    }
  });
});

describe('front sessions in the trash', () => {
  it('are listed as frontSession rows and purged for good', async () => {
    const { api } = await server.user();
    const m = await createMember(api, 'Robin');
    await api.POST('/api/v1/front/members', { body: { memberId: m } });
    now += 60_000;
    await api.DELETE('/api/v1/front/members/{memberId}', { params: { path: { memberId: m } } });
    const session = (await api.GET('/api/v1/front/history')).data!.items[0]!.session._id;
    now += 1000;
    await api.DELETE('/api/v1/front/sessions/{sessionId}', { params: { path: { sessionId: session } } });
    const rows = (await api.GET('/api/v1/trash', { params: { query: { type: 'frontSession' } } })).data!;
    expect(rows).toEqual([
      {
        type: 'frontSession',
        id: session,
        name: expect.stringMatching(/^Robin — front session from \d{4}-\d{2}-\d{2} \d{2}:\d{2} UTC$/),
        deletedAt: now,
        purgeAt: now + 30 * DAY,
      },
    ]);
    expect((await purge(api, [{ type: 'frontSession', id: session }])).response.status).toBe(204);
    expect(await count('front_sessions', { id: session })).toBe(0);
  });

  it('trashing a fronting member ends its session and removes its tier presence', async () => {
    const { api } = await server.user();
    const a = await createMember(api, 'A');
    const b = await createMember(api, 'B');
    await api.POST('/api/v1/front/members', { body: { memberId: a } });
    await api.POST('/api/v1/front/members', { body: { memberId: b } });
    await api.POST('/api/v1/front/tier-presence', { body: { memberId: b, tierKey: 'coConscious' } });
    now += 5000;
    await api.DELETE('/api/v1/members/{memberId}', { params: { path: { memberId: b } } });
    const front = (await api.GET('/api/v1/front')).data!;
    expect(front.memberIds).toEqual([a]);
    expect(front.tieredPresence).toEqual([]);
    const open = await server.deps.db.knex('front_sessions').where({ member_id: b }).first();
    expect(open.ended_at).toBe(now);
    await api.POST('/api/v1/members/{memberId}/restore', { params: { path: { memberId: b } } });
    expect((await api.GET('/api/v1/front')).data!.memberIds).toEqual([a]);
  });
});

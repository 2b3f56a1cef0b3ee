import { describe, expect, it } from 'vitest';
import { createMember, UNKNOWN_ID } from './helpers/fixtures.ts';
import { captureStatements, REQUEST_WORK } from './helpers/plans.ts';
import { jsonHeaders, useServer } from './helpers/server.ts';
import { codeAndMessage } from './helpers/errors.ts';

const server = useServer();

async function field(
  api: Awaited<ReturnType<typeof server.user>>['api'],
  body: Record<string, unknown>,
): Promise<string> {
  const res = await api.POST('/api/v1/custom-fields', { body: body as never });
  expect(res.response.status, JSON.stringify(res.error)).toBe(201);
  return res.data!.id;
}

const valuePath = (memberId: string, fieldId: string) => ({ params: { path: { memberId, fieldId } } });

describe('definitions', () => {
  it('are created for every type, listed in order, and not listed once trashed', async () => {
    const { api } = await server.user();
    const ids = [];
    for (const [type, options] of [
      ['text'],
      ['markdown'],
      ['date'],
      ['select', ['a', 'b']],
      ['multiselect', ['x', 'y', 'z']],
    ] as const) {
      ids.push(await field(api, { name: `F ${type}`, type, ...(options ? { options } : {}) }));
    }
    const list = await api.GET('/api/v1/custom-fields');
    expect(list.data!.map((f) => [f._id, f.type, f.sortOrder])).toEqual(
      ids.map((id, i) => [id, ['text', 'markdown', 'date', 'select', 'multiselect'][i], i]),
    );
    expect(list.data![3]).toMatchObject({ options: ['a', 'b'], description: null });
    expect(
      (await api.DELETE('/api/v1/custom-fields/{fieldId}', { params: { path: { fieldId: ids[0]! } } })).response.status,
    ).toBe(204);
    expect((await api.GET('/api/v1/custom-fields')).data!.map((f) => f._id)).toEqual(ids.slice(1));
  });

  it.each([
    [{ name: 'x', type: 'select' }, 'options is required for a select field'],
    [{ name: 'x', type: 'multiselect', options: [] }, 'options must NOT have fewer than 1 items'],
    [{ name: 'x', type: 'text', options: ['a'] }, 'options only apply to select and multiselect fields'],
    [
      { name: 'x', type: 'select', options: ['a', 'a'] },
      'options must NOT have duplicate items (items ## 1 and 0 are identical)',
    ],
    [{ name: 'x', type: 'number' }, 'type must be one of: text, markdown, date, select, multiselect'],
    [{ name: 'x'.repeat(81), type: 'text' }, 'name must NOT have more than 80 characters'],
  ])('refuse %j with 400', async (body, message) => {
    const { api } = await server.user();
    const res = await api.POST('/api/v1/custom-fields', { body: body as never });
    expect(res.response.status).toBe(400);
    expect(res.error?.message).toBe(message);
  });

  it('PATCH renames, reorders and changes options, but never the type, nor removes options in use', async () => {
    const { api } = await server.user();
    const m = await createMember(api);
    const id = await field(api, { name: 'Role', type: 'multiselect', options: ['Host', 'Protector', 'Little'] });
    await api.PUT('/api/v1/members/{memberId}/custom-fields/{fieldId}', {
      ...valuePath(m, id),
      body: { value: ['Protector'] },
    });
    const path = { params: { path: { fieldId: id } } };
    const ok = await api.PATCH('/api/v1/custom-fields/{fieldId}', {
      ...path,
      body: { name: 'Roles', sortOrder: 7, description: 'what they do', options: ['Host', 'Protector', 'Caretaker'] },
    });
    expect(ok.data).toMatchObject({
      name: 'Roles',
      sortOrder: 7,
      description: 'what they do',
      options: ['Host', 'Protector', 'Caretaker'],
    });
    const inUse = await api.PATCH('/api/v1/custom-fields/{fieldId}', { ...path, body: { options: ['Host'] } });
    expect(inUse.response.status).toBe(400);
    expect(inUse.error?.message).toBe('Options in use by members cannot be removed: Protector');
    expect(
      (await api.PATCH('/api/v1/custom-fields/{fieldId}', { ...path, body: { type: 'text' } as never })).response
        .status,
    ).toBe(400);
    expect(
      (
        await api.PATCH('/api/v1/custom-fields/{fieldId}', {
          params: { path: { fieldId: UNKNOWN_ID } },
          body: { name: 'x' },
        })
      ).response.status,
    ).toBe(404);
  });

  it('an option removed while values naming it are being written: never both (no value outside the options)', async () => {
    const { api } = await server.user();
    const members = [];
    for (let i = 0; i < 12; i++) members.push(await createMember(api, `M${i}`));
    for (let round = 0; round < 8; round++) {
      const id = await field(api, { name: `Race ${round}`, type: 'select', options: ['keep', 'drop'] });
      const patch = api.PATCH('/api/v1/custom-fields/{fieldId}', {
        params: { path: { fieldId: id } },
        body: { options: ['keep'] },
      });
      // The writes start a little after the removal, in two streams, so some land while it runs.
      await new Promise((r) => setTimeout(r, round % 4));
      const stream = (ms: string[]) =>
        ms.reduce<Promise<Array<{ response: Response }>>>(
          async (done, m) => [
            ...(await done),
            await api.PUT('/api/v1/members/{memberId}/custom-fields/{fieldId}', {
              ...valuePath(m, id),
              body: { value: 'drop' },
            }),
          ],
          Promise.resolve([]),
        );
      const [patched, first, second] = await Promise.all([
        patch,
        stream(members.slice(0, 6)),
        stream(members.slice(6)),
      ]);
      const written = [...first, ...second];
      // A value write that lost to the removal is refused; the removal is refused if any value won.
      for (const w of written) expect([200, 400]).toContain(w.response.status);
      expect([200, 400]).toContain(patched.response.status);
      const wrote = written.filter((w) => w.response.status === 200).length;
      if (patched.response.status === 200) {
        expect(wrote, 'a value naming the removed option was written and survived').toBe(0);
      } else {
        expect(patched.error?.message).toBe('Options in use by members cannot be removed: drop');
        expect(wrote).toBe(members.length);
      }
      const list = await api.GET('/api/v1/custom-fields');
      const options = list.data!.find((f) => f._id === id)!.options!;
      for (const m of members) {
        const values = await api.GET('/api/v1/members/{memberId}/custom-fields', {
          params: { path: { memberId: m } },
        });
        const value = values.data!.find((v) => v.fieldId === id)!.value;
        if (value !== null) expect(options).toContain(value);
      }
    }
  });
});

describe('strict bodies', () => {
  const CASES: Array<[Record<string, unknown>, string]> = [
    [{ bogus: 1 }, "Unknown field 'bogus'"],
    [{ name: '' }, 'name must NOT have fewer than 1 characters'],
    [{ name: 'x'.repeat(81) }, 'name must NOT have more than 80 characters'],
  ];

  it.each(CASES)('POST /custom-fields refuses %j with 400 and creates nothing', async (extra, message) => {
    const { api, apiKey } = await server.user();
    const res = await server.fetch('/api/v1/custom-fields', {
      method: 'POST',
      headers: jsonHeaders(apiKey),
      body: JSON.stringify({ name: 'ok', type: 'text', ...extra }),
    });
    expect(res.status).toBe(400);
    expect(codeAndMessage(await res.json())).toEqual({ code: 'BAD_REQUEST', message });
    expect((await api.GET('/api/v1/custom-fields')).data).toEqual([]);
  });

  it.each(CASES)('PATCH /custom-fields/{fieldId} refuses %j with 400 and changes nothing', async (extra, message) => {
    const { api, apiKey } = await server.user();
    const id = await field(api, { name: 'Before', type: 'text' });
    const res = await server.fetch(`/api/v1/custom-fields/${id}`, {
      method: 'PATCH',
      headers: jsonHeaders(apiKey),
      body: JSON.stringify(extra),
    });
    expect(res.status).toBe(400);
    expect(codeAndMessage(await res.json())).toEqual({ code: 'BAD_REQUEST', message });
    expect((await api.GET('/api/v1/custom-fields')).data!.map((f) => f.name)).toEqual(['Before']);
  });
});

describe('member values', () => {
  it('are validated per type; null clears; every live definition is listed', async () => {
    const { api } = await server.user();
    const m = await createMember(api);
    const text = await field(api, { name: 'Text', type: 'text' });
    const md = await field(api, { name: 'Md', type: 'markdown' });
    const date = await field(api, { name: 'Date', type: 'date' });
    const sel = await field(api, { name: 'Sel', type: 'select', options: ['a', 'b'] });
    const multi = await field(api, { name: 'Multi', type: 'multiselect', options: ['x', 'y'] });
    const put = (fieldId: string, value: unknown) =>
      api.PUT('/api/v1/members/{memberId}/custom-fields/{fieldId}', {
        ...valuePath(m, fieldId),
        body: { value } as never,
      });

    for (const [id, value] of [
      [text, 'hello'],
      [md, '**bold**'],
      [date, '2024-02-29'],
      [sel, 'b'],
      [multi, ['y', 'x']],
    ] as const) {
      const res = await put(id, value);
      expect(res.response.status, JSON.stringify(res.error)).toBe(200);
      expect(res.data).toMatchObject({ fieldId: id, value });
    }
    for (const [id, value, message] of [
      [text, ['a'], 'value must be a string for a text field'],
      [text, 'x'.repeat(1001), 'value must be at most 1000 characters for a text field'],
      [date, '2023-02-29', 'value must be a calendar date YYYY-MM-DD for a date field'],
      [date, '29/02/2024', 'value must be a calendar date YYYY-MM-DD for a date field'],
      [sel, 'c', 'value must be one of: a, b'],
      [sel, ['a'], 'value must be one of: a, b'],
      [multi, 'x', 'value must be an array of options for a multiselect field'],
      [multi, ['x', 'q'], 'value contains unknown options: q'],
      [multi, ['x', 'x'], 'value must not repeat an option'],
    ] as const) {
      const res = await put(id, value);
      expect(res.response.status, String(value)).toBe(400);
      expect(res.error?.message).toBe(message);
    }
    expect((await put(text, null)).data).toMatchObject({ value: null, updatedAt: null });
    const list = await api.GET('/api/v1/members/{memberId}/custom-fields', { params: { path: { memberId: m } } });
    expect(list.data!.map((v) => [v.fieldId, v.value])).toEqual([
      [text, null],
      [md, '**bold**'],
      [date, '2024-02-29'],
      [sel, 'b'],
      [multi, ['y', 'x']],
    ]);
  });

  it('404 for unknown or foreign members and fields', async () => {
    const { api } = await server.user();
    const other = await server.user();
    const m = await createMember(api);
    const f = await field(api, { name: 'T', type: 'text' });
    const theirs = await field(other.api, { name: 'T', type: 'text' });
    const theirMember = await createMember(other.api);
    for (const [memberId, fieldId] of [
      [m, theirs],
      [theirMember, f],
      [UNKNOWN_ID, f],
      [m, UNKNOWN_ID],
    ] as const) {
      expect(
        (
          await api.PUT('/api/v1/members/{memberId}/custom-fields/{fieldId}', {
            ...valuePath(memberId, fieldId),
            body: { value: 'x' },
          })
        ).response.status,
      ).toBe(404);
    }
    expect(
      (await api.GET('/api/v1/members/{memberId}/custom-fields', { params: { path: { memberId: theirMember } } }))
        .response.status,
    ).toBe(404);
  });
});

describe('PUT /members/{memberId}/custom-fields/{fieldId} cost', () => {
  it('sets and clears a value in one statement each, with custom_field_value.changed; a refused value writes nothing', async () => {
    const { api, userId } = await server.user();
    const m = await createMember(api);
    const multi = await field(api, { name: 'Multi', type: 'multiselect', options: ['x', 'y'] });
    const put = (value: unknown) =>
      api.PUT('/api/v1/members/{memberId}/custom-fields/{fieldId}', {
        ...valuePath(m, multi),
        body: { value } as never,
      });
    await put(['x']); // warms the key cache
    const knex = server.deps.db.knex;
    const changed = async () =>
      (
        await knex.raw<{ rows: Array<{ n: number }> }>(
          `select count(*)::int as n from events where account_id = ? and type = 'custom_field_value.changed' and data->>'memberId' = ?`,
          [userId, m],
        )
      ).rows[0]!.n;
    const firstWords = (statements: Array<{ sql: string }>) =>
      statements.map((st) => st.sql.trim().split(/\s+/).slice(0, 3).join(' '));
    for (const value of [['y', 'x'], null]) {
      const before = await changed();
      let body: unknown;
      const statements = await captureStatements(knex, REQUEST_WORK, async () => {
        const res = await put(value);
        expect(res.response.status, JSON.stringify(res.error)).toBe(200);
        body = res.data;
      });
      expect(firstWords(statements)).toEqual(['with member as']);
      expect(body).toEqual({
        fieldId: multi,
        name: 'Multi',
        type: 'multiselect',
        options: ['x', 'y'],
        value,
        updatedAt: value === null ? null : expect.any(Number),
      });
      expect(await changed()).toBe(before + 1);
    }
    await put(['x']);
    const before = await changed();
    const refused = await captureStatements(knex, REQUEST_WORK, async () => {
      const res = await put(['x', 'q']);
      expect(res.response.status).toBe(400);
      expect(res.error?.message).toBe('value contains unknown options: q');
    });
    expect(firstWords(refused)).toEqual(['with member as']);
    expect(await changed()).toBe(before);
    const list = await api.GET('/api/v1/members/{memberId}/custom-fields', { params: { path: { memberId: m } } });
    expect(list.data!.map((v) => v.value)).toEqual([['x']]);
  });
});

describe('trash and restore of a definition', () => {
  it('hides the field and its values, refuses writes, and POST /members/{memberId}/custom-fields/{fieldId}/restore brings both back', async () => {
    const { api } = await server.user();
    const other = await server.user();
    const m = await createMember(api);
    const f = await field(api, { name: 'T', type: 'text' });
    await api.PUT('/api/v1/members/{memberId}/custom-fields/{fieldId}', {
      ...valuePath(m, f),
      body: { value: 'kept' },
    });
    expect(
      (await api.DELETE('/api/v1/custom-fields/{fieldId}', { params: { path: { fieldId: f } } })).response.status,
    ).toBe(204);
    expect(
      (await api.DELETE('/api/v1/custom-fields/{fieldId}', { params: { path: { fieldId: f } } })).response.status,
    ).toBe(404);
    expect(
      (await api.GET('/api/v1/members/{memberId}/custom-fields', { params: { path: { memberId: m } } })).data,
    ).toEqual([]);
    expect(
      (
        await api.PUT('/api/v1/members/{memberId}/custom-fields/{fieldId}', {
          ...valuePath(m, f),
          body: { value: 'x' },
        })
      ).response.status,
    ).toBe(404);
    const row = await server.deps.db.knex('custom_field_definitions').where({ id: f }).first();
    expect(row.deleted_at).toEqual(expect.any(Number));

    const foreignMember = await createMember(other.api);
    expect(
      (await api.POST('/api/v1/members/{memberId}/custom-fields/{fieldId}/restore', valuePath(foreignMember, f)))
        .response.status,
    ).toBe(404);
    expect(
      (await other.api.POST('/api/v1/members/{memberId}/custom-fields/{fieldId}/restore', valuePath(foreignMember, f)))
        .response.status,
    ).toBe(404);
    expect(
      (await api.POST('/api/v1/members/{memberId}/custom-fields/{fieldId}/restore', valuePath(m, f))).response.status,
    ).toBe(204);
    const values = await api.GET('/api/v1/members/{memberId}/custom-fields', { params: { path: { memberId: m } } });
    expect(values.data!.map((v) => v.value)).toEqual(['kept']);
    const again = await api.POST('/api/v1/members/{memberId}/custom-fields/{fieldId}/restore', valuePath(m, f));
    expect(again.response.status).toBe(400);
    expect(again.error?.message).toBe('Custom field is not in the trash');
  });
});

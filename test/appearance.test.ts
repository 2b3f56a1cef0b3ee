import { describe, expect, it } from 'vitest';
import { TestServer, useServer, jsonHeaders } from './helpers/server.ts';
import { codeAndMessage } from './helpers/errors.ts';
import { captureStatements, REQUEST_WORK } from './helpers/plans.ts';

let now = 1_800_000_000_000;
const server = useServer({ clock: () => now });

const DEFAULTS = {
  themeMode: 'system',
  darkVariant: 'default',
  colorScheme: 'default',
  customColorSchemeId: null,
  fontFamily: 'system',
  customFontId: null,
  fontSize: 'medium',
  fontScale: 1,
  fontSizePx: 16,
  amoledBase: false,
  reduceMotion: false,
  memberBannerGradientsEnabled: true,
};

describe('GET /appearance', () => {
  it('answers 404 until the document exists', async () => {
    const { api } = await server.user();
    const { response, error } = await api.GET('/api/v1/appearance');
    expect(response.status).toBe(404);
    expect(error?.code).toBe('NOT_FOUND');
  });

  it('is per account', async () => {
    const a = await server.user();
    const b = await server.user();
    await a.api.PATCH('/api/v1/appearance', { body: { themeMode: 'dark' } });
    expect((await b.api.GET('/api/v1/appearance')).response.status).toBe(404);
  });
});

describe('POST /appearance/reset', () => {
  it('creates the document with the product defaults', async () => {
    const { api, userId } = await server.user();
    now += 1000;
    const { data, response } = await api.POST('/api/v1/appearance/reset');
    expect(response.status).toBe(200);
    expect(data).toEqual({ _id: expect.any(String), _creationTime: now, userId, updatedAt: now, ...DEFAULTS });
    expect((await api.GET('/api/v1/appearance')).data).toEqual(data);
  });

  it('overwrites every customised field and keeps the id', async () => {
    const { api, userId } = await server.user();
    const first = await api.PATCH('/api/v1/appearance', {
      body: {
        themeMode: 'dark',
        darkVariant: 'moon',
        colorScheme: 'forest',
        fontFamily: 'inter',
        fontSize: 'large',
        fontScale: 1.5,
        fontSizePx: 20,
        amoledBase: true,
        reduceMotion: true,
        memberBannerGradientsEnabled: false,
      },
    });
    now += 1000;
    const { data } = await api.POST('/api/v1/appearance/reset');
    expect(data).toEqual({ _id: first.data!._id, _creationTime: now, userId, updatedAt: now, ...DEFAULTS });
  });
});

describe('PATCH /appearance', () => {
  it('creates the document from the defaults on first save and updates only the given fields', async () => {
    const { api } = await server.user();
    now += 1000;
    const { data, response } = await api.PATCH('/api/v1/appearance', {
      body: { themeMode: 'dark', reduceMotion: true },
    });
    expect(response.status).toBe(200);
    expect(data).toMatchObject({
      ...DEFAULTS,
      themeMode: 'dark',
      reduceMotion: true,
      updatedAt: now,
      _creationTime: now,
    });
    now += 5000;
    const second = await api.PATCH('/api/v1/appearance', { body: { fontSize: 'small' } });
    expect(second.data).toMatchObject({
      themeMode: 'dark',
      reduceMotion: true,
      fontSize: 'small',
      updatedAt: now,
      _creationTime: now,
    });
    expect(second.data!._id).toBe(data!._id);
  });

  it('accepts every field and value of the document', async () => {
    const { api } = await server.user();
    for (const themeMode of ['light', 'dark', 'system'] as const) {
      expect((await api.PATCH('/api/v1/appearance', { body: { themeMode } })).data?.themeMode).toBe(themeMode);
    }
    for (const darkVariant of ['default', 'storm', 'night', 'moon'] as const) {
      expect((await api.PATCH('/api/v1/appearance', { body: { darkVariant } })).data?.darkVariant).toBe(darkVariant);
    }
    for (const fontSize of ['small', 'medium', 'large'] as const) {
      expect((await api.PATCH('/api/v1/appearance', { body: { fontSize } })).data?.fontSize).toBe(fontSize);
    }
    const { data } = await api.PATCH('/api/v1/appearance', {
      body: {
        colorScheme: 'ocean-blue',
        fontFamily: 'Atkinson Hyperlegible',
        fontScale: 0.75,
        fontSizePx: 18.5,
        amoledBase: true,
        reduceMotion: true,
        memberBannerGradientsEnabled: false,
      },
    });
    expect(data).toMatchObject({
      colorScheme: 'ocean-blue',
      fontFamily: 'Atkinson Hyperlegible',
      fontScale: 0.75,
      fontSizePx: 18.5,
      amoledBase: true,
      reduceMotion: true,
      memberBannerGradientsEnabled: false,
    });
  });

  it.each([
    [{}, 'Request body must contain at least one field'],
    [{ theme: 'dark' }, "Unknown field 'theme'"],
    [{ themeMode: 'sepia' }, 'themeMode must be one of: light, dark, system'],
    [{ darkVariant: 'dusk' }, 'darkVariant must be one of: default, storm, night, moon'],
    [{ fontSize: 12 }, 'fontSize must be string'],
    [{ fontScale: 0.1 }, 'fontScale must be >= 0.5'],
    [{ fontSizePx: 100 }, 'fontSizePx must be <= 48'],
    [{ colorScheme: '' }, 'colorScheme must NOT have fewer than 1 characters'],
    [{ customFontId: 'not-a-uuid' }, 'customFontId must be a valid UUID'],
    [{ amoledBase: null }, 'amoledBase must be boolean'],
  ])('rejects %j with 400', async (body, message) => {
    const { apiKey } = await server.user();
    const res = await server.fetch('/api/v1/appearance', {
      method: 'PATCH',
      headers: jsonHeaders(apiKey),
      body: JSON.stringify(body),
    });
    expect(res.status).toBe(400);
    expect(codeAndMessage(await res.json())).toEqual({ code: 'BAD_REQUEST', message });
  });

  it('takes colourScheme as an alias of colorScheme', async () => {
    const { api } = await server.user();
    const { data } = await api.PATCH('/api/v1/appearance', { body: { colourScheme: 'forest' } });
    expect(data?.colorScheme).toBe('forest');
    expect(data).not.toHaveProperty('colourScheme');
    const same = await api.PATCH('/api/v1/appearance', { body: { colourScheme: 'sea', colorScheme: 'sea' } });
    expect(same.data?.colorScheme).toBe('sea');
    const disagree = await api.PATCH('/api/v1/appearance', { body: { colourScheme: 'sea', colorScheme: 'forest' } });
    expect(disagree.response.status).toBe(400);
    expect(disagree.error?.code).toBe('BAD_REQUEST');
    expect((await api.GET('/api/v1/appearance')).data?.colorScheme).toBe('sea');
  });

  describe('custom colour schemes', () => {
    it('points at an own scheme, clears with null, and 404s for unknown or foreign ids', async () => {
      const { api } = await server.user({ account: { plan: 'free' } });
      const other = await server.user();
      const mine = await api.POST('/api/v1/appearance/custom-color-schemes', {
        body: { name: 'Dusk', colors: { primary: '#112233' } },
      });
      expect(mine.response.status).toBe(201);
      const theirs = await other.api.POST('/api/v1/appearance/custom-color-schemes', {
        body: { name: 'Theirs', colors: { primary: '#445566' } },
      });

      const set = await api.PATCH('/api/v1/appearance', { body: { customColorSchemeId: mine.data!.id } });
      expect(set.data?.customColorSchemeId).toBe(mine.data!.id);

      const foreign = await api.PATCH('/api/v1/appearance', { body: { customColorSchemeId: theirs.data!.id } });
      expect(foreign.response.status).toBe(404);
      expect(foreign.error).toEqual({ code: 'NOT_FOUND', message: 'Custom colour scheme not found' });
      const unknown = await api.PATCH('/api/v1/appearance', {
        body: { customColorSchemeId: '00000000-0000-4000-8000-00000000abcd' },
      });
      expect(unknown.response.status).toBe(404);
      expect((await api.GET('/api/v1/appearance')).data?.customColorSchemeId).toBe(mine.data!.id);

      const cleared = await api.PATCH('/api/v1/appearance', { body: { customColorSchemeId: null } });
      expect(cleared.response.status).toBe(200);
      expect(cleared.data?.customColorSchemeId).toBeNull();
    });

    it('lists own schemes only, and deleting one in use falls back to the preset', async () => {
      const { api } = await server.user();
      const other = await server.user();
      await other.api.POST('/api/v1/appearance/custom-color-schemes', {
        body: { name: 'Theirs', colors: { primary: '#000000' } },
      });
      const created = await api.POST('/api/v1/appearance/custom-color-schemes', {
        body: { name: 'Mine', colors: { primary: '#ABCDEF', background: '#000000' } },
      });
      const list = await api.GET('/api/v1/appearance/custom-color-schemes');
      expect(list.data).toEqual([
        {
          _id: created.data!.id,
          name: 'Mine',
          colors: { primary: '#ABCDEF', background: '#000000' },
          createdAt: now,
          updatedAt: now,
        },
      ]);
      await api.PATCH('/api/v1/appearance', { body: { colorScheme: 'forest', customColorSchemeId: created.data!.id } });
      expect(
        (
          await other.api.DELETE('/api/v1/appearance/custom-color-schemes/{schemeId}', {
            params: { path: { schemeId: created.data!.id } },
          })
        ).response.status,
      ).toBe(404);
      const del = await api.DELETE('/api/v1/appearance/custom-color-schemes/{schemeId}', {
        params: { path: { schemeId: created.data!.id } },
      });
      expect(del.response.status).toBe(204);
      const doc = await api.GET('/api/v1/appearance');
      expect(doc.data).toMatchObject({ customColorSchemeId: null, colorScheme: 'forest' });
    });

    it('validates scheme colours', async () => {
      const { api } = await server.user();
      const bad = await api.POST('/api/v1/appearance/custom-color-schemes', {
        body: { name: 'Bad', colors: { primary: 'red' } },
      });
      expect(bad.response.status).toBe(400);
      const empty = await api.POST('/api/v1/appearance/custom-color-schemes', { body: { name: 'Empty', colors: {} } });
      expect(empty.response.status).toBe(400);
    });
  });

  describe('custom fonts', () => {
    it('are refused with 403 on the Free plan, for registering and for selecting', async () => {
      const free = await server.user({ account: { plan: 'free' } });
      const create = await free.api.POST('/api/v1/appearance/custom-fonts', {
        body: { name: 'Atkinson', sourceUrl: 'https://fonts.example.org/a.woff2' },
      });
      expect(create.response.status).toBe(403);
      expect(create.error).toEqual({ code: 'FORBIDDEN', message: 'Custom fonts need the Pro plan or higher' });
      const select = await free.api.PATCH('/api/v1/appearance', {
        body: { customFontId: '00000000-0000-4000-8000-00000000f0f0' },
      });
      expect(select.response.status).toBe(403);
      expect(select.error?.code).toBe('FORBIDDEN');
      // Clearing is always allowed.
      expect((await free.api.PATCH('/api/v1/appearance', { body: { customFontId: null } })).response.status).toBe(200);
    });

    it.each(['pro', 'pro_plus'] as const)(
      'work on the %s plan; foreign and unknown ids are 404; null clears',
      async (plan) => {
        const { api } = await server.user({ account: { plan } });
        const other = await server.user({ account: { plan: 'pro' } });
        const font = await api.POST('/api/v1/appearance/custom-fonts', {
          body: { name: 'Atkinson', sourceUrl: 'https://fonts.example.org/a.woff2' },
        });
        expect(font.response.status).toBe(201);
        const theirs = await other.api.POST('/api/v1/appearance/custom-fonts', {
          body: { name: 'Theirs', sourceUrl: 'https://fonts.example.org/b.woff2' },
        });
        const set = await api.PATCH('/api/v1/appearance', { body: { customFontId: font.data!.id } });
        expect(set.data?.customFontId).toBe(font.data!.id);
        const foreign = await api.PATCH('/api/v1/appearance', { body: { customFontId: theirs.data!.id } });
        expect(foreign.response.status).toBe(404);
        expect(foreign.error).toEqual({ code: 'NOT_FOUND', message: 'Custom font not found' });
        expect(
          (await api.PATCH('/api/v1/appearance', { body: { customFontId: '00000000-0000-4000-8000-00000000f0f1' } }))
            .response.status,
        ).toBe(404);
        expect((await api.GET('/api/v1/appearance/custom-fonts')).data).toEqual([
          {
            _id: font.data!.id,
            name: 'Atkinson',
            sourceUrl: 'https://fonts.example.org/a.woff2',
            createdAt: now,
            updatedAt: now,
          },
        ]);
        const cleared = await api.PATCH('/api/v1/appearance', { body: { customFontId: null } });
        expect(cleared.data?.customFontId).toBeNull();
        await api.PATCH('/api/v1/appearance', { body: { customFontId: font.data!.id } });
        expect(
          (
            await api.DELETE('/api/v1/appearance/custom-fonts/{fontId}', {
              params: { path: { fontId: font.data!.id } },
            })
          ).response.status,
        ).toBe(204);
        expect((await api.GET('/api/v1/appearance')).data?.customFontId).toBeNull();
      },
    );

    it('need an https source URL', async () => {
      const { api } = await server.user();
      const res = await api.POST('/api/v1/appearance/custom-fonts', {
        body: { name: 'Plain', sourceUrl: 'http://fonts.example.org/a.woff2' },
      });
      expect(res.response.status).toBe(400);
    });

    it('need a source URL that is a URI (RFC 3986): no spaces or raw non-ASCII (found by npm run fuzz)', async () => {
      // Accepted before, then listed back in a body that broke its own schema (format: uri).
      const { api } = await server.user();
      for (const sourceUrl of [
        'https://fonts.example.org/a.woff2😀',
        'https://fonts.example.org/a b.woff2',
        'https://fonts.example.org/ä.woff2',
        'https://fonts.example.org/a.woff2#x#y',
      ]) {
        const res = await api.POST('/api/v1/appearance/custom-fonts', { body: { name: 'Odd', sourceUrl } });
        expect(res.response.status, sourceUrl).toBe(400);
        expect(res.error?.message, sourceUrl).toBe('sourceUrl must match format "uri"');
      }
      // Percent-encoded, the same names are fine.
      const ok = await api.POST('/api/v1/appearance/custom-fonts', {
        body: { name: 'Encoded', sourceUrl: 'https://fonts.example.org/%C3%A4%20b.woff2' },
      });
      expect(ok.response.status).toBe(201);
      expect((await api.GET('/api/v1/appearance/custom-fonts')).data?.map((f) => f.sourceUrl)).toEqual([
        'https://fonts.example.org/%C3%A4%20b.woff2',
      ]);
    });
  });
});

describe('PATCH /appearance cost', () => {
  it('saves in one statement, first save or not, a custom font and scheme checked in it, with appearance.changed', async () => {
    const { api, userId } = await server.user({ account: { plan: 'pro' } });
    const font = await api.POST('/api/v1/appearance/custom-fonts', {
      body: { name: 'Atkinson', sourceUrl: 'https://fonts.example.org/a.woff2' },
    }); // also warms the key cache
    const scheme = await api.POST('/api/v1/appearance/custom-color-schemes', {
      body: { name: 'Dusk', colors: { primary: '#112233' } },
    });
    const knex = server.deps.db.knex;
    const bodies = [
      { themeMode: 'dark' as const },
      { customFontId: font.data!.id, customColorSchemeId: scheme.data!.id, fontSize: 'large' as const },
    ];
    for (const body of bodies) {
      const statements = await captureStatements(knex, REQUEST_WORK, async () => {
        const res = await api.PATCH('/api/v1/appearance', { body });
        expect(res.response.status, JSON.stringify(res.error)).toBe(200);
      });
      // One statement, outside any transaction (docs/data-access.md, "Writes in one statement").
      expect(
        statements.map((st) => st.sql.trim().split(/\s+/).slice(0, 3).join(' ')),
        JSON.stringify(statements.map((st) => st.sql)),
      ).toEqual(['with font as']);
      expect(statements[0]!.sql).toMatch(/insert into appearance_settings[\s\S]*insert into events/);
    }
    expect((await api.GET('/api/v1/appearance')).data).toMatchObject({
      themeMode: 'dark',
      fontSize: 'large',
      customFontId: font.data!.id,
      customColorSchemeId: scheme.data!.id,
    });
    const { rows } = await knex.raw<{ rows: Array<{ data: unknown }> }>(
      `select data from events where account_id = ? and type = 'appearance.changed' order by id`,
      [userId],
    );
    expect(rows.map((r) => r.data).slice(-2)).toEqual([
      { id: userId, fields: ['themeMode'] },
      { id: userId, fields: ['customFontId', 'customColorSchemeId', 'fontSize'] },
    ]);
  });

  it('a custom font deleted while a PATCH selects it is either cleared after the PATCH or a 404, never an error', async () => {
    const { api } = await server.user({ account: { plan: 'pro' } });
    await api.PATCH('/api/v1/appearance', { body: { themeMode: 'dark' } });
    for (let i = 0; i < 6; i++) {
      const font = await api.POST('/api/v1/appearance/custom-fonts', {
        body: { name: `F${i}`, sourceUrl: `https://fonts.example.org/${i}.woff2` },
      });
      const fontId = font.data!.id;
      const [set, del] = await Promise.all([
        api.PATCH('/api/v1/appearance', { body: { customFontId: fontId } }),
        api.DELETE('/api/v1/appearance/custom-fonts/{fontId}', { params: { path: { fontId } } }),
      ]);
      expect(del.response.status).toBe(204);
      if (set.response.status === 200) expect(set.data?.customFontId).toBe(fontId);
      else expect(set.error).toEqual({ code: 'NOT_FOUND', message: 'Custom font not found' });
      expect((await api.GET('/api/v1/appearance')).data?.customFontId).toBeNull();
    }
  });

  it('a refused PATCH writes nothing: no document, no event', async () => {
    const { api, userId } = await server.user({ account: { plan: 'free' } });
    const refused = await api.PATCH('/api/v1/appearance', {
      body: { themeMode: 'dark', customColorSchemeId: '00000000-0000-4000-8000-00000000abcd' },
    });
    expect(refused.error).toEqual({ code: 'NOT_FOUND', message: 'Custom colour scheme not found' });
    const forbidden = await api.PATCH('/api/v1/appearance', {
      body: { themeMode: 'dark', customFontId: '00000000-0000-4000-8000-00000000f0f0' },
    });
    expect(forbidden.error).toEqual({ code: 'FORBIDDEN', message: 'Custom fonts need the Pro plan or higher' });
    expect((await api.GET('/api/v1/appearance')).response.status).toBe(404);
    const { rows } = await server.deps.db.knex.raw<{ rows: unknown[] }>(
      `select 1 from events where account_id = ? and type = 'appearance.changed'`,
      [userId],
    );
    expect(rows).toEqual([]);
  });
});

describe('persistence failure', () => {
  it('PATCH and reset answer 500 INTERNAL with a generic message when the write fails, and nothing changes', async () => {
    const lines: string[] = [];
    const s = await new TestServer().start({
      clock: () => now,
      env: { LOG_LEVEL: 'error' },
      logStream: { write: (line) => void lines.push(line) },
    });
    try {
      const { api, apiKey } = await s.user();
      const saved = await api.PATCH('/api/v1/appearance', { body: { themeMode: 'dark' } });
      expect(saved.response.status).toBe(200);
      // A write the database refuses that is not an outage: a trigger raising on every write to the table.
      await s.deps.db.knex.raw(`
        create function refuse_appearance_write() returns trigger language plpgsql as $$
        begin
          raise exception 'appearance_settings write refused by refuse_appearance_write';
        end
        $$`);
      await s.deps.db.knex.raw(
        'create trigger refuse_appearance_write before insert or update on appearance_settings for each row execute function refuse_appearance_write()',
      );

      const raw = await s.fetch('/api/v1/appearance', {
        method: 'PATCH',
        headers: jsonHeaders(apiKey),
        body: JSON.stringify({ themeMode: 'light' }),
      });
      expect(raw.status).toBe(500);
      const text = await raw.text();
      expect(JSON.parse(text)).toEqual({ code: 'INTERNAL', message: 'Internal server error' });
      expect(text).not.toMatch(/appearance_settings|refuse_appearance_write|trigger|insert|update|P0001/i);

      const patch = await api.PATCH('/api/v1/appearance', { body: { themeMode: 'light', reduceMotion: true } });
      const reset = await api.POST('/api/v1/appearance/reset');
      const fresh = await (await s.user()).api.PATCH('/api/v1/appearance', { body: { fontSize: 'large' } });
      for (const res of [patch, reset, fresh]) {
        expect(res.response.status).toBe(500);
        expect(res.error).toEqual({ code: 'INTERNAL', message: 'Internal server error' });
      }
      expect((await api.GET('/api/v1/appearance')).data).toEqual(saved.data);
      expect(s.violations).toEqual([]);
      // The cause is in the server log, not in the response.
      expect(lines.some((l) => l.includes('refuse_appearance_write'))).toBe(true);
    } finally {
      await s.close();
    }
  });
});

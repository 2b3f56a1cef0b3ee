import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../server/config.ts';
import { createMember } from './helpers/fixtures.ts';
import { TestServer } from './helpers/server.ts';

const SECRET_TEXT = 'provider-internal-detail-7731';

/** A loopback stand-in for Tenor v2: records every request; `mode` makes it fail. */
let mode: 'ok' | 'error' | 'garbage' | 'redirect' = 'ok';
const seen: URL[] = [];
let provider: Server;

function tenorResult(id: string, extra: Record<string, unknown> = {}) {
  return {
    id,
    title: `GIF ${id}`,
    content_description: 'desc',
    media_formats: {
      gif: { url: `https://media.example/${id}.gif`, dims: [498, 280], size: 1000 },
      tinygif: { url: `https://media.example/${id}-tiny.gif`, dims: [220, 124] },
      mp4: { url: `https://media.example/${id}.mp4`, dims: [498, 280] },
    },
    ...extra,
  };
}

beforeAll(async () => {
  provider = createServer((req, res) => {
    const url = new URL(req.url!, 'http://provider');
    seen.push(url);
    if (mode === 'error') {
      res.writeHead(500, { 'content-type': 'text/plain' }).end(SECRET_TEXT);
      return;
    }
    if (mode === 'redirect') {
      res.writeHead(302, { location: 'http://169.254.169.254/latest/meta-data/' }).end();
      return;
    }
    if (mode === 'garbage') {
      res.writeHead(200, { 'content-type': 'application/json' }).end(`{"oops": ${SECRET_TEXT}`);
      return;
    }
    const json = (body: unknown) =>
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(body));
    if (url.pathname === '/v2/categories') {
      json({
        tags: [
          {
            searchterm: 'excited',
            path: '/v2/search?q=excited',
            image: 'https://media.example/excited.gif',
            name: '#excited',
          },
          { searchterm: 'sad', image: 'http://insecure/sad.gif', name: '#sad' },
        ],
      });
      return;
    }
    const q = url.searchParams.get('q') ?? 'featured';
    const results = [
      tenorResult(`${q}1`),
      tenorResult(`${q}2`, { media_formats: { gif: { url: 'http://insecure.example/x.gif', dims: [1, 1] } } }), // not https: left out
      tenorResult(`${q}3`, {
        title: '',
        media_formats: { gif: { url: `https://media.example/${q}3.gif`, dims: [10, 20] } },
      }),
    ];
    json({ results, next: url.searchParams.get('pos') ? '' : 'CURSOR-2' });
  });
  await new Promise<void>((resolve) => provider.listen(0, '127.0.0.1', resolve));
});

/** A loopback stand-in for GIPHY's API v1 (`/v1/gifs/...`): 7 results per query, served by offset. */
const giphySeen: URL[] = [];
let giphy: Server;
const GIPHY_TOTAL = 7;

function giphyResult(id: string, extra: Record<string, unknown> = {}) {
  return {
    type: 'gif',
    id,
    title: `GIPHY ${id}`,
    alt_text: 'alt',
    images: {
      original: {
        url: `https://media.giphy.example/${id}/giphy.gif?cid=x`,
        width: '480',
        height: '270',
        mp4: `https://media.giphy.example/${id}/giphy.mp4`,
      },
      fixed_width_small: { url: `https://media.giphy.example/${id}/100w.gif` },
    },
    ...extra,
  };
}

beforeAll(async () => {
  giphy = createServer((req, res) => {
    const url = new URL(req.url!, 'http://giphy');
    giphySeen.push(url);
    const json = (body: unknown) =>
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(body));
    if (url.pathname === '/v1/gifs/categories') {
      json({
        data: [
          {
            name: 'Actions',
            name_encoded: 'actions',
            gif: { images: { fixed_width_small: { url: 'https://media.giphy.example/actions.gif' } } },
          },
          { name: 'No id' },
        ],
        meta: { status: 200 },
      });
      return;
    }
    const offset = Number(url.searchParams.get('offset') ?? 0);
    const limit = Number(url.searchParams.get('limit'));
    const q = url.searchParams.get('q') ?? 'trending';
    const all = Array.from({ length: GIPHY_TOTAL }, (_, i) =>
      i === 1
        ? giphyResult(`${q}${i}`, {
            title: '',
            images: { original: { url: `https://media.giphy.example/${q}${i}.gif`, width: 'wide', height: '10' } },
          })
        : i === 2
          ? giphyResult(`${q}${i}`, { images: { original: { url: 'http://insecure.example/x.gif' } } }) // not https: left out
          : giphyResult(`${q}${i}`),
    );
    const data = all.slice(offset, offset + limit);
    json({
      data,
      pagination: { total_count: GIPHY_TOTAL, count: data.length, offset },
      meta: { status: 200, msg: 'OK' },
    });
  });
  await new Promise<void>((resolve) => giphy.listen(0, '127.0.0.1', resolve));
});

const servers = { keyed: new TestServer(), keyless: new TestServer(), giphy: new TestServer() };
beforeAll(async () => {
  const port = (provider.address() as AddressInfo).port;
  await servers.keyed.start({
    env: {
      GIF_API_KEY: 'test-gif-key',
      GIF_API_BASE_URL: `http://127.0.0.1:${port}/v2`,
      GIF_CACHE_MAX_ENTRIES: '3',
      GIF_CACHE_TTL_MS: '600000',
    },
  });
  await servers.keyless.start({ env: { GIF_API_BASE_URL: `http://127.0.0.1:${port}/v2` } });
  await servers.giphy.start({
    env: {
      GIF_PROVIDER: 'giphy',
      GIF_API_KEY: 'giphy-key',
      GIF_API_BASE_URL: `http://127.0.0.1:${(giphy.address() as AddressInfo).port}/v1/gifs`,
      GIF_CACHE_TTL_MS: '0',
    },
  });
});

afterAll(async () => {
  await servers.keyed.close();
  await servers.keyless.close();
  await servers.giphy.close();
  await new Promise((resolve) => provider.close(resolve));
  await new Promise((resolve) => giphy.close(resolve));
});

describe('GIF proxy', () => {
  it('search: normalised results, cursor passthrough, filter and locale from the preferences unless given', async () => {
    const { api } = await servers.keyed.user();
    seen.length = 0;
    const res = await api.GET('/api/v1/messaging/gifs/search', { params: { query: { query: 'cat', limit: 10 } } });
    expect(res.response.status).toBe(200);
    expect(res.data).toEqual({
      items: [
        {
          id: 'cat1',
          provider: 'tenor',
          title: 'GIF cat1',
          url: 'https://media.example/cat1.gif',
          previewUrl: 'https://media.example/cat1-tiny.gif',
          mp4Url: 'https://media.example/cat1.mp4',
          width: 498,
          height: 280,
        },
        {
          id: 'cat3',
          provider: 'tenor',
          title: 'desc',
          url: 'https://media.example/cat3.gif',
          previewUrl: 'https://media.example/cat3.gif',
          mp4Url: null,
          width: 10,
          height: 20,
        },
      ],
      nextCursor: 'CURSOR-2',
    });
    expect(seen).toHaveLength(1);
    expect(seen[0]!.pathname).toBe('/v2/search');
    expect(Object.fromEntries(seen[0]!.searchParams)).toMatchObject({
      q: 'cat',
      limit: '10',
      key: 'test-gif-key',
      contentfilter: 'medium',
    });
    expect(seen[0]!.searchParams.has('locale')).toBe(false);

    // The account's GIF preferences apply; explicit query parameters win.
    await api.PUT('/api/v1/messaging/preferences/gif', {
      body: { version: 1, contentFilter: 'high', locale: 'fr_FR', autoplay: true },
    });
    const next = await api.GET('/api/v1/messaging/gifs/search', {
      params: { query: { query: 'cat', cursor: 'CURSOR-2' } },
    });
    expect(next.data!.nextCursor).toBeNull();
    expect(Object.fromEntries(seen[1]!.searchParams)).toMatchObject({
      q: 'cat',
      pos: 'CURSOR-2',
      limit: '20',
      contentfilter: 'high',
      locale: 'fr_FR',
    });
    await api.GET('/api/v1/messaging/gifs/search', {
      params: { query: { query: 'dog', contentFilter: 'off', locale: 'de' } },
    });
    expect(Object.fromEntries(seen[2]!.searchParams)).toMatchObject({ q: 'dog', contentfilter: 'off', locale: 'de' });
  });

  it('browse: featured without a term, else the category or the query; categories normalised', async () => {
    const { api } = await servers.keyed.user();
    seen.length = 0;
    const featured = await api.GET('/api/v1/messaging/gifs/browse', { params: { query: { limit: 5 } } });
    expect(featured.data!.items.map((g) => g.id)).toEqual(['featured1', 'featured3']);
    expect(seen.at(-1)!.pathname).toBe('/v2/featured');
    await api.GET('/api/v1/messaging/gifs/browse', {
      params: { query: { categoryId: 'excited', query: 'ignored', limit: 5 } },
    });
    expect([seen.at(-1)!.pathname, seen.at(-1)!.searchParams.get('q')]).toEqual(['/v2/search', 'excited']);
    await api.GET('/api/v1/messaging/gifs/browse', { params: { query: { query: 'owl', limit: 5 } } });
    expect(seen.at(-1)!.searchParams.get('q')).toBe('owl');
    const cats = await api.GET('/api/v1/messaging/gifs/categories');
    expect(cats.data).toEqual([
      { id: 'excited', name: '#excited', previewUrl: 'https://media.example/excited.gif' },
      { id: 'sad', name: '#sad', previewUrl: null },
    ]);
  });

  it('caches answers briefly in a bounded map (oldest out first)', async () => {
    const { api } = await servers.keyed.user();
    const searchFor = (query: string) =>
      api.GET('/api/v1/messaging/gifs/search', { params: { query: { query, limit: 7 } } });
    seen.length = 0;
    await searchFor('c-a');
    await searchFor('c-a');
    expect(seen).toHaveLength(1);
    await searchFor('c-b');
    await searchFor('c-c');
    await searchFor('c-d'); // a fourth entry: the oldest (c-a) leaves
    expect(seen).toHaveLength(4);
    await searchFor('c-d');
    expect(seen).toHaveLength(4);
    await searchFor('c-a');
    expect(seen).toHaveLength(5);
  });

  it('provider failures (error status, bad JSON, a redirect: never followed) are 503 without the provider’s text; no key is 503', async () => {
    const { api } = await servers.keyed.user();
    for (const m of ['error', 'garbage', 'redirect'] as const) {
      mode = m;
      try {
        const res = await api.GET('/api/v1/messaging/gifs/search', { params: { query: { query: `fail-${m}` } } });
        expect(res.response.status).toBe(503);
        expect(res.error).toEqual({ code: 'PRECONDITION_FAILED', message: 'The GIF provider is not available' });
        expect(JSON.stringify(res.error)).not.toContain(SECRET_TEXT);
      } finally {
        mode = 'ok';
      }
    }
    const keyless = await servers.keyless.user();
    const before = seen.length;
    const none = { code: 'PRECONDITION_FAILED', message: 'GIFs are not configured on this server' };
    expect(
      (await keyless.api.GET('/api/v1/messaging/gifs/search', { params: { query: { query: 'cat' } } })).error,
    ).toEqual(none);
    expect((await keyless.api.GET('/api/v1/messaging/gifs/browse')).error).toEqual(none);
    expect((await keyless.api.GET('/api/v1/messaging/gifs/categories')).error).toEqual(none);
    expect(seen.length).toBe(before);
  });

  it('validates the query parameters', async () => {
    const { api } = await servers.keyed.user();
    const bad: Array<Record<string, unknown>> = [
      {},
      { query: '' },
      { query: 'x'.repeat(101) },
      { query: 'a', limit: 0 },
      { query: 'a', limit: 51 },
      { query: 'a', contentFilter: 'rude' },
      { query: 'a', locale: 'english' },
      { query: 'a', cursor: 'c'.repeat(201) },
    ];
    for (const query of bad) {
      expect(
        (await api.GET('/api/v1/messaging/gifs/search', { params: { query: query as never } })).response.status,
        JSON.stringify(query),
      ).toBe(400);
    }
    const readOnly = await servers.keyed.user({ scopes: { members: 'read' } });
    expect((await readOnly.api.GET('/api/v1/messaging/gifs/categories')).response.status).toBe(403);
  });

  it('gifMetadata on send: stored and read back as gif; content optional with it; validated', async () => {
    const { api } = await servers.keyed.user();
    const memberId = await createMember(api);
    const spaceId = (await api.POST('/api/v1/messaging/spaces', { body: { name: 'S' } })).data!.id;
    const channelId = (
      await api.POST('/api/v1/messaging/spaces/{spaceId}/channels', {
        params: { path: { spaceId } },
        body: { name: 'c' },
      })
    ).data!.id;
    const gif = (await api.GET('/api/v1/messaging/gifs/search', { params: { query: { query: 'send' } } })).data!
      .items[0]!;
    const ch = { params: { path: { channelId } } };
    const sent = await api.POST('/api/v1/messaging/channels/{channelId}/messages', {
      ...ch,
      body: { memberId, gifMetadata: gif },
    });
    expect(sent.response.status).toBe(201);
    expect([sent.data!.content, sent.data!.gif]).toEqual([null, gif]);
    const withText = await api.POST('/api/v1/messaging/channels/{channelId}/messages', {
      ...ch,
      body: { memberId, content: 'look', gifMetadata: gif },
    });
    expect([withText.data!.content, withText.data!.gif]).toEqual(['look', gif]);
    const page = (await api.GET('/api/v1/messaging/channels/{channelId}/messages', ch)).data!;
    expect(page.items.map((m) => [m.content, m.gif])).toEqual([
      ['look', gif],
      [null, gif],
    ]);
    expect(
      (
        await api.POST('/api/v1/messaging/channels/{channelId}/messages', {
          ...ch,
          body: { memberId, content: 'plain' },
        })
      ).data!.gif,
    ).toBeNull();
    // A GIF of the other provider is accepted as well (it is metadata, not fetched again).
    const fromGiphy = { ...gif, provider: 'giphy' as const };
    expect(
      (
        await api.POST('/api/v1/messaging/channels/{channelId}/messages', {
          ...ch,
          body: { memberId, gifMetadata: fromGiphy },
        })
      ).data!.gif,
    ).toEqual(fromGiphy);
    for (const bad of [
      { ...gif, url: 'http://media.example/x.gif' },
      { ...gif, provider: 'imgur' },
      { ...gif, extra: 1 },
      { ...gif, id: '' },
      { id: gif.id },
    ]) {
      expect(
        (
          await api.POST('/api/v1/messaging/channels/{channelId}/messages', {
            ...ch,
            body: { memberId, gifMetadata: bad as never },
          })
        ).response.status,
        JSON.stringify(bad),
      ).toBe(400);
    }
  });
});

describe('GIPHY (GIF_PROVIDER=giphy)', () => {
  it('is configured by GIF_PROVIDER, with GIPHY’s API as the default base URL', () => {
    expect(loadConfig({ GIF_PROVIDER: 'giphy' }).gifApiBaseUrl).toBe('https://api.giphy.com/v1/gifs');
    expect(loadConfig({}).gifApiBaseUrl).toBe('https://tenor.googleapis.com/v2');
    expect(loadConfig({ GIF_PROVIDER: 'giphy', GIF_API_BASE_URL: 'http://proxy.internal/giphy/' }).gifApiBaseUrl).toBe(
      'http://proxy.internal/giphy',
    );
    expect(() => loadConfig({ GIF_PROVIDER: 'imgur' })).toThrow(ConfigError);
    expect(() => loadConfig({ GIF_PROVIDER: 'imgur' })).toThrow(/GIF_PROVIDER must be tenor .* or giphy/);
  });

  it('search: normalised to the same Gif shape; rating from contentFilter, lang from locale, offsets as cursors', async () => {
    const { api } = await servers.giphy.user();
    giphySeen.length = 0;
    const first = await api.GET('/api/v1/messaging/gifs/search', { params: { query: { query: 'cat', limit: 3 } } });
    expect(first.response.status).toBe(200);
    expect(first.data).toEqual({
      items: [
        {
          id: 'cat0',
          provider: 'giphy',
          title: 'GIPHY cat0',
          url: 'https://media.giphy.example/cat0/giphy.gif?cid=x',
          previewUrl: 'https://media.giphy.example/cat0/100w.gif',
          mp4Url: 'https://media.giphy.example/cat0/giphy.mp4',
          width: 480,
          height: 270,
        },
        {
          id: 'cat1',
          provider: 'giphy',
          title: 'alt',
          url: 'https://media.giphy.example/cat1.gif',
          previewUrl: 'https://media.giphy.example/cat1.gif',
          mp4Url: null,
          width: 0,
          height: 10,
        },
      ],
      nextCursor: '3',
    });
    expect(giphySeen[0]!.pathname).toBe('/v1/gifs/search');
    expect(Object.fromEntries(giphySeen[0]!.searchParams)).toEqual({
      api_key: 'giphy-key',
      q: 'cat',
      limit: '3',
      rating: 'pg',
    });

    // The cursor is the next offset; the last page has none.
    const second = await api.GET('/api/v1/messaging/gifs/search', {
      params: { query: { query: 'cat', limit: 3, cursor: first.data!.nextCursor! } },
    });
    expect([second.data!.items.map((g) => g.id), second.data!.nextCursor]).toEqual([['cat3', 'cat4', 'cat5'], '6']);
    const last = await api.GET('/api/v1/messaging/gifs/search', {
      params: { query: { query: 'cat', limit: 3, cursor: '6' } },
    });
    expect([last.data!.items.map((g) => g.id), last.data!.nextCursor]).toEqual([['cat6'], null]);
    expect(giphySeen[1]!.searchParams.get('offset')).toBe('3');

    // Filters: each level maps to a GIPHY rating; the locale's language is GIPHY's lang.
    const ratings: Record<string, string> = { off: 'r', low: 'pg-13', medium: 'pg', high: 'g' };
    for (const [contentFilter, rating] of Object.entries(ratings)) {
      await api.GET('/api/v1/messaging/gifs/search', {
        params: { query: { query: 'dog', contentFilter: contentFilter as 'off', locale: 'pt_BR' } },
      });
      expect([giphySeen.at(-1)!.searchParams.get('rating'), giphySeen.at(-1)!.searchParams.get('lang')]).toEqual([
        rating,
        'pt',
      ]);
    }
    // Cursors GIPHY never gave out are refused before any call.
    const before = giphySeen.length;
    for (const cursor of ['CURSOR-2', '-1', '5000', '1.5']) {
      const res = await api.GET('/api/v1/messaging/gifs/search', { params: { query: { query: 'cat', cursor } } });
      expect([res.response.status, res.error], cursor).toEqual([
        400,
        { code: 'BAD_REQUEST', message: 'cursor is not a cursor of the configured GIF provider' },
      ]);
    }
    expect(giphySeen.length).toBe(before);
  });

  it('browse: trending without a term, else a search; categories normalised', async () => {
    const { api } = await servers.giphy.user();
    giphySeen.length = 0;
    const trending = await api.GET('/api/v1/messaging/gifs/browse', {
      params: { query: { limit: 2, contentFilter: 'high', locale: 'de' } },
    });
    expect(trending.data!.items.map((g) => g.id)).toEqual(['trending0', 'trending1']);
    expect(giphySeen[0]!.pathname).toBe('/v1/gifs/trending');
    expect(Object.fromEntries(giphySeen[0]!.searchParams)).toEqual({ api_key: 'giphy-key', limit: '2', rating: 'g' });
    await api.GET('/api/v1/messaging/gifs/browse', { params: { query: { categoryId: 'actions', limit: 2 } } });
    expect([giphySeen[1]!.pathname, giphySeen[1]!.searchParams.get('q')]).toEqual(['/v1/gifs/search', 'actions']);
    const cats = await api.GET('/api/v1/messaging/gifs/categories');
    expect(cats.data).toEqual([
      { id: 'actions', name: 'Actions', previewUrl: 'https://media.giphy.example/actions.gif' },
    ]);
    expect(Object.fromEntries(giphySeen[2]!.searchParams)).toEqual({ api_key: 'giphy-key' });
  });
});

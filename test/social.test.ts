import { describe, expect, it } from 'vitest';
import { createMember, UNKNOWN_ID } from './helpers/fixtures.ts';
import { addGalleryImage, galleryUrlOf, uniqueImage } from './helpers/gallery.ts';
import { captureStatements, REQUEST_WORK } from './helpers/plans.ts';
import { jsonHeaders, useServer, type TestUser } from './helpers/server.ts';
import { untilWaitingForLock } from './helpers/db.ts';

let now = 1_800_000_000_000;
const server = useServer({ clock: () => now });

/** custom_badge images must be in the caller's gallery: these are uploaded before a badge names them. */
const BADGE_IMAGES = Array.from({ length: 25 }, (_, i) => uniqueImage(i));
const GALLERY = (n: number) => galleryUrlOf(BADGE_IMAGES[n]!);
async function uploadBadgeImages(u: TestUser, count: number): Promise<void> {
  for (const bytes of BADGE_IMAGES.slice(0, count)) await addGalleryImage(server, u, bytes);
}
const s = (n: number, c = 'x') => c.repeat(n);

async function addLink(u: TestUser, extra: Record<string, unknown> = {}): Promise<string> {
  const res = await u.api.POST('/api/v1/social/links', {
    body: { platform: 'bluesky', displayName: 'Alex', visibility: 'public', ...extra } as never,
  });
  expect(res.response.status, JSON.stringify(res.error)).toBe(201);
  return res.data!.linkId;
}

async function addWidget(
  u: TestUser,
  config: Record<string, unknown>,
  extra: Record<string, unknown> = {},
): Promise<string> {
  const res = await u.api.POST('/api/v1/social/widgets', {
    body: { type: config.kind, config, visibility: 'public', size: 'medium', ...extra } as never,
  });
  expect(res.response.status, JSON.stringify(res.error)).toBe(201);
  return res.data!.widgetId;
}

const section = async (u: TestUser) => (await u.api.GET('/api/v1/social')).data!;

describe('social section and theme', () => {
  it('starts empty; theme fields merge, null clears, every write moves updatedAt', async () => {
    const u = await server.user();
    expect(await section(u)).toEqual({
      userId: u.userId,
      links: [],
      widgets: [],
      musicConnections: [],
      theme: null,
      updatedAt: null,
    });
    now += 1000;
    expect(
      (await u.api.PATCH('/api/v1/social', { body: { theme: { accentColor: '#7A5CFA', borderStyle: 'subtle' } } }))
        .response.status,
    ).toBe(204);
    expect((await section(u)).updatedAt).toBe(now);
    now += 1000;
    await u.api.PATCH('/api/v1/social', { body: { theme: { cornerStyle: 'sharp', accentColor: '#000000' } } });
    expect((await section(u)).theme).toEqual({ accentColor: '#000000', borderStyle: 'subtle', cornerStyle: 'sharp' });
    await u.api.PATCH('/api/v1/social', { body: { theme: null } });
    const after = await section(u);
    expect(after.theme).toBeNull();
    expect(after.updatedAt).toBe(now);
    now += 1000;
    await addLink(u);
    expect((await section(u)).updatedAt).toBe(now);
  });

  it('theme limits and enums', async () => {
    const u = await server.user();
    const ok = {
      cardBackground: s(64),
      accentColor: s(32),
      borderStyle: 'strong',
      cornerStyle: 'rounded',
      iconStyle: 'filled',
    } as const;
    expect((await u.api.PATCH('/api/v1/social', { body: { theme: ok } })).response.status).toBe(204);
    expect((await section(u)).theme).toEqual(ok);
    for (const theme of [
      { cardBackground: s(65) },
      { accentColor: s(33) },
      { borderStyle: 'thick' },
      { cornerStyle: 'round' },
      { iconStyle: 'bold' },
      { font: 'x' },
    ]) {
      expect(
        (await u.api.PATCH('/api/v1/social', { body: { theme } as never })).response.status,
        JSON.stringify(theme),
      ).toBe(400);
    }
    expect((await u.api.PATCH('/api/v1/social', { body: {} as never })).response.status).toBe(400);
    expect((await section(u)).theme).toEqual(ok);
  });

  it('needs the social scope at the right level', async () => {
    const reader = await server.user({ scopes: { social: 'read' } });
    expect((await reader.api.GET('/api/v1/social')).response.status).toBe(200);
    const denied = await reader.api.POST('/api/v1/social/links', {
      body: { platform: 'github', displayName: 'x', visibility: 'public' } as never,
    });
    expect(denied.response.status).toBe(403);
    expect(denied.error).toEqual({ code: 'FORBIDDEN', message: 'Missing API key scope: social requires read_write' });
    const none = await server.user({ scopes: { guestbook: 'read_write' } });
    expect((await none.api.GET('/api/v1/social')).response.status).toBe(403);
  });
});

describe('links', () => {
  it('create with defaults and auto sortOrder, partial update (null clears), delete', async () => {
    const u = await server.user();
    const a = await addLink(u, { handle: '@alex', url: 'https://bsky.app/profile/alex', featured: true });
    now += 10;
    const b = await addLink(u, { platform: 'custom', displayName: 'Site' });
    const c = await addLink(u, { platform: 'github', displayName: 'Code', sortOrder: 10 });
    const d = await addLink(u, { platform: 'steam', displayName: 'Games' });
    const links = (await section(u)).links;
    expect(links.map((l) => [l.id, l.sortOrder])).toEqual([
      [a, 0],
      [b, 1],
      [c, 10],
      [d, 11],
    ]);
    expect(links[0]).toEqual({
      id: a,
      platform: 'bluesky',
      displayName: 'Alex',
      handle: '@alex',
      url: 'https://bsky.app/profile/alex',
      description: null,
      badge: null,
      accentColor: null,
      avatarUrl: null,
      visibility: 'public',
      featured: true,
      sortOrder: 0,
      createdAt: now - 10,
      updatedAt: now - 10,
    });
    expect(links[1]!.featured).toBe(false);
    now += 10;
    const patched = await u.api.PATCH('/api/v1/social/links/{linkId}', {
      params: { path: { linkId: a } },
      body: { handle: null, badge: 'main', visibility: 'private' },
    });
    expect(patched.response.status).toBe(200);
    expect(patched.data).toEqual({ linkId: a });
    const after = (await section(u)).links.find((l) => l.id === a)!;
    expect(after).toMatchObject({
      handle: null,
      badge: 'main',
      visibility: 'private',
      url: 'https://bsky.app/profile/alex',
      displayName: 'Alex',
      updatedAt: now,
    });
    expect(
      (await u.api.DELETE('/api/v1/social/links/{linkId}', { params: { path: { linkId: a } } })).response.status,
    ).toBe(204);
    expect((await section(u)).links.map((l) => l.id)).toEqual([b, c, d]);
    expect(
      (await u.api.DELETE('/api/v1/social/links/{linkId}', { params: { path: { linkId: a } } })).response.status,
    ).toBe(404);
  });

  it('creates a link in one statement: the profile touched, the link, its event', async () => {
    const u = await server.user();
    await addLink(u); // warms the key cache
    const statements = await captureStatements(server.deps.db.knex, REQUEST_WORK, async () => {
      await addLink(u, { platform: 'github', displayName: 'Code' });
    });
    // docs/data-access.md, "Writes in one statement": no BEGIN, no COMMIT.
    expect(
      statements.map((st) => st.sql.split(/\s+/).slice(0, 3).join(' ')),
      JSON.stringify(statements.map((st) => st.sql)),
    ).toEqual(['with seen as']);
    expect(statements[0]!.sql).toMatch(
      /insert into social_profiles[\s\S]*insert into social_links[\s\S]*insert into events/,
    );
    const events = await server.deps.db.knex('events').where({ account_id: u.userId }).orderBy('id');
    expect(events.map((e) => [e.type, e.data])).toEqual(
      (await section(u)).links.map((l) => ['social_profile.changed', { id: l.id, kind: 'link' }]),
    );
  });

  it('a keyed link create is one statement (the link storing its answer under the key); a replay finds the key taken', async () => {
    const u = await server.user();
    await addLink(u); // warms the key cache
    const knex = server.deps.db.knex;
    const keyed = () =>
      server.fetch('/api/v1/social/links', {
        method: 'POST',
        headers: { ...jsonHeaders(u.apiKey), 'Idempotency-Key': 'link-1' },
        body: JSON.stringify({ platform: 'github', displayName: 'Code', visibility: 'public' }),
      });
    let first = '';
    const statements = await captureStatements(knex, REQUEST_WORK, async () => {
      const res = await keyed();
      expect(res.status).toBe(201);
      first = await res.text();
    });
    expect(
      statements.map((st) => st.sql.split(/\s+/).slice(0, 3).join(' ')),
      JSON.stringify(statements.map((st) => st.sql)),
    ).toEqual(['with seen as']);
    expect(statements[0]!.sql).toMatch(
      /insert into social_links[\s\S]*insert into idempotency_keys[\s\S]*insert into events/,
    );
    const replayed = await captureStatements(knex, REQUEST_WORK, async () => {
      const again = await keyed();
      expect([again.status, await again.text(), again.headers.get('idempotent-replayed')]).toEqual([
        201,
        first,
        'true',
      ]);
    });
    expect(replayed.map((st) => st.sql.split(/\s+/).slice(0, 3).join(' '))).toEqual([
      'with seen as',
      'select id, fingerprint,',
    ]);
    expect((await section(u)).links.map((l) => l.id)).toEqual([expect.any(String), JSON.parse(first).linkId]);
  });

  it('a keyed link create whose profile changed while it waited writes nothing and runs again in a transaction', async () => {
    const u = await server.user();
    await addLink(u, { displayName: 'first' });
    const knex = server.deps.db.knex;
    // Another social write holds the profile row. On PostgreSQL the create's statement starts (its
    // snapshot sees the profile as it was) and waits for the row, then finds it changed; on the
    // embedded database (one connection) it waits for the connection and runs after it.
    const other = await knex.transaction();
    await other.raw('update social_profiles set updated_at = updated_at + 1 where user_id = ?', [u.userId]);
    let statements: Array<{ sql: string }> = [];
    let answer: { status: number; text: string } | undefined;
    const pending = captureStatements(knex, REQUEST_WORK, async () => {
      const res = await server.fetch('/api/v1/social/links', {
        method: 'POST',
        headers: { ...jsonHeaders(u.apiKey), 'Idempotency-Key': 'link-stale' },
        body: JSON.stringify({ platform: 'github', displayName: 'late', visibility: 'public' }),
      });
      answer = { status: res.status, text: await res.text() };
    }).then((st) => {
      statements = st;
    });
    // PostgreSQL: until the statement waits for the row. Embedded (one connection): time for the
    // request to queue behind the transaction; had it not, it runs after and answers the same.
    if (server.databaseUrl) await untilWaitingForLock(knex, "the link's statement");
    else await new Promise((resolve) => setTimeout(resolve, 300));
    await other.commit();
    await pending;
    expect(answer!.status).toBe(201);
    const words = statements
      .filter((st) => !st.sql.startsWith('update social_profiles set updated_at = updated_at + 1'))
      .map((st) => st.sql.split(/\s+/).slice(0, 3).join(' ').toLowerCase());
    // The statement that found the profile changed, then the transaction: the key's lock, the link, its answer stored (the test's own commit left out).
    if (server.databaseUrl)
      expect(
        words.filter((w) => w !== 'commit;'),
        JSON.stringify(words),
      ).toEqual([
        'with seen as',
        'begin;',
        'select pg_try_advisory_xact_lock(hashtextextended($1, 0))',
        'with seen as',
        'insert into idempotency_keys',
      ]);
    const links = (await section(u)).links;
    expect(links.map((l) => [l.displayName, l.sortOrder])).toEqual([
      ['first', 0],
      ['late', 1],
    ]);
    expect(links[1]!.id).toBe(JSON.parse(answer!.text).linkId);
    const again = await server.fetch('/api/v1/social/links', {
      method: 'POST',
      headers: { ...jsonHeaders(u.apiKey), 'Idempotency-Key': 'link-stale' },
      body: JSON.stringify({ platform: 'github', displayName: 'late', visibility: 'public' }),
    });
    expect([again.status, await again.text()]).toEqual([201, answer!.text]);
  });

  it('concurrent keyed creates without a sortOrder: distinct sort orders, one link per key', async () => {
    const u = await server.user();
    await addLink(u, { sortOrder: 4 });
    const create = (key: string) =>
      server
        .fetch('/api/v1/social/links', {
          method: 'POST',
          headers: { ...jsonHeaders(u.apiKey), 'Idempotency-Key': key },
          body: JSON.stringify({ platform: 'github', displayName: key, visibility: 'public' }),
        })
        .then(async (res) => ({ status: res.status, text: await res.text() }));
    const keys = Array.from({ length: 16 }, (_, i) => `race-${i}`);
    const answers = await Promise.all(keys.map(create));
    for (const a of answers) expect(a.status, a.text).toBe(201);
    const links = (await section(u)).links;
    expect(links.map((l) => l.sortOrder)).toEqual(Array.from({ length: 17 }, (_, i) => 4 + i));
    expect(new Set(links.slice(1).map((l) => l.id))).toEqual(new Set(answers.map((a) => JSON.parse(a.text).linkId)));
    for (const [i, key] of keys.entries()) expect((await create(key)).text).toBe(answers[i]!.text);
  });

  it('concurrent creates without a sortOrder each get one past the largest (distinct, in commit order)', async () => {
    const u = await server.user();
    await addLink(u, { sortOrder: 4 });
    // Enough at once that on PostgreSQL some statements start while another holds the profile row.
    const ids = await Promise.all(Array.from({ length: 24 }, (_, i) => addLink(u, { displayName: `L${i}` })));
    const links = (await section(u)).links;
    expect(links.map((l) => l.sortOrder)).toEqual(Array.from({ length: 25 }, (_, i) => 4 + i));
    expect(new Set(links.slice(1).map((l) => l.id))).toEqual(new Set(ids));
  });

  it('limits at and past each bound; platform list; music platform rejected', async () => {
    const u = await server.user();
    await addLink(u, {
      displayName: s(120),
      handle: s(120),
      description: s(280),
      badge: s(32),
      accentColor: s(32),
      avatarUrl: `https://e.org/${s(2048 - 14)}`,
      url: 'http://e.org',
    });
    for (const platform of [
      'twitter',
      'bluesky',
      'mastodon',
      'instagram',
      'tiktok',
      'youtube',
      'twitch',
      'discord',
      'reddit',
      'tumblr',
      'facebook',
      'threads',
      'github',
      'kofi',
      'patreon',
      'pinterest',
      'snapchat',
      'steam',
      'xbox',
      'playstation',
      'custom',
    ]) {
      await addLink(u, { platform });
    }
    const bad: Array<Record<string, unknown>> = [
      { displayName: '' },
      { displayName: s(121) },
      { handle: s(121) },
      { description: s(281) },
      { badge: s(33) },
      { accentColor: s(33) },
      { avatarUrl: `https://e.org/${s(2048 - 13)}` },
      { avatarUrl: 'not a url' },
      { url: 'ftp://e.org/x' },
      { url: 'javascript:alert(1)' },
      { platform: 'spotify' },
      { platform: 'Bluesky' },
      { visibility: 'everyone' },
      { sortOrder: -1 },
      { sortOrder: 1.5 },
      { extra: 1 },
    ];
    for (const extra of bad) {
      const res = await u.api.POST('/api/v1/social/links', {
        body: { platform: 'bluesky', displayName: 'Alex', visibility: 'public', ...extra } as never,
      });
      expect(res.response.status, JSON.stringify(extra)).toBe(400);
    }
    for (const missing of ['platform', 'displayName', 'visibility']) {
      const body: Record<string, unknown> = { platform: 'bluesky', displayName: 'Alex', visibility: 'public' };
      delete body[missing];
      expect((await u.api.POST('/api/v1/social/links', { body: body as never })).response.status, missing).toBe(400);
    }
    expect((await section(u)).links).toHaveLength(22);
    const id = (await section(u)).links[0]!.id;
    for (const body of [{}, { displayName: s(121) }, { platform: 'spotify' }, { displayName: null }]) {
      expect(
        (await u.api.PATCH('/api/v1/social/links/{linkId}', { params: { path: { linkId: id } }, body: body as never }))
          .response.status,
        JSON.stringify(body),
      ).toBe(400);
    }
  });

  it('unknown or other accounts’ links are 404 and unchanged', async () => {
    const u = await server.user();
    const other = await server.user();
    const theirs = await addLink(other, { displayName: 'Theirs' });
    for (const linkId of [theirs, UNKNOWN_ID]) {
      const res = await u.api.PATCH('/api/v1/social/links/{linkId}', {
        params: { path: { linkId } },
        body: { displayName: 'Mine now' },
      });
      expect(res.response.status).toBe(404);
      expect(res.error).toEqual({ code: 'NOT_FOUND', message: 'Link not found' });
      expect(
        (await u.api.DELETE('/api/v1/social/links/{linkId}', { params: { path: { linkId } } })).response.status,
      ).toBe(404);
    }
    expect((await section(other)).links[0]!.displayName).toBe('Theirs');
    expect(
      (await u.api.DELETE('/api/v1/social/links/{linkId}', { params: { path: { linkId: 'nope' } } })).response.status,
    ).toBe(400);
  });
});

const ALL_KINDS: Array<Record<string, unknown>> = [
  { kind: 'status', statusText: 'Resting' },
  { kind: 'community_server', serverName: 'Cosy', inviteUrl: 'https://chat.example.org/invite/abc' },
  {
    kind: 'currently_playing',
    provider: 'spotify',
    trackTitle: 'Song',
    artistName: 'Band',
    artworkUrl: 'https://i.example.org/a.jpg',
  },
  {
    kind: 'music',
    provider: 'spotify',
    resourceType: 'playlist',
    resourceId: 'abc123',
    widgetKind: 'embed',
    displayStyle: 'compact',
  },
  { kind: 'quote', quote: 'Be kind', author: 'Someone' },
  { kind: 'pronouns_identity', pronouns: 'they/them', identity: 'system' },
  { kind: 'mood', mood: 'calm', note: 'quiet' },
  { kind: 'custom_badge', imageUrls: [GALLERY(1)] },
  { kind: 'link_collection', linkIds: [] },
  { kind: 'media_favourites', entries: [{ label: 'Book', value: 'Piranesi' }] },
  { kind: 'guestbook', allowAnonymous: true },
  { kind: 'mutuals', maxItems: 12 },
  { kind: 'countdown', targetAt: 1_900_000_000_000, label: 'Birthday' },
  { kind: 'poll', question: 'Tea?', options: ['Yes', 'No'], allowMultipleSelections: true },
  { kind: 'sticker_board', stickerUrls: ['https://s.example.org/1.png'] },
  { kind: 'shrine', title: 'Shrine', body: 'Things' },
];

describe('widgets', () => {
  it('creates every one of the 16 kinds and reads them back in order with defaults', async () => {
    const u = await server.user();
    await uploadBadgeImages(u, 2);
    const ids = [];
    for (const config of ALL_KINDS) ids.push(await addWidget(u, config));
    const widgets = (await section(u)).widgets;
    expect(widgets.map((w) => w.id)).toEqual(ids);
    expect(widgets.map((w) => w.config)).toEqual(ALL_KINDS);
    expect(widgets.map((w) => w.sortOrder)).toEqual(ALL_KINDS.map((_, i) => i));
    expect(widgets[0]).toEqual({
      id: ids[0],
      type: 'status',
      title: null,
      config: ALL_KINDS[0],
      visibility: 'public',
      size: 'medium',
      sortOrder: 0,
      pinned: false,
      collapsed: false,
      createdAt: now,
      updatedAt: now,
    });
    // Defaults of optional booleans are written out.
    const gb = await addWidget(u, { kind: 'guestbook' });
    const poll = await addWidget(u, { kind: 'poll', question: 'Q', options: ['a', 'b'] });
    const after = (await section(u)).widgets;
    expect(after.find((w) => w.id === gb)!.config).toEqual({ kind: 'guestbook', allowAnonymous: false });
    expect(after.find((w) => w.id === poll)!.config).toEqual({
      kind: 'poll',
      question: 'Q',
      options: ['a', 'b'],
      allowMultipleSelections: false,
    });
  });

  it('type must equal config.kind, on create and on PATCH', async () => {
    const u = await server.user();
    const res = await u.api.POST('/api/v1/social/widgets', {
      body: { type: 'mood', config: { kind: 'status', statusText: 'x' }, visibility: 'public', size: 'small' } as never,
    });
    expect(res.response.status).toBe(400);
    expect(res.error!.message).toBe('type must equal config.kind');
    const id = await addWidget(u, { kind: 'status', statusText: 'x' });
    const path = { params: { path: { widgetId: id } } };
    expect(
      (await u.api.PATCH('/api/v1/social/widgets/{widgetId}', { ...path, body: { type: 'mood' } })).response.status,
    ).toBe(400);
    expect(
      (
        await u.api.PATCH('/api/v1/social/widgets/{widgetId}', {
          ...path,
          body: { config: { kind: 'mood', mood: 'ok' } },
        })
      ).response.status,
    ).toBe(400);
    expect(
      (
        await u.api.PATCH('/api/v1/social/widgets/{widgetId}', {
          ...path,
          body: { type: 'status', config: { kind: 'mood', mood: 'ok' } },
        })
      ).response.status,
    ).toBe(400);
    expect((await section(u)).widgets[0]!.config).toEqual({ kind: 'status', statusText: 'x' });
    now += 5;
    const ok = await u.api.PATCH('/api/v1/social/widgets/{widgetId}', {
      ...path,
      body: {
        type: 'mood',
        config: { kind: 'mood', mood: 'ok' },
        title: 'T',
        pinned: true,
        collapsed: true,
        size: 'full',
      },
    });
    expect(ok.response.status).toBe(200);
    expect(ok.data).toEqual({ widgetId: id });
    expect((await section(u)).widgets[0]).toMatchObject({
      type: 'mood',
      config: { kind: 'mood', mood: 'ok' },
      title: 'T',
      pinned: true,
      collapsed: true,
      size: 'full',
      updatedAt: now,
    });
    await u.api.PATCH('/api/v1/social/widgets/{widgetId}', { ...path, body: { title: null } });
    expect((await section(u)).widgets[0]!.title).toBeNull();
  });

  it('limits of the body and of each kind, at and past the bound', async () => {
    const u = await server.user();
    await uploadBadgeImages(u, 25);
    const link = await addLink(u);
    const good: Array<[Record<string, unknown>, Record<string, unknown>?]> = [
      [{ kind: 'status', statusText: s(1) }],
      [{ kind: 'status', statusText: s(280) }],
      [{ kind: 'mutuals', maxItems: 1 }],
      [{ kind: 'mutuals', maxItems: 40 }],
      [{ kind: 'custom_badge', imageUrls: Array.from({ length: 24 }, (_, i) => GALLERY(i)) }],
      [{ kind: 'link_collection', linkIds: [link] }],
      [{ kind: 'poll', question: 'q', options: ['a', 'b'] }],
      [{ kind: 'poll', question: 'q', options: ['1', '2', '3', '4', '5', '6', '7', '8'] }],
      [{ kind: 'sticker_board', stickerUrls: Array.from({ length: 100 }, (_, i) => `https://s.example.org/${i}.png`) }],
      [{ kind: 'status', statusText: 'x' }, { title: s(120) }],
      [{ kind: 'countdown', targetAt: 0, label: 'epoch' }],
    ];
    for (const [config, extra] of good) await addWidget(u, config, extra);
    const other = await server.user();
    const theirLink = await addLink(other);
    const bad: Array<[Record<string, unknown>, Record<string, unknown>?]> = [
      [{ kind: 'status', statusText: '' }],
      [{ kind: 'status', statusText: s(281) }],
      [{ kind: 'status' }],
      [{ kind: 'mutuals', maxItems: 0 }],
      [{ kind: 'mutuals', maxItems: 41 }],
      [{ kind: 'custom_badge', imageUrls: Array.from({ length: 25 }, (_, i) => GALLERY(i)) }],
      [{ kind: 'custom_badge', imageUrls: ['https://elsewhere.example.org/badge.png'] }],
      [{ kind: 'custom_badge', imageUrls: ['/api/v1/entry-images/' + '0'.repeat(64)] }],
      [{ kind: 'custom_badge', imageUrls: [galleryUrlOf(uniqueImage(1000))] }],
      [{ kind: 'link_collection', linkIds: [theirLink] }],
      [{ kind: 'link_collection', linkIds: [UNKNOWN_ID] }],
      [{ kind: 'link_collection', linkIds: [link, link] }],
      [{ kind: 'poll', question: 'q', options: ['a'] }],
      [{ kind: 'poll', question: 'q', options: ['1', '2', '3', '4', '5', '6', '7', '8', '9'] }],
      [{ kind: 'poll', question: 'q', options: ['a', 'a'] }],
      [{ kind: 'sticker_board', stickerUrls: Array.from({ length: 101 }, (_, i) => `https://s.example.org/${i}.png`) }],
      [{ kind: 'status', statusText: 'x' }, { title: s(121) }],
      [{ kind: 'status', statusText: 'x' }, { size: 'huge' }],
      [{ kind: 'status', statusText: 'x' }, { visibility: 'all' }],
      [{ kind: 'status', statusText: 'x', extra: 1 }],
      [{ kind: 'unknown' }],
      [{ kind: 'countdown', targetAt: -1, label: 'x' }],
      [{ kind: 'countdown', targetAt: 1.5, label: 'x' }],
      [
        {
          kind: 'music',
          provider: 'spotify',
          resourceType: 'track',
          resourceId: 'abc',
          widgetKind: 'embed',
          displayStyle: 'compact',
          memberId: UNKNOWN_ID,
        },
      ],
    ];
    for (const [config, extra] of bad) {
      const res = await u.api.POST('/api/v1/social/widgets', {
        body: { type: config.kind, config, visibility: 'public', size: 'medium', ...extra } as never,
      });
      expect(res.response.status, JSON.stringify([config, extra]).slice(0, 200)).toBe(400);
    }
    expect((await section(u)).widgets).toHaveLength(good.length);
    const member = await createMember(u.api);
    await addWidget(u, {
      kind: 'music',
      provider: 'spotify',
      resourceType: 'track',
      resourceId: 'abc',
      widgetKind: 'card',
      displayStyle: 'standard',
      memberId: member,
    });
  });

  it('create-with-id; a duplicate id is 409; foreign or unknown widgets are 404; delete', async () => {
    const u = await server.user();
    const other = await server.user();
    const id = '0f0e0d0c-0b0a-4909-8807-060504030201';
    expect(await addWidget(u, { kind: 'status', statusText: 'x' }, { id })).toBe(id);
    for (const who of [u, other]) {
      const dup = await who.api.POST('/api/v1/social/widgets', {
        body: {
          id,
          type: 'status',
          config: { kind: 'status', statusText: 'y' },
          visibility: 'public',
          size: 'small',
        } as never,
      });
      expect(dup.response.status).toBe(409);
      expect(JSON.stringify(dup.error)).not.toContain('"x"');
    }
    for (const widgetId of [id, UNKNOWN_ID]) {
      expect(
        (
          await other.api.PATCH('/api/v1/social/widgets/{widgetId}', {
            params: { path: { widgetId } },
            body: { title: 'mine' },
          })
        ).response.status,
      ).toBe(404);
      expect(
        (await other.api.DELETE('/api/v1/social/widgets/{widgetId}', { params: { path: { widgetId } } })).response
          .status,
      ).toBe(404);
    }
    expect((await section(u)).widgets[0]!.title).toBeNull();
    expect(
      (await u.api.DELETE('/api/v1/social/widgets/{widgetId}', { params: { path: { widgetId: id } } })).response.status,
    ).toBe(204);
    expect((await section(u)).widgets).toEqual([]);
    expect(
      (
        await u.api.PATCH('/api/v1/social/widgets/{widgetId}', {
          params: { path: { widgetId: id } },
          body: { title: 'x' },
        })
      ).response.status,
    ).toBe(404);
  });
});

describe('reorder', () => {
  it('an exact permutation sets sortOrder to the index; anything else is 400 and changes nothing', async () => {
    const u = await server.user();
    const other = await server.user();
    const [a, b, c] = [await addLink(u), await addLink(u), await addLink(u)];
    const [w1, w2] = [
      await addWidget(u, { kind: 'status', statusText: '1' }),
      await addWidget(u, { kind: 'status', statusText: '2' }),
    ];
    const foreign = await addLink(other);
    expect(
      (await u.api.POST('/api/v1/social/reorder', { body: { linkIds: [c, a, b], widgetIds: [w2, w1] } })).response
        .status,
    ).toBe(204);
    let sec = await section(u);
    expect(sec.links.map((l) => [l.id, l.sortOrder])).toEqual([
      [c, 0],
      [a, 1],
      [b, 2],
    ]);
    expect(sec.widgets.map((w) => [w.id, w.sortOrder])).toEqual([
      [w2, 0],
      [w1, 1],
    ]);
    expect((await u.api.POST('/api/v1/social/reorder', { body: { widgetIds: [w1, w2] } })).response.status).toBe(204);
    sec = await section(u);
    expect(sec.links.map((l) => l.id)).toEqual([c, a, b]);
    expect(sec.widgets.map((w) => w.id)).toEqual([w1, w2]);
    for (const body of [
      { linkIds: [a, b] },
      { linkIds: [a, b, c, c] },
      { linkIds: [a, b, foreign] },
      { linkIds: [a, b, c, foreign] },
      { linkIds: [a, a, b] },
      { linkIds: [a, b, c], widgetIds: [w1] },
      { widgetIds: [w1, w2, a] },
      {},
      { linkIds: ['x'] },
    ]) {
      const res = await u.api.POST('/api/v1/social/reorder', { body: body as never });
      expect(res.response.status, JSON.stringify(body)).toBe(400);
      expect(JSON.stringify(res.error)).not.toContain(foreign);
    }
    const unchanged = await section(u);
    expect(unchanged.links.map((l) => [l.id, l.sortOrder])).toEqual([
      [c, 0],
      [a, 1],
      [b, 2],
    ]);
    expect(unchanged.widgets.map((w) => [w.id, w.sortOrder])).toEqual([
      [w1, 0],
      [w2, 1],
    ]);
    const empty = await server.user();
    expect(
      (await empty.api.POST('/api/v1/social/reorder', { body: { linkIds: [], widgetIds: [] } })).response.status,
    ).toBe(204);
  });
});

/** Operator account management (list, show, keys, delete), key expiry and GET /api/v1/me. */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ApiClient } from '../client/index.ts';
import { createFolder, createGroup, createMember, createSub, startFronting, UNKNOWN_ID } from './helpers/fixtures.ts';
import { PNG } from './helpers/images.ts';
import { startLoopbackServer, type LoopbackServer } from './helpers/imageServer.ts';
import { ALL_SCOPES, bearer, useServer } from './helpers/server.ts';
import { createLogger } from '../server/logger.ts';
import { collectGarbage } from '../server/storage/gc.ts';
import { createUploadIntent } from '../server/storage/staging.ts';
import { PostgresRateLimitStore } from '../server/http/rateLimit.ts';

const UNAUTHORIZED = {
  code: 'UNAUTHORIZED',
  message: 'Missing or invalid API key. Use Authorization: Bearer <token>.',
};
let now = 1_800_000_000_000;
// The PostgreSQL rate-limit store keeps windows in a table, so deleting an account must clean it too.
const server = useServer({ clock: () => now, rateLimitStore: 'postgres', env: { FETCH_ALLOW_PRIVATE: 'true' } });
const run = promisify(execFile);

let images: LoopbackServer;
beforeAll(async () => {
  images = await startLoopbackServer({ '/a.png': { type: 'image/png', body: PNG } });
});
afterAll(() => images.close());

describe('GET /admin/v1/accounts', () => {
  it('pages accounts in username order and filters by prefix, case-insensitively', async () => {
    const names = ['Zeta_pg', 'alpha_pg', 'Alpine_pg', 'beta_pg', 'alps_pg'];
    for (const username of names) await server.createAccount({ username });
    const all: string[] = [];
    let cursor: string | undefined;
    for (let pages = 0; pages < 100; pages++) {
      const { data, response } = await server.admin.GET('/admin/v1/accounts', {
        params: { query: { limit: 2, ...(cursor ? { cursor } : {}) } },
      });
      expect(response.status).toBe(200);
      expect(data!.items.length).toBeLessThanOrEqual(2);
      all.push(...data!.items.map((a) => a.username));
      if (!data!.nextCursor) break;
      cursor = data!.nextCursor;
    }
    const lowered = all.map((n) => n.toLowerCase());
    expect(lowered).toEqual([...lowered].sort());
    for (const n of names) expect(all).toContain(n);

    const al = await server.admin.GET('/admin/v1/accounts', { params: { query: { usernamePrefix: 'AL' } } });
    expect(al.data!.items.map((a) => a.username)).toEqual(['alpha_pg', 'Alpine_pg', 'alps_pg']);
    expect(al.data!.nextCursor).toBeNull();
    const first = await server.admin.GET('/admin/v1/accounts', {
      params: { query: { usernamePrefix: 'al', limit: 2 } },
    });
    expect(first.data!.items.map((a) => a.username)).toEqual(['alpha_pg', 'Alpine_pg']);
    const rest = await server.admin.GET('/admin/v1/accounts', {
      params: { query: { usernamePrefix: 'al', cursor: first.data!.nextCursor! } },
    });
    expect(rest.data!.items.map((a) => a.username)).toEqual(['alps_pg']);
    // '_' is a literal character in the prefix, not a wildcard.
    expect(
      (await server.admin.GET('/admin/v1/accounts', { params: { query: { usernamePrefix: 'alp_' } } })).data!.items,
    ).toEqual([]);
  });

  it('refuses a bad cursor, prefix or limit with 400, and needs the admin token', async () => {
    for (const query of [{ cursor: 'garbage' }, { usernamePrefix: 'a%' }, { limit: 201 }]) {
      const { response, error } = await server.admin.GET('/admin/v1/accounts', { params: { query: query as never } });
      expect(response.status, JSON.stringify(query)).toBe(400);
      expect(error?.code).toBe('BAD_REQUEST');
    }
    expect((await server.fetch('/admin/v1/accounts')).status).toBe(401);
  });
});

describe('GET /admin/v1/accounts/{userId} and its keys', () => {
  it('shows the account with its count of usable keys', async () => {
    const { userId } = await server.createAccount({
      username: 'shown_acct',
      plan: 'pro',
      displayName: 'Shown',
      pronouns: 'they/them',
    });
    const a = await server.createKey(userId, { members: 'read' });
    await server.createKey(userId, { front: 'read' });
    await server.admin.DELETE('/admin/v1/api-keys/{keyId}', { params: { path: { keyId: a.keyId } } });
    const { data } = await server.admin.GET('/admin/v1/accounts/{userId}', { params: { path: { userId } } });
    expect(data).toEqual({
      userId,
      username: 'shown_acct',
      displayName: 'Shown',
      plan: 'pro',
      isAdmin: false,
      pronouns: 'they/them',
      status: null,
      timezone: null,
      country: null,
      aboutMarkdown: null,
      activeApiKeys: 1,
      createdAt: now,
      updatedAt: now,
    });
    expect(
      (await server.admin.GET('/admin/v1/accounts/{userId}', { params: { path: { userId: UNKNOWN_ID } } })).response
        .status,
    ).toBe(404);
  });

  it('lists every key newest first with its times, never the secret or its hash', async () => {
    const { userId } = await server.createAccount({ username: 'keyed_acct', plan: 'pro' });
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) {
      now += 1000;
      const { data } = await server.admin.POST('/admin/v1/accounts/{userId}/api-keys', {
        params: { path: { userId } },
        body: { scopes: { members: 'read' }, name: `k${i}`, ...(i === 2 ? { expiresAt: now + 60_000 } : {}) },
      });
      ids.push(data!.id);
    }
    await server.admin.DELETE('/admin/v1/api-keys/{keyId}', { params: { path: { keyId: ids[0]! } } });
    const first = await server.admin.GET('/admin/v1/accounts/{userId}/api-keys', {
      params: { path: { userId }, query: { limit: 2 } },
    });
    const second = await server.admin.GET('/admin/v1/accounts/{userId}/api-keys', {
      params: { path: { userId }, query: { cursor: first.data!.nextCursor! } },
    });
    const items = [...first.data!.items, ...second.data!.items];
    expect(items.map((k) => k.id)).toEqual([ids[2], ids[1], ids[0]]);
    expect(second.data!.nextCursor).toBeNull();
    expect(items[0]).toEqual({
      id: ids[2],
      name: 'k2',
      scopes: { members: 'read' },
      createdAt: now,
      lastUsedAt: null,
      expiresAt: now + 60_000,
      revokedAt: null,
    });
    expect(items[2]!.revokedAt).toEqual(now);
    const text = JSON.stringify(items);
    const hashes = await server.deps.db.knex('api_keys').where({ user_id: userId }).pluck('key_hash');
    for (const hash of hashes) expect(text).not.toContain(hash);
    expect(text).not.toContain('adk_');
    expect(
      (await server.admin.GET('/admin/v1/accounts/{userId}/api-keys', { params: { path: { userId: UNKNOWN_ID } } }))
        .response.status,
    ).toBe(404);
  });
});

describe('API key expiry', () => {
  it("a key works until expiresAt and is refused with the spec's 401 from then on, cache or not", async () => {
    const { userId } = await server.createAccount({ username: 'expiring', plan: 'pro' });
    const { data } = await server.admin.POST('/admin/v1/accounts/{userId}/api-keys', {
      params: { path: { userId } },
      body: { scopes: { appearance: 'read' }, expiresAt: now + 2000 },
    });
    expect(data!.expiresAt).toBe(now + 2000);
    const call = () => server.fetch('/api/v1/appearance/custom-fonts', { headers: bearer(data!.apiKey) });
    expect((await call()).status).toBe(200); // cached now, for up to API_KEY_CACHE_TTL_MS
    now += 1999;
    expect((await call()).status).toBe(200);
    now += 1;
    const refused = await call();
    expect(refused.status).toBe(401);
    expect(await refused.json()).toEqual(UNAUTHORIZED);
    const keys = await server.admin.GET('/admin/v1/accounts/{userId}', { params: { path: { userId } } });
    expect(keys.data!.activeApiKeys).toBe(0);
  });

  it("expired keys do not count against the plan's key limit; an expiry in the past is a 400", async () => {
    const { userId } = await server.createAccount({ username: 'free_expiry', plan: 'free' });
    const issue = (body: Record<string, unknown>) =>
      server.admin.POST('/admin/v1/accounts/{userId}/api-keys', {
        params: { path: { userId } },
        body: { scopes: {}, ...body } as never,
      });
    expect((await issue({ expiresAt: now + 1000 })).response.status).toBe(201);
    expect((await issue({})).response.status).toBe(403);
    now += 1000;
    expect((await issue({})).response.status).toBe(201);
    for (const expiresAt of [now, now - 1]) {
      const past = await issue({ expiresAt });
      expect(past.response.status).toBe(400);
      expect(past.error).toEqual({ code: 'BAD_REQUEST', message: 'expiresAt must be in the future' });
    }
  });
});

describe('GET /api/v1/me', () => {
  it('tells any valid key, whatever its scopes, who it belongs to, what it may do and its budget', async () => {
    const { userId } = await server.createAccount({ username: 'me_user', plan: 'pro', displayName: 'Me' });
    const { data: issued } = await server.admin.POST('/admin/v1/accounts/{userId}/api-keys', {
      params: { path: { userId } },
      body: { scopes: {}, name: 'no scopes at all', expiresAt: now + 86_400_000 },
    });
    const api = server.client(issued!.apiKey);
    const first = await api.GET('/api/v1/me');
    expect(first.response.status).toBe(200);
    expect(first.data).toEqual({
      userId,
      username: 'me_user',
      displayName: 'Me',
      plan: 'pro',
      key: { id: issued!.id, name: 'no scopes at all', scopes: {}, createdAt: now, expiresAt: now + 86_400_000 },
      rateLimit: { limit: 1000, remaining: 999, resetSeconds: 60, windowSeconds: 60 },
    });
    expect(first.response.headers.get('ratelimit-remaining')).toBe('999');
    const second = await api.GET('/api/v1/me');
    expect(second.data!.rateLimit.remaining).toBe(998);
    // The same key is refused by a scoped route.
    expect((await api.GET('/api/v1/members')).response.status).toBe(403);
  });

  it('answers 401 without a valid key', async () => {
    const res = await server.fetch('/api/v1/me');
    expect(res.status).toBe(401);
    expect(await res.json()).toEqual(UNAUTHORIZED);
    expect((await server.fetch('/api/v1/me', { headers: bearer('adk_' + 'x'.repeat(43)) })).status).toBe(401);
  });
});

/** Fills every table that holds account data, through the API. */
async function populate(api: ApiClient, apiKey: string, userId: string, peerId: string): Promise<void> {
  const ok = (status: number, what: string) => expect([200, 201, 204], what).toContain(status);
  // First: the changes below queue deliveries to it. With an Idempotency-Key: its response is stored.
  ok(
    (
      await api.POST('/api/v1/webhooks', {
        params: { header: { 'Idempotency-Key': 'populate-webhook' } },
        body: { url: 'https://hooks.example.net/x', types: ['member.created', 'appearance.changed'] },
      })
    ).response.status,
    'webhook',
  );
  ok((await api.PATCH('/api/v1/appearance', { body: { themeMode: 'dark' } })).response.status, 'appearance');
  ok(
    (
      await api.POST('/api/v1/appearance/custom-color-schemes', {
        body: { name: 'Dusk', colors: { primary: '#112233' } },
      })
    ).response.status,
    'scheme',
  );
  ok(
    (
      await api.POST('/api/v1/appearance/custom-fonts', {
        body: { name: 'Atkinson', sourceUrl: 'https://fonts.example.org/a.woff2' },
      })
    ).response.status,
    'font',
  );
  const side = (await api.GET('/api/v1/systems')).data!.active.sideSystemId;
  const a = await createMember(api, 'A');
  const b = await createMember(api, 'B');
  await createSub(api, side, a);
  const upload = await server.fetch(`/api/v1/members/${a}/media?kind=avatar`, {
    method: 'PUT',
    headers: { ...bearer(apiKey), 'Content-Type': 'image/png' },
    body: new Uint8Array(PNG),
  });
  ok(upload.status, 'avatar');
  const folder = await createFolder(api, 'F');
  await createGroup(api, 'G', { memberIds: [a, b] });
  ok(
    (await api.POST('/api/v1/directory-layouts', { body: { directoryId: folder, name: 'L', itemIds: [] } })).response
      .status,
    'layout',
  );
  const field = (await api.POST('/api/v1/custom-fields', { body: { name: 'F', type: 'text' } })).data!.id;
  ok(
    (
      await api.PUT('/api/v1/members/{memberId}/custom-fields/{fieldId}', {
        params: { path: { memberId: a, fieldId: field } },
        body: { value: 'v' },
      })
    ).response.status,
    'field value',
  );
  const status = (await api.POST('/api/v1/member-statuses', { body: { name: 'S', color: '#000000' } })).data!.id;
  ok(
    (
      await api.PUT('/api/v1/members/{memberId}/statuses/{statusId}', {
        params: { path: { memberId: a, statusId: status } },
      })
    ).response.status,
    'status',
  );
  ok(
    (await api.PATCH('/api/v1/terminology', { body: { member: { singular: 'Headmate' } } })).response.status,
    'terminology',
  );
  ok(
    (
      await api.PATCH('/api/v1/terminology/scoped', {
        body: { sideSystemId: side, terms: { member: { singular: 'Alter' } } },
      })
    ).response.status,
    'override',
  );
  ok(
    (await api.POST('/api/v1/entries', { body: { content: `note ![x](${images.url('/a.png')})`, memberIds: [a, b] } }))
      .response.status,
    'entry',
  );
  const trashed = (await api.POST('/api/v1/entries', { body: { content: 'to the trash' } })).data!.id;
  ok(
    (await api.DELETE('/api/v1/entries/{entryId}', { params: { path: { entryId: trashed } } })).response.status,
    'trash',
  );
  await startFronting(api, a);
  const tier = (await api.POST('/api/v1/front/tiers', { body: { displayName: 'Near' } })).data!.id;
  ok(
    (await api.POST('/api/v1/front/tier-presence', { body: { memberId: b, tierKey: tier } })).response.status,
    'presence',
  );
  ok((await api.PATCH('/api/v1/trash/settings', { body: { retentionDays: 7 } })).response.status, 'trash settings');
  // Privacy: a custom bucket on a member and as a default; a friend request to the peer (only the
  // requester acts, so the peer's own tables gain no row but the request's incoming side and the
  // event that told the peer of it, both of which go with the requester).
  const bucket = (await api.POST('/api/v1/privacy-buckets', { body: { name: 'Close' } })).data!._id;
  ok(
    (
      await api.PUT('/api/v1/privacy-buckets/assignments/members/{memberId}', {
        params: { path: { memberId: a } },
        body: { bucketIds: [bucket] },
      })
    ).response.status,
    'member buckets',
  );
  ok(
    (
      await api.PUT('/api/v1/privacy-buckets/defaults/{kind}', {
        params: { path: { kind: 'new_member' } },
        body: { bucketIds: [bucket] },
      })
    ).response.status,
    'defaults',
  );
  ok(
    (await api.POST('/api/v1/friends/{friendUserId}/request', { params: { path: { friendUserId: peerId } } })).response
      .status,
    'friend request',
  );
  // Messaging: a space, category and channel, a pinned and read message, and preferences.
  const space = (await api.POST('/api/v1/messaging/spaces', { body: { name: 'Home' } })).data!.id;
  const category = (
    await api.POST('/api/v1/messaging/spaces/{spaceId}/categories', {
      params: { path: { spaceId: space } },
      body: { name: 'Talk' },
    })
  ).data!.id;
  const channel = (
    await api.POST('/api/v1/messaging/spaces/{spaceId}/channels', {
      params: { path: { spaceId: space } },
      body: { name: 'general', categoryId: category },
    })
  ).data!.id;
  const sent = await api.POST('/api/v1/messaging/channels/{channelId}/messages', {
    params: { path: { channelId: channel } },
    body: { memberId: a, content: 'hello' },
  });
  ok(sent.response.status, 'message');
  ok(
    (
      await api.POST('/api/v1/messaging/channels/{channelId}/pins', {
        params: { path: { channelId: channel } },
        body: { messageId: sent.data!.id },
      })
    ).response.status,
    'pin',
  );
  ok(
    (
      await api.POST('/api/v1/messaging/channels/{channelId}/read', {
        params: { path: { channelId: channel } },
        body: { lastReadMessageId: sent.data!.id },
      })
    ).response.status,
    'read',
  );
  ok(
    (await api.PUT('/api/v1/messaging/preferences/chat-as', { body: { spaceId: space, memberId: b } })).response.status,
    'chat as',
  );
  ok(
    (
      await api.PUT('/api/v1/messaging/preferences/last-viewed-route', {
        body: { lastSpaceId: space, lastChannelId: channel },
      })
    ).response.status,
    'last viewed',
  );
  // Social: theme, a link, guestbook and poll widgets with a message and a ballot, a verified identity.
  ok(
    (await api.PATCH('/api/v1/social', { body: { theme: { accentColor: '#7A5CFA' } } })).response.status,
    'social theme',
  );
  ok(
    (
      await api.POST('/api/v1/social/links', {
        body: { platform: 'github', displayName: 'Code', visibility: 'public' } as never,
      })
    ).response.status,
    'social link',
  );
  const guestbook = (
    await api.POST('/api/v1/social/widgets', {
      body: { type: 'guestbook', config: { kind: 'guestbook' }, visibility: 'public', size: 'small' } as never,
    })
  ).data!.widgetId;
  ok(
    (
      await api.POST('/api/v1/social/widgets/{widgetId}/guestbook', {
        params: { path: { widgetId: guestbook } },
        body: { body: 'hello' } as never,
      })
    ).response.status,
    'guestbook message',
  );
  const poll = (
    await api.POST('/api/v1/social/widgets', {
      body: {
        type: 'poll',
        config: { kind: 'poll', question: 'Q', options: ['a', 'b'] },
        visibility: 'public',
        size: 'small',
      } as never,
    })
  ).data!.widgetId;
  ok(
    (
      await api.POST('/api/v1/social/widgets/{widgetId}/poll', {
        params: { path: { widgetId: poll } },
        body: { optionIndices: [1] },
      })
    ).response.status,
    'poll ballot',
  );
  ok(
    (
      await server.admin.POST('/admin/v1/accounts/{userId}/identities', {
        params: { path: { userId } },
        body: { provider: 'github', externalUserId: '1' },
      })
    ).response.status,
    'identity',
  );
  // Social gallery: an image (row and object under u/<id>/social-gallery/) that a custom_badge widget shows.
  const galleryImage = await server.fetch('/api/v1/social/gallery', {
    method: 'POST',
    headers: { ...bearer(apiKey), 'Content-Type': 'image/png' },
    body: new Uint8Array(PNG),
  });
  ok(galleryImage.status, 'gallery image');
  const badgeUrl = ((await galleryImage.json()) as { url: string }).url;
  ok(
    (
      await api.POST('/api/v1/social/widgets', {
        body: {
          type: 'custom_badge',
          config: { kind: 'custom_badge', imageUrls: [badgeUrl] },
          visibility: 'public',
          size: 'small',
        } as never,
      })
    ).response.status,
    'badge widget',
  );
  // A message attachment through the upload flow (intent, PUT to the presigned URL, complete, send).
  const intent0 = (
    await api.POST('/api/v1/messaging/attachments/upload-intent', {
      body: { channelId: channel, fileName: 'a.png', contentType: 'image/png', byteSize: PNG.length },
    })
  ).data!;
  ok(
    (
      await fetch(server.baseUrl + intent0.upload.url, {
        method: 'PUT',
        headers: intent0.upload.headers,
        body: new Uint8Array(PNG),
      })
    ).status,
    'attachment upload',
  );
  ok(
    (await api.POST('/api/v1/messaging/attachments/complete', { body: { stagingId: intent0.stagingId } })).response
      .status,
    'attachment complete',
  );
  ok(
    (
      await api.POST('/api/v1/messaging/channels/{channelId}/messages', {
        params: { path: { channelId: channel } },
        body: { memberId: a, stagedAttachmentIds: [intent0.stagingId] },
      })
    ).response.status,
    'attachment message',
  );
  // A link preview, fetched by its job from a loopback page, its image re-hosted, then dismissed.
  const page = await startLoopbackServer({
    '/p': {
      type: 'text/html',
      body: `<head><meta property="og:title" content="Page"><meta property="og:image" content="${images.url('/a.png')}"></head>`,
    },
  });
  try {
    const linked = await api.POST('/api/v1/messaging/channels/{channelId}/messages', {
      params: { path: { channelId: channel } },
      body: { memberId: a, content: `see ${page.url('/p')}` },
    });
    ok(linked.response.status, 'link message');
    await server.runtime.jobs.runDue();
    const previews = (
      await api.GET('/api/v1/messaging/channels/{channelId}/messages', { params: { path: { channelId: channel } } })
    ).data!.items.find((m) => m.id === linked.data!.id)!.linkPreviews;
    expect(
      previews.map((p) => [p.title, p.imageUrl === null]),
      'link preview',
    ).toEqual([['Page', false]]);
    ok(
      (
        await api.POST('/api/v1/messaging/link-previews/{previewId}/dismiss', {
          params: { path: { previewId: previews[0]!.id } },
        })
      ).response.status,
      'link preview dismiss',
    );
  } finally {
    await page.close();
  }
  // A staged upload left unused, directly (its object stays under staging/ until garbage collection).
  const intent = await createUploadIntent(server.deps.db.knex, server.deps.storage!, {
    userId,
    purpose: 'message-attachment',
    contentType: 'image/png',
    byteSize: PNG.length,
    maxBytes: PNG.length,
    now,
    urlTtlSeconds: 60,
    stagingTtlMs: 3_600_000,
  });
  await server.deps.storage!.put(`staging/${userId}/${intent.stagingId}`, PNG, 'image/png');
  // An import (a PluralKit file without members: its Public bucket and that bucket's import ref)
  // and a native export, each run by the queue.
  const imported = await server.fetch('/api/v1/imports?source=pluralkit', {
    method: 'POST',
    headers: { ...bearer(apiKey), 'Content-Type': 'application/json' },
    body: JSON.stringify({ version: 2, id: 'abcde', name: 'Imported', members: [], groups: [], switches: [] }),
  });
  expect(imported.status, 'import').toBe(202);
  expect((await api.POST('/api/v1/exports', {})).response.status, 'export').toBe(202);
  await server.runtime.jobs.runDue();
}

describe('DELETE /admin/v1/accounts/{userId}', () => {
  const knex = () => server.deps.db.knex;

  async function tables(): Promise<string[]> {
    return (
      await knex()('information_schema.tables')
        .where({ table_schema: 'public', table_type: 'BASE TABLE' })
        .pluck('table_name')
    ).sort();
  }

  /**
   * Every row of every table, as sorted JSON per table (last_used_at is written in the background).
   * The PostgreSQL rate-limit store writes its counts every 100 ms: flushed first, so a count of the
   * last request does not land between two snapshots.
   */
  async function snapshot(): Promise<Record<string, string[]>> {
    const store = server.deps.rateLimiter.store;
    if (store instanceof PostgresRateLimitStore) await store.flush();
    const out: Record<string, string[]> = {};
    for (const table of await tables()) {
      const rows: Array<Record<string, unknown>> = await knex()(table).select('*');
      out[table] = rows.map(({ last_used_at: _ignored, ...row }) => JSON.stringify(row)).sort();
    }
    return out;
  }

  it('removes the account and everything it owns from every table and from storage, and leaves the others alone', async () => {
    // The peer receives both accounts' friend requests; it exists before the first snapshot.
    const peer = await server.user();
    const survivor = await server.user();
    await populate(survivor.api, survivor.apiKey, survivor.userId, peer.userId);
    const before = await snapshot();
    const survivorObjects = (await server.deps.storage!.list(`u/${survivor.userId}/`)).sort();
    expect(survivorObjects.length).toBeGreaterThanOrEqual(2);

    const victim = await server.user();
    await populate(victim.api, victim.apiKey, victim.userId, peer.userId);
    // Every table that is keyed by account holds some of the victim's rows, or the test proves nothing for it.
    const uncovered: string[] = [];
    for (const table of await tables()) {
      const columns = Object.keys(await knex()(table).columnInfo());
      if (!columns.includes('user_id')) continue;
      const n = Number((await knex()(table).where({ user_id: victim.userId }).count({ n: '*' }).first())!.n);
      if (n === 0) uncovered.push(table);
    }
    expect(uncovered).toEqual([]);
    expect(
      Number((await knex()('rate_limit_windows').where({ key_id: victim.keyId }).count({ n: '*' }).first())!.n),
    ).toBe(1);
    expect((await server.deps.storage!.list(`u/${victim.userId}/`)).length).toBeGreaterThanOrEqual(2);
    expect((await victim.api.GET('/api/v1/members')).response.status).toBe(200);

    const { response } = await server.admin.DELETE('/admin/v1/accounts/{userId}', {
      params: { path: { userId: victim.userId } },
    });
    expect(response.status).toBe(204);

    expect(await snapshot()).toEqual(before);
    expect(await server.deps.storage!.list(`u/${victim.userId}/`)).toEqual([]);
    expect((await server.deps.storage!.list(`u/${survivor.userId}/`)).sort()).toEqual(survivorObjects);
    // Staged uploads live outside u/<id>/; their rows went with the account, so garbage collection takes the objects.
    expect(await server.deps.storage!.list(`staging/${victim.userId}/`)).toHaveLength(1);
    await collectGarbage({
      db: knex(),
      storage: server.deps.storage!,
      now,
      log: createLogger('silent'),
      graceMs: 3_600_000,
    });
    expect(await server.deps.storage!.list(`staging/${victim.userId}/`)).toEqual([]);
    expect(await server.deps.storage!.list(`staging/${survivor.userId}/`)).toHaveLength(1);
    const refused = await victim.api.GET('/api/v1/members');
    expect(refused.response.status).toBe(401);
    expect(
      (await server.admin.GET('/admin/v1/accounts/{userId}', { params: { path: { userId: victim.userId } } })).response
        .status,
    ).toBe(404);
    expect(
      (await server.admin.DELETE('/admin/v1/accounts/{userId}', { params: { path: { userId: victim.userId } } }))
        .response.status,
    ).toBe(404);
    // The survivor's data reads as before.
    expect((await survivor.api.GET('/api/v1/members')).data!.map((m) => m.name).sort()).toEqual(['A', 'B']);
  }, 120_000); // two full accounts through the API and two snapshots of every table
});

describe('npm run admin (accounts and keys)', () => {
  const cli = (args: string[]) =>
    run(process.execPath, ['--import', 'tsx', 'scripts/admin.ts', ...args], {
      env: { ...process.env, ADMIN_URL: server.baseUrl, ADMIN_TOKEN: server.adminToken },
    });

  it('lists and shows accounts, lists keys, issues an expiring key and deletes an account (with --yes only)', async () => {
    const account = JSON.parse((await cli(['create-account', '--username', 'cli_lifecycle', '--plan', 'pro'])).stdout);
    const key = JSON.parse(
      (
        await cli([
          'create-key',
          '--user',
          account.userId,
          '--all-scopes',
          '--expires-at',
          new Date(now + 3_600_000).toISOString(),
        ])
      ).stdout,
    );
    expect(key.expiresAt).toBe(now + 3_600_000);
    expect(key.scopes).toEqual(ALL_SCOPES);
    const listed = JSON.parse((await cli(['list-accounts', '--prefix', 'cli_life'])).stdout);
    expect(listed.items.map((a: { username: string }) => a.username)).toEqual(['cli_lifecycle']);
    const shown = JSON.parse((await cli(['show-account', '--user', account.userId])).stdout);
    expect(shown).toMatchObject({ userId: account.userId, activeApiKeys: 1 });
    const keys = JSON.parse((await cli(['list-keys', '--user', account.userId])).stdout);
    expect(keys.items.map((k: { id: string }) => k.id)).toEqual([key.id]);
    await expect(cli(['delete-account', '--user', account.userId])).rejects.toMatchObject({
      code: 2,
      stderr: expect.stringContaining('--yes'),
    });
    expect(
      (await server.admin.GET('/admin/v1/accounts/{userId}', { params: { path: { userId: account.userId } } })).response
        .status,
    ).toBe(200);
    expect(JSON.parse((await cli(['delete-account', '--user', account.userId, '--yes'])).stdout)).toEqual({
      deleted: account.userId,
    });
    expect(
      (await server.admin.GET('/admin/v1/accounts/{userId}', { params: { path: { userId: account.userId } } })).response
        .status,
    ).toBe(404);
  }, 120_000); // seven CLI processes, each starting tsx
});

/** GET/PUT/DELETE /members/{memberId}/media — every row of the spec's media status table. */
import { describe, expect, it } from 'vitest';
import { createEntry, createMember, startFronting, UNKNOWN_ID } from './helpers/fixtures.ts';
import { GIF, JPEG, PNG, WEBP } from './helpers/images.ts';
import { bearer, TestServer, useServer } from './helpers/server.ts';

const server = useServer({ env: { MEDIA_MAX_BYTES: '4096' } });

function upload(
  s: TestServer,
  apiKey: string,
  memberId: string,
  kind: string,
  body: Buffer | string,
  type = 'image/png',
) {
  return s.fetch(`/api/v1/members/${memberId}/media?kind=${kind}`, {
    method: 'PUT',
    headers: { ...bearer(apiKey), 'Content-Type': type },
    body: typeof body === 'string' ? body : new Uint8Array(body),
  });
}

async function expectEmpty(res: Response, status: number): Promise<void> {
  expect(res.status).toBe(status);
  expect(await res.text()).toBe('');
}

describe('upload', () => {
  it.each([
    ['image/png', PNG],
    ['image/jpeg', JPEG],
    ['image/webp', WEBP],
    ['image/gif', GIF],
  ])('stores %s and serves it back with Content-Type and ETag', async (type, bytes) => {
    const { api, apiKey } = await server.user();
    const id = await createMember(api);
    const res = await upload(server, apiKey, id, 'avatar', bytes, type);
    expect(res.status).toBe(200);
    const member = await res.json();
    expect(member.avatarUrl).toMatch(new RegExp(`^/api/v1/members/${id}/media\\?kind=avatar&v=[0-9a-f]{12}$`));
    expect(member.version).toBe(2);
    const got = await server.fetch(member.avatarUrl, { headers: bearer(apiKey) });
    expect(got.status).toBe(200);
    expect(got.headers.get('content-type')).toBe(type);
    expect(got.headers.get('etag')).toMatch(/^"[0-9a-f]{64}"$/);
    expect(Buffer.from(await got.arrayBuffer()).equals(bytes)).toBe(true);
  });

  it('trusts the bytes, not the Content-Type header', async () => {
    const { api, apiKey } = await server.user();
    const id = await createMember(api);
    expect((await upload(server, apiKey, id, 'banner', GIF, 'image/png')).status).toBe(200);
    const got = await server.fetch(`/api/v1/members/${id}/media?kind=banner`, { headers: bearer(apiKey) });
    expect(got.headers.get('content-type')).toBe('image/gif');
    const fake = await upload(
      server,
      apiKey,
      id,
      'avatar',
      Buffer.from('<svg xmlns="http://www.w3.org/2000/svg"></svg>'),
      'image/png',
    );
    expect(fake.status).toBe(415);
    expect(await fake.json()).toEqual({
      code: 'UNSUPPORTED_MEDIA_TYPE',
      message: 'Body is not a PNG, JPEG, WebP or GIF image',
    });
  });

  it('refuses non-image content types (415), oversize bodies (413), an empty body (400), bad kinds (400) and unknown members (404)', async () => {
    const { api, apiKey } = await server.user();
    const id = await createMember(api);
    expect((await upload(server, apiKey, id, 'avatar', 'hello', 'text/plain')).status).toBe(415);
    const big = await upload(server, apiKey, id, 'avatar', Buffer.concat([PNG, Buffer.alloc(5000)]));
    expect(big.status).toBe(413);
    expect((await big.json()).code).toBe('PAYLOAD_TOO_LARGE');
    const empty = await server.fetch(`/api/v1/members/${id}/media?kind=avatar`, {
      method: 'PUT',
      headers: bearer(apiKey),
    });
    expect(empty.status).toBe(400);
    expect((await upload(server, apiKey, id, 'cover', PNG)).status).toBe(400);
    expect((await upload(server, apiKey, UNKNOWN_ID, 'avatar', PNG)).status).toBe(404);
  });

  it('changes the media URL when the image changes, and DELETE removes it', async () => {
    const { api, apiKey } = await server.user();
    const id = await createMember(api);
    const first = (await (await upload(server, apiKey, id, 'avatar', PNG)).json()).avatarUrl;
    const second = (await (await upload(server, apiKey, id, 'avatar', GIF, 'image/gif')).json()).avatarUrl;
    expect(second).not.toBe(first);
    const del = await server.fetch(`/api/v1/members/${id}/media?kind=avatar`, {
      method: 'DELETE',
      headers: bearer(apiKey),
    });
    expect(del.status).toBe(204);
    expect(
      (await api.GET('/api/v1/members/{memberId}', { params: { path: { memberId: id } } })).data?.avatarUrl,
    ).toBeNull();
    await expectEmpty(await server.fetch(second, { headers: bearer(apiKey) }), 404);
    expect(
      (await server.fetch(`/api/v1/members/${id}/media?kind=avatar`, { method: 'DELETE', headers: bearer(apiKey) }))
        .status,
    ).toBe(204);
  });
});

describe('avatarUrl in member summaries', () => {
  it('groups tree, notes and front carry the same avatarUrl as GET /members/{memberId}, and follow a replaced image', async () => {
    const { api, apiKey } = await server.user();
    const id = await createMember(api, 'Pictured');
    const entry = await createEntry(api, 'About them', { memberId: id });
    await startFronting(api, id);

    const everywhere = async () => {
      const tree = (await api.GET('/api/v1/groups')).data!;
      const list = (await api.GET('/api/v1/entries')).data!.find((e) => e._id === entry)!;
      const detail = (await api.GET('/api/v1/entries/{entryId}', { params: { path: { entryId: entry } } })).data!;
      const front = (await api.GET('/api/v1/front')).data!;
      const history = (await api.GET('/api/v1/front/history')).data!;
      return {
        groupsTree: tree.members.find((m) => m.id === id)?.avatarUrl,
        entriesListMember: list.member?.avatarUrl,
        entriesListMembers: list.members.map((m) => m.avatarUrl),
        entryDetailMember: detail.member?.avatarUrl,
        frontMembers: front.members.find((m) => m._id === id)?.avatarUrl,
        frontHistoryMember: history.items.find((i) => i.member.id === id)?.member.avatarUrl,
      };
    };
    const expectAll = (url: string | null) => ({
      groupsTree: url,
      entriesListMember: url,
      entriesListMembers: [url],
      entryDetailMember: url,
      frontMembers: url,
      frontHistoryMember: url,
    });

    expect(await everywhere()).toEqual(expectAll(null));
    expect((await upload(server, apiKey, id, 'avatar', PNG)).status).toBe(200);
    const first = (await api.GET('/api/v1/members/{memberId}', { params: { path: { memberId: id } } })).data!
      .avatarUrl!;
    expect(first).toMatch(/^\/api\/v1\/members\/.+\/media\?kind=avatar&v=/);
    expect(await everywhere()).toEqual(expectAll(first));

    await upload(server, apiKey, id, 'avatar', GIF, 'image/gif');
    const second = (await api.GET('/api/v1/members/{memberId}', { params: { path: { memberId: id } } })).data!
      .avatarUrl!;
    expect(second).not.toBe(first);
    expect(await everywhere()).toEqual(expectAll(second));
  });
});

describe('GET /members/{memberId}/media', () => {
  it('304 for a matching If-None-Match', async () => {
    const { api, apiKey } = await server.user();
    const id = await createMember(api);
    await upload(server, apiKey, id, 'avatar', PNG);
    const first = await server.fetch(`/api/v1/members/${id}/media?kind=avatar`, { headers: bearer(apiKey) });
    const etag = first.headers.get('etag')!;
    const cached = await server.fetch(`/api/v1/members/${id}/media?kind=avatar`, {
      headers: { ...bearer(apiKey), 'If-None-Match': etag },
    });
    expect(cached.status).toBe(304);
    expect(cached.headers.get('etag')).toBe(etag);
    const stale = await server.fetch(`/api/v1/members/${id}/media?kind=avatar`, {
      headers: { ...bearer(apiKey), 'If-None-Match': '"other"' },
    });
    expect(stale.status).toBe(200);
  });

  it('302 to an embeddable https URL; 404 (empty) for a non-embeddable one', async () => {
    const { api, apiKey } = await server.user();
    const id = await createMember(api);
    await api.PATCH('/api/v1/members/{memberId}', {
      params: { path: { memberId: id } },
      body: {
        avatarUrl: 'https://images.example.org/robin.png',
        backgroundUrl: 'http://images.example.org/banner.png',
      },
    });
    const redirect = await server.fetch(`/api/v1/members/${id}/media?kind=avatar`, {
      headers: bearer(apiKey),
      redirect: 'manual',
    });
    expect(redirect.status).toBe(302);
    expect(redirect.headers.get('location')).toBe('https://images.example.org/robin.png');
    await expectEmpty(
      await server.fetch(`/api/v1/members/${id}/media?kind=banner`, { headers: bearer(apiKey), redirect: 'manual' }),
      404,
    );
    for (const url of ['https://127.0.0.1/a.png', 'https://localhost/a.png', 'https://[::1]/a.png']) {
      await api.PATCH('/api/v1/members/{memberId}', { params: { path: { memberId: id } }, body: { avatarUrl: url } });
      await expectEmpty(
        await server.fetch(`/api/v1/members/${id}/media?kind=avatar`, { headers: bearer(apiKey), redirect: 'manual' }),
        404,
      );
    }
  });

  it('400 JSON for a bad kind or member id', async () => {
    const { api, apiKey } = await server.user();
    const id = await createMember(api);
    for (const path of [
      `/api/v1/members/${id}/media?kind=cover`,
      `/api/v1/members/${id}/media`,
      '/api/v1/members/not-a-uuid/media?kind=avatar',
    ]) {
      const res = await server.fetch(path, { headers: bearer(apiKey) });
      expect(res.status, path).toBe(400);
      expect((await res.json()).code).toBe('BAD_REQUEST');
    }
  });

  it('404 with an empty body for an unknown, foreign or trashed member and for a missing asset', async () => {
    const { api, apiKey } = await server.user();
    const other = await server.user();
    const id = await createMember(api);
    await expectEmpty(await server.fetch(`/api/v1/members/${id}/media?kind=avatar`, { headers: bearer(apiKey) }), 404);
    await upload(server, apiKey, id, 'avatar', PNG);
    await expectEmpty(
      await server.fetch(`/api/v1/members/${id}/media?kind=avatar`, { headers: bearer(other.apiKey) }),
      404,
    );
    await expectEmpty(
      await server.fetch(`/api/v1/members/${UNKNOWN_ID}/media?kind=avatar`, { headers: bearer(apiKey) }),
      404,
    );
    await api.DELETE('/api/v1/members/{memberId}', { params: { path: { memberId: id } } });
    await expectEmpty(await server.fetch(`/api/v1/members/${id}/media?kind=avatar`, { headers: bearer(apiKey) }), 404);
  });

  it('404 with an empty body when the stored object has gone missing', async () => {
    const { api, apiKey } = await server.user();
    const id = await createMember(api);
    await upload(server, apiKey, id, 'avatar', PNG);
    const row = await server.deps.db.knex('members').where({ id }).first();
    await server.deps.storage!.delete(row.avatar.key);
    await expectEmpty(await server.fetch(`/api/v1/members/${id}/media?kind=avatar`, { headers: bearer(apiKey) }), 404);
  });

  it('keeps 401 and 403 as JSON envelopes', async () => {
    const { api } = await server.user();
    const id = await createMember(api);
    const anon = await server.fetch(`/api/v1/members/${id}/media?kind=avatar`);
    expect(anon.status).toBe(401);
    expect((await anon.json()).code).toBe('UNAUTHORIZED');
    const noScope = await server.user({ scopes: { entries: 'read' } });
    const forbidden = await server.fetch(`/api/v1/members/${id}/media?kind=avatar`, {
      headers: bearer(noScope.apiKey),
    });
    expect(forbidden.status).toBe(403);
    expect((await forbidden.json()).message).toBe('Missing API key scope: members requires read');
  });
});

describe('without object storage (OBJECT_STORAGE=none)', () => {
  it('GET answers 503 with an empty body for a stored image; upload answers 503 PRECONDITION_FAILED', async () => {
    const s = await new TestServer().start({ env: { OBJECT_STORAGE: 'none' } });
    try {
      const { api, apiKey } = await s.user();
      const id = await createMember(api);
      const up = await upload(s, apiKey, id, 'avatar', PNG);
      expect(up.status).toBe(503);
      expect(await up.json()).toEqual({
        code: 'PRECONDITION_FAILED',
        message: 'Object storage is not configured on this server',
      });
      // An image stored while storage was configured.
      await s.deps.db
        .knex('members')
        .where({ id })
        .update({
          avatar: JSON.stringify({
            source: 'object',
            key: `u/x/members/${id}/avatar/abc`,
            contentType: 'image/png',
            etag: '"abc"',
          }),
        });
      await expectEmpty(await s.fetch(`/api/v1/members/${id}/media?kind=avatar`, { headers: bearer(apiKey) }), 503);
      expect(s.violations).toEqual([]);
    } finally {
      await s.close();
    }
  });
});

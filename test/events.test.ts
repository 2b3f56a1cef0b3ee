/**
 * GET /api/v1/events end to end: events appended in the transaction of their change (none for a
 * write that fails), the stream's live feed, resuming from a cursor, the scope and type filters, the
 * per-key limit, a revoked key's streams, and the reset of a cursor older than the log keeps.
 */
import { describe, expect, it } from 'vitest';
import type { components } from '../client/index.ts';
import { befriend, createBucket, expectNoneOf, friendsSharing, giveFriend, shareMember } from './helpers/friends.ts';
import { bearer, TestServer, type TestUser, useServer } from './helpers/server.ts';

type Event = components['schemas']['Event'];

const server = useServer({ env: { EVENTS_MAX_STREAMS_PER_KEY: '3', EVENTS_HEARTBEAT_SECONDS: '1' } });

interface Message {
  id: string | null;
  event: string;
  data: unknown;
}

/** An SSE client over fetch: messages one at a time, comments counted apart. */
async function openStream(
  user: Pick<TestUser, 'apiKey'>,
  options: { after?: string; lastEventId?: string; types?: string; on?: TestServer } = {},
) {
  const query = new URLSearchParams();
  if (options.after) query.set('after', options.after);
  if (options.types) query.set('types', options.types);
  const abort = new AbortController();
  const res = await (options.on ?? server).fetch(`/api/v1/events?${query}`, {
    headers: { ...bearer(user.apiKey), ...(options.lastEventId ? { 'Last-Event-ID': options.lastEventId } : {}) },
    signal: abort.signal,
  });
  const messages: Message[] = [];
  let comments = 0;
  let ended = false;
  let raw = '';
  let wake: (() => void) | null = null;
  const pump = async () => {
    if (res.status !== 200 || !res.body) return;
    const decoder = new TextDecoder();
    let buffer = '';
    try {
      for await (const chunk of res.body) {
        const text = decoder.decode(chunk as Uint8Array, { stream: true });
        raw += text;
        buffer += text;
        for (let cut = buffer.indexOf('\n\n'); cut >= 0; cut = buffer.indexOf('\n\n')) {
          const block = buffer.slice(0, cut);
          buffer = buffer.slice(cut + 2);
          const fields = new Map<string, string>();
          for (const line of block.split('\n')) {
            if (line.startsWith(':')) comments++;
            else {
              const colon = line.indexOf(': ');
              if (colon > 0) fields.set(line.slice(0, colon), line.slice(colon + 2));
            }
          }
          if (fields.has('event'))
            messages.push({
              id: fields.get('id') ?? null,
              event: fields.get('event')!,
              data: JSON.parse(fields.get('data')!),
            });
          wake?.();
        }
      }
    } catch {
      // aborted
    }
    ended = true;
    wake?.();
  };
  void pump();
  const waitFor = async (done: () => boolean, what: string, ms = 5000) => {
    const deadline = Date.now() + ms;
    while (!done()) {
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}; got ${JSON.stringify(messages)}`);
      await new Promise<void>((resolve) => {
        wake = resolve;
        setTimeout(resolve, 50);
      });
    }
  };
  return {
    res,
    messages,
    get comments() {
      return comments;
    },
    get ended() {
      return ended;
    },
    get raw() {
      return raw;
    },
    /** Waits until `n` event messages have arrived. */
    until: (n: number) => waitFor(() => messages.length >= n, `${n} messages`),
    waitEnded: (ms = 5000) => waitFor(() => ended, 'the end of the stream', ms),
    waitComment: () => waitFor(() => comments > 0, 'a heartbeat'),
    close: () => abort.abort(),
  };
}

const types = (messages: Message[]) => messages.map((m) => m.event);

async function createMember(user: TestUser, name: string): Promise<string> {
  const { data, response } = await user.api.POST('/api/v1/members', { body: { name } });
  expect(response.status).toBe(201);
  return data!.id;
}

describe('the event stream', () => {
  it('sends each committed change once, in order, with the front as it became; a failed write sends nothing', async () => {
    const user = await server.user();
    const stream = await openStream(user);
    expect(stream.res.status).toBe(200);
    expect(stream.res.headers.get('content-type')).toMatch(/^text\/event-stream/);
    const robin = await createMember(user, 'Robin');
    await user.api.POST('/api/v1/front/members', { body: { memberId: robin } });
    // Refused (a stale version): rolled back, so no event.
    const stale = await user.api.PATCH('/api/v1/members/{memberId}', {
      params: { path: { memberId: robin } },
      body: { pronouns: 'she/her', expectedVersion: 99 },
    });
    expect(stale.response.status).toBe(409);
    await user.api.PATCH('/api/v1/members/{memberId}', {
      params: { path: { memberId: robin } },
      body: { pronouns: 'they/them', archived: true },
    });
    await stream.until(4);
    expect(types(stream.messages)).toEqual(['member.created', 'front.changed', 'member.updated', 'member.archived']);
    const [created, front, updated] = stream.messages.map((m) => m.data as Event);
    expect(created).toMatchObject({
      type: 'member.created',
      accountId: user.userId,
      actor: { kind: 'key', id: user.keyId },
      data: { memberId: robin },
    });
    expect(front!.type === 'front.changed' && front!.data.front.memberIds).toEqual([robin]);
    expect(updated!.data).toEqual({ memberId: robin, fields: ['pronouns', 'archivedAt'] });
    const ids = stream.messages.map((m) => Number(m.id));
    expect(ids).toEqual([...ids].sort((a, b) => a - b));
    expect(stream.messages.map((m) => m.id)).toEqual(stream.messages.map((m) => (m.data as Event).id));
    // Nothing of the refused write, ever.
    expect(stream.raw).not.toContain('she/her');
    stream.close();
  });

  it('resumes exactly after a cursor (header or query), from the log', async () => {
    const user = await server.user();
    const live = await openStream(user);
    for (const name of ['A', 'B', 'C', 'D']) await createMember(user, name);
    await live.until(4);
    live.close();
    const second = live.messages[1]!.id!;
    const fromHeader = await openStream(user, { lastEventId: second });
    await fromHeader.until(2);
    expect(fromHeader.messages.map((m) => m.id)).toEqual(live.messages.slice(2).map((m) => m.id));
    const fromQuery = await openStream(user, { after: live.messages[0]!.id! });
    await fromQuery.until(3);
    // Then the live feed goes on, without repeating what was read from the log.
    await createMember(user, 'E');
    await fromQuery.until(4);
    await fromHeader.until(3);
    expect(fromQuery.messages.map((m) => m.id)).toEqual([
      ...live.messages.slice(1).map((m) => m.id),
      fromHeader.messages[2]!.id,
    ]);
    fromHeader.close();
    fromQuery.close();
  });

  it('sends only the areas the key can read, and only the types asked for', async () => {
    const owner = await server.user();
    const frontOnly = await server.createKey(owner.userId, { front: 'read' });
    const narrow = await openStream({ ...owner, ...frontOnly });
    const filtered = await openStream(owner, { types: 'member.created,front.' });
    const robin = await createMember(owner, 'Canary-Robin');
    await owner.api.PATCH('/api/v1/members/{memberId}', {
      params: { path: { memberId: robin } },
      body: { pronouns: 'she/her' },
    });
    await owner.api.POST('/api/v1/front/members', { body: { memberId: robin } });
    await narrow.until(1);
    await filtered.until(2);
    expect(types(narrow.messages)).toEqual(['front.changed']);
    expect(types(filtered.messages)).toEqual(['member.created', 'front.changed']);
    // Another account's changes never reach this one's streams.
    const other = await server.user();
    await createMember(other, 'Someone else');
    await owner.api.DELETE('/api/v1/front/members/{memberId}', { params: { path: { memberId: robin } } });
    await filtered.until(3);
    expect(filtered.raw).not.toContain(other.userId);
    narrow.close();
    filtered.close();
  });

  it('refuses a bad cursor (400), keeps to EVENTS_MAX_STREAMS_PER_KEY (429) and sends heartbeats', async () => {
    const user = await server.user();
    const bad = await server.fetch('/api/v1/events', { headers: { ...bearer(user.apiKey), 'Last-Event-ID': 'x1' } });
    expect(bad.status).toBe(400);
    const open = await Promise.all([openStream(user), openStream(user), openStream(user)]);
    const fourth = await server.fetch('/api/v1/events', { headers: bearer(user.apiKey) });
    expect(fourth.status).toBe(429);
    expect(((await fourth.json()) as { code: string }).code).toBe('RATE_LIMITED');
    await open[0]!.waitComment();
    open[0]!.close();
    // A closed stream frees its place.
    await new Promise((r) => setTimeout(r, 200));
    const again = await openStream(user);
    expect(again.res.status).toBe(200);
    for (const s of [...open, again]) s.close();
  });

  it('ends a revoked key’s streams within a second or two', async () => {
    const user = await server.user();
    const stream = await openStream(user);
    const revoked = await server.admin.DELETE('/admin/v1/api-keys/{keyId}', {
      params: { path: { keyId: user.keyId } },
    });
    expect(revoked.response.ok).toBe(true);
    await stream.waitEnded(3000);
    expect(stream.ended).toBe(true);
  });

  it('tells a client whose cursor is older than the log keeps to re-read (reset), then goes on', async () => {
    const user = await server.user();
    const live = await openStream(user);
    await createMember(user, 'Old');
    await live.until(1);
    live.close();
    const old = live.messages[0]!.id!;
    // Everything so far is past retention.
    await server.runtime.deps.db.knex.raw('update events set occurred_at = 0 where id <= ?', [Number(old)]);
    const { eventsRepo } = await import('../server/events/log.ts');
    await eventsRepo.prune(server.runtime.deps.db.knex, 1);
    const resumed = await openStream(user, { lastEventId: String(Number(old) - 1) });
    await resumed.until(1);
    expect(resumed.messages[0]).toMatchObject({ id: null, event: 'reset', data: { reason: 'cursor_expired' } });
    await createMember(user, 'New');
    await resumed.until(2);
    expect(resumed.messages[1]!.event).toBe('member.created');
    resumed.close();
  });

  it('sends a friend the front changes it may see, as it may see them, and nothing once its bucket is gone', async () => {
    const { owner, viewer, bucketId } = await friendsSharing(server, { members_view: 'read', front: 'read' });
    const visible = await createMember(owner, 'Visible-Wren');
    const hidden = await createMember(owner, 'Canary-Hidden');
    await shareMember(owner, visible, [bucketId]);
    const stream = await openStream(viewer);
    const noFriends = await server.createKey(viewer.userId, { front: 'read', members: 'read' });
    const ownOnly = await openStream({ ...viewer, ...noFriends });
    const start = (memberId: string) => owner.api.POST('/api/v1/front/members', { body: { memberId } });
    const stop = (memberId: string) =>
      owner.api.DELETE('/api/v1/front/members/{memberId}', { params: { path: { memberId } } });
    // A hidden member joining changes nothing the friend can see: nothing is sent.
    await start(hidden);
    await start(visible);
    await stream.until(1);
    const first = stream.messages[0]!;
    expect(first.event).toBe('friend.front.changed');
    const event = first.data as Extract<Event, { type: 'friend.front.changed' }>;
    expect(event.accountId).toBe(owner.userId);
    expect(event.data.friendUserId).toBe(owner.userId);
    // The first fronter the friend may see is its primary; the hidden one is not there at all.
    expect(event.data.front.primary?.member._id).toBe(visible);
    expect(event.data.front.alsoFronting).toEqual([]);
    await stop(visible);
    await stream.until(2);
    expect((stream.messages[1]!.data as typeof event).data.front.primary).toBeNull();
    // The bucket is taken away (the friend holds only one that shows nothing): from then on nothing at all.
    await giveFriend(owner, viewer, [await createBucket(owner, {}, 'Nothing')]);
    await start(visible);
    await stop(hidden);
    // A change of the viewer's own account comes through, after anything that was still owed.
    await createMember(viewer, 'Own member');
    await stream.until(3);
    expect(types(stream.messages)).toEqual(['friend.front.changed', 'friend.front.changed', 'member.created']);
    expectNoneOf(stream.raw, [hidden, 'Canary-Hidden', owner.keyId]);
    // A key without friends:read gets no friend event at all.
    await ownOnly.until(1);
    expect(types(ownOnly.messages)).toEqual(['member.created']);
    stream.close();
    ownOnly.close();
  });

  it("sends a friend's social section as the friend may see it, to keys that also read social", async () => {
    const owner = await server.user();
    const viewer = await server.user();
    await befriend(owner, viewer);
    const stream = await openStream(viewer);
    const noSocial = await server.createKey(viewer.userId, { friends: 'read', members: 'read' });
    const withoutSocial = await openStream({ ...viewer, ...noSocial });
    const link = async (displayName: string, visibility: string) => {
      const res = await owner.api.POST('/api/v1/social/links', {
        body: { platform: 'bluesky', displayName, visibility } as never,
      });
      expect(res.response.status).toBe(201);
      return res.data!.linkId;
    };
    const shown = await link('Public-Link', 'public');
    // A view is looked at when it is sent, and one equal to the last sent is not sent again: the
    // first is seen before the second change, so that the second is a view of its own.
    await stream.until(1);
    const hidden = await link('Canary-Private-Link', 'private');
    await createMember(viewer, 'Own member');
    await stream.until(3);
    expect(types(stream.messages)).toEqual(['friend.social.changed', 'friend.social.changed', 'member.created']);
    for (const message of stream.messages.slice(0, 2)) {
      const event = message.data as Extract<Event, { type: 'friend.social.changed' }>;
      expect(event.data.friendUserId).toBe(owner.userId);
      expect(event.data.social.links.map((l) => l.id)).toEqual([shown]);
    }
    expectNoneOf(stream.raw, [hidden, 'Canary-Private-Link']);
    await withoutSocial.until(1);
    expect(types(withoutSocial.messages)).toEqual(['member.created']);
    stream.close();
    withoutSocial.close();
  });

  it('picks up a friendship accepted while the stream is open, without a reconnect', async () => {
    const owner = await server.user();
    const viewer = await server.user();
    const member = await createMember(owner, 'Later-Friend');
    const stream = await openStream(viewer);
    await befriend(owner, viewer);
    const bucketId = await createBucket(owner, { members_view: 'read', front: 'read' });
    await giveFriend(owner, viewer, [bucketId]);
    await shareMember(owner, member, [bucketId]);
    await owner.api.POST('/api/v1/front/members', { body: { memberId: member } });
    await stream.until(3);
    // (No friend.member.changed: the bucket shows the member in the front, not its profile.)
    expect(types(stream.messages)).toEqual(['friendship.requested', 'friendship.accepted', 'friend.front.changed']);
    const front = stream.messages[2]!.data as Extract<Event, { type: 'friend.front.changed' }>;
    expect(front.data.front.primary?.member._id).toBe(member);
    stream.close();
  });

  it('sends a friend the member changes it may see, redacted as its member read is, and nothing of a hidden member', async () => {
    // members_view and member_profile without member_avatar: pronouns show, the avatar is redacted.
    const { owner, viewer, bucketId } = await friendsSharing(server, { members_view: 'read', member_profile: 'read' });
    const visible = await createMember(owner, 'Visible-Ash');
    const hidden = await createMember(owner, 'Canary-Hidden-Member');
    const stream = await openStream(viewer);
    const patch = (memberId: string, body: Record<string, unknown>) =>
      owner.api.PATCH('/api/v1/members/{memberId}', { params: { path: { memberId } }, body: body as never });
    // Shared with the viewer's bucket: it comes into sight.
    await shareMember(owner, visible, [bucketId]);
    await patch(hidden, { name: 'Canary-Hidden-2' });
    // Seen before the next change (a view equal to the last one sent is not sent again).
    await stream.until(1);
    await patch(visible, { pronouns: 'she/her', avatarUrl: 'https://img.example.net/Canary-avatar.png' });
    await stream.until(2);
    await giveFriend(owner, viewer, [await createBucket(owner, {}, 'Nothing')]);
    await patch(visible, { name: 'Canary-after-removal' });
    await createMember(viewer, 'Own member');
    await stream.until(3);
    expect(types(stream.messages)).toEqual(['friend.member.changed', 'friend.member.changed', 'member.created']);
    const [shared, updated] = stream.messages.map((m) => m.data as Extract<Event, { type: 'friend.member.changed' }>);
    expect(shared!.data).toMatchObject({ friendUserId: owner.userId, memberId: visible });
    expect(shared!.data.member).toMatchObject({ _id: visible, name: 'Visible-Ash', pronouns: '', avatarUrl: null });
    expect(updated!.data.member).toMatchObject({
      _id: visible,
      name: 'Visible-Ash',
      pronouns: 'she/her',
      avatarUrl: null,
    });
    expect(shared!.actor).toEqual({ kind: 'system', id: null });
    expectNoneOf(stream.raw, [
      hidden,
      'Canary-Hidden-Member',
      'Canary-Hidden-2',
      'Canary-avatar',
      'Canary-after-removal',
    ]);
    stream.close();
  });
});

describe('the other areas’ events', () => {
  it('notes, groups and folders, custom fields and their values, and messages each send their type, with ids and written fields only', async () => {
    const user = await server.user();
    const { api } = user;
    const stream = await openStream(user);
    const expected: string[] = [];
    const step = async (types: string[], write: () => Promise<{ response: Response }>) => {
      const { response } = await write();
      expect(response.ok, `${types.join(', ')}: ${response.status}`).toBe(true);
      expected.push(...types);
    };
    // Notes.
    const entry = (await api.POST('/api/v1/entries', { body: { title: 'T', content: 'Canary-note-text' } })).data!.id;
    expected.push('entry.created');
    const entryPath = { params: { path: { entryId: entry } } };
    await step(['entry.updated'], () =>
      api.PATCH('/api/v1/entries/{entryId}', { ...entryPath, body: { title: 'T2' } }),
    );
    await step(['entry.trashed'], () => api.DELETE('/api/v1/entries/{entryId}', entryPath));
    // Refused (a trashed note is not edited): nothing.
    expect(
      (await api.PATCH('/api/v1/entries/{entryId}', { ...entryPath, body: { title: 'No' } })).response.status,
    ).toBe(400);
    await step(['entry.restored'], () => api.POST('/api/v1/entries/{entryId}/restore', entryPath));
    await step(['entry.purged'], () =>
      api.DELETE('/api/v1/entries/{entryId}', { params: { path: { entryId: entry }, query: { permanent: 'true' } } }),
    );
    // Groups and folders.
    const member = await createMember(user, 'Grouped');
    expected.push('member.created');
    const group = (await api.POST('/api/v1/groups', { body: { name: 'G' } })).data!.id;
    expected.push('group.created');
    const groupPath = { params: { path: { groupId: group } } };
    await step(['group.updated'], () => api.PATCH('/api/v1/groups/{groupId}', { ...groupPath, body: { name: 'G2' } }));
    await step(['group.members_changed'], () =>
      api.PUT('/api/v1/groups/{groupId}/members', { ...groupPath, body: { memberIds: [member] } }),
    );
    await step(['group.trashed'], () => api.DELETE('/api/v1/groups/{groupId}', groupPath));
    await step(['group.restored'], () => api.POST('/api/v1/groups/{groupId}/restore', groupPath));
    await step(['folder.created'], () => api.POST('/api/v1/folders', { body: { name: 'F' } }));
    // Custom fields: their definitions, then a member's value.
    const field = (await api.POST('/api/v1/custom-fields', { body: { name: 'F', type: 'text' } })).data!.id;
    expected.push('custom_field.created');
    const fieldPath = { params: { path: { fieldId: field } } };
    await step(['custom_field.updated'], () =>
      api.PATCH('/api/v1/custom-fields/{fieldId}', { ...fieldPath, body: { name: 'Canary-field-name', sortOrder: 3 } }),
    );
    await step(['custom_field.trashed'], () => api.DELETE('/api/v1/custom-fields/{fieldId}', fieldPath));
    // Refused (a trashed field is not renamed, nor trashed again): nothing.
    expect(
      (await api.PATCH('/api/v1/custom-fields/{fieldId}', { ...fieldPath, body: { name: 'No' } })).response.status,
    ).toBe(404);
    expect((await api.DELETE('/api/v1/custom-fields/{fieldId}', fieldPath)).response.status).toBe(404);
    await step(['custom_field.restored'], () =>
      api.POST('/api/v1/members/{memberId}/custom-fields/{fieldId}/restore', {
        params: { path: { memberId: member, fieldId: field } },
      }),
    );
    await step(['custom_field_value.changed'], () =>
      api.PUT('/api/v1/members/{memberId}/custom-fields/{fieldId}', {
        params: { path: { memberId: member, fieldId: field } },
        body: { value: 'Canary-field-value' },
      }),
    );
    // Messages: their text never travels in an event.
    const space = (await api.POST('/api/v1/messaging/spaces', { body: { name: 'Home' } })).data!.id;
    const spacePath = { params: { path: { spaceId: space } } };
    const category = (
      await api.POST('/api/v1/messaging/spaces/{spaceId}/categories', { ...spacePath, body: { name: 'Talk' } })
    ).data!.id;
    const channel = (
      await api.POST('/api/v1/messaging/spaces/{spaceId}/channels', { ...spacePath, body: { name: 'general' } })
    ).data!.id;
    expected.push('space.created', 'category.created', 'channel.created');
    const channelPath = { params: { path: { channelId: channel } } };
    await step(['space.updated'], () =>
      api.PATCH('/api/v1/messaging/spaces/{spaceId}', { ...spacePath, body: { name: 'House' } }),
    );
    await step(['category.updated'], () =>
      api.PATCH('/api/v1/messaging/categories/{categoryId}', {
        params: { path: { categoryId: category } },
        body: { name: 'Chat' },
      }),
    );
    await step(['channel.updated'], () =>
      api.PATCH('/api/v1/messaging/channels/{channelId}', { ...channelPath, body: { topic: 'Canary-topic' } }),
    );
    await step(['channel.moved'], () =>
      api.PATCH('/api/v1/messaging/channels/{channelId}/move', { ...channelPath, body: { categoryId: category } }),
    );
    const sent = await api.POST('/api/v1/messaging/channels/{channelId}/messages', {
      params: { path: { channelId: channel } },
      body: { memberId: member, content: 'Canary-message-text' },
    });
    expect(sent.response.status).toBe(201);
    expected.push('message.created');
    const messagePath = { params: { path: { messageId: sent.data!.id } } };
    await step(['message.edited'], () =>
      api.PATCH('/api/v1/messaging/messages/{messageId}', { ...messagePath, body: { content: 'Canary-edited' } }),
    );
    await step(['message.pinned'], () =>
      api.POST('/api/v1/messaging/channels/{channelId}/pins', {
        params: { path: { channelId: channel } },
        body: { messageId: sent.data!.id },
      }),
    );
    await step(['message.unpinned'], () =>
      api.DELETE('/api/v1/messaging/channels/{channelId}/pins/{messageId}', {
        params: { path: { channelId: channel, messageId: sent.data!.id } },
      }),
    );
    await step(['message.deleted'], () => api.DELETE('/api/v1/messaging/messages/{messageId}', messagePath));
    await step(['category.deleted'], () =>
      api.DELETE('/api/v1/messaging/categories/{categoryId}', { params: { path: { categoryId: category } } }),
    );
    await step(['channel.archived'], () => api.DELETE('/api/v1/messaging/channels/{channelId}', channelPath));
    await step(['space.archived'], () => api.DELETE('/api/v1/messaging/spaces/{spaceId}', spacePath));

    await stream.until(expected.length);
    expect(types(stream.messages)).toEqual(expected);
    const data = (type: string) =>
      stream.messages.filter((m) => m.event === type).map((m) => (m.data as { data: unknown }).data);
    expect(data('entry.updated')).toEqual([{ id: entry, fields: ['title'] }]);
    expect(data('group.members_changed')).toEqual([{ id: group }]);
    expect(data('custom_field.created')).toEqual([{ id: field }]);
    expect(data('custom_field.updated')).toEqual([{ id: field, fields: ['name', 'sortOrder'] }]);
    expect(data('custom_field.trashed')).toEqual([{ id: field }]);
    expect(data('custom_field.restored')).toEqual([{ id: field }]);
    expect(data('custom_field_value.changed')).toEqual([{ id: field, memberId: member }]);
    expect(data('message.deleted')).toEqual([{ id: sent.data!.id, channelId: channel }]);
    expect(data('channel.updated')).toEqual([{ id: channel, fields: ['topic'] }]);
    expectNoneOf(stream.raw, [
      'Canary-note-text',
      'Canary-field-value',
      'Canary-field-name',
      'Canary-message-text',
      'Canary-edited',
      'Canary-topic',
    ]);
    stream.close();
  });

  it('friendships, member statuses, buckets, front session corrections, appearance and terminology send theirs', async () => {
    const user = await server.user();
    const other = await server.user();
    const { api } = user;
    const stream = await openStream(user);
    const otherStream = await openStream(other);
    const ok = async (write: Promise<{ response: Response }>) => {
      const { response } = await write;
      expect(response.ok, String(response.status)).toBe(true);
    };
    // A request and its acceptance reach both accounts; a revoke only the one that made it.
    await ok(api.POST('/api/v1/friends/{friendUserId}/request', { params: { path: { friendUserId: other.userId } } }));
    await ok(
      other.api.POST('/api/v1/friends/requests/{requesterUserId}/accept', {
        params: { path: { requesterUserId: user.userId } },
      }),
    );
    await ok(api.POST('/api/v1/friends/{friendUserId}/revoke', { params: { path: { friendUserId: other.userId } } }));
    const member = await createMember(user, 'Statused');
    const status = (await api.POST('/api/v1/member-statuses', { body: { name: 'Tired', color: '#000000' } })).data!.id;
    const statusPath = { params: { path: { memberId: member, statusId: status } } };
    await ok(api.PUT('/api/v1/members/{memberId}/statuses/{statusId}', statusPath));
    await ok(api.DELETE('/api/v1/members/{memberId}/statuses/{statusId}', statusPath));
    const definitionPath = { params: { path: { statusId: status } } };
    await ok(api.PATCH('/api/v1/member-statuses/{statusId}', { ...definitionPath, body: { name: 'Sleepy' } }));
    await ok(api.DELETE('/api/v1/member-statuses/{statusId}', definitionPath));
    const bucket = (await api.POST('/api/v1/privacy-buckets', { body: { name: 'Close' } })).data!._id;
    const bucketPath = { params: { path: { bucketId: bucket } } };
    await ok(api.PATCH('/api/v1/privacy-buckets/{bucketId}', { ...bucketPath, body: { name: 'Closer' } }));
    await ok(
      api.PUT('/api/v1/privacy-buckets/assignments/members/{memberId}', {
        params: { path: { memberId: member } },
        body: { bucketIds: [bucket] },
      }),
    );
    await ok(api.DELETE('/api/v1/privacy-buckets/{bucketId}', bucketPath));
    // A past session: corrected, trashed, restored.
    await ok(api.POST('/api/v1/front/members', { body: { memberId: member } }));
    await ok(api.DELETE('/api/v1/front/members/{memberId}', { params: { path: { memberId: member } } }));
    const session = (await api.GET('/api/v1/front/history', { params: { query: {} } })).data!.items[0]!.session._id;
    const sessionPath = { params: { path: { sessionId: session } } };
    await ok(
      api.PATCH('/api/v1/front/sessions/{sessionId}', { ...sessionPath, body: { note: 'Canary-session-note' } }),
    );
    await ok(api.DELETE('/api/v1/front/sessions/{sessionId}', sessionPath));
    await ok(api.POST('/api/v1/front/sessions/{sessionId}/restore', sessionPath));
    await ok(api.PATCH('/api/v1/appearance', { body: { themeMode: 'dark' } }));
    await ok(api.PATCH('/api/v1/terminology', { body: { member: { singular: 'Headmate' } } }));
    await ok(api.POST('/api/v1/appearance/reset'));
    await ok(api.POST('/api/v1/terminology/reset'));
    const expected = [
      'friendship.requested',
      'friendship.accepted',
      'friendship.revoked',
      'member.created',
      'member_status.created',
      'member_status.assigned',
      'member_status.cleared',
      'member_status.updated',
      'member_status.deleted',
      'privacy_bucket.created',
      'privacy_bucket.updated',
      'privacy_bucket.assigned',
      'privacy_bucket.deleted',
      'front.changed',
      'front.changed',
      'front_session.corrected',
      'front_session.trashed',
      'front_session.restored',
      'appearance.changed',
      'terminology.changed',
      'appearance.changed',
      'terminology.changed',
    ];
    await stream.until(expected.length);
    expect(types(stream.messages)).toEqual(expected);
    await otherStream.until(2);
    await new Promise((r) => setTimeout(r, 200));
    expect(types(otherStream.messages)).toEqual(['friendship.requested', 'friendship.accepted']);
    const data = (m: Message) => (m.data as { data: unknown; actor: unknown }).data;
    expect(otherStream.messages.map(data)).toEqual([{ id: user.userId }, { id: user.userId }]);
    // The request reached the other account as the friend's doing; the acceptance was its own key's.
    expect(otherStream.messages.map((m) => (m.data as { actor: unknown }).actor)).toEqual([
      { kind: 'friend', id: user.userId },
      { kind: 'key', id: other.keyId },
    ]);
    expect(data(stream.messages[5]!)).toEqual({ id: status, memberId: member });
    expect(data(stream.messages.find((m) => m.event === 'privacy_bucket.assigned')!)).toEqual({
      id: member,
      kind: 'member',
    });
    expectNoneOf(stream.raw, ['Canary-session-note']);
    stream.close();
    otherStream.close();
  });

  it('layouts, side and sub systems, the active scope, bucket defaults, read marks, fonts and colour schemes send theirs', async () => {
    const user = await server.user();
    const { api } = user;
    const stream = await openStream(user);
    const ok = async <T>(write: Promise<{ response: Response; data?: T }>): Promise<T> => {
      const { response, data, error } = (await write) as { response: Response; data?: T; error?: unknown };
      expect(response.ok, `${response.status} ${JSON.stringify(error)}`).toBe(true);
      return data as T;
    };
    const scheme = await ok(
      api.POST('/api/v1/appearance/custom-color-schemes', { body: { name: 'Dusk', colors: { primary: '#112233' } } }),
    );
    await ok(
      api.DELETE('/api/v1/appearance/custom-color-schemes/{schemeId}', { params: { path: { schemeId: scheme!.id } } }),
    );
    await ok(
      api.POST('/api/v1/appearance/custom-fonts', {
        body: { name: 'Atkinson', sourceUrl: 'https://fonts.example.org/a.woff2' },
      }),
    );
    const layout = (await ok(
      api.POST('/api/v1/directory-layouts', { body: { directoryId: null, name: 'By role', itemIds: [] } }),
    ))!.id;
    await ok(api.DELETE('/api/v1/directory-layouts/{layoutId}', { params: { path: { layoutId: layout } } }));
    await ok(api.POST('/api/v1/directory-layouts/{layoutId}/restore', { params: { path: { layoutId: layout } } }));
    const side = (await ok(api.POST('/api/v1/systems/side-systems', { body: { name: 'Work' } })))!._id;
    await ok(
      api.PATCH('/api/v1/systems/side-systems/{sideSystemId}', {
        params: { path: { sideSystemId: side } },
        body: { name: 'Office' },
      }),
    );
    const linked = (await ok(api.POST('/api/v1/members', { body: { name: 'Linked', sideSystemId: side } as never })))!
      .id;
    const sub = (await ok(
      api.POST('/api/v1/systems/sub-systems', {
        body: { sideSystemId: side, linkedMemberId: linked, name: 'Littles' },
      }),
    ))!._id;
    await ok(api.PATCH('/api/v1/systems/active', { body: { sideSystemId: side } }));
    await ok(api.PATCH('/api/v1/systems/unified-view', { body: { enabled: true } }));
    await ok(api.DELETE('/api/v1/systems/sub-systems/{subSystemId}', { params: { path: { subSystemId: sub } } }));
    const bucket = await createBucket(user, {}, 'Defaults');
    await ok(
      api.PUT('/api/v1/privacy-buckets/defaults/{kind}', {
        params: { path: { kind: 'new_member' } },
        body: { bucketIds: [bucket] },
      }),
    );
    const space = (await ok(api.POST('/api/v1/messaging/spaces', { body: { name: 'Home' } })))!.id;
    const channel = (await ok(
      api.POST('/api/v1/messaging/spaces/{spaceId}/channels', {
        params: { path: { spaceId: space } },
        body: { name: 'general' },
      }),
    ))!.id;
    await ok(
      api.POST('/api/v1/messaging/channels/{channelId}/read', { params: { path: { channelId: channel } }, body: {} }),
    );

    const expected: Array<[string, Record<string, unknown>]> = [
      ['appearance.changed', { id: user.userId, fields: ['customColorSchemes'] }],
      ['appearance.changed', { id: user.userId, fields: ['customColorSchemes'] }],
      ['appearance.changed', { id: user.userId, fields: ['customFonts'] }],
      ['layout.created', { id: layout }],
      ['layout.trashed', { id: layout }],
      ['layout.restored', { id: layout }],
      ['side_system.created', { id: side }],
      ['side_system.updated', { id: side, fields: ['name'] }],
      ['member.created', { memberId: linked }],
      ['sub_system.created', { id: sub }],
      ['system_scope.changed', { id: user.userId }],
      ['system_scope.changed', { id: user.userId }],
      ['sub_system.deleted', { id: sub }],
      ['privacy_bucket.created', { id: bucket }],
      ['privacy_bucket.defaults_changed', { id: user.userId, kind: 'new_member' }],
      ['space.created', { id: space }],
      ['channel.created', { id: channel }],
      ['channel.read', { id: channel }],
    ];
    await stream.until(expected.length);
    expect(stream.messages.map((m) => [(m.data as Event).type, (m.data as Event).data])).toEqual(expected);
    stream.close();
  });

  it('guestbook posts, poll votes and social profile changes send theirs; an anonymous post or a vote never names the friend', async () => {
    const owner = await server.user();
    const friend = await server.user();
    await befriend(owner, friend);
    const stream = await openStream(owner);
    const created = async (write: Promise<{ response: Response; data?: unknown }>) => {
      const { response, data } = await write;
      expect(response.ok, String(response.status)).toBe(true);
      return data as Record<string, string>;
    };
    const widget = (config: Record<string, unknown>) =>
      created(
        owner.api.POST('/api/v1/social/widgets', {
          body: { type: config.kind, config, visibility: 'public', size: 'medium' } as never,
        }),
      );
    const guestbook = (await widget({ kind: 'guestbook', allowAnonymous: true })).widgetId!;
    const poll = (await widget({ kind: 'poll', question: 'Tea?', options: ['Yes', 'No'] })).widgetId!;
    const friendPost = (body: Record<string, unknown>) =>
      created(
        friend.api.POST('/api/v1/friends/{friendUserId}/social/widgets/{widgetId}/guestbook', {
          params: { path: { friendUserId: owner.userId, widgetId: guestbook } },
          body: body as never,
        }),
      );
    const named = (await friendPost({ body: 'Hello from a friend' })).id!;
    const anonymous = (await friendPost({ body: 'Guess who', postAnonymously: true })).id!;
    await created(
      owner.api.PATCH('/api/v1/social/widgets/{widgetId}/guestbook/messages/{messageId}', {
        params: { path: { widgetId: guestbook, messageId: anonymous } },
        body: { hiddenByOwner: true },
      }),
    );
    await created(
      owner.api.DELETE('/api/v1/social/widgets/{widgetId}/guestbook/messages/{messageId}', {
        params: { path: { widgetId: guestbook, messageId: named } },
      }),
    );
    await created(
      friend.api.POST('/api/v1/friends/{friendUserId}/social/widgets/{widgetId}/poll', {
        params: { path: { friendUserId: owner.userId, widgetId: poll } },
        body: { optionIndices: [0] },
      }),
    );
    const link = (
      await created(
        owner.api.POST('/api/v1/social/links', {
          body: { platform: 'bluesky', displayName: 'Alex', visibility: 'public' } as never,
        }),
      )
    ).linkId!;
    await created(owner.api.PATCH('/api/v1/social', { body: { theme: { accentColor: '#7A5CFA' } } }));

    // Its author (the friend) deletes the anonymous message, through a guestbook of its own: the
    // event is on the owner's log, still without the friend's id.
    const authorsBook = (
      await created(
        friend.api.POST('/api/v1/social/widgets', {
          body: { type: 'guestbook', config: { kind: 'guestbook' }, visibility: 'public', size: 'medium' } as never,
        }),
      )
    ).widgetId!;
    await created(
      friend.api.DELETE('/api/v1/social/widgets/{widgetId}/guestbook/messages/{messageId}', {
        params: { path: { widgetId: authorsBook, messageId: anonymous } },
      }),
    );

    await stream.until(11);
    const events = stream.messages.map((m) => m.data as Event);
    expect(events.map((e) => [e.type, e.data])).toEqual([
      ['social_profile.changed', { id: guestbook, kind: 'widget' }],
      ['social_profile.changed', { id: poll, kind: 'widget' }],
      ['guestbook.posted', { id: named, widgetId: guestbook }],
      ['guestbook.posted', { id: anonymous, widgetId: guestbook }],
      ['guestbook.updated', { id: anonymous, widgetId: guestbook, fields: ['hiddenByOwner'] }],
      ['guestbook.deleted', { id: named, widgetId: guestbook }],
      ['poll.voted', { id: poll, widgetId: poll }],
      ['social_profile.changed', { id: link, kind: 'link' }],
      ['social_profile.changed', { id: owner.userId, kind: 'theme' }],
      // (The friend's new widget, on the friend's social section.)
      ['friend.social.changed', expect.objectContaining({ friendUserId: friend.userId })],
      ['guestbook.deleted', { id: anonymous, widgetId: guestbook }],
    ]);
    expect(events.filter((e) => e.type !== 'friend.social.changed').every((e) => e.accountId === owner.userId)).toBe(
      true,
    );
    expect(events[2]!.actor).toEqual({ kind: 'friend', id: friend.userId });
    // The anonymous post and the vote: nowhere in their messages is the friend.
    for (const i of [3, 6, 10]) {
      expect(events[i]!.actor).toEqual({ kind: 'friend', id: null });
      expect(JSON.stringify(stream.messages[i])).not.toContain(friend.userId);
    }
    stream.close();
  });

  it('purging the trash sends member.deleted, entry.purged or trash.purged for each item', async () => {
    const user = await server.user();
    const { api } = user;
    const member = await createMember(user, 'Going for good');
    const group = (await api.POST('/api/v1/groups', { body: { name: 'Old group' } })).data!.id;
    await api.DELETE('/api/v1/members/{memberId}', { params: { path: { memberId: member } } });
    await api.DELETE('/api/v1/groups/{groupId}', { params: { path: { groupId: group } } });
    const stream = await openStream(user);
    const purged = await api.POST('/api/v1/trash/purge', {
      body: {
        items: [
          { type: 'member', id: member },
          { type: 'directory', id: group },
        ],
      },
    });
    expect(purged.response.status).toBe(204);
    await stream.until(2);
    expect(stream.messages.map((m) => [m.event, (m.data as { data: unknown }).data])).toEqual([
      ['member.deleted', { memberId: member }],
      ['trash.purged', { id: group, kind: 'directory' }],
    ]);
    stream.close();
  });

  it('the trash retention job sends each purge it makes, as the route does, as the job', async () => {
    const user = await server.user();
    const { api } = user;
    const entry = (await api.POST('/api/v1/entries', { body: { content: 'expiring' } })).data!.id;
    await api.DELETE('/api/v1/entries/{entryId}', { params: { path: { entryId: entry } } });
    // Trashed long ago: past any retention.
    await server.runtime.deps.db.knex('entries').where({ id: entry }).update({ deleted_at: 1 });
    const stream = await openStream(user);
    await server.runtime.trashRetention.runOnce();
    await stream.until(1);
    expect(stream.messages.map((m) => [m.event, (m.data as Event).data, (m.data as Event).actor])).toEqual([
      ['entry.purged', { id: entry }, { kind: 'system', id: 'trash_retention' }],
    ]);
    stream.close();
  });

  it('an import sends one import.applied as it commits, not an event per entity', async () => {
    const user = await server.user();
    const stream = await openStream(user);
    const file = {
      version: 2,
      members: [
        { id: 'abcde', uuid: '11111111-1111-4111-8111-111111111111', name: 'Robin' },
        { id: 'fghij', uuid: '22222222-2222-4222-8222-222222222222', name: 'Sage' },
      ],
      switches: [{ timestamp: '2024-05-01T12:00:00Z', members: ['abcde'] }],
    };
    const res = await server.fetch('/api/v1/imports?source=pluralkit', {
      method: 'POST',
      headers: { ...bearer(user.apiKey), 'Content-Type': 'application/json' },
      body: JSON.stringify(file),
    });
    expect(res.status).toBe(202);
    const { id } = (await res.json()) as { id: string };
    await server.runtime.jobs.runDue();
    await createMember(user, 'After the import');
    await stream.until(2);
    expect(types(stream.messages)).toEqual(['import.applied', 'member.created']);
    expect((stream.messages[0]!.data as { data: unknown }).data).toEqual({ id });
    stream.close();
  });
});

describe.runIf(Boolean(process.env.DATABASE_URL))('the event stream across instances (PostgreSQL)', () => {
  it('a write on one instance reaches a stream on another; a restarted server resumes from the log', async () => {
    const a = await new TestServer().start();
    const b = await new TestServer().start({ databaseUrl: a.databaseUrl });
    try {
      const user = await a.user();
      const onB = await openStream(user, { on: b });
      const first = await createMember(user, 'Written on A');
      await onB.until(1);
      expect(onB.messages[0]).toMatchObject({ event: 'member.created', data: { data: { memberId: first } } });
      onB.close();
      const cursor = onB.messages[0]!.id!;
      // B goes away; A writes meanwhile; a new instance resumes the stream from the cursor.
      await b.close();
      const second = await createMember(user, 'While B was down');
      const third = await createMember(user, 'And another');
      const c = await new TestServer().start({ databaseUrl: a.databaseUrl });
      try {
        const resumed = await openStream(user, { on: c, lastEventId: cursor });
        await resumed.until(2);
        expect(resumed.messages.map((m) => (m.data as { data: { memberId: string } }).data.memberId)).toEqual([
          second,
          third,
        ]);
        resumed.close();
      } finally {
        await c.close();
      }
    } finally {
      await a.close();
    }
  });

  it('after its listening connection is cut, an instance reconnects and sends what was written meanwhile', async () => {
    const a = await new TestServer().start();
    try {
      const user = await a.user();
      const stream = await openStream(user, { on: a });
      const listener = () =>
        a.deps.db
          .knex('pg_stat_activity')
          .where({ application_name: 'event-log' })
          .whereRaw('datname = current_database()')
          .pluck('pid');
      const [before] = await listener();
      await a.deps.db.knex.raw('select pg_terminate_backend(?)', [before]);
      // An event that sends no notification at all (written straight into the log): only the read
      // the hub makes when its listening connection is back can deliver it.
      const memberId = '0b5c5d9e-7c2e-4d8a-9f3b-2a1e6c4d8f01';
      await a.deps.db.knex('events').insert({
        account_id: user.userId,
        type: 'member.created',
        area: 'members',
        occurred_at: Date.now(),
        actor: JSON.stringify({ kind: 'system', id: 'test' }),
        data: JSON.stringify({ memberId }),
      });
      await stream.until(1);
      expect((stream.messages[0]!.data as { data: { memberId: string } }).data.memberId).toBe(memberId);
      const [after] = await listener();
      expect(after).toBeDefined();
      expect(after).not.toBe(before);
      stream.close();
    } finally {
      await a.close();
    }
  });
});

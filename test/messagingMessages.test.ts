import { execFileSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import type { ApiClient, components } from '../client/index.ts';
import { createMember, createSide, UNKNOWN_ID } from './helpers/fixtures.ts';
import { captureStatements, REQUEST_WORK } from './helpers/plans.ts';
import { bearer, useServer } from './helpers/server.ts';
import { untilWaitingForLock } from './helpers/db.ts';

type Message = components['schemas']['Message'];

let now = 1_800_000_000_000;
const server = useServer({ clock: () => now });

const ch = (channelId: string) => ({ params: { path: { channelId } } });
const msgPath = (messageId: string) => ({ params: { path: { messageId } } });

async function setup(api: ApiClient, spaceExtra: Record<string, unknown> = {}) {
  const s = (await api.POST('/api/v1/messaging/spaces', { body: { name: 'S', ...spaceExtra } })).data!;
  const c = (
    await api.POST('/api/v1/messaging/spaces/{spaceId}/channels', {
      params: { path: { spaceId: s.id } },
      body: { name: 'general' },
    })
  ).data!;
  return { spaceId: s.id, channelId: c.id };
}
async function newChannel(api: ApiClient, spaceId: string, name = 'c') {
  return (
    await api.POST('/api/v1/messaging/spaces/{spaceId}/channels', { params: { path: { spaceId } }, body: { name } })
  ).data!.id;
}
async function send(
  api: ApiClient,
  channelId: string,
  memberId: string,
  content: string,
  extra: Record<string, unknown> = {},
): Promise<Message> {
  now += 1;
  const res = await api.POST('/api/v1/messaging/channels/{channelId}/messages', {
    ...ch(channelId),
    body: { memberId, content, ...extra },
  });
  expect(res.response.status, JSON.stringify(res.error)).toBe(201);
  return res.data!;
}
async function unread(api: ApiClient) {
  return (await api.GET('/api/v1/messaging/bootstrap')).data!.unreadByChannelId;
}

describe('send', () => {
  it('answers 201 with the full decrypted message; mentions and replies resolved', async () => {
    const { api } = await server.user();
    const robin = await createMember(api, 'Robin', { displayName: 'Rob' });
    const sam = await createMember(api, 'Sam');
    const { channelId } = await setup(api);
    const first = await send(api, channelId, robin, `hi <@${sam}> and <@${UNKNOWN_ID}> and <@${sam}>`);
    expect(first).toEqual({
      id: first.id,
      channelId,
      authorMemberId: robin,
      authorMemberAvatarUrl: null,
      content: `hi <@${sam}> and <@${UNKNOWN_ID}> and <@${sam}>`,
      createdAt: now,
      editedAt: null,
      attachments: [],
      linkPreviews: [],
      gif: null,
      mentions: [{ memberId: sam, name: 'Sam', displayName: '' }],
      replyTo: null,
    });
    const reply = await send(api, channelId, sam, 'yes', { replyToMessageId: first.id });
    expect(reply.replyTo).toEqual({
      messageId: first.id,
      authorMemberId: robin,
      excerpt: first.content,
      deleted: false,
    });
    const long = await send(api, channelId, sam, 'é'.repeat(4000));
    expect((await send(api, channelId, sam, 'r', { replyToMessageId: long.id })).replyTo!.excerpt).toBe(
      'é'.repeat(200),
    );
  });

  it('validates the member, the reply parent, the content and the body', async () => {
    const { api } = await server.user();
    const other = await server.user();
    const m = await createMember(api);
    const archived = await createMember(api, 'Old');
    await api.PATCH('/api/v1/members/{memberId}', {
      params: { path: { memberId: archived } },
      body: { archived: true },
    });
    const trashed = await createMember(api, 'Gone');
    await api.DELETE('/api/v1/members/{memberId}', { params: { path: { memberId: trashed } } });
    const theirMember = await createMember(other.api);
    const { spaceId, channelId } = await setup(api);
    const otherChannel = await newChannel(api, spaceId);
    const elsewhere = await send(api, otherChannel, m, 'elsewhere');
    const deleted = await send(api, channelId, m, 'deleted');
    await api.DELETE('/api/v1/messaging/messages/{messageId}', msgPath(deleted.id));
    const cases: Array<[Record<string, unknown>, string | null]> = [
      [{ memberId: archived, content: 'x' }, 'memberId is not a live, non-archived member of this account'],
      [{ memberId: trashed, content: 'x' }, 'memberId is not a live, non-archived member of this account'],
      [{ memberId: theirMember, content: 'x' }, 'memberId is not a live, non-archived member of this account'],
      [
        { memberId: m, content: 'x', replyToMessageId: elsewhere.id },
        'replyToMessageId is not a message of this channel',
      ],
      [
        { memberId: m, content: 'x', replyToMessageId: deleted.id },
        'replyToMessageId is not a message of this channel',
      ],
      [
        { memberId: m, content: 'x', replyToMessageId: UNKNOWN_ID },
        'replyToMessageId is not a message of this channel',
      ],
      [{ memberId: m, content: 'x'.repeat(4001) }, null],
      [{ memberId: m, content: '' }, null],
      [{ memberId: m }, null],
      [{ memberId: m, content: null }, null],
      [{ memberId: m, content: 'x', clientMutationId: 'c'.repeat(101) }, null],
      [{ memberId: m, content: 'x', stagedAttachmentIds: [UNKNOWN_ID] }, null],
      [{ memberId: m, content: 'x', gifMetadata: { id: 'g' } }, null],
    ];
    for (const [body, message] of cases) {
      const res = await api.POST('/api/v1/messaging/channels/{channelId}/messages', {
        ...ch(channelId),
        body: body as never,
      });
      expect(res.response.status, JSON.stringify(body)).toBe(400);
      if (message) expect(res.error!.message).toBe(message);
      expect(JSON.stringify(res.error)).not.toContain(theirMember);
    }
    expect((await api.GET('/api/v1/messaging/channels/{channelId}/messages', ch(channelId))).data!.items).toEqual([]);
    expect(
      (
        await api.POST('/api/v1/messaging/channels/{channelId}/messages', {
          ...ch(UNKNOWN_ID),
          body: { memberId: m, content: 'x' },
        })
      ).error,
    ).toEqual({ code: 'NOT_FOUND', message: 'Channel not found' });
  });

  it('mentions keep only members mentionable in the channel (the space side system when it has one)', async () => {
    const { api } = await server.user();
    const other = await server.user();
    const side = await createSide(api, 'Work');
    const inSide = await createMember(api, 'Worker', { sideSystemId: side });
    const outside = await createMember(api, 'Home');
    const archived = await createMember(api, 'Old');
    await api.PATCH('/api/v1/members/{memberId}', {
      params: { path: { memberId: archived } },
      body: { archived: true },
    });
    const theirs = await createMember(other.api, 'Theirs');
    const { channelId } = await setup(api, { sideSystemId: side });
    const msg = await send(
      api,
      channelId,
      outside,
      `<@${outside}> <@${inSide}> <@${archived}> <@${theirs}> <@${inSide.toUpperCase()}>`,
    );
    expect(msg.mentions).toEqual([{ memberId: inSide, name: 'Worker', displayName: '' }]);
    const list = await api.GET('/api/v1/messaging/mentions', { params: { query: { channelId } } });
    expect(list.data).toEqual([{ memberId: inSide, name: 'Worker', displayName: '', avatarUrl: null }]);
  });

  it('clientMutationId: a retry returns the first message with 200; concurrent retries create one; another channel is 409', async () => {
    const { api } = await server.user();
    const m = await createMember(api);
    const { spaceId, channelId } = await setup(api);
    const first = await send(api, channelId, m, 'once', { clientMutationId: 'k1' });
    const again = await api.POST('/api/v1/messaging/channels/{channelId}/messages', {
      ...ch(channelId),
      body: { memberId: m, content: 'once', clientMutationId: 'k1' },
    });
    expect(again.response.status).toBe(200);
    expect(again.data).toEqual(first);
    now += 1;
    const results = await Promise.all(
      Array.from({ length: 8 }, () =>
        api.POST('/api/v1/messaging/channels/{channelId}/messages', {
          ...ch(channelId),
          body: { memberId: m, content: 'burst', clientMutationId: 'k2' },
        }),
      ),
    );
    expect(results.map((r) => r.response.status).sort()).toEqual([200, 200, 200, 200, 200, 200, 200, 201]);
    expect(new Set(results.map((r) => r.data!.id)).size).toBe(1);
    const page = (await api.GET('/api/v1/messaging/channels/{channelId}/messages', ch(channelId))).data!;
    expect(page.items.map((i) => i.content)).toEqual(['burst', 'once']);
    expect(await unread(api)).toEqual({ [channelId]: 2 });
    const other = await newChannel(api, spaceId);
    const retryUpper = await api.POST('/api/v1/messaging/channels/{channelId}/messages', {
      ...ch(channelId.toUpperCase()),
      body: { memberId: m, content: 'once', clientMutationId: 'k1' },
    });
    expect(retryUpper.response.status).toBe(200);
    expect(retryUpper.data!.id).toBe(first.id);
    const clash = await api.POST('/api/v1/messaging/channels/{channelId}/messages', {
      ...ch(other),
      body: { memberId: m, content: 'once', clientMutationId: 'k1' },
    });
    expect(clash.response.status).toBe(409);
    expect(clash.error).toEqual({ code: 'CONFLICT', message: 'clientMutationId was already used for another message' });
    // Another account may use the same id.
    const b = await server.user();
    const bm = await createMember(b.api);
    const bc = await setup(b.api);
    expect(
      (
        await b.api.POST('/api/v1/messaging/channels/{channelId}/messages', {
          ...ch(bc.channelId),
          body: { memberId: bm, content: 'x', clientMutationId: 'k1' },
        })
      ).response.status,
    ).toBe(201);
  });
});

describe('send cost', () => {
  it('sends a text message (a mention, a reply, a link) in one statement; a retry in two', async () => {
    const { api } = await server.user();
    const m = await createMember(api, 'Robin');
    const { channelId } = await setup(api);
    const parent = await send(api, channelId, m, 'warm-up'); // warms the key cache
    const knex = server.deps.db.knex;
    const body = { memberId: m, content: `hi <@${m}> see https://example.com/a`, replyToMessageId: parent.id };
    let sent: Message | undefined;
    const statements = await captureStatements(knex, REQUEST_WORK, async () => {
      sent = await send(api, channelId, m, body.content, { ...body, clientMutationId: 'cost-1' });
    });
    // One statement, outside any transaction (docs/data-access.md, "Writes in one statement"): the
    // checks, the channel locked, the message, the channel's counters, the preview and its job, the event.
    expect(
      statements.map((st) => st.sql.split(/\s+/).slice(0, 3).join(' ')),
      JSON.stringify(statements.map((st) => st.sql)),
    ).toEqual(['with channel as']);
    expect(statements[0]!.sql).toMatch(
      /for update of c[\s\S]*insert into messaging_messages[\s\S]*update messaging_channels[\s\S]*insert into messaging_link_previews[\s\S]*insert into jobs[\s\S]*insert into events/,
    );
    expect(sent).toMatchObject({
      content: body.content,
      mentions: [{ memberId: m, name: 'Robin', displayName: '' }],
      replyTo: { messageId: parent.id, authorMemberId: m, excerpt: 'warm-up', deleted: false },
      linkPreviews: [],
      attachments: [],
    });
    // The same answer as a read of it.
    const page = (await api.GET('/api/v1/messaging/channels/{channelId}/messages', ch(channelId))).data!;
    expect(page.items[0]).toEqual(sent);
    const { rows: jobs } = await knex.raw<{ rows: Array<{ max_attempts: number }> }>(
      `select j.max_attempts from jobs j join messaging_link_previews p on j.key = p.id::text
       where j.queue = 'link_preview' and p.message_id = ?`,
      [sent!.id],
    );
    expect(jobs).toEqual([{ max_attempts: 3 }]);

    // A retry: the statement finds the id used and writes nothing, then the stored message is read.
    const retry = await captureStatements(knex, REQUEST_WORK, async () => {
      const again = await api.POST('/api/v1/messaging/channels/{channelId}/messages', {
        ...ch(channelId),
        body: { ...body, clientMutationId: 'cost-1' },
      });
      expect(again.response.status).toBe(200);
      expect(again.data).toEqual(sent);
    });
    expect(retry.map((st) => st.sql.split(/\s+/).slice(0, 3).join(' '))).toEqual(['with channel as', 'select c.id as']);
  });

  it('appends message.created with its webhook delivery; a send with an Idempotency-Key replays', async () => {
    const user = await server.user();
    const { api, userId } = user;
    const m = await createMember(api);
    const { channelId } = await setup(api);
    const webhook = await api.POST('/api/v1/webhooks', {
      body: { url: 'https://hooks.example.org/a', types: ['message.created'] },
    });
    expect(webhook.response.status).toBe(201);
    const plain = await send(api, channelId, m, 'plain');
    const keyed = async () =>
      server.fetch(`/api/v1/messaging/channels/${channelId}/messages`, {
        method: 'POST',
        headers: { ...bearer(user.apiKey), 'Content-Type': 'application/json', 'Idempotency-Key': 'send-1' },
        body: JSON.stringify({ memberId: m, content: 'keyed' }),
      });
    now += 1;
    const first = await keyed();
    expect(first.status).toBe(201);
    const firstBody = await first.text();
    const again = await keyed();
    expect(again.status).toBe(201);
    expect(await again.text()).toBe(firstBody);
    const page = (await api.GET('/api/v1/messaging/channels/{channelId}/messages', ch(channelId))).data!;
    expect(page.items.map((i) => i.content)).toEqual(['keyed', 'plain']);
    const knex = server.deps.db.knex;
    const { rows } = await knex.raw<{ rows: Array<{ data: { id: string; channelId: string } }> }>(
      "select data from events where account_id = ? and type = 'message.created' order by id",
      [userId],
    );
    expect(rows.map((r) => r.data)).toEqual([
      { id: plain.id, channelId },
      { id: JSON.parse(firstBody).id, channelId },
    ]);
    const deliveries = await api.GET('/api/v1/webhooks/{webhookId}/deliveries', {
      params: { path: { webhookId: webhook.data!.webhook.id } },
    });
    expect(deliveries.data?.items).toHaveLength(2);
  });

  it('a keyed send is two statements (its answer read ahead, the send storing it under the key); a replay finds the key taken', async () => {
    const user = await server.user();
    const { api } = user;
    const m = await createMember(api, 'Robin', { displayName: 'Rob' });
    const { channelId } = await setup(api);
    const parent = await send(api, channelId, m, 'parent');
    const knex = server.deps.db.knex;
    // Keys in the contract's order, which jsonb (where the send stores it) does not keep.
    const gif = {
      id: 'g1',
      provider: 'tenor',
      title: 'Cat',
      url: 'https://media.tenor.com/a/cat.gif',
      previewUrl: 'https://media.tenor.com/a/tiny.gif',
      mp4Url: null,
      width: 498,
      height: 280,
    };
    const body = JSON.stringify({
      memberId: m,
      content: `hi <@${m}> see https://example.com/a`,
      replyToMessageId: parent.id,
      gifMetadata: gif,
    });
    const keyed = () =>
      server.fetch(`/api/v1/messaging/channels/${channelId}/messages`, {
        method: 'POST',
        headers: { ...bearer(user.apiKey), 'Content-Type': 'application/json', 'Idempotency-Key': 'ahead-1' },
        body,
      });
    now += 1;
    let first = '';
    const statements = await captureStatements(knex, REQUEST_WORK, async () => {
      const res = await keyed();
      expect(res.status).toBe(201);
      first = await res.text();
    });
    expect(
      statements.map((st) => st.sql.split(/\s+/).slice(0, 3).join(' ')),
      JSON.stringify(statements.map((st) => st.sql)),
    ).toEqual(['with channel as', 'with channel as']);
    expect(statements[0]!.sql).not.toMatch(/insert|update|for update/);
    expect(statements[1]!.sql).toMatch(/for update of c[\s\S]*insert into idempotency_keys[\s\S]*insert into events/);
    // The answer built ahead is byte for byte what a read of the message shows (the GIF in jsonb's key order).
    const page = (await api.GET('/api/v1/messaging/channels/{channelId}/messages', ch(channelId))).data!;
    expect(first).toBe(JSON.stringify(page.items[0]));
    expect(JSON.parse(first)).toMatchObject({
      content: `hi <@${m}> see https://example.com/a`,
      authorMemberId: m,
      mentions: [{ memberId: m, name: 'Robin', displayName: 'Rob' }],
      replyTo: { messageId: parent.id, authorMemberId: m, excerpt: 'parent', deleted: false },
      gif,
    });
    const replay = await captureStatements(knex, REQUEST_WORK, async () => {
      const again = await keyed();
      expect([again.status, await again.text(), again.headers.get('idempotent-replayed')]).toEqual([
        201,
        first,
        'true',
      ]);
    });
    // The read ahead, the send that finds the key taken (it writes nothing), the stored answer read.
    expect(replay.map((st) => st.sql.split(/\s+/).slice(0, 3).join(' '))).toEqual([
      'with channel as',
      'with channel as',
      'select id, fingerprint,',
    ]);
    expect(page.items).toHaveLength(2);
  });

  it('a keyed send whose answer changed after it was read ahead writes nothing and runs again in a transaction', async () => {
    const user = await server.user();
    const { api } = user;
    const m = await createMember(api, 'Robin');
    const sam = await createMember(api, 'Sam');
    const { channelId } = await setup(api);
    await send(api, channelId, m, 'warm-up');
    const knex = server.deps.db.knex;
    const rename = `update members set name = 'Samuel' where id = '${sam}'`;
    // Sam is renamed between the read ahead and the send. On PostgreSQL the rename commits (the
    // process waits for psql) just before the send goes out; the embedded database has one
    // connection, and the rename asked for it first.
    let renamed: Promise<unknown> | undefined;
    const interleave = (q: { sql: string }) => {
      if (renamed) return;
      if (server.databaseUrl && /insert into idempotency_keys/.test(q.sql) && /\bahead\b/.test(q.sql)) {
        execFileSync('psql', [server.databaseUrl, '-qc', rename]);
        renamed = Promise.resolve();
      } else if (!server.databaseUrl && /\bahead\b/.test(q.sql) && !/insert/.test(q.sql)) {
        // A knex query runs once it is asked for its result.
        renamed = knex.raw(rename).then(() => undefined);
      }
    };
    const keyed = () =>
      server.fetch(`/api/v1/messaging/channels/${channelId}/messages`, {
        method: 'POST',
        headers: { ...bearer(user.apiKey), 'Content-Type': 'application/json', 'Idempotency-Key': 'stale-1' },
        body: JSON.stringify({ memberId: m, content: `hi <@${sam}>` }),
      });
    now += 1;
    let first = '';
    knex.on('query', interleave);
    let statements: Array<{ sql: string }>;
    try {
      statements = await captureStatements(knex, REQUEST_WORK, async () => {
        const res = await keyed();
        expect(res.status).toBe(201);
        first = await res.text();
      });
    } finally {
      knex.off('query', interleave);
    }
    await renamed;
    const words = statements
      .filter((st) => !st.sql.startsWith('update members'))
      .map((st) => st.sql.trim().split(/\s+/).slice(0, 3).join(' ').toLowerCase());
    // The read ahead, the send that found it stale, then the transaction: the key's lock, the send, the answer stored.
    expect(words).toEqual([
      'with channel as',
      'with channel as',
      'begin;',
      'select pg_try_advisory_xact_lock(hashtextextended($1, 0))',
      'with channel as',
      'insert into idempotency_keys',
      'commit;',
    ]);
    // The answer is the message as written: the mention under its new name, once.
    expect(JSON.parse(first).mentions).toEqual([{ memberId: sam, name: 'Samuel', displayName: '' }]);
    const page = (await api.GET('/api/v1/messaging/channels/{channelId}/messages', ch(channelId))).data!;
    expect(page.items).toHaveLength(2);
    expect(first).toBe(JSON.stringify(page.items[0]));
    const again = await keyed();
    expect([again.status, await again.text(), again.headers.get('idempotent-replayed')]).toEqual([201, first, 'true']);
    const { rows } = await knex.raw<{ rows: Array<{ seq: string }> }>(
      'select seq from messaging_messages where channel_id = ? order by seq',
      [channelId],
    );
    expect(rows.map((r) => Number(r.seq))).toEqual([1, 2]);
  });

  it('concurrent keyed sends to one channel: distinct sequence numbers, one message per key, each key replayed', async () => {
    const user = await server.user();
    const { api } = user;
    const m = await createMember(api);
    const { channelId } = await setup(api);
    await send(api, channelId, m, 'first');
    now += 1;
    const keyed = (key: string) =>
      server
        .fetch(`/api/v1/messaging/channels/${channelId}/messages`, {
          method: 'POST',
          headers: { ...bearer(user.apiKey), 'Content-Type': 'application/json', 'Idempotency-Key': key },
          body: JSON.stringify({ memberId: m, content: `keyed ${key}` }),
        })
        .then(async (res) => ({ key, status: res.status, text: await res.text() }));
    // Twelve keys, each sent twice at once.
    const keys = Array.from({ length: 12 }, (_, i) => `race-${i}`);
    const answers = await Promise.all([...keys, ...keys].map(keyed));
    for (const a of answers) expect([201, 409], a.text).toContain(a.status);
    const created = new Map<string, string>();
    for (const a of answers.filter((x) => x.status === 201)) {
      if (created.has(a.key)) expect(a.text).toBe(created.get(a.key));
      created.set(a.key, a.text);
    }
    // A 409 (the other request with the key in flight) is retried: the replay of the one send.
    for (const key of keys) {
      const again = await keyed(key);
      expect(again.status).toBe(201);
      if (created.has(key)) expect(again.text).toBe(created.get(key));
      created.set(key, again.text);
    }
    const knex = server.deps.db.knex;
    const { rows } = await knex.raw<{ rows: Array<{ id: string; seq: string; n: number }> }>(
      'select id, seq from messaging_messages where channel_id = ? order by seq',
      [channelId],
    );
    expect(rows.map((r) => Number(r.seq))).toEqual(Array.from({ length: 13 }, (_, i) => i + 1));
    expect(new Set(rows.slice(1).map((r) => r.id))).toEqual(
      new Set(keys.map((key) => JSON.parse(created.get(key)!).id as string)),
    );
    expect(await unread(api)).toEqual({ [channelId]: 13 });
  });

  it('a refused send writes nothing: no message, no counter, no preview, no event', async () => {
    const { api, userId } = await server.user();
    const m = await createMember(api);
    const archived = await createMember(api, 'Old');
    await api.PATCH('/api/v1/members/{memberId}', {
      params: { path: { memberId: archived } },
      body: { archived: true },
    });
    const { channelId } = await setup(api);
    const knex = server.deps.db.knex;
    const counts = async () =>
      (
        await knex.raw<{ rows: unknown[] }>(
          `select (select count(*) from messaging_messages where user_id = :u)::int as messages,
             (select last_seq from messaging_channels where id = :c)::int as last_seq,
             (select unread_count from messaging_channels where id = :c)::int as unread,
             (select count(*) from messaging_link_previews where user_id = :u)::int as previews,
             (select count(*) from events where account_id = :u and type = 'message.created')::int as events`,
          { u: userId, c: channelId },
        )
      ).rows[0];
    const before = await counts();
    for (const body of [
      { memberId: archived, content: 'https://example.com/x' },
      { memberId: m, content: 'https://example.com/x', replyToMessageId: UNKNOWN_ID },
    ]) {
      const res = await api.POST('/api/v1/messaging/channels/{channelId}/messages', { ...ch(channelId), body });
      expect(res.response.status).toBe(400);
    }
    expect(await counts()).toEqual(before);
  });

  it('a send waiting for the lock of a channel being archived answers 404 and writes nothing', async () => {
    const { api } = await server.user();
    const m = await createMember(api);
    const { channelId } = await setup(api);
    await send(api, channelId, m, 'warm-up');
    const knex = server.deps.db.knex;
    const archiving = await knex.transaction();
    await archiving.raw('update messaging_channels set archived_at = ? where id = ?', [now, channelId]);
    // On PostgreSQL the send's statement starts with the channel live and waits for its row; on the
    // embedded database (one connection) it waits for the connection.
    const pending = api.POST('/api/v1/messaging/channels/{channelId}/messages', {
      ...ch(channelId),
      body: { memberId: m, content: 'late https://example.com/late' },
    });
    // PostgreSQL: until the statement waits for the row. Embedded (one connection): time for the
    // request to queue behind the transaction; had it not, it runs after and answers the same.
    if (server.databaseUrl) await untilWaitingForLock(knex, "the send's statement");
    else await new Promise((resolve) => setTimeout(resolve, 300));
    await archiving.commit();
    const res = await pending;
    expect(res.response.status).toBe(404);
    expect(res.error).toEqual({ code: 'NOT_FOUND', message: 'Channel not found' });
    const { rows } = await knex.raw<{ rows: Array<{ messages: number; last_seq: number; previews: number }> }>(
      `select (select count(*) from messaging_messages where channel_id = :c)::int as messages,
         (select last_seq from messaging_channels where id = :c)::int as last_seq,
         (select count(*) from messaging_link_previews p join messaging_messages x on x.id = p.message_id
          where x.channel_id = :c)::int as previews`,
      { c: channelId },
    );
    expect(rows[0]).toEqual({ messages: 1, last_seq: 1, previews: 0 });
  });

  it('concurrent sends to one channel get distinct, consecutive sequence numbers and are all listed', async () => {
    const { api } = await server.user();
    const m = await createMember(api);
    const { spaceId, channelId } = await setup(api);
    const other = await newChannel(api, spaceId, 'other');
    await send(api, channelId, m, 'first');
    now += 1;
    // 20 sends at once (on PostgreSQL each on its own connection, waiting for the channel's row lock),
    // 8 of them with one clientMutationId, to this channel and another.
    const results = await Promise.all([
      ...Array.from({ length: 20 }, (_, i) =>
        api.POST('/api/v1/messaging/channels/{channelId}/messages', {
          ...ch(channelId),
          body: { memberId: m, content: `m${i}` },
        }),
      ),
      ...Array.from({ length: 8 }, (_, i) =>
        api.POST('/api/v1/messaging/channels/{channelId}/messages', {
          ...ch(i % 2 ? channelId : other),
          body: { memberId: m, content: 'once', clientMutationId: 'race' },
        }),
      ),
    ]);
    for (const r of results.slice(0, 20)) expect(r.response.status, JSON.stringify(r.error)).toBe(201);
    const keyed = results.slice(20);
    expect(keyed.filter((r) => r.response.status === 201)).toHaveLength(1);
    for (const r of keyed) expect([200, 201, 409]).toContain(r.response.status);
    const winner = keyed.find((r) => r.response.status === 201)!.data!;
    for (const r of keyed.filter((x) => x.response.status === 200)) expect(r.data).toEqual(winner);
    const inThis = winner.channelId === channelId ? 1 : 0;

    const knex = server.deps.db.knex;
    const { rows } = await knex.raw<{ rows: Array<{ seq: string }> }>(
      'select seq from messaging_messages where channel_id = ? order by seq',
      [channelId],
    );
    const n = 1 + 20 + inThis;
    expect(rows.map((r) => Number(r.seq))).toEqual(Array.from({ length: n }, (_, i) => i + 1));
    const page = (
      await api.GET('/api/v1/messaging/channels/{channelId}/messages', {
        params: { path: { channelId }, query: { limit: 100 } },
      })
    ).data!;
    expect(page.items).toHaveLength(n);
    expect(await unread(api)).toEqual({ [channelId]: n, [other]: 1 - inThis });
    const { rows: channels } = await knex.raw<{ rows: Array<{ id: string; last_seq: string }> }>(
      'select id, last_seq from messaging_channels where id in (?, ?)',
      [channelId, other],
    );
    expect(Object.fromEntries(channels.map((c) => [c.id, Number(c.last_seq)]))).toEqual({
      [channelId]: n,
      [other]: 1 - inThis,
    });
  });
});

describe('edit and delete', () => {
  it('edit sets editedAt and re-reads mentions; delete is soft (404 by id, out of pages and pins, replies show deleted)', async () => {
    const { api, apiKey: _k, userId } = await server.user();
    const m = await createMember(api, 'M');
    const n = await createMember(api, 'N');
    const { channelId } = await setup(api);
    const msg = await send(api, channelId, m, `hey <@${n}>`);
    now += 100;
    const edited = await api.PATCH('/api/v1/messaging/messages/{messageId}', {
      ...msgPath(msg.id),
      body: { content: 'hey all' },
    });
    expect(edited.data).toEqual({ ...msg, content: 'hey all', mentions: [], editedAt: now });
    // A second key of the account may edit too: the account is the author.
    const key2 = await server.createKey(userId);
    const api2 = server.client(key2.apiKey);
    expect(
      (
        await api2.PATCH('/api/v1/messaging/messages/{messageId}', {
          ...msgPath(msg.id),
          body: { content: `again <@${n}>` },
        })
      ).data!.mentions,
    ).toEqual([{ memberId: n, name: 'N', displayName: '' }]);
    expect(
      (
        await api.PATCH('/api/v1/messaging/messages/{messageId}', {
          ...msgPath(msg.id),
          body: { content: 'x'.repeat(4001) },
        })
      ).response.status,
    ).toBe(400);
    const reply = await send(api, channelId, n, 'reply', { replyToMessageId: msg.id });
    await api.POST('/api/v1/messaging/channels/{channelId}/pins', { ...ch(channelId), body: { messageId: msg.id } });
    expect((await api.DELETE('/api/v1/messaging/messages/{messageId}', msgPath(msg.id))).response.status).toBe(204);
    expect((await api.DELETE('/api/v1/messaging/messages/{messageId}', msgPath(msg.id))).error).toEqual({
      code: 'NOT_FOUND',
      message: 'Message not found',
    });
    expect(
      (await api.PATCH('/api/v1/messaging/messages/{messageId}', { ...msgPath(msg.id), body: { content: 'x' } }))
        .response.status,
    ).toBe(404);
    const page = (await api.GET('/api/v1/messaging/channels/{channelId}/messages', ch(channelId))).data!;
    expect(page.items.map((i) => i.id)).toEqual([reply.id]);
    expect(page.items[0]!.replyTo).toEqual({ messageId: msg.id, authorMemberId: m, excerpt: null, deleted: true });
    expect(page.pinnedMessageIds).toEqual([]);
    expect((await api.GET('/api/v1/messaging/channels/{channelId}/pins', ch(channelId))).data).toEqual([]);
    expect(JSON.stringify(page)).not.toContain('again');
  });

  it('an id written in upper case names the same message (edit re-encrypts under the stored id)', async () => {
    const { api } = await server.user();
    const m = await createMember(api);
    const { channelId } = await setup(api);
    const msg = await send(api, channelId, m, 'before');
    const res = await api.PATCH('/api/v1/messaging/messages/{messageId}', {
      ...msgPath(msg.id.toUpperCase()),
      body: { content: 'after' },
    });
    expect(res.response.status, JSON.stringify(res.error)).toBe(200);
    expect(res.data!.id).toBe(msg.id);
    expect(
      (await api.GET('/api/v1/messaging/channels/{channelId}/messages', ch(channelId))).data!.items.map(
        (i) => i.content,
      ),
    ).toEqual(['after']);
  });

  it("another account's message is 404 and unchanged", async () => {
    const { api } = await server.user();
    const other = await server.user();
    const m = await createMember(other.api);
    const { channelId } = await setup(other.api);
    const msg = await send(other.api, channelId, m, 'private words');
    for (const res of [
      await api.PATCH('/api/v1/messaging/messages/{messageId}', { ...msgPath(msg.id), body: { content: 'x' } }),
      await api.DELETE('/api/v1/messaging/messages/{messageId}', msgPath(msg.id)),
    ]) {
      expect(res.error).toEqual({ code: 'NOT_FOUND', message: 'Message not found' });
    }
    for (const res of [
      await api.GET('/api/v1/messaging/channels/{channelId}/messages', ch(channelId)),
      await api.GET('/api/v1/messaging/channels/{channelId}/messages/around', {
        ...ch(channelId),
        params: { ...ch(channelId).params, query: { anchorMessageId: msg.id } },
      }),
      await api.GET('/api/v1/messaging/channels/{channelId}/pins', ch(channelId)),
      await api.GET('/api/v1/messaging/mentions', { params: { query: { channelId } } }),
    ]) {
      expect(res.response.status).toBe(404);
      expect(JSON.stringify(res.error)).not.toContain('private words');
    }
    expect(
      (await other.api.GET('/api/v1/messaging/channels/{channelId}/messages', ch(channelId))).data!.items[0]!.content,
    ).toBe('private words');
  });
});

describe('pages', () => {
  it('backward pages have no duplicates or gaps while new messages arrive; newer and around; cursor rules', async () => {
    const { api } = await server.user();
    const m = await createMember(api);
    const { channelId } = await setup(api);
    const sent: Message[] = [];
    for (let i = 0; i < 23; i++) sent.push(await send(api, channelId, m, `m${i}`));
    // Two messages in the same millisecond are ordered by id.
    const seen: string[] = [];
    let cursor: { beforeCreatedAt: number; beforeId: string } | null = null;
    let k = 0;
    do {
      const q: { limit: number; beforeCreatedAt?: number; beforeId?: string } = { limit: 5, ...(cursor ?? {}) };
      const page = (
        await api.GET('/api/v1/messaging/channels/{channelId}/messages', { params: { path: { channelId }, query: q } })
      ).data!;
      seen.push(...page.items.map((i) => i.content!));
      cursor = page.nextCursor;
      await send(api, channelId, m, `late${k++}`); // arrives meanwhile: newer than every cursor
    } while (cursor);
    expect(seen).toEqual(sent.map((s) => s.content).reverse());

    const newer = (
      await api.GET('/api/v1/messaging/channels/{channelId}/messages/newer', {
        params: {
          path: { channelId },
          query: { afterCreatedAt: sent[20]!.createdAt, afterId: sent[20]!.id, limit: 2 },
        },
      })
    ).data!;
    expect(newer.items.map((i) => i.content)).toEqual(['m22', 'm21']);
    expect(newer.nextCursor).toEqual({ afterCreatedAt: sent[22]!.createdAt, afterId: sent[22]!.id });
    const around = (
      await api.GET('/api/v1/messaging/channels/{channelId}/messages/around', {
        params: { path: { channelId }, query: { anchorMessageId: sent[10]!.id, beforeLimit: 2, afterLimit: 3 } },
      })
    ).data!;
    expect(around.items.map((i) => i.content)).toEqual(['m13', 'm12', 'm11', 'm10', 'm9', 'm8']);
    expect(around.olderCursor).toEqual({ beforeCreatedAt: sent[8]!.createdAt, beforeId: sent[8]!.id });
    expect(around.newerCursor).toEqual({ afterCreatedAt: sent[13]!.createdAt, afterId: sent[13]!.id });
    const edge = (
      await api.GET('/api/v1/messaging/channels/{channelId}/messages/around', {
        params: { path: { channelId }, query: { anchorMessageId: sent[0]!.id, beforeLimit: 5 } },
      })
    ).data!;
    expect(edge.items.at(-1)!.content).toBe('m0');
    expect(edge.olderCursor).toBeNull();

    expect(
      (
        await api.GET('/api/v1/messaging/channels/{channelId}/messages', {
          params: { path: { channelId }, query: { beforeId: sent[0]!.id } },
        })
      ).response.status,
    ).toBe(400);
    for (const limit of [0, 151])
      expect(
        (
          await api.GET('/api/v1/messaging/channels/{channelId}/messages', {
            params: { path: { channelId }, query: { limit } },
          })
        ).response.status,
      ).toBe(400);
    expect(
      (
        await api.GET('/api/v1/messaging/channels/{channelId}/messages/around', {
          params: { path: { channelId }, query: { anchorMessageId: sent[0]!.id, afterLimit: 101 } },
        })
      ).response.status,
    ).toBe(400);
    expect(
      (
        await api.GET('/api/v1/messaging/channels/{channelId}/messages/around', {
          params: { path: { channelId }, query: { anchorMessageId: UNKNOWN_ID } },
        })
      ).error,
    ).toEqual({ code: 'NOT_FOUND', message: 'Message not found' });
    expect(
      (
        await api.GET('/api/v1/messaging/channels/{channelId}/messages/newer', {
          params: { path: { channelId }, query: { afterId: sent[0]!.id } as never },
        })
      ).response.status,
    ).toBe(400);
  });
});

describe('pins', () => {
  it('pin (idempotent), list most recent first, pinnedMessageIds in pages, unpin; body ids of another channel are 400', async () => {
    const { api } = await server.user();
    const m = await createMember(api);
    const { spaceId, channelId } = await setup(api);
    const otherChannel = await newChannel(api, spaceId);
    const a = await send(api, channelId, m, 'a');
    const b = await send(api, channelId, m, 'b');
    const foreign = await send(api, otherChannel, m, 'f');
    const pin = (messageId: string, channel = channelId) =>
      api.POST('/api/v1/messaging/channels/{channelId}/pins', { ...ch(channel), body: { messageId } });
    expect((await pin(a.id)).response.status).toBe(204);
    now += 10;
    expect((await pin(b.id)).response.status).toBe(204);
    expect((await pin(a.id.toUpperCase())).response.status).toBe(204);
    expect((await pin(foreign.id)).error).toEqual({
      code: 'BAD_REQUEST',
      message: 'messageId is not a message of this channel',
    });
    expect((await pin(UNKNOWN_ID)).response.status).toBe(400);
    expect(
      (await api.GET('/api/v1/messaging/channels/{channelId}/pins', ch(channelId))).data!.map((x) => x.id),
    ).toEqual([b.id, a.id]);
    expect(
      (await api.GET('/api/v1/messaging/channels/{channelId}/messages', ch(channelId))).data!.pinnedMessageIds,
    ).toEqual([b.id, a.id]);
    const unpin = (messageId: string) =>
      api.DELETE('/api/v1/messaging/channels/{channelId}/pins/{messageId}', {
        params: { path: { channelId, messageId } },
      });
    expect((await unpin(b.id)).response.status).toBe(204);
    expect((await unpin(b.id)).response.status).toBe(204);
    expect((await unpin(foreign.id)).error).toEqual({ code: 'NOT_FOUND', message: 'Message not found' });
    expect(
      (await api.GET('/api/v1/messaging/channels/{channelId}/pins', ch(channelId))).data!.map((x) => x.id),
    ).toEqual([a.id]);
  });
});

describe('unread counts', () => {
  it('count per channel; read clears; a marker on a message counts what follows; deletes after the marker count down', async () => {
    const { api } = await server.user();
    const m = await createMember(api);
    const { spaceId, channelId: c1 } = await setup(api);
    const c2 = await newChannel(api, spaceId, 'two');
    const c3 = await newChannel(api, spaceId, 'three');
    const one = [await send(api, c1, m, '1'), await send(api, c1, m, '2'), await send(api, c1, m, '3')];
    await send(api, c2, m, 'x');
    expect(await unread(api)).toEqual({ [c1]: 3, [c2]: 1, [c3]: 0 });
    expect(
      (await api.POST('/api/v1/messaging/channels/{channelId}/read', { ...ch(c2), body: {} })).response.status,
    ).toBe(204);
    expect(await unread(api)).toEqual({ [c1]: 3, [c2]: 0, [c3]: 0 });
    await api.POST('/api/v1/messaging/channels/{channelId}/read', {
      ...ch(c1),
      body: { lastReadMessageId: one[0]!.id },
    });
    expect((await unread(api))[c1]).toBe(2);
    await api.DELETE('/api/v1/messaging/messages/{messageId}', msgPath(one[2]!.id));
    expect((await unread(api))[c1]).toBe(1);
    await api.DELETE('/api/v1/messaging/messages/{messageId}', msgPath(one[0]!.id)); // before the marker: no change
    expect((await unread(api))[c1]).toBe(1);
    await send(api, c1, m, '4');
    expect((await unread(api))[c1]).toBe(2);
    const bad = await api.POST('/api/v1/messaging/channels/{channelId}/read', {
      ...ch(c1),
      body: { lastReadMessageId: UNKNOWN_ID },
    });
    expect(bad.error).toEqual({ code: 'BAD_REQUEST', message: 'lastReadMessageId is not a message of this channel' });
    // Without a body at all.
    const raw = await server.fetch(`/api/v1/messaging/channels/${c1}/read`, {
      method: 'POST',
      headers: {
        Authorization: `Bearer ${(await server.createKey((await api.GET('/api/v1/me')).data!.userId)).apiKey}`,
      },
    });
    expect(raw.status).toBe(204);
    expect((await unread(api))[c1]).toBe(0);
    expect(
      (await api.POST('/api/v1/messaging/channels/{channelId}/read', { ...ch(UNKNOWN_ID), body: {} })).response.status,
    ).toBe(404);
  });
});

describe('mentions route', () => {
  it('matches name or display name case-insensitively, limit 1-15, query at most 40', async () => {
    const { api } = await server.user();
    await createMember(api, 'Alice', { displayName: 'Ally' });
    await createMember(api, 'Bob', { displayName: 'ALPHA' });
    await createMember(api, 'Carol');
    const { channelId } = await setup(api);
    const q = (query: Record<string, unknown>) =>
      api.GET('/api/v1/messaging/mentions', { params: { query: { channelId, ...query } as never } });
    expect((await q({ query: 'al' })).data!.map((x) => x.name)).toEqual(['Alice', 'Bob']);
    expect((await q({ query: 'AROL' })).data!.map((x) => x.name)).toEqual(['Carol']);
    expect((await q({ query: '%' })).data).toEqual([]);
    expect((await q({ limit: 2 })).data!.map((x) => x.name)).toEqual(['Alice', 'Bob']);
    for (const bad of [{ limit: 0 }, { limit: 16 }, { query: 'x'.repeat(41) }])
      expect((await q(bad)).response.status).toBe(400);
    expect(
      (await api.GET('/api/v1/messaging/mentions', { params: { query: { channelId: UNKNOWN_ID } } })).error,
    ).toEqual({ code: 'NOT_FOUND', message: 'Channel not found' });
  });
});

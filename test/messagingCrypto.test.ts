/** Message text at rest: encrypted, bound to its row, rotatable; and the page statement stays on its index. */
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes, randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import type { ApiClient } from '../client/index.ts';
import { ConfigError, loadConfig } from '../server/config.ts';
import { MessageCipher, resolveMessageKeys } from '../server/crypto/messageCipher.ts';
import { createLogger } from '../server/logger.ts';
import { createRuntime, StartupError } from '../server/runtime.ts';
import { queueMessageReencryption } from '../server/features/messaging/index.ts';
import { createMember } from './helpers/fixtures.ts';
import { captureStatements, explain, planNodes, type PlanNode } from './helpers/plans.ts';
import { useServer } from './helpers/server.ts';

const keyA = randomBytes(32);
const keyB = randomBytes(32);
const server = useServer({ env: { MESSAGE_ENCRYPTION_KEYS: `a:${keyA.toString('base64')}` } });
const knex = () => server.deps.db.knex;

async function setup(api: ApiClient) {
  const m = await createMember(api);
  const s = (await api.POST('/api/v1/messaging/spaces', { body: { name: 'S' } })).data!;
  const c = (
    await api.POST('/api/v1/messaging/spaces/{spaceId}/channels', {
      params: { path: { spaceId: s.id } },
      body: { name: 'c' },
    })
  ).data!;
  return { memberId: m, channelId: c.id };
}
const send = async (api: ApiClient, channelId: string, memberId: string, content: string) => {
  const res = await api.POST('/api/v1/messaging/channels/{channelId}/messages', {
    params: { path: { channelId } },
    body: { memberId, content },
  });
  expect(res.response.status, JSON.stringify(res.error)).toBe(201);
  return res.data!;
};
const page = (api: ApiClient, channelId: string, limit = 150) =>
  api.GET('/api/v1/messaging/channels/{channelId}/messages', { params: { path: { channelId }, query: { limit } } });

describe('encryption at rest', () => {
  it('the table never holds the text; it decrypts back', async () => {
    const { api } = await server.user();
    const { memberId, channelId } = await setup(api);
    const secret = `plaintext-canary-${randomBytes(6).toString('hex')}`;
    const msg = await send(api, channelId, memberId, secret);
    const dump = await knex().raw(`select m::text as row from messaging_messages m where id = ?`, [msg.id]);
    const row = (dump.rows as Array<{ row: string }>)[0]!.row;
    expect(row).not.toContain(secret);
    expect(row).not.toContain(Buffer.from(secret).toString('hex'));
    const stored = await knex()('messaging_messages').where({ id: msg.id }).first('key_id', 'content_enc');
    expect(stored.key_id).toBe('a');
    expect(Buffer.from(stored.content_enc).length).toBe(12 + Buffer.byteLength(secret) + 16);
    expect((await page(api, channelId)).data!.items[0]!.content).toBe(secret);
    // Two sends of the same text: different IVs, different ciphertexts.
    const again = await send(api, channelId, memberId, secret);
    const both = await knex()('messaging_messages').whereIn('id', [msg.id, again.id]).select('content_enc');
    expect(Buffer.from(both[0].content_enc).equals(Buffer.from(both[1].content_enc))).toBe(false);
  });

  it('every encryption has an IV of its own, across the blocks they are drawn in, and decrypts back', () => {
    const cipher = new MessageCipher([{ id: 'a', key: randomBytes(32) }]);
    const account = randomUUID();
    const ivs = new Set<string>();
    // 600 encryptions: more than two blocks of 256 IVs, whatever the block the process is in.
    for (let i = 0; i < 600; i++) {
      const id = randomUUID();
      const sealed = cipher.seal(account, id, `text ${i}`);
      ivs.add(sealed.data.subarray(0, 12).toString('hex'));
      expect(cipher.open(account, id, sealed)).toBe(`text ${i}`);
    }
    expect(ivs.size).toBe(600);
  });

  it('a ciphertext swapped onto another row does not decrypt (account and message id are associated data)', async () => {
    const { api } = await server.user();
    const { memberId, channelId } = await setup(api);
    const one = await send(api, channelId, memberId, 'first');
    const two = await send(api, channelId, memberId, 'second');
    const rows = await knex()('messaging_messages').whereIn('id', [one.id, two.id]).select('id', 'content_enc');
    const enc = Object.fromEntries(
      rows.map((r: { id: string; content_enc: Uint8Array }) => [r.id, Buffer.from(r.content_enc)]),
    );
    await knex()('messaging_messages').where({ id: one.id }).update({ content_enc: enc[two.id] });
    await knex()('messaging_messages').where({ id: two.id }).update({ content_enc: enc[one.id] });
    const res = await page(api, channelId);
    expect(res.response.status).toBe(500);
    expect(JSON.stringify(res.error)).not.toMatch(/first|second/);
    // Restored, it reads again.
    await knex()('messaging_messages').where({ id: one.id }).update({ content_enc: enc[one.id] });
    await knex()('messaging_messages').where({ id: two.id }).update({ content_enc: enc[two.id] });
    expect((await page(api, channelId)).data!.items.map((i) => i.content)).toEqual(['second', 'first']);
  });

  it('rotation mid-traffic: new writes use the new primary, the job rewrites old rows in batches, reads work throughout', async () => {
    const { api } = await server.user();
    const { memberId, channelId } = await setup(api);
    for (let i = 0; i < 30; i++) await send(api, channelId, memberId, `old ${i}`);
    const config = server.deps.config;
    const original = config.messageEncryptionKeys;
    try {
      // What a restart with MESSAGE_ENCRYPTION_KEYS=b:…,a:… gives.
      config.messageEncryptionKeys = [
        { id: 'b', key: keyB },
        { id: 'a', key: keyA },
      ];
      config.messageReencryptBatchSize = 7;
      expect(await queueMessageReencryption(server.runtime.jobs, knex(), config)).toBe(true);
      const traffic = (async () => {
        for (let i = 0; i < 10; i++) {
          await send(api, channelId, memberId, `new ${i}`);
          const res = await page(api, channelId);
          expect(res.response.status).toBe(200);
        }
      })();
      await Promise.all([traffic, server.runtime.jobs.runDue()]);
      const byKey = await knex()('messaging_messages')
        .join('messaging_channels as c', 'c.id', 'messaging_messages.channel_id')
        .where('c.id', channelId)
        .select('key_id')
        .count('* as n')
        .groupBy('key_id');
      expect((byKey as Array<{ key_id: string; n: number | string }>).map((r) => [r.key_id, Number(r.n)])).toEqual([
        ['b', 40],
      ]);
      // The old key can go: everything reads under b alone.
      config.messageEncryptionKeys = [{ id: 'b', key: keyB }];
      const items = (await page(api, channelId)).data!.items.map((i) => i.content);
      expect(items).toHaveLength(40);
      expect(items).toContain('old 0');
      expect(items).toContain('new 9');
      expect(await queueMessageReencryption(server.runtime.jobs, knex(), config)).toBe(false);
    } finally {
      config.messageEncryptionKeys = original;
      config.messageReencryptBatchSize = 500;
    }
  });
});

describe('keys at start-up', () => {
  it('MESSAGE_ENCRYPTION_KEYS is parsed strictly', () => {
    const k = randomBytes(32).toString('base64');
    expect(
      loadConfig({ MESSAGE_ENCRYPTION_KEYS: `new:${k}, old:${k}` }).messageEncryptionKeys.map((x) => x.id),
    ).toEqual(['new', 'old']);
    for (const bad of [`${k}`, `a:${randomBytes(16).toString('base64')}`, `a:${k},a:${k}`, `a b:${k}`, 'a:!!!']) {
      expect(() => loadConfig({ MESSAGE_ENCRYPTION_KEYS: bad }), bad).toThrow(ConfigError);
    }
  });

  it('with DATABASE_URL and no key the server refuses to start, naming the setting', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'ada-keys-'));
    try {
      const config = loadConfig({ DATABASE_URL: 'postgres://nobody@127.0.0.1:1/none', LOG_LEVEL: 'silent' });
      const started = createRuntime(config, { logger: createLogger('silent'), embeddedDir: dir });
      await expect(started).rejects.toThrow(StartupError);
      await expect(started).rejects.toThrow(/MESSAGE_ENCRYPTION_KEYS is required with DATABASE_URL/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('the embedded default generates one key into DATA_DIR with mode 0600 and keeps it', () => {
    const dir = mkdtempSync(join(tmpdir(), 'ada-keys-'));
    try {
      const first = resolveMessageKeys([], { databaseUrl: undefined, dataDir: dir });
      expect(first).toHaveLength(1);
      expect(first[0]!.key.length).toBe(32);
      expect(statSync(join(dir, 'message-encryption-keys')).mode & 0o777).toBe(0o600);
      const second = resolveMessageKeys([], { databaseUrl: undefined, dataDir: dir });
      expect(second[0]!.key.equals(first[0]!.key)).toBe(true);
      // A configured keyring wins.
      const configured = [{ id: 'x', key: randomBytes(32) }];
      expect(resolveMessageKeys(configured, { databaseUrl: 'postgres://x', dataDir: dir })).toBe(configured);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('message pages cost one statement on the index, however deep', () => {
  it('first page and a deep page: one statement each, limit + 1 rows read from messaging_messages_page, in both plans', {
    timeout: 120_000,
  }, async () => {
    const { api, userId } = await server.user();
    const other = await server.user();
    const mine = await setup(api);
    const theirs = await setup(other.api);
    // 20,000 messages per account, sealed as the server seals them, straight into the table.
    const seed = async (user: string, channelId: string, memberId: string) => {
      const cipher = new MessageCipher(server.deps.config.messageEncryptionKeys);
      const base = Date.now();
      for (let chunk = 0; chunk < 20; chunk++) {
        const rows = Array.from({ length: 1000 }, (_, i) => {
          const g = chunk * 1000 + i;
          const id = randomUUID();
          const sealed = cipher.seal(user, id, `seeded ${g}`);
          return {
            id,
            user_id: user,
            channel_id: channelId,
            seq: g + 1,
            author_member_id: memberId,
            key_id: sealed.keyId,
            content_enc: sealed.data,
            created_at: base - (20000 - g) * 1000,
          };
        });
        await knex()('messaging_messages').insert(rows);
      }
    };
    await seed(userId, mine.channelId, mine.memberId);
    await seed(other.userId, theirs.channelId, theirs.memberId);
    if (server.runtime.maintenance) await server.runtime.maintenance.runOnce();
    else await knex().raw('analyze messaging_messages, messaging_channels, messaging_spaces, messaging_pins, members');
    const deep = await knex()('messaging_messages')
      .where({ channel_id: mine.channelId })
      .orderBy([
        { column: 'created_at', order: 'desc' },
        { column: 'id', order: 'desc' },
      ])
      .offset(15000)
      .first('created_at', 'id');
    const limit = 50;
    for (const query of [{ limit }, { limit, beforeCreatedAt: Number(deep.created_at), beforeId: deep.id as string }]) {
      await api.GET('/api/v1/messaging/channels/{channelId}/messages', {
        params: { path: { channelId: mine.channelId }, query },
      }); // warms the key cache
      const statements = await captureStatements(knex(), /messaging_/, async () => {
        const res = await api.GET('/api/v1/messaging/channels/{channelId}/messages', {
          params: { path: { channelId: mine.channelId }, query },
        });
        expect(res.data!.items).toHaveLength(limit);
        expect(res.data!.nextCursor).not.toBeNull();
      });
      expect(statements).toHaveLength(1);
      for (const plan of [
        await explain(knex(), statements[0]!, { analyze: true }),
        await explain(knex(), statements[0]!, { analyze: true, generic: true }),
      ]) {
        const nodes = planNodes(plan);
        const seq = nodes.filter(
          (n: PlanNode) => n['Node Type'] === 'Seq Scan' && n['Relation Name'] === 'messaging_messages',
        );
        expect(seq, JSON.stringify(plan)).toEqual([]);
        for (const sort of nodes.filter((n) => n['Node Type'] === 'Sort'))
          expect(sort['Actual Rows'], JSON.stringify(plan)).toBeLessThanOrEqual(limit + 1);
        const scan = nodes.find((n) => n['Index Name'] === 'messaging_messages_page');
        expect(scan, JSON.stringify(plan)).toBeDefined();
        expect(scan!['Actual Rows']).toBe(limit + 1);
      }
    }
  });
});

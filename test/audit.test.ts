/** The audit module (server/audit/): audited writes and their rows commit together or not at all. */
import { describe, expect, it } from 'vitest';
import { onBehalfOf } from '../server/access/index.ts';
import { DatabaseAuditSink } from '../server/audit/index.ts';
import { backgroundContextFor } from '../server/context.ts';
import { inTransaction } from '../server/core/context.ts';
import { createEntry } from './helpers/fixtures.ts';
import { TestServer, useServer } from './helpers/server.ts';

const server = useServer();
const knex = () => server.deps.db.knex;
const auditRows = (userId: string) => knex()('audit_events').where({ user_id: userId }).orderBy('created_at').select();

describe('audited actions', () => {
  it('creating an account and a key records account.create and api_key.create by the operator, never the secret', async () => {
    const { userId } = await server.createAccount({ plan: 'pro' });
    const { apiKey, keyId } = await server.createKey(userId, { members: 'read' });
    const rows = await auditRows(userId);
    expect(rows.map((r) => r.action)).toEqual(['account.create', 'api_key.create']);
    for (const row of rows) expect(row).toMatchObject({ actor_kind: 'operator', actor_key_id: null, user_id: userId });
    expect(rows[1]).toMatchObject({
      target_type: 'api_key',
      target_id: keyId,
      detail: { name: null, scopes: { members: 'read' }, expiresAt: null },
    });
    expect(JSON.stringify(rows)).not.toContain(apiKey);
  });

  it('revoking a key records api_key.revoke on its account', async () => {
    const { userId } = await server.createAccount();
    const { keyId } = await server.createKey(userId);
    const res = await server.admin.DELETE('/admin/v1/api-keys/{keyId}', { params: { path: { keyId } } });
    expect(res.response.status).toBe(204);
    const rows = await auditRows(userId);
    expect(rows.at(-1)).toMatchObject({
      action: 'api_key.revoke',
      target_type: 'api_key',
      target_id: keyId,
      actor_kind: 'operator',
    });
  });

  it('purging the trash and changing retention record trash.purge and trash.settings.update with the acting key', async () => {
    const user = await server.user();
    const id = await createEntry(user.api, 'to purge');
    await user.api.DELETE('/api/v1/entries/{entryId}', { params: { path: { entryId: id } } });
    expect(
      (await user.api.POST('/api/v1/trash/purge', { body: { items: [{ type: 'entry', id }] } })).response.status,
    ).toBe(204);
    expect((await user.api.PATCH('/api/v1/trash/settings', { body: { retentionDays: 7 } })).response.status).toBe(200);
    const rows = (await auditRows(user.userId)).filter((r) => r.actor_kind === 'key');
    expect(rows).toEqual([
      expect.objectContaining({
        action: 'trash.purge',
        actor_key_id: user.keyId,
        target_type: 'trash',
        detail: { items: [{ type: 'entry', id }], count: 1 },
      }),
      expect.objectContaining({
        action: 'trash.settings.update',
        actor_key_id: user.keyId,
        target_id: user.userId,
        detail: { retentionDays: { from: null, to: 7 } },
      }),
    ]);
  });

  it('a permanent note delete records entry.purge', async () => {
    const user = await server.user();
    const id = await createEntry(user.api, 'gone for good');
    const res = await user.api.DELETE('/api/v1/entries/{entryId}', {
      params: { path: { entryId: id }, query: { permanent: 'true' } },
    });
    expect(res.response.status).toBe(204);
    expect((await auditRows(user.userId)).at(-1)).toMatchObject({
      action: 'entry.purge',
      target_type: 'entry',
      target_id: id,
      actor_key_id: user.keyId,
    });
  });

  it('rows go with their account', async () => {
    const { userId } = await server.createAccount();
    expect((await auditRows(userId)).length).toBeGreaterThan(0);
    await server.admin.DELETE('/admin/v1/accounts/{userId}', { params: { path: { userId } } });
    expect(await auditRows(userId)).toEqual([]);
  });
});

describe('atomicity', () => {
  it('when the audit row cannot be written, the audited write does not happen either', async () => {
    const s = await new TestServer().start();
    try {
      const user = await s.user();
      const id = await createEntry(user.api, 'kept');
      await user.api.DELETE('/api/v1/entries/{entryId}', { params: { path: { entryId: id } } });
      await s.deps.db.knex.raw('alter table audit_events rename to audit_events_gone');
      const res = await user.api.POST('/api/v1/trash/purge', { body: { items: [{ type: 'entry', id }] } });
      expect(res.response.status).toBe(503);
      await s.deps.db.knex.raw('alter table audit_events_gone rename to audit_events');
      // Still in the trash: the purge rolled back with its audit row.
      expect(await s.deps.db.knex('entries').where({ id }).first('id')).toEqual({ id });
      const listed = (await user.api.GET('/api/v1/trash')).data!;
      expect(listed.map((r) => r.id)).toContain(id);
    } finally {
      await s.close();
    }
  });

  it('a record made in a transaction that rolls back is gone with it; outside a transaction it is refused', async () => {
    const { userId } = await server.createAccount();
    const before = (await auditRows(userId)).length;
    const ctx = backgroundContextFor(
      { db: knex(), config: server.deps.config, logger: server.deps.logger },
      { kind: 'system', job: 'test' },
      userId,
    );
    await expect(
      inTransaction(ctx, async (tx) => {
        await tx.audit.record(tx, { action: 'test.rolled_back', targetType: 'account', targetId: userId });
        throw new Error('the audited write failed');
      }),
    ).rejects.toThrow('the audited write failed');
    expect(await auditRows(userId)).toHaveLength(before);
    await inTransaction(ctx, (tx) =>
      tx.audit.record(tx, { action: 'test.committed', targetType: 'account', targetId: userId, detail: { n: 1 } }),
    );
    expect((await auditRows(userId)).at(-1)).toMatchObject({
      action: 'test.committed',
      actor_kind: 'system',
      actor_job: 'test',
      detail: { n: 1 },
    });
    const sink = new DatabaseAuditSink();
    await expect(sink.record(ctx, { action: 'test.outside', targetType: 'account', targetId: null })).rejects.toThrow(
      /inside the transaction/,
    );
    await expect(
      inTransaction(ctx, (tx) => sink.record(tx, { action: 'Not A Verb', targetType: 'x', targetId: null })),
    ).rejects.toThrow(/dotted/);
    await expect(
      inTransaction({ ...ctx, access: onBehalfOf(userId) }, (tx) =>
        sink.record(tx, { action: 'test.big', targetType: 'x', targetId: null, detail: { blob: 'x'.repeat(3000) } }),
      ),
    ).rejects.toThrow(/over 2048 bytes/);
  });
});

describe('GET /api/v1/audit (the owner reads its own log)', () => {
  it('newest first, keyset pages, the caller’s account only, filtered by action prefix', async () => {
    const user = await server.user();
    const other = await server.user();
    const id = await createEntry(user.api, 'to purge');
    await user.api.DELETE('/api/v1/entries/{entryId}', { params: { path: { entryId: id } } });
    expect(
      (await user.api.POST('/api/v1/trash/purge', { body: { items: [{ type: 'entry', id }] } })).response.status,
    ).toBe(204);
    expect((await user.api.PATCH('/api/v1/trash/settings', { body: { retentionDays: 7 } })).response.status).toBe(200);
    expect(
      (
        await user.api.POST('/api/v1/friends/{friendUserId}/request', {
          params: { path: { friendUserId: other.userId } },
        })
      ).response.status,
    ).toBe(204);
    const ctx = backgroundContextFor(
      { db: knex(), config: server.deps.config, logger: server.deps.logger },
      { kind: 'system', job: 'test' },
      user.userId,
    );
    await inTransaction(ctx, (tx) =>
      tx.audit.record(tx, {
        action: 'friend_write.entry.create',
        targetType: 'entry',
        targetId: id,
        detail: { by: other.userId },
      }),
    );

    const expected = await knex()('audit_events')
      .where({ user_id: user.userId })
      .orderBy([
        { column: 'created_at', order: 'desc' },
        { column: 'id', order: 'desc' },
      ])
      .select();
    expect(expected.map((r) => r.action).sort()).toEqual([
      'account.create',
      'api_key.create',
      'friend_write.entry.create',
      'friendship.request',
      'trash.purge',
      'trash.settings.update',
    ]);
    const all = await user.api.GET('/api/v1/audit');
    expect(all.response.status).toBe(200);
    expect(all.data!.nextCursor).toBeNull();
    expect(all.data!.items.map((e) => e.id)).toEqual(expected.map((r) => r.id));
    const purge = all.data!.items.find((e) => e.action === 'trash.purge');
    expect(purge).toEqual({
      id: expect.any(String),
      action: 'trash.purge',
      targetType: 'trash',
      targetId: null,
      actorKind: 'key',
      actorKeyId: user.keyId,
      detail: { items: [{ type: 'entry', id }], count: 1 },
      createdAt: expect.any(Number),
    });
    expect(all.data!.items.find((e) => e.action === 'friend_write.entry.create')).toMatchObject({
      actorKind: 'system',
      actorKeyId: null,
      detail: { by: other.userId },
    });
    // Another account's log never shows here (its friendship row is about the caller, but its log is its own).
    expect(JSON.stringify(all.data)).not.toContain(other.keyId);

    const seen: string[] = [];
    let cursor: string | undefined;
    do {
      const page = await user.api.GET('/api/v1/audit', {
        params: { query: { limit: 3, ...(cursor ? { cursor } : {}) } },
      });
      expect(page.response.status).toBe(200);
      expect(page.data!.items.length).toBeLessThanOrEqual(3);
      seen.push(...page.data!.items.map((e) => e.id));
      cursor = page.data!.nextCursor ?? undefined;
    } while (cursor);
    expect(seen).toEqual(expected.map((r) => r.id));

    const prefixed = async (actionPrefix: string) =>
      (await user.api.GET('/api/v1/audit', { params: { query: { actionPrefix } } })).data!.items.map((e) => e.action);
    expect(await prefixed('friend_write')).toEqual(['friend_write.entry.create']);
    expect((await prefixed('trash.')).sort()).toEqual(['trash.purge', 'trash.settings.update']);
    expect(await prefixed('friendship')).toEqual(['friendship.request']);
    expect(await prefixed('nothing_like_this')).toEqual([]);
    // `_` is a plain character of the prefix, not a wildcard.
    expect(await prefixed('api_key')).toEqual(['api_key.create']);
    expect(await prefixed('api_ke_')).toEqual([]);
  });

  it('validates limit, cursor and prefix; needs friends:read', async () => {
    const user = await server.user();
    for (const query of [
      { limit: 0 },
      { limit: 101 },
      { cursor: 'bm9wZQ' },
      { actionPrefix: 'Trash' },
      { actionPrefix: 'a%' },
      { actionPrefix: '' },
    ]) {
      const res = await user.api.GET('/api/v1/audit', { params: { query: query as never } });
      expect(res.response.status, JSON.stringify(query)).toBe(400);
    }
    const limited = await server.user({ scopes: { members: 'read_write' } });
    const res = await limited.api.GET('/api/v1/audit');
    expect(res.response.status).toBe(403);
    expect(res.error).toEqual({ code: 'FORBIDDEN', message: 'Missing API key scope: friends requires read' });
  });
});

import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { loadBundledSpec, OperationIndex } from '../server/http/spec.ts';
import { useServer, bearer, TestServer } from './helpers/server.ts';

const server = useServer();
const run = promisify(execFile);

describe('POST /admin/v1/accounts', () => {
  it('creates an account and answers 201 { userId, username }', async () => {
    const { data, response } = await server.admin.POST('/admin/v1/accounts', {
      body: {
        username: 'Aurora_1',
        displayName: 'Aurora',
        plan: 'pro',
        pronouns: 'they/them',
        timezone: 'Europe/Berlin',
      },
    });
    expect(response.status).toBe(201);
    expect(data).toEqual({ userId: expect.any(String), username: 'Aurora_1' });
  });

  it('stores every optional field it is given', async () => {
    const body = {
      username: 'Full_Profile',
      displayName: 'Full Profile 🌿',
      plan: 'pro_plus',
      isAdmin: true,
      pronouns: 'she/they',
      status: 'Taking it slow today',
      timezone: 'America/Toronto',
      country: 'CA',
      aboutMarkdown: '# Hello\n\nWe are **many**.',
    } as const;
    const { data, response } = await server.admin.POST('/admin/v1/accounts', { body });
    expect(response.status).toBe(201);
    const row = await server.deps.db.knex('accounts').where({ id: data!.userId }).first();
    expect(row).toMatchObject({
      username: 'Full_Profile',
      display_name: 'Full Profile 🌿',
      plan: 'pro_plus',
      is_admin: true,
      pronouns: 'she/they',
      status: 'Taking it slow today',
      timezone: 'America/Toronto',
      country: 'CA',
      about_markdown: '# Hello\n\nWe are **many**.',
    });
    // The stored plan is the one that counts: Pro+ allows 5 keys.
    for (let i = 0; i < 5; i++) await server.createKey(data!.userId, {});
    const sixth = await server.admin.POST('/admin/v1/accounts/{userId}/api-keys', {
      params: { path: { userId: data!.userId } },
      body: { scopes: {} },
    });
    expect(sixth.response.status).toBe(403);
    expect(sixth.error?.message).toContain('Pro+ plan allows 5 active API keys');
  });

  it('defaults: plan free (one active key), not admin, displayName = username, empty profile', async () => {
    const { data, response } = await server.admin.POST('/admin/v1/accounts', { body: { username: 'bare_minimum' } });
    expect(response.status).toBe(201);
    const row = await server.deps.db.knex('accounts').where({ id: data!.userId }).first();
    expect(row).toMatchObject({
      plan: 'free',
      is_admin: false,
      display_name: 'bare_minimum',
      pronouns: null,
      status: null,
      timezone: null,
      country: null,
      about_markdown: null,
    });
    const first = await server.admin.POST('/admin/v1/accounts/{userId}/api-keys', {
      params: { path: { userId: data!.userId } },
      body: { scopes: { appearance: 'read_write' } },
    });
    expect(first.response.status).toBe(201);
    const second = await server.admin.POST('/admin/v1/accounts/{userId}/api-keys', {
      params: { path: { userId: data!.userId } },
      body: { scopes: {} },
    });
    expect(second.response.status).toBe(403);
    expect(second.error).toEqual({
      code: 'FORBIDDEN',
      message: 'The Free plan allows 1 active API key; revoke one first',
    });
    // Free also means no custom fonts.
    const font = await server.fetch('/api/v1/appearance/custom-fonts', {
      method: 'POST',
      headers: { ...bearer(first.data!.apiKey), 'Content-Type': 'application/json' },
      body: JSON.stringify({ name: 'F', sourceUrl: 'https://fonts.example.org/f.woff2' }),
    });
    expect(font.status).toBe(403);
  });

  it('refuses a duplicate username regardless of case with 409 CONFLICT', async () => {
    await server.createAccount({ username: 'taken_name' });
    const { error, response } = await server.admin.POST('/admin/v1/accounts', { body: { username: 'TAKEN_name' } });
    expect(response.status).toBe(409);
    expect(error).toEqual({ code: 'CONFLICT', message: 'Username is already taken' });
  });

  it.each(['ab', 'a'.repeat(33), 'has space', 'dash-name', 'émile', ''])(
    'refuses the invalid username %j with 400',
    async (username) => {
      const { error, response } = await server.admin.POST('/admin/v1/accounts', { body: { username } });
      expect(response.status).toBe(400);
      expect(error?.code).toBe('BAD_REQUEST');
      expect(error?.message).toMatch(/^username /);
    },
  );

  it('accepts 3 and 32 character usernames', async () => {
    for (const username of ['abc', 'z'.repeat(32)]) {
      const { response } = await server.admin.POST('/admin/v1/accounts', { body: { username } });
      expect(response.status).toBe(201);
    }
  });

  it('rejects unknown fields and unknown plans', async () => {
    const unknown = await server.admin.POST('/admin/v1/accounts', {
      body: { username: 'x_unknown', role: 'x' } as never,
    });
    expect(unknown.response.status).toBe(400);
    expect(unknown.error?.message).toBe("Unknown field 'role'");
    const plan = await server.admin.POST('/admin/v1/accounts', { body: { username: 'x_plan', plan: 'gold' } as never });
    expect(plan.response.status).toBe(400);
    expect(plan.error?.message).toBe('plan must be one of: free, pro, pro_plus');
  });
});

describe('POST /admin/v1/accounts/{userId}/api-keys', () => {
  it('issues a prefixed high-entropy key that works and returns its scopes', async () => {
    const { userId } = await server.createAccount();
    const { data, response } = await server.admin.POST('/admin/v1/accounts/{userId}/api-keys', {
      params: { path: { userId } },
      body: { name: 'widget', scopes: { appearance: 'read' } },
    });
    expect(response.status).toBe(201);
    expect(data?.apiKey).toMatch(/^adk_[A-Za-z0-9_-]{43}$/);
    expect(data?.scopes).toEqual({ appearance: 'read' });
    const row = await server.deps.db.knex('api_keys').where({ id: data!.id }).first();
    expect(row.key_hash).not.toContain(data!.apiKey);
    expect(JSON.stringify(row)).not.toContain(data!.apiKey);
    const res = await server.fetch('/api/v1/appearance', { headers: bearer(data!.apiKey) });
    expect(res.status).toBe(404); // authenticated and scoped; no appearance row yet
  });

  it('rejects an unknown scope name and an unknown level with 400', async () => {
    const { userId } = await server.createAccount();
    const badName = await server.admin.POST('/admin/v1/accounts/{userId}/api-keys', {
      params: { path: { userId } },
      body: { scopes: { billing: 'read' } as never },
    });
    expect(badName.response.status).toBe(400);
    expect(badName.error?.message).toBe("Unknown field 'scopes.billing'");
    const badLevel = await server.admin.POST('/admin/v1/accounts/{userId}/api-keys', {
      params: { path: { userId } },
      body: { scopes: { members: 'write' } as never },
    });
    expect(badLevel.response.status).toBe(400);
    expect(badLevel.error?.message).toBe('scopes.members must be one of: read, read_write');
  });

  it('answers 404 for an unknown account', async () => {
    const { response, error } = await server.admin.POST('/admin/v1/accounts/{userId}/api-keys', {
      params: { path: { userId: '00000000-0000-4000-8000-000000000001' } },
      body: { scopes: {} },
    });
    expect(response.status).toBe(404);
    expect(error?.code).toBe('NOT_FOUND');
  });

  it.each([
    ['free', 1],
    ['pro', 5],
    ['pro_plus', 5],
  ] as const)(
    'enforces the %s plan limit of %i active keys with 403, and revoking frees a slot',
    async (plan, limit) => {
      const { userId } = await server.createAccount({ plan });
      const keyIds: string[] = [];
      for (let i = 0; i < limit; i++) keyIds.push((await server.createKey(userId, {})).keyId);
      const over = await server.admin.POST('/admin/v1/accounts/{userId}/api-keys', {
        params: { path: { userId } },
        body: { scopes: {} },
      });
      expect(over.response.status).toBe(403);
      expect(over.error?.code).toBe('FORBIDDEN');
      expect(over.error?.message).toContain(`allows ${limit} active API key`);
      await server.admin.DELETE('/admin/v1/api-keys/{keyId}', { params: { path: { keyId: keyIds[0]! } } });
      const again = await server.admin.POST('/admin/v1/accounts/{userId}/api-keys', {
        params: { path: { userId } },
        body: { scopes: {} },
      });
      expect(again.response.status).toBe(201);
    },
  );

  it('holds the plan limit under concurrent issuing', async () => {
    const { userId } = await server.createAccount({ plan: 'free' });
    const results = await Promise.all(
      Array.from({ length: 5 }, () =>
        server.admin.POST('/admin/v1/accounts/{userId}/api-keys', {
          params: { path: { userId } },
          body: { scopes: {} },
        }),
      ),
    );
    expect(results.filter((r) => r.response.status === 201)).toHaveLength(1);
    expect(results.filter((r) => r.response.status === 403)).toHaveLength(4);
  });
});

describe('DELETE /admin/v1/api-keys/{keyId}', () => {
  it('revokes: 204, then the key is refused with 401 from the next request on', async () => {
    const user = await server.user();
    expect((await server.fetch('/api/v1/appearance/custom-fonts', { headers: bearer(user.apiKey) })).status).toBe(200);
    const { response } = await server.admin.DELETE('/admin/v1/api-keys/{keyId}', {
      params: { path: { keyId: user.keyId } },
    });
    expect(response.status).toBe(204);
    const after = await server.fetch('/api/v1/appearance/custom-fonts', { headers: bearer(user.apiKey) });
    expect(after.status).toBe(401);
    expect(await after.json()).toEqual({
      code: 'UNAUTHORIZED',
      message: 'Missing or invalid API key. Use Authorization: Bearer <token>.',
    });
    const row = await server.deps.db.knex('api_keys').where({ id: user.keyId }).first();
    expect(row.revoked_at).toEqual(expect.any(Number));
  });

  it('is idempotent for a revoked key and 404 for an unknown one', async () => {
    const user = await server.user();
    await server.admin.DELETE('/admin/v1/api-keys/{keyId}', { params: { path: { keyId: user.keyId } } });
    const twice = await server.admin.DELETE('/admin/v1/api-keys/{keyId}', { params: { path: { keyId: user.keyId } } });
    expect(twice.response.status).toBe(204);
    const unknown = await server.admin.DELETE('/admin/v1/api-keys/{keyId}', {
      params: { path: { keyId: '00000000-0000-4000-8000-000000000002' } },
    });
    expect(unknown.response.status).toBe(404);
  });
});

describe('npm run admin', () => {
  const cli = (args: string[]) =>
    run(process.execPath, ['--import', 'tsx', 'scripts/admin.ts', ...args], {
      env: { ...process.env, ADMIN_URL: server.baseUrl, ADMIN_TOKEN: server.adminToken },
    });

  it('creates an account, issues a key and revokes it, printing JSON', async () => {
    const account = JSON.parse(
      (await cli(['create-account', '--username', 'cli_user', '--plan', 'pro', '--display-name', 'CLI'])).stdout,
    );
    expect(account).toEqual({ userId: expect.any(String), username: 'cli_user' });
    const key = JSON.parse(
      (
        await cli([
          'create-key',
          '--user',
          account.userId,
          '--scopes',
          'appearance:read_write,members:read',
          '--name',
          'cli',
        ])
      ).stdout,
    );
    expect(key.scopes).toEqual({ appearance: 'read_write', members: 'read' });
    expect(
      (await server.fetch('/api/v1/appearance/reset', { method: 'POST', headers: bearer(key.apiKey) })).status,
    ).toBe(200);
    const revoked = JSON.parse((await cli(['revoke-key', '--key', key.id])).stdout);
    expect(revoked).toEqual({ revoked: key.id });
    expect((await server.fetch('/api/v1/appearance', { headers: bearer(key.apiKey) })).status).toBe(401);
  });

  it('exits non-zero and prints the error envelope on failure', async () => {
    await expect(cli(['create-account', '--username', 'x'])).rejects.toMatchObject({
      code: 1,
      stderr: expect.stringContaining('BAD_REQUEST'),
    });
  });
});

const DISABLED = {
  code: 'PRECONDITION_FAILED',
  message: 'The admin API is disabled: set ADMIN_TOKEN (at least 16 characters) to enable /admin/v1',
};
const DATABASE_URL = process.env.DATABASE_URL;
const POSTGRES_ONLY = DATABASE_URL ? '' : ' [skipped: needs DATABASE_URL; --direct works on PostgreSQL only]';

describe('a server without ADMIN_TOKEN (the admin API disabled)', () => {
  // On PostgreSQL nothing generates a token (the embedded default does, in DATA_DIR; the test
  // servers' in-memory embedded database has no DATA_DIR, so none either).
  const disabled = useServer({ adminToken: false });
  const adminOps = new OperationIndex(loadBundledSpec()).operations.filter((o) => o.security.kind === 'admin');

  it('answers every admin operation with 503 PRECONDITION_FAILED naming ADMIN_TOKEN: no token, a wrong one, or the would-be right one', async () => {
    expect(disabled.runtime.adminTokenSource).toBe('none');
    expect(adminOps.length).toBeGreaterThanOrEqual(8);
    const sample = '00000000-0000-4000-8000-000000000000';
    const accountsBefore = await disabled.deps.db.knex('accounts').count({ n: '*' }).first();
    for (const op of adminOps) {
      for (const auth of [{}, bearer('not-the-admin-token'), bearer(disabled.adminToken)]) {
        const res = await disabled.fetch(op.path.replace(/\{[^}]+\}/g, sample), {
          method: op.method,
          headers: { ...auth, ...(op.hasRequestBody ? { 'Content-Type': 'application/json' } : {}) },
          // A valid body where one is needed: the refusal does not depend on what is sent.
          ...(op.operationId === 'createAccount' ? { body: JSON.stringify({ username: 'would_be_created' }) } : {}),
          ...(op.operationId === 'createApiKey' ? { body: JSON.stringify({ scopes: {} }) } : {}),
          ...(op.operationId === 'registerAccountIdentity' ? { body: '{}' } : {}),
        });
        expect(res.status, `${op.operationId} ${JSON.stringify(auth)}`).toBe(503);
        expect(await res.json()).toEqual(DISABLED);
      }
    }
    // The typed client (what the CLI uses) sees the same declared answer.
    const typed = await disabled.admin.GET('/admin/v1/accounts');
    expect(typed.response.status).toBe(503);
    expect(typed.error).toEqual(DISABLED);
    expect(await disabled.deps.db.knex('accounts').count({ n: '*' }).first()).toEqual(accountsBefore);
  });

  describe.skipIf(!DATABASE_URL)(
    `npm run admin -- --direct on its database${POSTGRES_ONLY}`,
    { timeout: 180_000 },
    () => {
      const direct = (args: string[]) => {
        const env: NodeJS.ProcessEnv = { ...process.env, DATABASE_URL: disabled.databaseUrl, LOG_LEVEL: 'warn' };
        delete env.ADMIN_TOKEN;
        delete env.ADMIN_URL;
        return run(process.execPath, ['--import', 'tsx', 'scripts/admin.ts', '--direct', ...args], { env });
      };
      let account: { userId: string; username: string };
      let key: { id: string; apiKey: string; scopes: Record<string, string>; expiresAt: number | null };

      it('creates the first account and key without the server: audited as the API does, and the key works against the server', async () => {
        account = JSON.parse(
          (await direct(['create-account', '--username', 'first_operator', '--plan', 'pro'])).stdout,
        );
        expect(account).toEqual({ userId: expect.any(String), username: 'first_operator' });
        const issued = await direct([
          'create-key',
          '--user',
          account.userId,
          '--scopes',
          'members:read',
          '--name',
          'first',
        ]);
        key = JSON.parse(issued.stdout);
        expect(key).toEqual({
          id: expect.any(String),
          apiKey: expect.stringMatching(/^adk_/),
          scopes: { members: 'read' },
          expiresAt: null,
        });
        // Printed as the API answers it (the same JSON the CLI prints through a server).
        expect(issued.stdout).toBe(`${JSON.stringify(key, null, 2)}\n`);

        const audit = await disabled.deps.db
          .knex('audit_events')
          .where({ user_id: account.userId })
          .orderBy('created_at')
          .select('action', 'actor_kind', 'actor_key_id', 'target_type', 'target_id', 'detail');
        expect(audit).toEqual([
          {
            action: 'account.create',
            actor_kind: 'operator',
            actor_key_id: null,
            target_type: 'account',
            target_id: account.userId,
            detail: { username: 'first_operator', plan: 'pro' },
          },
          {
            action: 'api_key.create',
            actor_kind: 'operator',
            actor_key_id: null,
            target_type: 'api_key',
            target_id: key.id,
            detail: { name: 'first', scopes: { members: 'read' }, expiresAt: null },
          },
        ]);
        const me = await disabled.client(key.apiKey).GET('/api/v1/me');
        expect(me.response.status).toBe(200);
        expect(me.data).toMatchObject({ userId: account.userId, username: 'first_operator', key: { id: key.id } });
      });

      it('lists accounts as the API lists them, and revokes the key (the running server refuses it from then on)', async () => {
        // A second server with a token on the same database: what the API path answers.
        const withToken = await new TestServer().start({ databaseUrl: disabled.databaseUrl });
        try {
          const listed = await direct(['list-accounts', '--prefix', 'first_op']);
          const api = await withToken.admin.GET('/admin/v1/accounts', {
            params: { query: { usernamePrefix: 'first_op' } },
          });
          expect(listed.stdout).toBe(`${JSON.stringify(api.data, null, 2)}\n`);
          expect(api.data!.items.map((a) => a.userId)).toEqual([account.userId]);
        } finally {
          await withToken.close();
        }
        expect(JSON.parse((await direct(['revoke-key', '--key', key.id])).stdout)).toEqual({ revoked: key.id });
        const row = await disabled.deps.db.knex('api_keys').where({ id: key.id }).first();
        expect(row.revoked_at).toEqual(expect.any(Number));
        expect(
          await disabled.deps.db.knex('audit_events').where({ target_id: key.id, action: 'api_key.revoke' }).first(),
        ).toMatchObject({ user_id: account.userId, actor_kind: 'operator', target_type: 'api_key' });
        // The revocation reaches the server's key cache through NOTIFY, as from the API.
        const deadline = Date.now() + 5_000;
        let status = 0;
        while (Date.now() < deadline && status !== 401) {
          status = (await disabled.fetch('/api/v1/me', { headers: bearer(key.apiKey) })).status;
          if (status !== 401) await new Promise((r) => setTimeout(r, 50));
        }
        expect(status).toBe(401);
      });

      it('refuses invalid input with the message the API gives, writing nothing', async () => {
        const before = await disabled.deps.db.knex('audit_events').count({ n: '*' }).first();
        const cases: Array<{ args: string[]; api: () => Promise<{ error?: unknown; response: Response }> }> = [
          {
            args: ['create-account', '--username', 'x'],
            api: () => server.admin.POST('/admin/v1/accounts', { body: { username: 'x' } }),
          },
          {
            args: ['create-key', '--user', account.userId, '--scopes', 'billing:read'],
            api: () =>
              server.admin.POST('/admin/v1/accounts/{userId}/api-keys', {
                params: { path: { userId: account.userId } },
                body: { scopes: { billing: 'read' } as never },
              }),
          },
        ];
        for (const { args, api } of cases) {
          const expected = await api();
          expect(expected.response.status).toBe(400);
          const refused = await direct(args).then(
            () => expect.fail(`--direct ${args[0]} succeeded`),
            (err: { code: number; stderr: string; stdout: string }) => err,
          );
          expect(refused.code).toBe(1);
          expect(refused.stdout).toBe('');
          expect(JSON.parse(refused.stderr)).toEqual(expected.error);
        }
        expect(await disabled.deps.db.knex('audit_events').count({ n: '*' }).first()).toEqual(before);
      });
    },
  );
});

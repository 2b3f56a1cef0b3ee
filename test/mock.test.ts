/** `npm run mock` (Prism) serves the contract's examples, as frontend teams use it. */
import { spawn, type ChildProcess } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApiClient, type ApiClient } from '../client/index.ts';
import { Contract, responseFor } from '../scripts/fuzz/contract.ts';
import { loadBundledSpec } from '../server/http/spec.ts';

let child: ChildProcess;
let base = '';

async function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const s = createServer().listen(0, '127.0.0.1', () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
  });
}

beforeAll(async () => {
  const port = await freePort();
  base = `http://127.0.0.1:${port}`;
  child = spawn('npm', ['run', '-s', 'mock'], {
    env: { ...process.env, MOCK_PORT: String(port) },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  });
  let out = '';
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`prism did not start:\n${out}`)), 90_000);
    const onData = (d: Buffer) => {
      out += d;
      if (out.includes('Prism is listening')) {
        clearTimeout(timer);
        resolve();
      }
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', onData);
    child.on('exit', (code) => reject(new Error(`prism exited with ${code}:\n${out}`)));
  });
});

afterAll(() => {
  try {
    if (child?.pid) process.kill(-child.pid, 'SIGKILL');
  } catch {
    // the group is gone (the signal test stopped it)
  }
});

describe('Prism mock', () => {
  it('answers with the documented example', async () => {
    const res = await fetch(`${base}/api/v1/appearance`, { headers: { Authorization: 'Bearer anything' } });
    expect(res.status).toBe(200);
    expect(await res.json()).toMatchObject({ themeMode: 'dark', colorScheme: 'forest' });
  });

  it('enforces the security requirement and strict bodies like the real server', async () => {
    expect((await fetch(`${base}/api/v1/appearance`)).status).toBe(401);
    const bad = await fetch(`${base}/api/v1/appearance`, {
      method: 'PATCH',
      headers: { Authorization: 'Bearer anything', 'Content-Type': 'application/json' },
      body: JSON.stringify({ bogus: 1 }),
    });
    expect(bad.status).toBe(400);
  });
});

const spec = loadBundledSpec() as unknown as {
  paths: Record<string, Record<string, { operationId?: string; tags?: string[]; responses?: Record<string, unknown> }>>;
  components: Record<string, Record<string, unknown>>;
};

function deref(node: unknown): unknown {
  let current = node as { $ref?: string } | undefined;
  while (current?.$ref) {
    const [, , section, name] = current.$ref.split('/');
    current = spec.components[section!]![name!] as { $ref?: string };
  }
  return current;
}

/** The first example value of an operation's response for `status`, as the contract has it. */
function firstExample(operationId: string, status: number): unknown {
  for (const item of Object.values(spec.paths)) {
    for (const op of Object.values(item)) {
      if (op.operationId !== operationId) continue;
      const response = deref(op.responses?.[String(status)]) as {
        content?: Record<string, { examples?: Record<string, unknown> }>;
      };
      // JSON where the operation has it, else its one other media type (a stored object's bytes).
      const media = response.content?.['application/json'] ?? Object.values(response.content ?? {})[0];
      const first = Object.values(media?.examples ?? {})[0];
      return (deref(first) as { value: unknown }).value;
    }
  }
  throw new Error(`no operation ${operationId}`);
}

const ID = '00000000-0000-4000-8000-000000000001';
type Call = (
  api: ApiClient,
  headers: Record<string, string>,
) => Promise<{ data?: unknown; error?: unknown; response: Response }>;

/** One operation of every tag: its success example, and an error example picked with `Prefer: code=…`. */
const perTag: Record<string, { operationId: string; errorStatus: number; call: Call }> = {
  Account: { operationId: 'getMe', errorStatus: 400, call: (api, headers) => api.GET('/api/v1/me', { headers }) },
  Appearance: {
    operationId: 'getAppearance',
    errorStatus: 404,
    call: (api, headers) => api.GET('/api/v1/appearance', { headers }),
  },
  Members: {
    operationId: 'getMember',
    errorStatus: 404,
    call: (api, headers) => api.GET('/api/v1/members/{memberId}', { params: { path: { memberId: ID } }, headers }),
  },
  Groups: {
    operationId: 'updateGroup',
    errorStatus: 404,
    call: (api, headers) =>
      api.PATCH('/api/v1/groups/{groupId}', { params: { path: { groupId: ID } }, body: { name: 'Renamed' }, headers }),
  },
  'Custom fields': {
    operationId: 'getMemberCustomFields',
    errorStatus: 404,
    call: (api, headers) =>
      api.GET('/api/v1/members/{memberId}/custom-fields', { params: { path: { memberId: ID } }, headers }),
  },
  'Member statuses': {
    operationId: 'listMemberStatusAssignments',
    errorStatus: 404,
    call: (api, headers) =>
      api.GET('/api/v1/members/{memberId}/statuses', { params: { path: { memberId: ID } }, headers }),
  },
  Systems: {
    operationId: 'listAssignableMembers',
    errorStatus: 404,
    call: (api, headers) =>
      api.GET('/api/v1/systems/side-systems/{sideSystemId}/assignable-members', {
        params: { path: { sideSystemId: ID } },
        headers,
      }),
  },
  Terminology: {
    operationId: 'getResolvedTerminology',
    errorStatus: 404,
    call: (api, headers) => api.GET('/api/v1/terminology/resolved', { headers }),
  },
  Entries: {
    operationId: 'getEntry',
    errorStatus: 404,
    call: (api, headers) => api.GET('/api/v1/entries/{entryId}', { params: { path: { entryId: ID } }, headers }),
  },
  Front: {
    operationId: 'updateFrontSession',
    errorStatus: 404,
    call: (api, headers) =>
      api.PATCH('/api/v1/front/sessions/{sessionId}', {
        params: { path: { sessionId: ID } },
        body: { note: 'fixed' },
        headers,
      }),
  },
  Friends: {
    operationId: 'getFriendProfile',
    errorStatus: 404,
    call: (api, headers) =>
      api.GET('/api/v1/friends/{friendUserId}', { params: { path: { friendUserId: ID } }, headers }),
  },
  'Privacy buckets': {
    operationId: 'getPrivacyBucket',
    errorStatus: 404,
    call: (api, headers) =>
      api.GET('/api/v1/privacy-buckets/{bucketId}', { params: { path: { bucketId: ID } }, headers }),
  },
  Messaging: {
    operationId: 'listMessagingChannels',
    errorStatus: 404,
    call: (api, headers) =>
      api.GET('/api/v1/messaging/spaces/{spaceId}/channels', { params: { path: { spaceId: ID } }, headers }),
  },
  Social: {
    operationId: 'updateSocialLink',
    errorStatus: 404,
    call: (api, headers) =>
      api.PATCH('/api/v1/social/links/{linkId}', {
        params: { path: { linkId: ID } },
        body: { featured: true },
        headers,
      }),
  },
  Guestbook: {
    operationId: 'listGuestbookMessages',
    errorStatus: 404,
    call: (api, headers) =>
      api.GET('/api/v1/social/widgets/{widgetId}/guestbook', { params: { path: { widgetId: ID } }, headers }),
  },
  Poll: {
    operationId: 'getPoll',
    errorStatus: 404,
    call: (api, headers) =>
      api.GET('/api/v1/social/widgets/{widgetId}/poll', { params: { path: { widgetId: ID } }, headers }),
  },
  Trash: { operationId: 'listTrash', errorStatus: 400, call: (api, headers) => api.GET('/api/v1/trash', { headers }) },
  Portability: {
    operationId: 'getImport',
    errorStatus: 404,
    call: (api, headers) => api.GET('/api/v1/imports/{importId}', { params: { path: { importId: ID } }, headers }),
  },
  Events: {
    operationId: 'streamEvents',
    errorStatus: 400,
    call: (api, headers) => api.GET('/api/v1/events', { headers, parseAs: 'text' }),
  },
  Webhooks: {
    operationId: 'getWebhook',
    errorStatus: 404,
    call: (api, headers) => api.GET('/api/v1/webhooks/{webhookId}', { params: { path: { webhookId: ID } }, headers }),
  },
  Admin: {
    operationId: 'getAccount',
    errorStatus: 404,
    call: (api, headers) => api.GET('/admin/v1/accounts/{userId}', { params: { path: { userId: ID } }, headers }),
  },
  Operations: { operationId: 'getHealth', errorStatus: 400, call: (api, headers) => api.GET('/healthz', { headers }) },
  Storage: {
    operationId: 'downloadStoredObject',
    errorStatus: 403,
    call: (api, headers) =>
      api.GET('/storage/v1/objects/{objectKey}', {
        params: {
          path: { objectKey: 'staging~a~b' },
          query: { expires: 1763800900000, signature: 'Xq3u0mC2rB7yWcJ9fVt1hP4kE8sA6dL0nZ5gQ2iR7oU' },
        },
        headers,
        parseAs: 'text',
      }),
  },
};

describe('Prism mock through the typed client, one operation of every tag', () => {
  it('covers every tag that has operations', () => {
    const tags = new Set(
      Object.values(spec.paths).flatMap((item) => Object.values(item).flatMap((op) => op.tags ?? [])),
    );
    expect([...tags].sort()).toEqual(Object.keys(perTag).sort());
  });

  it.each(Object.entries(perTag))(
    "%s: the success example, and the operation's own error example",
    async (_tag, { operationId, errorStatus, call }) => {
      const api = createApiClient({ baseUrl: base, apiKey: 'anything' });
      const ok = await call(api, {});
      expect(ok.response.status, operationId).toBeLessThan(300);
      expect(ok.data).toEqual(firstExample(operationId, ok.response.status));
      const failed = await call(api, { Prefer: `code=${errorStatus}` });
      expect(failed.response.status).toBe(errorStatus);
      expect(failed.error).toEqual(firstExample(operationId, errorStatus));
    },
  );

  it('a 404 on a member says a member was not found, and a 404 on a note says a note was not found', async () => {
    const api = createApiClient({ baseUrl: base, apiKey: 'anything' });
    const member = await api.GET('/api/v1/members/{memberId}', {
      params: { path: { memberId: ID } },
      headers: { Prefer: 'code=404' },
    });
    expect(member.error).toEqual({ code: 'NOT_FOUND', message: 'Member not found' });
    const entry = await api.GET('/api/v1/entries/{entryId}', {
      params: { path: { entryId: ID } },
      headers: { Prefer: 'code=404' },
    });
    expect(entry.error).toEqual({ code: 'NOT_FOUND', message: 'Entry not found' });
  });
});

/** The value of an operation's named 400 example, as the contract has it. */
function named400(operationId: string, name: string): unknown {
  for (const item of Object.values(spec.paths)) {
    for (const op of Object.values(item)) {
      if (op.operationId !== operationId) continue;
      const response = deref(op.responses?.['400']) as {
        content: Record<string, { examples: Record<string, unknown> }>;
      };
      return (deref(response.content['application/json']!.examples[name]) as { value: unknown }).value;
    }
  }
  throw new Error(`no operation ${operationId}`);
}

describe("Prism mock: each mistake's 400, and generated bodies", () => {
  const auth = { Authorization: 'Bearer anything' };
  const json = { ...auth, 'Content-Type': 'application/json' };

  it.each([
    ['createMember', 'missingField', '/api/v1/members', { method: 'POST', body: '{"name":"Robin"}' }],
    ['createMember', 'malformedJson', '/api/v1/members', { method: 'POST', body: '{"name":"Robin"}' }],
    ['getMember', 'badPathId', `/api/v1/members/${ID}`, {}],
    ['listMembersPage', 'badQueryParameter', '/api/v1/members/page?limit=5', {}],
    ['updateAppearance', 'unknownField', '/api/v1/appearance', { method: 'PATCH', body: '{"themeMode":"dark"}' }],
  ] as const)(
    '%s: a valid request with `Prefer: code=400, example=%s` gets that example',
    async (operationId, name, path, init) => {
      const res = await fetch(base + path, { ...init, headers: { ...json, Prefer: `code=400, example=${name}` } });
      expect(res.status).toBe(400);
      expect(await res.json()).toEqual(named400(operationId, name));
    },
  );

  it('`Prefer: dynamic=true` answers a body generated from the schema, valid against it', async () => {
    const contract = new Contract();
    const op = contract.operations.find((o) => o.operationId === 'listMembersPage')!;
    const page = await fetch(`${base}/api/v1/members/page?limit=5`, { headers: { ...auth, Prefer: 'dynamic=true' } });
    expect(page.status).toBe(200);
    expect(contract.check(responseFor(op, 200)!.media[0]!.schema!, await page.json())).toEqual({ ok: true });
    const refused = await fetch(`${base}/api/v1/members/page?limit=5`, {
      headers: { ...auth, Prefer: 'code=400, dynamic=true' },
    });
    expect(refused.status).toBe(400);
    expect(contract.check(responseFor(op, 400)!.media[0]!.schema!, await refused.json())).toEqual({ ok: true });
  });

  // What the README says Prism does with a request its own validation refuses.
  it("a request Prism refuses gets Prism's pick, not the mistake's example", async () => {
    // An operation without a 422: the first 400 example, whatever the mistake.
    const unknown = await fetch(`${base}/api/v1/appearance`, { method: 'PATCH', headers: json, body: '{"bogus":1}' });
    expect(unknown.status).toBe(400);
    expect(await unknown.json()).toEqual(firstExample('updateAppearance', 400));
    // A POST declares a 422 (Idempotency-Key reuse), which Prism prefers for any invalid request.
    const post = await fetch(`${base}/api/v1/members`, { method: 'POST', headers: json, body: '{"bogus":1}' });
    expect(post.status).toBe(422);
    expect(await post.json()).toEqual(firstExample('createMember', 422));
    // Malformed JSON: Prism's own envelope.
    const malformed = await fetch(`${base}/api/v1/members`, { method: 'POST', headers: json, body: '{"name":' });
    expect(malformed.status).toBe(400);
    expect(await malformed.json()).toEqual({ error: { code: 'invalid_json', message: 'Invalid JSON' } });
  });
});

/** Every process whose process group is `pgid` (field 5 of /proc/<pid>/stat). */
function processGroup(pgid: number): number[] {
  const members: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      if (Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[2]) === pgid) members.push(Number(entry));
    } catch {
      // exited while we looked
    }
  }
  return members;
}

// Last: it stops the mock the other tests use.
describe('npm run mock and signals', () => {
  it('SIGTERM to the npm process stops Prism: the port closes and no process of its group survives', async () => {
    const pgid = child.pid!; // detached: npm leads its own process group
    expect(processGroup(pgid).length).toBeGreaterThanOrEqual(2); // npm and Prism
    const exited = new Promise((resolve) => child.once('exit', resolve));
    process.kill(pgid, 'SIGTERM'); // the npm process only, as a supervisor would
    await exited;
    let survivors = processGroup(pgid);
    for (let i = 0; i < 100 && survivors.length > 0; i++) {
      await new Promise((r) => setTimeout(r, 100));
      survivors = processGroup(pgid);
    }
    expect(survivors).toEqual([]);
    await expect(fetch(`${base}/api/v1/appearance`)).rejects.toThrow();
  });
});

/**
 * Real ids for path parameters, request-body ids and id query parameters, keyed by parameter
 * name — the only per-resource knowledge the fuzzer has. Everything is created through the API
 * (admin API for accounts and keys, the fuzz account's all-scopes key for the rest).
 *
 * - shared: created once, used by every operation that names the parameter;
 * - fresh: created on demand for operations that destroy what they are given (DELETE, and the
 *   trashed copy a `/restore` operation brings back), so shared fixtures survive the run.
 *
 * A name without a recipe is generated from its schema (a random UUID for ids), which the server
 * must answer with a declared 404.
 */
import { callJson } from './http.ts';

type Json = Record<string, unknown>;

interface Recipe {
  create(f: Fixtures): Promise<string>;
  /** How the shared id is obtained when it is not simply a created one. */
  shared?(f: Fixtures): Promise<string>;
}

/** Other names a fixture answers to (request-body fields named after what they point at). */
const ALIASES: Record<string, string> = {
  parentId: 'folderId',
  directoryId: 'folderId',
  createdBy: 'memberId',
  itemId: 'memberId',
  customColorSchemeId: 'schemeId',
  customFontId: 'fontId',
  cursorId: 'sessionId',
  ownerUserId: 'friendUserId',
  fieldDefinitionId: 'fieldId',
  definitionId: 'statusId',
};

const idOf = (json: unknown): string => {
  const o = json as Json | undefined;
  const id = o?.id ?? o?._id;
  if (typeof id !== 'string') throw new Error(`no id in ${JSON.stringify(json)}`);
  return id;
};

let counter = 0;
/** A 1×1 PNG for the attachment and gallery recipes. */
const FUZZ_PNG_HEX =
  '89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c4890000000d4944415478da63f8ffff3f0005fe02fea7d6a4f60000000049454e44ae426082';
const label = (prefix: string) => `${prefix} ${++counter}`;

const RECIPES: Record<string, Recipe> = {
  userId: {
    shared: async (f) => (await f.createAccount('target')).userId,
    create: async (f) => (await f.createAccount('doomed')).userId,
  },
  keyId: {
    create: async (f) => f.throwawayKey(),
  },
  sideSystemId: {
    shared: async (f) =>
      ((await f.api('GET', '/api/v1/systems')) as { active: { sideSystemId: string } }).active.sideSystemId,
    create: async (f) => idOf(await f.api('POST', '/api/v1/systems/side-systems', { name: label('Side') })),
  },
  memberId: {
    create: async (f) =>
      idOf(await f.api('POST', '/api/v1/members', { name: label('Member'), sideSystemId: f.shared('sideSystemId') })),
  },
  subSystemId: {
    create: async (f) =>
      idOf(
        await f.api('POST', '/api/v1/systems/sub-systems', {
          sideSystemId: f.shared('sideSystemId'),
          linkedMemberId: await RECIPES.memberId!.create(f),
          name: label('Sub'),
        }),
      ),
  },
  groupId: { create: async (f) => idOf(await f.api('POST', '/api/v1/groups', { name: label('Group') })) },
  folderId: { create: async (f) => idOf(await f.api('POST', '/api/v1/folders', { name: label('Folder') })) },
  layoutId: {
    create: async (f) =>
      idOf(await f.api('POST', '/api/v1/directory-layouts', { directoryId: null, name: label('Layout'), itemIds: [] })),
  },
  fieldId: {
    create: async (f) => idOf(await f.api('POST', '/api/v1/custom-fields', { name: label('Field'), type: 'text' })),
  },
  statusId: {
    create: async (f) =>
      idOf(await f.api('POST', '/api/v1/member-statuses', { name: label('Status'), color: '#336699' })),
  },
  entryId: { create: async (f) => idOf(await f.api('POST', '/api/v1/entries', { content: label('Note') })) },
  tierId: { create: async (f) => idOf(await f.api('POST', '/api/v1/front/tiers', { displayName: label('Tier') })) },
  sessionId: {
    create: async (f) => {
      const memberId = await RECIPES.memberId!.create(f);
      await f.api('POST', '/api/v1/front/members', { memberId });
      const front = (await f.api('GET', '/api/v1/front')) as {
        activeSessions: Array<{ _id: string; memberId: string }>;
      };
      const session = front.activeSessions.find((s) => s.memberId === memberId);
      if (!session) throw new Error('started fronting but no open session');
      return session._id;
    },
  },
  bucketId: { create: async (f) => idOf(await f.api('POST', '/api/v1/privacy-buckets', { name: label('Bucket') })) },
  /** An accepted friend of the fuzz account. */
  friendUserId: { create: async (f) => f.otherAccount('accept') },
  /** An account whose friend request to the fuzz account is pending. */
  requesterUserId: { create: async (f) => f.otherAccount('pending') },
  schemeId: {
    create: async (f) =>
      idOf(
        await f.api('POST', '/api/v1/appearance/custom-color-schemes', {
          name: label('Scheme'),
          colors: { primary: '#112233', background: '#FFFFFF' },
        }),
      ),
  },
  fontId: {
    create: async (f) =>
      idOf(
        await f.api('POST', '/api/v1/appearance/custom-fonts', {
          name: label('Font'),
          sourceUrl: 'https://fonts.example.org/fuzz.woff2',
        }),
      ),
  },
  // Social: a link, and a guestbook widget (poll routes answer it with their declared 404).
  linkId: {
    create: async (f) =>
      (
        (await f.api('POST', '/api/v1/social/links', {
          platform: 'custom',
          displayName: label('Link'),
          visibility: 'public',
        })) as Json
      ).linkId as string,
  },
  widgetId: {
    create: async (f) =>
      (
        (await f.api('POST', '/api/v1/social/widgets', {
          type: 'guestbook',
          config: { kind: 'guestbook', allowAnonymous: true },
          visibility: 'public',
          size: 'medium',
        })) as Json
      ).widgetId as string,
  },
  // A social gallery image: a PNG with bytes of its own (after its end), so the fresh image a
  // DELETE gets is never the shared one (the gallery names images by the hash of their bytes).
  sha256: {
    create: async (f) => {
      const png = Buffer.concat([Buffer.from(FUZZ_PNG_HEX, 'hex'), Buffer.from(`fuzz-gallery-${++counter}`)]);
      const res = await fetch(`${f.baseUrl}/api/v1/social/gallery`, {
        method: 'POST',
        headers: { authorization: `Bearer ${f.apiKey}`, 'content-type': 'image/png' },
        body: new Uint8Array(png),
      });
      const json = (await res.json()) as Json;
      if (res.status !== 201) throw new Error(`fixture gallery image answered ${res.status}: ${JSON.stringify(json)}`);
      return json.sha256 as string;
    },
  },
  // Messaging: categories, channels and messages go into the shared space (and channel), so ids
  // that must belong together (a channel and its message, a space and its channel) do.
  spaceId: { create: async (f) => idOf(await f.api('POST', '/api/v1/messaging/spaces', { name: label('Space') })) },
  categoryId: {
    create: async (f) =>
      idOf(
        await f.api(
          'POST',
          `/api/v1/messaging/spaces/${f.shared('spaceId') ?? (await RECIPES.spaceId!.create(f))}/categories`,
          { name: label('Category') },
        ),
      ),
  },
  channelId: {
    create: async (f) =>
      idOf(
        await f.api(
          'POST',
          `/api/v1/messaging/spaces/${f.shared('spaceId') ?? (await RECIPES.spaceId!.create(f))}/channels`,
          { name: label('channel') },
        ),
      ),
  },
  messageId: {
    create: async (f) =>
      idOf(
        await f.api(
          'POST',
          `/api/v1/messaging/channels/${f.shared('channelId') ?? (await RECIPES.channelId!.create(f))}/messages`,
          {
            memberId: f.shared('memberId') ?? (await RECIPES.memberId!.create(f)),
            content: label('Message'),
          },
        ),
      ),
  },
  // An attachment of a message in the shared channel, through the whole upload flow.
  attachmentId: {
    create: async (f) => {
      const channelId = f.shared('channelId') ?? (await RECIPES.channelId!.create(f));
      const png = Buffer.from(FUZZ_PNG_HEX, 'hex');
      const intent = (await f.api('POST', '/api/v1/messaging/attachments/upload-intent', {
        channelId,
        fileName: 'fuzz.png',
        contentType: 'image/png',
        byteSize: png.length,
      })) as {
        stagingId: string;
        upload: { url: string; headers: Record<string, string> };
      };
      const url = intent.upload.url.startsWith('/') ? f.baseUrl + intent.upload.url : intent.upload.url;
      const put = await fetch(url, { method: 'PUT', headers: intent.upload.headers, body: new Uint8Array(png) });
      if (!put.ok) throw new Error(`fixture attachment upload answered ${put.status}`);
      await f.api('POST', '/api/v1/messaging/attachments/complete', { stagingId: intent.stagingId });
      await f.api('POST', `/api/v1/messaging/channels/${channelId}/messages`, {
        memberId: f.shared('memberId') ?? (await RECIPES.memberId!.create(f)),
        stagedAttachmentIds: [intent.stagingId],
      });
      return intent.stagingId;
    },
  },
  // A fetched link preview: a message linking the server's loopback page, its job run to completion.
  previewId: {
    create: async (f) => {
      const { previewPageUrl, runJobs } = f.services;
      if (!previewPageUrl || !runJobs)
        throw new Error('link-preview fixtures need the fuzz server’s preview page and job runner');
      const channelId = f.shared('channelId') ?? (await RECIPES.channelId!.create(f));
      const message = (await f.api('POST', `/api/v1/messaging/channels/${channelId}/messages`, {
        memberId: f.shared('memberId') ?? (await RECIPES.memberId!.create(f)),
        content: `${label('Preview')} ${previewPageUrl}`,
      })) as Json;
      await runJobs();
      const page = (await f.api('GET', `/api/v1/messaging/channels/${channelId}/messages`)) as {
        items: Array<{ id: string; linkPreviews: Array<{ id: string }> }>;
      };
      const preview = page.items.find((m) => m.id === message.id)?.linkPreviews[0];
      if (!preview) throw new Error('the fixture link preview was not fetched');
      return preview.id;
    },
  },
};

/** What some recipes need from the fuzz server beyond HTTP. */
export interface FixtureServices {
  /** A loopback HTML page the server may fetch (link previews). */
  previewPageUrl?: string;
  /** Runs the server's due background jobs to completion. */
  runJobs?: () => Promise<void>;
}

export class Fixtures {
  readonly sharedIds = new Map<string, string>();
  private readonly pools = new Map<string, string[]>();
  private keyholder: string | undefined;
  /** Keys of the fuzz account: every scope read_write, every scope read, and no scope at all. */
  apiKey = '';
  readOnlyKey = '';
  noScopeKey = '';
  userId = '';

  constructor(
    readonly baseUrl: string,
    readonly adminToken: string,
    readonly services: FixtureServices = {},
  ) {}

  static canonical(name: string): string {
    if (ALIASES[name]) return ALIASES[name]!;
    if (RECIPES[name]) return name;
    // linkedMemberId → memberId, parentSubSystemId → subSystemId, memberIds → memberId…
    const singular = name.replace(/Ids$/, 'Id');
    if (RECIPES[singular]) return singular;
    const lower = singular.toLowerCase();
    const match = Object.keys(RECIPES)
      .filter((key) => lower.endsWith(key.toLowerCase()))
      .sort((a, b) => b.length - a.length)[0];
    return match ?? ALIASES[singular] ?? name;
  }

  has(name: string): boolean {
    return RECIPES[Fixtures.canonical(name)] !== undefined;
  }

  shared(name: string): string | undefined {
    return this.sharedIds.get(Fixtures.canonical(name));
  }

  /** One of the shared fixtures of this kind (several members, so id lists can be real and unique). */
  sharedAny(name: string, pick: (ids: string[]) => string): string | undefined {
    const canonical = Fixtures.canonical(name);
    const pool = this.pools.get(canonical);
    if (pool && pool.length > 0) return pick(pool);
    return this.sharedIds.get(canonical);
  }

  /** A new fixture of this kind (undefined when there is no recipe). */
  async fresh(name: string): Promise<string | undefined> {
    const recipe = RECIPES[Fixtures.canonical(name)];
    return recipe ? recipe.create(this) : undefined;
  }

  async setUp(scopes: readonly string[]): Promise<void> {
    const { userId } = await this.createAccount('fuzz', 'pro_plus');
    this.userId = userId;
    this.apiKey = await this.createKey(userId, Object.fromEntries(scopes.map((s) => [s, 'read_write'])));
    this.readOnlyKey = await this.createKey(userId, Object.fromEntries(scopes.map((s) => [s, 'read'])));
    this.noScopeKey = await this.createKey(userId, {});
    // In dependency order: sub systems need a side system and a member.
    for (const name of ['userId', 'sideSystemId', 'memberId', 'subSystemId', ...Object.keys(RECIPES)]) {
      if (this.sharedIds.has(name) || name === 'keyId') continue;
      const recipe = RECIPES[name]!;
      this.sharedIds.set(name, await (recipe.shared ?? recipe.create)(this));
    }
    // Members come in threes: lists of member ids (groups, notes, front order) take several.
    const members = [this.sharedIds.get('memberId')!];
    for (let i = 0; i < 2; i++) members.push(await RECIPES.memberId!.create(this));
    this.pools.set('memberId', members);
    // An open front session for the shared member, so session routes see a real one.
    this.sharedIds.set('sessionId', await RECIPES.sessionId!.create(this));
  }

  /** A call with the fuzz account's all-scopes key that must succeed. */
  async api(method: string, path: string, body?: unknown): Promise<unknown> {
    const res = await callJson(this.baseUrl, method, path, this.apiKey, body);
    if (res.status >= 300)
      throw new Error(`fixture ${method} ${path} answered ${res.status}: ${JSON.stringify(res.json)}`);
    return res.json;
  }

  async admin(method: string, path: string, body?: unknown): Promise<{ status: number; json: unknown }> {
    return callJson(this.baseUrl, method, path, this.adminToken, body);
  }

  async createAccount(prefix: string, plan = 'pro'): Promise<{ userId: string }> {
    const res = await this.admin('POST', '/admin/v1/accounts', {
      username: `${prefix}_${Date.now().toString(36)}_${++counter}`,
      plan,
    });
    if (res.status !== 201) throw new Error(`fixture account: ${res.status} ${JSON.stringify(res.json)}`);
    return res.json as { userId: string };
  }

  async createKey(userId: string, scopes: Record<string, string>): Promise<string> {
    const res = await this.admin('POST', `/admin/v1/accounts/${userId}/api-keys`, { scopes, name: label('fuzz key') });
    if (res.status !== 201) throw new Error(`fixture key: ${res.status} ${JSON.stringify(res.json)}`);
    return (res.json as { apiKey: string }).apiKey;
  }

  /** Another account that requested the fuzz account's friendship, then (`accept`) was accepted. */
  async otherAccount(state: 'pending' | 'accept'): Promise<string> {
    const { userId } = await this.createAccount('friend');
    const key = await this.createKey(userId, { friends: 'read_write' });
    const res = await callJson(this.baseUrl, 'POST', `/api/v1/friends/${this.userId}/request`, key, undefined);
    if (res.status !== 204) throw new Error(`fixture friend request: ${res.status} ${JSON.stringify(res.json)}`);
    if (state === 'accept') await this.api('POST', `/api/v1/friends/requests/${userId}/accept`);
    return userId;
  }

  /** A key on a throwaway account (a new one whenever the plan's key limit is reached). */
  async throwawayKey(): Promise<string> {
    for (let attempt = 0; attempt < 2; attempt++) {
      this.keyholder ??= (await this.createAccount('keyholder')).userId;
      const res = await this.admin('POST', `/admin/v1/accounts/${this.keyholder}/api-keys`, { scopes: {} });
      if (res.status === 201) return idOf(res.json);
      this.keyholder = undefined;
    }
    throw new Error('could not create a throwaway API key');
  }
}

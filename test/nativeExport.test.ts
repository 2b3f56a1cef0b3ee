/**
 * The native export and import end to end (docs/portability.md, "The native export"): a rich
 * account built through the API is exported (the job run with runDue, the archive downloaded from
 * its presigned URL), imported into a fresh account, and every owner read route of the contract
 * is walked on both, pages followed, and compared with the ids mapped; stored objects byte for
 * byte. Then: a second import of the same archive changes nothing, damaged archives fail and write
 * nothing, an expired export's archive goes with storage garbage collection, and the scope rule.
 */
import { createHash } from 'node:crypto';
import { Readable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ApiClient, components } from '../client/index.ts';
import { createLogger } from '../server/logger.ts';
import { DERIVED_TABLES, EXPORTED_TABLES, INTERNAL_TABLES } from '../server/features/portability/nativeTables.ts';
import { readTar, tarEntrySize, TAR_END_BYTES, tarStream } from '../server/features/portability/tar.ts';
import { collectGarbage } from '../server/storage/gc.ts';
import { SCOPES } from '../server/core/scopes.ts';
import { createFolder, createGroup, createMember, createSub, createSide, startFronting } from './helpers/fixtures.ts';
import { befriend } from './helpers/friends.ts';
import { addGalleryImage, uniqueImage } from './helpers/gallery.ts';
import { GIF, PNG } from './helpers/images.ts';
import { startLoopbackServer, type LoopbackServer } from './helpers/imageServer.ts';
import { ALL_SCOPES, bearer, type TestUser, useServer } from './helpers/server.ts';

type Export = components['schemas']['Export'];
type Import = components['schemas']['Import'];

let offset = 0;
let last = 0;
/** The server's clock: real time, moved forward by tests, and never the same millisecond twice (so no two rows tie on a time). */
const clock = () => {
  last = Math.max(last + 1, Date.now() + offset);
  return last;
};
const server = useServer({
  clock,
  env: { FETCH_ALLOW_PRIVATE: 'true', RATE_LIMIT_PER_MINUTE: '1000000', EXPORT_TTL_HOURS: '2' },
});
let images: LoopbackServer;
beforeAll(async () => {
  images = await startLoopbackServer({
    '/a.png': { type: 'image/png', body: PNG },
    '/b.gif': { type: 'image/gif', body: GIF },
    '/p': {
      type: 'text/html',
      body: '<head><meta property="og:title" content="Page"><meta property="og:image" content="/b.gif"></head>',
    },
  });
});
afterAll(() => images.close());

const ok = (res: { response: Response; error?: unknown }, what: string) =>
  expect([200, 201, 204], `${what}: ${JSON.stringify(res.error)}`).toContain(res.response.status);

async function upload(url: string, headers: Record<string, string>, body: Buffer): Promise<void> {
  const res = await fetch(url.startsWith('http') ? url : server.baseUrl + url, {
    method: 'PUT',
    headers,
    body: new Uint8Array(body),
  });
  expect(res.status, 'upload').toBe(200);
}

/** Builds an account that has a row in every exported table it can reach through the API. */
async function populate(user: TestUser, peer: TestUser, peer2: TestUser): Promise<void> {
  const { api } = user;
  const put = (path: string, type: string, body: Buffer) =>
    server.fetch(path, {
      method: 'PUT',
      headers: { ...bearer(user.apiKey), 'Content-Type': type },
      body: new Uint8Array(body),
    });
  // Appearance.
  const scheme = await api.POST('/api/v1/appearance/custom-color-schemes', {
    body: { name: 'Dusk', colors: { primary: '#112233' } },
  });
  ok(scheme, 'scheme');
  ok(
    await api.POST('/api/v1/appearance/custom-fonts', {
      body: { name: 'Atkinson', sourceUrl: 'https://fonts.example.org/a.woff2' },
    }),
    'font',
  );
  ok(await api.PATCH('/api/v1/appearance', { body: { themeMode: 'dark', reduceMotion: true } }), 'appearance');
  // Systems: the first side system, a second one, a sub system linked to a member.
  const main = (await api.GET('/api/v1/systems')).data!.active.sideSystemId;
  ok(
    await api.PATCH('/api/v1/systems/side-systems/{sideSystemId}', {
      params: { path: { sideSystemId: main } },
      body: { name: 'Home', description: 'Where we live' },
    }),
    'side',
  );
  const second = await createSide(api, 'Elsewhere');
  const a = await createMember(api, 'Aster', { pronouns: 'she/her', description: 'Host', aboutTags: ['host'] });
  const b = await createMember(api, 'Birch');
  const c = await createMember(api, 'Cedar');
  const d = await createMember(api, 'Dune');
  const e = await createMember(api, 'Elm', { sideSystemId: second });
  const sub = await createSub(api, main, a, { name: 'Inner' });
  const f = await createMember(api, 'Fern', { subSystemId: sub, sideSystemId: main });
  expect((await put(`/api/v1/members/${a}/media?kind=avatar`, 'image/png', PNG)).status).toBe(200);
  expect((await put(`/api/v1/members/${b}/media?kind=banner`, 'image/gif', GIF)).status).toBe(200);
  expect((await put(`/api/v1/members/${a}/media?kind=banner`, 'image/gif', GIF)).status).toBe(200);
  ok(
    await api.PATCH('/api/v1/members/{memberId}', {
      params: { path: { memberId: c } },
      body: { archived: true, profileStyle: { accent: '#123456' } },
    }),
    'archive',
  );
  ok(await api.DELETE('/api/v1/members/{memberId}', { params: { path: { memberId: d } } }), 'trash member');
  // Folders, groups (nested), layouts.
  const folder = await createFolder(api, 'Friends');
  const inner = await createFolder(api, 'Close', { parentId: folder });
  const group = await createGroup(api, 'Protectors', { memberIds: [a, b], parentId: inner, color: '#aa3300' });
  await createGroup(api, 'Littles', { memberIds: [c] });
  ok(
    await api.POST('/api/v1/directory-layouts', {
      body: { directoryId: folder, name: 'By role', itemIds: [inner, a] },
    }),
    'layout',
  );
  ok(
    await api.POST('/api/v1/directory-layouts', { body: { directoryId: null, name: 'Root', itemIds: [folder] } }),
    'root layout',
  );
  // Custom fields and values, statuses.
  const field = (await api.POST('/api/v1/custom-fields', { body: { name: 'Role', type: 'text' } })).data!.id;
  const born = (await api.POST('/api/v1/custom-fields', { body: { name: 'Born', type: 'date' } })).data!.id;
  for (const [memberId, fieldId, value] of [
    [a, field, 'host'],
    [b, field, 'protector'],
    [a, born, '2001-02-03'],
  ] as const)
    ok(
      await api.PUT('/api/v1/members/{memberId}/custom-fields/{fieldId}', {
        params: { path: { memberId, fieldId } },
        body: { value },
      }),
      'value',
    );
  const status = (await api.POST('/api/v1/member-statuses', { body: { name: 'Resting', color: '#000001' } })).data!.id;
  ok(
    await api.PUT('/api/v1/members/{memberId}/statuses/{statusId}', {
      params: { path: { memberId: a, statusId: status } },
    }),
    'status',
  );
  // Notes: one with a re-hosted image and two members, one in the trash.
  ok(
    await api.POST('/api/v1/entries', {
      body: { title: 'Day one', content: `note ![x](${images.url('/a.png')})`, memberIds: [a, b] },
    }),
    'entry',
  );
  ok(await api.POST('/api/v1/entries', { body: { content: 'second', memberIds: [b] } }), 'entry 2');
  const trashed = (await api.POST('/api/v1/entries', { body: { content: 'to the trash' } })).data!.id;
  ok(await api.DELETE('/api/v1/entries/{entryId}', { params: { path: { entryId: trashed } } }), 'trash entry');
  ok(await api.PATCH('/api/v1/trash/settings', { body: { retentionDays: 9 } }), 'trash settings');
  // Front: history (a session that ended), the current front, a custom tier with presence.
  await startFronting(api, b);
  ok(await api.DELETE('/api/v1/front/members/{memberId}', { params: { path: { memberId: b } } }), 'end front');
  await startFronting(api, a);
  await startFronting(api, f);
  await startFronting(api, b);
  const tier = (await api.POST('/api/v1/front/tiers', { body: { displayName: 'Near' } })).data!.id;
  ok(
    await api.POST('/api/v1/front/tier-presence', { body: { memberId: e, tierKey: tier, note: 'around' } }),
    'presence',
  );
  // Privacy: buckets, every kind of assignment, a default; friends (accepted, pending).
  const bucket = (await api.POST('/api/v1/privacy-buckets', { body: { name: 'Close' } })).data!._id;
  const presets = (await api.GET('/api/v1/privacy-buckets')).data!;
  const everyone = presets.find((p) => p._id !== bucket)!._id;
  const assign = async (path: string, id: Record<string, string>) =>
    ok(await api.PUT(path as never, { params: { path: id }, body: { bucketIds: [bucket, everyone] } } as never), path);
  await assign('/api/v1/privacy-buckets/assignments/members/{memberId}', { memberId: a });
  await assign('/api/v1/privacy-buckets/assignments/members/{memberId}', { memberId: b });
  await assign('/api/v1/privacy-buckets/assignments/groups/{groupId}', { groupId: group });
  await assign('/api/v1/privacy-buckets/assignments/directories/{directoryId}', { directoryId: folder });
  await assign('/api/v1/privacy-buckets/assignments/custom-fields/{fieldDefinitionId}', { fieldDefinitionId: field });
  await assign('/api/v1/privacy-buckets/assignments/profile-sections/{memberId}/{sectionKey}', {
    memberId: a,
    sectionKey: 'avatar',
  });
  await assign('/api/v1/privacy-buckets/assignments/side-systems/{sideSystemId}', { sideSystemId: second });
  await assign('/api/v1/privacy-buckets/assignments/sub-systems/{subSystemId}', { subSystemId: sub });
  ok(
    await api.PUT('/api/v1/member-statuses/{definitionId}/privacy-buckets', {
      params: { path: { definitionId: status } },
      body: { bucketIds: [bucket] },
    }),
    'status buckets',
  );
  ok(
    await api.PUT('/api/v1/privacy-buckets/defaults/{kind}', {
      params: { path: { kind: 'new_member' } },
      body: { bucketIds: [bucket] },
    }),
    'defaults',
  );
  await befriend(user, peer);
  await assign('/api/v1/privacy-buckets/assignments/friends/{friendUserId}', { friendUserId: peer.userId });
  ok(
    await api.POST('/api/v1/friends/{friendUserId}/request', { params: { path: { friendUserId: peer2.userId } } }),
    'pending request',
  );
  // Terminology.
  ok(await api.PATCH('/api/v1/terminology', { body: { member: { singular: 'Headmate' } } }), 'terminology');
  ok(
    await api.PATCH('/api/v1/terminology/scoped', {
      body: { sideSystemId: second, terms: { member: { singular: 'Alter' } } },
    }),
    'override',
  );
  // Messaging: a space with an icon, a category, channels, messages (a reply, a mention, an edit, a
  // deleted one, an attachment, a link preview), a pin, a read marker and the preferences.
  const iconIntent = (
    await api.POST('/api/v1/messaging/spaces/icon/upload-intent', {
      body: { contentType: 'image/png', byteSize: PNG.length },
    })
  ).data!;
  await upload(iconIntent.upload.url, iconIntent.upload.headers, PNG);
  ok(await api.POST('/api/v1/messaging/spaces/icon/complete', { body: { stagingId: iconIntent.stagingId } }), 'icon');
  const space = (
    await api.POST('/api/v1/messaging/spaces', {
      body: { name: 'Home', iconStagingId: iconIntent.stagingId, sideSystemId: main },
    })
  ).data!.id;
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
  const other = (
    await api.POST('/api/v1/messaging/spaces/{spaceId}/channels', {
      params: { path: { spaceId: space } },
      body: { name: 'media', channelType: 'media' } as never,
    })
  ).data!.id;
  const send = async (body: Record<string, unknown>, channelId = channel) => {
    const res = await api.POST('/api/v1/messaging/channels/{channelId}/messages', {
      params: { path: { channelId } },
      body: { memberId: a, ...body } as never,
    });
    ok(res, 'message');
    return res.data!.id;
  };
  const first = await send({ content: 'hello', clientMutationId: 'm-1' });
  await send({ content: `hi <@${b}>`, replyToMessageId: first });
  const edited = await send({ content: 'typo' });
  ok(
    await api.PATCH('/api/v1/messaging/messages/{messageId}', {
      params: { path: { messageId: edited } },
      body: { content: 'fixed' },
    }),
    'edit',
  );
  const gone = await send({ content: 'oops' });
  ok(
    await api.DELETE('/api/v1/messaging/messages/{messageId}', { params: { path: { messageId: gone } } }),
    'delete message',
  );
  for (let i = 0; i < 4; i++) await send({ content: `more ${i}` }, other);
  const intent = (
    await api.POST('/api/v1/messaging/attachments/upload-intent', {
      body: {
        channelId: channel,
        fileName: 'a.png',
        contentType: 'image/png',
        byteSize: PNG.length,
        width: 1,
        height: 1,
      },
    })
  ).data!;
  await upload(intent.upload.url, intent.upload.headers, PNG);
  ok(await api.POST('/api/v1/messaging/attachments/complete', { body: { stagingId: intent.stagingId } }), 'complete');
  await send({ content: 'a picture', stagedAttachmentIds: [intent.stagingId] });
  await send({ content: `see ${images.url('/p')}` });
  await server.runtime.jobs.runDue();
  ok(
    await api.POST('/api/v1/messaging/channels/{channelId}/pins', {
      params: { path: { channelId: channel } },
      body: { messageId: first },
    }),
    'pin',
  );
  ok(
    await api.POST('/api/v1/messaging/channels/{channelId}/read', {
      params: { path: { channelId: channel } },
      body: { lastReadMessageId: edited },
    }),
    'read',
  );
  ok(await api.PUT('/api/v1/messaging/preferences/chat-as', { body: { spaceId: space, memberId: b } }), 'chat as');
  ok(
    await api.PUT('/api/v1/messaging/preferences/chat-as', { body: { spaceId: space, channelId: other, memberId: a } }),
    'chat as channel',
  );
  ok(
    await api.PUT('/api/v1/messaging/preferences/last-viewed-route', {
      body: { lastSpaceId: space, lastChannelId: channel },
    }),
    'last viewed',
  );
  ok(
    await api.PUT('/api/v1/messaging/preferences/emoji', {
      body: { version: 1, skinTone: 'medium', recent: ['🌿'], favorites: ['✨'] },
    }),
    'emoji',
  );
  ok(
    await api.PUT('/api/v1/messaging/preferences/gif', {
      body: { version: 1, contentFilter: 'high', locale: 'de_DE', autoplay: false },
    }),
    'gif',
  );
  // Social: theme, a link, a badge from the gallery, a guestbook (the owner's and a friend's
  // messages, a reply) and a poll (a friend's ballot).
  ok(await api.PATCH('/api/v1/social', { body: { theme: { accentColor: '#7A5CFA' } } }), 'social');
  ok(
    await api.POST('/api/v1/social/links', {
      body: { platform: 'github', displayName: 'Code', visibility: 'public' } as never,
    }),
    'link',
  );
  const badge = await addGalleryImage(server, user, uniqueImage(1));
  await addGalleryImage(server, user, uniqueImage(2, 'image/gif'), 'image/gif');
  ok(
    await api.POST('/api/v1/social/widgets', {
      body: {
        type: 'custom_badge',
        config: { kind: 'custom_badge', imageUrls: [badge] },
        visibility: 'public',
        size: 'small',
      } as never,
    }),
    'badge',
  );
  const guestbook = (
    await api.POST('/api/v1/social/widgets', {
      body: { type: 'guestbook', config: { kind: 'guestbook' }, visibility: 'public', size: 'small' } as never,
    })
  ).data!.widgetId;
  const own = await api.POST('/api/v1/social/widgets/{widgetId}/guestbook', {
    params: { path: { widgetId: guestbook } },
    body: { body: 'welcome' } as never,
  });
  ok(own, 'guestbook');
  ok(
    await peer.api.POST('/api/v1/friends/{friendUserId}/social/widgets/{widgetId}/guestbook', {
      params: { path: { friendUserId: user.userId, widgetId: guestbook } },
      body: { body: 'hi from a friend' } as never,
    }),
    'friend guestbook',
  );
  ok(
    await api.POST('/api/v1/social/widgets/{widgetId}/guestbook', {
      params: { path: { widgetId: guestbook } },
      body: { body: 'thanks', parentMessageId: own.data!.id } as never,
    }),
    'reply',
  );
  const poll = (
    await api.POST('/api/v1/social/widgets', {
      body: {
        type: 'poll',
        config: { kind: 'poll', question: 'Tea?', options: ['yes', 'no'] },
        visibility: 'public',
        size: 'small',
      } as never,
    })
  ).data!.widgetId;
  ok(
    await api.POST('/api/v1/social/widgets/{widgetId}/poll', {
      params: { path: { widgetId: poll } },
      body: { optionIndices: [0] },
    }),
    'ballot',
  );
  ok(
    await peer.api.POST('/api/v1/friends/{friendUserId}/social/widgets/{widgetId}/poll', {
      params: { path: { friendUserId: user.userId, widgetId: poll } },
      body: { optionIndices: [1] },
    }),
    'friend ballot',
  );
}

// ---- Walking the owner read routes ----

type Spec = {
  paths: Record<string, Record<string, { operationId?: string; security?: Array<Record<string, string[]>> }>>;
  components: { schemas: Record<string, { enum?: string[] }> };
};
const spec: Spec = (await import('../generated/openapi.json', { with: { type: 'json' } })).default as never;

/** Owner reads left out of the comparison, and why (routes under /friends/{friendUserId}/ are all left out: they read another account). */
const EXCLUDED: Record<string, string> = {
  getMe: 'describes the calling key (id, name, scopes, rate limit) and the username, which no import changes',
  getFriendProfile: "another account's profile",
  listFriendSuggestions: "friends of friends: other accounts' friendships",
  searchFriendContent: "friends' content",
  getFriendSearchCatalog: "friends' content",
  searchFriendMembers: "friends' members",
  listAuditEvents: "the audit log is the server's record of what was done, not exported (each account has its own)",
  listImports: "the server's record of imports, not exported",
  getImport: "the server's record of imports, not exported",
  listExports: "the server's record of exports, not exported",
  getExport: "the server's record of exports, not exported",
  streamEvents: 'a stream of changes as they happen (the log of the last hours), not a read of the data',
  listWebhooks: "this server's delivery settings, with secrets that never leave it: not exported",
  getWebhook: "this server's delivery settings, with secrets that never leave it: not exported",
  listWebhookDeliveries: "the server's log of deliveries, not exported",
  searchMessagingGifs: "the GIF provider's catalogue, not account data",
  browseMessagingGifs: "the GIF provider's catalogue, not account data",
  listMessagingGifCategories: "the GIF provider's catalogue, not account data",
};

/** The source account's ids that path and query parameters take, gathered from its list routes. */
interface State {
  sides: string[];
  subs: string[];
  members: string[];
  groups: string[];
  folders: string[];
  fields: string[];
  statuses: string[];
  entries: string[];
  images: string[];
  spaces: string[];
  channels: string[];
  messages: Array<{ channelId: string; id: string; createdAt: number }>;
  attachments: string[];
  buckets: string[];
  friends: string[];
  guestbooks: string[];
  polls: string[];
  gallery: string[];
}

async function stateOf(api: ApiClient): Promise<State> {
  const systems = (await api.GET('/api/v1/systems')).data!;
  const trash = (await api.GET('/api/v1/trash')).data!;
  const tree = (await api.GET('/api/v1/groups')).data!;
  const entries = (await api.GET('/api/v1/entries', { params: { query: { limit: 100 } } })).data!;
  const boot = (await api.GET('/api/v1/messaging/bootstrap')).data!;
  const messages: State['messages'] = [];
  const attachments: string[] = [];
  for (const channel of boot.channels) {
    const page = (
      await api.GET('/api/v1/messaging/channels/{channelId}/messages', {
        params: { path: { channelId: channel.id }, query: { limit: 150 } },
      })
    ).data!;
    for (const m of page.items) {
      messages.push({ channelId: channel.id, id: m.id, createdAt: m.createdAt });
      attachments.push(...m.attachments.map((x) => x.id));
    }
  }
  const social = (await api.GET('/api/v1/social')).data!;
  return {
    sides: systems.sideSystems.map((s) => s._id),
    subs: systems.subSystems.map((s) => s._id),
    members: [
      ...new Set([
        ...(await api.GET('/api/v1/members')).data!.map((m) => m._id),
        ...(
          await Promise.all(
            systems.sideSystems.map(
              async (side) =>
                (
                  await api.GET('/api/v1/members', { params: { query: { sideSystemId: side._id } } })
                ).data!,
            ),
          )
        ).flatMap((list) => list.map((m) => m._id)),
        ...trash.filter((t) => t.type === 'member').map((t) => t.id),
      ]),
    ],
    groups: tree.groups.map((g) => g._id),
    folders: tree.folders.map((f) => f._id),
    fields: (await api.GET('/api/v1/custom-fields')).data!.map((f) => f._id),
    statuses: (await api.GET('/api/v1/member-statuses')).data!.map((s) => s._id),
    entries: entries.map((e) => e._id),
    images: entries.flatMap((e) => [...e.content.matchAll(/entry-images\/([0-9a-f]{64})/g)].map((m) => m[1]!)),
    spaces: boot.spaces.map((s) => s.id),
    channels: boot.channels.map((c) => c.id),
    messages,
    attachments,
    buckets: (await api.GET('/api/v1/privacy-buckets')).data!.map((b) => b._id),
    friends: (await api.GET('/api/v1/friends')).data!.map((f) => f.friendUserId),
    guestbooks: social.widgets.filter((w) => w.type === 'guestbook').map((w) => w.id),
    polls: social.widgets.filter((w) => w.type === 'poll').map((w) => w.id),
    gallery: (await api.GET('/api/v1/social/gallery', { params: { query: { limit: 100 } } })).data!.items.map(
      (i) => i.sha256,
    ),
  };
}

type Params = { path?: Record<string, string>; query?: Record<string, string | number> };
const once = (): Params[] => [{}];
const each = (name: string, ids: string[]): Params[] => ids.map((id) => ({ path: { [name]: id } }));
const enumOf = (schema: string) => spec.components.schemas[schema]!.enum!;

/** The calls of each owner read route: its path and query parameters. */
const CALLS: Record<string, (s: State) => Params[]> = {
  listFriends: once,
  listFriendsPage: () => [{ query: { limit: 1 } }],
  listFriendRequests: once,
  getFriendsProfile: once,
  getAppearance: once,
  listCustomColorSchemes: once,
  listCustomFonts: once,
  getSystems: once,
  listAssignableMembers: (s) => each('sideSystemId', s.sides),
  listMembers: (s) => [{}, ...s.sides.map((id) => ({ query: { sideSystemId: id } }))],
  listMembersPage: (s) => [
    { query: { limit: 2 } },
    ...s.sides.map((id) => ({ query: { limit: 2, sideSystemId: id } })),
  ],
  getMember: (s) => each('memberId', s.members),
  getMemberMedia: (s) =>
    s.members.flatMap((id) => ['avatar', 'banner'].map((kind) => ({ path: { memberId: id }, query: { kind } }))),
  getGroupTree: (s) => [{}, ...s.sides.map((id) => ({ query: { sideSystemId: id } }))],
  listDirectoryLayouts: (s) => [{}, ...s.folders.map((id) => ({ query: { directoryId: id } }))],
  listCustomFields: once,
  getMemberCustomFields: (s) => each('memberId', s.members),
  listMemberStatuses: once,
  listMemberStatusAssignments: (s) => each('memberId', s.members),
  getMemberStatusPrivacyBuckets: (s) => each('definitionId', s.statuses),
  listEntries: (s) => [{ query: { limit: 100 } }, ...s.members.map((id) => ({ query: { memberId: id } }))],
  getEntry: (s) => each('entryId', s.entries),
  getEntryImage: (s) => each('imageId', s.images),
  getMessagingBootstrap: once,
  listMessagingSpaces: once,
  listMessagingCategories: (s) => each('spaceId', s.spaces),
  listMessagingChannels: (s) => each('spaceId', s.spaces),
  listMessages: (s) => s.channels.map((id) => ({ path: { channelId: id }, query: { limit: 2 } })),
  listNewerMessages: (s) =>
    s.channels.flatMap((channelId) => {
      const oldest = s.messages.filter((m) => m.channelId === channelId).at(-1);
      return oldest
        ? [{ path: { channelId }, query: { limit: 2, afterCreatedAt: oldest.createdAt, afterId: oldest.id } }]
        : [];
    }),
  listMessagesAround: (s) =>
    s.messages.map((m) => ({
      path: { channelId: m.channelId },
      query: { anchorMessageId: m.id, beforeLimit: 1, afterLimit: 1 },
    })),
  listMessagingPins: (s) => each('channelId', s.channels),
  getMessagingAttachmentAccessUrl: (s) => each('attachmentId', s.attachments),
  listMessagingMentionables: (s) => s.channels.map((id) => ({ query: { channelId: id } })),
  getMessagingChatAs: (s) =>
    s.spaces.flatMap((spaceId) => [
      { query: { spaceId } },
      ...s.channels.map((channelId) => ({ query: { spaceId, channelId } })),
    ]),
  listMessagingChatAsMembers: once,
  getMessagingLastViewedRoute: once,
  getMessagingEmojiPreferences: once,
  getMessagingGifPreferences: once,
  listTrash: once,
  getTrashSettings: once,
  getTerminology: once,
  getResolvedTerminology: (s) => [{}, ...s.sides.map((id) => ({ query: { sideSystemId: id } }))],
  getFront: once,
  getFrontHistory: () => [{ query: { limit: 2 } }],
  listFrontTiers: once,
  listPrivacyBuckets: once,
  getPrivacyBucket: (s) => each('bucketId', s.buckets),
  getPrivacyBucketDefaults: () => enumOf('DefaultKind').map((kind) => ({ path: { kind } })),
  listPrivacyBucketMembers: (s) => each('bucketId', s.buckets),
  listPrivacyBucketGroups: (s) => each('bucketId', s.buckets),
  listPrivacyBucketDirectories: (s) => each('bucketId', s.buckets),
  getMemberPrivacyBuckets: (s) => each('memberId', s.members),
  getFriendPrivacyBuckets: (s) => each('friendUserId', s.friends),
  getGroupPrivacyBuckets: (s) => each('groupId', s.groups),
  getDirectoryPrivacyBuckets: (s) => each('directoryId', [...s.folders, ...s.groups]),
  getCustomFieldPrivacyBuckets: (s) => each('fieldDefinitionId', s.fields),
  getProfileSectionPrivacyBuckets: (s) =>
    s.members.flatMap((memberId) =>
      enumOf('ProfileSectionKey').map((sectionKey) => ({ path: { memberId, sectionKey } })),
    ),
  getSideSystemPrivacyBuckets: (s) => each('sideSystemId', s.sides),
  getSubSystemPrivacyBuckets: (s) => each('subSystemId', s.subs),
  getSocial: once,
  listSocialGallery: () => [{ query: { limit: 1 } }],
  getSocialGalleryImage: (s) => each('sha256', s.gallery),
  listGuestbookMessages: (s) => s.guestbooks.map((id) => ({ path: { widgetId: id }, query: { limit: 1 } })),
  getPoll: (s) => each('widgetId', s.polls),
};

/** The next page's query from a page, for the routes that page. */
function nextQuery(
  op: string,
  body: unknown,
  query: Record<string, string | number>,
): Record<string, string | number> | null {
  const cursor = (body as { nextCursor?: unknown } | null)?.nextCursor;
  if (cursor === null || cursor === undefined) return null;
  if (typeof cursor === 'string' || typeof cursor === 'number') return { ...query, cursor };
  const c = cursor as Record<string, string | number>;
  if (op === 'getFrontHistory') return { ...query, cursorStartedAt: c.startedAt!, cursorId: c.id! };
  return { ...query, ...c };
}

/** Every GET of the contract under /api/v1 with an API key that reads the owner's own data. */
function ownerReads(): string[] {
  const ops: string[] = [];
  for (const [path, item] of Object.entries(spec.paths))
    for (const [method, op] of Object.entries(item)) {
      if (method !== 'get' || !path.startsWith('/api/v1/') || path.includes('/friends/{friendUserId}/')) continue;
      if (!(op.security ?? []).some((s) => 'apiKey' in s) || EXCLUDED[op.operationId!]) continue;
      ops.push(op.operationId!);
    }
  return ops;
}

function pathOf(op: string): string {
  for (const [path, item] of Object.entries(spec.paths)) if (item.get?.operationId === op) return path;
  throw new Error(op);
}

interface Answer {
  call: string;
  status: number;
  type: string | null;
  body: unknown;
}

/** Calls one route (and its following pages) as `user`, with the ids mapped by `map`. */
async function read(user: TestUser, op: string, params: Params, map: (id: string) => string): Promise<Answer[]> {
  const answers: Answer[] = [];
  let query: Record<string, string | number> | null = Object.fromEntries(
    Object.entries(params.query ?? {}).map(([k, v]) => [k, typeof v === 'string' ? map(v) : v]),
  );
  let path = pathOf(op);
  for (const [name, value] of Object.entries(params.path ?? {})) path = path.replace(`{${name}}`, map(value));
  while (query) {
    const qs = new URLSearchParams(Object.entries(query).map(([k, v]) => [k, String(v)])).toString();
    const res = await server.fetch(`${path}${qs ? `?${qs}` : ''}`, { headers: bearer(user.apiKey) });
    const type = res.headers.get('content-type');
    const body = type?.startsWith('application/json')
      ? await res.json()
      : Buffer.from(await res.arrayBuffer()).toString('base64');
    answers.push({ call: `${op} ${JSON.stringify(params)}`, status: res.status, type, body });
    query = res.status === 200 ? nextQuery(op, body, query) : null;
    if (answers.length > 50) throw new Error(`${op}: more than 50 pages`);
  }
  return answers;
}

const UUIDS = /[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/gi;
const STORAGE_URL = /^(?:https?:\/\/[^/]+)?\/storage\/v1\/objects\/[^?]+/;

/**
 * A body as the copy should show it: every id of the source replaced by the copy's, presigned URLs
 * without their signature (fetched separately and compared byte for byte), opaque cursors reduced
 * to whether there is one, and lists of ids sorted (their order follows the ids).
 */
function normalize(value: unknown, map: (text: string, key?: string) => string, urls: string[], key = ''): unknown {
  if (typeof value === 'string') {
    if (/cursor/i.test(key)) return 'cursor';
    const signed = STORAGE_URL.exec(value);
    if (signed) {
      urls.push(value);
      return map(signed[0]);
    }
    return map(value, key);
  }
  if (Array.isArray(value)) {
    const items = value.map((v) => normalize(v, map, urls));
    return items.every((v) => typeof v === 'string' && /^[0-9a-f-]{36}$/.test(v)) ? [...items].sort() : items;
  }
  if (value !== null && typeof value === 'object') {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) {
      // An access URL's expiry counts from the read.
      out[map(k)] = k === 'expiresAt' && 'url' in value ? 'expires' : normalize(v, map, urls, k);
    }
    return out;
  }
  return value;
}

async function bytesAt(url: string): Promise<string> {
  const res = await fetch(url.startsWith('http') ? url : server.baseUrl + url);
  expect(res.status, url).toBe(200);
  return createHash('sha256')
    .update(Buffer.from(await res.arrayBuffer()))
    .digest('hex');
}

// ---- Exports and imports through the API ----

async function exportOf(user: TestUser): Promise<Export> {
  const res = await server.fetch('/api/v1/exports', { method: 'POST', headers: bearer(user.apiKey) });
  expect(res.status).toBe(202);
  const accepted = (await res.json()) as { id: string; status: string };
  expect(accepted.status).toBe('queued');
  expect(res.headers.get('location')).toBe(`/api/v1/exports/${accepted.id}`);
  await server.runtime.jobs.runDue();
  const { data } = await user.api.GET('/api/v1/exports/{exportId}', { params: { path: { exportId: accepted.id } } });
  return data!;
}

async function download(done: Export): Promise<Buffer> {
  expect(done.status, done.error ?? '').toBe('succeeded');
  const res = await fetch(server.baseUrl + done.downloadUrl!);
  expect(res.status).toBe(200);
  expect(res.headers.get('content-type')).toBe('application/x-tar');
  const archive = Buffer.from(await res.arrayBuffer());
  expect(archive.length).toBe(done.sizeBytes);
  return archive;
}

async function importArchive(user: TestUser, archive: Buffer, query = ''): Promise<Import> {
  const res = await server.fetch(`/api/v1/imports?source=native${query}`, {
    method: 'POST',
    headers: { ...bearer(user.apiKey), 'Content-Type': 'application/x-tar' },
    body: new Uint8Array(archive),
  });
  expect(res.status, await res.clone().text()).toBe(202);
  const { id } = (await res.json()) as { id: string };
  await server.runtime.jobs.runDue();
  const { data } = await user.api.GET('/api/v1/imports/{importId}', { params: { path: { importId: id } } });
  expect(['succeeded', 'failed']).toContain(data!.status);
  return data!;
}

/** The archive's entries: name → bytes. */
async function entriesOf(archive: Buffer): Promise<Map<string, Buffer>> {
  const out = new Map<string, Buffer>();
  for await (const entry of readTar(Readable.from([archive]))) {
    const chunks: Buffer[] = [];
    for await (const chunk of entry.chunks()) chunks.push(chunk);
    out.set(entry.path, Buffer.concat(chunks));
  }
  return out;
}

/** An archive of these entries, in this order. */
function archiveOf(entries: Map<string, Buffer>): Promise<Buffer> {
  const list = [...entries].map(([name, bytes]) => ({ name, size: bytes.length, open: () => Readable.from([bytes]) }));
  return streamToBuffer(tarStream(list, 0));
}

async function streamToBuffer(stream: AsyncIterable<unknown>): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

const knex = () => server.deps.db.knex;

/** Every row the account has in the exported tables, and its objects: what a failed import must leave alone. */
async function footprint(user: TestUser): Promise<unknown> {
  const rows: Record<string, number> = {};
  for (const t of EXPORTED_TABLES)
    rows[t.name] = Number((await knex()(t.name).where(t.owner, user.userId).count({ n: '*' }))[0]!.n);
  return {
    rows,
    objects: (await server.deps.storage!.list(`u/${user.userId}/`)).filter((k) => !k.includes('/imports/')),
  };
}

const zero = { created: 0, updated: 0, unchanged: 0, skipped: 0, failed: 0 };

describe('the native export and import', () => {
  let source: TestUser;
  let peer: TestUser;
  let archive: Buffer;
  let exported: Export;

  beforeAll(async () => {
    source = await server.user();
    peer = await server.user();
    const peer2 = await server.user();
    await populate(source, peer, peer2);
    // Reads create a few rows on first use (the built-in buckets): read once before the export.
    await stateOf(source.api);
    exported = await exportOf(source);
    archive = await download(exported);
  }, 60_000);

  it('writes a tar of the manifest, one JSON Lines part per table, the media index and the objects', async () => {
    const entries = await entriesOf(archive);
    const names = [...entries.keys()];
    expect(names.slice(0, 2)).toEqual(['manifest.json', 'media.jsonl']);
    const manifest = JSON.parse(entries.get('manifest.json')!.toString('utf8'));
    expect(manifest).toEqual(exported.manifest);
    expect(manifest).toMatchObject({ format: 'account-data-export', version: 1, accountId: source.userId });
    expect(manifest.parts.map((p: { path: string }) => p.path)).toEqual([
      ...EXPORTED_TABLES.map((t) => `data/${t.name}.jsonl`),
      'media.jsonl',
    ]);
    for (const part of manifest.parts) {
      const bytes = entries.get(part.path)!;
      expect(createHash('sha256').update(bytes).digest('hex'), part.path).toBe(part.sha256);
      expect(bytes.toString('utf8').split('\n').length - 1, part.path).toBe(part.rows);
    }
    const rows = (table: string) =>
      entries
        .get(`data/${table}.jsonl`)!
        .toString('utf8')
        .split('\n')
        .filter(Boolean)
        .map((l) => JSON.parse(l) as Record<string, unknown>);
    // Every exported table this account reaches through the API has rows.
    for (const t of EXPORTED_TABLES.filter((t) => t.name !== 'social_identities'))
      expect(rows(t.name).length, t.name).toBeGreaterThan(0);
    // Messages in clear, keys without their secret, only the account's own side of its friendships.
    expect(rows('messaging_messages').map((m) => m.content)).toContain('fixed');
    expect(rows('messaging_messages')[0]).not.toHaveProperty('content_enc');
    expect(rows('messaging_link_previews')[0]!.data).toMatchObject({ title: 'Page' });
    expect(rows('api_keys')[0]).not.toHaveProperty('key_hash');
    expect(rows('api_keys')[0]).not.toHaveProperty('key_prefix');
    expect(new Set(rows('friendships').map((f) => f.user_id))).toEqual(new Set([source.userId]));
    // One media entry per object the rows name, each as media.jsonl describes it.
    const media = entries
      .get('media.jsonl')!
      .toString('utf8')
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l) as { key: string; sha256: string; bytes: number });
    expect(media.length).toBe(manifest.media.objects);
    expect(manifest.media.missing).toBe(0);
    const folders = new Set(
      media.map((m) =>
        m.key
          .split('/')
          .slice(2, 4)
          .join('/')
          .replace(/\/[0-9a-f-]{36}$/, ''),
      ),
    );
    for (const folder of [
      'members',
      'entry-images',
      'social-gallery',
      'messaging/attachments',
      'messaging/space-icons',
      'messaging/link-previews',
    ])
      expect(
        [...folders].some((f) => f.startsWith(folder)),
        folder,
      ).toBe(true);
    for (const m of media) {
      const bytes = entries.get(`media/${m.key}`)!;
      expect(createHash('sha256').update(bytes).digest('hex')).toBe(m.sha256);
      expect(bytes.length).toBe(m.bytes);
    }
    expect(names.length).toBe(2 + EXPORTED_TABLES.length + media.length);
  });

  it('imported into a new account, reproduces every owner read route, ids mapped, objects byte for byte', async () => {
    const copy = await server.user();
    const result = await importArchive(copy, archive);
    expect(result.status, result.error ?? '').toBe('succeeded');
    expect(result.report.members).toEqual({ ...zero, created: 6 });
    expect(result.report.api_keys).toEqual({ ...zero, skipped: 1 });
    expect(result.report.media!.created).toBe(exported.manifest!.media.objects);
    expect(result.progress).toEqual({ done: result.progress.total, total: result.progress.total });

    // The ids the import gave: its refs, and the account itself.
    const refs: Array<{ source_id: string; local_id: string }> = await knex()('import_refs')
      .where({ user_id: copy.userId, source: 'native' })
      .select('source_id', 'local_id');
    const ids = new Map(refs.map((r) => [r.source_id, r.local_id]));
    expect(ids.get(source.userId)).toBe(copy.userId);
    // A space icon's reference is the upload it came from, not a row: the copy's icon is its own
    // object under a new reference (its bytes are compared below).
    const copySpaces = (await copy.api.GET('/api/v1/messaging/spaces')).data!;
    for (const space of (await source.api.GET('/api/v1/messaging/spaces')).data!) {
      const copied = copySpaces.find((s) => s.id === ids.get(space.id))!;
      expect(copied.iconStorageRef).not.toBe(space.iconStorageRef);
      if (space.iconStorageRef) ids.set(space.iconStorageRef, copied.iconStorageRef!);
    }
    // The username is the account's, not its data: an import never changes it.
    const map = (text: string, key?: string) =>
      key === 'username' && text === source.username
        ? copy.username
        : text.replace(UUIDS, (id) => ids.get(id.toLowerCase()) ?? id);

    const state = await stateOf(source.api);
    const routes = ownerReads();
    expect(
      routes.filter((op) => !CALLS[op]),
      'owner read routes without calls',
    ).toEqual([]);
    let compared = 0;
    for (const op of routes) {
      for (const params of CALLS[op]!(state)) {
        const [before, after] = await Promise.all([read(source, op, params, (id) => id), read(copy, op, params, map)]);
        expect(after.length, before[0]!.call).toBe(before.length);
        for (const [i, answer] of before.entries()) {
          const sourceUrls: string[] = [];
          const copyUrls: string[] = [];
          const { call, ...sourceAnswer } = answer;
          const { call: _, ...copyAnswer } = after[i]!;
          expect(
            normalize(copyAnswer, (t) => t, copyUrls),
            call,
          ).toEqual(normalize(sourceAnswer, map, sourceUrls));
          for (const [k, url] of sourceUrls.entries())
            expect(await bytesAt(copyUrls[k]!), url).toBe(await bytesAt(url));
          if (answer.status === 200) compared++;
        }
      }
    }
    expect(compared, 'answers compared').toBeGreaterThan(150);

    // The same archive again: every row is found as it is, nothing is written.
    const before = await footprint(copy);
    const again = await importArchive(copy, archive);
    expect(again.status, again.error ?? '').toBe('succeeded');
    for (const [table, counts] of Object.entries(result.report)) {
      const expected =
        counts.skipped > 0 ? counts : { ...zero, unchanged: counts.created + counts.updated + counts.unchanged };
      expect(again.report[table], table).toEqual(expected);
    }
    expect(again.warnings).toEqual(result.warnings);
    expect(await footprint(copy)).toEqual(before);

    // An edited archive (its manifest made to match) updates what changed, in place.
    const entries = await entriesOf(archive);
    const members = Buffer.from(entries.get('data/members.jsonl')!.toString('utf8').replace('"Birch"', '"Birch B."'));
    const manifest = JSON.parse(entries.get('manifest.json')!.toString('utf8'));
    const part = manifest.parts.find((p: { path: string }) => p.path === 'data/members.jsonl');
    Object.assign(part, { bytes: members.length, sha256: createHash('sha256').update(members).digest('hex') });
    entries.set('manifest.json', Buffer.from(JSON.stringify(manifest)));
    entries.set('data/members.jsonl', members);
    const edited = await importArchive(copy, await archiveOf(entries));
    expect(edited.status, edited.error ?? '').toBe('succeeded');
    expect(edited.report.members).toEqual({ ...zero, updated: 1, unchanged: 5 });
    const names = (await copy.api.GET('/api/v1/members')).data!.map((m) => m.name);
    expect(names).toContain('Birch B.');
    expect(names).not.toContain('Birch');
  }, 60_000);

  it('a dry run reports what the import would do and writes nothing', async () => {
    const copy = await server.user();
    const before = await footprint(copy);
    const dry = await importArchive(copy, archive, '&dryRun=true');
    expect(dry.status, dry.error ?? '').toBe('succeeded');
    expect(dry.dryRun).toBe(true);
    expect(dry.report.members).toEqual({ ...zero, created: 6 });
    expect(await footprint(copy)).toEqual(before);
  });

  it('fails an archive whose part does not match its manifest, or that was cut short, with the reason, writing nothing', async () => {
    const copy = await server.user();
    const before = await footprint(copy);
    const entries = await entriesOf(archive);
    const members = entries.get('data/members.jsonl')!;
    const altered = new Map(entries);
    altered.set('data/members.jsonl', Buffer.from(members.toString('utf8').replace('Aster', 'Astra'), 'utf8'));
    const damaged = await importArchive(copy, await archiveOf(altered));
    expect(damaged.status).toBe('failed');
    expect(damaged.error).toBe(
      'data/members.jsonl: its SHA-256 does not match the manifest (the archive is damaged or was changed)',
    );
    const media = [...entries.keys()].find((name) => name.startsWith('media/'))!;
    const flipped = new Map(entries);
    flipped.set(media, Buffer.concat([entries.get(media)!.subarray(0, -1), Buffer.from([0])]));
    const badObject = await importArchive(copy, await archiveOf(flipped));
    expect(badObject.status).toBe('failed');
    expect(badObject.error).toBe(
      `${media}: its SHA-256 does not match media.jsonl (the archive is damaged or was changed)`,
    );
    const cut = await importArchive(copy, archive.subarray(0, Math.floor(archive.length / 2)));
    expect(cut.status).toBe('failed');
    expect(cut.error).toBe('The archive ends early: it is incomplete');
    const unlisted = new Map(entries);
    unlisted.set('data/members.jsonl', members);
    unlisted.delete('manifest.json');
    const noManifest = await importArchive(copy, await archiveOf(unlisted));
    expect(noManifest.error).toBe('The archive has no manifest.json: it is not a native export');
    expect(await footprint(copy)).toEqual(before);
    // Not a tar at all: refused at the door.
    const res = await server.fetch('/api/v1/imports?source=native', {
      method: 'POST',
      headers: { ...bearer(copy.apiKey), 'Content-Type': 'application/x-tar' },
      body: JSON.stringify({ members: [] }),
    });
    expect(res.status).toBe(400);
    expect(await res.json()).toEqual({
      code: 'BAD_REQUEST',
      message: `The file is not a tar archive (it is shorter than one 512-byte tar block): send the export archive unchanged`,
    });
  });

  it('lists the account’s exports, and hides them from other accounts', async () => {
    const { data } = await source.api.GET('/api/v1/exports', { params: { query: { limit: 1 } } });
    expect(data!.items.map((e) => e.id)).toEqual([exported.id]);
    expect(data!.items[0]!.downloadUrl).not.toBeNull();
    const other = await server.user();
    expect((await other.api.GET('/api/v1/exports')).data!.items).toEqual([]);
    const hidden = await other.api.GET('/api/v1/exports/{exportId}', { params: { path: { exportId: exported.id } } });
    expect(hidden.response.status).toBe(404);
  });
});

describe('expiry', () => {
  it('stops handing out the archive once it expired, and storage garbage collection deletes it', async () => {
    const user = await server.user();
    await createMember(user.api, 'Solo');
    const done = await exportOf(user);
    expect(done.expiresAt).toBe(done.finishedAt! + 2 * 3_600_000);
    const key = `u/${user.userId}/exports/${done.id}.tar`;
    expect(await server.deps.storage!.head(key)).not.toBeNull();
    const gc = () =>
      collectGarbage({
        db: knex(),
        storage: server.deps.storage!,
        now: clock(),
        log: createLogger('silent'),
        graceMs: 3_600_000,
      });
    expect((await gc()).expiredExports).toBe(0);
    offset += 2 * 3_600_000 + 1000;
    const expired = (await user.api.GET('/api/v1/exports/{exportId}', { params: { path: { exportId: done.id } } }))
      .data!;
    expect(expired.status).toBe('succeeded');
    expect(expired.downloadUrl).toBeNull();
    // This export's archive, and those of the exports made before it in this file.
    expect((await gc()).expiredExports).toBeGreaterThanOrEqual(1);
    expect(await server.deps.storage!.head(key)).toBeNull();
    expect((await gc()).expiredExports).toBe(0);
  });
});

describe('scopes', () => {
  it('an export needs read on all sixteen scopes, and names the first one missing', async () => {
    for (const missing of ['members', 'messaging', 'poll'] as const) {
      const scopes = Object.fromEntries(SCOPES.filter((s) => s !== missing).map((s) => [s, 'read']));
      const user = await server.user({ scopes });
      for (const res of [
        await server.fetch('/api/v1/exports', { method: 'POST', headers: bearer(user.apiKey) }),
        await server.fetch('/api/v1/exports', { headers: bearer(user.apiKey) }),
      ]) {
        expect(res.status).toBe(403);
        expect(await res.json()).toEqual({
          code: 'FORBIDDEN',
          message: `Missing API key scope: ${missing} requires read`,
        });
      }
    }
    const reader = await server.user({ scopes: Object.fromEntries(SCOPES.map((s) => [s, 'read'])) });
    expect((await server.fetch('/api/v1/exports', { method: 'POST', headers: bearer(reader.apiKey) })).status).toBe(
      202,
    );
    // Importing an archive writes everything: read_write on every scope.
    const writer = await server.user({ scopes: { ...ALL_SCOPES, social: 'read' } });
    const res = await server.fetch('/api/v1/imports?source=native', {
      method: 'POST',
      headers: { ...bearer(writer.apiKey), 'Content-Type': 'application/x-tar' },
      body: new Uint8Array(1024),
    });
    expect(res.status).toBe(403);
    expect(await res.json()).toEqual({
      code: 'FORBIDDEN',
      message: 'Missing API key scope: social requires read_write',
    });
  });
});

describe('the catalogue of tables', () => {
  it('classifies every table and column of the schema', async () => {
    const columns: Array<{ table_name: string; column_name: string }> = await knex()('information_schema.columns')
      .where({ table_schema: 'public' })
      .select('table_name', 'column_name');
    const schema = new Map<string, string[]>();
    for (const c of columns) schema.set(c.table_name, [...(schema.get(c.table_name) ?? []), c.column_name]);
    const classified = [...EXPORTED_TABLES.map((t) => t.name), ...DERIVED_TABLES, ...INTERNAL_TABLES];
    expect([...schema.keys()].sort()).toEqual([...classified].sort());
    for (const table of EXPORTED_TABLES)
      expect([...table.columns, ...(table.derived ?? [])].sort(), table.name).toEqual(schema.get(table.name)!.sort());
  });
});

describe('tar', () => {
  it('writes names longer than ustar holds in a pax header, and reads them back with their bytes', async () => {
    const long = `media/u/${'a'.repeat(120)}/${'b'.repeat(150)}`;
    const entries = [
      { name: 'short.txt', size: 3, open: () => Readable.from([Buffer.from('abc')]) },
      { name: long, size: 600, open: () => Readable.from([Buffer.alloc(600, 7)]) },
    ];
    const bytes = await streamToBuffer(tarStream(entries, 0));
    expect(bytes.length).toBe(TAR_END_BYTES + entries.reduce((n, e) => n + tarEntrySize(e), 0));
    const read = await entriesOf(bytes);
    expect([...read.keys()]).toEqual(['short.txt', long]);
    expect(read.get(long)).toEqual(Buffer.alloc(600, 7));
  });
});

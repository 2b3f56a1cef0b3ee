/**
 * Fixture mode (SEED_EXAMPLES=true, server/fixtures/): the data the contract's examples name, on an
 * empty database only. CI replays every example against it (npm run contract); these tests catch
 * what that run would not see cheaply: the refusal of a database that holds data, and that the
 * published keys and the ids the examples name are what gets written.
 */
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../server/config.ts';
import { backgroundContext } from '../server/context.ts';
import { ExamplesRefusedError, seedExamples } from '../server/fixtures/examples.ts';
import { IDS } from '../server/fixtures/ids.ts';
import { EXAMPLE_KEYS, EXAMPLE_STORAGE_SIGNING_KEY } from '../server/fixtures/keys.ts';
import { EXAMPLE_IMAGE } from '../server/fixtures/media.ts';
import { FilesystemObjectStorage, keyToUrlSegment } from '../server/storage/index.ts';
import { stagingKey } from '../server/storage/staging.ts';
import { useServer } from './helpers/server.ts';

const server = useServer();
const seedContext = () =>
  backgroundContext({ ...server.deps, db: server.deps.db.knex }, { kind: 'system', job: 'examples_seed' });

describe('fixture mode', () => {
  it('refuses a database that holds an account, and writes nothing', async () => {
    await server.createAccount({ username: 'already_here' });
    await expect(seedExamples(seedContext())).rejects.toBeInstanceOf(ExamplesRefusedError);
    const { data } = await server.admin.GET('/admin/v1/accounts');
    expect(data?.items.map((a) => a.username)).toEqual(['already_here']);
  });

  it('on an empty database, writes the examples’ account, keys and rows with the ids the contract names', async () => {
    // This file's database holds the account of the test above: empty it the way an operator would.
    const { data: accounts } = await server.admin.GET('/admin/v1/accounts');
    for (const account of accounts?.items ?? [])
      await server.admin.DELETE('/admin/v1/accounts/{userId}', { params: { path: { userId: account.userId } } });
    const seeded = await seedExamples(seedContext());
    expect(seeded.keys.map((k) => k.token)).toContain(EXAMPLE_KEYS.owner.token);
    const api = server.client(EXAMPLE_KEYS.owner.token);
    const me = await api.GET('/api/v1/me');
    expect(me.data).toMatchObject({
      userId: IDS.aurora,
      username: 'aurora_system',
      key: { id: EXAMPLE_KEYS.owner.id },
    });
    const robin = await api.GET('/api/v1/members/{memberId}', { params: { path: { memberId: IDS.robin } } });
    expect(robin.data).toMatchObject({ _id: IDS.robin, name: 'Robin', version: 3, sideSystemId: IDS.mainSideSystem });
    expect(robin.data?.avatarUrl).toMatch(/^\/api\/v1\/members\/.+\/media\?kind=avatar&v=/);
    // The chat the messaging examples name: the groceries channel, newest first, the milk message pinned.
    const page = await api.GET('/api/v1/messaging/channels/{channelId}/messages', {
      params: { path: { channelId: IDS.groceriesChannel } },
    });
    expect(page.data?.items.map((m) => m.id)).toEqual([
      IDS.recipeMessage,
      IDS.shoppingListMessage,
      IDS.replyMessage,
      IDS.milkMessage,
    ]);
    expect(page.data?.items[1]?.attachments.map((a) => a.id)).toEqual([IDS.sentAttachment]);
    expect(page.data?.pinnedMessageIds).toEqual([IDS.milkMessage]);
    // The ids the examples name that the fixture cannot choose itself: the first delivery, and the preview's.
    const deliveries = await api.GET('/api/v1/webhooks/{webhookId}/deliveries', {
      params: { path: { webhookId: IDS.webhook } },
    });
    // Newest first: Sam's update (1, right after the webhook was created), then Robin's avatar (media.ts).
    expect(deliveries.data?.items.map((d) => [d.id, d.type])).toEqual([
      ['2', 'member.updated'],
      ['1', 'member.updated'],
    ]);
    const dismissed = await api.POST('/api/v1/messaging/link-previews/{previewId}/dismiss', {
      params: { path: { previewId: IDS.recipePreview } },
    });
    expect(dismissed.response.status).toBe(204);
    const imported = await api.GET('/api/v1/imports/{importId}', {
      params: { path: { importId: IDS.pluralkitImport } },
    });
    expect(imported.data).toMatchObject({ source: 'pluralkit', dryRun: true });
    const exported = await api.GET('/api/v1/exports/{exportId}', { params: { path: { exportId: IDS.accountExport } } });
    expect(exported.response.status).toBe(200);
    // The social profile: its links and widgets, the guestbook thread with its reply, lantern's poll.
    const social = await api.GET('/api/v1/social');
    expect(social.data?.links.map((l) => l.id)).toEqual([IDS.blueskyLink, IDS.mastodonLink]);
    expect(social.data?.widgets.map((w) => w.id)).toEqual([IDS.statusWidget, IDS.guestbookWidget, IDS.pollWidget]);
    const guestbook = await api.GET('/api/v1/social/widgets/{widgetId}/guestbook', {
      params: { path: { widgetId: IDS.guestbookWidget } },
    });
    expect(guestbook.data?.threads.map((t) => [t.id, t.replies.map((r) => r.id)])).toEqual(
      expect.arrayContaining([
        [IDS.lanternGuestbookMessage, [IDS.auroraGuestbookReply]],
        [IDS.spamGuestbookMessage, []],
      ]),
    );
    const gallery = await api.GET('/api/v1/social/gallery');
    expect(gallery.data?.items.map((i) => i.sha256)).toEqual([IDS.exampleImage]);
    const friendPoll = await api.GET('/api/v1/friends/{friendUserId}/social/widgets/{widgetId}/poll', {
      params: { path: { friendUserId: IDS.lantern, widgetId: IDS.lanternPollWidget } },
    });
    expect(friendPoll.data?.question).toBe('Lamps or candles?');
    // The media: the example image as Robin's avatar, a re-hosted note image, and staged uploads.
    const avatar = await fetch(`${server.baseUrl}/api/v1/members/${IDS.robin}/media?kind=avatar`, {
      headers: { authorization: `Bearer ${EXAMPLE_KEYS.owner.token}` },
    });
    expect(Buffer.from(await avatar.arrayBuffer())).toEqual(EXAMPLE_IMAGE);
    const noteImage = await api.GET('/api/v1/entry-images/{imageId}', {
      params: { path: { imageId: IDS.exampleImage } },
      parseAs: 'arrayBuffer',
    });
    expect(noteImage.response.status).toBe(200);
    for (const stagingId of [IDS.attachmentUpload, IDS.spaceIconUpload])
      expect((await server.deps.storage?.head(stagingKey(IDS.aurora, stagingId)))?.size).toBe(EXAMPLE_IMAGE.length);
    // Staged for good: a fixture-mode server that runs for days keeps them (the storage GC removes expired ones).
    const staged = await server.deps.db
      .knex('staged_uploads')
      .whereIn('id', [IDS.attachmentUpload, IDS.spaceIconUpload])
      .pluck('expires_at');
    expect(staged).toHaveLength(2);
    for (const expiresAt of staged) expect(Number(expiresAt)).toBeGreaterThan(Date.UTC(2099, 0, 1));
    const readOnly = server.client(EXAMPLE_KEYS.ownerReadOnly.token);
    const write = await readOnly.POST('/api/v1/members', { body: { name: 'Nope' } });
    expect(write.response.status).toBe(403);
    // A second run finds the examples' own accounts and refuses.
    await expect(seedExamples(seedContext())).rejects.toBeInstanceOf(ExamplesRefusedError);
  });

  it('publishes the example image the contract run sends, and the key that signed the storage examples', () => {
    // The file newman sends as every binary request body (scripts/contract-run.ts) holds the seeded bytes.
    expect(readFileSync(resolve(import.meta.dirname, '../.portman/example-image.png'))).toEqual(EXAMPLE_IMAGE);
    type Param = { name: string; in: string; schema: { examples?: unknown[] }; example?: unknown };
    const spec = JSON.parse(readFileSync(resolve(import.meta.dirname, '../generated/openapi.json'), 'utf8')) as {
      paths: Record<string, { parameters: Param[]; get: { parameters: Param[] }; put: { parameters: Param[] } }>;
    };
    const item = spec.paths['/storage/v1/objects/{objectKey}']!;
    const example = (params: Param[], name: string) =>
      String(params.find((p) => p.name === name)?.schema.examples?.[0]);
    const segment = example(item.parameters, 'objectKey');
    const expires = Number(example(item.parameters, 'expires'));
    // The object is the staged space-icon upload (its bytes the example image), the expiry far ahead.
    expect(segment).toBe(keyToUrlSegment(stagingKey(IDS.aurora, IDS.spaceIconUpload)));
    expect(expires).toBeGreaterThan(Date.UTC(2099, 0, 1));
    const storage = new FilesystemObjectStorage('/nonexistent', {
      signingKey: Buffer.from(EXAMPLE_STORAGE_SIGNING_KEY, 'utf8'),
    });
    const key = stagingKey(IDS.aurora, IDS.spaceIconUpload);
    const now = Date.now();
    expect(() =>
      storage.verifySignedDownload({ key, expires, signature: example(item.get.parameters, 'signature') }, now),
    ).not.toThrow();
    expect(() =>
      storage.verifySignedUpload(
        {
          key,
          expires,
          contentType: example(item.put.parameters, 'contentType'),
          byteSize: Number(example(item.put.parameters, 'byteSize')),
          signature: example(item.put.parameters, 'signature'),
        },
        now,
      ),
    ).not.toThrow();
    expect(Number(example(item.put.parameters, 'byteSize'))).toBe(EXAMPLE_IMAGE.length);
    // Fixture mode signs with that key only: an operator's own key is refused rather than ignored.
    expect(() => loadConfig({ SEED_EXAMPLES: 'true', STORAGE_SIGNING_KEY: 's'.repeat(40) })).toThrow(
      /SEED_EXAMPLES=true signs storage URLs with the published example key/,
    );
  });
});

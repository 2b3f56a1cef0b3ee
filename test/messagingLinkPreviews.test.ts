/**
 * Link previews (docs/messaging.md, "Link previews"): links of a sent or edited message are queued,
 * fetched by the `link_preview` job from loopback pages (FETCH_ALLOW_ADDRESSES=127.0.0.1: the
 * loopback origin is reachable, every other private address is still refused), parsed, their
 * images re-hosted, and read back with the message. Jobs run when a test drains the queue
 * (runtime.jobs.runDue()), never on their own: the test servers do not start the worker.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { randomBytes } from 'node:crypto';
import type { ApiClient, components } from '../client/index.ts';
import { ConfigError, loadConfig } from '../server/config.ts';
import { MessageCipher } from '../server/crypto/messageCipher.ts';
import { queueMessageReencryption } from '../server/features/messaging/index.ts';
import { linksIn } from '../server/features/messaging/linkPreviews.ts';
import { decodeHtml, extractMetadata } from '../server/features/messaging/pageMetadata.ts';
import { createMember, UNKNOWN_ID } from './helpers/fixtures.ts';
import { PNG } from './helpers/images.ts';
import { captureStatements } from './helpers/plans.ts';
import { TestServer } from './helpers/server.ts';

type Message = components['schemas']['Message'];

const MiB = 1024 * 1024;
const OG_PAGE = `<!doctype html><html><head>
  <title>Fallback title</title>
  <meta property="og:title" content="Fluffy &amp; tall pancakes">
  <meta property="og:description" content="  A weekend
    breakfast. ">
  <meta property="og:site_name" content="Example Recipes">
  <meta property="og:image" content="/img.png">
  <meta name="twitter:title" content="Twitter title">
</head><body><h1>Pancakes</h1></body></html>`;

/** The loopback site the previews are fetched from; `hits` records every request path. */
let site: Server;
let origin = '';
const hits: string[] = [];
/** Set when the endless page's connection was closed by the client. */
let endlessClosedAfter = -1;
let version = 0;
let flaky = true;

function html(res: ServerResponse, body: string | Buffer, type = 'text/html; charset=utf-8'): void {
  res.writeHead(200, { 'content-type': type }).end(body);
}

function route(req: IncomingMessage, res: ServerResponse): void {
  const path = new URL(req.url ?? '/', 'http://site').pathname;
  hits.push(path);
  switch (path) {
    case '/og':
    case '/og2':
    case '/og-nostore':
      return html(res, OG_PAGE.replace('/img.png', path === '/og-nostore' ? '/img-nostore.png' : '/img.png'));
    case '/img.png':
    case '/img-nostore.png':
      return void res.writeHead(200, { 'content-type': 'image/png' }).end(PNG);
    case '/title':
      return html(res, '<html><head><title>\n  Just a   title\n</title></head><body>no metadata here</body></html>');
    case '/latin1':
      return html(res, Buffer.from('<title>Caf\xe9 cr\xe8me</title>', 'latin1'), 'text/html; charset=iso-8859-1');
    case '/json':
      return void res.writeHead(200, { 'content-type': 'application/json' }).end('{"title":"not a page"}');
    case '/empty':
      return html(res, '<html><head></head><body><p>nothing to show</p></body></html>');
    case '/missing':
      return void res.writeHead(404, { 'content-type': 'text/html' }).end('<title>Not found</title>');
    case '/redirect-private':
      // The origin is allowed (127.0.0.1); the redirect target is a private address that is not.
      return void res.writeHead(302, { location: 'http://169.254.169.254/latest/meta-data/' }).end();
    case '/private-image':
      return html(
        res,
        '<head><meta property="og:title" content="Private image"><meta property="og:image" content="http://10.0.0.1/secret.png"></head>',
      );
    case '/fake-image':
      return html(
        res,
        '<head><meta property="og:title" content="Fake image"><meta property="og:image" content="/fake.png"></head>',
      );
    case '/fake.png':
      return void res
        .writeHead(200, { 'content-type': 'image/png' })
        .end('<svg xmlns="http://www.w3.org/2000/svg"></svg>');
    case '/slow':
      return void setTimeout(() => html(res, '<title>Slow page</title>'), 1500);
    case '/changing':
      return html(res, `<title>Version ${++version}</title>`);
    case '/flaky':
      return flaky ? void res.writeHead(404).end() : html(res, '<title>Back again</title>');
    case '/huge': {
      // 5 MiB declared and sent: metadata first, then filler the fetch must never read in full.
      const head = Buffer.from('<html><head><meta property="og:title" content="Huge page"></head><body>');
      const body = Buffer.concat([head, Buffer.alloc(5 * MiB - head.length, 0x61)]);
      res.writeHead(200, { 'content-type': 'text/html', 'content-length': String(body.length) });
      return void res.end(body);
    }
    case '/endless': {
      // No Content-Length and no end: only the read cap can finish this fetch.
      res.writeHead(200, { 'content-type': 'text/html' });
      res.write('<html><head><title>Endless page</title></head><body>');
      let sent = 0;
      const chunk = Buffer.alloc(64 * 1024, 0x62);
      const more = () => {
        if (res.destroyed) return;
        sent += chunk.length;
        if (res.write(chunk)) setImmediate(more);
        else res.once('drain', more);
      };
      res.on('close', () => {
        endlessClosedAfter = sent;
      });
      return more();
    }
    default:
      res.writeHead(404).end();
  }
}

const servers = { main: new TestServer(), nostore: new TestServer() };

beforeAll(async () => {
  site = createServer(route);
  await new Promise<void>((resolve) => site.listen(0, '127.0.0.1', resolve));
  origin = `http://127.0.0.1:${(site.address() as AddressInfo).port}`;
  const env = { FETCH_ALLOW_ADDRESSES: '127.0.0.1', FETCH_TIMEOUT_MS: '8000' };
  await servers.main.start({ env });
  await servers.nostore.start({ env: { ...env, OBJECT_STORAGE: 'none' } });
});

afterAll(async () => {
  await servers.main.close();
  await servers.nostore.close();
  site.closeAllConnections();
  await new Promise((resolve) => site.close(resolve));
});

const link = (path: string) => `${origin}${path}`;

async function setup(api: ApiClient) {
  const memberId = await createMember(api, 'Robin');
  const spaceId = (await api.POST('/api/v1/messaging/spaces', { body: { name: 'S' } })).data!.id;
  const channelId = (
    await api.POST('/api/v1/messaging/spaces/{spaceId}/channels', {
      params: { path: { spaceId } },
      body: { name: 'c' },
    })
  ).data!.id;
  const send = async (content: string) => {
    const res = await api.POST('/api/v1/messaging/channels/{channelId}/messages', {
      params: { path: { channelId } },
      body: { memberId, content },
    });
    expect(res.response.status, JSON.stringify(res.error)).toBe(201);
    return res.data!;
  };
  const page = async () =>
    (await api.GET('/api/v1/messaging/channels/{channelId}/messages', { params: { path: { channelId } } })).data!.items;
  const read = async (messageId: string): Promise<Message> => (await page()).find((m) => m.id === messageId)!;
  return { memberId, spaceId, channelId, send, page, read };
}

/** Every due job, until none is left (what the worker would do, deterministically). */
const drain = (server: TestServer) => server.runtime.jobs.runDue();

/** The stored previews of a message, their sealed link opened with the server's keyring. */
async function rows(server: TestServer, messageId: string) {
  const stored = (await server.deps.db
    .knex('messaging_link_previews')
    .where({ message_id: messageId })
    .orderBy('position')
    .select('*')) as Array<
    Record<string, unknown> & { id: string; user_id: string; key_id: string; data_enc: Uint8Array }
  >;
  const cipher = new MessageCipher(server.deps.config.messageEncryptionKeys);
  return stored.map((r) => ({
    id: r.id,
    url: (
      JSON.parse(cipher.open(r.user_id, r.id, { keyId: r.key_id, data: Buffer.from(r.data_enc) })) as { url: string }
    ).url,
    status: r.status as string,
    failure: r.failure as string | null,
    image_key: r.image_key as string | null,
    dismissed_at: r.dismissed_at as number | null,
  }));
}

describe('settings', () => {
  it('LINK_PREVIEW_* default to 1 MiB of page, 2 MiB of image, 4 fetches at a time, and are bounded', () => {
    const defaults = loadConfig({});
    expect([
      defaults.linkPreviewHtmlMaxBytes,
      defaults.linkPreviewImageMaxBytes,
      defaults.linkPreviewConcurrency,
    ]).toEqual([MiB, 2 * MiB, 4]);
    const set = loadConfig({
      LINK_PREVIEW_HTML_MAX_BYTES: '65536',
      LINK_PREVIEW_IMAGE_MAX_BYTES: '4096',
      LINK_PREVIEW_CONCURRENCY: '2',
    });
    expect([set.linkPreviewHtmlMaxBytes, set.linkPreviewImageMaxBytes, set.linkPreviewConcurrency]).toEqual([
      65536, 4096, 2,
    ]);
    expect(() => loadConfig({ LINK_PREVIEW_HTML_MAX_BYTES: '100' })).toThrow(
      /LINK_PREVIEW_HTML_MAX_BYTES must be between/,
    );
    expect(() => loadConfig({ LINK_PREVIEW_IMAGE_MAX_BYTES: 'big' })).toThrow(ConfigError);
    expect(() => loadConfig({ LINK_PREVIEW_CONCURRENCY: '0' })).toThrow(
      /LINK_PREVIEW_CONCURRENCY must be between 1 and 32/,
    );
  });
});

describe('which links a message previews', () => {
  it('http(s) runs of the text, trimmed of the sentence around them, normalised, deduplicated, at most 5', () => {
    expect(linksIn('See https://example.org/a, and (http://Example.org/b) or https://example.org/a#top.')).toEqual([
      'https://example.org/a',
      'http://example.org/b',
    ]);
    expect(linksIn('wiki: https://en.wikipedia.org/wiki/Foo_(bar)! "https://q.example/?x=1&y=2"')).toEqual([
      'https://en.wikipedia.org/wiki/Foo_(bar)',
      'https://q.example/?x=1&y=2',
    ]);
    expect(
      linksIn(
        'ftp://x.example/ mailto:a@b.example https://user:pw@x.example/ https:// javascript:alert(1) HTTPS://UPPER.example/Path',
      ),
    ).toEqual(['https://upper.example/Path']);
    const many = Array.from({ length: 8 }, (_, i) => `https://example.org/${i}`).join(' ');
    expect(linksIn(many)).toEqual([0, 1, 2, 3, 4].map((i) => `https://example.org/${i}`));
    expect(linksIn(`https://example.org/${'x'.repeat(2100)}`)).toEqual([]);
  });
});

describe('what a page says about itself (htmlparser2)', () => {
  it('Open Graph first, then the Twitter card, then <title> and the description meta tag; the head only', () => {
    expect(extractMetadata(OG_PAGE, 'https://example.org/recipes/p')).toEqual({
      title: 'Fluffy & tall pancakes',
      description: 'A weekend breakfast.',
      siteName: 'Example Recipes',
      image: 'https://example.org/img.png',
    });
    const page = `<HTML><HEAD><svg><title>icon</title></svg><TITLE>Plain &lt;title&gt;</TITLE>
      <META NAME="twitter:description" CONTENT="from the card"><meta name="description" content="from meta">
      <meta name="twitter:image" content="javascript:alert(1)"></HEAD><body><meta property="og:title" content="in the body"></body></HTML>`;
    expect(extractMetadata(page, 'https://example.org/')).toEqual({
      title: 'Plain <title>',
      description: 'from the card',
      siteName: null,
      image: null,
    });
    expect(extractMetadata('<title>cut off at the read ca', 'https://example.org/').title).toBe(
      'cut off at the read ca',
    );
    expect(
      extractMetadata(`<meta property="og:title" content="${'é'.repeat(400)}">`, 'https://example.org/').title,
    ).toBe('é'.repeat(300));
    expect(decodeHtml(Buffer.from('<title>Caf\xe9</title>', 'latin1'), 'text/html; charset=ISO-8859-1')).toBe(
      '<title>Café</title>',
    );
    expect(decodeHtml(Buffer.from('<title>Café</title>'), 'text/html; charset=made-up')).toBe('<title>Café</title>');
  });
});

describe('link previews', () => {
  const server = () => servers.main;

  it('are queued on send and fetched by the job, never while the sender waits; then read back with the message', async () => {
    const { api, userId } = await server().user();
    const { send, read, page } = await setup(api);
    hits.length = 0;
    const sent = await send(`pancakes: ${link('/og')} and a slow one ${link('/slow')}`);
    // Nothing was fetched on the request path: the answer came before the slow page was even asked for.
    expect(sent.linkPreviews).toEqual([]);
    expect(hits).toEqual([]);
    expect((await rows(server(), sent.id)).map((r) => [r.url, r.status])).toEqual([
      [link('/og'), 'pending'],
      [link('/slow'), 'pending'],
    ]);
    expect(
      await server()
        .deps.db.knex('jobs')
        .where({ queue: 'link_preview', state: 'pending' })
        .whereRaw("payload->>'previewId' = any(?)", [(await rows(server(), sent.id)).map((r) => r.id)]),
    ).toHaveLength(2);
    expect((await read(sent.id)).linkPreviews).toEqual([]);

    await drain(server());
    const [og, slow] = (await read(sent.id)).linkPreviews;
    expect(og).toEqual({
      id: expect.any(String),
      url: link('/og'),
      title: 'Fluffy & tall pancakes',
      description: 'A weekend breakfast.',
      siteName: 'Example Recipes',
      imageUrl: expect.stringContaining('/storage/v1/objects/'),
    });
    expect(slow).toMatchObject({
      url: link('/slow'),
      title: 'Slow page',
      description: null,
      siteName: null,
      imageUrl: null,
    });
    // The image was re-hosted: it downloads from this server's storage, not from the site.
    const image = await fetch(server().baseUrl + og!.imageUrl);
    expect(image.headers.get('content-type')).toBe('image/png');
    expect(Buffer.from(await image.arrayBuffer()).equals(PNG)).toBe(true);
    expect(await server().deps.storage!.head(`u/${userId}/messaging/link-previews/${og!.id}`)).toMatchObject({
      contentType: 'image/png',
      size: PNG.length,
    });
    // The pages and the newer/around reads show them too, each URL freshly signed.
    const again = (await page())[0]!;
    expect(again.linkPreviews.map((p) => p.id)).toEqual([og!.id, slow!.id]);
    const around = await api.GET('/api/v1/messaging/channels/{channelId}/messages/around', {
      params: { path: { channelId: sent.channelId }, query: { anchorMessageId: sent.id } },
    });
    expect(around.data!.items[0]!.linkPreviews.map((p) => p.title)).toEqual(['Fluffy & tall pancakes', 'Slow page']);
  });

  it('fall back to <title>; honour the Content-Type charset; a page with nothing to show is no preview', async () => {
    const { api } = await server().user();
    const { send, read } = await setup(api);
    const sent = await send(`${link('/title')} ${link('/latin1')} ${link('/empty')}`);
    await drain(server());
    expect(
      (await read(sent.id)).linkPreviews.map((p) => [p.url, p.title, p.description, p.siteName, p.imageUrl]),
    ).toEqual([
      [link('/title'), 'Just a title', null, null, null],
      [link('/latin1'), 'Café crème', null, null, null],
    ]);
    expect((await rows(server(), sent.id)).map((r) => [r.status, r.failure])).toEqual([
      ['ready', null],
      ['ready', null],
      ['failed', 'no_metadata'],
    ]);
  });

  it('refuse a redirect to a private address (the loopback origin itself is allowed); never contact other private hosts', async () => {
    const { api } = await server().user();
    const { send, read } = await setup(api);
    hits.length = 0;
    const sent = await send(
      `${link('/redirect-private')} http://10.0.0.1/internal http://127.0.0.2:${new URL(origin).port}/og`,
    );
    await drain(server());
    expect(hits).toEqual(['/redirect-private']);
    expect((await read(sent.id)).linkPreviews).toEqual([]);
    expect((await rows(server(), sent.id)).map((r) => [r.status, r.failure])).toEqual([
      ['failed', 'private_address'],
      ['failed', 'private_address'],
      ['failed', 'private_address'],
    ]);
  });

  it('read at most LINK_PREVIEW_HTML_MAX_BYTES of a page: a huge page and an endless one both give a preview, and the job ends', async () => {
    const { api } = await server().user();
    const { send, read } = await setup(api);
    endlessClosedAfter = -1;
    const sent = await send(`${link('/huge')} ${link('/endless')}`);
    await drain(server());
    expect((await read(sent.id)).linkPreviews.map((p) => p.title)).toEqual(['Huge page', 'Endless page']);
    // The fetch hung up on the endless page once it had its megabyte (the server never ends it).
    await expect.poll(() => endlessClosedAfter).toBeGreaterThan(0);
  });

  it('are not made from what is not HTML, from error statuses, or from an image that is not an image', async () => {
    const { api } = await server().user();
    const { send, read } = await setup(api);
    const sent = await send(`${link('/json')} ${link('/missing')} ${link('/private-image')} ${link('/fake-image')}`);
    await drain(server());
    expect((await read(sent.id)).linkPreviews.map((p) => [p.title, p.imageUrl])).toEqual([
      ['Private image', null],
      ['Fake image', null],
    ]);
    expect((await rows(server(), sent.id)).map((r) => [r.status, r.failure, r.image_key])).toEqual([
      ['failed', 'not_html', null],
      ['failed', 'bad_status', null],
      ['ready', null, null],
      ['ready', null, null],
    ]);
  });

  it('dismiss hides a preview for good; refresh fetches it again; both 404 for what is not the caller’s live preview', async () => {
    const { api } = await server().user();
    const other = await server().user();
    const { send, read } = await setup(api);
    const sent = await send(`${link('/changing')} ${link('/og2')}`);
    await drain(server());
    const [changing, og2] = (await read(sent.id)).linkPreviews;
    expect(changing!.title).toBe(`Version ${version}`);
    const first = version;
    const dismiss = (previewId: string, client = api) =>
      client.POST('/api/v1/messaging/link-previews/{previewId}/dismiss', { params: { path: { previewId } } });
    const refresh = (previewId: string, client = api) =>
      client.POST('/api/v1/messaging/link-previews/{previewId}/refresh', { params: { path: { previewId } } });

    // Refresh: the old preview shows until the job has run, then the new one.
    expect((await refresh(changing!.id)).response.status).toBe(204);
    expect((await refresh(changing!.id)).response.status).toBe(204); // queued once only
    expect(await server().deps.db.knex('jobs').where({ queue: 'link_preview', key: changing!.id })).toHaveLength(1);
    expect((await read(sent.id)).linkPreviews[0]!.title).toBe(`Version ${first}`);
    await drain(server());
    expect((await read(sent.id)).linkPreviews[0]).toEqual({ ...changing, title: `Version ${first + 1}` });

    // Dismiss: gone from reads, twice is fine, a refresh does not bring it back.
    expect((await dismiss(og2!.id)).response.status).toBe(204);
    expect((await dismiss(og2!.id)).response.status).toBe(204);
    expect((await read(sent.id)).linkPreviews.map((p) => p.id)).toEqual([changing!.id]);
    expect((await refresh(og2!.id)).response.status).toBe(204);
    await drain(server());
    expect((await read(sent.id)).linkPreviews.map((p) => p.id)).toEqual([changing!.id]);

    // Another account's preview, an unknown id: 404 without detail; a malformed id: 400.
    const notFound = { code: 'NOT_FOUND', message: 'Link preview not found' };
    for (const call of [
      dismiss(changing!.id, other.api),
      refresh(changing!.id, other.api),
      dismiss(UNKNOWN_ID),
      refresh(UNKNOWN_ID),
    ]) {
      const res = await call;
      expect([res.response.status, res.error]).toEqual([404, notFound]);
    }
    expect((await read(sent.id)).linkPreviews.map((p) => p.id)).toEqual([changing!.id]);
    expect(
      (
        await api.POST('/api/v1/messaging/link-previews/{previewId}/dismiss', {
          params: { path: { previewId: 'nope' } },
        })
      ).response.status,
    ).toBe(400);
    const readOnly = await server().user({ scopes: { messaging: 'read' } });
    expect((await refresh(UNKNOWN_ID, readOnly.api)).response.status).toBe(403);

    // A deleted message's previews are gone too.
    await api.DELETE('/api/v1/messaging/messages/{messageId}', { params: { path: { messageId: sent.id } } });
    expect((await refresh(changing!.id)).response.status).toBe(404);
    expect((await dismiss(changing!.id)).response.status).toBe(404);
  });

  it('refresh retries a failed preview, which shows once the page answers', async () => {
    const { api } = await server().user();
    const { send, read } = await setup(api);
    flaky = true;
    const sent = await send(link('/flaky'));
    await drain(server());
    const [row] = await rows(server(), sent.id);
    expect([row!.status, row!.failure]).toEqual(['failed', 'bad_status']);
    expect((await read(sent.id)).linkPreviews).toEqual([]);
    flaky = false;
    expect(
      (
        await api.POST('/api/v1/messaging/link-previews/{previewId}/refresh', {
          params: { path: { previewId: row!.id } },
        })
      ).response.status,
    ).toBe(204);
    expect((await rows(server(), sent.id))[0]!.status).toBe('pending');
    await drain(server());
    expect((await read(sent.id)).linkPreviews.map((p) => [p.id, p.title])).toEqual([[row!.id, 'Back again']]);
  });

  it('edit re-reads the links: removed links lose their previews (and images), kept ones stay as they were, new ones are queued', async () => {
    const { api, userId } = await server().user();
    const { send, read } = await setup(api);
    const sent = await send(`${link('/og')} then ${link('/title')}`);
    await drain(server());
    const [og, title] = (await read(sent.id)).linkPreviews;
    const ogImage = `u/${userId}/messaging/link-previews/${og!.id}`;
    expect(await server().deps.storage!.head(ogImage)).not.toBeNull();
    await api.POST('/api/v1/messaging/link-previews/{previewId}/dismiss', {
      params: { path: { previewId: title!.id } },
    });

    hits.length = 0;
    const edited = await api.PATCH('/api/v1/messaging/messages/{messageId}', {
      params: { path: { messageId: sent.id } },
      body: { content: `now ${link('/og2')} and ${link('/title')}` },
    });
    expect(edited.response.status).toBe(200);
    expect(edited.data!.linkPreviews).toEqual([]); // /title stays dismissed, /og2 is not fetched yet
    expect(hits).toEqual([]);
    expect((await rows(server(), sent.id)).map((r) => [r.url, r.status, r.id === title!.id])).toEqual([
      [link('/og2'), 'pending', false],
      [link('/title'), 'ready', true],
    ]);
    expect(await server().deps.storage!.head(ogImage)).toBeNull();
    await drain(server());
    expect(hits).toEqual(['/og2', '/img.png']); // the kept preview was not fetched again
    expect((await read(sent.id)).linkPreviews.map((p) => [p.url, p.title])).toEqual([
      [link('/og2'), 'Fluffy & tall pancakes'],
    ]);

    // An edit without links removes them all.
    await api.PATCH('/api/v1/messaging/messages/{messageId}', {
      params: { path: { messageId: sent.id } },
      body: { content: 'no links' },
    });
    expect(await rows(server(), sent.id)).toEqual([]);
    expect(await server().deps.storage!.list(`u/${userId}/messaging/link-previews/`)).toEqual([]);
  });

  it('keep the link and what the page said encrypted at rest, like the text, and follow a key rotation', async () => {
    const { api } = await server().user();
    const { send, read } = await setup(api);
    const canary = `canary-${randomBytes(4).toString('hex')}`;
    const sent = await send(`${link(`/og?${canary}`)}`);
    await drain(server());
    expect((await read(sent.id)).linkPreviews.map((p) => [p.url, p.title])).toEqual([
      [link(`/og?${canary}`), 'Fluffy & tall pancakes'],
    ]);
    const dump = (
      await server().deps.db.knex.raw(`select p::text as row from messaging_link_previews p where message_id = ?`, [
        sent.id,
      ])
    ).rows as Array<{ row: string }>;
    expect(dump).toHaveLength(1);
    for (const text of [canary, '127.0.0.1', 'pancakes', 'Example Recipes', 'weekend'])
      expect(dump[0]!.row).not.toContain(text);

    // A rotation rewrites preview rows too; afterwards they read under the new key alone.
    const config = server().deps.config;
    const original = config.messageEncryptionKeys;
    const rotated = { id: 'rotated', key: randomBytes(32) };
    try {
      config.messageEncryptionKeys = [rotated, ...original];
      expect(await queueMessageReencryption(server().runtime.jobs, server().deps.db.knex, config)).toBe(true);
      await drain(server());
      expect(
        await server().deps.db.knex('messaging_link_previews').where({ message_id: sent.id }).pluck('key_id'),
      ).toEqual(['rotated']);
      config.messageEncryptionKeys = [rotated];
      expect((await read(sent.id)).linkPreviews.map((p) => p.title)).toEqual(['Fluffy & tall pancakes']);
    } finally {
      config.messageEncryptionKeys = original;
    }
    // Every row of this server now is under the rotated key: rotate back, so the original ring reads them again.
    config.messageEncryptionKeys = [...original, rotated];
    expect(await queueMessageReencryption(server().runtime.jobs, server().deps.db.knex, config)).toBe(true);
    await drain(server());
    config.messageEncryptionKeys = original;
    expect((await read(sent.id)).linkPreviews).toHaveLength(1);
  });

  it('a deleted message’s queued fetch does nothing', async () => {
    const { api } = await server().user();
    const { send } = await setup(api);
    const sent = await send(link('/og'));
    await api.DELETE('/api/v1/messaging/messages/{messageId}', { params: { path: { messageId: sent.id } } });
    hits.length = 0;
    await drain(server());
    expect(hits).toEqual([]);
    expect((await rows(server(), sent.id)).map((r) => r.status)).toEqual(['pending']);
  });

  it('a page of messages with previews is still one statement', async () => {
    const { api } = await server().user();
    const { send, channelId } = await setup(api);
    for (let i = 0; i < 3; i++) await send(`${link('/og')} ${link('/title')} #${i}`);
    await drain(server());
    const get = () => api.GET('/api/v1/messaging/channels/{channelId}/messages', { params: { path: { channelId } } });
    await get(); // warms the key cache
    const statements = await captureStatements(server().deps.db.knex, /messaging_/, async () => {
      const res = await get();
      expect(res.data!.items.map((m) => m.linkPreviews.length)).toEqual([2, 2, 2]);
    });
    expect(statements).toHaveLength(1);
  });

  it('without object storage a preview has no image (and the image is not fetched)', async () => {
    const { api } = await servers.nostore.user();
    const { send, read } = await setup(api);
    hits.length = 0;
    const sent = await send(link('/og-nostore'));
    await drain(servers.nostore);
    expect((await read(sent.id)).linkPreviews.map((p) => [p.title, p.imageUrl])).toEqual([
      ['Fluffy & tall pancakes', null],
    ]);
    expect(hits).toEqual(['/og-nostore']);
  });
});

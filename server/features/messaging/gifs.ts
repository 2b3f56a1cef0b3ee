/**
 * The GIF proxy (docs/messaging.md, "GIFs"): search, browse and categories of one configured
 * provider (GIF_PROVIDER: Tenor API v2 or GIPHY), fetched through the guarded fetcher, normalised to
 * one shape and cached briefly in a bounded in-memory map. The provider's text never reaches a
 * client. Each provider is an adapter below: which endpoint and parameters a request becomes, and
 * how its answers map to Gif, GifPage and GifCategory.
 */
import type { components } from '../../../generated/api.d.ts';
import type { Config, GifProviderName } from '../../config.ts';
import type { ServiceContext } from '../../core/context.ts';
import { badRequest, unavailable } from '../../core/errors.ts';
import { fetchOptionsFromConfig, guardedFetch } from '../../net/guardedFetch.ts';
import { getGif as gifPreferences } from './preferences.ts';

type Schemas = components['schemas'];
type Gif = Schemas['Gif'];

/** Largest provider answer read. */
const MAX_PROVIDER_BYTES = 2 * 1024 * 1024;
const MAX_URL = 2048;

interface CacheEntry {
  at: number;
  value: unknown;
}

/** Provider answers by request URL, oldest first (a Map keeps insertion order), bounded by count and age. */
const cache = new Map<string, CacheEntry>();

function cached(config: Config, key: string, now: number): unknown {
  const hit = cache.get(key);
  if (!hit) return undefined;
  if (now - hit.at >= config.gifCacheTtlMs) {
    cache.delete(key);
    return undefined;
  }
  return hit.value;
}

function remember(config: Config, key: string, value: unknown, now: number): void {
  if (config.gifCacheTtlMs === 0) return;
  cache.delete(key);
  cache.set(key, { at: now, value });
  while (cache.size > config.gifCacheMaxEntries) cache.delete(cache.keys().next().value!);
}

type ContentFilter = Schemas['GifPreferences']['contentFilter'];

/** What the proxy asks a provider, whichever it is. */
interface GifRequest {
  kind: 'search' | 'featured' | 'categories';
  query?: string;
  limit: number;
  cursor?: string;
  contentFilter: ContentFilter;
  /** `xx` or `xx_YY`. */
  locale?: string;
}

interface ProviderAdapter {
  /** The query parameter that carries GIF_API_KEY. */
  keyParam: string;
  /** The endpoint (relative to GIF_API_BASE_URL) and query parameters of a request; 400 for a cursor this provider never gave out. */
  call(request: GifRequest): { endpoint: string; params: Record<string, string | undefined> };
  page(body: Record<string, unknown>, request: GifRequest): Schemas['GifPage'];
  categories(body: Record<string, unknown>): Schemas['GifCategory'][];
}

const providerDown = () => unavailable('The GIF provider is not available');

async function callProvider(
  ctx: ServiceContext,
  adapter: ProviderAdapter,
  request: GifRequest,
): Promise<Record<string, unknown>> {
  const key = ctx.config.gifApiKey;
  if (!key) throw unavailable('GIFs are not configured on this server');
  const { endpoint, params } = adapter.call(request);
  const url = new URL(`${ctx.config.gifApiBaseUrl}/${endpoint}`);
  for (const [name, value] of Object.entries({ ...params, [adapter.keyParam]: key })) {
    if (value !== undefined) url.searchParams.set(name, value);
  }
  const cacheKey = url.href;
  const hit = cached(ctx.config, cacheKey, ctx.now);
  if (hit !== undefined) return hit as Record<string, unknown>;
  let body: Record<string, unknown>;
  try {
    // The host is the operator's GIF_API_BASE_URL, not a user's choice, so it may be private (a proxy, a
    // test fake); redirects are not followed, so the call never goes anywhere else.
    const res = await guardedFetch(url, {
      ...fetchOptionsFromConfig(ctx.config),
      allowPrivate: true,
      maxRedirects: 0,
      maxBytes: MAX_PROVIDER_BYTES,
      headers: { Accept: 'application/json' },
    });
    if (res.status !== 200) throw new Error(`status ${res.status}`);
    const parsed: unknown = JSON.parse(res.body.toString('utf8'));
    if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) throw new Error('not an object');
    body = parsed as Record<string, unknown>;
  } catch (err) {
    ctx.log.warn({ err, endpoint }, 'GIF provider call failed');
    throw providerDown();
  }
  remember(ctx.config, cacheKey, body, ctx.now);
  return body;
}

const str = (v: unknown): string | undefined => (typeof v === 'string' ? v : undefined);
const httpsUrl = (v: unknown): string | null => {
  const s = str(v);
  return s && s.startsWith('https://') && s.length <= MAX_URL ? s : null;
};
/** A width or height: a number, or (GIPHY) a string of digits. */
const dim = (v: unknown): number => {
  const n = typeof v === 'string' && /^\d{1,6}$/.test(v) ? Number(v) : v;
  return typeof n === 'number' && Number.isInteger(n) && n >= 0 && n <= 100_000 ? n : 0;
};
const GIF_ID = /^[A-Za-z0-9_-]{1,100}$/;
const record = (v: unknown): Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>) : {};

/** Results that lack what a Gif needs are left out (a page may hold fewer than `limit`). */
function gifPage(
  results: unknown,
  toGif: (raw: unknown) => Gif | null,
  limit: number,
  nextCursor: string | null,
): Schemas['GifPage'] {
  const items = (Array.isArray(results) ? results : [])
    .map(toGif)
    .filter((g): g is Gif => g !== null)
    .slice(0, limit);
  return { items, nextCursor };
}

// ---- Tenor API v2 ----

interface TenorFormat {
  url?: unknown;
  dims?: unknown;
}

function tenorGif(raw: unknown): Gif | null {
  const r = record(raw) as {
    id?: unknown;
    title?: unknown;
    content_description?: unknown;
    media_formats?: Record<string, TenorFormat | undefined>;
  };
  const id = str(r.id);
  const formats = r.media_formats ?? {};
  const url = httpsUrl(formats.gif?.url);
  if (!id || !GIF_ID.test(id) || !url) return null;
  const dims = Array.isArray(formats.gif?.dims) ? (formats.gif!.dims as unknown[]) : [];
  return {
    id,
    provider: 'tenor',
    title: (str(r.title) || str(r.content_description) || '').slice(0, 500),
    url,
    previewUrl: httpsUrl(formats.tinygif?.url) ?? url,
    mp4Url: httpsUrl(formats.mp4?.url),
    width: dim(dims[0]),
    height: dim(dims[1]),
  };
}

const tenor: ProviderAdapter = {
  keyParam: 'key',
  call: (r) => {
    // Tenor's content filter has our four levels under the same names.
    const common = { contentfilter: r.contentFilter, locale: r.locale, client_key: 'account-data-api' };
    if (r.kind === 'categories') return { endpoint: 'categories', params: common };
    const params = { ...common, limit: String(r.limit), pos: r.cursor, media_filter: 'gif,tinygif,mp4' };
    return r.kind === 'search'
      ? { endpoint: 'search', params: { ...params, q: r.query } }
      : { endpoint: 'featured', params };
  },
  page: (body, r) => {
    const next = str(body.next);
    // Tenor answers "" (or "0") when there is nothing more.
    return gifPage(body.results, tenorGif, r.limit, next && next !== '0' && next.length <= 200 ? next : null);
  },
  categories: (body) =>
    (Array.isArray(body.tags) ? body.tags : []).flatMap((raw) => {
      const t = record(raw);
      const id = str(t.searchterm);
      return id && id.length <= 100
        ? [{ id, name: (str(t.name) ?? id).slice(0, 100), previewUrl: httpsUrl(t.image) }]
        : [];
    }),
};

// ---- GIPHY API v1 ----

/** GIPHY's ratings: each of our levels admits what its rating and those below it admit. */
const GIPHY_RATING: Record<ContentFilter, string> = { off: 'r', low: 'pg-13', medium: 'pg', high: 'g' };
/** GIPHY refuses offsets above this. */
const GIPHY_MAX_OFFSET = 4999;

function giphyOffset(cursor: string | undefined): string | undefined {
  if (cursor === undefined) return undefined;
  if (!/^\d{1,4}$/.test(cursor) || Number(cursor) > GIPHY_MAX_OFFSET)
    throw badRequest('cursor is not a cursor of the configured GIF provider');
  return String(Number(cursor));
}

function giphyGif(raw: unknown): Gif | null {
  const r = record(raw);
  const images = record(r.images);
  const original = record(images.original);
  const id = str(r.id);
  const url = httpsUrl(original.url);
  if (!id || !GIF_ID.test(id) || !url) return null;
  return {
    id,
    provider: 'giphy',
    title: (str(r.title) || str(r.alt_text) || '').slice(0, 500),
    url,
    previewUrl: httpsUrl(record(images.fixed_width_small).url) ?? httpsUrl(record(images.preview_gif).url) ?? url,
    mp4Url: httpsUrl(original.mp4),
    width: dim(original.width),
    height: dim(original.height),
  };
}

const giphy: ProviderAdapter = {
  keyParam: 'api_key',
  call: (r) => {
    if (r.kind === 'categories') return { endpoint: 'categories', params: {} };
    const params = { limit: String(r.limit), offset: giphyOffset(r.cursor), rating: GIPHY_RATING[r.contentFilter] };
    // GIPHY's `lang` is the language alone (our `xx_YY` without the region); trending takes none.
    return r.kind === 'search'
      ? { endpoint: 'search', params: { ...params, q: r.query, lang: r.locale?.slice(0, 2) } }
      : { endpoint: 'trending', params };
  },
  page: (body, r) => {
    const pagination = record(body.pagination);
    const offset = Number(r.cursor ?? 0);
    const count = typeof pagination.count === 'number' ? pagination.count : 0;
    const total = typeof pagination.total_count === 'number' ? pagination.total_count : 0;
    // The cursor is the offset of the next page, while there is one GIPHY will serve.
    const next = offset + count;
    return gifPage(
      body.data,
      giphyGif,
      r.limit,
      count > 0 && next < total && next <= GIPHY_MAX_OFFSET ? String(next) : null,
    );
  },
  categories: (body) =>
    (Array.isArray(body.data) ? body.data : []).flatMap((raw) => {
      const c = record(raw);
      // The encoded name is a search term: browse searches it.
      const id = str(c.name_encoded);
      const images = record(record(c.gif).images);
      const previewUrl = httpsUrl(record(images.fixed_width_small).url) ?? httpsUrl(record(images.original).url);
      return id && id.length <= 100 ? [{ id, name: (str(c.name) ?? id).slice(0, 100), previewUrl }] : [];
    }),
};

const ADAPTERS: Record<GifProviderName, ProviderAdapter> = { tenor, giphy };

interface GifQuery {
  limit?: number;
  cursor?: string;
  contentFilter?: ContentFilter;
  locale?: string;
}

async function gifRequest(
  ctx: ServiceContext,
  kind: GifRequest['kind'],
  q: GifQuery & { query?: string },
): Promise<GifRequest> {
  // The key is checked before the preferences are read: without one nothing else matters.
  if (!ctx.config.gifApiKey) throw unavailable('GIFs are not configured on this server');
  const prefs = q.contentFilter && q.locale ? null : await gifPreferences(ctx);
  return {
    kind,
    query: q.query,
    limit: q.limit ?? 20,
    cursor: q.cursor,
    contentFilter: q.contentFilter ?? prefs!.contentFilter,
    locale: q.locale ?? prefs?.locale ?? undefined,
  };
}

async function gifs(ctx: ServiceContext, request: GifRequest): Promise<Schemas['GifPage']> {
  const adapter = ADAPTERS[ctx.config.gifProvider];
  return adapter.page(await callProvider(ctx, adapter, request), request);
}

export async function search(ctx: ServiceContext, q: GifQuery & { query: string }): Promise<Schemas['GifPage']> {
  return gifs(ctx, await gifRequest(ctx, 'search', q));
}

export async function browse(
  ctx: ServiceContext,
  q: GifQuery & { query?: string; categoryId?: string },
): Promise<Schemas['GifPage']> {
  const term = q.categoryId ?? q.query;
  return gifs(ctx, await gifRequest(ctx, term === undefined ? 'featured' : 'search', { ...q, query: term }));
}

export async function categories(ctx: ServiceContext): Promise<Schemas['GifCategory'][]> {
  const adapter = ADAPTERS[ctx.config.gifProvider];
  const request = await gifRequest(ctx, 'categories', {});
  return adapter.categories(await callProvider(ctx, adapter, request)).slice(0, 200);
}

/**
 * The GIF proxy (docs/messaging.md, "GIFs"): search, browse and categories of one configured
 * provider (Tenor API v2), fetched through the guarded fetcher, normalised to one shape and cached
 * briefly in a bounded in-memory map. The provider's text never reaches a client.
 */
import type { components } from '../../../generated/api.d.ts';
import type { Config } from '../../config.ts';
import type { ServiceContext } from '../../core/context.ts';
import { unavailable } from '../../core/errors.ts';
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

/** Tenor's content filter names for ours. */
const TENOR_FILTER: Record<Schemas['GifPreferences']['contentFilter'], string> = { off: 'off', low: 'low', medium: 'medium', high: 'high' };

const providerDown = () => unavailable('The GIF provider is not available');

async function callProvider(ctx: ServiceContext, endpoint: string, params: Record<string, string | undefined>): Promise<Record<string, unknown>> {
  const key = ctx.config.gifApiKey;
  if (!key) throw unavailable('GIFs are not configured on this server');
  const url = new URL(`${ctx.config.gifApiBaseUrl}/${endpoint}`);
  for (const [name, value] of Object.entries({ ...params, key, client_key: 'account-data-api', media_filter: endpoint === 'categories' ? undefined : 'gif,tinygif,mp4' })) {
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
const dim = (v: unknown): number => (typeof v === 'number' && Number.isInteger(v) && v >= 0 && v <= 100_000 ? v : 0);

interface TenorFormat {
  url?: unknown;
  dims?: unknown;
}

/** One Tenor result as a Gif; null when it lacks what the shape needs (it is then left out). */
function toGif(raw: unknown): Gif | null {
  if (typeof raw !== 'object' || raw === null) return null;
  const r = raw as { id?: unknown; title?: unknown; content_description?: unknown; media_formats?: Record<string, TenorFormat | undefined> };
  const id = str(r.id);
  const formats = r.media_formats ?? {};
  const url = httpsUrl(formats.gif?.url);
  if (!id || !/^[A-Za-z0-9_-]{1,100}$/.test(id) || !url) return null;
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

function toPage(body: Record<string, unknown>, limit: number): Schemas['GifPage'] {
  const results = Array.isArray(body.results) ? body.results : [];
  const items = results
    .map(toGif)
    .filter((g): g is Gif => g !== null)
    .slice(0, limit);
  const next = str(body.next);
  // Tenor answers "" (or "0") when there is nothing more.
  return { items, nextCursor: next && next !== '0' && next.length <= 200 ? next : null };
}

interface GifQuery {
  limit?: number;
  cursor?: string;
  contentFilter?: Schemas['GifPreferences']['contentFilter'];
  locale?: string;
}

async function providerParams(ctx: ServiceContext, q: GifQuery): Promise<Record<string, string | undefined>> {
  // The key is checked before the preferences are read: without one nothing else matters.
  if (!ctx.config.gifApiKey) throw unavailable('GIFs are not configured on this server');
  const prefs = q.contentFilter && q.locale ? null : await gifPreferences(ctx);
  return {
    limit: String(q.limit ?? 20),
    pos: q.cursor,
    contentfilter: TENOR_FILTER[q.contentFilter ?? prefs!.contentFilter],
    locale: q.locale ?? prefs?.locale ?? undefined,
  };
}

export async function search(ctx: ServiceContext, q: GifQuery & { query: string }): Promise<Schemas['GifPage']> {
  const params = await providerParams(ctx, q);
  return toPage(await callProvider(ctx, 'search', { ...params, q: q.query }), q.limit ?? 20);
}

export async function browse(ctx: ServiceContext, q: GifQuery & { query?: string; categoryId?: string }): Promise<Schemas['GifPage']> {
  const params = await providerParams(ctx, q);
  const term = q.categoryId ?? q.query;
  const body = term === undefined ? await callProvider(ctx, 'featured', params) : await callProvider(ctx, 'search', { ...params, q: term });
  return toPage(body, q.limit ?? 20);
}

export async function categories(ctx: ServiceContext): Promise<Schemas['GifCategory'][]> {
  const params = await providerParams(ctx, {});
  const body = await callProvider(ctx, 'categories', { contentfilter: params.contentfilter, locale: params.locale });
  const tags = Array.isArray(body.tags) ? body.tags : [];
  const out: Schemas['GifCategory'][] = [];
  for (const raw of tags) {
    if (typeof raw !== 'object' || raw === null) continue;
    const t = raw as { searchterm?: unknown; name?: unknown; image?: unknown };
    const id = str(t.searchterm);
    if (!id || id.length > 100) continue;
    out.push({ id, name: (str(t.name) ?? id).slice(0, 100), previewUrl: httpsUrl(t.image) });
    if (out.length >= 200) break;
  }
  return out;
}

/**
 * The one way the server fetches a URL it was handed (the external images of notes, re-hosted by
 * entries/rehost.ts; link previews and their images; the GIF provider). Such URLs are attacker-chosen, so every hop is checked before connecting:
 * http(s) only, DNS resolved here and every answer vetted (no loopback, private, link-local,
 * metadata or multicast addresses unless allowed), the connection pinned to the vetted addresses
 * (a second DNS answer cannot swap in 127.0.0.1: no rebinding gap), redirects followed by hand
 * and re-checked, and size and time bounded while streaming.
 */
import { lookup as dnsLookup } from 'node:dns/promises';
import { request as httpRequest, type IncomingMessage } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { isIP, type LookupFunction } from 'node:net';
import { FETCH_DEFAULTS, type Config } from '../config.ts';
import { addressAllowList, isPublicAddress } from './addresses.ts';

export type FetchRefusedReason =
  | 'invalid_url'
  | 'scheme'
  | 'dns'
  | 'private_address'
  | 'too_many_redirects'
  | 'too_large'
  | 'timeout'
  | 'bad_status'
  | 'network';

/** Every way a guarded fetch can fail; `reason` is for code, `message` for logs (never echo it to a client verbatim). */
export class FetchRefusedError extends Error {
  constructor(
    readonly reason: FetchRefusedReason,
    message: string,
    /** The URL of the hop that failed (after redirects, not necessarily the one asked for). */
    readonly url: string,
    /** The HTTP status, for `bad_status`. */
    readonly status?: number,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = 'FetchRefusedError';
  }
}

export interface ResolvedAddress {
  address: string;
  family: 4 | 6;
}

export interface GuardedFetchOptions {
  /** Allow loopback/private/reserved addresses (tests, trusted intranets). */
  allowPrivate?: boolean;
  /** Specific addresses or CIDR ranges allowed even though private, e.g. one internal image proxy. */
  allowAddresses?: readonly string[];
  /** Overall deadline, DNS and every redirect included. */
  timeoutMs?: number;
  /** Largest body read; a bigger Content-Length is refused before reading (unless `truncate`). */
  maxBytes?: number;
  /**
   * Past `maxBytes`, keep the first `maxBytes` bytes and hang up instead of refusing (`truncated` in the
   * result): for callers that only need the start of a document, such as a page's metadata.
   */
  truncate?: boolean;
  maxRedirects?: number;
  /** Extra request headers (e.g. Accept: image/*). */
  headers?: Record<string, string>;
  /** POST `body` instead of a GET (a webhook delivery); use with `maxRedirects: 0`, a redirect is never re-posted. */
  post?: { body: Buffer };
  /** The caller's own cancellation; its reason is rethrown as is, not turned into a refusal. */
  signal?: AbortSignal;
  /** Replaces the system resolver (a caching resolver; tests). Every answer is still vetted. */
  lookup?: (hostname: string) => Promise<ResolvedAddress[]>;
}

export interface GuardedFetchResult {
  status: number;
  contentType: string | null;
  body: Buffer;
  /** The body stopped at `maxBytes` (only with `truncate`); the rest was never read. */
  truncated: boolean;
  finalUrl: string;
}

export function fetchOptionsFromConfig(
  config: Pick<
    Config,
    'fetchAllowPrivate' | 'fetchAllowAddresses' | 'fetchTimeoutMs' | 'fetchMaxBytes' | 'fetchMaxRedirects'
  >,
): GuardedFetchOptions {
  return {
    allowPrivate: config.fetchAllowPrivate,
    allowAddresses: config.fetchAllowAddresses,
    timeoutMs: config.fetchTimeoutMs,
    maxBytes: config.fetchMaxBytes,
    maxRedirects: config.fetchMaxRedirects,
  };
}

const REDIRECTS = new Set([301, 302, 303, 307, 308]);
const USER_AGENT = 'AccountDataAPI/1 (+outbound fetcher)';

async function systemLookup(hostname: string): Promise<ResolvedAddress[]> {
  const answers = await dnsLookup(hostname, { all: true, verbatim: true });
  return answers.map((a) => ({ address: a.address, family: a.family === 6 ? 6 : 4 }));
}

/** Rejects as soon as `signal` aborts: dns.lookup itself cannot be cancelled. */
function abortable<T>(promise: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) return Promise.reject(signal.reason);
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(resolve, reject).finally(() => signal.removeEventListener('abort', onAbort));
  });
}

interface Policy {
  allowPrivate: boolean;
  allowed: (address: string) => boolean;
  lookup: (hostname: string) => Promise<ResolvedAddress[]>;
}

/** The addresses this hop may connect to: all DNS answers, each one vetted (one bad answer refuses the host). */
async function vetHost(url: URL, policy: Policy, signal: AbortSignal): Promise<ResolvedAddress[]> {
  // URL keeps IPv6 literals bracketed; the URL parser has already normalised 0x7f.1, 2130706433 and the like.
  const host = url.hostname.replace(/^\[(.*)\]$/, '$1');
  const literal = isIP(host);
  let addresses: ResolvedAddress[];
  if (literal !== 0) {
    addresses = [{ address: host, family: literal === 6 ? 6 : 4 }];
  } else {
    try {
      addresses = await abortable(policy.lookup(host), signal);
    } catch (error) {
      if (signal.aborted) throw error;
      throw new FetchRefusedError('dns', `Could not resolve ${host}`, url.href, undefined, { cause: error });
    }
    if (addresses.length === 0) throw new FetchRefusedError('dns', `${host} has no addresses`, url.href);
  }
  if (!policy.allowPrivate) {
    const bad = addresses.find((a) => !isPublicAddress(a.address) && !policy.allowed(a.address));
    if (bad) {
      throw new FetchRefusedError(
        'private_address',
        `${host} resolves to ${bad.address}, a private or reserved address`,
        url.href,
      );
    }
  }
  return addresses;
}

/** Hands the socket exactly the vetted addresses, whatever DNS would say now. */
function pinnedLookup(addresses: ResolvedAddress[]): LookupFunction {
  return (hostname, options, callback) => {
    const usable =
      options.family === 4 || options.family === 6 ? addresses.filter((a) => a.family === options.family) : addresses;
    const first = usable[0];
    if (!first) {
      callback(Object.assign(new Error(`No vetted address for ${hostname}`), { code: 'ENOTFOUND' }), '', 0);
    } else if (options.all) {
      callback(null, usable);
    } else {
      callback(null, first.address, first.family);
    }
  };
}

function sendRequest(
  url: URL,
  addresses: ResolvedAddress[],
  headers: Record<string, string>,
  signal: AbortSignal,
  post: { body: Buffer } | undefined,
): Promise<IncomingMessage> {
  const request = url.protocol === 'https:' ? httpsRequest : httpRequest;
  return new Promise((resolve, reject) => {
    const req = request({
      protocol: url.protocol,
      host: url.hostname.replace(/^\[(.*)\]$/, '$1'),
      port: url.port || undefined,
      path: `${url.pathname}${url.search}`,
      method: post ? 'POST' : 'GET',
      headers: {
        'user-agent': USER_AGENT,
        accept: '*/*',
        'accept-encoding': 'identity',
        ...(post ? { 'content-length': String(post.body.length) } : {}),
        ...headers,
      },
      lookup: pinnedLookup(addresses),
      // No pooled sockets: a kept-alive socket was vetted for an earlier request, not this one.
      agent: false,
      signal,
    });
    req.on('response', resolve);
    req.on('error', reject);
    req.end(post?.body);
  });
}

function readBody(
  res: IncomingMessage,
  url: URL,
  maxBytes: number,
  truncate: boolean,
): Promise<{ body: Buffer; truncated: boolean }> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let total = 0;
    let settled = false;
    const fail = (error: unknown) => {
      if (settled) return;
      settled = true;
      res.destroy();
      reject(error);
    };
    res.on('data', (chunk: Buffer) => {
      if (settled) return;
      if (total + chunk.length <= maxBytes) {
        total += chunk.length;
        chunks.push(chunk);
      } else if (truncate) {
        chunks.push(chunk.subarray(0, maxBytes - total));
        settled = true;
        // Nothing more is read: the connection goes, however much the server still had to send.
        res.destroy();
        resolve({ body: Buffer.concat(chunks, maxBytes), truncated: true });
      } else {
        fail(new FetchRefusedError('too_large', `Response body exceeds ${maxBytes} bytes`, url.href));
      }
    });
    res.on('end', () => {
      if (settled) return;
      settled = true;
      resolve({ body: Buffer.concat(chunks, total), truncated: false });
    });
    res.on('error', fail);
    res.on('close', () => fail(new Error('Connection closed before the response body was complete')));
  });
}

function parseUrl(input: string | URL, base?: URL): URL {
  try {
    return new URL(input, base);
  } catch (cause) {
    throw new FetchRefusedError(
      'invalid_url',
      `Not a valid URL: ${String(input).slice(0, 200)}`,
      String(input),
      undefined,
      { cause },
    );
  }
}

export async function guardedFetch(
  input: string | URL,
  options: GuardedFetchOptions = {},
): Promise<GuardedFetchResult> {
  const timeoutMs = options.timeoutMs ?? FETCH_DEFAULTS.timeoutMs;
  const maxBytes = options.maxBytes ?? FETCH_DEFAULTS.maxBytes;
  const maxRedirects = options.maxRedirects ?? FETCH_DEFAULTS.maxRedirects;
  const policy: Policy = {
    allowPrivate: options.allowPrivate ?? FETCH_DEFAULTS.allowPrivate,
    allowed: addressAllowList(options.allowAddresses ?? []),
    lookup: options.lookup ?? systemLookup,
  };
  const deadline = AbortSignal.timeout(timeoutMs);
  const signal = options.signal ? AbortSignal.any([deadline, options.signal]) : deadline;

  let url = parseUrl(input);
  try {
    for (let redirects = 0; ; redirects++) {
      if (url.protocol !== 'http:' && url.protocol !== 'https:') {
        throw new FetchRefusedError('scheme', `Only http and https URLs are fetched, not ${url.protocol}`, url.href);
      }
      const addresses = await vetHost(url, policy, signal);
      const res = await sendRequest(url, addresses, options.headers ?? {}, signal, options.post);
      const status = res.statusCode ?? 0;

      if (REDIRECTS.has(status)) {
        res.destroy();
        const location = res.headers.location;
        if (!location)
          throw new FetchRefusedError('bad_status', `Redirect ${status} without a Location header`, url.href, status);
        if (redirects >= maxRedirects || options.post) {
          throw new FetchRefusedError('too_many_redirects', `More than ${maxRedirects} redirects`, url.href, status);
        }
        url = parseUrl(location, url);
        continue;
      }
      if (status < 200 || status > 299) {
        res.destroy();
        throw new FetchRefusedError('bad_status', `Remote answered ${status}`, url.href, status);
      }
      const declared = Number(res.headers['content-length']);
      if (!options.truncate && Number.isFinite(declared) && declared > maxBytes) {
        res.destroy();
        throw new FetchRefusedError(
          'too_large',
          `Content-Length ${declared} exceeds ${maxBytes} bytes`,
          url.href,
          status,
        );
      }
      const { body, truncated } = await readBody(res, url, maxBytes, options.truncate ?? false);
      return { status, contentType: res.headers['content-type'] ?? null, body, truncated, finalUrl: url.href };
    }
  } catch (error) {
    if (error instanceof FetchRefusedError) throw error;
    if (options.signal?.aborted) throw options.signal.reason;
    if (deadline.aborted)
      throw new FetchRefusedError('timeout', `No complete response within ${timeoutMs} ms`, url.href, undefined, {
        cause: error,
      });
    const message = error instanceof Error ? error.message : String(error);
    throw new FetchRefusedError('network', `Fetch failed: ${message}`, url.href, undefined, { cause: error });
  }
}

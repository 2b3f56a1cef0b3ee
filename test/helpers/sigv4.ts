/**
 * An independent AWS Signature V4 verifier, written from AWS's documentation. s3rver accepts any
 * V4 signature without checking it, so the S3 tests put this in front of it: a request our backend
 * signs wrongly is refused here exactly as AWS or MinIO would refuse it.
 *
 * Both forms: the Authorization header, and query-string signing (presigned URLs: X-Amz-Algorithm,
 * X-Amz-Credential, X-Amz-Date, X-Amz-Expires, X-Amz-SignedHeaders, X-Amz-Signature), whose expiry
 * is checked against `now` and whose signed headers (Content-Type, Content-Length of a presigned
 * PUT) must arrive exactly as signed.
 */
import { createHash, createHmac, timingSafeEqual } from 'node:crypto';

export interface SignedRequestLike {
  method: string;
  /** Path and query exactly as sent on the wire. */
  url: string;
  headers: Record<string, string | string[] | undefined>;
}

export type SigV4Result = { ok: true; accessKeyId: string } | { ok: false; code: string; message: string };

const AUTH =
  /^AWS4-HMAC-SHA256 Credential=([^/]+)\/(\d{8})\/([^/]+)\/([^/]+)\/aws4_request,\s*SignedHeaders=([a-z0-9;-]+),\s*Signature=([0-9a-f]{64})$/;

const sha256 = (data: string | Buffer) => createHash('sha256').update(data).digest('hex');
const hmac = (key: string | Buffer, data: string) => createHmac('sha256', key).update(data).digest();

function rfc3986(value: string): string {
  return encodeURIComponent(value).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
}

function canonicalQuery(search: string): string {
  if (!search) return '';
  return search
    .split('&')
    .filter(Boolean)
    .map((pair) => {
      const [k = '', v = ''] = pair.split('=');
      return [rfc3986(decodeURIComponent(k)), rfc3986(decodeURIComponent(v))] as const;
    })
    .sort(([ak, av], [bk, bv]) => (ak === bk ? (av < bv ? -1 : 1) : ak < bk ? -1 : 1))
    .map(([k, v]) => `${k}=${v}`)
    .join('&');
}

function header(headers: SignedRequestLike['headers'], name: string): string | undefined {
  const value = headers[name];
  return Array.isArray(value) ? value.join(',') : value;
}

/** The query parameters of a request URL, decoded, in order. */
function queryParams(search: string): Array<[string, string]> {
  return search
    .split('&')
    .filter(Boolean)
    .map((pair) => {
      const at = pair.indexOf('=');
      const k = at < 0 ? pair : pair.slice(0, at);
      const v = at < 0 ? '' : pair.slice(at + 1);
      return [decodeURIComponent(k.replace(/\+/g, ' ')), decodeURIComponent(v.replace(/\+/g, ' '))];
    });
}

/** 20130524T000000Z → epoch ms. */
function amzDateMs(value: string): number {
  const m = /^(\d{4})(\d{2})(\d{2})T(\d{2})(\d{2})(\d{2})Z$/.exec(value);
  return m ? Date.UTC(Number(m[1]), Number(m[2]) - 1, Number(m[3]), Number(m[4]), Number(m[5]), Number(m[6])) : NaN;
}

interface Signed {
  accessKeyId: string;
  date: string;
  region: string;
  service: string;
  signedHeaders: string;
  signature: string;
  amzDate: string;
  payloadHash: string;
  /** The query string that goes into the canonical request (the signature itself left out for query signing). */
  search: string;
}

function fromHeader(request: SignedRequestLike, body: Buffer, search: string): Signed | SigV4Result {
  const auth = header(request.headers, 'authorization');
  const match = auth ? AUTH.exec(auth) : null;
  if (!match) return { ok: false, code: 'AccessDenied', message: 'missing or malformed SigV4 Authorization header' };
  const [, accessKeyId = '', date = '', region = '', service = '', signedHeaders = '', signature = ''] = match;
  const payloadHash = header(request.headers, 'x-amz-content-sha256');
  if (!payloadHash) return { ok: false, code: 'InvalidRequest', message: 'missing x-amz-content-sha256' };
  if (payloadHash !== 'UNSIGNED-PAYLOAD' && payloadHash !== sha256(body)) {
    return { ok: false, code: 'XAmzContentSHA256Mismatch', message: 'payload hash does not match the body' };
  }
  return {
    accessKeyId,
    date,
    region,
    service,
    signedHeaders,
    signature,
    amzDate: header(request.headers, 'x-amz-date') ?? '',
    payloadHash,
    search,
  };
}

function fromQuery(request: SignedRequestLike, search: string, now: number): Signed | SigV4Result {
  const params = queryParams(search);
  const get = (name: string) => params.find(([k]) => k === name)?.[1];
  if (get('X-Amz-Algorithm') !== 'AWS4-HMAC-SHA256')
    return {
      ok: false,
      code: 'AuthorizationQueryParametersError',
      message: 'X-Amz-Algorithm must be AWS4-HMAC-SHA256',
    };
  const credential = /^([^/]+)\/(\d{8})\/([^/]+)\/([^/]+)\/aws4_request$/.exec(get('X-Amz-Credential') ?? '');
  const amzDate = get('X-Amz-Date') ?? '';
  const expires = Number(get('X-Amz-Expires'));
  const signedHeaders = get('X-Amz-SignedHeaders') ?? '';
  const signature = get('X-Amz-Signature') ?? '';
  if (!credential || !/^[a-z0-9;-]+$/.test(signedHeaders) || !/^[0-9a-f]{64}$/.test(signature)) {
    return {
      ok: false,
      code: 'AuthorizationQueryParametersError',
      message: 'malformed query-string authentication parameters',
    };
  }
  if (!Number.isInteger(expires) || expires < 1 || expires > 604_800) {
    return {
      ok: false,
      code: 'AuthorizationQueryParametersError',
      message: 'X-Amz-Expires must be between 1 and 604800 seconds',
    };
  }
  const signedAt = amzDateMs(amzDate);
  if (Number.isNaN(signedAt))
    return { ok: false, code: 'AuthorizationQueryParametersError', message: 'malformed X-Amz-Date' };
  if (now > signedAt + expires * 1000) return { ok: false, code: 'AccessDenied', message: 'Request has expired' };
  const [, accessKeyId = '', date = '', region = '', service = ''] = credential;
  // The canonical query string holds every parameter except the signature.
  const unsigned = search
    .split('&')
    .filter((pair) => pair && !pair.startsWith('X-Amz-Signature='))
    .join('&');
  const payloadHash = header(request.headers, 'x-amz-content-sha256') ?? 'UNSIGNED-PAYLOAD';
  return { accessKeyId, date, region, service, signedHeaders, signature, amzDate, payloadHash, search: unsigned };
}

export function verifySigV4(
  request: SignedRequestLike,
  body: Buffer,
  secrets: ReadonlyMap<string, string>,
  now: number = Date.now(),
): SigV4Result {
  const queryAt = request.url.indexOf('?');
  const path = queryAt < 0 ? request.url : request.url.slice(0, queryAt);
  const search = queryAt < 0 ? '' : request.url.slice(queryAt + 1);
  const signed = /(^|&)X-Amz-Signature=/.test(search)
    ? fromQuery(request, search, now)
    : fromHeader(request, body, search);
  if ('ok' in signed) return signed;
  const { accessKeyId, date, region, service, signedHeaders, signature, amzDate, payloadHash } = signed;
  const secret = secrets.get(accessKeyId);
  if (secret === undefined)
    return { ok: false, code: 'InvalidAccessKeyId', message: `unknown access key ${accessKeyId}` };
  if (!amzDate.startsWith(date))
    return { ok: false, code: 'AccessDenied', message: 'x-amz-date does not match the credential scope' };
  const names = signedHeaders.split(';');
  if (!names.includes('host')) return { ok: false, code: 'AccessDenied', message: 'host must be signed' };

  const canonicalHeaders = names
    .map((name) => `${name}:${(header(request.headers, name) ?? '').trim().replace(/\s+/g, ' ')}\n`)
    .join('');
  const canonicalRequest = [
    request.method,
    path,
    canonicalQuery(signed.search),
    canonicalHeaders,
    signedHeaders,
    payloadHash,
  ].join('\n');
  const scope = `${date}/${region}/${service}/aws4_request`;
  const stringToSign = ['AWS4-HMAC-SHA256', amzDate, scope, sha256(canonicalRequest)].join('\n');
  const signingKey = hmac(hmac(hmac(hmac(`AWS4${secret}`, date), region), service), 'aws4_request');
  const expected = createHmac('sha256', signingKey).update(stringToSign).digest();
  if (!timingSafeEqual(expected, Buffer.from(signature, 'hex'))) {
    return { ok: false, code: 'SignatureDoesNotMatch', message: 'the request signature does not match' };
  }
  return { ok: true, accessKeyId };
}

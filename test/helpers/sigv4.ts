/**
 * An independent AWS Signature V4 verifier, written from AWS's documentation. s3rver accepts any
 * V4 signature without checking it, so the S3 tests put this in front of it: a request our backend
 * signs wrongly is refused here exactly as AWS or MinIO would refuse it.
 */
import { createHash, createHmac, timingSafeEqual } from 'node:crypto';

export interface SignedRequestLike {
  method: string;
  /** Path and query exactly as sent on the wire. */
  url: string;
  headers: Record<string, string | string[] | undefined>;
}

export type SigV4Result = { ok: true; accessKeyId: string } | { ok: false; code: string; message: string };

const AUTH = /^AWS4-HMAC-SHA256 Credential=([^/]+)\/(\d{8})\/([^/]+)\/([^/]+)\/aws4_request,\s*SignedHeaders=([a-z0-9;-]+),\s*Signature=([0-9a-f]{64})$/;

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

export function verifySigV4(request: SignedRequestLike, body: Buffer, secrets: ReadonlyMap<string, string>): SigV4Result {
  const auth = header(request.headers, 'authorization');
  const match = auth ? AUTH.exec(auth) : null;
  if (!match) return { ok: false, code: 'AccessDenied', message: 'missing or malformed SigV4 Authorization header' };
  const [, accessKeyId = '', date = '', region = '', service = '', signedHeaders = '', signature = ''] = match;
  const secret = secrets.get(accessKeyId);
  if (secret === undefined) return { ok: false, code: 'InvalidAccessKeyId', message: `unknown access key ${accessKeyId}` };
  const amzDate = header(request.headers, 'x-amz-date') ?? '';
  if (!amzDate.startsWith(date)) return { ok: false, code: 'AccessDenied', message: 'x-amz-date does not match the credential scope' };
  const names = signedHeaders.split(';');
  if (!names.includes('host')) return { ok: false, code: 'AccessDenied', message: 'host must be signed' };
  const payloadHash = header(request.headers, 'x-amz-content-sha256');
  if (!payloadHash) return { ok: false, code: 'InvalidRequest', message: 'missing x-amz-content-sha256' };
  if (payloadHash !== 'UNSIGNED-PAYLOAD' && payloadHash !== sha256(body)) {
    return { ok: false, code: 'XAmzContentSHA256Mismatch', message: 'payload hash does not match the body' };
  }

  const queryAt = request.url.indexOf('?');
  const path = queryAt < 0 ? request.url : request.url.slice(0, queryAt);
  const search = queryAt < 0 ? '' : request.url.slice(queryAt + 1);
  const canonicalHeaders = names.map((name) => `${name}:${(header(request.headers, name) ?? '').trim().replace(/\s+/g, ' ')}\n`).join('');
  const canonicalRequest = [request.method, path, canonicalQuery(search), canonicalHeaders, signedHeaders, payloadHash].join('\n');
  const scope = `${date}/${region}/${service}/aws4_request`;
  const stringToSign = ['AWS4-HMAC-SHA256', amzDate, scope, sha256(canonicalRequest)].join('\n');
  const signingKey = hmac(hmac(hmac(hmac(`AWS4${secret}`, date), region), service), 'aws4_request');
  const expected = createHmac('sha256', signingKey).update(stringToSign).digest();
  if (!timingSafeEqual(expected, Buffer.from(signature, 'hex'))) {
    return { ok: false, code: 'SignatureDoesNotMatch', message: 'the request signature does not match' };
  }
  return { ok: true, accessKeyId };
}

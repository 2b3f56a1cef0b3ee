/**
 * /storage/v1/objects/{objectKey}: the filesystem backend's stand-in for S3 presigned URLs. The URL
 * is the credential (signed by server/storage/signing.ts); uploads are streamed to disk against the
 * signed size, downloads streamed from it. With S3-compatible storage (or none) no such URL is ever
 * issued, so both answer 404.
 */
import type { HandlerMap, RequestContext } from '../../http/handlers.ts';
import { badRequest, forbidden, notFound } from '../../core/errors.ts';
import { ApiError, preconditionFailed } from '../../http/errors.ts';
import { declaredLength, lingerThenClose } from '../../http/uploads.ts';
import {
  ALLOWED_IMAGE_TYPES,
  contentMatchesType,
  FilesystemObjectStorage,
  InvalidObjectKeyError,
  SignedUrlError,
  UploadRejectedError,
  urlSegmentToKey,
  USER_CONTENT_HEADERS,
} from '../../storage/index.ts';

function signedStorage(ctx: RequestContext): FilesystemObjectStorage {
  const storage = ctx.deps.storage;
  if (!storage) throw preconditionFailed('Object storage is not configured on this server');
  if (!(storage instanceof FilesystemObjectStorage)) throw notFound('Object not found');
  return storage;
}

/** Signature and expiry problems are 403, as S3 answers them; a key we could never have signed is one too. */
function verifying(check: () => void): void {
  try {
    check();
  } catch (err) {
    if (err instanceof SignedUrlError) throw forbidden(err.message);
    throw err;
  }
}

function keyOf(segment: string): string {
  return urlSegmentToKey(segment);
}

/** The media type of a header value, without parameters, lower-cased. */
function essence(value: string | undefined): string {
  return (value ?? '').split(';')[0]!.trim().toLowerCase();
}

/** Types a browser may show in place; everything else is offered as a download. */
const INLINE_TYPES = new Set<string>([...ALLOWED_IMAGE_TYPES, 'text/plain']);

export const storageHandlers = {
  uploadStoredObject: async ({ path, query }, ctx) => {
    const storage = signedStorage(ctx);
    const key = keyOf(path.objectKey);
    const contentType = String(query.contentType);
    const byteSize = Number(query.byteSize);
    verifying(() =>
      storage.verifySignedUpload(
        { key, expires: Number(query.expires), contentType, byteSize, signature: String(query.signature) },
        ctx.deps.clock(),
      ),
    );
    if (essence(ctx.req.headers['content-type']) !== contentType.toLowerCase())
      throw forbidden(`Content-Type must be ${contentType}, as signed`);
    const refuse = (status: 400 | 413, code: 'BAD_REQUEST' | 'PAYLOAD_TOO_LARGE', message: string) =>
      new ApiError(status, code, message, lingerThenClose(ctx.req));
    const length = declaredLength(ctx.req);
    if (length !== undefined && length > byteSize)
      throw refuse(413, 'PAYLOAD_TOO_LARGE', `Upload exceeds the signed size of ${byteSize} bytes`);
    if (length !== undefined && length < byteSize)
      throw refuse(400, 'BAD_REQUEST', `Content-Length is ${length}; the URL was signed for ${byteSize} bytes`);
    try {
      const { etag } = await storage.putStream(key, ctx.req, contentType, {
        byteSize,
        verifyHead: (head) => contentMatchesType(contentType, head),
      });
      return { status: 200, headers: { ETag: etag } };
    } catch (err) {
      if (err instanceof UploadRejectedError) {
        if (err.reason === 'too_large') throw refuse(413, 'PAYLOAD_TOO_LARGE', err.message);
        if (err.reason === 'too_short') throw refuse(400, 'BAD_REQUEST', err.message);
        throw new ApiError(415, 'UNSUPPORTED_MEDIA_TYPE', err.message);
      }
      if (err instanceof InvalidObjectKeyError) throw badRequest('objectKey is not a valid object key');
      throw err;
    }
  },

  downloadStoredObject: async ({ path, query }, ctx) => {
    const storage = signedStorage(ctx);
    const key = keyOf(path.objectKey);
    verifying(() =>
      storage.verifySignedDownload(
        { key, expires: Number(query.expires), signature: String(query.signature) },
        ctx.deps.clock(),
      ),
    );
    const object = await storage.getStream(key);
    if (!object) throw notFound('Object not found');
    const type = essence(object.contentType);
    return {
      status: 200,
      body: object.body,
      contentType: object.contentType,
      headers: {
        ETag: object.etag,
        'Content-Length': String(object.size),
        'Cache-Control': 'private, no-cache',
        ...USER_CONTENT_HEADERS,
        ...(INLINE_TYPES.has(type) ? {} : { 'Content-Disposition': 'attachment' }),
      },
    };
  },
} satisfies Partial<HandlerMap>;

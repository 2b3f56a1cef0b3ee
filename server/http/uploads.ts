/** Request bodies a handler reads itself (`x-streamed-body` operations): their declared length, refusing one mid-way, and receiving one under a limit through a sink. */
import { createGunzip } from 'node:zlib';
import type { Request } from 'express';
import { BodyRefused, type BodySink } from '../core/bodySink.ts';
import { ApiError } from './errors.ts';

/** The request's declared length, when it sent one (chunked uploads do not). */
export function declaredLength(req: Request): number | undefined {
  const raw = req.headers['content-length'];
  return raw !== undefined && /^\d+$/.test(raw) ? Number(raw) : undefined;
}

/** How long, and how many bytes of a refused upload, are read and discarded before the connection is cut. */
const LINGER_MS = 5_000;
const LINGER_BYTES = 8 * 1_048_576;

/**
 * An upload refused while its body may still be arriving. The answer goes out at once and the
 * connection is not reused (`Connection: close`). Node would close the socket the moment the answer
 * is flushed; with the client still writing, the data arriving at a closed socket makes the kernel
 * reset the connection, and the reset can discard the answer before the client reads it. So the
 * socket is only half-closed after the answer, the rest of the body is read and thrown away, and
 * the socket is destroyed when the body ends, after LINGER_BYTES, or after LINGER_MS, whichever
 * comes first. Never drained to the end of an arbitrarily large body, never buffered.
 */
export function lingerThenClose(req: Request): Record<string, string> {
  const close = { Connection: 'close' };
  if (req.readableEnded) return close;
  const socket = req.socket;
  const cut = () => socket.destroy();
  const timer = setTimeout(cut, LINGER_MS);
  timer.unref();
  let discarded = 0;
  req.on('data', (chunk: Buffer) => {
    discarded += chunk.length;
    if (discarded > LINGER_BYTES) cut();
  });
  req.once('end', () => {
    clearTimeout(timer);
    if (socket.writableFinished) cut();
    else socket.once('finish', cut);
  });
  // What Node calls once a `Connection: close` answer is out: end our side only, keep reading.
  socket.destroySoon = () => {
    socket.end();
  };
  req.resume();
  return close;
}

/** The media type of a header value, without parameters, lower-cased. */
function essence(value: string | undefined): string {
  return (value ?? '').split(';')[0]!.trim().toLowerCase();
}

/**
 * The body, at most `maxBytes` of it (after decoding), handed to `sink` chunk by chunk with its
 * pauses respected, so nothing holds more than the sink keeps. 413 `PAYLOAD_TOO_LARGE` as soon as
 * the declared length or the bytes received pass the limit (the rest is discarded by
 * lingerThenClose, never buffered); a sink's BodyRefused is a 400 sent the same way. With
 * `contentType`, a body labelled otherwise is 415. `Content-Encoding` may be identity or gzip (a
 * large JSON export compresses tenfold); any other is 415.
 */
export function receiveBody<T>(
  req: Request,
  maxBytes: number,
  options: { contentType?: string },
  sink: BodySink<T>,
): Promise<T> {
  const refuse = (
    status: 400 | 413 | 415,
    code: 'BAD_REQUEST' | 'PAYLOAD_TOO_LARGE' | 'UNSUPPORTED_MEDIA_TYPE',
    message: string,
  ) => {
    sink.abort();
    return new ApiError(status, code, message, lingerThenClose(req));
  };
  const tooLarge = () => refuse(413, 'PAYLOAD_TOO_LARGE', `Request body exceeds ${maxBytes} bytes`);
  if (options.contentType && essence(req.headers['content-type']) !== options.contentType)
    return Promise.reject(refuse(415, 'UNSUPPORTED_MEDIA_TYPE', `Content-Type must be ${options.contentType} here`));
  const encoding = essence(req.headers['content-encoding']) || 'identity';
  if (encoding !== 'identity' && encoding !== 'gzip' && encoding !== 'x-gzip')
    return Promise.reject(
      refuse(
        415,
        'UNSUPPORTED_MEDIA_TYPE',
        `Content-Encoding ${encoding.replace(/[^a-z0-9-]/g, '').slice(0, 40)} is not supported: send the body as it is, or gzip it`,
      ),
    );
  const length = declaredLength(req);
  if (encoding === 'identity' && length !== undefined && length > maxBytes) return Promise.reject(tooLarge());
  const source: NodeJS.ReadableStream = encoding === 'identity' ? req : req.pipe(createGunzip());
  return new Promise((resolve, reject) => {
    let size = 0;
    const stop = () => {
      source.off('data', onData);
      source.off('end', onEnd);
      source.off('error', onError);
      req.off('close', onClose);
    };
    /** Refused while the body may still be arriving: stop reading it here, lingerThenClose takes over. */
    const refuseNow = (make: () => ApiError) => {
      stop();
      if (source !== req) req.unpipe();
      req.pause();
      reject(make());
    };
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size > maxBytes) return refuseNow(tooLarge);
      let more: boolean;
      try {
        more = sink.write(chunk);
      } catch (err) {
        if (!(err instanceof BodyRefused)) {
          stop();
          sink.abort();
          return reject(err);
        }
        return refuseNow(() => refuse(400, 'BAD_REQUEST', err.message));
      }
      if (!more) {
        source.pause();
        sink.onDrain(() => source.resume());
      }
    };
    const onEnd = () => {
      stop();
      sink.finish(size).then(resolve, (err: unknown) => {
        sink.abort();
        reject(err);
      });
    };
    const onError = (err: Error) => {
      stop();
      sink.abort();
      // A body that is not the gzip it says it is.
      reject(
        source === req
          ? err
          : new ApiError(400, 'BAD_REQUEST', 'Request body does not match its Content-Encoding (gzip)'),
      );
    };
    const onClose = () => {
      if (req.readableEnded) return;
      stop();
      sink.abort();
      reject(new ApiError(400, 'BAD_REQUEST', 'The request body ended early'));
    };
    source.on('data', onData);
    source.on('end', onEnd);
    source.on('error', onError);
    req.on('close', onClose);
  });
}

/**
 * Where a request body goes as it arrives: the HTTP edge (server/http/uploads.ts, receiveBody)
 * reads it under its limits and hands it to a sink an area provides (an import's temporary file),
 * so the area never touches the request.
 */

/**
 * `write` returns false to ask for a pause until `onDrain` calls back; it throws BodyRefused to
 * refuse the body mid-way (its bytes are not what the route takes).
 */
export interface BodySink<T> {
  write(chunk: Buffer): boolean;
  onDrain(resume: () => void): void;
  /** The body ended with `size` bytes: the result, or an error (an ApiError for the client). */
  finish(size: number): Promise<T>;
  /** The body was refused or broke off: release what was kept. */
  abort(): void;
}

/** Thrown by a sink's write: the body is refused with a 400 naming why, before it has all arrived. */
export class BodyRefused extends Error {}

/** Reads the request's body into a sink (the edge's receiveBody, bound to the request and its limit). */
export type ReceiveBody = <T>(sink: BodySink<T>) => Promise<T>;

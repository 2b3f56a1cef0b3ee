import { badRequest, unavailable } from '../core/errors.ts';
import { hasScope, SCOPES } from '../core/scopes.ts';
import { ApiError } from '../http/errors.ts';
import type { HandlerMap } from '../http/handlers.ts';
import { USER_CONTENT_HEADERS } from '../storage/serve.ts';
import { TooManyStreams } from './stream.ts';

const EVENT_ID = /^[0-9]{1,19}$/;

export const eventsHandlers = {
  streamEvents: async ({ query }, ctx) => {
    const hub = ctx.deps.eventHub;
    if (!hub) throw unavailable('This server does not serve event streams');
    const auth = ctx.auth!;
    // The header wins: an EventSource resends the query it was opened with and the id it has got to.
    const cursor = ctx.req.get('last-event-id') ?? query.after;
    if (cursor !== undefined && !EVENT_ID.test(cursor))
      throw badRequest('Last-Event-ID must be an event id (decimal digits)');
    const after = cursor === undefined ? null : Number(cursor);
    if (after !== null && !Number.isSafeInteger(after))
      throw badRequest('Last-Event-ID is not an event id of this log');
    try {
      const body = await hub.open({
        accountId: auth.accountId,
        keyId: auth.keyId,
        areas: SCOPES.filter((scope) => hasScope(auth.scopes, scope, 'read')),
        types: query.types ? query.types.split(',') : null,
        after,
      });
      return {
        status: 200,
        contentType: 'text/event-stream',
        // Event data is the account's own text: never sniffed or run if opened as a page.
        headers: { ...USER_CONTENT_HEADERS, 'Cache-Control': 'no-store', 'X-Accel-Buffering': 'no' },
        body,
      };
    } catch (err) {
      if (!(err instanceof TooManyStreams)) throw err;
      throw new ApiError(
        429,
        'RATE_LIMITED',
        `This key has ${ctx.deps.config.eventsMaxStreamsPerKey} event streams open already (EVENTS_MAX_STREAMS_PER_KEY); close one first`,
      );
    }
  },
} satisfies Partial<HandlerMap>;

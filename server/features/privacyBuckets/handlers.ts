import type { HandlerMap } from '../../http/handlers.ts';

export const privacyBucketsHandlers = {} satisfies Partial<HandlerMap>;

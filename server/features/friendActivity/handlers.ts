import type { HandlerMap } from '../../http/handlers.ts';

export const friendActivityHandlers = {} satisfies Partial<HandlerMap>;

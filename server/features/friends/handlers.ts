import type { HandlerMap } from '../../http/handlers.ts';

export const friendsHandlers = {} satisfies Partial<HandlerMap>;

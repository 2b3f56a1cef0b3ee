import type { HandlerMap } from '../../http/handlers.ts';

export const friendMembersHandlers = {} satisfies Partial<HandlerMap>;

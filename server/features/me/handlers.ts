import type { HandlerMap } from '../../http/handlers.ts';
import { WINDOW_MS } from '../../http/rateLimit.ts';
import { describeKey } from '../accounts/index.ts';

export const meHandlers = {
  getMe: async (_input, ctx) => {
    const limit = ctx.rateLimit!;
    return {
      status: 200,
      body: {
        ...(await describeKey(ctx.service())),
        rateLimit: {
          limit: limit.limit,
          remaining: limit.remaining,
          resetSeconds: limit.resetSeconds,
          windowSeconds: WINDOW_MS / 1000,
        },
      },
    };
  },
} satisfies Partial<HandlerMap>;

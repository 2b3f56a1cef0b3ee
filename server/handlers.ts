/** The operationId → handler map for the whole contract. Missing or extra entries fail to compile. */
import { adminHandlers } from './features/admin/handlers.ts';
import { appearanceHandlers } from './features/appearance/handlers.ts';
import { opsHandlers } from './features/ops/handlers.ts';
import type { HandlerMap, OperationId } from './http/handlers.ts';

export const handlers = {
  ...opsHandlers,
  ...adminHandlers,
  ...appearanceHandlers,
} satisfies HandlerMap;

// Spread members escape excess-property checks, so orphaned handlers are caught here.
type Orphaned = Exclude<keyof typeof handlers, OperationId>;
const noOrphans: [Orphaned] extends [never] ? true : Orphaned = true;
void noOrphans;

/** The operationId → handler map for the whole contract. Missing or extra entries fail to compile. */
import { eventsHandlers } from './events/handlers.ts';
import { adminHandlers } from './features/admin/handlers.ts';
import { appearanceHandlers } from './features/appearance/handlers.ts';
import { entriesHandlers } from './features/entries/handlers.ts';
import { customFieldsHandlers } from './features/customFields/handlers.ts';
import { frontHandlers } from './features/front/handlers.ts';
import { friendsHandlers } from './features/friends/handlers.ts';
import { friendActivityHandlers } from './features/friendActivity/handlers.ts';
import { friendMembersHandlers } from './features/friendMembers/handlers.ts';
import { groupsHandlers } from './features/groups/handlers.ts';
import { memberStatusesHandlers } from './features/memberStatuses/handlers.ts';
import { messagingHandlers } from './features/messaging/handlers.ts';
import { meHandlers } from './features/me/handlers.ts';
import { membersHandlers } from './features/members/handlers.ts';
import { systemsHandlers } from './features/systems/handlers.ts';
import { terminologyHandlers } from './features/terminology/handlers.ts';
import { trashHandlers } from './features/trash/handlers.ts';
import { opsHandlers } from './features/ops/handlers.ts';
import { portabilityHandlers } from './features/portability/handlers.ts';
import { privacyBucketsHandlers } from './features/privacyBuckets/handlers.ts';
import { socialHandlers } from './features/social/handlers.ts';
import { storageHandlers } from './features/storage/handlers.ts';
import { webhooksHandlers } from './features/webhooks/handlers.ts';
import type { HandlerMap, OperationId } from './http/handlers.ts';

export const handlers = {
  ...opsHandlers,
  ...adminHandlers,
  ...meHandlers,
  ...appearanceHandlers,
  ...systemsHandlers,
  ...membersHandlers,
  ...groupsHandlers,
  ...customFieldsHandlers,
  ...memberStatusesHandlers,
  ...messagingHandlers,
  ...entriesHandlers,
  ...trashHandlers,
  ...terminologyHandlers,
  ...frontHandlers,
  ...storageHandlers,
  ...friendsHandlers,
  ...friendMembersHandlers,
  ...friendActivityHandlers,
  ...privacyBucketsHandlers,
  ...socialHandlers,
  ...portabilityHandlers,
  ...eventsHandlers,
  ...webhooksHandlers,
} satisfies HandlerMap;

// Spread members escape excess-property checks, so orphaned handlers are caught here.
type Orphaned = Exclude<keyof typeof handlers, OperationId>;
const noOrphans: [Orphaned] extends [never] ? true : Orphaned = true;
void noOrphans;

/**
 * The POSTs whose Idempotency-Key is taken by their one write, which stores the answer under it
 * (server/http/pipeline.ts, runKeyedInWrite): each writes only through oneStatement() with its answer
 * or, in its rarer variants, through inTransaction() (it then runs again in a transaction). An
 * answer that shows more than the request (a message, a guestbook post, a poll's state) is built
 * from a read made first, which the statement checks: when it no longer holds, the statement writes
 * nothing and the request runs again in a transaction (StaleAnswer), as a link's does when its
 * profile changed.
 */
export const keyedInWrite: ReadonlySet<OperationId> = new Set<OperationId>([
  'createEntry',
  'startFronting',
  'createMember',
  'createGroup',
  'createFolder',
  'createMemberStatus',
  'createSideSystem',
  'sendMessage',
  'createPrivacyBucket',
  'createWebhook',
  'createSocialLink',
  'createFriendEntry',
  'postGuestbookMessage',
  'votePoll',
]);

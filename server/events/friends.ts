/**
 * What a friend's stream may carry of an account's events, decided when each is sent: the access
 * engine reads the friendship and the privacy buckets as they are then (docs/events.md), so a
 * removed bucket or friendship stops the flow at once. Only front changes are shared so far, as the
 * friend front read shows them (`GET /api/v1/friends/{id}/front`).
 */
import { forFriend, friendInStatement } from '../access/index.ts';
import type { ServerContext } from '../core/context.ts';
import { DomainError } from '../core/errors.ts';
import { friendFront } from '../features/friendActivity/index.ts';
import { acceptedFriendIds } from '../features/friends/index.ts';
import type { Event } from './log.ts';
import type { FriendViews } from './stream.ts';

export function friendViews(base: () => ServerContext): FriendViews {
  return {
    friendIds: (viewerId) => acceptedFriendIds(base().db, viewerId),
    view: async (viewerId, row): Promise<Event | null> => {
      if (row.type !== 'front.changed') return null;
      // Without a bucket that shows it the front, the viewer learns nothing, not even that it changed.
      const access = await forFriend(base().db, viewerId, row.account_id);
      if (!access || access.grants.front.read.length === 0) return null;
      let front: Awaited<ReturnType<typeof friendFront>>;
      try {
        front = await friendFront({ ...base(), access: friendInStatement(viewerId, row.account_id) });
      } catch (err) {
        // No friendship (any more), or a block: nothing, not even that there was a change.
        if (err instanceof DomainError && err.kind === 'not_found') return null;
        throw err;
      }
      return {
        id: String(row.id),
        type: 'friend.front.changed',
        occurredAt: row.occurred_at,
        accountId: row.account_id,
        actor: { kind: 'system', id: null },
        data: { friendUserId: row.account_id, front },
      };
    },
  };
}

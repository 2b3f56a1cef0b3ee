/**
 * What a friend's stream may carry of an account's events, decided when each is sent: the access
 * engine reads the friendship and the privacy buckets as they are then (docs/events.md), so a
 * removed bucket or friendship stops the flow at once. Front changes are shared as the friend
 * front read shows them (`GET /api/v1/friends/{id}/front`), member changes as the friend member read
 * shows the member (`GET /api/v1/friends/{id}/members/{memberId}`), social section changes as the
 * friend social read shows the section (`GET /api/v1/friends/{id}/social`).
 */
import { forFriend, friendInStatement } from '../access/index.ts';
import type { ServerContext } from '../core/context.ts';
import { DomainError } from '../core/errors.ts';
import { friendFront } from '../features/friendActivity/index.ts';
import { friendMember } from '../features/friendMembers/index.ts';
import { friendSocial } from '../features/social/index.ts';
import { acceptedFriendIds } from '../features/friends/index.ts';
import type { Event, EventRow } from './log.ts';
import type { FriendView, FriendViews } from './stream.ts';

type FriendEvent = Extract<Event, { type: `friend.${string}` }>;

/**
 * A friend event of `row` (the friend's account, its id as the cursor, the actor left out as
 * `system`) about `subject`, the thing whose last view sent a stream keeps.
 */
function friendEvent<T extends FriendEvent['type']>(
  row: EventRow,
  subject: string,
  type: T,
  data: Extract<FriendEvent, { type: T }>['data'],
): FriendView {
  const event = {
    id: String(row.id),
    type,
    occurredAt: row.occurred_at,
    accountId: row.account_id,
    actor: { kind: 'system', id: null },
    data,
  };
  return { event: event as Event, subject };
}

/** The read's answer, or null when it is not found for the viewer (no friendship any more, a block, hidden). */
async function orNothing<T>(read: Promise<T>): Promise<T | null> {
  try {
    return await read;
  } catch (err) {
    if (err instanceof DomainError && err.kind === 'not_found') return null;
    throw err;
  }
}

export function friendViews(base: () => ServerContext): FriendViews {
  return {
    friendIds: (viewerId) => acceptedFriendIds(base().db, viewerId),
    view: async (viewerId, row, areas): Promise<FriendView | null> => {
      if (row.type.startsWith('member.')) return memberView(base, viewerId, row, row.data.memberId);
      // A member's buckets changed: it may have come into (or stayed in) the viewer's sight.
      if (row.type === 'privacy_bucket.assigned' && row.data.kind === 'member')
        return memberView(base, viewerId, row, row.data.id);
      // The friend social read needs `social:read` besides `friends:read`.
      if (row.type === 'social_profile.changed')
        return areas.includes('social') ? socialView(base, viewerId, row) : null;
      if (row.type !== 'front.changed') return null;
      // Without a bucket that shows it the front, the viewer learns nothing, not even that it changed.
      const access = await forFriend(base().db, viewerId, row.account_id);
      if (!access || access.grants.front.read.length === 0) return null;
      const front = await orNothing(friendFront({ ...base(), access: friendInStatement(viewerId, row.account_id) }));
      return front && friendEvent(row, 'front', 'friend.front.changed', { friendUserId: row.account_id, front });
    },
  };
}

/** A member's change as the viewer may see the member now; null when it may not see the member at all. */
async function memberView(
  base: () => ServerContext,
  viewerId: string,
  row: EventRow,
  memberId: unknown,
): Promise<FriendView | null> {
  if (typeof memberId !== 'string') return null;
  const access = await forFriend(base().db, viewerId, row.account_id);
  if (!access || access.grants.members_view.read.length === 0) return null;
  // Hidden from this viewer, trashed or gone: nothing, not even its id.
  const member = await orNothing(friendMember({ ...base(), access }, memberId));
  return (
    member &&
    friendEvent(row, `member ${memberId}`, 'friend.member.changed', { friendUserId: row.account_id, memberId, member })
  );
}

/** The friend's social section as the viewer may see it now; null without an accepted friendship. */
async function socialView(base: () => ServerContext, viewerId: string, row: EventRow): Promise<FriendView | null> {
  const access = await forFriend(base().db, viewerId, row.account_id);
  if (!access) return null;
  const social = await friendSocial({ ...base(), access });
  return friendEvent(row, 'social', 'friend.social.changed', { friendUserId: row.account_id, social });
}

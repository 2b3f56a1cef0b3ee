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
import type { FriendViews } from './stream.ts';

export function friendViews(base: () => ServerContext): FriendViews {
  return {
    friendIds: (viewerId) => acceptedFriendIds(base().db, viewerId),
    view: async (viewerId, row): Promise<Event | null> => {
      if (row.type.startsWith('member.')) return memberView(base, viewerId, row, row.data.memberId);
      // A member's buckets changed: it may have come into (or stayed in) the viewer's sight.
      if (row.type === 'privacy_bucket.assigned' && row.data.kind === 'member')
        return memberView(base, viewerId, row, row.data.id);
      if (row.type === 'social_profile.changed') return socialView(base, viewerId, row);
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

/** A member's change as the viewer may see the member now; null when it may not see the member at all. */
async function memberView(
  base: () => ServerContext,
  viewerId: string,
  row: EventRow,
  memberId: unknown,
): Promise<Event | null> {
  if (typeof memberId !== 'string') return null;
  const access = await forFriend(base().db, viewerId, row.account_id);
  if (!access || access.grants.members_view.read.length === 0) return null;
  let member: Awaited<ReturnType<typeof friendMember>>;
  try {
    member = await friendMember({ ...base(), access }, memberId);
  } catch (err) {
    // Hidden from this viewer, trashed or gone: nothing, not even its id.
    if (err instanceof DomainError && err.kind === 'not_found') return null;
    throw err;
  }
  return {
    id: String(row.id),
    type: 'friend.member.changed',
    occurredAt: row.occurred_at,
    accountId: row.account_id,
    actor: { kind: 'system', id: null },
    data: { friendUserId: row.account_id, memberId, member },
  };
}

/** The friend's social section as the viewer may see it now; null without an accepted friendship. */
async function socialView(base: () => ServerContext, viewerId: string, row: EventRow): Promise<Event | null> {
  const access = await forFriend(base().db, viewerId, row.account_id);
  if (!access) return null;
  const social = await friendSocial({ ...base(), access });
  return {
    id: String(row.id),
    type: 'friend.social.changed',
    occurredAt: row.occurred_at,
    accountId: row.account_id,
    actor: { kind: 'system', id: null },
    data: { friendUserId: row.account_id, social },
  };
}

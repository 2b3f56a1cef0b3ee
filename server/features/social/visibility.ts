/**
 * Which links and widgets a friend sees (docs/social.md): `public`, `logged_in` and `friends_only`
 * for every accepted friend, `mutuals_only` for an accepted friend who shares at least one other
 * accepted friend with the owner, `private` never. Callers have already established the accepted
 * friendship (ctx.friend / forFriend), so only the mutual friend needs a statement.
 */
import type { Knex } from 'knex';

/** True when some third account C has an accepted friendship (both rows accepted) with the owner and with the viewer. */
export async function shareMutualFriend(db: Knex, ownerId: string, viewerId: string): Promise<boolean> {
  const row = await db
    .first(db.raw('1 as one'))
    .from('friendships as oc')
    .join('friendships as co', function () {
      this.on('co.user_id', '=', 'oc.friend_user_id')
        .andOn('co.friend_user_id', '=', 'oc.user_id')
        .andOn('co.status', '=', db.raw('?', ['accepted']));
    })
    .join('friendships as vc', function () {
      this.on('vc.friend_user_id', '=', 'oc.friend_user_id')
        .andOn('vc.user_id', '=', db.raw('?', [viewerId]))
        .andOn('vc.status', '=', db.raw('?', ['accepted']));
    })
    .join('friendships as cv', function () {
      this.on('cv.user_id', '=', 'oc.friend_user_id')
        .andOn('cv.friend_user_id', '=', 'vc.user_id')
        .andOn('cv.status', '=', db.raw('?', ['accepted']));
    })
    .where({ 'oc.user_id': ownerId, 'oc.status': 'accepted' })
    .whereNot('oc.friend_user_id', viewerId);
  return row !== undefined;
}

/** The visibilities a friend viewer sees. */
export function visibleSet(mutual: boolean): string[] {
  return mutual ? ['public', 'logged_in', 'friends_only', 'mutuals_only'] : ['public', 'logged_in', 'friends_only'];
}

/** Whether one item of the given visibility is visible to an accepted friend (one statement at most). */
export async function visibleToFriend(
  db: Knex,
  ownerId: string,
  viewerId: string,
  visibility: string,
): Promise<boolean> {
  if (visibility === 'private') return false;
  if (visibility !== 'mutuals_only') return true;
  return shareMutualFriend(db, ownerId, viewerId);
}

/**
 * Which links and widgets a friend sees (docs/social.md): `public`, `logged_in` and `friends_only`
 * for every accepted friend, `mutuals_only` for an accepted friend who shares at least one other
 * accepted friend with the owner, `private` never. Callers have already established the accepted
 * friendship (ctx.friend / forFriend), so only the mutual friend needs a statement.
 */
import type { Knex } from 'knex';
import { visibilityRepo } from './repo/visibility.ts';

/** True when some third account C has an accepted friendship (both rows accepted) with the owner and with the viewer. */
export function shareMutualFriend(db: Knex, ownerId: string, viewerId: string): Promise<boolean> {
  return visibilityRepo.shareMutualFriend(db, ownerId, viewerId);
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

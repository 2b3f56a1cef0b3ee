/** The SQL of the social visibility rules (docs/social.md): whether an owner and a viewer share a mutual friend. */
import type { Knex } from 'knex';
import { sql } from '../../../db/sql.ts';
import { EXAMPLE_UUID, statement } from '../../../db/statements.ts';
import { AREA } from './shared.ts';

/** Some third account C has an accepted friendship (both rows accepted) with the owner and with the viewer. */
const mutualFriend = statement<{ ownerId: string; viewerId: string }, { one: number }>({
  name: 'social_share_mutual_friend',
  area: AREA,
  variants: { 'an owner and a viewer': { ownerId: EXAMPLE_UUID, viewerId: EXAMPLE_UUID } },
  build: ({ ownerId, viewerId }) => sql`select 1 as one from friendships oc
    join friendships co on co.user_id = oc.friend_user_id and co.friend_user_id = oc.user_id and co.status = 'accepted'
    join friendships vc on vc.friend_user_id = oc.friend_user_id and vc.user_id = ${viewerId} and vc.status = 'accepted'
    join friendships cv on cv.user_id = oc.friend_user_id and cv.friend_user_id = vc.user_id and cv.status = 'accepted'
    where oc.user_id = ${ownerId} and oc.status = 'accepted' and oc.friend_user_id <> ${viewerId}
    limit 1`,
});

export const visibilityRepo = {
  async shareMutualFriend(db: Knex, ownerId: string, viewerId: string): Promise<boolean> {
    return (await mutualFriend(db, { ownerId, viewerId })).length > 0;
  },
};

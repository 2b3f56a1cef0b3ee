/**
 * Building an Access: the owner's own (ownAccount, onBehalfOf), a friend's resolved by its own
 * statement (forFriend, requireFriend), or a friend's resolved inside the statement that uses it
 * (friendInStatement, requireFriendship), and the owner's rights for a checked friend write
 * (delegatedWrite). Nothing else creates one, so no service can widen its own access.
 */
import type { Knex } from 'knex';
import {
  type Access,
  type FriendAccess,
  type InStatementFriendAccess,
  type KeyActor,
  type OwnerAccess,
  PERMISSION_GROUPS,
  type PermissionGroup,
} from '../core/context.ts';
import { requireVisible } from './policy.ts';
import { readFriendAccess } from './predicates.ts';

/** The owner's own routes: the key's account, everything. */
export function ownAccount(actor: KeyActor): OwnerAccess {
  return { ownerId: actor.accountId, level: 'owner' };
}

/** The operator (admin API) or a background job acting on one account, with the owner's rights. */
export function onBehalfOf(accountId: string): OwnerAccess {
  return { ownerId: accountId, level: 'owner' };
}

/**
 * The viewer's access to the owner's content, or null when the viewer may see nothing of it: no
 * friendship, a pending or revoked one, a block in either direction, or the viewer is the owner
 * (owner routes use ownAccount). One statement.
 */
export async function forFriend(db: Knex, viewerId: string, ownerId: string): Promise<FriendAccess | null> {
  if (viewerId === ownerId) return null;
  const [row] = await readFriendAccess(db, { ownerId, viewerId });
  if (!row?.ok) return null;
  const grants = {} as Record<PermissionGroup, { read: string[]; write: string[] }>;
  for (const g of PERMISSION_GROUPS) grants[g] = { read: row[`${g}_read`], write: row[`${g}_read_write`] };
  return {
    ownerId,
    level: 'friend',
    inStatement: false,
    viewerId,
    bucketIds: row.bucket_ids,
    grants,
    hiddenSystemIds: row.hidden_system_ids,
  };
}

/** The friend access, or 404 with the same body as an unknown account (a friend route's first step). */
export async function requireFriend(db: Knex, viewerId: string, ownerId: string): Promise<FriendAccess> {
  return requireVisible(await forFriend(db, viewerId, ownerId), 'Friend');
}

/**
 * A friend access resolved inside the statement that uses it, for the hot friend reads: no
 * statement of its own. The statement starts with the CTE `friend_access` (withFriendAccess) and
 * answers `ok` with its rows; the caller passes that to requireFriendship() before using them, so
 * no friendship answers 404 with the same body as forFriend's null. The viewer as its own owner is
 * refused here already. Only the predicates take it: questions answered in JS (levelsOn,
 * viewerCeiling, contentLevels) need a FriendAccess, and the compiler says so.
 */
export function friendInStatement(viewerId: string, ownerId: string): InStatementFriendAccess {
  if (viewerId === ownerId) requireFriendship(false);
  return { ownerId, level: 'friend', viewerId, inStatement: true };
}

/** The `ok` a statement read from friend_access: anything but true is no friendship, 404 as for an unknown account. */
export function requireFriendship(ok: unknown): asserts ok is true {
  if (ok !== true) requireVisible(null, 'Friend');
}

/**
 * The owner's rights for a friend write that the caller has already authorised through this module
 * (a `read_write` check with the member rule or visibleContentSql): the owner's own services then carry
 * the write out, and the audit record goes to the owner's account with the friend's key as actor.
 * Only a friend access can be delegated, and only friend write routes call this.
 */
export function delegatedWrite(access: Access): OwnerAccess {
  if (access.level !== 'friend') throw new Error('delegatedWrite: only a checked friend access is delegated');
  return { ownerId: access.ownerId, level: 'owner' };
}

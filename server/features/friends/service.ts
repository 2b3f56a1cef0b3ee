/**
 * Friendships (one row per side, migration 0012), the friend lists, suggestions, the friend profile
 * card, search over a friend's shared content and the account's own friend-facing profile.
 * docs/privacy.md records the decisions; the contract's descriptions state them per route.
 *
 * Writes about a pair of accounts lock both accounts first (repo.lockPair), so concurrent requests,
 * accepts and blocks between the same two accounts apply one after the other.
 */
import type { Knex } from 'knex';
import type { components } from '../../../generated/api.d.ts';
import { atLeast, onBehalfOf, requireVisible, viewerCeiling } from '../../access/index.ts';
import { type FriendContext, inTransaction, ownerOf, type ServiceContext } from '../../core/context.ts';
import { decodeCursor, encodeCursor } from '../../core/cursor.ts';
import { badRequest, conflict, notFound } from '../../core/errors.ts';
import { pageOf } from '../../core/keyset.ts';
import { applyDefaults, ensurePresets } from '../privacyBuckets/index.ts';
import * as repo from './repo.ts';
import { toFriendListRow, toFriendsProfile, toProfileCard, toSearchResults, toSuggestion } from './present.ts';

type Schemas = components['schemas'];
type Tx = ServiceContext & { db: Knex.Transaction };

/** The one 404 of the friends area: unknown account, no such relationship, or one that hides it. */
const FRIEND_NOT_FOUND = 'Friend not found';

async function lockOther(tx: Tx, otherId: string): Promise<void> {
  const found = await repo.lockPair(tx.db, ownerOf(tx), otherId);
  if (!found.includes(otherId)) throw notFound(FRIEND_NOT_FOUND);
}

function describe(row: repo.FriendshipRow): string {
  if (row.status === 'pending') return row.direction === 'outgoing' ? 'your own outgoing request' : 'pending';
  if (row.status === 'blocked') return 'blocked by you';
  return row.status;
}

/** Both rows accepted; each owner's presets exist and it gives the other its `new_friend` defaults. */
async function acceptPair(tx: Tx, me: string, other: string): Promise<void> {
  const { db, now } = tx;
  await repo.putRow(db, { userId: me, friendUserId: other, status: 'accepted', acceptedAt: now }, now);
  await repo.putRow(db, { userId: other, friendUserId: me, status: 'accepted', acceptedAt: now }, now);
  await ensurePresets(db, me, now);
  await ensurePresets(db, other, now);
  await applyDefaults(db, me, 'new_friend', [other], now);
  await applyDefaults(db, other, 'new_friend', [me], now);
}

/** The event each audited friendship action sends, and whether the other account gets it too. */
const EVENT_OF = {
  'friendship.request': { type: 'friendship.requested', both: true },
  'friendship.accept': { type: 'friendship.accepted', both: true },
  'friendship.revoke': { type: 'friendship.revoked', both: false },
  'friendship.block': { type: 'friendship.blocked', both: false },
} as const;

async function audit(
  tx: Tx,
  action: keyof typeof EVENT_OF,
  otherId: string,
  detail: Record<string, unknown> = {},
): Promise<void> {
  await tx.audit.record(tx, { action, targetType: 'account', targetId: otherId, detail });
  const { type, both } = EVENT_OF[action];
  await tx.events.emit(tx, { type, area: 'friends', data: { id: otherId }, about: otherId });
  // The other account's own log: it sees the request or the acceptance (a revoke or block stays silent).
  if (both)
    await tx.events.emit(
      { ...tx, access: onBehalfOf(otherId) },
      { type, area: 'friends', data: { id: ownerOf(tx) }, about: ownerOf(tx) },
    );
}

export async function sendRequest(ctx: ServiceContext, otherId: string): Promise<void> {
  const me = ownerOf(ctx);
  if (otherId === me) throw badRequest('You cannot send a friend request to yourself');
  await inTransaction(ctx, async (tx) => {
    await lockOther(tx, otherId);
    const { mine, theirs } = await repo.findPair(tx.db, me, otherId);
    if (mine?.status === 'blocked')
      throw conflict('You have blocked this account; revoke the block before sending a request');
    if (mine?.status === 'accepted') throw conflict('You are already friends with this account');
    if (mine?.status === 'pending' && mine.direction === 'outgoing')
      throw conflict('A friend request to this account is already pending');
    if (theirs?.status === 'blocked') {
      // Answered like a new request, but the account that blocked the caller gets nothing.
      await repo.putRow(
        tx.db,
        { userId: me, friendUserId: otherId, status: 'pending', direction: 'outgoing', restart: true },
        tx.now,
      );
      await audit(tx, 'friendship.request', otherId);
      return;
    }
    if (
      mine?.status === 'pending' &&
      mine.direction === 'incoming' &&
      theirs?.status === 'pending' &&
      theirs.direction === 'outgoing'
    ) {
      // The other account asked first: asking back accepts.
      await acceptPair(tx, me, otherId);
      await audit(tx, 'friendship.accept', otherId, { by: 'request' });
      return;
    }
    await repo.putRow(
      tx.db,
      { userId: me, friendUserId: otherId, status: 'pending', direction: 'outgoing', restart: true },
      tx.now,
    );
    await repo.putRow(
      tx.db,
      { userId: otherId, friendUserId: me, status: 'pending', direction: 'incoming', restart: true },
      tx.now,
    );
    await audit(tx, 'friendship.request', otherId);
  });
}

async function accountByUsername(ctx: ServiceContext, username: string): Promise<{ id: string; username: string }> {
  return requireVisible(await repo.findAccountByUsername(ctx.db, username), 'Friend');
}

export async function sendRequestByUsername(
  ctx: ServiceContext,
  username: string,
): Promise<Schemas['FriendRequestSent']> {
  const account = await accountByUsername(ctx, username);
  await sendRequest(ctx, account.id);
  return { friendUserId: account.id, username: account.username };
}

export async function acceptRequest(ctx: ServiceContext, requesterId: string): Promise<void> {
  const me = ownerOf(ctx);
  if (requesterId === me) throw notFound(FRIEND_NOT_FOUND);
  await inTransaction(ctx, async (tx) => {
    await lockOther(tx, requesterId);
    const { mine, theirs } = await repo.findPair(tx.db, me, requesterId);
    if (!mine) throw notFound(FRIEND_NOT_FOUND);
    const incoming =
      mine.status === 'pending' &&
      mine.direction === 'incoming' &&
      theirs?.status === 'pending' &&
      theirs.direction === 'outgoing';
    if (!incoming) throw conflict(`There is no incoming request to accept: the friendship is ${describe(mine)}`);
    await acceptPair(tx, me, requesterId);
    await audit(tx, 'friendship.accept', requesterId);
  });
}

export async function revoke(ctx: ServiceContext, otherId: string): Promise<void> {
  const me = ownerOf(ctx);
  if (otherId === me) throw notFound(FRIEND_NOT_FOUND);
  await inTransaction(ctx, async (tx) => {
    await lockOther(tx, otherId);
    const { mine, theirs } = await repo.findPair(tx.db, me, otherId);
    if (!mine) throw notFound(FRIEND_NOT_FOUND);
    await repo.revokeRow(tx.db, me, otherId, tx.now);
    // A block the other account holds is its own; revoking does not lift it.
    if (theirs && theirs.status !== 'blocked') await repo.revokeRow(tx.db, otherId, me, tx.now);
    await repo.forgetFriendBuckets(tx.db, me, otherId);
    await audit(tx, 'friendship.revoke', otherId, { from: mine.status });
  });
}

/** The accounts `userId` has an accepted friendship with, as of this read. */
export function acceptedFriendIds(db: Knex, userId: string): Promise<string[]> {
  return repo.acceptedIdsOf(db, userId);
}

export async function block(ctx: ServiceContext, otherId: string, reason: string | undefined): Promise<void> {
  const me = ownerOf(ctx);
  if (otherId === me) throw badRequest('You cannot block yourself');
  await inTransaction(ctx, async (tx) => {
    await lockOther(tx, otherId);
    const { mine, theirs } = await repo.findPair(tx.db, me, otherId);
    await repo.putRow(
      tx.db,
      { userId: me, friendUserId: otherId, status: 'blocked', blockReason: reason ?? null },
      tx.now,
    );
    if (theirs && theirs.status !== 'blocked') await repo.revokeRow(tx.db, otherId, me, tx.now);
    await repo.forgetFriendBuckets(tx.db, me, otherId);
    await audit(tx, 'friendship.block', otherId, { from: mine?.status ?? null });
  });
}

export async function blockByUsername(
  ctx: ServiceContext,
  username: string,
  reason: string | undefined,
): Promise<Schemas['BlockedUsername']> {
  const account = await accountByUsername(ctx, username);
  await block(ctx, account.id, reason);
  return { username: account.username };
}

// ---- Reads ------------------------------------------------------------------------------------

export async function listFriends(
  ctx: ServiceContext,
  status: repo.FriendshipStatus | undefined,
): Promise<Schemas['FriendListRow'][]> {
  const filter: repo.ListFilter = status ? { kind: 'status', status } : { kind: 'all' };
  return (await repo.listRows(ctx.db, ownerOf(ctx), filter)).map(toFriendListRow);
}

export async function listFriendsPage(
  ctx: ServiceContext,
  input: { limit: number; cursor?: string; query?: string; status?: repo.FriendshipStatus },
): Promise<Schemas['FriendListPage']> {
  const after = input.cursor ? decodeCursor<[number, string]>(input.cursor, ['integer', 'uuid']) : undefined;
  const rows = await repo.pageRows(
    ctx.db,
    ownerOf(ctx),
    { status: input.status ?? null, query: input.query ?? null },
    input.limit,
    after,
  );
  const { items, nextAfter } = pageOf(rows, input.limit);
  return {
    items: items.map(toFriendListRow),
    nextCursor: nextAfter ? encodeCursor([nextAfter.created_at, nextAfter.id]) : null,
  };
}

export async function listRequests(ctx: ServiceContext): Promise<Schemas['FriendListRow'][]> {
  return (await repo.listRows(ctx.db, ownerOf(ctx), { kind: 'incoming' })).map(toFriendListRow);
}

export async function listSuggestions(ctx: ServiceContext, limit: number): Promise<Schemas['FriendSuggestionRow'][]> {
  return (await repo.suggestions(ctx.db, ownerOf(ctx), limit)).map(toSuggestion);
}

/** The card of the friend whose content `friendCtx` (ctx.friend) gives access to. */
export async function getProfileCard(friendCtx: FriendContext): Promise<Schemas['FriendProfileCard']> {
  const account = requireVisible(await repo.findAccount(friendCtx.db, friendCtx.access.ownerId), 'Friend');
  const ceiling = viewerCeiling(friendCtx.access);
  const can = (group: keyof typeof ceiling) => atLeast(ceiling[group], 'read');
  return toProfileCard(account, can('friend_data'), {
    members: can('members_view'),
    membersDirectory: can('groups'),
    frontHistory: can('front'),
    notes: can('member_notes'),
  });
}

/** At most this many items of each type in the search catalog. */
const CATALOG_CAP = 500;

/** `q`'s words as prefix terms for to_tsquery (letters and digits only, so nothing needs quoting); null without a word. */
function prefixQuery(q: string): string | null {
  const words = q.toLowerCase().match(/[\p{L}\p{N}]+/gu) ?? [];
  return words.length === 0 ? null : words.map((w) => `${w}:*`).join(' & ');
}

const EMPTY: Schemas['FriendSearchResults'] = { members: [], notes: [], groups: [] };

export async function search(
  friendCtx: FriendContext,
  q: string,
  limitPerType: number,
): Promise<Schemas['FriendSearchResults']> {
  const tsquery = prefixQuery(q);
  if (tsquery === null) return EMPTY;
  const limits = { members: limitPerType, notes: limitPerType, groups: limitPerType };
  return toSearchResults(await repo.searchContent(friendCtx.db, friendCtx.access, tsquery, limits));
}

export async function catalog(friendCtx: FriendContext): Promise<Schemas['FriendSearchResults']> {
  const limits = { members: CATALOG_CAP, notes: CATALOG_CAP, groups: CATALOG_CAP };
  return toSearchResults(await repo.searchContent(friendCtx.db, friendCtx.access, null, limits));
}

export async function searchMembers(
  friendCtx: FriendContext,
  q: string,
  limit: number,
): Promise<Schemas['FriendSearchMember'][]> {
  const tsquery = prefixQuery(q);
  if (tsquery === null) return [];
  const rows = await repo.searchMembers(friendCtx.db, friendCtx.access, tsquery, limit);
  return toSearchResults({ members: rows, notes: [], groups: [] }).members;
}

// ---- The account's own friend-facing profile ----------------------------------------------------

export async function getOwnProfile(ctx: ServiceContext): Promise<Schemas['FriendsProfile']> {
  const account = await repo.findAccount(ctx.db, ownerOf(ctx));
  if (!account) throw notFound('Account not found');
  return toFriendsProfile(account);
}

/** The canonical spelling of an IANA time zone name (`europe/berlin` → `Europe/Berlin`), or null when it is none. */
function canonicalTimeZone(name: string): string | null {
  try {
    return new Intl.DateTimeFormat('en-US', { timeZone: name }).resolvedOptions().timeZone;
  } catch {
    return null;
  }
}

export async function updateOwnProfile(
  ctx: ServiceContext,
  input: Schemas['UpdateFriendsProfileRequest'],
): Promise<Schemas['FriendsProfile']> {
  const timezone = input.timezone ? canonicalTimeZone(input.timezone) : input.timezone;
  if (timezone === null && input.timezone !== null)
    throw badRequest('timezone must be an IANA time zone name such as Europe/Berlin');
  const changes: repo.ProfileChanges = {};
  if (input.pronouns !== undefined) changes.pronouns = input.pronouns;
  if (input.status !== undefined) changes.status = input.status;
  if (timezone !== undefined) changes.timezone = timezone;
  if (input.country !== undefined) changes.country = input.country;
  if (input.aboutMarkdown !== undefined) changes.about_markdown = input.aboutMarkdown;
  if (input.bannerUrl !== undefined) changes.banner_url = input.bannerUrl;
  if (input.imageUrl !== undefined) changes.image_url = input.imageUrl;
  if (input.appearInSuggestions !== undefined) changes.appear_in_suggestions = input.appearInSuggestions;
  const account = await repo.updateAccountProfile(ctx.db, ownerOf(ctx), changes, ctx.now);
  if (!account) throw notFound('Account not found');
  return toFriendsProfile(account);
}

/**
 * The friends area's entry point for other areas: blocking an account through the block list, the
 * account card projection (./accountCard.ts) for statements that show another account, and the
 * accounts one has accepted friendships with (the event stream's friends).
 */
export { type AccountCardRow, accountCardColumns } from './accountCard.ts';
export { acceptedFriendIds, block } from './service.ts';

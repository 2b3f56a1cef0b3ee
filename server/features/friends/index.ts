/**
 * The friends area's entry point for other areas: blocking an account through the block list, and
 * the account card projection (./accountCard.ts) for statements that show another account.
 */
export { type AccountCardRow, accountCardColumns } from './accountCard.ts';
export { block } from './service.ts';

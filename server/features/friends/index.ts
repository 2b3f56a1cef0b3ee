/** The friends area's entry point for other areas: blocking an account through the block list. */
export { block } from './service.ts';

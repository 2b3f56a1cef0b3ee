/** The trash area's public entry point: purging items for good and dropping their stored objects. */
export { purgeItems } from './purge.ts';
export { dropObjects } from './service.ts';

/** The front area's public entry point: what trashing a member needs (the front lock, ending its session). */
export { endMemberFront, lockFront } from './service.ts';

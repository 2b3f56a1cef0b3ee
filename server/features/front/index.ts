/**
 * The front area's public entry point: what trashing a member needs (the front lock, ending its
 * session), and the owner's front writes and history count that friend routes reuse once the
 * access engine has authorised them (server/features/friendActivity/).
 */
export {
  clearFront,
  clearTierPresence,
  endMemberFront,
  lockFront,
  reorderFront,
  startFronting,
  stopFronting,
} from './service.ts';
export { frontRepo } from './repo.ts';
export { PRESET_TIERS } from './service.ts';

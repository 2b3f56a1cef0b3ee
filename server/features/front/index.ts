/**
 * The front area's public entry point: what trashing a member needs (the front lock, ending its
 * session, the front.changed that follows), and the owner's front writes and history count that friend routes reuse once the
 * access engine has authorised them (server/features/friendActivity/).
 */
export {
  clearFront,
  clearTierPresence,
  endMemberFront,
  frontChanged,
  frontHistoryCount,
  lockFront,
  PRESET_TIERS,
  reorderFront,
  startFronting,
  stopFronting,
} from './service.ts';

/** The members area's public entry point: member lookups for areas that attach things to members, and the rows' presentations (server/core/members.ts). */
export {
  mediaUrl,
  type MediaRef,
  type MemberRow,
  type MemberSummary,
  toMember,
  toMemberSummary,
} from '../../core/members.ts';
export { createMember, findLiveMember, membersByIds, missingLiveMembers, updateMember } from './service.ts';

/** The members area's public entry point: member rows and their presentations, for areas that show or link members. */
export { membersRepo, type MediaRef, type MemberRow } from './repo.ts';
export { mediaUrl, toMember, toMemberSummary, type MemberSummary } from './present.ts';

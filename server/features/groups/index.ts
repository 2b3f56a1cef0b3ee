/** The groups area's public entry point: folders and group memberships, for the members area that places members in them. */
export { createGroup, findLiveFolder, leaveOtherSideGroups, setGroupMembers, updateGroup } from './service.ts';

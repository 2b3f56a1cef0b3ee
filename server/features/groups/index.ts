/** The groups area's public entry point: folders and group memberships, for the members area that places members in them. */
export {
  createFolder,
  createGroup,
  findLiveFolder,
  leaveOtherSideGroups,
  setGroupMembers,
  updateFolder,
  updateGroup,
} from './service.ts';

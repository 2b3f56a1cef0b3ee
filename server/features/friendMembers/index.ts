/** What the rest of the server uses of a friend's members: one member as a friend sees it (the event stream). */
export { getMember as friendMember } from './service.ts';

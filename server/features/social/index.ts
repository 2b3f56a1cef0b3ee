/** The social area's entry point for other areas: the operator registers verified identities; the event stream reads a friend's section. */
export { registerIdentity } from './identities.ts';
export { getFriendSection as friendSocial } from './profile.ts';

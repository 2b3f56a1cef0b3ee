/** The social area's entry point for other areas: the operator registers verified identities. */
export { registerIdentity } from './identities.ts';

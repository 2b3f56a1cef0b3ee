/** The custom fields area's public entry point: the owner's value write, for friend writes the access engine has authorised. */
export { createField, setMemberValue, updateField } from './service.ts';

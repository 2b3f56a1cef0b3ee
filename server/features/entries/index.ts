/** The entries area's public entry point: the owner's note writes that friend routes reuse once the access engine has authorised them. */
export { createEntry, deleteEntry, updateEntry } from './service.ts';

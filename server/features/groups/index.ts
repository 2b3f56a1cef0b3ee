/** The groups area's public entry point: folders, for areas that place items in them. */
export { directoriesRepo } from './repo.ts';

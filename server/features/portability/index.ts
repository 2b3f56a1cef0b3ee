/** The portability area's public entry point: the import queue, which the runtime registers. */
export { defineImports } from './service.ts';

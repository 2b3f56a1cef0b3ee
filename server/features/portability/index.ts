/** The portability area's public entry point: the import and export queues, which the runtime registers. */
export { defineExports } from './exports.ts';
export { defineImports } from './service.ts';

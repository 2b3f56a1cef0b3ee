/**
 * The portability area's public entry point: the import and export queues, which the runtime
 * registers, and imports for the operator's admin API.
 */
export { defineExports } from './exports.ts';
export { createExport, getExport } from './exports.ts';
export { defineImports, getImport, IMPORT_MEDIA_TYPES } from './service.ts';
export { acceptImport } from './upload.ts';

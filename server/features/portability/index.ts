/** The portability area's public entry point: the import queue, which the runtime registers, and imports for the operator's admin API. */
export { createImport, defineImports, getImport } from './service.ts';

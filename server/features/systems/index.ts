/** The systems area's public entry point: the read/write scope of the active system, its side and sub systems, and a new account's first side system. */
export { resolveReadScope, resolveWriteScope, type ReadScope, type ScopeQuery } from './scope.ts';
export { createInitialSideSystem, findSideSystem, findSubSystem, subSystemsLinkedTo } from './service.ts';

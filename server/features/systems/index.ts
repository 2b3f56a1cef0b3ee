/** The systems area's public entry point: the read/write scope of the active system, and a new account's first side system. */
export { systemsRepo } from './repo.ts';
export { resolveReadScope, resolveWriteScope, type ReadScope, type ScopeQuery } from './scope.ts';
export { createInitialSideSystem } from './service.ts';

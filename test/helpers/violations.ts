/**
 * The contract violations of every test server (test/helpers/server.ts), which the global afterEach
 * (test/helpers/setup.ts) turns into a failure. A module of its own, importing nothing at run time:
 * setup.ts runs before every file of every project, and importing server.ts there loaded the whole
 * app into each unit and system test file (about 1.5 s each). The record lives on globalThis, so
 * that a second copy of this module (one per setup re-run) still reads the servers' own.
 */
import type { ResponseViolation } from '../../server/deps.ts';

interface Watched {
  readonly violations: ResponseViolation[];
}

interface Violations {
  live: Set<Watched>;
  closed: ResponseViolation[];
}

const KEY = Symbol.for('account-data-api.test.violations');
const holder = globalThis as { [KEY]?: Violations };
holder[KEY] ??= { live: new Set(), closed: [] };
const record = holder[KEY];

/** A server whose violations count from now on. */
export function watch(server: Watched): void {
  record.live.add(server);
}

/** A server that closed: its violations are kept until taken. */
export function unwatch(server: Watched): void {
  record.live.delete(server);
  record.closed.push(...server.violations.splice(0));
}

/** Every violation since the last call, of the servers running and of those closed meanwhile. */
export function takeViolations(): ResponseViolation[] {
  const all = record.closed.splice(0);
  for (const server of record.live) all.push(...server.violations.splice(0));
  return all;
}

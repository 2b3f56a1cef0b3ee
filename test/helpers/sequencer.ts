import { BaseSequencer, type TestSpecification } from 'vitest/node';

/**
 * The files that take longest (a CI run of 2026-11-28, PGlite and PostgreSQL), longest first: they
 * start first, whatever their project, so that the two workers finish together instead of one
 * running the process tests (lifecycle, startup) alone at the end. Vitest orders by recorded
 * durations only when it has a cache, which a fresh clone has not. A file missing here runs after
 * these, in vitest's own order.
 */
const LONGEST = [
  'test/friendActivity.test.ts',
  'test/startup.test.ts',
  'test/lifecycle.test.ts',
  'test/backup.test.ts',
  'test/imports.test.ts',
  'test/friendMembers.test.ts',
  'test/inputRules.test.ts',
  'test/docs.test.ts',
  'test/entries.test.ts',
  'test/trash.test.ts',
  'test/clientPackage.test.ts',
  'test/front.test.ts',
];

export default class LongestFirst extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const sorted = await super.sort(files);
    const rank = (spec: TestSpecification) => {
      const i = LONGEST.findIndex((path) => spec.moduleId.endsWith(`/${path}`));
      return i === -1 ? LONGEST.length : i;
    };
    return sorted
      .map((spec, i) => ({ spec, i, rank: rank(spec) }))
      .sort((a, b) => a.rank - b.rank || a.i - b.i)
      .map(({ spec }) => spec);
  }
}

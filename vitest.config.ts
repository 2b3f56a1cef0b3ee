import { defineConfig } from 'vitest/config';
import LongestFirst from './test/helpers/sequencer.ts';

/**
 * Three projects (`npm test` runs them all; `npm test -- --project api` one):
 *   - unit: no server and no database (storage backends, the fetcher, config, the lock file, the
 *     admin CLI's choice of token, the fuzzer's parts, the client's retries, the Prism mock).
 *     Never reads DATABASE_URL.
 *   - api: the real app on a fresh database per file, driven over HTTP: the embedded database, or
 *     PostgreSQL when DATABASE_URL is set. CI runs this project on both.
 *   - system: the server as a process on the embedded default (npm start, signals, the DATA_DIR
 *     lock, db:migrate: started without DATABASE_URL), the docs page in a real browser and the client
 *     package as another project installs it. Nothing here depends on the database kind, so CI runs
 *     it once, on the embedded database.
 */
const UNIT = [
  'test/adminCli.test.ts',
  'test/clientRetry.test.ts',
  'test/dataDirLock.test.ts',
  'test/embeddedSettings.test.ts',
  'test/fetcher.test.ts',
  'test/fuzz.test.ts',
  'test/httpServer.test.ts',
  'test/idSet.test.ts',
  'test/importCollections.test.ts',
  'test/importJsonSyntax.test.ts',
  'test/importPluralKit.test.ts',
  'test/importSimplyPlural.test.ts',
  'test/logger.test.ts',
  'test/mock.test.ts',
  'test/project.test.ts',
  'test/sql.test.ts',
  'test/storage.test.ts',
];
const SYSTEM = ['test/clientPackage.test.ts', 'test/docs.test.ts', 'test/lifecycle.test.ts', 'test/startup.test.ts'];

export default defineConfig({
  test: {
    pool: 'forks',
    maxWorkers: 2,
    testTimeout: 30_000,
    hookTimeout: 120_000,
    setupFiles: ['test/helpers/setup.ts'],
    // Files run in parallel (one per worker), the longest first (test/helpers/sequencer.ts), the tests of a file in order.
    sequence: { concurrent: false, sequencer: LongestFirst },
    projects: [
      { extends: true, test: { name: 'unit', include: UNIT } },
      {
        extends: true,
        test: {
          name: 'api',
          include: ['test/**/*.test.ts'],
          exclude: [...UNIT, ...SYSTEM],
          // One migrated database per run, copied by every test server (test/helpers/globalSetup.ts).
          globalSetup: ['test/helpers/globalSetup.ts'],
          // Each file starts its own server on its own database; the modules a worker loaded (and
          // the contract validators they compiled) are kept for its next file rather than loaded anew.
          isolate: false,
        },
      },
      {
        extends: true,
        test: { name: 'system', include: SYSTEM, globalSetup: ['test/helpers/globalSetup.ts'] },
      },
    ],
  },
});

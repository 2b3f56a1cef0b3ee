import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    pool: 'forks',
    maxWorkers: 2,
    testTimeout: 30_000,
    hookTimeout: 120_000,
    // One migrated database per run, copied by every test server (test/helpers/globalSetup.ts).
    globalSetup: ['test/helpers/globalSetup.ts'],
    setupFiles: ['test/helpers/setup.ts'],
    // Each file starts its own server and database; files run in parallel, tests in a file in order.
    sequence: { concurrent: false },
  },
});

/** The test harness itself: servers start from the run's migrated template, and violations are never lost. */
import { describe, expect, it } from 'vitest';
import { pendingMigrations } from '../server/db/migrate.ts';
import { takeViolations, TestServer } from './helpers/server.ts';

describe('test harness', () => {
  it('an ad-hoc server starts on a migrated copy of the template and its contract violations reach the global check', async () => {
    const s = await new TestServer().start();
    try {
      expect(await pendingMigrations(s.deps.db.knex)).toBe(0);
      // A copy, not the template itself: writes here are not seen by the next server.
      await s.createAccount({ username: 'harness_only' });
    } finally {
      s.violations.push({ method: 'GET', path: '/x', status: 599, message: 'simulated' });
      await s.close();
    }
    // The global afterEach (helpers/setup.ts) asserts this list is empty; take it here so this
    // test checks the plumbing without failing itself.
    expect(takeViolations()).toEqual([{ method: 'GET', path: '/x', status: 599, message: 'simulated' }]);

    const t = await new TestServer().start();
    try {
      const { data } = await t.admin.POST('/admin/v1/accounts', { body: { username: 'harness_only' } });
      expect(data?.username).toBe('harness_only');
    } finally {
      await t.close();
    }
  });
});

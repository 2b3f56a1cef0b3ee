/** Loaded before every test file (vitest setupFiles). */
import { afterEach, expect } from 'vitest';
import { takeViolations } from './violations.ts';

// A response outside the contract (undeclared status, body not matching its schema) fails the
// test during which it was sent, on every server the test started.
afterEach(() => {
  expect(takeViolations(), 'responses must match openapi.yaml').toEqual([]);
});

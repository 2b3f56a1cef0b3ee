/**
 * A fresh database per test server, copied from the run's migrated template (globalSetup.ts):
 * a new PostgreSQL database created from the template database next to DATABASE_URL's (dropped
 * afterwards) when DATABASE_URL is set, otherwise an in-memory PGlite cluster loaded from the dump.
 */
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import type { Knex } from 'knex';
import pg from 'pg';
import { inject } from 'vitest';

export interface TestDatabase {
  databaseUrl: string | undefined;
  /** The migrated embedded cluster to load (embedded runs only). */
  embeddedTemplate: Blob | undefined;
  drop(): Promise<void>;
}

let embeddedTemplate: Blob | undefined;

async function admin<T>(base: string, fn: (c: pg.Client) => Promise<T>): Promise<T> {
  const c = new pg.Client({ connectionString: base });
  await c.connect();
  try {
    return await fn(c);
  } finally {
    await c.end();
  }
}

export async function createTestDatabase(): Promise<TestDatabase> {
  const base = process.env.DATABASE_URL;
  if (!base) {
    const path = inject('pgliteTemplate');
    if (!path) throw new Error('no embedded template: the suite must run through vitest.config.ts (globalSetup)');
    embeddedTemplate ??= new Blob([readFileSync(path)]);
    return { databaseUrl: undefined, embeddedTemplate, drop: async () => {} };
  }
  const template = inject('pgTemplate');
  if (!template) throw new Error('no PostgreSQL template: the suite must run through vitest.config.ts (globalSetup)');
  const name = `t_${randomBytes(6).toString('hex')}`;
  await admin(base, (c) => c.query(`create database ${name} template ${template}`));
  const url = new URL(base);
  url.pathname = `/${name}`;
  return {
    databaseUrl: url.toString(),
    embeddedTemplate: undefined,
    drop: () => admin(base, (c) => c.query(`drop database if exists ${name} with (force)`)).then(() => undefined),
  };
}

/**
 * Resolves once a statement of the database `knex` is connected to waits for a lock (PostgreSQL):
 * a test holding a row in its own transaction knows the request under test has reached it,
 * however slow the machine. Fails after 10 s, naming `what`.
 */
export async function untilWaitingForLock(knex: Knex, what: string): Promise<void> {
  const deadline = Date.now() + 10_000;
  for (;;) {
    const waiting = await knex.raw(
      `select count(*)::int as n from pg_locks l join pg_stat_activity a on a.pid = l.pid where not l.granted and a.datname = current_database()`,
    );
    if ((waiting.rows[0] as { n: number }).n > 0) return;
    if (Date.now() > deadline) throw new Error(`${what} never waited for the lock`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/**
 * Resolves once a query waits for one of `knex`'s connections (the embedded database has one): a
 * test holding it in a transaction knows the request under test has reached its next statement.
 * Fails after 10 s, naming `what`.
 */
export async function untilWaitingForConnection(knex: Knex, what: string): Promise<void> {
  const pool = (knex.client as { pool: { numPendingAcquires(): number } }).pool;
  const deadline = Date.now() + 10_000;
  while (pool.numPendingAcquires() === 0) {
    if (Date.now() > deadline) throw new Error(`${what} never waited for a connection`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

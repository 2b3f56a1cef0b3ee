/**
 * Runs once per `vitest run`, before any test file: builds one migrated database that every test
 * file then copies instead of creating and migrating its own.
 *   - PostgreSQL (DATABASE_URL set): a template database; files use CREATE DATABASE … TEMPLATE.
 *   - Embedded PGlite: a dump of a migrated in-memory cluster (PGlite's dumpDataDir), which each
 *     file's server loads (loadDataDir) — several times cheaper than initdb plus migrations.
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import type { TestProject } from 'vitest/node';
import { openDatabase } from '../../server/db/knex.ts';
import { migrateLatest } from '../../server/db/migrate.ts';

declare module 'vitest' {
  export interface ProvidedContext {
    /** Name of the migrated PostgreSQL template database (PostgreSQL runs only). */
    pgTemplate: string;
    /** Path of the migrated PGlite dump (embedded runs only). */
    pgliteTemplate: string;
  }
}

async function withAdmin<T>(base: string, fn: (c: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: base });
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end();
  }
}

interface Template {
  pgTemplate: string;
  pgliteTemplate: string;
  remove(): Promise<void>;
}

async function buildTemplate(): Promise<Template> {
  const base = process.env.DATABASE_URL;
  if (base) {
    const name = `tmpl_${randomBytes(6).toString('hex')}`;
    await withAdmin(base, (c) => c.query(`create database ${name}`));
    const url = new URL(base);
    url.pathname = `/${name}`;
    const db = await openDatabase({ databaseUrl: url.toString(), poolMax: 1 });
    try {
      await migrateLatest(db.knex);
    } finally {
      await db.close();
    }
    return {
      pgTemplate: name,
      pgliteTemplate: '',
      remove: () =>
        withAdmin(base, (c) => c.query(`drop database if exists ${name} with (force)`)).then(() => undefined),
    };
  }
  const dir = mkdtempSync(join(tmpdir(), 'ada-template-'));
  const db = await openDatabase({ dataDir: 'memory' });
  try {
    await migrateLatest(db.knex);
    // Every test server loads this dump (about 0.3 s each, in proportion to its files). The embedded
    // server never creates a database, so the dump leaves out the cluster's two template databases:
    // a third fewer bytes and half the files.
    await db.knex.raw(`update pg_database set datistemplate = false where datname in ('template0', 'template1')`);
    await db.knex.raw('drop database template0');
    await db.knex.raw('drop database template1');
    await db.knex.raw('checkpoint');
    const dump = await db.dumpEmbedded!();
    writeFileSync(join(dir, 'migrated.tar'), Buffer.from(await dump.arrayBuffer()));
  } finally {
    await db.close();
  }
  return {
    pgTemplate: '',
    pgliteTemplate: join(dir, 'migrated.tar'),
    remove: async () => rmSync(dir, { recursive: true, force: true }),
  };
}

/**
 * Vitest runs this once per project that lists it (api, system), one after the other before any
 * file starts, and loads this module anew for each: the projects share one template through
 * globalThis, built by the first and removed after the last.
 */
const KEY = Symbol.for('account-data-api.test.template');
const holder = globalThis as { [KEY]?: { template: Promise<Template>; users: number } };

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  holder[KEY] ??= { template: buildTemplate(), users: 0 };
  const current = holder[KEY];
  current.users += 1;
  const template = await current.template;
  project.provide('pgTemplate', template.pgTemplate);
  project.provide('pgliteTemplate', template.pgliteTemplate);
  return async () => {
    current.users -= 1;
    if (current.users > 0) return;
    if (holder[KEY] === current) delete holder[KEY];
    await template.remove();
  };
}

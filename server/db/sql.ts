import type { Knex } from 'knex';

/**
 * Runs a script of DDL statements one by one. PGlite executes knex.raw through the extended
 * protocol, which takes a single statement, so scripts are split at semicolons that end a line.
 */
export async function execScript(knex: Knex, script: string): Promise<void> {
  const statements = script
    .split(/;\s*$/m)
    .map((s) => s.replace(/^\s*--.*$/gm, '').trim())
    .filter((s) => s.length > 0);
  for (const statement of statements) await knex.raw(statement);
}

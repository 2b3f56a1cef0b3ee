/** Migrations are TypeScript modules listed in ./migrations/index.ts, run in order by knex. */
import type { Knex } from 'knex';
import { migrations } from './migrations/index.ts';

const source: Knex.MigrationSource<string> = {
  getMigrations: async () => migrations.map((m) => m.name),
  getMigrationName: (name) => name,
  getMigration: async (name) => {
    const found = migrations.find((m) => m.name === name);
    if (!found) throw new Error(`Unknown migration ${name}`);
    return found;
  },
};

const config: Knex.MigratorConfig = { migrationSource: source, tableName: 'schema_migrations' };

export async function migrateLatest(knex: Knex): Promise<string[]> {
  const [, applied] = (await knex.migrate.latest(config)) as [number, string[]];
  return applied;
}

export async function pendingMigrations(knex: Knex): Promise<number> {
  const [, pending] = (await knex.migrate.list(config)) as [unknown[], unknown[]];
  return pending.length;
}

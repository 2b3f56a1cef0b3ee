/** npm run db:migrate — applies pending migrations to DATABASE_URL or the embedded database in DATA_DIR. */
import { loadConfig } from '../server/config.ts';
import { openDatabase } from '../server/db/knex.ts';
import { migrateLatest } from '../server/db/migrate.ts';

const config = loadConfig();
const db = await openDatabase({ databaseUrl: config.databaseUrl, dataDir: config.dataDir, poolMax: 1 });
try {
  const applied = await migrateLatest(db.knex);
  console.log(
    JSON.stringify({
      database: config.databaseUrl ? 'postgres' : `pglite:${config.dataDir}`,
      applied,
      message: applied.length ? `applied ${applied.length} migration(s)` : 'already up to date',
    }),
  );
} finally {
  await db.close();
}

/**
 * npm run db:migrate — applies pending migrations to DATABASE_URL or the embedded database in DATA_DIR.
 * On the embedded database it takes the same DATA_DIR lock as the server, so it refuses to run
 * while a server (or another migration) has the directory open.
 */
import { type Config, ConfigError, loadConfig } from '../server/config.ts';
import { DataDirLockedError } from '../server/db/dataDirLock.ts';
import { openDatabase, type Database } from '../server/db/knex.ts';
import { migrateLatest } from '../server/db/migrate.ts';

function fail(message: string): never {
  console.error(`db:migrate: ${message}`);
  process.exit(1);
}

let config: Config;
try {
  config = loadConfig();
} catch (err) {
  if (err instanceof ConfigError) fail(`configuration error: ${err.message}`);
  throw err;
}
let db: Database;
try {
  db = await openDatabase({
    databaseUrl: config.databaseUrl,
    dataDir: config.dataDir,
    poolMax: 1,
    lockPurpose: 'migrate',
    embeddedSharedBuffers: config.embeddedSharedBuffers,
    embeddedV8LowMemory: config.embeddedV8LowMemory,
    onStaleLock: (message) => console.error(`db:migrate: ${message}`),
  });
} catch (err) {
  if (err instanceof DataDirLockedError) fail(err.message);
  throw err;
}
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

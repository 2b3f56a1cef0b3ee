/**
 * `POST /admin/v1/backup`: a consistent snapshot of the embedded database and the keys of DATA_DIR,
 * streamed as an archive (server/db/backup.ts). PostgreSQL is backed up with its own tools.
 */
import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import type { Logger } from 'pino';
import { parseMessageKeys } from '../../config.ts';
import { conflict, notFound } from '../../core/errors.ts';
import { BackupInProgressError, takeEmbeddedBackup, type EmbeddedBackup } from '../../db/backup.ts';
import type { AppDeps } from '../../deps.ts';

export const POSTGRES_BACKUP_MESSAGE =
  'This server runs on PostgreSQL (DATABASE_URL), so there is no embedded database to back up: back PostgreSQL up with its own dump or continuous archiving, together with the object storage and MESSAGE_ENCRYPTION_KEYS (docs/operations.md, "Backups").';
export const MEMORY_BACKUP_MESSAGE =
  'This server keeps its embedded database in memory, not in a DATA_DIR: there is no embedded database to back up.';

/** Whether the keyring the server runs with is the one in DATA_DIR's key file. */
function messageKeysFromFile(keys: AppDeps['config']['messageEncryptionKeys'], dataDir: string): boolean {
  try {
    const file = join(dataDir, 'message-encryption-keys');
    const stored = parseMessageKeys(readFileSync(file, 'utf8').trim(), file);
    return stored.length === keys.length && stored.every((k, i) => k.id === keys[i]!.id && k.key.equals(keys[i]!.key));
  } catch {
    return false;
  }
}

export async function takeBackup(
  deps: Pick<AppDeps, 'config' | 'db' | 'storage' | 'clock'>,
  log: Logger,
): Promise<EmbeddedBackup> {
  const { config, db, storage } = deps;
  if (db.kind === 'postgres') throw notFound(POSTGRES_BACKUP_MESSAGE);
  const dataDir = db.dataDir;
  if (!dataDir) throw notFound(MEMORY_BACKUP_MESSAGE);
  const objectsRoot = resolve(dataDir, 'objects');
  const objects =
    storage === null
      ? { excluded: 'OBJECT_STORAGE=none: this server stores no objects' }
      : storage.kind === 's3'
        ? { excluded: 'OBJECT_STORAGE=s3: the objects are in the bucket; back it up with its own tools' }
        : config.objectStorageDir !== objectsRoot
          ? {
              excluded: `OBJECT_STORAGE_DIR (${config.objectStorageDir}) is not DATA_DIR/objects; back that directory up separately`,
            }
          : { root: objectsRoot };
  const keysFromEnvironment = [
    ...(config.adminToken ? ['ADMIN_TOKEN'] : []),
    ...(messageKeysFromFile(config.messageEncryptionKeys, dataDir) ? [] : ['MESSAGE_ENCRYPTION_KEYS']),
    ...(storage?.kind === 'filesystem' && config.storageSigningKey ? ['STORAGE_SIGNING_KEY'] : []),
  ];
  try {
    const backup = await takeEmbeddedBackup(db, { objects, keysFromEnvironment, clock: deps.clock });
    log.info(
      { createdAt: backup.createdAt, quiescedMs: backup.quiescedMs, objects: 'root' in objects, keysFromEnvironment },
      'embedded backup snapshot taken; streaming it',
    );
    return backup;
  } catch (err) {
    if (err instanceof BackupInProgressError) throw conflict(err.message);
    throw err;
  }
}

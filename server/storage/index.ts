/** Picks the configured object-storage backend; `null` means media is switched off and callers answer 503. */
import type { Config } from '../config.ts';
import { ConfigError } from '../config.ts';
import { FilesystemObjectStorage } from './filesystem.ts';
import { assertS3Config, S3ObjectStorage, type S3StorageOptions } from './s3.ts';
import type { ObjectStorage } from './types.ts';

export type ObjectStorageConfig = Pick<Config, 'objectStorage' | 'objectStorageDir' | 's3'>;

export function createObjectStorage(config: ObjectStorageConfig, s3Options?: S3StorageOptions): ObjectStorage | null {
  switch (config.objectStorage) {
    case 'none':
      return null;
    case 'filesystem':
      if (!config.objectStorageDir) throw new ConfigError('Filesystem object storage needs objectStorageDir (OBJECT_STORAGE_DIR)');
      return new FilesystemObjectStorage(config.objectStorageDir);
    case 's3':
      assertS3Config(config.s3);
      return new S3ObjectStorage(config.s3, s3Options);
    default:
      throw new ConfigError(`Unknown object storage "${String(config.objectStorage satisfies never)}"`);
  }
}

export { FilesystemObjectStorage } from './filesystem.ts';
export { S3ObjectStorage, type S3StorageOptions } from './s3.ts';
export { ALLOWED_IMAGE_TYPES, sniffImageType, type ImageType } from './images.ts';
export { assertValidKey, deletePrefix, etagOf, InvalidObjectKeyError, ObjectStorageError, type ObjectStorage, type StoredObject } from './types.ts';

/** Picks the configured object-storage backend; `null` means media is switched off and callers answer 503. */
import type { Config } from '../config.ts';
import { ConfigError } from '../config.ts';
import { FilesystemObjectStorage } from './filesystem.ts';
import { assertS3Config, S3ObjectStorage, type S3StorageOptions } from './s3.ts';
import { resolveSigningKey } from './signing.ts';
import type { ObjectStorage } from './types.ts';

export type ObjectStorageConfig = Pick<Config, 'objectStorage' | 'objectStorageDir' | 's3'> &
  Partial<Pick<Config, 'storageSigningKey' | 'storagePublicUrl'>>;

export interface ObjectStorageOptions extends S3StorageOptions {
  /**
   * Where the filesystem backend keeps its generated URL-signing key when STORAGE_SIGNING_KEY is
   * unset (the data directory); without one the key lives as long as the process.
   */
  signingKeyDir?: string;
}

export function createObjectStorage(
  config: ObjectStorageConfig,
  options: ObjectStorageOptions = {},
): ObjectStorage | null {
  switch (config.objectStorage) {
    case 'none':
      return null;
    case 'filesystem': {
      if (!config.objectStorageDir)
        throw new ConfigError('Filesystem object storage needs objectStorageDir (OBJECT_STORAGE_DIR)');
      const { key } = resolveSigningKey(config.storageSigningKey, options.signingKeyDir);
      return new FilesystemObjectStorage(config.objectStorageDir, {
        signingKey: key,
        publicBaseUrl: config.storagePublicUrl,
        clock: options.clock,
      });
    }
    case 's3':
      assertS3Config(config.s3);
      return new S3ObjectStorage(config.s3, options);
    default:
      throw new ConfigError(`Unknown object storage "${String(config.objectStorage satisfies never)}"`);
  }
}

export { FilesystemObjectStorage } from './filesystem.ts';
export { S3ObjectStorage, type S3StorageOptions } from './s3.ts';
export { ALLOWED_IMAGE_TYPES, sniffImageType, type ImageType } from './images.ts';
export { contentMatchesType, sniffContentType, VERIFIABLE_CONTENT_TYPES } from './sniff.ts';
export { USER_CONTENT_HEADERS } from './serve.ts';
export { keyToUrlSegment, resolveSigningKey, SignedUrlError, urlSegmentToKey } from './signing.ts';
export {
  assertValidKey,
  deletePrefix,
  etagOf,
  InvalidObjectKeyError,
  ObjectStorageError,
  UploadRejectedError,
  type ObjectHead,
  type ObjectStorage,
  type ObjectStream,
  type PresignedRequest,
  type StoredObject,
} from './types.ts';

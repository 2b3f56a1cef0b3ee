/**
 * Message text at rest: AES-256-GCM under a keyring (docs/messaging.md, "Encryption at rest").
 *
 * - Every encryption takes a random 96-bit IV of its own (freshIv); the stored value is
 *   `iv (12) ‖ ciphertext ‖ tag (16)` next to the id of the key that wrote it.
 * - The account id and the message id are bound as associated data, so a ciphertext copied onto
 *   another row (another message, another account) fails authentication instead of decrypting.
 * - The first key of the ring is the primary: new writes use it; reads use whichever key id the row
 *   names, so rows written under an older key stay readable until the re-encryption job rewrites them.
 *
 * The keys come from MESSAGE_ENCRYPTION_KEYS, or on the embedded default from a key file generated
 * once into DATA_DIR (mode 0600); with DATABASE_URL and no keys the server refuses to start.
 */
import { createCipheriv, createDecipheriv, randomBytes, randomFillSync } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseMessageKeys, type MessageKey } from '../config.ts';

const IV_BYTES = 12;
const TAG_BYTES = 16;
const AAD_VERSION = 'ada-message-v1';

/**
 * IVs drawn from the CSPRNG in blocks of 256, as Node keeps entropy for randomUUID: one call into
 * it per 256 encryptions instead of one each (which cost more than the encryption of a short
 * text). Each IV is copied out and its bytes are never handed out again.
 */
const ivPool = Buffer.alloc(IV_BYTES * 256);
let ivNext = ivPool.length;

function freshIv(): Buffer {
  if (ivNext === ivPool.length) {
    randomFillSync(ivPool);
    ivNext = 0;
  }
  const iv = Buffer.from(ivPool.subarray(ivNext, ivNext + IV_BYTES));
  ivNext += IV_BYTES;
  return iv;
}

export interface Sealed {
  keyId: string;
  data: Buffer;
}

/** Decryption failed: unknown key id, or a ciphertext that does not belong to this row (or was altered). */
export class MessageDecryptionError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'MessageDecryptionError';
  }
}

/** Ids in their canonical lower-case form: the same UUID written in upper case binds the same row. */
function associatedData(accountId: string, messageId: string): Buffer {
  return Buffer.from(`${AAD_VERSION}\0${accountId.toLowerCase()}\0${messageId.toLowerCase()}`, 'utf8');
}

export class MessageCipher {
  private readonly byId: Map<string, Buffer>;

  constructor(private readonly keys: readonly MessageKey[]) {
    if (keys.length === 0) throw new Error('The message keyring is empty');
    this.byId = new Map(keys.map((k) => [k.id, k.key]));
  }

  /** The key new writes use. */
  get primaryKeyId(): string {
    return this.keys[0]!.id;
  }

  /** Every key id except the primary: rows under these are rewritten by the re-encryption job. */
  get olderKeyIds(): string[] {
    return this.keys.slice(1).map((k) => k.id);
  }

  seal(accountId: string, messageId: string, text: string): Sealed {
    const iv = freshIv();
    const cipher = createCipheriv('aes-256-gcm', this.byId.get(this.primaryKeyId)!, iv, { authTagLength: TAG_BYTES });
    cipher.setAAD(associatedData(accountId, messageId));
    const body = Buffer.concat([cipher.update(text, 'utf8'), cipher.final()]);
    return { keyId: this.primaryKeyId, data: Buffer.concat([iv, body, cipher.getAuthTag()]) };
  }

  open(accountId: string, messageId: string, sealed: Sealed): string {
    const key = this.byId.get(sealed.keyId);
    if (!key)
      throw new MessageDecryptionError(
        `Message ${messageId} is encrypted under key "${sealed.keyId}", which is not in MESSAGE_ENCRYPTION_KEYS`,
      );
    const data = sealed.data;
    if (data.length < IV_BYTES + TAG_BYTES)
      throw new MessageDecryptionError(`Message ${messageId}: stored ciphertext is truncated`);
    try {
      const decipher = createDecipheriv('aes-256-gcm', key, data.subarray(0, IV_BYTES), { authTagLength: TAG_BYTES });
      decipher.setAAD(associatedData(accountId, messageId));
      decipher.setAuthTag(data.subarray(data.length - TAG_BYTES));
      return Buffer.concat([
        decipher.update(data.subarray(IV_BYTES, data.length - TAG_BYTES)),
        decipher.final(),
      ]).toString('utf8');
    } catch {
      throw new MessageDecryptionError(
        `Message ${messageId} could not be decrypted (wrong key, altered data, or a ciphertext of another row)`,
      );
    }
  }
}

/** Thrown when no usable key is configured; the runtime turns it into a start-up error. */
export class MessageKeysMissingError extends Error {}

const KEY_FILE = 'message-encryption-keys';

/** Cached per process: the in-memory test database has no data directory to keep a key in. */
let ephemeral: MessageKey[] | undefined;

/**
 * The keyring the server runs with: MESSAGE_ENCRYPTION_KEYS when set; with the embedded database a
 * key generated once into `<dataDir>/message-encryption-keys` (0600); with the in-memory database a
 * random key per process. With DATABASE_URL and no keys: MessageKeysMissingError (never plaintext).
 */
export function resolveMessageKeys(
  configured: MessageKey[],
  options: { databaseUrl: string | undefined; dataDir: string | 'memory' },
): MessageKey[] {
  if (configured.length > 0) return configured;
  if (options.dataDir === 'memory') {
    ephemeral ??= [{ id: 'ephemeral', key: randomBytes(32) }];
    return ephemeral;
  }
  if (options.databaseUrl) {
    throw new MessageKeysMissingError(
      'MESSAGE_ENCRYPTION_KEYS is required with DATABASE_URL: message text is encrypted at rest. Set it to <id>:<base64 of 32 random bytes>, e.g. k1:$(openssl rand -base64 32)',
    );
  }
  const file = join(options.dataDir, KEY_FILE);
  if (existsSync(file)) {
    const keys = parseMessageKeys(readFileSync(file, 'utf8').trim(), file);
    if (keys.length === 0)
      throw new MessageKeysMissingError(
        `${file} holds no key; delete it only if no message was ever stored, or set MESSAGE_ENCRYPTION_KEYS`,
      );
    return keys;
  }
  mkdirSync(options.dataDir, { recursive: true });
  const key: MessageKey = { id: 'k1', key: randomBytes(32) };
  writeFileSync(file, `${key.id}:${key.key.toString('base64')}\n`, { mode: 0o600, flag: 'wx' });
  return [key];
}

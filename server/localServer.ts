/**
 * Where the embedded server of a DATA_DIR listens. The server records its address in
 * `DATA_DIR/server-address` once it listens (and removes it when it stops), tagged with the lock it
 * holds on the directory. `npm run admin` reads it to find that server, and to know that the token
 * in `DATA_DIR/admin-token` belongs to the server it is about to talk to: only a live process of
 * this machine that holds the directory's lock as a server, and recorded this very address under
 * that lock, gets it. A record left by an earlier server, a lock held by `npm run db:migrate` or by
 * a process in another container, or a server on PostgreSQL (which never reads DATA_DIR) do not.
 */
import { readFileSync, renameSync, unlinkSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { inspectDataDirLock, type LockRecord } from './db/dataDirLock.ts';

export const SERVER_ADDRESS_FILE = 'server-address';

interface AddressRecord {
  url: string;
  pid: number;
  /** The nonce of the DATA_DIR lock the server held when it wrote this. */
  lockNonce: string;
}

/** The URL a client on this machine reaches a server listening on `host`:`port` with. */
export function loopbackUrl(host: string, port: number): string {
  if (host === '' || host === '0.0.0.0') return `http://127.0.0.1:${port}`;
  if (host === '::') return `http://[::1]:${port}`;
  return host.includes(':') ? `http://[${host}]:${port}` : `http://${host}:${port}`;
}

/** Records where this process (holding `lock` on `dataDir`) listens; returns what removes the record again. */
export function recordServerAddress(dataDir: string, lock: LockRecord, url: string): () => void {
  const file = join(resolve(dataDir), SERVER_ADDRESS_FILE);
  const record: AddressRecord = { url, pid: lock.pid, lockNonce: lock.nonce };
  // Written whole under a private name, then renamed: a reader never sees half a record.
  const temp = `${file}.${process.pid}.tmp`;
  writeFileSync(temp, JSON.stringify(record) + '\n', { mode: 0o644 });
  renameSync(temp, file);
  return () => {
    try {
      if (readRecord(file)?.lockNonce === lock.nonce) unlinkSync(file);
    } catch {
      // Already gone; a leftover record is ignored anyway (its lock nonce is not the next server's).
    }
  };
}

function readRecord(file: string): AddressRecord | null {
  try {
    const value = JSON.parse(readFileSync(file, 'utf8')) as Partial<AddressRecord>;
    if (typeof value.url !== 'string' || typeof value.pid !== 'number' || typeof value.lockNonce !== 'string')
      return null;
    return { url: value.url, pid: value.pid, lockNonce: value.lockNonce };
  } catch {
    return null;
  }
}

/**
 * The running embedded server of `dataDir` on this machine and the URL it recorded, or why there is
 * none (a clause that completes "… is used only with the running server of that DATA_DIR, and …").
 */
export function runningServerOf(dataDir: string): { url: string; pid: number } | { reason: string } {
  const dir = resolve(dataDir);
  const lock = inspectDataDirLock(dir);
  switch (lock.state) {
    case 'free':
      return { reason: `no server is running on ${dir} (no ${join(dir, 'lock')})` };
    case 'stale':
      return { reason: `the process that held ${dir} is gone (${lock.reason})` };
    case 'running-elsewhere':
      return {
        reason: `${dir} is held by pid ${lock.holder.pid} on ${lock.holder.hostname} (another machine or container), not by a process here`,
      };
    case 'running-here':
      break;
  }
  const { holder } = lock;
  if (holder.purpose !== 'server')
    return { reason: `${dir} is held by ${holder.purpose} (pid ${holder.pid}), not by a server` };
  const file = join(dir, SERVER_ADDRESS_FILE);
  const record = readRecord(file);
  if (!record || record.lockNonce !== holder.nonce || record.pid !== holder.pid)
    return { reason: `its server (pid ${holder.pid}) has not recorded its address in ${file} (still starting?)` };
  return { url: record.url, pid: record.pid };
}

/**
 * One process per embedded data directory. PGlite has no lock of its own: two processes on one
 * DATA_DIR each answer their own writes and, once both stop, one side's writes are gone. Whoever
 * opens the embedded database (the server, `npm run db:migrate`) takes `DATA_DIR/lock` first.
 *
 * - Taking it is atomic: the holder's record is written to a private temp file and hard-linked to
 *   the lock path; link() fails when the path exists, so of two simultaneous starts exactly one
 *   wins, and nobody ever reads a half-written record.
 * - A crashed holder does not block a restart. On the same machine (same host name, boot and PID
 *   namespace) the record's pid is checked together with the process start time from
 *   /proc/<pid>/stat, so a recycled pid (common in containers, where the server is pid 1 every
 *   time) is recognised as stale at once, and so is a holder that has exited but is not yet
 *   reaped by its parent (state Z or X).
 * - A holder elsewhere (another container or host sharing the volume) cannot be checked by pid, so
 *   the holder touches the file every HEARTBEAT_MS and a record untouched for STALE_AFTER_MS counts
 *   as stale.
 * - A stale lock is moved aside under a private name before it is replaced, and the moved record is
 *   compared with the one judged stale: two starts racing to break the same stale lock cannot both
 *   win.
 * - Released on clean shutdown, and on process exit as a fallback.
 */
import { randomBytes } from 'node:crypto';
import {
  closeSync,
  fsyncSync,
  linkSync,
  openSync,
  readFileSync,
  readlinkSync,
  renameSync,
  statSync,
  unlinkSync,
  utimesSync,
  writeSync,
} from 'node:fs';
import { hostname } from 'node:os';
import { join, resolve } from 'node:path';

export const LOCK_FILE_NAME = 'lock';
const HEARTBEAT_MS = 10_000;
const STALE_AFTER_MS = 60_000;

export interface LockRecord {
  pid: number;
  /** Process start time in clock ticks since boot (/proc/<pid>/stat field 22); null where /proc is missing. */
  startTicks: number | null;
  hostname: string;
  /** /proc/sys/kernel/random/boot_id and the pid namespace: pids compare only within the same ones. */
  bootId: string | null;
  pidNamespace: string | null;
  /** What took the lock (server, migrate), for the error message. */
  purpose: string;
  acquiredAt: string;
  /** Tells this acquisition apart from any other by the same pid. */
  nonce: string;
}

export class DataDirLockedError extends Error {
  constructor(
    readonly dataDir: string,
    readonly holder: LockRecord,
    detail: string,
  ) {
    super(
      `DATA_DIR ${dataDir} is in use by another process (pid ${holder.pid}${holder.hostname !== hostname() ? ` on host ${holder.hostname}` : ''}, ` +
        `${holder.purpose}, since ${holder.acquiredAt})${detail}; stop it first or set DATA_DIR to another directory`,
    );
    this.name = 'DataDirLockedError';
  }
}

function readOptional(path: string): string | null {
  try {
    return readFileSync(path, 'utf8').trim();
  } catch {
    return null;
  }
}

/** Fields 3 onwards of /proc/<pid>/stat; the command name (field 2) may contain spaces, so count after its ')'. */
function statFields(pid: number): string[] | null {
  const stat = readOptional(`/proc/${pid}/stat`);
  return stat ? stat.slice(stat.lastIndexOf(')') + 2).split(' ') : null;
}

/** Field 22 of /proc/<pid>/stat: the process start time in clock ticks since boot. */
export function processStartTicks(pid: number): number | null {
  const ticks = Number(statFields(pid)?.[19]);
  return Number.isFinite(ticks) ? ticks : null;
}

/**
 * Field 3 of /proc/<pid>/stat. `Z` (zombie) and `X` (dead): the process has exited and only waits
 * for its parent to reap it, which may take seconds (a supervisor that restarts at once, a parent
 * that never waits); it holds no file open any more.
 */
export function processState(pid: number): string | null {
  return statFields(pid)?.[0] ?? null;
}

function pidNamespace(): string | null {
  try {
    return readlinkSync('/proc/self/ns/pid');
  } catch {
    return null;
  }
}

function ownRecord(purpose: string): LockRecord {
  return {
    pid: process.pid,
    startTicks: processStartTicks(process.pid),
    hostname: hostname(),
    bootId: readOptional('/proc/sys/kernel/random/boot_id'),
    pidNamespace: pidNamespace(),
    purpose,
    acquiredAt: new Date().toISOString(),
    nonce: randomBytes(8).toString('hex'),
  };
}

function parseRecord(text: string | null): LockRecord | null {
  if (!text) return null;
  try {
    const value = JSON.parse(text) as Partial<LockRecord>;
    if (
      typeof value.pid !== 'number' ||
      !Number.isInteger(value.pid) ||
      value.pid <= 0 ||
      typeof value.nonce !== 'string'
    )
      return null;
    return {
      pid: value.pid,
      startTicks: typeof value.startTicks === 'number' ? value.startTicks : null,
      hostname: String(value.hostname ?? ''),
      bootId: typeof value.bootId === 'string' ? value.bootId : null,
      pidNamespace: typeof value.pidNamespace === 'string' ? value.pidNamespace : null,
      purpose: String(value.purpose ?? 'unknown'),
      acquiredAt: String(value.acquiredAt ?? 'unknown'),
      nonce: value.nonce,
    };
  } catch {
    return null;
  }
}

function sameRecord(a: LockRecord | null, b: LockRecord | null): boolean {
  return !!a && !!b && a.pid === b.pid && a.nonce === b.nonce;
}

function isErrno(error: unknown, code: string): boolean {
  return (error as NodeJS.ErrnoException | undefined)?.code === code;
}

type Verdict = { alive: true; detail: string } | { alive: false; reason: string };

/** Locks this process holds, by path: a record with our own pid is ours only if listed here. */
const heldHere = new Map<string, LockRecord>();

/** Is the process that wrote `record` still running? */
function judge(record: LockRecord, lockPath: string): Verdict {
  const me = ownRecord('check');
  const comparablePids =
    record.hostname === me.hostname && record.bootId === me.bootId && record.pidNamespace === me.pidNamespace;
  if (comparablePids) {
    if (record.pid === process.pid) {
      if (sameRecord(heldHere.get(lockPath) ?? null, record))
        return { alive: true, detail: '; this process already holds it' };
      return { alive: false, reason: 'written by an earlier process with this pid' };
    }
    try {
      process.kill(record.pid, 0);
    } catch (error) {
      // EPERM: the pid exists but belongs to another user; it is alive.
      if (isErrno(error, 'ESRCH')) return { alive: false, reason: `pid ${record.pid} is not running` };
    }
    const ticks = processStartTicks(record.pid);
    if (record.startTicks !== null && ticks !== null && ticks !== record.startTicks) {
      return { alive: false, reason: `pid ${record.pid} now belongs to a different process` };
    }
    const state = processState(record.pid);
    if (state === 'Z' || state === 'X') {
      return {
        alive: false,
        reason: `pid ${record.pid} has exited (${state === 'Z' ? 'a zombie' : 'dead'}, not yet reaped)`,
      };
    }
    return { alive: true, detail: '' };
  }
  // Another host, container or boot: only the heartbeat tells.
  let ageMs: number;
  try {
    ageMs = Date.now() - statSync(lockPath).mtimeMs;
  } catch {
    return { alive: false, reason: 'lock file vanished' };
  }
  if (ageMs > STALE_AFTER_MS) return { alive: false, reason: `not refreshed for ${Math.round(ageMs / 1000)} s` };
  return {
    alive: true,
    detail: `; refreshed ${Math.max(0, Math.round(ageMs / 1000))} s ago, considered abandoned after ${STALE_AFTER_MS / 1000} s without refresh`,
  };
}

/** Who holds a DATA_DIR's lock, as another process on this machine sees it (nothing is changed). */
export type DataDirHolder =
  | { state: 'free' }
  /** A live process of this machine (same host, boot and pid namespace: its pid was checked). */
  | { state: 'running-here'; holder: LockRecord }
  /** A process elsewhere (another host or container sharing the directory) that keeps refreshing the lock. */
  | { state: 'running-elsewhere'; holder: LockRecord }
  /** Left behind by a process that is gone (the next start replaces it). */
  | { state: 'stale'; holder: LockRecord | null; reason: string };

export function inspectDataDirLock(dataDir: string): DataDirHolder {
  const lockPath = join(resolve(dataDir), LOCK_FILE_NAME);
  const text = readOptional(lockPath);
  if (text === null) return { state: 'free' };
  const holder = parseRecord(text);
  if (!holder) return { state: 'stale', holder: null, reason: 'the lock file is unreadable' };
  const verdict = judge(holder, lockPath);
  if (!verdict.alive) return { state: 'stale', holder, reason: verdict.reason };
  const me = ownRecord('check');
  const here =
    holder.hostname === me.hostname && holder.bootId === me.bootId && holder.pidNamespace === me.pidNamespace;
  return here ? { state: 'running-here', holder } : { state: 'running-elsewhere', holder };
}

export interface DataDirLock {
  readonly path: string;
  readonly record: LockRecord;
  release(): void;
}

export interface AcquireOptions {
  purpose?: string;
  /** Told when a stale lock was replaced (crashed holder). */
  onStale?: (message: string) => void;
}

/**
 * Takes the lock on `dataDir` (which must exist) or throws DataDirLockedError naming the directory
 * and the holder's pid.
 */
export function acquireDataDirLock(dataDir: string, options: AcquireOptions = {}): DataDirLock {
  const lockPath = join(resolve(dataDir), LOCK_FILE_NAME);
  const record = ownRecord(options.purpose ?? 'server');
  const candidate = `${lockPath}.${process.pid}.${record.nonce}.tmp`;
  const fd = openSync(candidate, 'wx', 0o644);
  try {
    writeSync(fd, JSON.stringify(record) + '\n');
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  try {
    for (let attempt = 0; attempt < 10; attempt++) {
      try {
        linkSync(candidate, lockPath);
        return holdLock(lockPath, record);
      } catch (error) {
        if (!isErrno(error, 'EEXIST')) throw error;
      }
      const holderText = readOptional(lockPath);
      if (holderText === null) continue; // released in the meantime
      const holder = parseRecord(holderText);
      if (holder) {
        const verdict = judge(holder, lockPath);
        if (verdict.alive) throw new DataDirLockedError(dataDir, holder, verdict.detail);
        options.onStale?.(`removed the stale lock ${lockPath} (pid ${holder.pid}: ${verdict.reason})`);
      } else {
        // Records are linked in whole, so an unreadable one was damaged outside this code.
        options.onStale?.(`removed the unreadable lock ${lockPath}`);
      }
      // Move it aside, then make sure what moved is what was judged: if another start replaced the
      // stale lock in between, that fresh lock is put back and honoured.
      const aside = `${lockPath}.${process.pid}.${randomBytes(4).toString('hex')}.stale`;
      try {
        renameSync(lockPath, aside);
      } catch (error) {
        if (isErrno(error, 'ENOENT')) continue;
        throw error;
      }
      const moved = readOptional(aside);
      if (moved !== holderText) {
        const fresh = parseRecord(moved);
        try {
          linkSync(aside, lockPath);
        } catch {
          // Someone else holds the path now; the next round judges them.
        }
        unlinkSync(aside);
        if (fresh) {
          const verdict = judge(fresh, lockPath);
          if (verdict.alive) throw new DataDirLockedError(dataDir, fresh, verdict.detail);
        }
        continue;
      }
      unlinkSync(aside);
    }
    throw new Error(`Could not take the lock ${lockPath}: it kept changing hands`);
  } finally {
    try {
      unlinkSync(candidate);
    } catch {
      // already gone
    }
  }
}

function holdLock(lockPath: string, record: LockRecord): DataDirLock {
  let released = false;
  heldHere.set(lockPath, record);
  const stillOurs = () => sameRecord(parseRecord(readOptional(lockPath)), record);
  const heartbeat = setInterval(() => {
    try {
      const now = new Date();
      utimesSync(lockPath, now, now);
    } catch {
      // A vanished lock is noticed by whoever starts next; nothing to do here.
    }
  }, HEARTBEAT_MS);
  heartbeat.unref();
  const release = () => {
    if (released) return;
    released = true;
    if (heldHere.get(lockPath) === record) heldHere.delete(lockPath);
    clearInterval(heartbeat);
    process.removeListener('exit', release);
    try {
      if (stillOurs()) unlinkSync(lockPath);
    } catch {
      // Nothing left to release.
    }
  };
  process.on('exit', release);
  return { path: lockPath, record, release };
}

/**
 * The DATA_DIR lock on its own (the processes that use it are in lifecycle.test.ts): a live holder
 * refuses, a dead or recycled pid does not, a holder in another container is judged by its heartbeat.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, readlinkSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { hostname, tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  acquireDataDirLock,
  DataDirLockedError,
  LOCK_FILE_NAME,
  processStartTicks,
  processState,
  type LockRecord,
} from '../server/db/dataDirLock.ts';

let dir: string;
const children: ChildProcess[] = [];
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'ada-lock-'));
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));
afterAll(() => {
  for (const c of children) c.kill('SIGKILL');
});

const lockFile = () => join(dir, LOCK_FILE_NAME);

/** A record as another process on this machine would write it. */
function recordOf(pid: number, extra: Partial<LockRecord> = {}): LockRecord {
  return {
    pid,
    startTicks: processStartTicks(pid),
    hostname: hostname(),
    bootId: readOptional('/proc/sys/kernel/random/boot_id'),
    pidNamespace: pidNs(),
    purpose: 'server',
    acquiredAt: new Date().toISOString(),
    nonce: 'feedfacecafebeef',
    ...extra,
  };
}

function readOptional(path: string): string | null {
  try {
    return readFileSync(path, 'utf8').trim();
  } catch {
    return null;
  }
}

function pidNs(): string | null {
  try {
    return readlinkSync('/proc/self/ns/pid');
  } catch {
    return null;
  }
}

/** A live process that is not this one. */
async function liveProcess(): Promise<number> {
  const child = spawn('sleep', ['60'], { stdio: 'ignore' });
  children.push(child);
  await new Promise((r) => child.once('spawn', r));
  return child.pid!;
}

function deadPid(): number {
  // A pid from a process that has exited (spawnSync waits for it).
  const { pid } = spawnSync('true');
  return pid!;
}

describe('DATA_DIR lock', () => {
  it('is atomic within a process: the second acquire is refused until the first is released', () => {
    const first = acquireDataDirLock(dir);
    expect(JSON.parse(readFileSync(lockFile(), 'utf8'))).toMatchObject({ pid: process.pid, nonce: first.record.nonce });
    expect(() => acquireDataDirLock(dir)).toThrow(DataDirLockedError);
    first.release();
    expect(existsSync(lockFile())).toBe(false);
    acquireDataDirLock(dir).release();
  });

  it('refuses while the holder runs, naming the directory and the pid', async () => {
    const pid = await liveProcess();
    writeFileSync(lockFile(), JSON.stringify(recordOf(pid)));
    let error: unknown;
    try {
      acquireDataDirLock(dir);
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(DataDirLockedError);
    expect((error as Error).message).toContain(
      `DATA_DIR ${dir} is in use by another process (pid ${pid}, server, since `,
    );
    expect(JSON.parse(readFileSync(lockFile(), 'utf8')).pid).toBe(pid); // left alone
  });

  it('takes over the lock of a process that is gone', () => {
    const pid = deadPid();
    writeFileSync(lockFile(), JSON.stringify(recordOf(pid, { startTicks: 12345 })));
    const notices: string[] = [];
    const lock = acquireDataDirLock(dir, { onStale: (m) => notices.push(m) });
    expect(notices).toEqual([`removed the stale lock ${lockFile()} (pid ${pid}: pid ${pid} is not running)`]);
    expect(JSON.parse(readFileSync(lockFile(), 'utf8')).pid).toBe(process.pid);
    lock.release();
  });

  it('takes over the lock of a holder that was killed and is a zombie its parent has not reaped', async () => {
    // The parent (sh exec'd into sleep) never waits for its background child, so the killed child stays a zombie.
    const parent = spawn('sh', ['-c', 'sleep 300 & echo $!; exec sleep 300'], { stdio: ['ignore', 'pipe', 'ignore'] });
    children.push(parent);
    const pid = Number(await new Promise<string>((r) => parent.stdout!.once('data', (d) => r(String(d).trim()))));
    writeFileSync(lockFile(), JSON.stringify(recordOf(pid)));
    expect(() => acquireDataDirLock(dir)).toThrow(DataDirLockedError); // alive: refused
    process.kill(pid, 'SIGKILL');
    for (let i = 0; i < 100 && processState(pid) !== 'Z'; i++) await new Promise((r) => setTimeout(r, 20));
    expect(processState(pid)).toBe('Z');
    const notices: string[] = [];
    acquireDataDirLock(dir, { onStale: (m) => notices.push(m) }).release();
    expect(notices).toEqual([
      `removed the stale lock ${lockFile()} (pid ${pid}: pid ${pid} has exited (a zombie, not yet reaped))`,
    ]);
    expect(processState(pid)).toBe('Z'); // still unreaped: the lock did not wait for it
  });

  it('takes over when the pid now belongs to another process (start time differs)', async () => {
    const pid = await liveProcess();
    const ticks = processStartTicks(pid)!;
    writeFileSync(lockFile(), JSON.stringify(recordOf(pid, { startTicks: ticks - 1 })));
    const notices: string[] = [];
    acquireDataDirLock(dir, { onStale: (m) => notices.push(m) }).release();
    expect(notices).toEqual([
      `removed the stale lock ${lockFile()} (pid ${pid}: pid ${pid} now belongs to a different process)`,
    ]);
  });

  it('takes over a record with its own pid that it does not hold (a container restarted as pid 1 again)', () => {
    writeFileSync(lockFile(), JSON.stringify(recordOf(process.pid, { nonce: 'from-an-earlier-life' })));
    const lock = acquireDataDirLock(dir);
    expect(lock.record.nonce).not.toBe('from-an-earlier-life');
    lock.release();
  });

  it('takes over an unreadable lock file', () => {
    writeFileSync(lockFile(), 'garbage');
    acquireDataDirLock(dir).release();
  });

  it('judges a holder on another host by its heartbeat: fresh refuses, a minute old is stale', () => {
    writeFileSync(
      lockFile(),
      JSON.stringify(recordOf(999_999, { hostname: 'other-container', pidNamespace: 'pid:[1]' })),
    );
    expect(() => acquireDataDirLock(dir)).toThrow(
      /pid 999999 on host other-container.*refreshed \d+ s ago, considered abandoned after 60 s/,
    );
    const old = new Date(Date.now() - 61_000);
    utimesSync(lockFile(), old, old);
    acquireDataDirLock(dir).release();
  });

  it('release leaves a lock alone that is no longer its own', () => {
    const lock = acquireDataDirLock(dir);
    const other = recordOf(12345, { nonce: 'someone-else' });
    writeFileSync(lockFile(), JSON.stringify(other));
    lock.release();
    expect(JSON.parse(readFileSync(lockFile(), 'utf8')).nonce).toBe('someone-else');
  });
});

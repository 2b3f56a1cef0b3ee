/**
 * CPU time a server spends on a load: its own process plus the PostgreSQL backends serving its
 * connections, both read from /proc/<pid>/stat (utime + stime). The backends are found in
 * pg_stat_activity by the application_name the bench gives each server's connections; they are
 * listed every half second during the load, so a connection opened (or closed) meanwhile counts
 * too (from its start, up to its last reading). Needs PostgreSQL on this machine (same pid space).
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import type pg from 'pg';

const TICKS_PER_SECOND = (() => {
  try {
    return Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
  } catch {
    return 100;
  }
})();

/** utime + stime of the process (all its threads) in ms; undefined once it is gone. */
export function cpuMs(pid: number): number | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    // Fields 14 and 15 of proc(5); the slice starts at field 3.
    return ((Number(fields[11]) + Number(fields[12])) * 1000) / TICKS_PER_SECOND;
  } catch {
    return undefined;
  }
}

export interface CpuUsage {
  /** The server process, ms. */
  serverMs: number;
  /** Its PostgreSQL backends, ms. */
  databaseMs: number;
  /** How many backends served it during the load. */
  backends: number;
}

export class CpuMeter {
  constructor(private readonly admin: pg.Client) {}

  private async backendPids(applicationName: string): Promise<number[]> {
    const { rows } = await this.admin.query<{ pid: number }>(
      'select pid from pg_stat_activity where application_name = $1',
      [applicationName],
    );
    return rows.map((r) => r.pid);
  }

  /** Measures `work` (the load) for the server process `pid` whose connections carry `applicationName`. */
  async measure<T>(
    pid: number,
    applicationName: string,
    work: () => Promise<T>,
  ): Promise<{ result: T; cpu: CpuUsage }> {
    const first = new Map<number, number>();
    const last = new Map<number, number>();
    const read = async (initial: boolean) => {
      for (const backend of await this.backendPids(applicationName)) {
        const ms = cpuMs(backend);
        if (ms === undefined) continue;
        // A backend first seen during the load was opened during it: all of its time counts.
        if (!first.has(backend)) first.set(backend, initial ? ms : 0);
        last.set(backend, ms);
      }
    };
    await read(true);
    const serverStart = cpuMs(pid) ?? 0;
    let polling = Promise.resolve();
    const timer = setInterval(() => {
      polling = polling.then(() => read(false)).catch(() => undefined);
    }, 500);
    let result: T;
    try {
      result = await work();
    } finally {
      clearInterval(timer);
    }
    const serverEnd = cpuMs(pid) ?? serverStart;
    await polling;
    await read(false);
    let databaseMs = 0;
    for (const [backend, start] of first) databaseMs += (last.get(backend) ?? start) - start;
    return { result, cpu: { serverMs: serverEnd - serverStart, databaseMs, backends: first.size } };
  }
}

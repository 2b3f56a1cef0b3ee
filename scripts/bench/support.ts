/** Small helpers the bench scripts share. */
import type { ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createServer } from 'node:net';
import pg from 'pg';

/** A TCP port free on 127.0.0.1 right now. */
export function freePort(): Promise<number> {
  return new Promise((res) => {
    const s = createServer().listen(0, '127.0.0.1', () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => res(port));
    });
  });
}

/** Runs one statement on its own connection (create or drop a database). */
export async function adminQuery(connectionString: string, sql: string): Promise<void> {
  const c = new pg.Client({ connectionString });
  await c.connect();
  try {
    await c.query(sql);
  } finally {
    await c.end();
  }
}

/**
 * The message encryption key of the servers a bench run starts: the operator's
 * MESSAGE_ENCRYPTION_KEYS when set, else one generated for this run (a server on DATABASE_URL does
 * not start without one; the bench never reads messages back after the run).
 */
export const benchMessageKeys: string =
  process.env.MESSAGE_ENCRYPTION_KEYS || `bench:${randomBytes(32).toString('base64')}`;

/** Waits until the server process answers /healthz (30 s at most); throws when it exits first. */
export async function waitForServer(child: ChildProcess, url: string): Promise<void> {
  for (let i = 0; i < 300; i++) {
    if (child.exitCode !== null) throw new Error(`the server exited with ${child.exitCode}`);
    try {
      await fetch(`${url}/healthz`);
      return;
    } catch {
      await new Promise((r) => setTimeout(r, 100));
    }
  }
  throw new Error('the server did not start');
}

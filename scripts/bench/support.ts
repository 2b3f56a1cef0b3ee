/** Small helpers the bench scripts share. */
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

/** `npm run mock` (Prism) serves the contract's examples, as frontend teams use it. */
import { spawn, type ChildProcess } from 'node:child_process';
import { createServer } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

let child: ChildProcess;
let base = '';

async function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const s = createServer().listen(0, '127.0.0.1', () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
  });
}

beforeAll(async () => {
  const port = await freePort();
  base = `http://127.0.0.1:${port}`;
  child = spawn('npm', ['run', '-s', 'mock'], { env: { ...process.env, MOCK_PORT: String(port) }, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
  let out = '';
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`prism did not start:\n${out}`)), 90_000);
    const onData = (d: Buffer) => {
      out += d;
      if (out.includes('Prism is listening')) {
        clearTimeout(timer);
        resolve();
      }
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', onData);
    child.on('exit', (code) => reject(new Error(`prism exited with ${code}:\n${out}`)));
  });
});

afterAll(() => {
  if (child?.pid) process.kill(-child.pid, 'SIGTERM');
});

describe('Prism mock', () => {
  it('answers with the documented example', async () => {
    const res = await fetch(`${base}/api/v1/appearance`, { headers: { Authorization: 'Bearer anything' } });
    expect(res.status).toBe(200);
    expect(await res.json()).toMatchObject({ themeMode: 'dark', colorScheme: 'forest' });
  });

  it('enforces the security requirement and strict bodies like the real server', async () => {
    expect((await fetch(`${base}/api/v1/appearance`)).status).toBe(401);
    const bad = await fetch(`${base}/api/v1/appearance`, {
      method: 'PATCH',
      headers: { Authorization: 'Bearer anything', 'Content-Type': 'application/json' },
      body: JSON.stringify({ bogus: 1 }),
    });
    expect(bad.status).toBe(400);
  });
});

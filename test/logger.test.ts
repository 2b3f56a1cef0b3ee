/** The logger's default destination (server/logger.ts): standard output, each line written as it is logged. */
import { spawnSync } from 'node:child_process';
import { closeSync, mkdtempSync, openSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';

const root = resolve(import.meta.dirname, '..');
const dir = mkdtempSync(join(tmpdir(), 'logger-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('createLogger without a destination', () => {
  it('has written each line to standard output when the logging call returns', () => {
    // The child logs, then reads what its standard output (a file) holds in the same tick, and dies
    // by SIGKILL (no exit handler can flush anything afterwards).
    const out = join(dir, 'stdout.log');
    const script = `
      import { readFileSync } from 'node:fs';
      import { createLogger } from './server/logger.ts';
      const log = createLogger('info');
      log.info({ apiKey: 'adk_secret' }, 'first');
      log.warn('second');
      process.stderr.write(readFileSync(${JSON.stringify(out)}, 'utf8'));
      process.kill(process.pid, 'SIGKILL');`;
    const fd = openSync(out, 'w');
    const child = spawnSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], {
      cwd: root,
      stdio: ['ignore', fd, 'pipe'],
      encoding: 'utf8',
    });
    closeSync(fd);
    expect(child.signal).toBe('SIGKILL');
    const seen = child.stderr.trim().split('\n');
    expect(seen.map((line) => JSON.parse(line) as Record<string, unknown>)).toEqual([
      expect.objectContaining({ level: 30, msg: 'first', apiKey: '[redacted]', service: 'account-data-api' }),
      expect.objectContaining({ level: 40, msg: 'second' }),
    ]);
    expect(readFileSync(out, 'utf8').trim().split('\n')).toEqual(seen);
  });
});

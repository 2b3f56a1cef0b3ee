/** The embedded database's memory settings: validated in config, and what PGlite actually runs with. */
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../server/config.ts';
import { openDatabase } from '../server/db/knex.ts';

const dirs: string[] = [];
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

// Process starts and walks over every operation: generous under a loaded CI machine.
describe('EMBEDDED_SHARED_BUFFERS and EMBEDDED_V8_LOW_MEMORY', { timeout: 120_000 }, () => {
  it('default to 16MB and true, and refuse what PostgreSQL or PGlite cannot take', () => {
    expect(loadConfig({})).toMatchObject({ embeddedSharedBuffers: '16MB', embeddedV8LowMemory: true });
    expect(loadConfig({ EMBEDDED_SHARED_BUFFERS: '512kB', EMBEDDED_V8_LOW_MEMORY: 'false' })).toMatchObject({
      embeddedSharedBuffers: '512kB',
      embeddedV8LowMemory: false,
    });
    for (const bad of ['16', '16 MB', '64kB', '2GB', 'lots']) {
      expect(() => loadConfig({ EMBEDDED_SHARED_BUFFERS: bad })).toThrow(ConfigError);
    }
    expect(() => loadConfig({ EMBEDDED_SHARED_BUFFERS: '2GB' })).toThrow(
      'EMBEDDED_SHARED_BUFFERS must be a size between 128kB and 1GB such as 16MB, got "2GB"',
    );
  });

  it('a new data directory is created and opened with the configured buffer pool', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'ada-settings-'));
    dirs.push(dataDir);
    const db = await openDatabase({ dataDir, embeddedSharedBuffers: '24MB' });
    try {
      expect(existsSync(join(dataDir, 'pglite', 'PG_VERSION'))).toBe(true);
      expect((await db.knex.raw('show shared_buffers')).rows[0].shared_buffers).toBe('24MB');
    } finally {
      await db.close();
    }
    const again = await openDatabase({ dataDir });
    try {
      expect((await again.knex.raw('show shared_buffers')).rows[0].shared_buffers).toBe('16MB');
    } finally {
      await again.close();
    }
  });
});

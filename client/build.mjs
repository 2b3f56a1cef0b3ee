// Builds the package into dist/: tsc emits dist/client/*.js and *.d.ts, and the contract's types
// (generated/api.d.ts, never edited by hand) are copied to dist/generated/ where the emitted
// declarations import them from, so the installed package is self-contained.
import { execFileSync } from 'node:child_process';
import { copyFileSync, mkdirSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const dist = join(here, 'dist');
// TypeScript is the repository's devDependency (resolved from the root node_modules), not the package's.
const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');

rmSync(dist, { recursive: true, force: true });
execFileSync(process.execPath, [tsc, '-p', join(here, 'tsconfig.build.json')], { stdio: 'inherit' });
mkdirSync(join(dist, 'generated'), { recursive: true });
copyFileSync(join(here, '..', 'generated', 'api.d.ts'), join(dist, 'generated', 'api.d.ts'));

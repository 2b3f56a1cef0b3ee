/**
 * npm run build — bundles server/ into dist/main.js (plain ESM for `node`, dependencies left in
 * node_modules), so `npm start` runs one node process with no tsx/esbuild wrapper around it:
 * signals reach the server directly and ~100 MB of wrapper processes are gone. Takes well under a
 * second. `npm start` runs it with --if-stale first (prestart): it rebuilds when a file under
 * server/ is newer than the bundle, so a checkout never runs stale code, and an image built with
 * `npm run build` starts without writing (a read-only file system is fine).
 *
 * Source files locate `generated/` with `import.meta.dirname`-relative paths. In one bundle every
 * module shares the bundle's directory, so each occurrence is rewritten to the directory the source
 * file had, resolved at run time from the project root (the parent of dist/): the compiled server
 * finds generated/ wherever the project is checked out or copied.
 *
 * The output is written to a temporary file and renamed, so a server starting while another build
 * runs (parallel tests) never loads a half-written bundle.
 */
import { existsSync, readdirSync, statSync } from 'node:fs';
import { readFile, rename, writeFile, mkdir } from 'node:fs/promises';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { build, type Plugin } from 'esbuild';

const root = resolve(import.meta.dirname, '..');
const outDir = join(root, 'dist');
const outFile = join(outDir, 'main.js');

const ROOT_VAR = '__adaProjectRoot';

/** Rewrites `import.meta.dirname`/`filename` to the source file's original location under the project root. */
const sourceLocation: Plugin = {
  name: 'source-location',
  setup(b) {
    b.onLoad({ filter: /\.ts$/ }, async (args) => {
      const source = await readFile(args.path, 'utf8');
      const rel = relative(root, args.path);
      if (rel.startsWith('..') || rel.split(sep).includes('node_modules')) return undefined;
      if (/\bimport\.meta\.url\b/.test(source)) {
        throw new Error(`${rel}: import.meta.url is not supported in the bundle; use import.meta.dirname`);
      }
      const posixDir = dirname(rel).split(sep).join('/');
      const posixFile = rel.split(sep).join('/');
      const contents = source
        .replace(/\bimport\.meta\.dirname\b/g, `${ROOT_VAR}(${JSON.stringify(posixDir)})`)
        .replace(/\bimport\.meta\.filename\b/g, `${ROOT_VAR}(${JSON.stringify(posixFile)})`);
      return { contents, loader: 'ts' };
    });
  },
};

const banner = [
  "import { dirname as __adaDirname, join as __adaJoin } from 'node:path';",
  "import { fileURLToPath as __adaFileURLToPath } from 'node:url';",
  // dist/main.js → the project root is dist's parent.
  'const __adaRoot = __adaDirname(__adaDirname(__adaFileURLToPath(import.meta.url)));',
  `const ${ROOT_VAR} = (rel) => __adaJoin(__adaRoot, rel);`,
].join('\n');

export async function buildServer(): Promise<{ outFile: string; ms: number }> {
  const started = performance.now();
  const result = await build({
    absWorkingDir: root,
    entryPoints: ['server/main.ts'],
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: 'node20',
    packages: 'external',
    sourcemap: 'external',
    sourcesContent: false,
    legalComments: 'none',
    banner: { js: banner },
    outfile: outFile,
    write: false,
    logLevel: 'warning',
    plugins: [sourceLocation],
  });
  await mkdir(outDir, { recursive: true });
  for (const file of result.outputFiles) {
    const temp = `${file.path}.${process.pid}.tmp`;
    await writeFile(temp, file.contents);
    await rename(temp, file.path);
  }
  return { outFile, ms: performance.now() - started };
}

/** Newest modification time of the bundle's inputs: every file under server/ and this script. */
function newestInput(): number {
  let newest = statSync(import.meta.filename).mtimeMs;
  const walk = (dir: string) => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const path = join(dir, entry.name);
      if (entry.isDirectory()) walk(path);
      else newest = Math.max(newest, statSync(path).mtimeMs);
    }
  };
  walk(join(root, 'server'));
  return newest;
}

export function isStale(): boolean {
  return !existsSync(outFile) || statSync(outFile).mtimeMs < newestInput();
}

if (process.argv[1] && resolve(process.argv[1]) === resolve(import.meta.filename)) {
  if (process.argv.includes('--if-stale') && !isStale()) {
    process.stderr.write(`${relative(root, outFile)} is up to date\n`);
  } else {
    const { outFile: written, ms } = await buildServer();
    process.stderr.write(`built ${relative(root, written)} in ${Math.round(ms)} ms\n`);
  }
}

/**
 * npm run fuzz [-- options]: contract-driven fuzzing of every operation against a real server.
 *
 *   --long              a longer run (FUZZ_LONG_BUDGET, default 300 requests per operation) that
 *                       writes a JSON report (fuzz-report.json unless --report says otherwise)
 *   --budget N          requests per operation (env FUZZ_BUDGET; default 60, the CI run)
 *   --seed S            PRNG seed (env FUZZ_SEED; default fixed for bounded runs, random for --long)
 *   --only REGEX        only operations whose operationId or path matches
 *   --report FILE       write the JSON report there (env FUZZ_REPORT)
 *   --server-validation let the server validate its own responses as well (off: as in production)
 *
 * DATABASE_URL set: runs on a throwaway PostgreSQL database next to it (dropped afterwards);
 * otherwise on an in-memory embedded database. Exit code 1 when any check failed.
 */
import { writeFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { randomSeed } from './prng.ts';
import { summarize } from './report.ts';
import { runFuzz } from './runner.ts';

const DEFAULT_SEED = 'ada-fuzz-1';
const DEFAULT_BUDGET = 60;
const DEFAULT_LONG_BUDGET = 300;

function positive(name: string, raw: string | undefined, fallback: number): number {
  if (raw === undefined || raw === '') return fallback;
  if (!/^[1-9][0-9]*$/.test(raw)) {
    console.error(`${name} must be a positive integer, got "${raw}"`);
    process.exit(2);
  }
  return Number(raw);
}

const { values } = parseArgs({
  options: {
    long: { type: 'boolean', default: false },
    budget: { type: 'string' },
    seed: { type: 'string' },
    only: { type: 'string' },
    report: { type: 'string' },
    'server-validation': { type: 'boolean', default: false },
    quiet: { type: 'boolean', default: false },
    help: { type: 'boolean', short: 'h', default: false },
  },
});

if (values.help) {
  console.log(
    'npm run fuzz -- [--long] [--budget N] [--seed S] [--only REGEX] [--report FILE] [--server-validation] [--quiet]',
  );
  process.exit(0);
}

const long = values.long || /^(1|true|yes)$/i.test(process.env.FUZZ_LONG ?? '');
const budget = positive(
  '--budget / FUZZ_BUDGET',
  values.budget ?? process.env.FUZZ_BUDGET ?? (long ? process.env.FUZZ_LONG_BUDGET : undefined),
  long ? DEFAULT_LONG_BUDGET : DEFAULT_BUDGET,
);
const seed = values.seed ?? (process.env.FUZZ_SEED || (long ? randomSeed() : DEFAULT_SEED));
const reportPath = values.report ?? process.env.FUZZ_REPORT ?? (long ? 'fuzz-report.json' : undefined);
const only = values.only ? new RegExp(values.only) : undefined;

// Ctrl-C (or SIGTERM) ends the run after the request in flight: the server closes, a PostgreSQL
// database it made is dropped and the report covers what ran. A second one exits at once.
const stop = new AbortController();
const onSignal = () => {
  if (stop.signal.aborted) process.exit(130);
  console.log('\nstopping after the request in flight (again to exit at once)…');
  stop.abort();
};
process.on('SIGINT', onSignal);
process.on('SIGTERM', onSignal);

console.log(
  `fuzz: seed ${seed} (replay with FUZZ_SEED=${seed}), ${budget} requests per operation${long ? ', long run' : ''}`,
);
const report = await runFuzz({
  seed,
  budget,
  long,
  only,
  serverValidation: values['server-validation'],
  // --quiet (CI): only failing operations are named, then the totals.
  log: (line) => {
    if (!values.quiet || !line.startsWith('ok  ')) console.log(line);
  },
  signal: stop.signal,
});
console.log(`\n${summarize(report, { onlyFailing: values.quiet })}`);
if (reportPath) {
  writeFileSync(reportPath, JSON.stringify(report, null, 2) + '\n');
  console.log(`report written to ${reportPath}`);
}
process.exit(report.totals.failures > 0 ? 1 : report.interrupted ? 130 : 0);

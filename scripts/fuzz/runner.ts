/**
 * Walks the contract and fuzzes every operation in turn against a real in-process server: a third
 * of the requests valid (generated from the schemas, with real fixture ids), the rest one mutation
 * away from a valid one. Each answer is checked (checks.ts); the server's error log, the process's
 * Object.prototype and a health probe after each operation's batch are watched too.
 */
import { checkResponse } from './checks.ts';
import { Contract, type Operation } from './contract.ts';
import { Fixtures } from './fixtures.ts';
import { callJson, NotSendable, send, urlOf, type FuzzRequest, type FuzzResponse } from './http.ts';
import { MUTATORS, type Mutator } from './mutate.ts';
import { Prng } from './prng.ts';
import {
  addFailure,
  recordRequest,
  recordResponse,
  type FailureRecord,
  type FuzzReport,
  type OperationReport,
} from './report.ts';
import {
  buildValid,
  destroysTarget,
  judge,
  lastPathParam,
  render,
  type Credentials,
  type Draft,
  type Verdict,
} from './request.ts';
import { startFuzzServer, type FuzzServer } from './server.ts';

export interface RunOptions {
  seed: string;
  /** Requests per operation. */
  budget: number;
  long: boolean;
  /** Only operations whose operationId or path matches. */
  only?: RegExp;
  /** Let the server validate its own responses too (off: production behaviour). */
  serverValidation?: boolean;
  log?: (line: string) => void;
  /** Stops the run after the request in flight (Ctrl-C); the report covers what ran. */
  signal?: AbortSignal;
}

/**
 * Writes first, so reads then find what they create (settings that exist only once written, an
 * uploaded image); deletes last (they get fresh targets anyway). Contract order within each.
 */
function order(ops: Operation[]): Operation[] {
  const rank = (o: Operation) => (o.method === 'DELETE' ? 2 : o.method === 'GET' ? 1 : 0);
  return [...ops].sort((a, b) => rank(a) - rank(b));
}

const PROTO_BASELINE = new Set(Object.getOwnPropertyNames(Object.prototype));

function prototypePolluted(): string | undefined {
  const added = Object.getOwnPropertyNames(Object.prototype).filter((k) => !PROTO_BASELINE.has(k));
  if (added.length) return `Object.prototype gained ${added.join(', ')}`;
  return undefined;
}

export async function runFuzz(options: RunOptions): Promise<FuzzReport> {
  const log = options.log ?? (() => {});
  const started = Date.now();
  const contract = new Contract();
  const server = await startFuzzServer({ serverValidation: options.serverValidation });
  const global: FailureRecord[] = [];
  const reports: OperationReport[] = [];
  // A crash inside the server's request handling must not take the fuzzer down unnoticed.
  const crashes: string[] = [];
  const onCrash = (err: unknown) => crashes.push(err instanceof Error ? `${err.name}: ${err.message}` : String(err));
  process.on('uncaughtException', onCrash);
  process.on('unhandledRejection', onCrash);
  try {
    const fixtures = new Fixtures(server.baseUrl, server.adminToken, {
      previewPageUrl: server.previewPageUrl,
      runJobs: server.runJobs,
    });
    const scopes = Object.keys(
      contract.deref<{ properties: Record<string, unknown> }>({ $ref: '#/components/schemas/ScopeMap' }).properties,
    );
    await fixtures.setUp(scopes);
    const creds: Credentials = { adminToken: server.adminToken, metricsToken: server.metricsToken, fixtures };
    server.takeErrors();
    const root = new Prng(options.seed);
    const ops = order(contract.operations).filter(
      (o) => !options.only || options.only.test(o.operationId) || options.only.test(o.path),
    );
    log(
      `fuzzing ${ops.length} operations, ${options.budget} requests each (seed ${options.seed}, ${server.database} database)`,
    );
    for (const op of ops) {
      if (options.signal?.aborted) break;
      const report = await fuzzOperation(
        contract,
        op,
        root.fork(op.operationId),
        creds,
        server,
        options.budget,
        crashes,
        options.signal,
      ).catch((err: unknown) => {
        // A bug of the fuzzer itself: recorded as a failure of this operation, and on to the next.
        const r = emptyReport(op);
        addFailure(r.failures, {
          check: 'fuzzer',
          detail: err instanceof Error ? (err.stack ?? err.message) : String(err),
          mutation: '-',
          iteration: -1,
        });
        return r;
      });
      reports.push(report);
      log(
        `${report.failures.length ? 'FAIL' : 'ok  '} ${op.operationId} (${report.requests} requests, ${(report.ms / 1000).toFixed(1)} s)`,
      );
      if (report.failures.some((f) => f.check === 'server-down')) {
        addFailure(global, {
          check: 'server-down',
          detail: `the server stopped answering after ${op.operationId}; run aborted`,
          mutation: '-',
          iteration: -1,
        });
        break;
      }
    }
  } catch (err) {
    addFailure(global, {
      check: 'fixture',
      detail: err instanceof Error ? err.message : String(err),
      mutation: '-',
      iteration: -1,
    });
  } finally {
    process.off('uncaughtException', onCrash);
    process.off('unhandledRejection', onCrash);
    await server.close().catch((err) =>
      addFailure(global, {
        check: 'server-down',
        detail: `closing the server failed: ${String(err)}`,
        mutation: '-',
        iteration: -1,
      }),
    );
  }
  const failures = global.length + reports.reduce((n, r) => n + r.failures.reduce((m, f) => m + 1 + f.repeats, 0), 0);
  return {
    seed: options.seed,
    budget: options.budget,
    long: options.long,
    interrupted: options.signal?.aborted ?? false,
    database: server.database,
    startedAt: new Date(started).toISOString(),
    durationMs: Date.now() - started,
    totals: { operations: reports.length, requests: reports.reduce((n, r) => n + r.requests, 0), failures },
    operations: reports,
    global,
  };
}

function emptyReport(op: Operation): OperationReport {
  return {
    operationId: op.operationId,
    method: op.method,
    path: op.path,
    requests: 0,
    validRequests: 0,
    invalidRequests: 0,
    validAccepted: 0,
    notSendable: 0,
    statuses: {},
    mutations: {},
    failures: [],
    validRejections: [],
    warnings: {},
    ms: 0,
    maxMs: 0,
  };
}

async function fuzzOperation(
  contract: Contract,
  op: Operation,
  rng: Prng,
  creds: Credentials,
  server: FuzzServer,
  budget: number,
  crashes: string[],
  signal: AbortSignal | undefined,
): Promise<OperationReport> {
  const started = performance.now();
  const report = emptyReport(op);
  const applicable = MUTATORS.filter((m) => m.applies(op));
  const schedule = rng.shuffle(applicable);
  let next = 0;
  // The fresh target of an operation that destroys it, until a 2xx shows it was used up.
  let fresh: Record<string, string> | undefined;
  for (let i = 0; i < budget && !signal?.aborted; i++) {
    if (destroysTarget(op) && !fresh) {
      try {
        fresh = await freshTarget(contract, op, creds);
      } catch (err) {
        // Not the operation's fault (an account cap reached by earlier batches, say): it goes on
        // with the shared fixture. A fixture route that is broken fails its own batch.
        const message = err instanceof Error ? err.message : String(err);
        report.warnings[message] = (report.warnings[message] ?? 0) + 1;
        fresh = {};
      }
    }
    const valid = await buildValid(contract, op, rng, creds, fresh ?? {});
    let draft: Draft = valid;
    let mutation = 'valid';
    if (i % 3 !== 0 && schedule.length > 0) {
      for (let tries = 0; tries < schedule.length; tries++) {
        const mutator: Mutator = schedule[next++ % schedule.length]!;
        const mutated = mutator.apply({ contract, op, rng, creds }, valid);
        if (mutated) {
          draft = mutated;
          mutation = mutator.name;
          break;
        }
      }
    }
    // A burst: the same request several times at once, or (mixed) several different valid ones.
    const drafts = [draft];
    for (let k = 1; k < (draft.burst ?? 1); k++)
      drafts.push(draft.mixed ? await buildValid(contract, op, rng, creds, fresh ?? {}) : draft);
    let exchanges: Array<{ verdict: Verdict; req: FuzzRequest; res: FuzzResponse }>;
    try {
      const reqs = drafts.map((d) => render(op, d));
      const responses = await Promise.all(reqs.map((r) => send(server.baseUrl, r)));
      exchanges = responses.map((res, k) => ({ verdict: judge(contract, op, drafts[k]!, creds), req: reqs[k]!, res }));
    } catch (err) {
      if (err instanceof NotSendable || err instanceof URIError) {
        report.notSendable++;
        continue;
      }
      report.requests++;
      const cause = (err as { cause?: unknown }).cause;
      const detail =
        err instanceof Error
          ? `${err.name}: ${err.message}${cause ? ` (${String((cause as Error).message ?? cause)})` : ''}`
          : String(err);
      addFailure(report.failures, {
        check: 'no-response',
        detail,
        mutation,
        iteration: i,
        request: recordRequest(render(op, draft)),
      });
      if (!(await healthy(server, creds))) {
        addFailure(report.failures, {
          check: 'server-down',
          detail: 'health probe failed after a request got no response',
          mutation,
          iteration: i,
        });
        break;
      }
      continue;
    }
    for (const { verdict, req, res } of exchanges) {
      report.requests++;
      report.maxMs = Math.max(report.maxMs, Math.round(res.ms));
      if (res.status >= 200 && res.status < 300) fresh = undefined;
      report.mutations[mutation] = (report.mutations[mutation] ?? 0) + 1;
      report.statuses[res.status] = (report.statuses[res.status] ?? 0) + 1;
      if (verdict.valid) {
        report.validRequests++;
        if (res.status >= 200 && res.status < 300) report.validAccepted++;
        else if (report.validRejections.length < 5)
          report.validRejections.push({
            mutation,
            status: res.status,
            body: res.body.toString('utf8').slice(0, 300),
            request: recordRequest(req),
          });
      } else {
        report.invalidRequests++;
      }
      const sentText = `${urlOf(req)}\n${JSON.stringify(req.headers)}\n${req.body?.toString('utf8') ?? ''}`;
      const base = {
        mutation,
        iteration: i,
        request: recordRequest(req),
        response: recordResponse(res),
        ...(verdict.valid ? {} : { invalidBecause: verdict.reason }),
      };
      for (const f of checkResponse(contract, op, !verdict.valid, sentText, res))
        addFailure(report.failures, { ...base, ...f });
      for (const e of server.takeErrors())
        addFailure(report.failures, { ...base, check: 'server-log', detail: `${e.msg}: ${e.detail}` });
      for (const crash of crashes.splice(0))
        addFailure(report.failures, { ...base, check: 'server-log', detail: `uncaught in process: ${crash}` });
      const polluted = prototypePolluted();
      if (polluted) {
        addFailure(report.failures, { ...base, check: 'prototype-pollution', detail: polluted });
        for (const k of Object.getOwnPropertyNames(Object.prototype))
          if (!PROTO_BASELINE.has(k)) delete (Object.prototype as Record<string, unknown>)[k];
      }
    }
  }
  if (!(await healthy(server, creds)))
    addFailure(report.failures, {
      check: 'server-down',
      detail: 'health probe failed after the batch',
      mutation: '-',
      iteration: budget,
    });
  report.ms = performance.now() - started;
  return report;
}

/** The fresh target of an operation that destroys it; for `/restore`, one already in the trash. */
async function freshTarget(contract: Contract, op: Operation, creds: Credentials): Promise<Record<string, string>> {
  const param = lastPathParam(op);
  if (!param || !creds.fixtures.has(param.name)) return {};
  const id = await creds.fixtures.fresh(param.name);
  if (!id) return {};
  if (op.path.endsWith('/restore')) {
    const target = op.path.slice(0, -'/restore'.length);
    const del = contract.operations.find((o) => o.method === 'DELETE' && o.path === target);
    if (del) {
      const path = target.replace(/\{([^}]+)\}/g, (_m, name: string) =>
        encodeURIComponent(name === param.name ? id : (creds.fixtures.shared(name) ?? '')),
      );
      const res = await callJson(creds.fixtures.baseUrl, 'DELETE', path, creds.fixtures.apiKey);
      if (res.status >= 300)
        throw new Error(
          `trashing a fresh ${param.name} for ${op.operationId}: ${res.status} ${JSON.stringify(res.json)}`,
        );
    }
  }
  return { [param.name]: id };
}

async function healthy(server: FuzzServer, creds: Credentials): Promise<boolean> {
  try {
    const health = await send(server.baseUrl, { method: 'GET', path: '/healthz', query: [], headers: {} }, 5_000);
    const ready = await send(server.baseUrl, { method: 'GET', path: '/readyz', query: [], headers: {} }, 5_000);
    const me = await callJson(server.baseUrl, 'GET', '/api/v1/me', creds.fixtures.apiKey);
    return health.status === 200 && ready.status === 200 && me.status === 200;
  } catch {
    return false;
  }
}

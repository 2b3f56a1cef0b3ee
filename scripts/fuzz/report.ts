/** The run's record: per operation, what was sent, which statuses came back, and every failure with the request that triggered it. */
import type { CheckName } from './checks.ts';
import type { FuzzRequest, FuzzResponse } from './http.ts';
import { urlOf } from './http.ts';

export type FailureKind =
  | CheckName
  | 'no-response'
  | 'server-log'
  | 'prototype-pollution'
  | 'server-down'
  | 'fixture'
  | 'fuzzer';

export interface RecordedRequest {
  method: string;
  url: string;
  headers: Record<string, string>;
  body?: string;
  bodyBytes?: number;
}

export interface FailureRecord {
  check: FailureKind;
  detail: string;
  /** What the fuzzer did to a valid request ("valid" for none). */
  mutation: string;
  /** Why the fuzzer considered the input invalid, when it did. */
  invalidBecause?: string;
  iteration: number;
  request?: RecordedRequest;
  response?: { status: number; contentType: string; body: string };
  /** Further failures of the same check, mutation and status, not recorded one by one. */
  repeats: number;
}

export interface OperationReport {
  operationId: string;
  method: string;
  path: string;
  requests: number;
  validRequests: number;
  invalidRequests: number;
  /** Valid requests answered 2xx (how much of the happy path was reached). */
  validAccepted: number;
  /** Requests the HTTP client refused to send (an invalid header value). */
  notSendable: number;
  statuses: Record<string, number>;
  mutations: Record<string, number>;
  failures: FailureRecord[];
  /** A few valid requests the server turned down (business rules, stale fixtures): a hint at coverage, not a failure. */
  validRejections: Array<{ mutation: string; status: number; body: string; request: RecordedRequest }>;
  /** What kept the fuzzer from a request it meant to send (a fresh fixture it could not create), with counts. */
  warnings: Record<string, number>;
  /** Time of the whole batch, and of the slowest single answer. */
  ms: number;
  maxMs: number;
}

export interface FuzzReport {
  seed: string;
  budget: number;
  long: boolean;
  /** Stopped early (Ctrl-C): the operations and requests are those that ran. */
  interrupted: boolean;
  database: string;
  startedAt: string;
  durationMs: number;
  totals: { operations: number; requests: number; failures: number };
  operations: OperationReport[];
  /** Failures outside any one operation (fixtures, start-up). */
  global: FailureRecord[];
}

const REDACT = /\b(adk_|adm_fuzz_|met_fuzz_)[\w-]+/g;

export function recordRequest(req: FuzzRequest): RecordedRequest {
  const headers = Object.fromEntries(
    Object.entries(req.headers).map(([k, v]) => [k, k === 'authorization' ? v.replace(REDACT, '$1…') : v]),
  );
  const out: RecordedRequest = { method: req.method, url: urlOf(req), headers };
  if (req.body) {
    out.bodyBytes = req.body.length;
    const text = req.body.toString('utf8');
    out.body = text.length > 2000 ? `${text.slice(0, 2000)}… (${text.length} characters)` : text;
  }
  return out;
}

export function recordResponse(res: FuzzResponse): FailureRecord['response'] {
  const text = res.body.toString('utf8');
  return {
    status: res.status,
    contentType: res.contentType,
    body: text.length > 2000 ? `${text.slice(0, 2000)}…` : text,
  };
}

/** Adds a failure, folding repeats of the same check, mutation and status into a count. */
export function addFailure(list: FailureRecord[], failure: Omit<FailureRecord, 'repeats'>): void {
  const same = list.find(
    (f) =>
      f.check === failure.check && f.mutation === failure.mutation && f.response?.status === failure.response?.status,
  );
  if (same) same.repeats++;
  else list.push({ ...failure, repeats: 0 });
}

/** The run's summary: a line per operation (only the failing ones with `onlyFailing`), failures, warnings, totals. */
export function summarize(report: FuzzReport, options: { onlyFailing?: boolean } = {}): string {
  const lines: string[] = [];
  for (const op of report.operations) {
    if (options.onlyFailing && !op.failures.length) continue;
    const statuses = Object.entries(op.statuses)
      .sort(([a], [b]) => Number(a) - Number(b))
      .map(([s, n]) => `${s}×${n}`)
      .join(' ');
    const mark = op.failures.length ? 'FAIL' : 'ok  ';
    lines.push(
      `${mark} ${op.operationId.padEnd(30)} ${String(op.requests).padStart(5)} req  valid→2xx ${op.validAccepted}/${op.validRequests}  ${statuses}`,
    );
  }
  const failures = [
    ...report.global.map((f) => ({ op: '(global)', f })),
    ...report.operations.flatMap((o) => o.failures.map((f) => ({ op: `${o.operationId} (${o.method} ${o.path})`, f }))),
  ];
  if (failures.length) {
    lines.push('', 'Failures:');
    for (const { op, f } of failures) {
      lines.push(
        `- ${op}: ${f.check} [${f.mutation}${f.invalidBecause ? `; invalid: ${f.invalidBecause}` : ''}]${f.repeats ? ` (+${f.repeats} more)` : ''}`,
      );
      lines.push(`    ${f.detail.slice(0, 400)}`);
      if (f.request)
        lines.push(
          `    request: ${f.request.method} ${f.request.url.slice(0, 300)}${f.request.body !== undefined ? ` body: ${f.request.body.slice(0, 300)}` : ''}`,
        );
    }
  }
  const warnings = report.operations.flatMap((o) =>
    Object.entries(o.warnings).map(([w, n]) => `- ${o.operationId}: ${w}${n > 1 ? ` (×${n})` : ''}`),
  );
  if (warnings.length) lines.push('', 'Warnings (not failures):', ...warnings);
  lines.push(
    '',
    `${report.interrupted ? 'INTERRUPTED: ' : ''}${report.totals.operations} operations, ${report.totals.requests} requests, ${report.totals.failures} failures in ${(report.durationMs / 1000).toFixed(1)} s (seed ${report.seed}, budget ${report.budget} per operation, ${report.database} database)`,
  );
  return lines.join('\n');
}

/**
 * Prometheus metrics (prom-client) on a registry of the app's own, so several servers in one
 * process (tests) never share or double-register series. Served by GET /metrics.
 *
 * Labels stay bounded: the operationId (or `unmatched` for a path outside the contract), the
 * method and the status class — never a raw path, an id or an account.
 */
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { Knex } from 'knex';
import { preparedPoolOf } from './db/prepared.ts';

export type StatusClass = '1xx' | '2xx' | '3xx' | '4xx' | '5xx';

export function statusClass(status: number): StatusClass {
  return `${Math.min(5, Math.max(1, Math.floor(status / 100)))}xx` as StatusClass;
}

/** The pool knex keeps (tarn.js); absent for a client without one. */
interface PoolLike {
  numUsed(): number;
  numFree(): number;
  numPendingAcquires(): number;
}

export class Metrics {
  readonly registry = new Registry();
  private readonly requests: Counter<'operation' | 'method' | 'status_class'>;
  private readonly duration: Histogram<'operation' | 'status_class'>;
  private readonly refusals: Counter;
  private readonly jobRuns: Counter<'job' | 'outcome'>;
  private readonly jobDuration: Histogram<'job'>;
  private readonly jobsDead: Counter<'job'>;

  constructor(options: { db?: Knex; collectProcessMetrics?: boolean } = {}) {
    if (options.collectProcessMetrics !== false) collectDefaultMetrics({ register: this.registry });
    this.requests = new Counter({
      name: 'http_requests_total',
      help: 'Requests answered, per operation and status class.',
      labelNames: ['operation', 'method', 'status_class'],
      registers: [this.registry],
    });
    this.duration = new Histogram({
      name: 'http_request_duration_seconds',
      help: 'Time from the first byte of a request to the last byte of its response.',
      labelNames: ['operation', 'status_class'],
      buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
      registers: [this.registry],
    });
    this.refusals = new Counter({
      name: 'rate_limit_refusals_total',
      help: 'Requests refused with 429 because the API key spent its budget.',
      registers: [this.registry],
    });
    this.jobRuns = new Counter({
      name: 'job_runs_total',
      help: 'Background job runs, per job and outcome (success or failure).',
      labelNames: ['job', 'outcome'],
      registers: [this.registry],
    });
    this.jobDuration = new Histogram({
      name: 'job_run_duration_seconds',
      help: 'Duration of background job runs.',
      labelNames: ['job'],
      buckets: [0.01, 0.05, 0.1, 0.5, 1, 5, 30, 120],
      registers: [this.registry],
    });
    this.jobsDead = new Counter({
      name: 'jobs_dead_total',
      help: 'Jobs dead-lettered after their last attempt failed or its lease ran out.',
      labelNames: ['job'],
      registers: [this.registry],
    });
    const db = options.db;
    new Gauge({
      name: 'db_pool_connections',
      help: 'Database pool connections: in use, idle, and requests waiting for one; pool "main", and on PostgreSQL "prepared" (the hot reads\' prepared statements).',
      labelNames: ['pool', 'state'],
      registers: [this.registry],
      collect() {
        // The pool objects are created lazily by knex; read them at scrape time.
        const pools: Array<[string, Knex | undefined]> = [['main', db]];
        const prepared = db && preparedPoolOf(db);
        if (prepared) pools.push(['prepared', prepared]);
        for (const [name, knex] of pools) {
          const current = (knex?.client as { pool?: PoolLike } | undefined)?.pool;
          this.set({ pool: name, state: 'in_use' }, current?.numUsed() ?? 0);
          this.set({ pool: name, state: 'idle' }, current?.numFree() ?? 0);
          this.set({ pool: name, state: 'waiting' }, current?.numPendingAcquires() ?? 0);
        }
      },
    });
  }

  observeRequest(operation: string, method: string, status: number, seconds: number): void {
    const cls = statusClass(status);
    this.requests.inc({ operation, method, status_class: cls });
    this.duration.observe({ operation, status_class: cls }, seconds);
  }

  rateLimitRefused(): void {
    this.refusals.inc();
  }

  jobRun(job: string, outcome: 'success' | 'failure', seconds: number): void {
    this.jobRuns.inc({ job, outcome });
    this.jobDuration.observe({ job }, seconds);
  }

  jobDead(job: string): void {
    this.jobsDead.inc({ job });
  }

  render(): Promise<string> {
    return this.registry.metrics();
  }

  get contentType(): string {
    return this.registry.contentType;
  }
}

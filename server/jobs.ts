/**
 * A background job run in-process on an interval: one pass at a time (overlapping triggers share
 * the running pass), failures logged rather than thrown, and timers that never keep the process
 * alive. Tests call runOnce() directly.
 */
import type { Logger } from 'pino';

/** Where a job reports its runs (server/metrics.ts). */
export interface JobMetrics {
  jobRun(job: string, outcome: 'success' | 'failure', seconds: number): void;
}

export abstract class PeriodicJob<T> {
  private timer: NodeJS.Timeout | undefined;
  private firstRun: NodeJS.Timeout | undefined;
  private running: Promise<T> | undefined;
  private reporter: { metrics: JobMetrics; name: string } | undefined;

  protected constructor(
    private readonly label: string,
    protected readonly logger: Logger,
  ) {}

  /** One pass of the job's work. */
  protected abstract pass(): Promise<T>;

  /** Runs every `intervalMs` (0 or less: never), and once after `firstRunAfterMs` when given. */
  start(intervalMs: number, firstRunAfterMs?: number): void {
    if (intervalMs <= 0 || this.timer) return;
    const run = () => void this.runOnce().catch((err) => this.logger.error({ err }, `${this.label} failed`));
    if (firstRunAfterMs !== undefined) {
      this.firstRun = setTimeout(run, firstRunAfterMs);
      this.firstRun.unref();
    }
    this.timer = setInterval(run, intervalMs);
    this.timer.unref();
  }

  async stop(): Promise<void> {
    if (this.firstRun) clearTimeout(this.firstRun);
    if (this.timer) clearInterval(this.timer);
    this.firstRun = undefined;
    this.timer = undefined;
    await this.running?.catch(() => undefined);
  }

  /** Counts every run, and its outcome and duration, in `metrics` under `name`. */
  reportTo(metrics: JobMetrics, name: string): this {
    this.reporter = { metrics, name };
    return this;
  }

  /** Runs a pass now, or joins the one already running. */
  runOnce(): Promise<T> {
    this.running ??= this.timedPass().finally(() => {
      this.running = undefined;
    });
    return this.running;
  }

  private async timedPass(): Promise<T> {
    const started = process.hrtime.bigint();
    const report = (outcome: 'success' | 'failure') =>
      this.reporter?.metrics.jobRun(this.reporter.name, outcome, Number(process.hrtime.bigint() - started) / 1e9);
    try {
      const result = await this.pass();
      report('success');
      return result;
    } catch (err) {
      report('failure');
      throw err;
    }
  }
}

/**
 * A background job run in-process on an interval: one pass at a time (overlapping triggers share
 * the running pass), failures logged rather than thrown, and timers that never keep the process
 * alive. Tests call runOnce() directly.
 */
import type { Logger } from 'pino';

export abstract class PeriodicJob<T> {
  private timer: NodeJS.Timeout | undefined;
  private firstRun: NodeJS.Timeout | undefined;
  private running: Promise<T> | undefined;

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

  /** Runs a pass now, or joins the one already running. */
  runOnce(): Promise<T> {
    this.running ??= this.pass().finally(() => {
      this.running = undefined;
    });
    return this.running;
  }
}

import type { Clock } from '../clock.js';
import { OneShot } from './timer.js';

/**
 * The wait of a closeOnRunEnd close that found no live child: the agent may report one in a later
 * chunk than its answer. It ends when it runs out (`elapsed` is called: close now) or is cut short
 * (a child was attached: the close becomes an ordinary drain; or the session closed). Whoever
 * waits for room in the pool waits for its end, not for the drain a child may turn it into.
 */
export class SettleWindow {
  private readonly timer: OneShot;
  private waiters: (() => void)[] = [];

  constructor(clock: Clock, elapsed: () => void) {
    this.timer = new OneShot(clock, () => {
      this.wake();
      elapsed();
    });
  }

  get open(): boolean {
    return this.timer.armed;
  }

  start(ms: number): void {
    this.timer.arm(ms);
  }

  /** Cut short; idempotent. */
  end(): void {
    this.timer.clear();
    this.wake();
  }

  /** Resolves when the window is over (at once when none is open). */
  over(): Promise<void> {
    if (!this.open) return Promise.resolve();
    return new Promise((resolve) => this.waiters.push(resolve));
  }

  private wake(): void {
    const waiters = this.waiters;
    this.waiters = [];
    for (const resolve of waiters) resolve();
  }
}

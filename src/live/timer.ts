import type { Clock, TimerHandle } from '../clock.js';

/** One re-armable one-shot timer on an injected clock (which handles waits of any length). Infinity never fires. */
export class OneShot {
  private handle: TimerHandle | undefined;

  constructor(
    private readonly clock: Clock,
    private readonly fire: () => void,
  ) {}

  get armed(): boolean {
    return this.handle !== undefined;
  }

  /** (Re)starts the countdown. */
  arm(ms: number): void {
    this.clear();
    if (ms === Number.POSITIVE_INFINITY) return;
    this.handle = this.clock.setTimeout(() => {
      this.handle = undefined;
      this.fire();
    }, ms);
  }

  clear(): void {
    if (this.handle !== undefined) this.clock.clearTimeout(this.handle);
    this.handle = undefined;
  }
}

import type { Clock, TimerHandle } from '../clock.js';

// Node fires a setTimeout longer than 2^31-1 ms after 1 ms; longer waits are chained.
const LONGEST_TIMEOUT_MS = 2 ** 31 - 1;

/** One re-armable one-shot timer on an injected clock. Infinity never fires. */
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
    this.schedule(this.clock.now() + ms);
  }

  clear(): void {
    if (this.handle !== undefined) this.clock.clearTimeout(this.handle);
    this.handle = undefined;
  }

  private schedule(deadline: number): void {
    const left = Math.max(0, deadline - this.clock.now());
    this.handle = this.clock.setTimeout(
      () => {
        this.handle = undefined;
        if (this.clock.now() >= deadline) this.fire();
        else this.schedule(deadline);
      },
      Math.min(left, LONGEST_TIMEOUT_MS),
    );
  }
}

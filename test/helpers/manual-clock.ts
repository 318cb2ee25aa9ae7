import type { Clock, TimerHandle } from '../../src/clock.js';

interface Pending {
  at: number;
  seq: number;
  fn: () => void;
}

/** A clock that only moves when the test says so: 10- and 15-minute timers in microseconds. */
export class ManualClock implements Clock {
  private time = 0;
  private seq = 0;
  private readonly timers = new Map<number, Pending>();

  now(): number {
    return this.time;
  }

  setTimeout(fn: () => void, ms: number): TimerHandle {
    const seq = ++this.seq;
    this.timers.set(seq, { at: this.time + Math.max(0, ms), seq, fn });
    return seq;
  }

  clearTimeout(handle: TimerHandle): void {
    this.timers.delete(handle as number);
  }

  /** Timers still waiting to fire. */
  get pending(): number {
    return this.timers.size;
  }

  /** Moves time forward, firing every timer that comes due, in order (including ones set meanwhile). */
  advance(ms: number): void {
    const until = this.time + ms;
    for (;;) {
      let next: Pending | undefined;
      for (const t of this.timers.values()) {
        if (t.at <= until && (!next || t.at < next.at || (t.at === next.at && t.seq < next.seq))) next = t;
      }
      if (!next) break;
      this.timers.delete(next.seq);
      this.time = next.at;
      next.fn();
    }
    this.time = until;
  }
}

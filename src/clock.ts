/**
 * Time is injected so that state machines (timeouts, idle timers, drains) can be tested
 * deterministically; process-level code uses the real clock.
 */
export interface Clock {
  now(): number;
  setTimeout(fn: () => void, ms: number): TimerHandle;
  clearTimeout(handle: TimerHandle): void;
}

export type TimerHandle = unknown;

// Node fires a timer longer than this after 1 ms (TimeoutOverflowWarning): `--timeout 30d` would
// end a run at once. Longer waits are chained.
const MAX_TIMER_MS = 2 ** 31 - 1;

export const realClock: Clock = {
  // Monotonic like performance.now(), whose first use loads perf_hooks: a cost on every CLI start.
  now: () => {
    const [s, ns] = process.hrtime();
    return s * 1000 + ns / 1e6;
  },
  setTimeout: (fn, ms) => {
    const handle: { timer?: NodeJS.Timeout } = {};
    const arm = (left: number) => {
      handle.timer =
        left > MAX_TIMER_MS ? setTimeout(() => arm(left - MAX_TIMER_MS), MAX_TIMER_MS) : setTimeout(fn, left);
    };
    arm(ms);
    return handle;
  },
  clearTimeout: (handle) => clearTimeout((handle as { timer?: NodeJS.Timeout }).timer),
};

/** Waits `ms`, or less once `wake` aborts (its listener goes with the wait: a poll loop adds none). */
export function sleep(clock: Clock, ms: number, wake?: AbortSignal): Promise<void> {
  if (!wake) return new Promise((resolve) => clock.setTimeout(resolve, ms));
  return new Promise((resolve) => {
    if (wake.aborted) {
      resolve();
      return;
    }
    const done = () => {
      clock.clearTimeout(timer);
      wake.removeEventListener('abort', done);
      resolve();
    };
    const timer = clock.setTimeout(done, ms);
    wake.addEventListener('abort', done);
  });
}

/**
 * Waits for `promise`, but at most `ms`. Unlike a race with `sleep`, the timer is cleared as soon
 * as the promise settles: a pending loser would hold the event loop open for the whole `ms` after
 * the caller's last result was in.
 */
export function within(clock: Clock, promise: Promise<unknown>, ms: number): Promise<void> {
  return new Promise((resolve) => {
    const timer = clock.setTimeout(resolve, ms);
    const done = () => {
      clock.clearTimeout(timer);
      resolve();
    };
    promise.then(done, done);
  });
}

/** Resolves after the event loop's next poll for I/O (setImmediate runs in the phase after it). */
export function nextTurn(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

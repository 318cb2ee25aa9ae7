// A command that exits before its deadline, whose exit this process has not heard yet when the
// deadline's timer runs (the loop runs expired timers before the poll that reads SIGCHLD), did not
// time out. coreutils' timeout reports such a command's own status; `timeout 0.02 true` under load
// reported 124 a few times in 30.
import { afterEach, describe, expect, it } from 'vitest';
import { type Clock, realClock } from '../src/clock.js';
import { Supervisor } from '../src/index.js';
import { cgroupSkipReason } from './helpers/cgroups.js';
import { LeakGuard } from './helpers/procs.js';

const sup = new Supervisor({ watchdog: false });
const leaks = new LeakGuard();
leaks.trackCookie(sup.id);
afterEach(() => leaks.check());

/** Keeps this process from its event loop, as a busy host or a loaded machine does. */
function busy(ms: number): void {
  const until = performance.now() + ms;
  while (performance.now() < until) {
    // spinning
  }
}

describe('a command that exits just before its deadline', () => {
  const cgroupSkip = cgroupSkipReason();
  for (const [containment, skip] of [
    ['process-group', null],
    ['cgroup', cgroupSkip],
  ] as const) {
    it.skipIf(skip !== null)(`${containment}: its exit, heard after the deadline, is its end`, async () => {
      // The time this process spends blocked below does not count on this clock: to the run, the
      // deadline's timer runs on time however long the machine kept this process from running
      // after the block, as it does on a quiet machine.
      let paused = 0;
      const clock: Clock = { ...realClock, now: () => realClock.now() - paused };
      const timed = new Supervisor({ watchdog: false, clock });
      leaks.trackCookie(timed.id);
      const handle = timed.spawn({ argv: ['true'], timeoutMs: 800, containment });
      leaks.track(handle.pid);
      // Past the deadline: when the loop runs again, both are due, the exit of `true` (long over)
      // and the deadline, and the timer runs first.
      busy(805);
      paused = 805;
      const result = await handle.result;
      expect(result.reason).toBe('exit');
      expect(result.timedOut).toBe(false);
      expect(result.exitCode).toBe(0);
    });

    it.skipIf(skip !== null)(
      `${containment}: a timer that runs late cannot vouch for the exit: a command that overran timed out`,
      async () => {
        const handle = sup.spawn({ argv: ['sleep', '0.6'], timeoutMs: 100, containment });
        leaks.track(handle.pid);
        // The command exits at 600 ms, long after its deadline; this process hears of both at 1.5 s.
        busy(1500);
        const result = await handle.result;
        expect(result.reason).toBe('overall-timeout');
        expect(result.timedOut).toBe(true);
      },
    );
  }
});

describe('noOutputTimeoutMs after this process was kept from its loop (stopped, or busy)', () => {
  // Blocked outside the timers (a `kill -STOP`/`-CONT`, Ctrl-Z and `fg`, a long synchronous task):
  // the silence timer is overdue when the loop runs again, and expired timers run before the poll
  // that reads what the command printed meanwhile. It used to call a chatty command silent.
  const block = (ms: number) => Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);

  for (const mode of ['child', 'pty'] as const) {
    it(`${mode}: a command that printed the whole time is not silent`, async () => {
      const handle = sup.spawn({
        argv: ['sh', '-c', 'while :; do echo tick; sleep 0.1; done'],
        mode,
        noOutputTimeoutMs: 600,
      });
      leaks.track(handle.pid);
      // From the check phase, after a poll: the next turn of the loop begins with the timers.
      setTimeout(() => setImmediate(() => block(1500)), 200);
      const over = setTimeout(() => handle.cancel('test over'), 2500);
      const result = await handle.result;
      clearTimeout(over);
      expect(result.reason).toBe('cancelled');
    });

    it(`${mode}: silent since before its silence deadline, which came before the overall one: no-output-timeout (review)`, async () => {
      const handle = sup.spawn({ argv: ['sleep', '30'], mode, noOutputTimeoutMs: 300, timeoutMs: 800 });
      leaks.track(handle.pid);
      // Both timers overdue when the loop runs again.
      setTimeout(() => setImmediate(() => block(1500)), 100);
      const result = await handle.result;
      expect(result.reason).toBe('no-output-timeout');
    });

    it(`${mode}: a command that was silent the whole time still is`, async () => {
      const handle = sup.spawn({ argv: ['sleep', '30'], mode, noOutputTimeoutMs: 300 });
      leaks.track(handle.pid);
      setTimeout(() => setImmediate(() => block(1000)), 100);
      const result = await handle.result;
      expect(result.reason).toBe('no-output-timeout');
    });
  }
});

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

import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { ManagedRun } from './managed-run.js';

/**
 * The host is exiting with runs still alive: nothing asynchronous will run again, so this is
 * synchronous and blunt. SIGKILL to each live run's own process group and cgroup.kill to its
 * cgroup. A group is only signalled when the run created it (process-group containment: the
 * command called setsid, so the group is never ours). Journal records stay: a later `reap` sweeps
 * escapees that were in neither (setsid grandchildren) by their cookie.
 */
export function killLiveRunsNow(runs: readonly ManagedRun[]): void {
  for (const run of runs) {
    if (run.state === 'exited') continue;
    const cgroup = run.cgroupPath;
    if (cgroup) {
      try {
        writeFileSync(join(cgroup, 'cgroup.kill'), '1');
      } catch {
        // gone already, or a kernel without cgroup.kill: reap handles it from the journal
      }
    }
    const pid = run.pid;
    if (run.containment !== 'process-group' || pid === undefined || pid <= 1 || pid === process.pid) continue;
    try {
      process.kill(-pid, 'SIGKILL');
    } catch {
      // the group is already empty
    }
  }
}

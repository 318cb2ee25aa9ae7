import { CgroupRemains } from '../journal/index.js';
import type { ManagedRun } from './managed-run.js';

/**
 * The host is exiting with runs still alive: nothing asynchronous will run again, so this is
 * synchronous and blunt. SIGKILL to each live run's own process group and cgroup.kill to its
 * cgroup. A group is only signalled when the run created it (started in a new session, so the group
 * is never ours). Journal records stay: a later `reap` sweeps
 * escapees that were in neither (setsid grandchildren) by their cookie.
 */
export function killLiveRunsNow(runs: readonly ManagedRun[]): void {
  for (const run of runs) {
    if (run.state === 'exited') continue;
    const cgroup = run.cgroupPath ? CgroupRemains.open(run.cgroupPath) : null;
    // A cgroup that holds this process is never killed (what is left of it is reap's business).
    if (cgroup && typeof cgroup !== 'string') cgroup.kill((pid) => pid <= 1 || pid === process.pid);
    const pgid = run.pgid;
    if (pgid === null || pgid <= 1 || pgid === process.pid) continue;
    try {
      process.kill(-pgid, 'SIGKILL');
    } catch {
      // the group is already empty
    }
  }
}

import { readFileSync, rmdirSync } from 'node:fs';
import { basename, dirname } from 'node:path';
import { CgroupRemains } from '../journal/index.js';
import { type ProcessInfo, processOfStat, stillAlive } from '../tree/index.js';
import type { ManagedRun } from './managed-run.js';

/**
 * The host is exiting with runs still alive: nothing asynchronous will run again, so this is
 * synchronous and blunt, SIGKILL, but never blind. Each live run's cgroup gets cgroup.kill unless a
 * protected process (this one, an ancestor, pid 1) is inside, in which case its other processes are
 * killed by pid. Its process group is signalled only through its leader, the run's root, whose
 * identity (pid + start time) is read again from /proc just before: a group whose leader exited may
 * be gone and its number reused by someone else's group. Every member seen so far is killed by pid
 * after the same check, with the group it leads, if it leads one. Where there is no /proc nothing
 * can be verified, so only the cgroup (Linux only anyway) is killed. Journal records stay: a later `reap` sweeps what this missed.
 */
export function killLiveRunsNow(runs: readonly ManagedRun[]): void {
  const shield = ancestry();
  const forbidden = (pid: number) => pid <= 1 || shield.pids.has(pid);
  const killed: CgroupRemains[] = [];
  for (const run of runs) {
    if (run.state === 'exited') continue;
    const cgroup = run.cgroupPath ? CgroupRemains.open(run.cgroupPath) : null;
    if (cgroup && typeof cgroup !== 'string') {
      if (cgroup.kill(forbidden) === null) killed.push(cgroup);
      // Refused or failed: its processes one by one (listed by the kernel just now).
      else for (const pid of cgroup.pids()) if (!forbidden(pid)) sigkill(pid);
    }
    const { root, members } = run.lastSeen();
    const pgid = run.pgid;
    const leader = root && root.pid === pgid ? verified(root) : null;
    if (pgid !== null && leader?.pgid === pgid && !forbidden(pgid) && !shield.groups.has(pgid))
      sigkill(-pgid);
    for (const m of members) {
      if (forbidden(m.pid)) continue;
      const now = verified(m);
      if (!now) continue;
      // A member that leads its own group (a setsid'd leftover) takes that group with it: what it
      // forked since the last scan is in there and nowhere else we know of. Verified just now, it
      // is the group's creator, so the group is the run's.
      if (now.pgid === now.pid && !shield.groups.has(now.pgid)) sigkill(-now.pid);
      sigkill(m.pid);
    }
  }
  removeKilled(killed);
}

/** How long the exit may wait, in all, for killed cgroups to empty so they can be removed. */
const REMOVE_WITHIN_MS = 200;

/**
 * A cgroup.kill'ed run cgroup empties within milliseconds: wait for that (synchronously, there is
 * no later) and remove it, and our parent cgroup once it holds no run. Without this, a host with no
 * journal (so no watchdog and no reap) would leave them behind on every exit with runs in flight.
 */
function removeKilled(cgroups: CgroupRemains[]): void {
  if (cgroups.length === 0) return;
  const until = Date.now() + REMOVE_WITHIN_MS;
  const pause = new Int32Array(new SharedArrayBuffer(4));
  const parents = new Set<string>();
  for (const cgroup of cgroups) {
    while (cgroup.populated() && Date.now() < until) Atomics.wait(pause, 0, 0, 2);
    if (cgroup.remove() === null) parents.add(dirname(cgroup.path));
  }
  for (const parent of parents) {
    if (!basename(parent).startsWith(`procwarden-${process.pid}-`)) continue;
    try {
      rmdirSync(parent);
    } catch {
      // another supervisor of this process still has runs there, or it is gone
    }
  }
}

function sigkill(target: number): void {
  try {
    process.kill(target, 'SIGKILL');
  } catch {
    // already gone
  }
}

function current(pid: number): ProcessInfo | null {
  try {
    return processOfStat(readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return null;
  }
}

/** The process now at `m.pid` when it is still `m` (same start time) and not a zombie. */
function verified(m: ProcessInfo): ProcessInfo | null {
  const now = current(m.pid);
  return stillAlive(now, m) ? now : null;
}

/** This process and its ancestors, with their groups: never signalled. */
function ancestry(): { pids: Set<number>; groups: Set<number> } {
  const pids = new Set<number>([process.pid]);
  const groups = new Set<number>();
  let pid = process.pid;
  for (let hops = 0; hops < 4096 && pid > 1; hops++) {
    const info = current(pid);
    if (!info) break;
    pids.add(info.pid);
    groups.add(info.pgid);
    pid = info.ppid;
  }
  return { pids, groups };
}

/** The exit hooks of this process's supervisors with runs in flight: one process listener for all. */
const exitHooks = new Set<() => void>();
const runExitHooks = () => {
  for (const hook of exitHooks) {
    try {
      hook();
    } catch {
      // one supervisor's failure must not cost the others their runs' end
    }
  }
};

/**
 * Arms `hook` for the host's exit. One 'exit' listener serves every supervisor: one each would
 * warn (MaxListenersExceededWarning) past ten supervisors with runs in flight.
 */
export function armExit(hook: () => void): void {
  if (exitHooks.size === 0) process.on('exit', runExitHooks);
  exitHooks.add(hook);
}

export function disarmExit(hook: () => void): void {
  if (!exitHooks.delete(hook) || exitHooks.size > 0) return;
  process.off('exit', runExitHooks);
}

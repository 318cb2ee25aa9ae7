import { existsSync, readdirSync } from 'node:fs';
import { basename, join } from 'node:path';
import { realClock, sleep } from '../clock.js';
import { isPopulated, killAll, moveInto, procsOf, removeSubtree, subtree } from './cgroup-fs.js';

/**
 * Clearing procwarden's parent cgroup `procwarden-<pid>-<start>` once none of its runs is live (the
 * host's last run ended, or reap found its supervisor dead). Only procwarden and root members of
 * its runs can write below it, and procwarden puts nothing there but its runs' shims: so whatever
 * is left in it (a cgroup a member made beside the runs' ones, a process a member moved there, a
 * stale run cgroup) is a remain of those runs, and goes with them. Protected processes (procwarden,
 * an ancestor, pid 1: a root member can write any pid anywhere) are never signalled.
 */
export interface ParentClearing {
  /** Never signalled: moved to `evictTo` when there is one, else left there (and said so). */
  protect: (pid: number) => boolean;
  /** Where protected processes and kept leftovers go: the host's own cgroup (null in reap). */
  evictTo: string | null;
  /** The last run keeps its leftovers: what is found is moved to `evictTo`, not killed. */
  keep: boolean;
  /** Children that are not this clearing's (another live supervisor's run cgroup): left alone. */
  skip?: (name: string) => boolean;
  /** Asked again before the parent itself is removed: a run may have started meanwhile. */
  idle?: () => boolean;
  signal?: (pid: number) => void;
}

/** A run's cgroup, by the name procwarden gives it (`<supervisor id>-<n>`). */
export const RUN_CGROUP = /^pw[0-9a-z]+-\d+$/;

/**
 * The run cgroups of the supervisors of process `pid`, by name: a supervisor id is `pw`, the pid
 * in base 36 and six hex digits (Supervisor.id). A member can make a cgroup with any name, so a
 * name alone proves nothing; this one at least does not take `pwevil-1` for a run of ours.
 */
export function runCgroupsOf(pid: number): RegExp {
  return new RegExp(`^pw${pid.toString(36)}[0-9a-f]{6}-\\d+$`);
}

/** The supervisor id in a run cgroup's name (`<supervisor id>-<n>`). */
export function supervisorOf(name: string): string {
  return name.replace(/-\d+$/, '');
}

/** How long killed tasks get to finish exiting (they keep a cgroup populated, and rmdir EBUSY). */
const EXITING_MS = 2000;

/** Ends what is inside, removes every cgroup deepest first, the parent last; returns what it did and what it could not. */
export async function clearParent(parent: string, how: ParentClearing): Promise<string[]> {
  const notes: string[] = [];
  const children = childNames(parent);
  if (children === null) return notes; // already gone
  const skipped = children.filter((n) => how.skip?.(n));
  const ours = children.filter((n) => !skipped.includes(n)).map((n) => join(parent, n));
  const dirs = [...ours.flatMap(subtree), parent];
  const found = dirs.flatMap((d) => procsOf(d).map((pid) => ({ pid, at: d })));
  const shielded = found.filter((p) => how.protect(p.pid));
  const rest = found.filter((p) => !how.protect(p.pid));
  for (const p of shielded) notes.push(evict(p, how.evictTo, 'protected (procwarden, an ancestor or pid 1)'));
  if (rest.length > 0 && how.keep && how.evictTo) {
    for (const p of rest) notes.push(evict(p, how.evictTo, 'a leftover the run keeps'));
  } else if (rest.length > 0) {
    notes.push(
      `procwarden's parent cgroup ${parent} held ${rest.length} process(es) outside every live run's cgroup (${rest.map((p) => `${p.pid} in ${p.at}`).join(', ')}): a member put them there; killed`,
    );
    await killInside(ours, parent, how);
  }
  await exited(ours, how.protect);
  const problems = ours.flatMap(removeSubtree);
  const made = ours.filter((d) => !RUN_CGROUP.test(basename(d)) && !existsSync(d));
  if (made.length > 0)
    notes.push(`removed cgroup(s) a member made in ${parent}: ${made.map((d) => basename(d)).join(', ')}`);
  if (skipped.length === 0 && (how.idle?.() ?? true)) problems.push(...removeSubtree(parent));
  for (const e of problems) notes.push(`could not remove cgroup ${e.path ?? parent}: ${e.code ?? e.message}`);
  if (problems.length > 0) notes.push(`procwarden's parent cgroup ${parent} is left behind`);
  return notes;
}

/** SIGKILL to what is left: cgroup.kill per child subtree, by pid for the parent's own tasks. */
async function killInside(ours: string[], parent: string, how: ParentClearing): Promise<void> {
  const signal = how.signal ?? ((pid: number) => process.kill(pid, 'SIGKILL'));
  const until = realClock.now() + EXITING_MS;
  const populated = () => ours.some((d) => isPopulated(d) === true) || procsOf(parent).length > 0;
  // Repeated until empty: a member forks while it is being killed one pid at a time.
  while (populated() && realClock.now() < until) {
    for (const d of ours) {
      const inside = subtree(d).flatMap(procsOf);
      // cgroup.kill would reach a protected process too: then by pid, the others only.
      const whole = !inside.some(how.protect) && tryCgroupKill(d);
      if (!whole) for (const pid of inside) if (!how.protect(pid)) tryKill(signal, pid);
    }
    // A pid read from cgroup.procs is a task in it; it cannot be reused before it has exited.
    for (const pid of procsOf(parent)) if (!how.protect(pid)) tryKill(signal, pid);
    await sleep(realClock, 5);
    // Only protected tasks left: they keep it populated for good. None listed yet populated: killed
    // tasks still exiting (rmdir would fail EBUSY), waited for.
    const left = [...ours.flatMap((d) => subtree(d).flatMap(procsOf)), ...procsOf(parent)];
    if (left.length > 0 && left.every(how.protect)) break;
  }
}

/** Killed tasks (the run's own cgroup.kill's too) stay in a cgroup until they have exited: waited for. */
async function exited(dirs: string[], protect: (pid: number) => boolean): Promise<void> {
  const until = realClock.now() + EXITING_MS;
  while (dirs.some((d) => isPopulated(d) === true) && realClock.now() < until) {
    const left = dirs.flatMap((d) => subtree(d).flatMap(procsOf));
    if (left.length > 0 && left.every(protect)) return; // left there for good
    await sleep(realClock, 5);
  }
}

function tryCgroupKill(dir: string): boolean {
  try {
    return killAll(dir);
  } catch {
    return false;
  }
}

function tryKill(signal: (pid: number) => void, pid: number): void {
  try {
    signal(pid);
  } catch {
    // exited meanwhile
  }
}

function evict(p: { pid: number; at: string }, to: string | null, what: string): string {
  if (!to) return `pid ${p.pid} in ${p.at} is ${what}: left there`;
  try {
    moveInto(to, p.pid);
    return `pid ${p.pid} in ${p.at} is ${what}: moved to ${to}`;
  } catch (error) {
    return `pid ${p.pid} in ${p.at} is ${what} and could not be moved (${(error as NodeJS.ErrnoException).code ?? error})`;
  }
}

function childNames(dir: string): string[] | null {
  try {
    return readdirSync(dir, { withFileTypes: true })
      .filter((e) => e.isDirectory())
      .map((e) => e.name);
  } catch {
    return null;
  }
}

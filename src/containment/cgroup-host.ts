import { accessSync, constants, mkdirSync, readdirSync, readFileSync, rmdirSync } from 'node:fs';
import { basename, join } from 'node:path';
import { realClock, sleep } from '../clock.js';
import { ProcwardenError } from '../errors.js';
import { makeDir } from '../make-dirs.js';
import { parseStat } from '../tree/index.js';
import { isPopulated, locateOwnCgroup, moveInto, removeSubtree, subtreeProcs } from './cgroup-fs.js';
import { clearParent, runCgroupsOf, supervisorOf } from './cgroup-parent.js';

export type CgroupProbe = { ok: true; parent: string; own: string } | { ok: false; reason: string };

export interface CgroupHostOptions {
  /** Where mountinfo, cgroup and stat of this process are read (tests point it at fakes). */
  procSelf?: string;
  platform?: NodeJS.Platform;
}

/** How often release() tries to move leftovers out before giving up on removing a run's cgroup. */
const MOVE_ATTEMPTS = 20;
/** How long release() waits for killed tasks to finish exiting (they keep a cgroup populated). */
const EXITING_MS = 2000;

/** How a run's cgroup is released (see releaseRun). */
export interface ReleaseOptions {
  /** Where what the release did or could not do is said (the run's result notes). */
  notes?: string[];
  /** The run ended on its own and keeps its leftovers: found ones are moved out, not killed. */
  keep?: boolean;
  /** Never signalled (procwarden, its ancestors, pid 1); by default this process, its parent and pid 1. */
  protect?: (pid: number) => boolean;
}

/**
 * The live runs of each parent cgroup, shared by every CgroupHost of this process (several
 * supervisors share one parent by name) and by every copy of the library loaded in it (the ESM
 * and CommonJS builds): the parent is cleared only when none of them has a run in it.
 */
interface ParentState {
  runs: Set<string>;
  /** Run cgroups this registry made and has not removed (a failed removal leaves one behind). */
  made: Set<string>;
  /**
   * The supervisor ids of the runs this registry made: a cgroup named after one of them that
   * `made` does not list is no other realm's (a member named it after its own run's supervisor).
   */
  ids: Set<string>;
  /** A run released since the parent was made kept its leftovers: what is left is moved, never killed. */
  keep: boolean;
}
const REGISTRY = Symbol.for('procwarden.cgroup-parents');
function parentState(parent: string): ParentState {
  const g = globalThis as { [REGISTRY]?: Map<string, ParentState> };
  g[REGISTRY] ??= new Map();
  const all = g[REGISTRY];
  let state = all.get(parent);
  if (!state) {
    state = { runs: new Set(), made: new Set(), ids: new Set(), keep: false };
    all.set(parent, state);
  }
  return state;
}

/**
 * One per Supervisor: knows whether cgroup v2 can be used here (probed once, then cached) and owns
 * the parent cgroup `procwarden-<pid>-<starttime>` under our own cgroup, which holds one child
 * cgroup per run. The parent is created with the first run and cleared and removed with the last
 * one; several supervisors of one process share it by name (mkdir tolerates EEXIST) and count
 * their live runs in one registry (see parentState).
 */
export class CgroupHost {
  private probed: CgroupProbe | undefined;

  constructor(private readonly options: CgroupHostOptions = {}) {}

  probe(): CgroupProbe {
    this.probed ??= this.runProbe();
    return this.probed;
  }

  /**
   * Creates the cgroup of one run (and the parent if needed); returns its directory. `before` is
   * told the directory first: the run's journal record names it before it exists, so that a host
   * killed right after the mkdir leaves a cgroup a reap can find.
   */
  createRun(name: string, before?: (dir: string) => void): string {
    const probe = this.probe();
    if (!probe.ok) throw unavailable(probe.reason);
    const dir = join(probe.parent, name);
    before?.(dir);
    try {
      // Not mkdir -p: were our own cgroup gone (we were moved), that would make a stray one at
      // its old path, and leftovers would later be moved into it.
      makeDir(probe.parent);
      mkdirSync(dir);
    } catch (error) {
      this.removeParentIfIdle(probe.parent);
      throw unavailable(`cannot create ${dir}: ${(error as Error).message}`);
    }
    const state = parentState(probe.parent);
    state.runs.add(name);
    state.made.add(name);
    state.ids.add(supervisorOf(name));
    return dir;
  }

  /**
   * Removes a run's cgroup. Processes still inside (leftovers the caller chose to keep) are moved
   * back to our own cgroup first, where they would have lived without containment. Throws when the
   * directory cannot be removed. The parent goes with the last run of this process, and what a
   * member left in it with it (see clearParent); what that did or could not do is in `notes`.
   */
  async releaseRun(dir: string, how: ReleaseOptions = {}): Promise<void> {
    const probe = this.probe();
    if (!probe.ok) return;
    try {
      const exitingUntil = realClock.now() + EXITING_MS;
      for (let i = 0; i < MOVE_ATTEMPTS && isPopulated(dir); ) {
        const pids = subtreeProcs(dir);
        // Killed tasks still on their way out are no longer listed but keep the cgroup populated
        // (rmdir would fail with EBUSY): they get a moment, not a move.
        if (pids.length === 0 && realClock.now() < exitingUntil) {
          await sleep(realClock, 5);
          continue;
        }
        i++;
        for (const pid of pids) {
          try {
            moveInto(probe.own, pid);
          } catch {
            // exited meanwhile; the next pass sees
          }
        }
      }
      const errors = removeSubtree(dir);
      if (errors.length === 0) parentState(probe.parent).made.delete(basename(dir));
      if (errors.length > 0) {
        throw new Error(
          `could not remove cgroup ${dir}: ${errors.map((e) => e.code ?? e.message).join(', ')}`,
        );
      }
    } finally {
      const state = parentState(probe.parent);
      state.runs.delete(basename(dir));
      if (how.keep) state.keep = true;
      if (state.runs.size === 0) await this.clearParent(probe, state, how);
    }
  }

  /**
   * Moves a process to our own cgroup: the way a protected process (us, an ancestor) that someone
   * wrote into a run's cgroup is taken out before that cgroup is killed. Returns that cgroup.
   */
  evict(pid: number): string {
    const probe = this.probe();
    if (!probe.ok) throw unavailable(probe.reason);
    moveInto(probe.own, pid);
    return probe.own;
  }

  /**
   * The last run of this process in the parent is gone: what is left below the parent can only be
   * its runs' (see clearParent), and is ended with them; the parent is removed, or said why not.
   */
  private async clearParent(
    probe: { parent: string; own: string },
    state: ParentState,
    how: ReleaseOptions,
  ): Promise<void> {
    // A run cgroup this registry did not make is another realm's of this process (a worker
    // thread's, a vm context's): each has a registry of its own, and all share the parent by name.
    // Its runs may be live: nothing is cleared, and the last realm to finish clears the parent.
    if (otherRealmsRuns(probe.parent, state)) return;
    const notes = await clearParent(probe.parent, {
      protect: how.protect ?? ((pid) => pid <= 1 || pid === process.pid || pid === process.ppid),
      evictTo: probe.own,
      keep: state.keep,
      // A run started while this clearing waited for killed tasks to exit is not touched.
      skip: (name) => state.runs.has(name),
      idle: () => state.runs.size === 0,
    });
    if (state.runs.size === 0) state.keep = false;
    how.notes?.push(...notes);
  }

  /** Where no run was ever made (a probe, a failed mkdir): an empty parent goes at once. */
  private removeParentIfIdle(parent: string): void {
    if (parentState(parent).runs.size > 0) return;
    try {
      rmdirSync(parent);
    } catch {
      // EBUSY: a run of another copy of the library is there; ENOENT: already gone
    }
  }

  private runProbe(): CgroupProbe {
    const platform = this.options.platform ?? process.platform;
    if (platform !== 'linux') return { ok: false, reason: `cgroups exist only on Linux, not on ${platform}` };
    const self = this.options.procSelf ?? '/proc/self';
    let mountinfo: string;
    let cgroup: string;
    let stat: ReturnType<typeof parseStat>;
    try {
      mountinfo = readFileSync(join(self, 'mountinfo'), 'utf8');
      cgroup = readFileSync(join(self, 'cgroup'), 'utf8');
      stat = parseStat(readFileSync(join(self, 'stat'), 'utf8'));
    } catch (error) {
      return { ok: false, reason: `cannot read ${self}: ${(error as Error).message}` };
    }
    if (!stat) return { ok: false, reason: `cannot parse ${self}/stat` };
    const where = locateOwnCgroup(mountinfo, cgroup);
    if ('reason' in where) return { ok: false, reason: where.reason };
    try {
      accessSync('/bin/sh', constants.X_OK);
    } catch {
      return { ok: false, reason: 'there is no /bin/sh to start commands inside a cgroup' };
    }
    const parent = join(where.dir, `procwarden-${stat.pid}-${stat.startTime}`);
    // Creating the parent is the only honest test of write access (read-only mounts, LSMs,
    // missing delegation all show up here); it is removed again until a run needs it.
    try {
      makeDir(parent);
      accessSync(join(where.dir, 'cgroup.procs'), constants.W_OK);
    } catch (error) {
      return {
        ok: false,
        reason: `cannot create cgroups under ${where.dir} (${(error as NodeJS.ErrnoException).code ?? error}); this needs root or a delegated cgroup v2 subtree`,
      };
    } finally {
      this.removeParentIfIdle(parent);
    }
    return { ok: true, parent, own: where.dir };
  }
}

function unavailable(reason: string): ProcwardenError {
  return new ProcwardenError(
    'CGROUP_UNAVAILABLE',
    `containment 'cgroup' cannot be used: ${reason}. Use containment 'auto' or 'process-group'.`,
  );
}

/** Whether the parent holds a run cgroup of this process, by its name, of a supervisor not of this realm. */
function otherRealmsRuns(parent: string, { made, ids }: ParentState): boolean {
  const ours = runCgroupsOf(process.pid);
  try {
    return readdirSync(parent, { withFileTypes: true }).some(
      (e) => e.isDirectory() && ours.test(e.name) && !made.has(e.name) && !ids.has(supervisorOf(e.name)),
    );
  } catch {
    return false; // gone: nothing to clear
  }
}

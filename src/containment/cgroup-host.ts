import { accessSync, constants, mkdirSync, readFileSync, rmdirSync } from 'node:fs';
import { join } from 'node:path';
import { realClock, sleep } from '../clock.js';
import { ProcwardenError } from '../errors.js';
import { makeDir } from '../make-dirs.js';
import { parseStat } from '../tree/index.js';
import { isPopulated, locateOwnCgroup, moveInto, procsOf, removeSubtree, subtreeProcs } from './cgroup-fs.js';

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

/**
 * One per Supervisor: knows whether cgroup v2 can be used here (probed once, then cached) and owns
 * the parent cgroup `procwarden-<pid>-<starttime>` under our own cgroup, which holds one child
 * cgroup per run. The parent is created with the first run and removed with the last one; several
 * supervisors of one process share it by name (mkdir tolerates EEXIST, rmdir tolerates EBUSY).
 */
export class CgroupHost {
  private probed: CgroupProbe | undefined;
  private live = 0;

  constructor(private readonly options: CgroupHostOptions = {}) {}

  probe(): CgroupProbe {
    this.probed ??= this.runProbe();
    return this.probed;
  }

  /** Creates the cgroup of one run (and the parent if needed); returns its directory. */
  createRun(name: string): string {
    const probe = this.probe();
    if (!probe.ok) throw unavailable(probe.reason);
    const dir = join(probe.parent, name);
    try {
      // Not mkdir -p: were our own cgroup gone (we were moved), that would make a stray one at
      // its old path, and leftovers would later be moved into it.
      makeDir(probe.parent);
      mkdirSync(dir);
    } catch (error) {
      this.removeParentIfIdle(probe.parent);
      throw unavailable(`cannot create ${dir}: ${(error as Error).message}`);
    }
    this.live++;
    return dir;
  }

  /**
   * Removes a run's cgroup. Processes still inside (leftovers the caller chose to keep) are moved
   * back to our own cgroup first, where they would have lived without containment. Throws when the
   * directory cannot be removed; the parent goes with the last run.
   */
  async releaseRun(dir: string): Promise<void> {
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
      if (errors.length > 0) {
        throw new Error(
          `could not remove cgroup ${dir}: ${errors.map((e) => e.code ?? e.message).join(', ')}`,
        );
      }
    } finally {
      this.live--;
      this.removeParentIfIdle(probe.parent);
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

  private removeParentIfIdle(parent: string): void {
    if (this.live > 0) return;
    // A member may have moved itself into the parent (it is killed as a member wherever it went;
    // one kept as a leftover goes where it would have lived without containment): an occupied
    // parent cannot be removed.
    const own = this.probed?.ok ? this.probed.own : null;
    if (own) {
      for (const pid of procsOf(parent)) {
        try {
          moveInto(own, pid);
        } catch {
          // exited meanwhile
        }
      }
    }
    try {
      rmdirSync(parent);
    } catch {
      // EBUSY: another supervisor of this process still has runs there; ENOENT: already gone
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

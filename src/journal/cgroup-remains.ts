import { readdirSync, readFileSync, rmdirSync, writeFileSync } from 'node:fs';
import { basename, dirname, join, normalize } from 'node:path';
import { type Clock, sleep } from '../clock.js';
import { clearParent, isPopulated, RUN_CGROUP, runCgroupsOf, supervisorOf } from '../containment/index.js';

/**
 * What is left of a dead run's cgroup (Linux cgroup v2): its processes, cgroup.kill, removal.
 * The path comes from a file on disk, so it is only trusted when it sits strictly below a cgroup2
 * mount point; cgroup.kill is refused when a protected process (us, an ancestor) is inside.
 */
export class CgroupRemains {
  private constructor(readonly path: string) {}

  /** The reason instead when the path is not a cgroup directory we may act on. */
  static open(path: string, mountinfo = '/proc/self/mountinfo'): CgroupRemains | string {
    if (normalize(path) !== path || !path.startsWith('/')) return `cgroup path ${path} is not normalised`;
    const mounts = cgroup2Mounts(mountinfo);
    if (!mounts.some((m) => path.startsWith(`${m}/`)))
      return `cgroup path ${path} is not below a cgroup2 mount`;
    return new CgroupRemains(path);
  }

  /**
   * A record's cgroup, only when it is one procwarden makes for that record's supervisor: the
   * parent `procwarden-<supervisor pid>-<supervisor start>` or a run's cgroup right under it. Any
   * other cgroup (a service's, a test's) is never killed on a record's word. A record written
   * before its supervisor had read its own start time (the first, written in the spawn's tick)
   * has none: then any start time in the name will do, the pid must still match.
   */
  static forRecord(
    record: { cgroupPath: string; supervisorPid: number; supervisorStart: string | null },
    mountinfo?: string,
  ): CgroupRemains | string {
    const { cgroupPath: path, supervisorPid, supervisorStart } = record;
    const named = (dir: string) => {
      const m = /^procwarden-(\d+)-(.+)$/.exec(basename(dir));
      if (!m || Number(m[1]) !== supervisorPid) return false;
      return supervisorStart === null ? /^\d+$/.test(m[2] as string) : m[2] === supervisorStart;
    };
    if (!named(path) && !named(dirname(path)))
      return `cgroup ${path} is not one procwarden makes for supervisor ${supervisorPid} (procwarden-${supervisorPid}-${supervisorStart ?? '<start>'}/<run>)`;
    return CgroupRemains.open(path, mountinfo);
  }

  /** Pids in the cgroup and its descendants; empty once the directory is gone. */
  pids(): number[] {
    const out: number[] = [];
    const walk = (dir: string) => {
      try {
        for (const line of readFileSync(join(dir, 'cgroup.procs'), 'utf8').split('\n')) {
          const pid = Number(line);
          if (pid > 0) out.push(pid);
        }
        for (const d of readdirSync(dir, { withFileTypes: true }))
          if (d.isDirectory()) walk(join(dir, d.name));
      } catch {
        // removed while we read it
      }
    };
    walk(this.path);
    return out;
  }

  /** SIGKILLs the whole cgroup at once; returns why it did not, if it did not. */
  kill(forbidden: (pid: number) => boolean): string | null {
    const bad = this.pids().filter(forbidden);
    if (bad.length > 0)
      return `refused cgroup.kill on ${this.path}: it holds protected pid(s) ${bad.join(', ')}`;
    try {
      writeFileSync(join(this.path, 'cgroup.kill'), '1');
      return null;
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      return code === 'ENOENT' ? null : `cgroup.kill on ${this.path} failed: ${code ?? error}`;
    }
  }

  /** Whether a task is still in the cgroup or below (false once it is gone). */
  populated(): boolean {
    return isPopulated(this.path) === true;
  }

  /**
   * Resolves once the cgroup has no task left (`populated 0`) or is gone, or after `ms`. After
   * cgroup.kill, cgroup.procs can be empty while killed tasks are still exiting, and until they
   * are out the cgroup cannot be removed (EBUSY).
   */
  async emptied(clock: Clock, ms: number): Promise<void> {
    const until = clock.now() + ms;
    while (clock.now() < until && this.populated()) await sleep(clock, 5);
  }

  /** Removes the (empty) cgroup and its empty children, deepest first; returns what went wrong. */
  remove(): string | null {
    const rm = (dir: string): string | null => {
      let subs: string[] = [];
      try {
        subs = readdirSync(dir, { withFileTypes: true })
          .filter((d) => d.isDirectory())
          .map((d) => join(dir, d.name));
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code === 'ENOENT') return null;
      }
      for (const s of subs) {
        const problem = rm(s);
        if (problem) return problem;
      }
      try {
        rmdirSync(dir);
        return null;
      } catch (error) {
        const code = (error as NodeJS.ErrnoException).code;
        return code === 'ENOENT' ? null : `could not remove cgroup ${dir}: ${code ?? error}`;
      }
    };
    return rm(this.path);
  }
}

/** What clearSupervisorCgroups needs of a reaped run. */
export interface ReapedCgroupRun {
  supervisorId: string;
  supervisorPid: number;
  cgroupPath: string | null;
  /** Only 'reaped' runs free their parent: one kept for a later reap still has its cgroup there. */
  action: string;
  notes: string[];
}

/**
 * A dead supervisor also leaves the parent cgroup it made for its runs, `procwarden-<pid>-<start>`,
 * and whatever its runs' members made or moved there (a cgroup beside the runs' ones) or a run's
 * cgroup whose record was never written. Once every run recorded under a parent is reaped, and
 * only when the parent names the record's supervisor and that process (pid and start time) is
 * gone, that is all the dead runs' (see clearParent): killed, removed deepest first, the parent
 * last, and what could not be is said in the notes of the parent's runs. Another supervisor's
 * parent is never touched, nor, inside it, a run cgroup that a record of a supervisor not reaped
 * here names (another supervisor of the same process: its own reap or watchdog ends it).
 */
export async function clearSupervisorCgroups(
  runs: ReapedCgroupRun[],
  alive: (pid: number, start: string) => Promise<boolean>,
  protect: (pid: number) => boolean,
  /** The cgroups every record in the journal names (a run's is named before it is made). */
  recorded: ReadonlySet<string>,
): Promise<void> {
  const byParent = new Map<string, ReapedCgroupRun[]>();
  for (const run of runs) {
    const parent = run.cgroupPath && supervisorParent(run.cgroupPath, run.supervisorPid);
    if (!parent) continue;
    byParent.set(parent, [...(byParent.get(parent) ?? []), run]);
  }
  for (const [parent, those] of byParent) {
    if (those.some((r) => r.action !== 'reaped')) continue;
    const [, pid, start] = /^procwarden-(\d+)-(\d+)$/.exec(basename(parent)) as RegExpExecArray;
    if (await alive(Number(pid), start as string)) continue;
    const reaped = new Set(those.map((r) => r.supervisorId));
    const notes = await clearParent(parent, {
      protect,
      evictTo: null,
      keep: false,
      // Another supervisor of the dead process, whose own watchdog may be in its grace: by a record
      // that names it, or by its name (one of that process's: `pw`, its pid in base 36, six hex
      // digits; that supervisor's journal may be another directory). Not `pwevil-1`, a name a
      // member gave, nor one it gave after its own run's supervisor, which is reaped here.
      skip: (name) => {
        if (!RUN_CGROUP.test(name) || reaped.has(supervisorOf(name))) return false;
        return recorded.has(join(parent, name)) || runCgroupsOf(Number(pid)).test(name);
      },
    });
    those[those.length - 1]?.notes.push(...notes);
  }
}

/** The parent `procwarden-<pid>-<start>` of the supervisor a record names: the path or its parent. */
function supervisorParent(path: string, supervisorPid: number): string | null {
  for (const dir of [path, dirname(path)]) {
    const m = /^procwarden-(\d+)-(\d+)$/.exec(basename(dir));
    if (m && Number(m[1]) === supervisorPid) return dir;
  }
  return null;
}

/** Mount points of cgroup2 file systems (field 5 of mountinfo; fstype follows the " - "). */
function cgroup2Mounts(mountinfo: string): string[] {
  let text: string;
  try {
    text = readFileSync(mountinfo, 'utf8');
  } catch {
    return [];
  }
  const out: string[] = [];
  for (const line of text.split('\n')) {
    const [left, right] = line.split(' - ');
    if (!left || !right || right.split(' ')[0] !== 'cgroup2') continue;
    const point = left.split(' ')[4];
    if (point) out.push(point.replace(/\\040/g, ' '));
  }
  return out;
}

import { isGone, type ProcessTable } from '../tree/index.js';
import type { RunRecord } from './record.js';
import { foreignProc, selfIdentity } from './self.js';

/**
 * Whether a record's supervisor is alive, asked of this process's /proc. A pid means something
 * only in the pid namespace that wrote it: a supervisor in a container (or another `unshare
 * --pid`) is invisible from here, not dead, and a reaper that took "not visible" for "dead" would
 * end a live supervisor's runs, or delete the records its watchdog needs. So a record written in
 * another namespace is not this reaper's to judge; neither is any record when this /proc is not
 * our namespace's own.
 */
export type Verdict = 'alive' | 'dead' | { notJudged: string };

export class SupervisorJudge {
  private readonly answers = new Map<string, Promise<boolean>>();
  private readonly ownNamespace = selfIdentity().pidNamespace;
  private readonly ownTimeNamespace = selfIdentity().timeNamespace;
  /** Why nothing may be judged or acted on from this /proc, or null. */
  readonly foreignProc = foreignProc();

  constructor(private readonly table: ProcessTable) {}

  /** Why this record may not be judged (or acted on) from here, or null. */
  outsideOurs(r: RunRecord): string | null {
    if (this.foreignProc) return `${this.foreignProc}; no record is judged from it`;
    const written = r.supervisorPidNamespace;
    if (written === undefined) {
      // Where there are no pid namespaces there is nothing to confuse.
      if (this.ownNamespace === null) return null;
      return "the record does not say which pid namespace its supervisor was in (written by an older procwarden), and a supervisor in another namespace is invisible here, not dead: left alone (a person who knows that supervisor is gone may delete the record's files)";
    }
    if (written !== this.ownNamespace)
      return `written in pid namespace ${written ?? '(unknown)'}, this reaper is in ${this.ownNamespace ?? '(unknown)'}: whether its supervisor lives is not ours to judge; left alone`;
    // Start times read here are shifted by this time namespace's boot-time offset: a live
    // supervisor's would not match its record, and "pid reused" would end its runs.
    const time = r.supervisorTimeNamespace;
    if (typeof time === 'string' && this.ownTimeNamespace !== null && time !== this.ownTimeNamespace)
      return `written in time namespace ${time}, this reaper is in ${this.ownTimeNamespace}: /proc shows start times shifted between them, so whether its supervisor lives (and which processes are its run's) cannot be told from here; left alone (reap from the supervisor's time namespace)`;
    return null;
  }

  /**
   * A supervisor the caller knows is dead (the watchdog saw its pipe close; it runs in its host's
   * namespace): it still may not act from a foreign /proc.
   */
  knownDead(): Verdict {
    return this.foreignProc ? { notJudged: `${this.foreignProc}; nothing is acted on from it` } : 'dead';
  }

  async judge(r: RunRecord, startFromCgroup: string | null): Promise<Verdict> {
    const outside = this.outsideOurs(r);
    // An older record whose supervisor is visibly alive here is left alone either way: only the
    // verdict "dead", the one that acts, needs the namespace.
    const unsure = outside !== null && !this.foreignProc && r.supervisorPidNamespace === undefined;
    if (outside && !unsure) return { notJudged: outside };
    const alive = await this.alive(r, startFromCgroup);
    if (outside) return alive ? 'alive' : { notJudged: outside };
    return alive ? 'alive' : 'dead';
  }

  private alive(r: RunRecord, startFromCgroup: string | null): Promise<boolean> {
    const start = r.supervisorStart ?? startFromCgroup;
    const k = `${r.supervisorPid}@${start}`;
    let p = this.answers.get(k);
    if (!p) {
      p = this.table.get(r.supervisorPid).then((info) => {
        if (isGone(info) || !info) return false;
        // A launch record written by an older procwarden in the tick its supervisor was made may
        // have no start time; the cgroup it made then is named with it. With neither, the pid
        // alone decides, the cautious way: alive.
        return start === null || info.startTime === start;
      });
      this.answers.set(k, p);
    }
    return p;
  }
}

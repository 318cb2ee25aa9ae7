import { killable } from '../options/index.js';
import { BLIND_START, exists, type ProcessInfo } from '../tree/index.js';
import type { Containment, LaunchPlan } from './types.js';

const ZOMBIE_NOTE = 'process group';

/**
 * Where no process table can be trusted (a foreign /proc): the run is held by what the kernel
 * answers in our own PID namespace without one. With `group`, the process group the command leads
 * (kill(-pgid) reaches it, kill(-pgid, 0) says whether it still has members); without, the command
 * itself, our direct child, whose pid cannot be reused before we have seen it exit. What left the
 * group (setsid) is out of reach: the run's containmentFallback says so.
 */
export class GroupOnlyContainment implements Containment {
  readonly kind: 'process-group' | 'none';
  readonly notes: string[] = [];
  private pid: number | undefined;
  private killSent = false;

  constructor(
    private readonly group: boolean,
    readonly fallback: string,
  ) {
    this.kind = group ? 'process-group' : 'none';
  }

  prepare(plan: LaunchPlan): LaunchPlan {
    return { ...plan, newSession: this.group };
  }

  async attach(pid: number): Promise<void> {
    this.pid = pid;
  }

  /** One stand-in member (the group, or the child) while it exists. */
  async members(): Promise<ProcessInfo[]> {
    const pid = this.pid;
    if (pid === undefined || pid <= 1 || pid === process.pid || !exists(this.group ? -pid : pid)) return [];
    if (this.killSent && this.group && !this.notes.some((n) => n.startsWith(ZOMBIE_NOTE))) {
      this.notes.push(
        `${ZOMBIE_NOTE} ${pid} still has members after SIGKILL: they may be zombies nobody reaps (orphans of a PID namespace whose init does not reap), which without a /proc of our own cannot be told from live processes`,
      );
    }
    return [
      {
        pid,
        ppid: process.pid,
        pgid: this.group ? pid : -1,
        sid: -1,
        startTime: BLIND_START,
        state: 'S',
        command: '',
      },
    ];
  }

  async signal(signal: NodeJS.Signals, members: ProcessInfo[]): Promise<ProcessInfo[]> {
    const pid = this.pid;
    if (pid === undefined || members.length === 0) return [];
    try {
      process.kill(this.group ? -pid : pid, killable(signal));
      if (signal === 'SIGKILL') this.killSent = true;
      return members;
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      if (code !== 'ESRCH') this.notes.push(`${signal} to ${this.group ? 'group ' : ''}${pid}: ${code}`);
      return [];
    }
  }

  /**
   * Nothing the exit hook could re-verify: it proves identity from /proc, which is not ours here.
   * The journal and the watchdog cannot prove it either; this mode's limits are in containmentFallback.
   */
  lastSeen(): { root: ProcessInfo | null; members: ProcessInfo[] } {
    return { root: null, members: [] };
  }

  async release(): Promise<void> {}
}

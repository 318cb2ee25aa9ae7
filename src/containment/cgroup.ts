import type { Deliverer, Guard } from '../kill/index.js';
import { isGone, type ProcessInfo, type ProcessTable } from '../tree/index.js';
import { isPopulated, killAll, subtreeProcs } from './cgroup-fs.js';
import type { CgroupHost } from './cgroup-host.js';
import { throughShim } from './cgroup-shim.js';
import type { Containment, LaunchPlan } from './types.js';

const key = (p: ProcessInfo) => `${p.pid}@${p.startTime}`;
/** Signals after which SIGCONT would undo or duplicate what was asked. */
const NO_CONT = new Set<NodeJS.Signals>(['SIGKILL', 'SIGCONT', 'SIGSTOP', 'SIGTSTP', 'SIGTTIN', 'SIGTTOU']);

/**
 * Linux cgroup v2: the run lives in its own cgroup, which no descendant can leave without
 * privileges — setsid, double forks and cleared environments included. Members are the cgroup's
 * processes; SIGKILL is one write to cgroup.kill; the tree is extinct when cgroup.events says
 * `populated 0`.
 */
export class CgroupContainment implements Containment {
  readonly kind = 'cgroup' as const;
  /** The run's cgroup directory (the journal records it, so that a crashed supervisor's runs can be reaped). */
  readonly cgroupPath: string;
  private root: ProcessInfo | null = null;
  private inside = new Set<string>();
  private released = false;

  constructor(
    private readonly host: CgroupHost,
    name: string,
    private readonly table: ProcessTable,
    private readonly guard: Guard,
    private readonly deliverer: Deliverer,
  ) {
    this.cgroupPath = host.createRun(name);
  }

  get notes(): readonly string[] {
    return this.deliverer.notes;
  }

  prepare(plan: LaunchPlan): LaunchPlan {
    return throughShim({ ...plan, newSession: true }, `${this.cgroupPath}/cgroup.procs`);
  }

  async attach(pid: number): Promise<void> {
    this.root = await this.table.get(pid);
  }

  async members(): Promise<ProcessInfo[]> {
    await this.guard.refresh(this.table);
    const out = new Map<string, ProcessInfo>();
    const populated = isPopulated(this.cgroupPath);
    if (populated === null) this.note(`cgroup ${this.cgroupPath} disappeared`);
    if (populated) {
      for (const pid of subtreeProcs(this.cgroupPath)) {
        const info = await this.table.get(pid);
        if (info && !isGone(info) && !this.guard.forbidsPid(pid)) out.set(key(info), info);
      }
    }
    this.inside = new Set(out.keys());
    // Until the shim has written itself into cgroup.procs the root is outside; it has forked
    // nothing yet, so the root alone is the whole tree then.
    const root = this.root;
    if (root && !this.inside.has(key(root))) {
      const fresh = await this.table.get(root.pid);
      if (fresh && !isGone(fresh) && fresh.startTime === root.startTime) out.set(key(fresh), fresh);
    }
    return [...out.values()];
  }

  async signal(signal: NodeJS.Signals, members: ProcessInfo[]): Promise<ProcessInfo[]> {
    let pending = members;
    const reached: ProcessInfo[] = [];
    if (signal === 'SIGKILL' && members.some((m) => this.inside.has(key(m)))) {
      try {
        if (killAll(this.cgroupPath)) {
          reached.push(...members.filter((m) => this.inside.has(key(m))));
          pending = members.filter((m) => !this.inside.has(key(m)));
        } else {
          this.note('this kernel has no cgroup.kill (Linux < 5.14): SIGKILL goes to members one by one');
        }
      } catch (error) {
        this.note(
          `writing cgroup.kill failed (${(error as NodeJS.ErrnoException).code ?? error}); killing by pid`,
        );
      }
    }
    for (const m of pending) if ((await this.deliverer.toMember(m, signal)) === 'sent') reached.push(m);
    // A stopped member cannot act on the graceful signal until it is continued.
    if (!NO_CONT.has(signal)) for (const m of reached) await this.deliverer.toMember(m, 'SIGCONT');
    return reached;
  }

  async release(): Promise<void> {
    if (this.released) return;
    this.released = true;
    this.host.releaseRun(this.cgroupPath);
  }

  private note(text: string): void {
    if (!this.deliverer.notes.includes(text)) this.deliverer.notes.push(text);
  }
}

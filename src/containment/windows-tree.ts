import { type ChildHandle, type Guard, type SendSignal, WindowsTreeTarget } from '../kill/index.js';
import type { ProcessInfo, WindowsTable } from '../tree/index.js';
import type { Containment, LaunchPlan } from './types.js';

/**
 * Windows without Job Objects: the run is held as the tree of the direct child, tracked by
 * identity (pid, CreationDate) in snapshots and ended through taskkill (see WindowsTreeTarget).
 *
 * The gap: a grandchild whose parent exits before procwarden's first snapshot has no link left
 * to the run (Windows never re-parents and keeps no other record), so only a Job Object, which the
 * kernel assigns at creation, holds it for certain. Node cannot create or assign one without
 * native code; a JobObject strategy will be another Containment file next to this one (prepare:
 * spawn suspended into the job; members: the job's process list; signal: TerminateJobObject).
 */
export class WindowsTreeContainment implements Containment {
  readonly kind = 'windows-tree' as const;
  private readonly target: WindowsTreeTarget;

  constructor(table: WindowsTable, guard: Guard, send?: SendSignal) {
    this.target = new WindowsTreeTarget(table, guard, { send });
  }

  get notes(): readonly string[] {
    return this.target.notes;
  }

  /** No detach: on Windows it would give the command a console of its own, not a process group. */
  prepare(plan: LaunchPlan): LaunchPlan {
    return { ...plan, newSession: false };
  }

  attach(pid: number, child?: ChildHandle): Promise<void> {
    return this.target.attach(pid, child);
  }

  members(): Promise<ProcessInfo[]> {
    return this.target.members();
  }

  signal(signal: NodeJS.Signals, members: ProcessInfo[]): Promise<ProcessInfo[]> {
    return this.target.signal(signal, members);
  }

  /** Nothing: the exit hook verifies identity through /proc, which Windows does not have. */
  lastSeen(): { root: ProcessInfo | null; members: ProcessInfo[] } {
    return { root: null, members: [] };
  }

  async release(): Promise<void> {}
}

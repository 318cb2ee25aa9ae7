import type { ChildHandle, KillTarget } from '../kill/index.js';
import type { ProcessInfo } from '../tree/index.js';
import type { UsedContainment } from '../types.js';

/** What a launcher needs to start a command; containments adjust it before the spawn. */
export interface LaunchPlan {
  file: string;
  args: string[];
  cwd: string | undefined;
  env: Record<string, string>;
  /** Start the command in a new session and process group (setsid). */
  newSession: boolean;
  /**
   * The command's own file when `file` is a program that execs it (the cgroup shim's shell): what a
   * launcher that checks the exec beforehand (PTY mode) must look at, not the shell.
   */
  command?: string;
  /**
   * Linux: the oom_score_adj the command must start with (RunSpec.oomScoreAdj). The shell that
   * execs the command writes it first (shim.ts), and the plan it returns has no such field left.
   * `required`: when the write fails, that shell runs nothing and exits 125.
   */
  oomScore?: { value: number; required: boolean };
}

/**
 * How a run is held. Strategies share three verbs (prepare, members, signal) so that new ones
 * (cgroup, Windows Job Objects) are new files, not new branches.
 */
export interface Containment extends KillTarget {
  readonly kind: UsedContainment;
  /** The cgroup directory holding the run (cgroup containment only): journalled for crash recovery. */
  readonly cgroupPath?: string;
  /** Why the requested strategy could not be used and this one stands in (RunResult.containmentFallback). */
  readonly fallback?: string;
  prepare(plan: LaunchPlan): LaunchPlan;
  /**
   * Called once the command has a pid, before anything can be signalled. `child` is the launcher's
   * handle on it, the last resort when nothing else can end it.
   */
  attach(pid: number, child?: ChildHandle): Promise<void>;
  /**
   * The root was reaped (its exit heard) before attach resolved: whether attach was let go, its
   * read adding nothing the run still needs. Absent: attach is always waited for.
   */
  rootReaped?(): boolean;
  /** A signal is due: whatever attach still defers, it does now. Absent: attach defers nothing. */
  identityNow?(): void;
  /**
   * The run's root as recorded at attach and every member seen so far, each with the identity it
   * had then: what the host's exit hook may still reach, synchronously, after re-verifying it.
   */
  lastSeen(): { root: ProcessInfo | null; members: ProcessInfo[] };
  /**
   * Frees what the containment holds (a cgroup directory...). Idempotent. What it did beyond that,
   * or could not do, goes to `notes`; `keepLeftovers`: the run ended on its own and keeps them.
   */
  release(notes?: string[], keepLeftovers?: boolean): Promise<void>;
}

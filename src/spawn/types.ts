import type { LaunchPlan } from '../containment/index.js';
import type { PtyOptions, RunStdin, StreamName } from '../types.js';

export interface LaunchEvents {
  /**
   * A chunk of output. A returned promise means the consumers are behind: the launcher stops
   * reading that stream until it settles, so the command's pipe fills and the command blocks.
   */
  output(stream: StreamName, chunk: Buffer): PromiseLike<void> | undefined;
  /** The command has a pid and is running. */
  spawned(): void;
  /** The direct child exited (its output may still be draining). */
  exited(code: number | null, signal: NodeJS.Signals | null): void;
  /** The command could not be started. */
  failed(error: NodeJS.ErrnoException): void;
}

export interface LaunchOptions {
  stdin: { kind: 'ignore' | 'pipe' | 'inherit' } | { kind: 'data'; data: Uint8Array };
  /** The terminal's size and TERM; only a PTY launcher reads it. */
  pty: Required<PtyOptions>;
  /** 'inherit': the command writes to the caller's own stdout and stderr. Default 'pipe'. */
  output?: 'pipe' | 'inherit';
  /** Our descriptors the command gets under the same numbers (3 and above, sorted). */
  inheritFds?: readonly number[];
}

/** A started command as the run sees it, whatever launched it (pipes or a PTY). */
export interface Launched {
  readonly pid: number | undefined;
  readonly stdin: RunStdin | undefined;
  /** Resolves once every output stream has ended. */
  readonly outputDone: Promise<void>;
  /** Stops reading output (after the drain window): holders of the pipe no longer keep us waiting. */
  releaseOutput(): void;
  /** Signals the direct child through the launcher's own handle (immune to pid reuse on Windows). */
  kill?(signal?: NodeJS.Signals): boolean;
  /** A terminal's new size (PTY only; sizes already validated). */
  resize?(cols: number, rows: number): void;
}

export interface Launcher {
  (plan: LaunchPlan, options: LaunchOptions, events: LaunchEvents): Launched;
  /**
   * Throws a ProcwardenError when this launcher cannot work on this host (a missing optional
   * module), so that the spawn fails before a run exists rather than as a spawn-error result.
   */
  preflight?(): void;
}

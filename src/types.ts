import type { Clock } from './clock.js';

export type ContainmentMode = 'auto' | 'cgroup' | 'process-group' | 'none';
export type UsedContainment = Exclude<ContainmentMode, 'auto'> | 'windows-tree';
export type RunMode = 'child' | 'pty';
export type StreamName = 'stdout' | 'stderr' | 'pty';

export type RunReason =
  | 'exit'
  | 'signal'
  | 'overall-timeout'
  | 'no-output-timeout'
  | 'cancelled'
  | 'aborted'
  | 'spawn-error'
  | 'shutdown';

/**
 * 'holding': the command has exited and the processes it left are held (`leftovers: 'hold'`) until
 * they end, or something ends them.
 */
export type RunState = 'starting' | 'running' | 'holding' | 'stopping' | 'exited';

/** What ended a held run's leftovers (`leftovers: 'hold'`). */
export type HoldEnd = 'themselves' | 'cancelled' | 'aborted' | 'shutdown' | 'hold-timeout';

/**
 * A stream's consumer: returns nothing, or a promise that holds the stream until it settles. Two
 * signatures rather than one returning `void | Promise<void>`, so that an arrow with an expression
 * body (`(t) => (out += t)`, whose value is ignored) still type-checks.
 */
export type Consumer<T> =
  | ((chunk: T, stream: StreamName) => void)
  | ((chunk: T, stream: StreamName) => Promise<void>);

export interface OutputOptions {
  /** Bytes captured per stream; head and tail are kept beyond it. Default 1 MiB. 0 captures nothing. */
  maxBytes?: number;
  /**
   * Every decoded chunk, as it arrives. UTF-8 sequences split across chunks decode whole.
   * Returning a promise (an async function) applies backpressure, as for onBytes.
   */
  onData?: Consumer<string>;
  /**
   * A path that receives every byte of stdout and stderr (appended in arrival order), written
   * asynchronously: a slow or stalled reader (a FIFO, a pipe) pauses the command, never the host.
   */
  file?: string;
  /**
   * Every raw chunk, as it arrives, before any decoding: for byte-exact pass-through. Returning a
   * promise (an async function, or one that awaits a writable's 'drain') means "not ready for
   * more": procwarden reads no
   * more of that stream until it settles, so the command blocks on its full pipe. A rejection is
   * noted in the result and reading resumes. The chunk is shared with the capture, the file sink
   * and the run's log: copy it to keep it, never change it.
   */
  onBytes?: Consumer<Uint8Array>;
  /**
   * Give the command the caller's own stdout and stderr instead of pipes (it sees a TTY if the
   * caller has one). Nothing is captured or streamed then, and noOutputTimeoutMs is not available.
   */
  inherit?: boolean;
}

export interface PtyOptions {
  cols?: number;
  rows?: number;
  term?: string;
}

export interface RunSpec {
  /** The command and its arguments: at least the command (an empty argv is a type error). */
  argv: readonly [string, ...string[]];
  mode?: RunMode;
  /** Run argv through /bin/sh -c (argv joined with spaces). Off by default. */
  shell?: boolean;
  cwd?: string;
  env?: Record<string, string | undefined>;
  /** Merge `env` into process.env (default true). */
  extendEnv?: boolean;
  /** Put PROCWARDEN_RUN=<run id> into the run's environment (default true): how escaped members are found. */
  cookie?: boolean;
  stdin?: 'ignore' | 'pipe' | 'inherit' | string | Uint8Array;
  /**
   * Descriptors of this process (3 and above) the command gets under the same numbers, as a shell
   * passes what it has open: a make jobserver's pipe, a lock held with `flock 9`. Not with mode 'pty'.
   */
  inheritFds?: readonly number[];
  /**
   * Start the command in this process's own process group (and session) instead of a new one, as
   * a shell starts the commands of one job together: a terminal's job control then applies to the
   * command with this process (Ctrl-Z stops both, `fg`/`bg` continue both, a read from the
   * background is stopped by SIGTTIN). That group is this process's, so it is never signalled: the
   * tree is signalled by pid (containment 'process-group' becomes 'none'; a cgroup still holds it).
   * Default false. Not with mode 'pty', whose terminal is the command's own.
   */
  inheritGroup?: boolean;
  timeoutMs?: number;
  noOutputTimeoutMs?: number;
  graceMs?: number;
  /** The graceful signal a termination sends first: a name ('SIGTERM', the default) or a number. */
  killSignal?: NodeJS.Signals | number;
  /**
   * After the tree is gone (or kept), how long stdio may stay open with nothing coming through
   * before it is let go: output arriving starts the window again. Default 500 ms.
   */
  drainMs?: number;
  /** The longest the whole drain may last, however much output keeps arriving. Default 5000 ms (at least drainMs). */
  drainMaxMs?: number;
  signal?: AbortSignal;
  containment?: ContainmentMode;
  /**
   * What becomes of the processes the command leaves when it exits on its own: `'kill'` (default)
   * ends them at once; `'keep'` lets them go (they are no longer the run's); `'hold'` keeps them the
   * run's (state 'holding', guarded like any run) until they end by themselves, or `cancel()`,
   * `kill()`, the abort signal, `cancelScope()`, `replaceScope`, `shutdown()` or `holdMs` ends them.
   * `commandEnded` settles at the command's exit; `result` when the leftovers are gone.
   */
  leftovers?: 'kill' | 'keep' | 'hold';
  /**
   * With `leftovers: 'hold'`: end the leftovers (gracefully) after they have been held this long.
   * Default 0: no limit. `timeoutMs` and `noOutputTimeoutMs` bound the command alone, not a hold.
   */
  holdMs?: number;
  /**
   * Linux: how much more likely the OOM killer is to pick the run's processes than this process.
   * A number from 0 to 2000 is added to this process's own `oom_score_adj` (read at `spawn()`),
   * capped at 1000, and the command starts with that value, so everything it forks inherits it.
   * Raising a score needs no privilege. `false` leaves the host's value. Default: 500. The default
   * that cannot be applied (a read-only /proc) is a note in the result; a number given explicitly
   * that cannot be is an error (OOM_SCORE_UNAVAILABLE at spawn(), or the command does not run and
   * exits 125). Elsewhere than on Linux nothing is changed (an explicit number adds a note).
   */
  oomScoreAdj?: number | false;
  scope?: string;
  replaceScope?: boolean;
  output?: OutputOptions;
  pty?: PtyOptions;
}

export interface RunStdin {
  /**
   * False when the input waiting to be taken is above the high-water mark (or the input is over):
   * write more after 'drain', as with a Writable. What is written anyway is still queued.
   */
  write(data: string | Uint8Array): boolean;
  /**
   * False once the input is over: end() was called, the run ended, or the command closed its
   * stdin (in pipe mode seen at the next write after it). What is written then is dropped.
   */
  readonly writable: boolean;
  end(): void;
  /**
   * 'drain': the input a false write() left waiting has been taken, or dropped (the command closed
   * its stdin, the run ended, or the input was already over): every false write() is followed by
   * one, so a writer waiting for it never waits forever. Check `writable` to know which.
   */
  once(event: 'drain', listener: () => void): this;
  on(event: 'drain', listener: () => void): this;
  off(event: 'drain', listener: () => void): this;
}

export interface CancelOptions {
  /**
   * The graceful signal for this cancel, e.g. the SIGINT a CLI received and passes on. A member
   * that ignores it (a shell's background jobs ignore SIGINT and SIGQUIT) gets the run's
   * `killSignal` instead, by its pid, once no member that heeds it is left (a parent that catches
   * it may be ending its workers itself), where the process table can tell (Linux); see `ifIgnored`.
   */
  signal?: NodeJS.Signals | number;
  /**
   * What a member that ignores `signal` gets: `'kill-signal'` (default) as above, or `'nothing'`:
   * it waits out the grace, then SIGKILL, as coreutils `timeout` passes a signal on (a `nohup`ed
   * command keeps ignoring SIGHUP).
   */
  ifIgnored?: 'kill-signal' | 'nothing';
}

export interface RunHandle {
  readonly id: string;
  readonly pid: number | undefined;
  readonly state: RunState;
  readonly containment: UsedContainment;
  readonly stdin: RunStdin | undefined;
  /**
   * Ends the tree gracefully (reason 'cancelled'); idempotent, the first reason wins. With
   * `signal`, the tree gets that signal instead of the run's `killSignal` (the grace is the same).
   * Called again with a `signal` while the tree ends, it sends that signal too, to every member
   * still alive; the reason, the grace and its SIGKILL stand (SIGKILL itself is kill()).
   */
  cancel(reason?: string, options?: CancelOptions): void;
  kill(): void;
  /**
   * Mode 'pty': the terminal's new size in cells (the program gets SIGWINCH); a no-op once the run
   * has exited. Throws NOT_A_PTY in mode 'child' (pipes have no size), INVALID_OPTION for a bad size.
   */
  resize(cols: number, rows: number): void;
  /**
   * Resolves as soon as the command itself is gone (it exited, was killed, could not be started,
   * or the run ended before it started), before the rest of its tree is ended and its pipes are
   * drained, which `result` waits for. Never rejects.
   */
  readonly commandEnded: Promise<CommandEnd>;
  readonly result: Promise<RunResult>;
}

/** The command's own end, as first heard (see RunHandle.commandEnded). */
export interface CommandEnd {
  /** The run's reason at that moment: 'exit' or 'signal' for an end of its own, else why procwarden stopped it. */
  reason: RunReason;
  detail?: string;
  exitCode: number | null;
  exitSignal: string | null;
  /** When the command could not be started: as in the result. */
  error?: { code: string; message: string };
}

export interface StreamCapture {
  text: string;
  /** Total bytes the stream produced (captured or not). */
  bytes: number;
  truncated: boolean;
}

export interface SignalEvent {
  signal: string;
  /** Milliseconds since the termination sequence started. */
  atMs: number;
}

export type MemberOutcome = 'gone-before-signal' | 'exited-in-grace' | 'killed' | 'escaped';

export interface MemberReport {
  pid: number;
  command: string;
  signals: SignalEvent[];
  outcome: MemberOutcome;
}

export interface TerminateReport {
  /** Every process that was part of the tree when a signal was sent. */
  members: MemberReport[];
  signalled: number;
  killed: number;
  escaped: number;
  /** SIGKILL was needed for at least one member. */
  escalated: boolean;
  durationMs: number;
  /** Milliseconds from the first signal to SIGKILL, when SIGKILL was sent. */
  graceUsedMs: number | null;
  /** Things that went wrong but did not stop the sequence (EPERM, vanished entries...). */
  notes: string[];
}

export interface TreeSummary {
  signalled: number;
  killed: number;
  escaped: number;
  /** Members still alive after the direct child exited normally. */
  leftovers: number;
  /** With `leftovers: 'hold'`, when leftovers were held: what ended them, and how long they were held. */
  held?: { endedBy: HoldEnd; detail?: string; heldMs: number };
  report: TerminateReport | null;
  /**
   * What went wrong around the tree, on any ending (a cgroup that could not be removed after a
   * normal exit too): `report.notes` when there is a report, the same array.
   */
  notes: string[];
}

export interface RunResult {
  id: string;
  reason: RunReason;
  /** Free-form reason given to cancel(reason). */
  detail?: string;
  exitCode: number | null;
  exitSignal: string | null;
  timedOut: boolean;
  escalated: boolean;
  durationMs: number;
  containment: UsedContainment;
  /** Why the requested containment was not used, when it fell back. */
  containmentFallback?: string;
  stdout: StreamCapture;
  stderr: StreamCapture;
  tree: TreeSummary;
  /**
   * What went wrong without stopping the run, whatever way it ended: a failing file sink, a
   * throwing onData / onBytes, bookkeeping errors, and the termination's notes when there was one.
   */
  notes: string[];
  error?: { code: string; message: string };
}

export interface SupervisorOptions {
  clock?: Clock;
  /** Defaults for every spec this supervisor spawns. */
  defaults?: Partial<
    Pick<
      RunSpec,
      | 'graceMs'
      | 'killSignal'
      | 'drainMs'
      | 'drainMaxMs'
      | 'containment'
      | 'leftovers'
      | 'holdMs'
      | 'oomScoreAdj'
    >
  >;
  /** How many exited runs `get` / `list` / `read` remember; the oldest are forgotten first. Default 2000. */
  maxExited?: number;
  /** Characters of combined output kept per run for `read`; the oldest are dropped first. Default 65536. */
  logChars?: number;
  /** Record every run on disk for crash recovery (`reap`). Default true. */
  journal?: boolean;
  /** Where records live. Default: PROCWARDEN_STATE_DIR, $XDG_STATE_HOME/procwarden, ~/.local/state/procwarden. */
  stateDir?: string;
  /**
   * Guard the runs with this process's host guard (one small process for all its supervisors,
   * started before the first run's process): if this process dies without ending them (SIGKILL,
   * OOM kill, uncaught exception, process.exit), it ends every tree still held, gracefully, from the
   * journal. Needs the journal. Default true, unless PROCWARDEN_WATCHDOG=0 is in the environment
   * (a value other than 0, 1 or empty throws INVALID_ENV when this option is not given); with it, a
   * spawn() that cannot have a guard throws GUARD_UNAVAILABLE.
   */
  watchdog?: boolean;
  /** Reap the orphans of dead supervisors in the background when this one is created. Default false. */
  reconcileOnStart?: boolean;
}

/** What the registry knows about one run, live or exited. */
export interface RunInfo {
  id: string;
  command: string[];
  pid: number | null;
  /** The run's own process group; null when it has none (containment 'none', or a cgroup). */
  pgid: number | null;
  cgroupPath: string | null;
  containment: UsedContainment;
  state: RunState;
  /** Why it is stopping or ended; null while it runs undisturbed. The first reason wins. */
  reason: RunReason | null;
  exitCode: number | null;
  exitSignal: string | null;
  scope: string | null;
  /** Epoch milliseconds. */
  startedAt: number;
  endedAt: number | null;
  lastOutputAt: number | null;
  /** State 'holding': the leftovers held, as last seen (refreshed while they are watched). */
  held?: Array<{ pid: number; command: string }>;
}

export interface RunFilter {
  scope?: string;
  state?: RunState | readonly RunState[];
}

/** A poll of a run: its state and the output since a cursor. */
export interface RunRead {
  id: string;
  state: RunState;
  reason: RunReason | null;
  exitCode: number | null;
  exitSignal: string | null;
  /** Combined stdout and stderr (or the terminal) after `since`, as far as the bounded log kept it. */
  text: string;
  /** Pass as `since` next time. */
  cursor: number;
  /** Characters after `since` that were dropped from the log before this read (0: nothing missed). */
  dropped: number;
}

export interface ShutdownOptions {
  /** One grace window for every run: whatever is alive when it ends gets SIGKILL. Default: each run's own grace. */
  graceMs?: number;
}

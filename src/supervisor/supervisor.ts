import { type Clock, realClock } from '../clock.js';
import { CgroupHost } from '../containment/index.js';
import { describeThrown, ProcwardenError, showValue } from '../errors.js';
import { checkStateDir, defaultStateDir, Journal, type ReapReport, reap } from '../journal/index.js';
import type { SendSignal } from '../kill/index.js';
import {
  checkDuration,
  checkOptions,
  checkSwitch,
  type NormalSpec,
  normalizeSpec,
  watchdogFromEnv,
} from '../options/index.js';
import {
  createPtyLauncher,
  type Launcher,
  launchChild,
  type OomScoreHost,
  type OomScorePlan,
  planOomScore,
} from '../spawn/index.js';
import { CoalescingTable, type ProcessTable, platformTable } from '../tree/index.js';
import type {
  RunFilter,
  RunHandle,
  RunInfo,
  RunMode,
  RunRead,
  RunResult,
  RunSpec,
  ShutdownOptions,
  SupervisorOptions,
} from '../types.js';
import { type HostGuard, hostGuard } from '../watchdog/guard.js';
import { RunJournal } from './journaling.js';
import { armExit, disarmExit, killLiveRunsNow } from './last-resort.js';
import { ManagedRun } from './managed-run.js';
import { checkCursor, DEFAULT_MAX_EXITED, describe, type RegistryEntry, RunRegistry } from './registry.js';
import { RunLog } from './run-log.js';
import { cancelRuns } from './scopes.js';
import { installSignalHandlers, type SignalHandlerOptions } from './signals.js';

/** Seams for tests and other platforms; not part of the stable contract. */
export interface SupervisorInternals {
  table?: ProcessTable;
  send?: SendSignal;
  /** Where cgroup containment is probed and its cgroups are made (one per supervisor by default). */
  cgroups?: CgroupHost;
  launchers?: Partial<Record<RunMode, Launcher>>;
  /** A guard of its own (tests); by default the process's one. */
  guard?: HostGuard;
  /** Where this process's OOM score is read (tests: a /proc that cannot be read or written). */
  oomScoreHost?: OomScoreHost;
}

const DEFAULT_LOG_CHARS = 65_536;
const MAX_LOG_CHARS = 256 * 1024 * 1024;

/** What RunJournal.end reads of the result of a run that never started: nothing escaped. */
const NOTHING_STARTED = { tree: { escaped: 0 } } as RunResult;

/**
 * Owns runs: spawns them, knows every one (live, and recently exited), groups them in scopes,
 * journals them for crash recovery, and can stop them all.
 */
export class Supervisor {
  /**
   * Unique on this machine: it prefixes run ids, which are also the runs' environment cookies. The
   * pid makes it unique among live processes, the random part among supervisors of one process
   * and across pid reuse. Nothing rests on it being unguessable (a process that copies a cookie
   * only makes itself a member), so Math.random serves, and node:crypto stays unloaded.
   */
  readonly id = `pw${process.pid.toString(36)}${Math.floor(Math.random() * 0x1000000)
    .toString(16)
    .padStart(6, '0')}`;
  /** With `reconcileOnStart`: the report of the reap that ran when this supervisor was created. */
  readonly reconciled: Promise<ReapReport> | undefined;
  private readonly clock: Clock;
  private readonly table: ProcessTable;
  private readonly send: SendSignal | undefined;
  private readonly cgroups: CgroupHost;
  private readonly oomScoreHost: OomScoreHost | undefined;
  private readonly launchers: Record<RunMode, Launcher>;
  private readonly defaults: SupervisorOptions['defaults'];
  private readonly registry: RunRegistry;
  private readonly logChars: number;
  private readonly journal: RunJournal | null;
  private readonly stateDir: string;
  /** This process's guard (one for all its supervisors), or null when runs go unguarded. */
  private readonly guard: HostGuard | null;
  /** The runs this supervisor holds the guard busy for, until their records are gone. */
  private readonly guarding = new Set<string>();
  /**
   * With the guard alive, the host's exit is its cue: it ends the trees gracefully, not blunt. It
   * can only end what it can read: a run whose record could not be written anywhere is killed
   * here, as is every run when the guard is dead or stopped (its death may not have been delivered
   * to us yet).
   */
  private readonly onHostExit = () => {
    const live = this.registry.liveRuns();
    const guarded = this.guard?.alive() === true;
    killLiveRunsNow(guarded ? live.filter((run) => !this.journal?.recorded(run)) : live);
  };
  private readonly recordRun = (run: ManagedRun) => this.journal?.begin(run);
  /** Its cgroup could not be made: nothing was started, and the record goes. */
  private readonly unrecordRun = (run: ManagedRun) => this.journal?.end(run, NOTHING_STARTED);
  private exitHookArmed = false;
  private closing: Promise<RunResult[]> | undefined;
  private counter = 0;

  constructor(options?: SupervisorOptions);
  /**
   * With the seams (tests, the benches). Stripped from the published types: the one above is the
   * public API, and these seams' types (process tables, launchers, guards) are internal.
   * @internal
   */
  constructor(options?: SupervisorOptions & SupervisorInternals);
  constructor(options: SupervisorOptions & SupervisorInternals = {}) {
    checkSupervisorOptions(options);
    this.clock = options.clock ?? realClock;
    this.table = options.table ?? shareScans(platformTable());
    this.send = options.send;
    this.cgroups = options.cgroups ?? new CgroupHost();
    this.oomScoreHost = options.oomScoreHost;
    this.defaults = checkDefaults(options.defaults);
    this.launchers = { child: launchChild, pty: createPtyLauncher(), ...options.launchers };
    this.registry = new RunRegistry(count(options.maxExited, 'maxExited', DEFAULT_MAX_EXITED));
    this.logChars = count(options.logChars, 'logChars', DEFAULT_LOG_CHARS);
    // read() returns the log as one string: past V8's longest (2^29 - 24 characters) it would throw.
    if (this.logChars > MAX_LOG_CHARS) {
      throw new ProcwardenError(
        'INVALID_OPTION',
        `logChars: ${this.logChars} is more than one read can return (${MAX_LOG_CHARS} characters); keep a smaller log and read it more often, or stream the output with onData, onBytes or file.`,
      );
    }
    this.stateDir = options.stateDir === undefined ? defaultStateDir() : checkStateDir(options.stateDir);
    // The guard reaps from the journal: without one it would have nothing to go by.
    const watchdog = options.watchdog ?? watchdogFromEnv(process.env);
    this.guard = watchdog && options.journal !== false ? (options.guard ?? hostGuard()) : null;
    const guard = this.guard;
    guard?.warmSoon();
    this.journal =
      options.journal === false
        ? null
        : new RunJournal(
            new Journal(this.stateDir),
            this.table,
            this.id,
            (dir) => guard?.addStateDir(dir),
            (problem) => warnUnrecorded(problem),
          );
    if (options.reconcileOnStart) {
      // Nobody may be awaiting it: it must never reject.
      this.reconciled = this.reconcileOrphans().catch(
        (error): ReapReport => ({
          stateDir: this.stateDir,
          dryRun: false,
          runs: [],
          skipped: [
            {
              file: this.stateDir,
              problem: `reap failed: ${describeThrown(error)}`,
              kind: 'unreadable',
            },
          ],
          survivors: 0,
        }),
      );
    }
  }

  /** Validates the spec (throws ProcwardenError on bad input, before anything starts) and starts it. */
  spawn(spec: RunSpec): RunHandle {
    if (this.closing) {
      throw new ProcwardenError(
        'SUPERVISOR_CLOSED',
        'this supervisor has shut down and starts no more runs; create a new Supervisor.',
      );
    }
    const id = `${this.id}-${++this.counter}`;
    const normal = normalizeSpec(spec, id, this.defaults);
    const launcher = this.launchers[normal.mode];
    launcher.preflight?.();
    // From this process's score now (a run that waits for its scope starts with it too); an
    // explicit setting that cannot be applied throws here, before anything exists.
    const oomScore = planOomScore(normal.oomScoreAdj, this.oomScoreHost);
    this.holdGuard(id, normal.inheritFds);
    let run: ManagedRun;
    let earlier: ManagedRun[];
    let log: RunLog;
    try {
      log = new RunLog(this.logChars);
      earlier =
        // A run aborted before it was asked for never starts: it replaces nothing.
        normal.scope !== undefined && normal.replaceScope && !normal.signal?.aborted
          ? this.registry.liveInScope(normal.scope)
          : [];
      run = this.makeRun(id, normal, launcher, log, earlier, oomScore);
    } catch (error) {
      this.releaseGuard(id);
      throw error;
    }
    const entry: RegistryEntry = { run, log, scope: normal.scope ?? null, result: null, endedAt: null };
    this.registry.add(entry);
    this.armExitHook();
    if (earlier.length === 0) this.launch(run);
    else {
      // The new run stays 'starting' until the trees it replaces are extinct.
      const launch = () => this.launch(run);
      cancelRuns(earlier, `replaced by ${id}`).then(launch, launch);
    }
    return run;
  }

  private makeRun(
    id: string,
    normal: NormalSpec,
    launcher: Launcher,
    log: RunLog,
    earlier: readonly ManagedRun[],
    oomScore: OomScorePlan,
  ): ManagedRun {
    return new ManagedRun(id, normal, {
      startsLater: earlier.length > 0,
      oomScore,
      log,
      clock: this.clock,
      table: this.table,
      send: this.send,
      cgroups: this.cgroups,
      launcher,
      onSettled: (r: ManagedRun, result: RunResult) => this.settled(r, result),
      // Written while the run is made, before its cgroup exists: from then on a host that dies
      // (while the run waits for the runs it replaces, too) leaves nothing no record names.
      ...(this.journal ? { record: this.recordRun, unrecord: this.unrecordRun } : {}),
      ...(this.journal ? { onStopping: this.journal.stopping.bind(this.journal) } : {}),
    });
  }

  /** What the registry knows of a run (live, or among the most recent exited); undefined if none. */
  get(id: string): RunInfo | undefined {
    const entry = this.registry.entry(id);
    return entry && describe(entry);
  }

  /** The live handle of a run, to cancel, kill or write to it; undefined once it is forgotten. */
  handle(id: string): RunHandle | undefined {
    return this.registry.entry(id)?.run;
  }

  /** Runs known to this supervisor, oldest first, optionally of one scope and/or in given states. */
  list(filter?: RunFilter): RunInfo[] {
    if (filter === null)
      throw new ProcwardenError(
        'INVALID_OPTION',
        "list's filter must be an object, e.g. { scope: 'build' }.",
      );
    checkOptions(filter, ['scope', 'state'], 'list', "{ scope: 'build' }");
    if (filter?.scope !== undefined && typeof filter.scope !== 'string')
      throw new ProcwardenError(
        'INVALID_OPTION',
        `list's scope must be a string; got ${typeof filter.scope}.`,
      );
    return this.registry.list(filter);
  }

  /** Runs that have not settled yet. */
  running(): RunHandle[] {
    return this.registry.liveRuns();
  }

  /**
   * Polls a run: its state, and its output after `since` (a cursor from the previous read; 0 or
   * omitted: from the start). When the bounded log dropped output the caller had not seen,
   * `dropped` says how many characters.
   */
  read(id: string, options: { since?: number } = {}): RunRead {
    if (typeof options !== 'object' || options === null)
      throw new ProcwardenError(
        'INVALID_OPTION',
        "read's options must be an object, e.g. { since: cursor }.",
      );
    checkOptions(options, ['since'], 'read', '{ since: cursor }');
    const entry = this.registry.entry(id);
    if (!entry) {
      throw new ProcwardenError(
        'UNKNOWN_RUN',
        `no run ${showValue(id)} in this supervisor; it never existed or was forgotten (see maxExited).`,
      );
    }
    const info = describe(entry);
    return {
      id,
      state: info.state,
      reason: info.reason,
      exitCode: info.exitCode,
      exitSignal: info.exitSignal,
      ...entry.log.read(checkCursor(options.since)),
    };
  }

  /** Cancels a scope's live runs and resolves when their trees are extinct. */
  cancelScope(scope: string, reason = 'cancelScope'): Promise<RunResult[]> {
    // A scope that is no string matches no run: a mistake that would cancel nothing, silently.
    if (typeof scope !== 'string')
      throw new ProcwardenError(
        'INVALID_OPTION',
        `cancelScope's scope must be the string the runs were given as spec.scope; got ${showValue(scope)}.`,
      );
    return cancelRuns(this.registry.liveInScope(scope), reason);
  }

  /** Cancels every live run gracefully and resolves when all have settled. */
  async cancelAll(reason = 'cancelAll'): Promise<RunResult[]> {
    return cancelRuns(this.registry.liveRuns(), reason);
  }

  /** Ends every grace in progress and SIGKILLs every live tree now. */
  killAll(): void {
    for (const run of this.registry.liveRuns()) run.kill();
  }

  /**
   * Stops every run at once (reason 'shutdown'), each tree-wide and in parallel, and resolves when
   * all are extinct. With `graceMs`, that one window bounds every run's grace. Afterwards `spawn`
   * throws SUPERVISOR_CLOSED. Calling it again returns the same promise.
   */
  shutdown(options: ShutdownOptions = {}): Promise<RunResult[]> {
    if (this.closing) return this.closing;
    // Checked before anything stops: a NaN window would SIGKILL every tree at once.
    if (options === null)
      throw new ProcwardenError(
        'INVALID_OPTION',
        'shutdown takes an options object ({ graceMs }), or nothing.',
      );
    checkOptions(options, ['graceMs'], 'shutdown', '{ graceMs }');
    if (options.graceMs !== undefined) checkDuration(options.graceMs, 'shutdown graceMs');
    this.closing = this.stopEverything(options);
    return this.closing;
  }

  /**
   * Opt-in: SIGINT / SIGTERM (or `options.signals`) to this process run `shutdown` of every
   * supervisor that installed handlers; once all are over, the process exits with 128 + N.
   * Returns a function that removes the handlers.
   */
  installSignalHandlers(options: SignalHandlerOptions = {}): () => void {
    return installSignalHandlers(this, options);
  }

  /** Reaps the orphans of dead supervisors journalled in this supervisor's state directory. */
  reconcileOrphans(options: { dryRun?: boolean; graceMs?: number } = {}): Promise<ReapReport> {
    return reap({
      ...options,
      stateDir: this.stateDir,
      table: this.table,
      send: this.send,
      clock: this.clock,
    });
  }

  /**
   * What costs (or cost) runs their crash recovery: records that went to a fallback directory or
   * nowhere, a guard that was lost (and replaced) or could not start. Empty when all went well.
   */
  get problems(): readonly string[] {
    const problem = this.guard?.problem;
    return [...(this.journal?.problems ?? []), ...(problem ? [problem] : [])];
  }

  /** The same as `problems` (its earlier name). */
  get journalProblems(): readonly string[] {
    return this.problems;
  }

  /**
   * The pid of this process's guard (shared by its supervisors) once it has started (on the turn
   * after the first Supervisor is made, or in the first spawn); undefined when runs go unguarded.
   */
  get watchdogPid(): number | undefined {
    return this.guard?.pid;
  }

  /**
   * The guard is busy before the run's record is written and its process exists. A descriptor
   * passed on must not be the guard's pipe: a run holding it would keep the guard from ever
   * seeing the host die. Throws before anything was started.
   */
  private holdGuard(id: string, inheritFds: readonly number[]): void {
    const guard = this.guard;
    if (!guard || !this.journal) return;
    guard.acquire(this.journal.dir);
    this.guarding.add(id);
    const fd = inheritFds.find((n) => guard.ownsFd(n));
    if (fd !== undefined) {
      this.releaseGuard(id);
      throw new ProcwardenError(
        'INVALID_OPTION',
        `inheritFds: ${fd} is procwarden's own pipe to its host guard; a run holding it would keep the guard from seeing this process die. Pass only descriptors you opened.`,
      );
    }
  }

  private releaseGuard(id: string): void {
    if (this.guarding.delete(id)) this.guard?.release();
  }

  private launch(run: ManagedRun): void {
    if (run.state === 'exited') return; // cancelled while it waited for its scope
    run.start();
    this.journal?.launched(run);
  }

  private settled(run: ManagedRun, result: RunResult): void {
    if (!this.registry.finalize(run.id, result)) return;
    // A record kept for a later reap keeps the guard busy: the host's death is its cue to reap it.
    if (!this.journal?.end(run, result)) this.releaseGuard(run.id);
    if (this.registry.liveCount() === 0) this.disarmExitHook();
  }

  private async stopEverything({ graceMs }: ShutdownOptions): Promise<RunResult[]> {
    const runs = this.registry.liveRuns();
    for (const run of runs) run.stop('shutdown', 'supervisor shutdown');
    const deadline =
      graceMs === undefined
        ? undefined
        : this.clock.setTimeout(() => {
            for (const run of runs) run.kill();
          }, graceMs);
    const results = await Promise.all(runs.map((r) => r.result));
    if (deadline !== undefined) this.clock.clearTimeout(deadline);
    return results;
  }

  /** A process 'exit' listener only while runs are live: many idle supervisors cost nothing. */
  private armExitHook(): void {
    if (this.exitHookArmed) return;
    this.exitHookArmed = true;
    armExit(this.onHostExit);
  }

  private disarmExitHook(): void {
    if (!this.exitHookArmed) return;
    this.exitHookArmed = false;
    disarmExit(this.onHostExit);
  }
}

let warnedUnrecorded = false;

/** Once per process: a run without a record anywhere is unguarded, and a user must hear of it. */
function warnUnrecorded(problem: string): void {
  if (warnedUnrecorded) return;
  warnedUnrecorded = true;
  process.emitWarning(new ProcwardenError('NOT_JOURNALLED', problem));
}

const DEFAULT_KEYS = new Set([
  'graceMs',
  'killSignal',
  'drainMs',
  'drainMaxMs',
  'containment',
  'leftovers',
  'holdMs',
  'oomScoreAdj',
]);

/** The defaults are checked when the supervisor is made, not at its first spawn. */
function checkDefaults(defaults: SupervisorOptions['defaults']): SupervisorOptions['defaults'] {
  if (defaults === undefined) return undefined;
  if (typeof defaults !== 'object' || defaults === null || Array.isArray(defaults)) {
    throw new ProcwardenError('INVALID_OPTION', 'defaults must be an object, e.g. { graceMs: 2000 }.');
  }
  for (const key of Object.keys(defaults)) {
    if (!DEFAULT_KEYS.has(key)) {
      throw new ProcwardenError(
        'INVALID_OPTION',
        `defaults has the field ${showValue(key)}; a supervisor's defaults may set ${[...DEFAULT_KEYS].join(', ')}.`,
      );
    }
  }
  // Each value as a spec would give it; a copy, so that a later change by the caller is not seen.
  const copy = { ...defaults };
  normalizeSpec({ argv: ['true'] }, 'defaults-check', copy);
  return copy;
}

function count(value: number | undefined, what: string, fallback: number): number {
  if (value === undefined) return fallback;
  if (!Number.isInteger(value) || value < 0) {
    throw new ProcwardenError(
      'INVALID_OPTION',
      `${what} must be a whole number ≥ 0, got ${showValue(value)}.`,
    );
  }
  return value;
}

/**
 * Concurrent sequences share full scans where a scan reads every process's environment (procfs);
 * tables without that cost (ps, PowerShell) are used as they are, and keep their own identity.
 */
function shareScans(table: ProcessTable): ProcessTable {
  return table.findByEnv ? new CoalescingTable(table) : table;
}

const OPTION_KEYS = [
  'clock',
  'defaults',
  'maxExited',
  'logChars',
  'journal',
  'stateDir',
  'watchdog',
  'reconcileOnStart',
  'table',
  'send',
  'cgroups',
  'launchers',
  'guard',
  'oomScoreHost',
];

/** Misspelt or mistyped options are refused, as a run spec's are: `{ watchdog: 'no' }` is not false. */
function checkSupervisorOptions(options: unknown): void {
  if (typeof options !== 'object' || options === null) {
    throw new ProcwardenError(
      'INVALID_OPTION',
      `Supervisor options must be an object, e.g. { maxExited: 100 }; got ${showValue(options)}.`,
    );
  }
  for (const key of Object.keys(options)) {
    if (!OPTION_KEYS.includes(key))
      throw new ProcwardenError(
        'INVALID_OPTION',
        `unknown Supervisor option ${JSON.stringify(key)}; check its spelling.`,
      );
  }
  const record = options as Record<string, unknown>;
  for (const key of ['journal', 'watchdog', 'reconcileOnStart']) checkSwitch(record[key], key);
}

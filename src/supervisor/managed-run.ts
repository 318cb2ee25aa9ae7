import { readFileSync } from 'node:fs';
import { whenAborted } from '../abort-watch.js';
import { type Clock, nextTurn, type TimerHandle, within } from '../clock.js';
import {
  type CgroupHost,
  type Containment,
  createContainment,
  shimUnfaithful,
  throughShim,
} from '../containment/index.js';
import { describeThrown, ProcwardenError } from '../errors.js';
import { MAX_SIGNALLED, type StoppingRecord } from '../journal/index.js';
import { type ChildHandle, type Members, type SendSignal, terminate } from '../kill/index.js';
import {
  checkOptions,
  checkPtyCells,
  cwdProblem,
  type NormalSpec,
  normalizeSignal,
  oneOf,
  realtimeNumber,
} from '../options/index.js';
import { OutputCollector, type TextLog } from '../output/index.js';
import type { Launched, Launcher, OomScorePlan } from '../spawn/index.js';
import { type ProcessInfo, type ProcessTable, parseStat, ticksNow } from '../tree/index.js';
import type {
  CancelOptions,
  CommandEnd,
  HoldEnd,
  RunHandle,
  RunReason,
  RunResult,
  RunState,
  RunStdin,
  StreamName,
  TerminateReport,
  UsedContainment,
} from '../types.js';
import { drainOutput } from './drain.js';
import { LeftoverHold } from './held-leftovers.js';
import { PendingInput } from './pending-input.js';
import { spawnMessage } from './spawn-message.js';

/** How late a deadline's timer may run and still vouch for an exit it finds already happened. */
const DEADLINE_SLACK_MS = 25;

export interface RunDeps {
  clock: Clock;
  /** The command's OOM score, as planned at spawn(): what its shim writes, or why nothing is. */
  oomScore?: OomScorePlan;
  table: ProcessTable;
  send?: SendSignal;
  cgroups?: CgroupHost;
  launcher: Launcher;
  onSettled?: (run: ManagedRun, result: RunResult) => void;
  /**
   * Writes the run's journal record: once, from the constructor, and before the run's cgroup
   * exists (a host killed between the two would leave a cgroup that no record names).
   */
  record?: (run: ManagedRun) => void;
  /** The record was written and the run could not be made after all: it goes. */
  unrecord?: (run: ManagedRun) => void;
  /** The termination's first signal went out (see RunJournal.stopping). */
  onStopping?: (run: ManagedRun, stopping: StoppingRecord) => void;
  /** The run's log for polling (Supervisor.read): its text, in arrival order. */
  log?: TextLog;
  /**
   * The run waits to start (it replaces a scope's runs): what belongs to its command alone, its
   * output.file, is opened when it starts, not while the runs it replaces still write there.
   */
  startsLater?: boolean;
}

/**
 * One run's life: launch, watch (timeouts, abort, output), one termination sequence whatever the
 * reason, leftovers, bounded drain, one result. Every path ends in `finish()`, exactly once.
 */
export class ManagedRun implements RunHandle {
  readonly result: Promise<RunResult>;
  readonly commandEnded: Promise<CommandEnd>;
  private resolveCommandEnded!: (end: CommandEnd) => void;
  readonly containment: UsedContainment;
  readonly startedAt = Date.now();
  lastOutputAt: number | null = null;

  private resolveResult!: (r: RunResult) => void;
  private readonly hold: Containment;
  /** The run's cgroup, named before it is created (see RunDeps.record). */
  private plannedCgroup: string | undefined;
  private recorded = false;
  private readonly output: OutputCollector;
  private launched: Launched | undefined;
  private leadsGroup = false;
  private attached: Promise<void> = Promise.resolve();
  private status: RunState = 'starting';
  private begun = false;
  private reason: RunReason | undefined;
  private detail: string | undefined;
  private exit: { code: number | null; signal: NodeJS.Signals | null } | undefined;
  private exitSeen!: () => void;
  private readonly exited = new Promise<void>((resolve) => {
    this.exitSeen = resolve;
  });
  private spawnError: NodeJS.ErrnoException | undefined;
  private spawnErrorShown: { code: string; message: string } | undefined;
  private termination: Promise<TerminateReport> | undefined;
  /** While the termination's grace runs: sends another signal to the tree (see cancel()). */
  private repeat: ((signal: NodeJS.Signals) => Promise<void>) | null = null;
  /** Asked for before the grace began; null once it is over (SIGKILL has nothing to wait for). */
  private repeatQueue: Set<NodeJS.Signals> | null = new Set();
  private repeating: Promise<void> = Promise.resolve();
  private readonly repeatsWaiting = new Set<NodeJS.Signals>();
  /** The first real-time signal this run sent (see noteRealtime). */
  private realtimeSent: NodeJS.Signals | undefined;
  /** Aborted by kill(): a graceful sequence under way ends its grace at once. */
  private readonly escalation = new AbortController();
  private settling = false;
  private leftovers = 0;
  /** The look for leftovers could not rule out one it missed (see Members.unconfirmed). */
  private leftoversUnsure = false;
  /** leftovers: 'hold': what the run holds once its command has exited. */
  private readonly held: LeftoverHold | undefined;
  /** A stop that ended the hold before it began: the signal the look's termination starts with. */
  private unheldSignal: NodeJS.Signals | undefined;
  private unverified = false;
  /** When the launcher reported the exit (Unix ms, as Windows dates a process's creation). */
  private exitHeardAt: number | null = null;
  /** Whether a member that ignores a passed-on signal gets killSignal (CancelOptions.ifIgnored). */
  private substituteIgnored = true;
  private readonly notes: string[] = [];
  private readonly t0: number;
  /** When timeoutMs runs out (clock time): it bounds a slow consumer's wait after a natural end too. */
  private overallDeadline = Number.POSITIVE_INFINITY;
  private overallTimer: TimerHandle | undefined;
  private silenceTimer: TimerHandle | undefined;
  /** When the armed silence timer is due, and whether its check waits for the next turn. */
  private silenceDue = Number.POSITIVE_INFINITY;
  private silenceDeferred = false;
  private lastOutputTick: number;
  private readonly onAbort = () => this.stop('aborted', abortDetail(this.spec.signal));
  private stopAbortWatch: (() => void) | undefined;
  /** Set while the drain waits for a slow consumer after a natural end: cancel/kill stop that wait. */
  private stopWaiting: (() => void) | undefined;
  /** handle.stdin, when it was asked for before the command started (see PendingInput). */
  private pendingInput: PendingInput | undefined;

  /** The spec; once the run settled, without what only a live run needs (see release()). */
  get spec(): NormalSpec {
    return this.current;
  }

  constructor(
    readonly id: string,
    private current: NormalSpec,
    private readonly deps: RunDeps,
  ) {
    const spec = current;
    this.result = new Promise((resolve) => {
      this.resolveResult = resolve;
    });
    this.commandEnded = new Promise((resolve) => {
      this.resolveCommandEnded = resolve;
    });
    this.t0 = deps.clock.now();
    this.held = spec.leftovers === 'hold' ? new LeftoverHold(deps.clock, spec.holdMs) : undefined;
    this.lastOutputTick = this.t0;
    if (deps.oomScore?.note) this.notes.push(deps.oomScore.note);
    // Both can throw a ProcwardenError: they run before anything is spawned. Both hold a resource
    // (a file, a cgroup), so the second one failing releases the first.
    this.output = new OutputCollector({
      maxBytes: spec.maxBytes,
      onData: spec.onData,
      onBytes: spec.onBytes,
      file: spec.file,
      ...(deps.startsLater ? { openFileLater: true } : {}),
      ...(deps.log ? { log: deps.log } : {}),
    });
    try {
      this.hold = createContainment(spec.containment, {
        table: deps.table,
        send: deps.send,
        cookie: spec.cookie,
        inheritGroup: spec.inheritGroup,
        name: id,
        cgroups: deps.cgroups,
        beforeCgroup: (dir) => {
          this.plannedCgroup = dir;
          this.recordOnce();
        },
      });
    } catch (error) {
      this.output.finish();
      if (this.recorded) deps.unrecord?.(this);
      throw error;
    }
    this.recordOnce();
    this.containment = this.hold.kind;
    // From construction, not start: an abort while the run waits to start (replaceScope) ends it.
    if (spec.signal) this.stopAbortWatch = whenAborted(spec.signal, this.onAbort);
  }

  get pid(): number | undefined {
    return this.launched?.pid;
  }

  get state(): RunState {
    return this.status;
  }

  get stdin(): RunStdin | undefined {
    if (this.launched) return this.launched.stdin;
    // Waiting to start (replaceScope): input written meanwhile waits for the command.
    if (this.spec.stdin.kind !== 'pipe' || this.status !== 'starting') return undefined;
    this.pendingInput ??= new PendingInput();
    return this.pendingInput;
  }

  get stopReason(): RunReason | undefined {
    return this.reason;
  }

  /** The process group the run leads (it was started in a new session), else null. */
  get pgid(): number | null {
    return this.leadsGroup && this.launched?.pid !== undefined ? this.launched.pid : null;
  }

  /** Where the containment holds the run, when it is a cgroup. */
  get cgroupPath(): string | undefined {
    // Asked by the record written while the containment is being made: it does not exist yet.
    return this.hold === undefined ? this.plannedCgroup : this.hold.cgroupPath;
  }

  private recordOnce(): void {
    if (this.recorded) return;
    this.recorded = true;
    this.deps.record?.(this);
  }

  /**
   * The process table failed the run's end (its termination or its look for leftovers): what it
   * left behind is not known, so its record stays for a later reap to look again.
   */
  get treeUnverified(): boolean {
    return this.unverified;
  }

  /** The root and members the containment has seen, as recorded (see Containment.lastSeen). */
  lastSeen(): { root: ProcessInfo | null; members: ProcessInfo[] } {
    return this.hold.lastSeen();
  }

  start(): void {
    // Stopped while it waited to start (replaceScope, shutdown): it never launches.
    if (this.status === 'exited') return;
    this.begun = true;
    if (this.spec.signal?.aborted) {
      this.reason = 'aborted';
      this.detail = abortDetail(this.spec.signal);
      this.finish(null);
      return;
    }
    const [file, ...args] = this.spec.argv;
    try {
      // Inside the try: whatever fails before the command exists is its spawn error, and the run
      // settles (its journal record removed), never an exception out of spawn() with a run left live.
      this.output.openFile();
      // Checked again at launch: a run that waited (replaceScope) may find its cwd gone or closed,
      // and a PTY's fork or the cgroup shim's shell would report that as the command's failure.
      const cwd = this.spec.cwd === undefined ? null : cwdProblem(this.spec.cwd);
      if (cwd) throw Object.assign(new Error(cwd.message), { code: cwd.errno });
      const oomScore = this.deps.oomScore?.write;
      const held = this.hold.prepare({
        file,
        args,
        cwd: this.spec.cwd,
        env: this.spec.env,
        newSession: false,
        ...(oomScore ? { oomScore } : {}),
      });
      // The cgroup's shim sets the score too; elsewhere a shim does that alone (containment/shim.ts),
      // where the default gives way to a command the shim would start otherwise than the spawn.
      const unfaithful = held.oomScore && !held.oomScore.required ? shimUnfaithful(held) : null;
      if (unfaithful)
        this.notes.push(`oomScoreAdj: the command keeps this process's OOM score: ${unfaithful}`);
      const prepared =
        held.oomScore && !unfaithful ? throughShim(held, null) : { ...held, oomScore: undefined };
      // A cgroup holds the command wherever its group is: it may stay in ours (inheritGroup).
      const plan = this.spec.inheritGroup ? { ...prepared, newSession: false } : prepared;
      this.leadsGroup = plan.newSession;
      this.launched = this.deps.launcher(
        plan,
        {
          stdin: this.spec.stdin,
          inheritFds: this.spec.inheritFds,
          pty: this.spec.pty,
          output: this.spec.inheritOutput ? 'inherit' : 'pipe',
        },
        {
          spawned: () => {
            if (this.status === 'starting') this.status = 'running';
          },
          output: (stream, chunk) => this.onOutput(stream, chunk),
          exited: (code, signal) => this.onExit(code, signal),
          failed: (error) => this.onSpawnError(error),
        },
      );
    } catch (error) {
      this.onSpawnError(error as NodeJS.ErrnoException);
      return;
    }
    this.pendingInput?.attach(this.launched.stdin);
    const pid = this.launched.pid;
    if (pid === undefined) return; // the failure event follows
    const launched = this.launched;
    const child: ChildHandle = {
      kill: (signal) => launched.kill?.(signal) ?? false,
      // node-pty closes a ConPTY child's handle before it reports the exit: no bound from it.
      ...(this.spec.mode === 'child' ? { exitHeardAt: () => this.exitHeardAt } : {}),
    };
    this.attached = this.hold.attach(pid, child).catch((error) => {
      this.notes.push(`could not record the command's identity: ${describeThrown(error)}`);
    });
    const { clock } = this.deps;
    if (this.spec.timeoutMs > 0) {
      this.overallDeadline = clock.now() + this.spec.timeoutMs;
      this.overallTimer = clock.setTimeout(() => this.onOverallTimeout(), this.spec.timeoutMs);
    }
    if (this.spec.noOutputTimeoutMs > 0) this.armSilence(this.spec.noOutputTimeoutMs);
  }

  /**
   * The deadline came. A command that had exited just before it did not time out, even though its
   * exit is not heard yet: the loop runs expired timers before the poll that reads SIGCHLD. A
   * zombie (Linux: still our unreaped child, so the pid is its own) gets one more turn of the
   * loop, in which its exit comes in first.
   */
  private onOverallTimeout(): void {
    // A silence check put off by a turn (see armSilence) whose deadline came first goes first: a
    // command silent since before it is ended for its silence, not for the later deadline.
    if (this.silenceDeferred && this.silenceDue <= this.overallDeadline) {
      nextTurn().then(() => this.stop('overall-timeout'));
      return;
    }
    const pid = this.launched?.pid;
    // Only a timer that ran on time says the exit came before the deadline: one that ran late
    // (this process was busy) cannot tell an exit just before the deadline from one long after it.
    const onTime = this.deps.clock.now() - this.overallDeadline <= DEADLINE_SLACK_MS;
    if (onTime && pid !== undefined && this.exit === undefined && exitedUnheard(pid)) {
      nextTurn().then(() => this.stop('overall-timeout'));
      return;
    }
    this.stop('overall-timeout');
  }

  cancel(reason?: string, options?: CancelOptions): void {
    checkOptions(options, ['signal', 'ifIgnored'], 'cancel', "{ signal: 'SIGINT' }");
    const signal = options?.signal;
    const ifIgnored = oneOf(
      options?.ifIgnored,
      ['kill-signal', 'nothing'] as const,
      'cancel ifIgnored',
      'kill-signal',
    );
    if ((!this.reason || this.mayEndHold()) && this.status !== 'exited')
      this.substituteIgnored = ifIgnored === 'kill-signal';
    // A later cancel with a signal, while the tree ends: that signal too, to what is left of it.
    if (signal !== undefined && this.termination && this.status === 'stopping') {
      const again = normalizeSignal(signal);
      if (again === 'SIGKILL') this.kill();
      else if (this.repeat) this.signalAgain(again);
      // The first signal is still on its way (the scan before it): this one follows it.
      else this.repeatQueue?.add(again);
      return;
    }
    this.stop(
      'cancelled',
      // The result's detail is text: an Error given as the reason says its message.
      reason === undefined || typeof reason === 'string' ? reason : describeThrown(reason),
      signal === undefined ? undefined : normalizeSignal(signal),
    );
  }

  resize(cols: number, rows: number): void {
    if (this.spec.mode !== 'pty') {
      throw new ProcwardenError(
        'NOT_A_PTY',
        "resize() applies to runs started with mode: 'pty'; this run's output goes through pipes, which have no size.",
      );
    }
    checkPtyCells(cols, 'resize cols');
    checkPtyCells(rows, 'resize rows');
    if (this.status !== 'exited') this.launched?.resize?.(cols, rows);
  }

  kill(): void {
    this.quitWaiting();
    if (this.status === 'exited') return;
    if (this.mayEndHold()) {
      this.endHold('cancelled', 'kill()', 'SIGKILL');
      this.escalation.abort();
      return;
    }
    if (!this.reason) {
      this.reason = 'cancelled';
      this.detail = 'kill()';
    }
    this.escalation.abort();
    this.beginTermination('SIGKILL');
  }

  /**
   * Records the reason (the first one wins) and starts the termination sequence with `signal`
   * (default: the run's graceful signal).
   */
  stop(reason: RunReason, detail?: string, signal: NodeJS.Signals = this.spec.killSignal): void {
    this.quitWaiting();
    if (this.status === 'exited') return;
    // The command's own end stays the run's reason: what ends its held leftovers is the hold's.
    if (this.mayEndHold()) {
      this.endHold(reason === 'aborted' || reason === 'shutdown' ? reason : 'cancelled', detail, signal);
      return;
    }
    if (this.reason) return;
    this.reason = reason;
    this.detail = detail;
    this.beginTermination(signal);
  }

  /** One at a time, each scan after the last signal's: a caller repeating itself costs one of each. */
  private signalAgain(signal: NodeJS.Signals): void {
    this.noteRealtime(signal);
    if (this.repeatsWaiting.has(signal)) return;
    this.repeatsWaiting.add(signal);
    this.repeating = this.repeating.then(async () => {
      this.repeatsWaiting.delete(signal);
      try {
        await this.repeat?.(signal);
      } catch (error) {
        this.notes.push(`${signal} while the tree ended: ${describeThrown(error)}`);
      }
    });
  }

  private quitWaiting(): void {
    const quit = this.stopWaiting;
    this.stopWaiting = undefined;
    quit?.();
  }

  /**
   * Node reports a child killed by a signal it has no name for (a real-time one) as exit code 0,
   * no signal: a run that sent one says that its command's "exit 0" may be that death.
   */
  private noteRealtime(signal: NodeJS.Signals): void {
    if (this.realtimeSent === undefined && realtimeNumber(signal) !== undefined) this.realtimeSent = signal;
  }

  private beginTermination(signal: NodeJS.Signals): void {
    this.noteRealtime(signal);
    // Sent instead to a member that ignores `signal`.
    if (this.substituteIgnored) this.noteRealtime(this.spec.killSignal);
    if (!this.begun) {
      this.finish(null);
      return;
    }
    if (this.termination || this.launched?.pid === undefined || this.spawnError) return;
    this.clearTimers();
    this.status = 'stopping';
    const { clock, table, onStopping } = this.deps;
    this.hold.identityNow?.();
    // Read before the first signal: a process born since, that the signal did not reach, was forked
    // while the tree ended (a trap's cleanup), and a guard taking over must not signal it either.
    const bornFrom = onStopping ? ticksNow() : null;
    this.termination = this.attached.then(() =>
      terminate(this.hold, {
        signal,
        graceMs: this.spec.graceMs,
        clock,
        table,
        escalate: this.escalation.signal,
        ...(this.substituteIgnored ? { insteadIfIgnored: this.spec.killSignal } : {}),
        onRepeatable: (repeat) => {
          this.repeat = repeat;
          if (repeat === null) this.repeatQueue = null;
          for (const again of this.repeatQueue ?? []) this.signalAgain(again);
          this.repeatQueue?.clear();
        },
        onSignalled: (reached) => {
          // At once: a host killed a moment later leaves its guard a sequence to go on with, not
          // one to start over (a second SIGTERM cuts a trap's cleanup short).
          onStopping?.(this, {
            signal,
            atMs: Date.now(),
            graceMs: this.spec.graceMs,
            signalled: reached.slice(0, MAX_SIGNALLED).map((m) => `${m.pid}@${m.startTime}`),
            ...(bornFrom !== null && { bornFrom }),
          });
        },
      }),
    );
    this.termination = this.termination.catch((error: unknown) => this.withoutTable(error, clock.now()));
    // A sequence that began with SIGKILL, or found nobody, never had a grace to repeat a signal in.
    this.termination.finally(() => {
      this.repeat = null;
      this.repeatQueue = null;
    });
    this.termination.then(
      () => this.settle(),
      () => this.settle(),
    );
  }

  /**
   * The sequence failed: the process table could not be read (a ps that fails, hangs past its
   * bound, or prints what cannot be parsed), so no member can be found or verified. What needs no
   * table still ends the run: its process group while its leader is our child and not yet reaped
   * (a group number is not handed on while its leader holds it), then the child itself through
   * Node's handle. Members outside the group cannot be reached; those last seen are counted as
   * escaped, and the note says why.
   */
  private withoutTable(error: unknown, startedAt: number): TerminateReport {
    const { clock } = this.deps;
    const pgid = this.pgid;
    this.unverified = true;
    const notes = [
      `the termination could not read the process table (${describeThrown(error)}): SIGKILL went to the run's process group and its command only; nothing else could be found or verified`,
    ];
    // Child mode only: Node reaps the child and reports it in one step, where node-pty's waitpid
    // thread reaps a PTY leader before the exit is heard here.
    if (pgid !== null && !this.exit && this.spec.mode === 'child') {
      try {
        (this.deps.send ?? process.kill)(-pgid, 'SIGKILL');
      } catch {
        // gone meanwhile
      }
    }
    this.launched?.kill?.('SIGKILL');
    const root = this.launched?.pid;
    const others = this.hold.lastSeen().members.filter((m) => m.pid !== root);
    return {
      members: [],
      signalled: 0,
      killed: 0,
      escaped: others.length,
      escalated: true,
      durationMs: Math.round(clock.now() - startedAt),
      graceUsedMs: null,
      notes,
    };
  }

  private onOutput(stream: StreamName, chunk: Buffer): Promise<void> | undefined {
    this.lastOutputTick = this.deps.clock.now();
    this.lastOutputAt = Date.now();
    return this.output.push(stream, chunk);
  }

  /** Re-armed lazily: a timer per output chunk would cost more than the output itself. */
  private armSilence(ms: number): void {
    const { clock } = this.deps;
    const due = clock.now() + ms;
    this.silenceDue = due;
    const timer = clock.setTimeout(() => {
      // Run late (this process was stopped, or busy), the timer comes before the poll that reads
      // what the command printed meanwhile (the loop runs expired timers first): one turn lets that
      // output in before the command is called silent. Not once the timers were cleared meanwhile.
      if (clock.now() - due <= DEADLINE_SLACK_MS) {
        this.checkSilence();
        return;
      }
      this.silenceDeferred = true;
      nextTurn().then(() => {
        this.silenceDeferred = false;
        if (this.silenceTimer === timer) this.checkSilence();
      });
    }, ms);
    this.silenceTimer = timer;
  }

  private checkSilence(): void {
    // A command blocked on a pipe our consumer does not empty is not silent: it waits for us.
    if (this.output.behind) this.lastOutputTick = this.deps.clock.now();
    const quiet = this.deps.clock.now() - this.lastOutputTick;
    const left = this.spec.noOutputTimeoutMs - quiet;
    if (left > 0) this.armSilence(left);
    else this.stop('no-output-timeout');
  }

  private onExit(code: number | null, signal: NodeJS.Signals | null): void {
    this.exit = { code, signal };
    this.exitHeardAt = Date.now();
    this.exitSeen();
    if (!this.reason) this.reason = signal ? 'signal' : 'exit';
    if (this.status !== 'exited') this.status = 'stopping';
    this.clearTimers();
    this.endCommand();
    this.settle();
  }

  /** Resolves commandEnded (the first call wins) with what is known of the end so far. */
  private endCommand(): void {
    this.resolveCommandEnded({
      reason: this.reason ?? 'exit',
      ...(this.detail !== undefined ? { detail: this.detail } : {}),
      exitCode: this.exit?.code ?? null,
      exitSignal: this.exit?.signal ?? null,
      ...(this.spawnError ? { error: this.spawnErrorInfo(this.spawnError) } : {}),
    });
  }

  /** Made once: the message may search PATH, and both commandEnded and the result carry it. */
  private spawnErrorInfo(error: NodeJS.ErrnoException): { code: string; message: string } {
    this.spawnErrorShown ??= { code: error.code ?? 'SPAWN_FAILED', message: spawnMessage(this.spec, error) };
    return this.spawnErrorShown;
  }

  private onSpawnError(error: NodeJS.ErrnoException): void {
    this.spawnError = error;
    this.exitSeen();
    this.clearTimers();
    if (!this.reason) this.reason = 'spawn-error';
    this.endCommand();
    this.settle();
  }

  /** After the direct child exited (or the sequence ended): leftovers, then a bounded drain. */
  private async settle(): Promise<void> {
    if (this.settling) return;
    this.settling = true;
    let report: TerminateReport | null = null;
    const { clock } = this.deps;
    try {
      if (!this.spawnError) {
        // A root reaped before its identity was read (deferred, on ps) does not need that read.
        if (this.exit && !this.termination && this.hold.rootReaped?.()) this.attached = Promise.resolve();
        await this.attached;
        if (!this.termination && this.exit) await this.handleLeftovers();
        if (this.termination) report = await this.termination;
        // The sequence can end before Node has reaped the child; the exit event follows shortly.
        if (!this.exit) await within(clock, this.exited, this.spec.drainMs);
        if (this.launched) {
          await this.drainOutput(this.launched);
          this.launched.releaseOutput();
        }
        // A stop that came while the output drained (`procwarden kill` signals the command and its
        // host at once: the command's death began the settling) began a termination too: its
        // report is the run's. Unread, the result said the run was stopped and not what was done.
        if (this.termination && report === null) report = await this.termination;
      }
    } catch (error) {
      this.notes.push(`internal error while settling: ${(error as Error)?.stack ?? error}`);
    }
    this.finish(report);
  }

  private async drainOutput(launched: Launched): Promise<void> {
    const givenUp = new Promise<void>((resolve) => {
      this.stopWaiting = resolve;
    });
    await drainOutput({
      clock: this.deps.clock,
      output: this.output,
      outputDone: launched.outputDone,
      drainMs: this.spec.drainMs,
      drainMaxMs: this.spec.drainMaxMs,
      // timeoutMs bounds the command, not a hold: after one, a slow consumer waits until it is
      // given up (cancel, kill), as after a run without a timeout.
      deadline: this.held?.summary ? Number.POSITIVE_INFINITY : this.overallDeadline,
      givenUp,
      waitsForConsumer: () => this.waitsForConsumer(),
      keepsWriters: this.keepsLeftovers() && this.leftovers > 0,
      notes: this.notes,
    });
  }

  /**
   * A run that ended on its own, whose tree is gone: its remaining output is finite, wait for it.
   * One that keeps its leftovers waits while a consumer is behind: the command's own last lines
   * are in the pipes then (a kept leftover that holds them and goes on writing is cut off as an
   * escaped one is, by drainOutput's bounds).
   */
  private waitsForConsumer(): boolean {
    // Held leftovers ended by a stop (cancel, abort, shutdown, holdMs) end the run as a stop does.
    const heldStopped = this.held?.endedBy !== undefined && this.held.endedBy !== 'themselves';
    const natural = (this.reason === 'exit' || this.reason === 'signal') && !heldStopped;
    const treeGone =
      (this.leftovers === 0 && !this.leftoversUnsure) ||
      this.termination !== undefined ||
      this.held?.endedBy === 'themselves';
    const kept = this.keepsLeftovers() && this.output.behind;
    return natural && (treeGone || kept) && this.stopWaiting !== undefined;
  }

  /** Only a run that ended on its own keeps leftovers; a stopped one ended its whole tree. */
  private keepsLeftovers(): boolean {
    return this.spec.leftovers === 'keep' && this.termination === undefined;
  }

  private async handleLeftovers(): Promise<void> {
    let members: Members;
    try {
      members = await this.hold.members();
    } catch (error) {
      // The command is gone and reaped: its group's number may be anyone's now, so nothing is
      // signalled without a table to verify it by. Leftovers the caller keeps are not a reap's.
      this.unverified = this.spec.leftovers === 'kill';
      this.notes.push(
        `the look for leftovers could not read the process table (${describeThrown(error)}): whether the command left processes behind is not known`,
      );
      return;
    }
    this.leftovers = members.length;
    this.leftoversUnsure = members.unconfirmed !== undefined;
    const found = members.length > 0 || members.unconfirmed;
    // Unconfirmed: a termination's scans stop what they read, and settle it (see Members).
    if (found && this.spec.leftovers === 'kill') this.beginTermination(this.spec.killSignal);
    else if (found && this.held?.open) await this.holdLeftovers(this.held, members);
    else if (found && this.held) this.beginTermination(this.unheldSignal ?? this.spec.killSignal);
    else if (members.unconfirmed) {
      this.notes.push(
        `${members.unconfirmed}: whether the command left processes behind could not be confirmed`,
      );
    }
  }

  /**
   * A stop now ends held leftovers: while they are held, and from the command's own end until the
   * look for them has run (a cancel() the moment commandEnded settles must not be lost).
   */
  private mayEndHold(): boolean {
    const natural = this.reason === 'exit' || this.reason === 'signal';
    return this.held?.open === true && natural && this.exit !== undefined && this.termination === undefined;
  }

  /** The held leftovers as last scanned; empty unless the run is holding them. */
  get heldMembers(): ReadonlyArray<{ pid: number; command: string }> {
    return this.held?.members() ?? [];
  }

  /** The command's own exit status, once it is known. */
  get commandExit(): { code: number | null; signal: NodeJS.Signals | null } | undefined {
    return this.exit;
  }

  /**
   * leftovers: 'hold': the run stays live ('holding') with what its command left, until that ends
   * by itself or something ends it (endHold); the termination then started is the run's report.
   */
  private async holdLeftovers(held: LeftoverHold, members: Members): Promise<void> {
    this.status = 'holding';
    const gone = await held.hold(
      members,
      () => this.hold.members(),
      () => this.endHold('hold-timeout', undefined),
      this.notes,
    );
    if (gone && this.status === 'holding') this.status = 'stopping';
  }

  /** Ends what the run holds, gracefully with `signal` (the first call wins). */
  private endHold(
    endedBy: HoldEnd,
    detail: string | undefined,
    signal: NodeJS.Signals = this.spec.killSignal,
  ): void {
    if (!this.mayEndHold() || !this.held) return;
    const begun = this.held.begun;
    this.held.end(endedBy, detail);
    if (begun) this.beginTermination(signal);
    // Before the hold began, the look for leftovers runs first and ends what it finds with this
    // signal, as leftovers: 'kill' would: a termination's first scan alone can miss a member caught
    // between two execs, re-parented and unreadable (containment 'none' under load leaked one).
    else this.unheldSignal = signal;
  }

  private finish(report: TerminateReport | null): void {
    if (this.status === 'exited') return;
    this.clearTimers();
    // The tree is gone: a stop record not written yet is not needed.
    this.stopAbortWatch?.();
    this.status = 'exited';
    // A run that never launched (aborted or replaced before it started) ends its command here.
    this.endCommand();
    this.pendingInput?.drop();
    const flushing = this.output.finish();
    if (!flushing) {
      this.complete(report);
      return;
    }
    // The file sink's last writes get the drain window too; a reader that stalls past it loses them.
    within(this.deps.clock, flushing, this.spec.drainMs).then(() => {
      this.output.abandon();
      this.complete(report);
    });
  }

  private complete(report: TerminateReport | null): void {
    const reason = this.reason ?? 'exit';
    if (this.realtimeSent && this.spec.mode === 'child' && this.exit?.code === 0 && this.exit.signal === null)
      this.notes.push(
        `the command's exit code 0 may be its death by ${this.realtimeSent}: Node reports a process killed by a real-time signal as exit code 0`,
      );
    const notes = [...this.notes, ...this.output.notes, ...(report?.notes ?? this.hold.notes ?? [])];
    // An unsure look's count is what the termination it started found.
    const leftovers = this.leftoversUnsure && report ? report.members.length : this.leftovers;
    const result: RunResult = {
      id: this.id,
      reason,
      ...(this.detail !== undefined ? { detail: this.detail } : {}),
      exitCode: this.exit?.code ?? null,
      exitSignal: this.exit?.signal ?? null,
      timedOut: reason === 'overall-timeout' || reason === 'no-output-timeout',
      escalated: report?.escalated ?? false,
      durationMs: Math.round(this.deps.clock.now() - this.t0),
      containment: this.containment,
      ...(this.hold.fallback ? { containmentFallback: this.hold.fallback } : {}),
      stdout: this.output.result(this.spec.mode === 'pty' ? 'pty' : 'stdout'),
      stderr: this.output.result('stderr'),
      tree: {
        signalled: report?.signalled ?? 0,
        killed: report?.killed ?? 0,
        escaped: report?.escaped ?? 0,
        leftovers,
        ...(this.held?.summary && leftovers > 0 ? { held: this.held.summary } : {}),
        // One array: the result's notes, the tree's and the report's say the same things.
        report: report ? { ...report, notes } : null,
        notes,
      },
      notes,
      ...(this.spawnError ? { error: this.spawnErrorInfo(this.spawnError) } : {}),
    };
    const keep = this.keepsLeftovers();
    this.hold.release(notes, keep).then(
      () => this.deliver(result),
      (error) => {
        notes.push(`containment release failed: ${describeThrown(error)}`);
        this.deliver(result);
      },
    );
  }

  private deliver(result: RunResult): void {
    this.release();
    this.resolveResult(result);
    this.deps.onSettled?.(this, result);
  }

  /**
   * A settled run is kept by its supervisor's registry for get/list/read (up to maxExited): it
   * keeps its result, not its input (stdin data of any size), its environment, its callbacks (and
   * whatever they hold) or the buffers the result was built from.
   */
  private release(): void {
    this.output.dispose();
    this.current = {
      ...this.current,
      stdin: { kind: 'ignore' },
      env: {},
      onData: undefined,
      onBytes: undefined,
      signal: undefined,
    };
  }

  /**
   * The run's own limits. Not the stop record's timer: a command that dies of the signal at once
   * (a shell whose children trap it) leaves the tree in its grace, which a reaper must know of.
   */
  private clearTimers(): void {
    if (this.overallTimer !== undefined) this.deps.clock.clearTimeout(this.overallTimer);
    if (this.silenceTimer !== undefined) this.deps.clock.clearTimeout(this.silenceTimer);
    this.overallTimer = undefined;
    this.silenceTimer = undefined;
  }
}

/** Linux: the process has exited and waits to be reaped (a zombie); elsewhere not known, false. */
function exitedUnheard(pid: number): boolean {
  if (process.platform !== 'linux') return false;
  try {
    return parseStat(readFileSync(`/proc/${pid}/stat`, 'utf8'))?.state === 'Z';
  } catch {
    return false;
  }
}

function abortDetail(signal: AbortSignal | undefined): string | undefined {
  const reason = signal?.reason as unknown;
  if (reason === undefined) return undefined;
  return describeThrown(reason);
}

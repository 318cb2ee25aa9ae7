import { EventEmitter } from 'node:events';
import { whenAborted } from '../abort-watch.js';
import type { Clock } from '../clock.js';
import { describeThrown, ProcwardenError, showValue } from '../errors.js';
import { checkInput } from '../options/index.js';
import type { Supervisor } from '../supervisor/index.js';
import type { CommandEnd, RunHandle, RunResult, RunSpec, StreamName } from '../types.js';
import { callListener, type ListenerFailure } from './call-listener.js';
import { ChildRegistry, type LiveChild } from './children.js';
import type { ExitWatch } from './exit-watch.js';
import { LineSplitter } from './lines.js';
import { liveSpec } from './live-spec.js';
import { checkChildOptions, checkTurnOptions } from './options.js';
import { SettleWindow } from './settle-window.js';
import { OneShot } from './timer.js';
import { LiveTurn, type TurnHost } from './turn.js';
import type {
  AttachChildOptions,
  ClosedEvent,
  LiveChildRelease,
  LiveCloseOutcome,
  LiveCloseReason,
  LiveSessionEvents,
  LiveSessionState,
  LiveTurnOutcome,
  TurnOptions,
} from './types.js';

const CLOSE_REASONS: readonly LiveCloseReason[] = ['idle', 'restart', 'abort', 'error', 'shutdown'];
/** Reasons that end the tree at once, children or not. */
const IMMEDIATE: readonly LiveCloseReason[] = ['abort', 'error', 'shutdown'];

interface ClosePlan {
  reason: LiveCloseReason;
  detail: string | undefined;
  drained: boolean;
  capFired: boolean;
}

export interface SessionInit {
  key: string;
  id: string;
  fingerprint: string;
  spec: RunSpec;
  supervisor: Supervisor;
  clock: Clock;
  idleTimeoutMs: number;
  maxDrainMs: number;
  closeOnRunEnd: boolean;
  maxLineChars: number;
  /** A child's timeout when attachChild gives none; Infinity: none. */
  childTimeoutMs: number;
  /** The wait of a closeOnRunEnd close that finds no live child (see SettleWindow); 0: none. */
  runEndSettleMs: number;
  /** Watches the processes children are attached with (one for the pool: one timer for all). */
  exits: ExitWatch;
  /**
   * Told of every event before the listeners are: the pool's own bookkeeping, which a caller's
   * `removeAllListeners()` must not be able to remove.
   */
  observer?: (session: LiveSession, name: keyof LiveSessionEvents, event: unknown) => void;
}

/**
 * One long-lived process (spawned as a supervised run with stdin 'pipe') that serves one turn at a
 * time and may hold background children that outlive turns. 'idle' and 'restart' closes wait for
 * those children (bounded by maxDrainMs); 'abort', 'error' and 'shutdown' end the tree at once.
 */
export class LiveSession extends EventEmitter<LiveSessionEvents> {
  readonly key: string;
  readonly id: string;
  readonly fingerprint: string;
  /** Resolves once the session closed and its process tree is gone. Never rejects. */
  readonly closed: Promise<ClosedEvent>;
  private resolveClosed!: (event: ClosedEvent) => void;
  private readonly clock: Clock;
  private readonly turnHost: TurnHost;
  private readonly run: RunHandle;
  private readonly children: ChildRegistry;
  private readonly lines: LineSplitter;
  private readonly idleTimer: OneShot;
  private readonly drainCap: OneShot;
  private readonly settle: SettleWindow;
  private readonly settings: Pick<
    SessionInit,
    'idleTimeoutMs' | 'maxDrainMs' | 'closeOnRunEnd' | 'childTimeoutMs' | 'runEndSettleMs'
  >;
  private status: LiveSessionState = 'open';
  private pending: { reason: 'idle' | 'restart'; detail: string | undefined } | undefined;
  private turn: LiveTurn | undefined;
  private turnCount = 0;
  private lastOutputTick: number;
  /** Promises of the spec's onData not yet settled: the process may be blocked on that consumer. */
  private consumerWaits = 0;
  private ending: (ClosePlan & { liveChildren: number }) | undefined;
  private readonly observer: SessionInit['observer'];
  private readonly abortSignal: AbortSignal | undefined;
  private readonly onAbort = () => this.onSignalAborted();
  private stopAbortWatch: (() => void) | undefined;

  constructor(init: SessionInit) {
    super();
    this.key = init.key;
    this.id = init.id;
    this.fingerprint = init.fingerprint;
    this.observer = init.observer;
    this.clock = init.clock;
    this.settings = {
      idleTimeoutMs: init.idleTimeoutMs,
      maxDrainMs: init.maxDrainMs,
      closeOnRunEnd: init.closeOnRunEnd,
      childTimeoutMs: init.childTimeoutMs,
      runEndSettleMs: init.runEndSettleMs,
    };
    this.turnHost = {
      clock: init.clock,
      // A process blocked on a consumer that is behind is not silent: it waits for us.
      lastOutputAt: () => (this.consumerWaits > 0 ? this.clock.now() : this.lastOutputTick),
      endTurn: (turn, outcome) => this.endTurn(turn, outcome),
    };
    this.closed = new Promise((resolve) => {
      this.resolveClosed = resolve;
    });
    this.lastOutputTick = init.clock.now();
    this.children = new ChildRegistry(
      init.clock,
      init.exits,
      (child) => this.onChildAttached(child),
      (child, by) => this.onChildReleased(child, by),
    );
    this.lines = new LineSplitter(
      (line, stream, info) => this.notify('line', line, stream, info),
      init.maxLineChars,
    );
    this.idleTimer = new OneShot(init.clock, () => {
      void this.close('idle', `no turn and no live child for ${this.settings.idleTimeoutMs} ms`);
    });
    this.drainCap = new OneShot(init.clock, () => this.onDrainCap());
    this.settle = new SettleWindow(init.clock, () => this.onSettled());
    // Whatever can throw comes before the spawn (a clock whose setTimeout throws): once the process
    // exists, a constructor that throws would strand it with no session to end it.
    this.armIdle();
    try {
      this.run = init.supervisor.spawn(
        liveSpec(init.spec, {
          output: (text, stream) => this.onOutput(text, stream),
          consumer: (waits) => this.onConsumer(waits),
        }),
      );
    } catch (error) {
      this.idleTimer.clear();
      throw error;
    }
    // The command's own end is heard at once; the run's result only once its tree is gone and its
    // pipes drained (up to graceMs + drainMs later), too late to stop the pool reusing the session.
    this.run.commandEnded.then((end) => this.onCommandEnded(end));
    this.run.result.then((result) => this.onRunEnded(result));
    // After the spawn, so the run hears the abort first and records it as its reason. One already
    // aborted is the run's to handle: it never starts, and commandEnded says so.
    this.abortSignal = init.spec.signal;
    if (this.abortSignal && !this.abortSignal.aborted) {
      this.stopAbortWatch = whenAborted(this.abortSignal, this.onAbort);
    }
  }

  get pid(): number | undefined {
    return this.run.pid;
  }

  get state(): LiveSessionState {
    return this.status;
  }

  get liveChildren(): number {
    return this.children.count;
  }

  get turnActive(): boolean {
    return this.turn !== undefined;
  }

  /** The deferred close waiting for live children, if any. */
  get pendingClose(): 'idle' | 'restart' | undefined {
    return this.pending?.reason;
  }

  /**
   * Open (or draining an 'idle' close a turn would cancel) with its process running: acquire() may
   * hand it out again. A run ending on its own (its spec's timeout) is not, though its end has not
   * been heard yet.
   */
  get reusable(): boolean {
    const open = this.status === 'open' || (this.status === 'draining' && this.pending?.reason === 'idle');
    return open && this.runLive;
  }

  /**
   * A closeOnRunEnd close waits a moment for a late child report, and closes after it unless one
   * came: the pool waits for it to be over rather than report no room.
   * @internal
   */
  get settling(): boolean {
    return this.settle.open;
  }

  /** @internal Resolves when the run-end settle window is over (at once when there is none). */
  settled(): Promise<void> {
    return this.settle.over();
  }

  /**
   * The pool handed this session out again: a pending 'idle' close is cancelled, as a new turn
   * cancels it (else the caller would get a session that closes as soon as its children are done).
   * @internal
   */
  reclaim(): void {
    if (this.status !== 'draining' || this.pending?.reason !== 'idle') return;
    this.cancelPendingIdle('acquire');
    this.armIdle();
  }

  /** Open, no turn, no live children: the pool may evict it. */
  get isIdle(): boolean {
    return this.status === 'open' && !this.turn && this.children.count === 0;
  }

  /**
   * Writes to the process's stdin (before the process exists, as while its spec's replaceScope
   * waits, the input waits for it). False as a Writable says it: above the high-water mark.
   */
  write(data: string | Uint8Array): boolean {
    if (this.status === 'closing' || this.status === 'closed') throw this.closedError('write to');
    return this.run.stdin?.write(checkInput(data)) ?? false;
  }

  /**
   * Starts a turn. Turns do not queue: while one is active this throws LIVE_TURN_ACTIVE. A pending
   * 'idle' close is cancelled (the session is in use again); a pending 'restart' refuses new turns.
   */
  beginTurn(options?: TurnOptions): LiveTurn {
    const checked = checkTurnOptions(options);
    if (this.status === 'closing' || this.status === 'closed') throw this.closedError('begin a turn on');
    if (this.pending?.reason === 'restart') {
      throw new ProcwardenError(
        'LIVE_SESSION_CLOSED',
        `live session ${this.id} is restarting (waiting for ${this.settle.open ? 'a late child report' : `${this.children.count} live child(ren)`}) and takes no new turns; acquire the key again to get the next session.`,
      );
    }
    if (this.turn) {
      throw new ProcwardenError(
        'LIVE_TURN_ACTIVE',
        `live session ${this.id}: turn ${this.turn.id} is still active; end it (turn.end()) or await turn.ended before beginning another. Turns do not queue.`,
      );
    }
    if (this.pending) this.cancelPendingIdle('turn');
    this.idleTimer.clear();
    const turn = new LiveTurn(++this.turnCount, this.turnHost, checked);
    this.turn = turn;
    this.notify('turn-start', { key: this.key, sessionId: this.id, turn: turn.id });
    return turn;
  }

  /**
   * Registers a background child of the process; the session will not idle- or restart-close while
   * it is live. It is live until release(), the exit of `options.pid`'s process, or its timeout
   * (`options.timeoutMs`, else the session's childTimeoutMs): a lost report cannot pin the session.
   */
  attachChild(label?: string, options?: AttachChildOptions): LiveChild {
    if (this.status === 'closing' || this.status === 'closed') throw this.closedError('attach a child to');
    return this.children.attach(checkChildOptions(label, options, this.settings.childTimeoutMs));
  }

  /**
   * Closes the session. 'idle' / 'restart' with live children resolve 'deferred' and close when the
   * last child is released or maxDrainMs runs out; every other case resolves 'closed' once the tree is gone.
   * A stronger reason overrides a pending one (restart over idle, any immediate reason over both).
   */
  async close(reason: LiveCloseReason, detail?: string): Promise<LiveCloseOutcome> {
    if (!CLOSE_REASONS.includes(reason)) {
      throw new ProcwardenError(
        'INVALID_OPTION',
        `close(reason): ${showValue(reason)} is not one of ${CLOSE_REASONS.join(', ')}.`,
      );
    }
    if (detail !== undefined && typeof detail !== 'string') {
      throw new ProcwardenError(
        'INVALID_OPTION',
        `close(reason, detail): the detail must be a string, got ${showValue(detail)}.`,
      );
    }
    if (this.status === 'closing' || this.status === 'closed' || !this.runLive) {
      // Not live: the run is ending on its own (its spec's timeout), and the session closes with
      // the reason its end gives, not one that had nothing to end. An immediate close still cuts
      // what the run may wait for (a consumer behind on output the process left): it closes now.
      if (this.status !== 'closed' && IMMEDIATE.includes(reason)) this.run.cancel(closeText(reason, detail));
      await this.closed;
      return 'closed';
    }
    // A polite close during the run-end settle window joins that close: it waits for the late report
    // too, which is what the window is for.
    if ((reason === 'idle' || reason === 'restart') && (this.children.count > 0 || this.settle.open)) {
      this.defer(reason, detail);
      return 'deferred';
    }
    this.terminate({ reason, detail, drained: false, capFired: false });
    await this.closed;
    return 'closed';
  }

  private endTurn(turn: LiveTurn, outcome: LiveTurnOutcome): void {
    if (this.turn !== turn) return;
    this.turn = undefined;
    const event = {
      key: this.key,
      sessionId: this.id,
      turn: turn.id,
      outcome,
      durationMs: this.clock.now() - turn.startedAt,
    };
    turn.settle(event);
    this.notify('turn-end', event);
    if (outcome === 'overall-timeout' || outcome === 'no-output-timeout') {
      void this.close('abort', `turn ${turn.id}: ${outcome}`);
    } else if (outcome === 'completed' && this.settings.closeOnRunEnd) {
      this.closeAtRunEnd(`closeOnRunEnd after turn ${turn.id}`);
    } else {
      this.armIdle();
    }
  }

  /**
   * The agent may report a child in a later chunk than its answer, after the turn has ended: a close
   * that finds no live child first waits runEndSettleMs for one (a child attached meanwhile turns
   * it into an ordinary drain), then closes. With live children it is an ordinary drain at once.
   */
  private closeAtRunEnd(detail: string): void {
    const settleMs = this.settings.runEndSettleMs;
    if (this.children.count > 0 || settleMs === 0 || this.status !== 'open' || !this.runLive) {
      void this.close('restart', detail);
      return;
    }
    this.defer('restart', detail, settleMs);
    this.settle.start(settleMs);
  }

  private onSettled(): void {
    if (this.status !== 'draining' || !this.pending || this.children.count > 0) return;
    this.terminate({ ...this.pending, drained: false, capFired: false });
  }

  private defer(reason: 'idle' | 'restart', detail: string | undefined, settleMs = 0): void {
    if (this.pending && (this.pending.reason === 'restart' || reason === 'idle')) return;
    const first = this.pending === undefined;
    this.pending = { reason, detail };
    this.status = 'draining';
    this.idleTimer.clear();
    if (first) this.drainCap.arm(this.settings.maxDrainMs);
    this.notify('close-deferred', {
      key: this.key,
      sessionId: this.id,
      reason,
      liveChildren: this.children.count,
      maxDrainMs: this.settings.maxDrainMs,
      settleMs,
    });
  }

  private cancelPendingIdle(by: 'turn' | 'acquire'): void {
    this.pending = undefined;
    this.status = 'open';
    this.drainCap.clear();
    this.notify('close-cancelled', { key: this.key, sessionId: this.id, reason: 'idle', by });
  }

  private onDrainCap(): void {
    const pending = this.pending;
    if (!pending || this.status !== 'draining') return;
    this.terminate({ ...pending, drained: false, capFired: true });
  }

  private onChildAttached(child: LiveChild): void {
    this.idleTimer.clear();
    // Reported within the window: the run-end close now waits for it, as any drain does.
    this.settle.end();
    this.notify('child-attached', this.childEvent(child));
  }

  private onChildReleased(child: LiveChild, releasedBy: LiveChildRelease): void {
    this.notify('child-released', { ...this.childEvent(child), releasedBy });
    if (this.children.count > 0) return;
    if (this.pending && this.status === 'draining') {
      this.terminate({ ...this.pending, drained: true, capFired: false });
    } else {
      this.armIdle();
    }
  }

  private childEvent(child: LiveChild) {
    return {
      key: this.key,
      sessionId: this.id,
      childId: child.id,
      label: child.label,
      pid: child.pid,
      liveChildren: this.children.count,
    };
  }

  private armIdle(): void {
    const { idleTimeoutMs } = this.settings;
    if (this.status !== 'open' || this.turn || this.children.count > 0 || idleTimeoutMs === 0) {
      this.idleTimer.clear();
    } else {
      this.idleTimer.arm(idleTimeoutMs);
    }
  }

  /** The spec's onData returned a promise (+1) or one of those settled (-1). */
  private onConsumer(waits: 1 | -1): void {
    this.consumerWaits += waits;
    // Caught up: the process could write again only from now, and its silence counts from now.
    if (this.consumerWaits === 0) this.lastOutputTick = this.clock.now();
  }

  private onOutput(text: string, stream: StreamName): void {
    this.lastOutputTick = this.clock.now();
    this.notify('output', text, stream);
    this.lines.push(text, stream);
  }

  /** Starts the run's graceful tree termination; `closed` resolves when the run's result is in. */
  private terminate(how: ClosePlan): void {
    if (this.status === 'closing' || this.status === 'closed') return;
    this.beginClosing(how);
    this.run.cancel(closeText(how.reason, how.detail));
  }

  private beginClosing(how: ClosePlan): void {
    this.status = 'closing';
    this.idleTimer.clear();
    this.drainCap.clear();
    this.settle.end();
    this.ending = { ...how, liveChildren: this.children.count };
    this.children.dropAll();
    if (this.turn) this.endTurn(this.turn, 'session-closed');
  }

  /**
   * Calls every listener of `name`, each on its own: one that throws neither stops the others nor
   * reaches the session's machinery (which would lose lines or leave `closed` pending); what it
   * threw is reported as an 'error' event.
   */
  private notify<K extends keyof LiveSessionEvents>(name: K, ...args: LiveSessionEvents[K]): void {
    if (this.observer) this.call(this.observer, [this, name, args[0]], name);
    for (const listener of this.rawListeners(name)) this.call(listener, args, name);
  }

  private call(listener: unknown, args: unknown[], event: string): void {
    callListener(listener, this, args, (error, how) => this.reportError(event, error, how));
  }

  /**
   * An 'error' event when someone listens for it. Without a listener, Node's emit('error') would
   * throw into the output path (and crash the host from the flush at exit), so the error becomes a
   * process warning instead: visible on stderr, never fatal.
   */
  private reportError(event: string, error: unknown, how: ListenerFailure): void {
    const failure = new ProcwardenError(
      'LISTENER_THREW',
      `live session ${this.id}: a '${event}' listener ${how === 'threw' ? 'threw' : 'returned a promise that rejected'} (${describeThrown(error)}); the session carries on and no other listener or line was affected.`,
      { cause: error },
    );
    const listeners = event === 'error' ? [] : this.rawListeners('error');
    if (listeners.length === 0) {
      process.emitWarning(failure);
      return;
    }
    for (const listener of listeners) this.call(listener, [failure], 'error');
  }

  /** The process is running: neither ended on its own nor being ended by its run. */
  private get runLive(): boolean {
    const state = this.run.state;
    return state === 'starting' || state === 'running';
  }

  /**
   * The command itself ended (exited, crashed, never started, or its run stopped it). Unless we
   * closed it, the session starts closing now: no turn, reuse or polite close in the time its run
   * takes to end the rest of the tree and drain the pipes.
   */
  private onCommandEnded(end: CommandEnd): void {
    if (this.status === 'closing' || this.status === 'closed') return;
    // An end of its own is an immediate reason: it overrides a pending 'idle' / 'restart' drain.
    this.beginClosing({
      reason: closeReasonFor(end),
      detail: describeEnd(end),
      drained: false,
      capFired: false,
    });
  }

  /** The spec's signal aborted the run, whose tree may take up to graceMs to end: close now. */
  private onSignalAborted(): void {
    if (this.status === 'closing' || this.status === 'closed') return;
    this.terminate({
      reason: 'abort',
      detail: describeEnd({ reason: 'aborted', detail: describeThrown(this.abortSignal?.reason) }),
      drained: false,
      capFired: false,
    });
  }

  /** The run ended: because we closed it, or on its own (it exited, crashed, or was cancelled elsewhere). */
  private onRunEnded(result: RunResult): void {
    this.stopAbortWatch?.();
    if (this.status !== 'closing') {
      // An end of its own (exit code, abort, shutdown) is an immediate reason: it overrides a
      // pending 'idle' / 'restart' drain, which never got to close anything.
      this.beginClosing({
        reason: closeReasonFor(result),
        detail: describeEnd(result),
        drained: false,
        capFired: false,
      });
    }
    this.lines.flush();
    this.status = 'closed';
    const event: ClosedEvent = {
      key: this.key,
      sessionId: this.id,
      ...(this.ending as ClosePlan & { liveChildren: number }),
      result,
    };
    // Resolved first: a listener that throws must not leave `closed` pending.
    this.resolveClosed(event);
    this.notify('closed', event);
  }

  private closedError(what: string): ProcwardenError {
    const why = this.ending
      ? ` (${this.ending.reason}${this.ending.detail ? `: ${this.ending.detail}` : ''})`
      : '';
    return new ProcwardenError(
      'LIVE_SESSION_CLOSED',
      `cannot ${what} live session ${this.id}: it is ${this.status}${why}; acquire the key again from the pool for a new session.`,
    );
  }
}

/** What the session needs of a run's end: its command's (heard first) or its result. */
type RunEnd = Pick<CommandEnd, 'reason' | 'detail'> &
  Partial<Pick<CommandEnd, 'exitCode' | 'exitSignal' | 'error'>>;

/** The run's cancel reason for a close. */
function closeText(reason: LiveCloseReason, detail: string | undefined): string {
  return `live session ${reason}${detail ? `: ${detail}` : ''}`;
}

function closeReasonFor(result: RunEnd): LiveCloseReason {
  if (result.reason === 'aborted') return 'abort';
  if (result.reason === 'shutdown') return 'shutdown';
  return 'error';
}

function describeEnd(result: RunEnd): string {
  if (result.error) return `the process could not be started: ${result.error.message}`;
  if (result.reason === 'exit') return `the process exited on its own with code ${result.exitCode}`;
  if (result.reason === 'signal') return `the process was killed by ${result.exitSignal}`;
  return `the run ended: ${result.reason}${result.detail ? ` (${result.detail})` : ''}`;
}

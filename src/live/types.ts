import type { Clock } from '../clock.js';
import type { ProcwardenError } from '../errors.js';
import type { Supervisor } from '../supervisor/index.js';
import type { RunResult, StreamName } from '../types.js';
import type { LineInfo } from './lines.js';

/**
 * Why a session closes. 'idle' and 'restart' drain (wait for live children, bounded by
 * `maxDrainMs`); 'abort', 'error' and 'shutdown' terminate the process tree at once.
 */
export type LiveCloseReason = 'idle' | 'restart' | 'abort' | 'error' | 'shutdown';

/** What `close()` did: closed the session (resolved once the tree is gone) or deferred it for a drain. */
export type LiveCloseOutcome = 'closed' | 'deferred';

/** open → draining (a deferred close waits for live children) → closing (tree termination) → closed. */
export type LiveSessionState = 'open' | 'draining' | 'closing' | 'closed';

/**
 * What released a live child: its holder (release()), the exit of the process it was attached
 * with, or its timeout.
 */
export type LiveChildRelease = 'caller' | 'exit' | 'timeout';

/** How a turn ended. */
export type LiveTurnOutcome = 'completed' | 'overall-timeout' | 'no-output-timeout' | 'session-closed';

export interface LiveSessionOptions {
  /**
   * Close with 'idle' after this long with no active turn and no live children. 0: never.
   * Default: PROCWARDEN_LIVE_IDLE_TIMEOUT_MS (milliseconds, or a duration such as `10s`), else 10
   * minutes. An unusable value of it fails the acquire that needs it with INVALID_ENV.
   */
  idleTimeoutMs?: number;
  /** Longest a deferred 'idle' / 'restart' close waits for live children. Default 15 minutes; Infinity: no cap. */
  maxDrainMs?: number;
  /** At the end of every completed turn, request close('restart') (which drains live children). Default false. */
  closeOnRunEnd?: boolean;
  /**
   * Longest line a 'line' event carries, in characters. A longer line arrives once, cut to this
   * length, with `info.truncated` true and `info.length` its real length. Default 4 MiB (4194304).
   */
  maxLineChars?: number;
  /**
   * How long a child handle counts when nothing releases it (attachChild's `timeoutMs` overrides
   * it per child): then it is released, 'child-released' says `releasedBy: 'timeout'`. More than 0;
   * Infinity: never. Default 30 minutes.
   */
  childTimeoutMs?: number;
  /**
   * With closeOnRunEnd: how long the close at the end of a turn that finds no live child waits for
   * one to be reported (a child attached meanwhile defers it as usual). 0: close at once. Default 500 ms.
   */
  runEndSettleMs?: number;
}

export interface LivePoolOptions extends LiveSessionOptions {
  /** Sessions (processes) held at once, draining ones included. Default 16. */
  maxSessions?: number;
  /** Spawns the sessions' processes. Default: the default supervisor (the one behind run()). */
  supervisor?: Supervisor;
  /** Drives the idle timer, the drain cap and turn timeouts. Default: the real clock. */
  clock?: Clock;
  /** Where PROCWARDEN_LIVE_IDLE_TIMEOUT_MS is read. Default: process.env. */
  env?: Record<string, string | undefined>;
}

export interface AcquireOptions extends LiveSessionOptions {
  /**
   * Identifies what the process was started with (argv, env hash, model...). An existing session
   * is reused only when it is equal; otherwise it is restarted. Default: derived from argv, cwd,
   * env, mode and shell.
   */
  fingerprint?: string;
}

export interface TurnOptions {
  /** The turn may last this long; then the session closes with 'abort'. 0 / undefined: no limit. */
  timeoutMs?: number;
  /** The process may stay silent this long during the turn; then the session closes with 'abort'. */
  noOutputTimeoutMs?: number;
}

export interface AttachChildOptions {
  /**
   * The child's process, as the agent reported it: its exit releases the handle (`releasedBy:
   * 'exit'`). Read at once and identified by pid and start time, so a later process given the same
   * pid does not count as the child.
   */
  pid?: number;
  /** Released after this long (`releasedBy: 'timeout'`). More than 0; Infinity: never. Default: the session's childTimeoutMs. */
  timeoutMs?: number;
}

export interface LiveEventBase {
  key: string;
  sessionId: string;
}

export interface TurnStartEvent extends LiveEventBase {
  turn: number;
}

export interface TurnEndEvent extends LiveEventBase {
  turn: number;
  outcome: LiveTurnOutcome;
  durationMs: number;
}

export interface ChildEvent extends LiveEventBase {
  childId: number;
  label: string | undefined;
  /** The pid it was attached with, if any. */
  pid: number | undefined;
  /** Live children after this attach / release. */
  liveChildren: number;
}

export interface ChildReleasedEvent extends ChildEvent {
  /** 'caller': release(); 'exit': its process ended; 'timeout': its timeoutMs ran out. */
  releasedBy: LiveChildRelease;
}

export interface CloseDeferredEvent extends LiveEventBase {
  reason: 'idle' | 'restart';
  liveChildren: number;
  /** The drain ends at the latest this many ms after the first deferral. */
  maxDrainMs: number;
  /**
   * A closeOnRunEnd close that found no live child waits this long for one to be reported before
   * it closes; 0 for every other deferral.
   */
  settleMs: number;
}

export interface CloseCancelledEvent extends LiveEventBase {
  /** Only a pending 'idle' close is ever cancelled; a pending 'restart' always goes ahead. */
  reason: 'idle';
  /** The session was put to use again: a new turn, or an acquire() that reused it. */
  by: 'turn' | 'acquire';
}

export interface ClosedEvent extends LiveEventBase {
  reason: LiveCloseReason;
  /** Why, in words (which timeout fired, what the caller said, how the process ended...). */
  detail: string | undefined;
  /** The close was deferred and every live child was released before it (false when the cap fired). */
  drained: boolean;
  /** Children still attached when the tree was terminated (0 after a complete drain). */
  liveChildren: number;
  /** The drain ended because `maxDrainMs` ran out. */
  capFired: boolean;
  /** The result of the session's run (its process tree is gone). */
  result: RunResult;
}

export interface WarningEvent {
  /** LISTENER_THREW: another pool listener threw. */
  code: 'LISTENER_THREW';
  message: string;
  /** LISTENER_THREW: what the listener threw (or its promise rejected with). */
  cause?: unknown;
}

export interface LiveSessionEvents {
  'turn-start': [TurnStartEvent];
  'turn-end': [TurnEndEvent];
  'child-attached': [ChildEvent];
  'child-released': [ChildReleasedEvent];
  'close-deferred': [CloseDeferredEvent];
  'close-cancelled': [CloseCancelledEvent];
  closed: [ClosedEvent];
  /** Every decoded chunk the process writes. */
  output: [text: string, stream: StreamName];
  /**
   * Every complete line the process writes (without the newline): JSON-lines protocols. One event is
   * always one line; past maxLineChars it is cut and `info.truncated` says so.
   */
  line: [line: string, stream: StreamName, info: LineInfo];
  /** A listener of this session threw (code LISTENER_THREW, the thrown value as `cause`). */
  error: [error: ProcwardenError];
}

export interface LivePoolEvents {
  'turn-start': [TurnStartEvent];
  'turn-end': [TurnEndEvent];
  'child-attached': [ChildEvent];
  'child-released': [ChildReleasedEvent];
  'close-deferred': [CloseDeferredEvent];
  'close-cancelled': [CloseCancelledEvent];
  closed: [ClosedEvent];
  warning: [WarningEvent];
}

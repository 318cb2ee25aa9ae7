import { EventEmitter } from 'node:events';
import { whenAborted } from '../abort-watch.js';
import { type Clock, realClock } from '../clock.js';
import { describeThrown, ProcwardenError } from '../errors.js';
import type { NormalSpec } from '../options/index.js';
import { getDefaultSupervisor, type Supervisor } from '../supervisor/index.js';
import type { RunSpec } from '../types.js';
import { callListener, type ListenerFailure } from './call-listener.js';
import { checkCommandFound } from './command-found.js';
import { ExitWatch } from './exit-watch.js';
import { specFingerprint } from './fingerprint.js';
import { idleTimeoutFromEnv } from './idle-timeout.js';
import { DEFAULT_MAX_LINE_CHARS } from './lines.js';
import { checkLiveSpec, snapshotSpec } from './live-spec.js';
import {
  checkAcquireOptions,
  checkPoolOptions,
  DEFAULT_CHILD_TIMEOUT_MS,
  DEFAULT_MAX_DRAIN_MS,
  DEFAULT_MAX_SESSIONS,
  DEFAULT_RUN_END_SETTLE_MS,
} from './options.js';
import { LiveSession } from './session.js';
import type {
  AcquireOptions,
  LivePoolEvents,
  LivePoolOptions,
  LiveSessionEvents,
  WarningEvent,
} from './types.js';

// Session events the pool re-emits (the payloads carry key and sessionId).
const FORWARDED = [
  'turn-start',
  'turn-end',
  'child-attached',
  'child-released',
  'close-deferred',
  'close-cancelled',
  'closed',
] as const;

/**
 * Live sessions by context key. acquire() reuses the key's session while the fingerprint is equal and
 * restarts it (close 'restart', which drains live children first) when it is not. At most
 * `maxSessions` processes at once: the session idle the longest is evicted to make room.
 */
export class LiveSessionPool extends EventEmitter<LivePoolEvents> {
  private readonly options: LivePoolOptions;
  private readonly supervisor: Supervisor;
  private readonly clock: Clock;
  private readonly maxSessions: number;
  /** Watches the pids children are attached with, for every session of the pool. */
  private readonly exits: ExitWatch;
  private readonly byKey = new Map<string, LiveSession>();
  private readonly queues = new Map<string, Promise<unknown>>();
  /**
   * Slots promised to acquires between their room check and their start. Taken in the same
   * synchronous step as the check, so concurrent acquires of distinct keys cannot all see room.
   */
  private reserved = 0;
  /** Acquires waiting for reserved slots to turn into sessions (which may then be evicted). */
  private reservationWaiters: (() => void)[] = [];
  /** Last activity per session (a sequence number, so a manual clock cannot tie). */
  private readonly activity = new Map<LiveSession, number>();
  private activitySeq = 0;
  private counter = 0;
  private envIdleTimeoutMs: number | undefined;
  private shutDown = false;

  constructor(options?: LivePoolOptions) {
    super();
    this.options = checkPoolOptions(options);
    this.supervisor = this.options.supervisor ?? getDefaultSupervisor();
    this.clock = this.options.clock ?? realClock;
    this.maxSessions = this.options.maxSessions ?? DEFAULT_MAX_SESSIONS;
    this.exits = new ExitWatch(this.clock);
  }

  /** Sessions held (open, draining or closing). */
  get size(): number {
    return this.byKey.size;
  }

  get(key: string): LiveSession | undefined {
    return this.byKey.get(key);
  }

  /**
   * The key's session: reused when the fingerprint is equal and it takes turns; otherwise the old one
   * is closed with 'restart' (waiting for its live children, up to maxDrainMs) and a new one started.
   * Acquires of one key run one after the other.
   */
  acquire(key: string, spec: RunSpec, options?: AcquireOptions): Promise<LiveSession> {
    if (typeof key !== 'string' || key === '') {
      return Promise.reject(
        new ProcwardenError('INVALID_OPTION', 'acquire(key): the key must be a non-empty string.'),
      );
    }
    let checked: AcquireOptions;
    let snapshot: RunSpec;
    let spawned: NormalSpec;
    try {
      checked = checkAcquireOptions(options);
      // Checked and later started from the same copy: the caller may change its object meanwhile.
      snapshot = snapshotSpec(spec);
      spawned = checkLiveSpec(snapshot);
    } catch (error) {
      return Promise.reject(error);
    }
    const previous = this.queues.get(key) ?? Promise.resolve();
    const next = this.unlessAborted(previous, key, snapshot).then(() =>
      this.acquireNow(key, snapshot, spawned, checked),
    );
    // The key's next acquire waits for this one to be over, and for the one before it: an acquire
    // whose signal aborted while it waited gives up its turn, not the order.
    const tail = Promise.all([previous, next.catch(() => undefined)]);
    this.queues.set(key, tail);
    void tail.then(() => {
      if (this.queues.get(key) === tail) this.queues.delete(key);
    });
    return next;
  }

  /** Closes every session with 'shutdown' (at once, children or not); acquire() fails afterwards. */
  async shutdown(): Promise<void> {
    this.shutDown = true;
    await Promise.all([...this.byKey.values()].map((s) => s.close('shutdown', 'pool shutdown')));
  }

  private async acquireNow(
    key: string,
    spec: RunSpec,
    spawned: NormalSpec,
    options: AcquireOptions,
  ): Promise<LiveSession> {
    const fingerprint = options.fingerprint ?? specFingerprint(spec);
    const current = this.byKey.get(key);
    // current.reusable asks its process too: one that exited is never handed out again.
    if (current && current.fingerprint === fingerprint && current.reusable) {
      this.assertOpen();
      current.reclaim();
      return current;
    }
    // A new process is needed: one that cannot start must cost no session, restarted or evicted.
    checkCommandFound(spawned);
    // So is one whose idle timeout is an unusable PROCWARDEN_LIVE_IDLE_TIMEOUT_MS (INVALID_ENV).
    const idleTimeoutMs = options.idleTimeoutMs ?? this.options.idleTimeoutMs ?? this.idleTimeoutFromEnv();
    if (current) {
      if (current.fingerprint !== fingerprint && current.turnActive) {
        throw new ProcwardenError(
          'LIVE_TURN_ACTIVE',
          `acquire(${JSON.stringify(key)}): the fingerprint changed while turn is active on session ${current.id}; end the turn first, then acquire again to restart it.`,
        );
      }
      if (current.fingerprint !== fingerprint) void current.close('restart', 'fingerprint changed');
      await this.unlessAborted(current.closed, key, spec);
    }
    // Before a slot is made: a session that would end at once must not evict one for itself.
    this.assertNotAborted(key, spec);
    await this.reserveSlot(key, spec);
    try {
      return this.start(key, spec, fingerprint, options, idleTimeoutMs);
    } finally {
      this.reserved--;
      const waiters = this.reservationWaiters;
      this.reservationWaiters = [];
      for (const wake of waiters) wake();
    }
  }

  /**
   * Evicts the session idle the longest until a slot is free, or fails when none can go; the free
   * slot is reserved before anything else can run.
   */
  private async reserveSlot(key: string, spec: RunSpec): Promise<void> {
    for (;;) {
      if (this.byKey.size + this.reserved < this.maxSessions) {
        this.assertOpen();
        this.reserved++;
        return;
      }
      this.assertOpen();
      const victim = this.longestIdle();
      if (victim) {
        await this.unlessAborted(
          victim.close('idle', `evicted: maxSessions (${this.maxSessions}) reached`),
          key,
          spec,
        );
        continue;
      }
      const closing = [...this.byKey.values()].find((s) => s.state === 'closing');
      if (closing) {
        await this.unlessAborted(closing.closed, key, spec);
        continue;
      }
      // A run-end close waiting for a late child report: it closes by itself in a moment, unless
      // a child is reported (then it drains like any other, and the loop sees no room).
      const settling = [...this.byKey.values()].find((s) => s.settling);
      if (settling) {
        await this.unlessAborted(settling.settled(), key, spec);
        continue;
      }
      if (this.reserved > 0) {
        // Another acquire is about to start its session: as if the acquires ran one after the
        // other, that session may then be evicted like any idle one.
        await this.unlessAborted(new Promise<void>((wake) => this.reservationWaiters.push(wake)), key, spec);
        continue;
      }
      throw new ProcwardenError(
        'LIVE_SESSION_LIMIT',
        `maxSessions (${this.maxSessions}) reached and no session can be evicted: each has an active turn or live children. End a turn, release children, close a session, or raise maxSessions.`,
      );
    }
  }

  private longestIdle(): LiveSession | undefined {
    let best: LiveSession | undefined;
    for (const session of this.byKey.values()) {
      if (!session.isIdle) continue;
      if (!best || (this.activity.get(session) ?? 0) < (this.activity.get(best) ?? 0)) best = session;
    }
    return best;
  }

  private start(
    key: string,
    spec: RunSpec,
    fingerprint: string,
    options: AcquireOptions,
    idleTimeoutMs: number,
  ): LiveSession {
    this.assertOpen();
    this.assertNotAborted(key, spec);
    const session = new LiveSession({
      key,
      id: `${key}#${++this.counter}`,
      fingerprint,
      spec,
      supervisor: this.supervisor,
      clock: this.clock,
      idleTimeoutMs,
      maxDrainMs: options.maxDrainMs ?? this.options.maxDrainMs ?? DEFAULT_MAX_DRAIN_MS,
      closeOnRunEnd: options.closeOnRunEnd ?? this.options.closeOnRunEnd ?? false,
      maxLineChars: options.maxLineChars ?? this.options.maxLineChars ?? DEFAULT_MAX_LINE_CHARS,
      childTimeoutMs: options.childTimeoutMs ?? this.options.childTimeoutMs ?? DEFAULT_CHILD_TIMEOUT_MS,
      runEndSettleMs: options.runEndSettleMs ?? this.options.runEndSettleMs ?? DEFAULT_RUN_END_SETTLE_MS,
      exits: this.exits,
      observer: (session, name, event) => this.observe(session, name, event),
    });
    this.byKey.set(key, session);
    this.touch(session);
    return session;
  }

  /** A session's event, before its own listeners hear it (see SessionInit.observer). */
  private observe(session: LiveSession, name: keyof LiveSessionEvents, event: unknown): void {
    const forwarded = FORWARDED.find((n) => n === name);
    if (forwarded === undefined) return;
    // Idle since its last turn ended or its last child was released: either counts as work.
    if (forwarded === 'closed') this.forget(session);
    else if (forwarded !== 'close-deferred') this.touch(session);
    this.tell(forwarded, event);
  }

  /**
   * Calls every pool listener of `name`, each on its own (see callListener): one that throws
   * neither silences the others nor reaches the session or the acquire that caused the event.
   */
  private tell(name: keyof LivePoolEvents, event: unknown): void {
    for (const listener of this.rawListeners(name)) {
      callListener(listener, this, [event], (error, how) => this.reportListenerError(name, error, how));
    }
  }

  /**
   * A pool listener failed: a 'warning' event (code LISTENER_THREW) when someone listens for one,
   * else a process warning. A 'warning' listener that fails is reported as a process warning
   * only, so a listener that always throws cannot report itself forever.
   */
  private reportListenerError(name: keyof LivePoolEvents, error: unknown, how: ListenerFailure): void {
    const message = `live session pool: a '${name}' listener ${how === 'threw' ? 'threw' : 'returned a promise that rejected'} (${describeThrown(error)}); the pool carries on, and the event's other listeners were called.`;
    if (name !== 'warning' && this.listenerCount('warning') > 0) {
      const warning: WarningEvent = { code: 'LISTENER_THREW', message, cause: error };
      this.tell('warning', warning);
      return;
    }
    process.emitWarning(new ProcwardenError('LISTENER_THREW', message, { cause: error }));
  }

  private forget(session: LiveSession): void {
    if (this.byKey.get(session.key) === session) this.byKey.delete(session.key);
    this.activity.delete(session);
  }

  private touch(session: LiveSession): void {
    this.activity.set(session, ++this.activitySeq);
  }

  /**
   * Read when a session first needs it and kept for the pool; an unusable value throws INVALID_ENV
   * (and is read again by the next acquire that needs it, which fails the same way until it is fixed).
   */
  private idleTimeoutFromEnv(): number {
    this.envIdleTimeoutMs ??= idleTimeoutFromEnv(this.options.env ?? process.env);
    return this.envIdleTimeoutMs;
  }

  /**
   * What an acquire waits for (its turn among the key's acquires, a restart's drain, room at the
   * limit), given up as soon as the spec's signal aborts: the caller stops waiting at once, as
   * with any abortable call, while what it waited for goes on for others.
   */
  private unlessAborted<T>(waiting: Promise<T>, key: string, spec: RunSpec): Promise<T> {
    const signal = spec.signal;
    if (!signal) return waiting;
    return new Promise<T>((resolve, reject) => {
      const onAbort = () => {
        try {
          this.assertNotAborted(key, spec);
        } catch (error) {
          reject(error);
        }
      };
      const done = whenAborted(signal, onAbort);
      waiting.then(
        (value) => {
          done();
          resolve(value);
        },
        (error) => {
          done();
          reject(error);
        },
      );
      if (signal.aborted) onAbort();
    });
  }

  /**
   * The spec's signal is already aborted: its process would end before it began, so no slot is
   * made and nothing is started for it (as run() starts nothing for an aborted signal).
   */
  private assertNotAborted(key: string, spec: RunSpec): void {
    const signal = spec.signal;
    if (!signal?.aborted) return;
    throw new ProcwardenError(
      'LIVE_SESSION_CLOSED',
      `acquire(${JSON.stringify(key)}): the spec's signal is already aborted (${describeThrown(signal.reason)}); no session was started. Acquire again with a signal that is not aborted.`,
      { cause: signal.reason },
    );
  }

  private assertOpen(): void {
    if (this.shutDown) {
      throw new ProcwardenError(
        'LIVE_SESSION_CLOSED',
        'this LiveSessionPool was shut down; create a new pool to start sessions.',
      );
    }
  }
}

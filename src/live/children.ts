import type { Clock } from '../clock.js';
import type { ExitWatch } from './exit-watch.js';
import { OneShot } from './timer.js';
import type { LiveChildRelease } from './types.js';

/** A background child the session's process started; the session drains until every handle is released. */
export interface LiveChild {
  readonly id: number;
  readonly label: string | undefined;
  /** The process given to attachChild, whose exit releases the handle; undefined when none was. */
  readonly pid: number | undefined;
  /** Released by release(), by its process's exit, by its timeout, or let go because the session closed. */
  readonly released: boolean;
  /** What released it ('session-closed': the session closed first); undefined while it is live. */
  readonly releasedBy: LiveChildRelease | 'session-closed' | undefined;
  /** Idempotent: true the first time, false after (and after the session closed). */
  release(): boolean;
}

/** What attachChild's options come to, checked (see checkChildOptions). */
export interface ChildLimits {
  label: string | undefined;
  pid: number | undefined;
  /** Infinity: no timeout. */
  timeoutMs: number;
}

interface Held {
  /** Stops what could still release it: its timeout and the watch on its process. */
  stop(): void;
  setReleasedBy(by: LiveChildRelease | 'session-closed'): void;
}

/**
 * Counts attached children. Each handle counts once, however it is released: by its holder, by
 * the exit of the process it names, or by its timeout (a lost 'child done' report must not pin a
 * session for ever).
 */
export class ChildRegistry {
  private readonly live = new Map<LiveChild, Held>();
  private counter = 0;

  constructor(
    private readonly clock: Clock,
    private readonly exits: ExitWatch,
    private readonly onAttached: (child: LiveChild) => void,
    private readonly onReleased: (child: LiveChild, by: LiveChildRelease) => void,
  ) {}

  get count(): number {
    return this.live.size;
  }

  attach({ label, pid, timeoutMs }: ChildLimits): LiveChild {
    let releasedBy: LiveChild['releasedBy'];
    const end = (by: LiveChildRelease): boolean => {
      const held = this.live.get(child);
      if (!held) return false;
      this.live.delete(child);
      held.stop();
      releasedBy = by;
      this.onReleased(child, by);
      return true;
    };
    // Closures, not methods: `child.release` handed on as a callback still works.
    const child: LiveChild = {
      id: this.counter + 1,
      label,
      pid,
      get released() {
        return releasedBy !== undefined;
      },
      get releasedBy() {
        return releasedBy;
      },
      release: () => end('caller'),
    };
    // The watch first: it is what can throw (no process table on this platform), and nothing is
    // counted or armed yet. It never calls back before this returns.
    const unwatch = pid === undefined ? undefined : this.exits.watch(pid, () => end('exit'));
    const timer = new OneShot(this.clock, () => end('timeout'));
    try {
      timer.arm(timeoutMs);
    } catch (error) {
      unwatch?.();
      throw error;
    }
    this.counter++;
    this.live.set(child, {
      stop: () => {
        timer.clear();
        unwatch?.();
      },
      setReleasedBy: (by) => {
        releasedBy = by;
      },
    });
    this.onAttached(child);
    return child;
  }

  /** The session closed and its tree is being terminated: every handle is let go, without events. */
  dropAll(): number {
    const n = this.live.size;
    for (const held of this.live.values()) {
      held.stop();
      held.setReleasedBy('session-closed');
    }
    this.live.clear();
    return n;
  }
}

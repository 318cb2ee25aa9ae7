import { ProcwardenError } from '../errors.js';

/** A background child the session's process started; the session drains until every handle is released. */
export interface LiveChild {
  readonly id: number;
  readonly label: string | undefined;
  /** Released by release(), or let go because the session closed. */
  readonly released: boolean;
  /** Idempotent: true the first time, false after (and after the session closed). */
  release(): boolean;
}

/** Counts attached children. Each handle counts once, however often it is released. */
export class ChildRegistry {
  private readonly live = new Set<LiveChild>();
  private counter = 0;

  constructor(
    private readonly onAttached: (child: LiveChild) => void,
    private readonly onReleased: (child: LiveChild) => void,
  ) {}

  get count(): number {
    return this.live.size;
  }

  attach(label: string | undefined): LiveChild {
    if (label !== undefined && typeof label !== 'string') {
      throw new ProcwardenError(
        'INVALID_OPTION',
        `attachChild(label): the label must be a string, got ${typeof label}.`,
      );
    }
    const live = this.live;
    const onReleased = this.onReleased;
    const child: LiveChild = {
      id: ++this.counter,
      label,
      get released() {
        return !live.has(child);
      },
      release() {
        if (!live.delete(child)) return false;
        onReleased(child);
        return true;
      },
    };
    live.add(child);
    this.onAttached(child);
    return child;
  }

  /** The session closed and its tree is being terminated: every handle is let go, without events. */
  dropAll(): number {
    const n = this.live.size;
    this.live.clear();
    return n;
  }
}

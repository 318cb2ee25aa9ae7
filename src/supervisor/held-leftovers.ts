import { type Clock, type TimerHandle, within } from '../clock.js';
import { describeThrown } from '../errors.js';
import type { Members } from '../kill/index.js';
import type { ProcessInfo } from '../tree/index.js';
import type { HoldEnd, TreeSummary } from '../types.js';

/** The first look again soon (a leftover often ends just after its parent), then at most every second. */
const FIRST_LOOK_MS = 50;
const LAST_LOOK_MS = 1000;

/**
 * What a run with `leftovers: 'hold'` holds once its command has exited: its leftovers, watched
 * until they end by themselves or something ends the hold (the run then terminates them).
 */
export class LeftoverHold {
  private endedAs: { endedBy: HoldEnd; detail?: string } | undefined;
  private since: number | undefined;
  private wake: (() => void) | undefined;
  private seen: ProcessInfo[] = [];
  /** Set once the hold is over: what ended it and how long it lasted (RunResult.tree.held). */
  summary: TreeSummary['held'];

  constructor(
    private readonly clock: Clock,
    /** 0: no limit. */
    private readonly holdMs: number,
  ) {}

  /** The hold began: the look for leftovers found some, and they are (or were) held. */
  get begun(): boolean {
    return this.since !== undefined;
  }

  /** Nothing has ended the hold (it may not have begun: the look for leftovers may still run). */
  get open(): boolean {
    return this.endedAs === undefined;
  }

  get endedBy(): HoldEnd | undefined {
    return this.endedAs?.endedBy;
  }

  /** The members held, as last scanned, while the hold lasts. */
  members(): Array<{ pid: number; command: string }> {
    return this.since !== undefined && this.open
      ? this.seen.map(({ pid, command }) => ({ pid, command }))
      : [];
  }

  /** Ends the hold, begun or not: the caller terminates what it held. */
  end(endedBy: HoldEnd, detail?: string): void {
    if (!this.open) return;
    this.endedAs = { endedBy, ...(detail !== undefined ? { detail } : {}) };
    const heldMs = this.since === undefined ? 0 : Math.round(this.clock.now() - this.since);
    this.summary = { ...this.endedAs, heldMs };
    this.wake?.();
  }

  /**
   * Holds `members` until none is left (true) or the hold is ended (false). Polled: they are not
   * our children, so no exit of theirs reaches us (a cgroup's event could, but this serves every
   * containment alike). A scan that cannot rule out a missed member counts as not gone; one that
   * fails holds on, with a note, since nothing says they are gone.
   */
  async hold(
    members: Members,
    scan: () => Promise<Members>,
    onLimit: () => void,
    notes: string[],
  ): Promise<boolean> {
    const { clock } = this;
    this.since = clock.now();
    this.seen = [...members];
    const ended = new Promise<void>((resolve) => {
      this.wake = resolve;
    });
    const limit: TimerHandle | undefined =
      this.holdMs > 0 ? clock.setTimeout(onLimit, this.holdMs) : undefined;
    let noted = false;
    try {
      for (let wait = FIRST_LOOK_MS; this.open; wait = Math.min(wait * 2, LAST_LOOK_MS)) {
        await within(clock, ended, wait);
        if (!this.open) break;
        let now: Members;
        try {
          now = await scan();
        } catch (error) {
          if (!noted)
            notes.push(
              `while holding the leftovers, the process table could not be read (${describeThrown(error)}): they are held until something ends them`,
            );
          noted = true;
          continue;
        }
        if (!this.open) break;
        if (now.length === 0 && now.unconfirmed === undefined) {
          this.end('themselves');
          return true;
        }
        this.seen = [...now];
      }
      return false;
    } finally {
      if (limit !== undefined) clock.clearTimeout(limit);
    }
  }
}

import type { Clock } from '../clock.js';
import { OneShot } from './timer.js';
import type { LiveTurnOutcome, TurnEndEvent, TurnOptions } from './types.js';

/** What a turn needs from its session. */
export interface TurnHost {
  readonly clock: Clock;
  /** Clock time of the process's last output. */
  lastOutputAt(): number;
  /** Ends the turn (once) with this outcome; timeouts then close the session with 'abort'. */
  endTurn(turn: LiveTurn, outcome: LiveTurnOutcome): void;
}

/**
 * One request/response exchange with the session's process. Only one is active per session; it
 * ends with end(), a timeout, or the session closing. Children attached during a turn outlive it.
 */
export class LiveTurn {
  /** Resolves when the turn ended, whatever the way. Never rejects. */
  readonly ended: Promise<TurnEndEvent>;
  readonly startedAt: number;
  private resolveEnded!: (event: TurnEndEvent) => void;
  private readonly overall: OneShot;
  private readonly silence: OneShot;
  private over = false;

  constructor(
    readonly id: number,
    private readonly host: TurnHost,
    private readonly options: Required<TurnOptions>,
  ) {
    this.ended = new Promise((resolve) => {
      this.resolveEnded = resolve;
    });
    this.startedAt = host.clock.now();
    this.overall = new OneShot(host.clock, () => host.endTurn(this, 'overall-timeout'));
    this.silence = new OneShot(host.clock, () => this.checkSilence());
    if (options.timeoutMs > 0) this.overall.arm(options.timeoutMs);
    if (options.noOutputTimeoutMs > 0) this.silence.arm(options.noOutputTimeoutMs);
  }

  get active(): boolean {
    return !this.over;
  }

  /** Completes the turn. Idempotent; a no-op once the turn ended another way. */
  end(): void {
    this.host.endTurn(this, 'completed');
  }

  /** Called by the session, exactly once. */
  settle(event: TurnEndEvent): void {
    this.over = true;
    this.overall.clear();
    this.silence.clear();
    this.resolveEnded(event);
  }

  /** Re-armed lazily from the last output: a timer per output chunk would cost more than the chunk. */
  private checkSilence(): void {
    const since = Math.max(this.startedAt, this.host.lastOutputAt());
    const left = this.options.noOutputTimeoutMs - (this.host.clock.now() - since);
    if (left > 0) this.silence.arm(left);
    else this.host.endTurn(this, 'no-output-timeout');
  }
}

import type { LaunchPlan } from '../containment/index.js';
import type { TerminalReader } from '../tree/index.js';
import type { PtyOptions } from '../types.js';

/** What the terminal reports to its launcher. */
export interface PtyCallbacks {
  /** A returned promise holds the reading (a slow consumer): the command blocks on a full terminal. */
  data(chunk: Buffer): PromiseLike<void> | undefined;
  /** The command's exit status has been collected (its output may still be draining). */
  exit(code: number | null, signal: NodeJS.Signals | null): void;
  /** Every byte written has been taken by the terminal, or dropped because the run is over. */
  drained(): void;
}

/** A command on a pseudo-terminal, whichever platform made it. */
export interface PtyTerminal {
  readonly pid: number;
  /** Keystrokes into the terminal; returns how many bytes now wait for the terminal to take them. */
  write(data: Buffer | string): number;
  resize(cols: number, rows: number): void;
  /**
   * Whether the command's foreground waits for input now (see terminalReader); absent where the
   * platform cannot tell, and end-of-input is then typed at once.
   */
  reader?(): TerminalReader;
  /** Resolves once the terminal is closed by every holder and its output read to the end. */
  readonly outputDone: Promise<void>;
  /** Stops reading and closes procwarden's side of the terminal (after the drain window). */
  release(): void;
}

/** Opens terminals on one platform; loaded lazily, since node-pty is optional. */
export interface PtyDriver {
  open(plan: LaunchPlan, size: Required<PtyOptions>, on: PtyCallbacks): PtyTerminal;
}

import { EventEmitter } from 'node:events';
import { createRequire } from 'node:module';
import { checkInput } from '../options/index.js';
import type { RunStdin } from '../types.js';
import { type PtyPlatform, ptyPlatform } from './pty-platform.js';
import type { PtyDriver, PtyTerminal } from './pty-terminal.js';
import type { Launched, Launcher } from './types.js';

export interface PtyLauncherOptions {
  /** How node-pty is required (default: from procwarden's own location). Tests inject failures and fakes. */
  requireModule?: (id: string) => unknown;
  /** Whose PTY conventions apply (default: this host's). */
  platform?: NodeJS.Platform;
}

/**
 * Launches the plan's file on a pseudo-terminal. On Unix the command leads a new session with the
 * terminal as its controlling tty (forkpty does setsid), so the same containment and termination
 * sequence as child mode apply; stdout and stderr are one stream, 'pty'.
 */
export function createPtyLauncher(options: PtyLauncherOptions = {}): Launcher {
  const platform = ptyPlatform(options.platform ?? process.platform);
  let loaded: PtyDriver | undefined;
  // Only a pty run pays for the require machinery and node-pty: every Supervisor makes a launcher.
  const load = () => {
    loaded ??= platform.driver(options.requireModule ?? createRequire(import.meta.url));
    return loaded;
  };

  const launcher: Launcher = (plan, launch, events) => {
    const driver = load();
    const refusal = platform.cannotExecute(plan);
    if (refusal) throw refusal;
    let released = false;
    let exited = false;
    let input: PtyInput | undefined;
    const term = driver.open(plan, launch.pty, {
      data(chunk) {
        // A promise means a consumer is behind: the driver stops reading the terminal until it settles.
        return released ? undefined : events.output('pty', chunk);
      },
      exit(code, signal) {
        exited = true;
        events.exited(code, signal);
      },
      drained() {
        input?.drained();
      },
    });
    events.spawned();

    input = new PtyInput(term, platform, () => exited);
    if (launch.stdin.kind === 'data') {
      input.write(launch.stdin.data);
      input.end();
    }
    const handle: Launched = {
      pid: term.pid,
      stdin: launch.stdin.kind === 'pipe' ? input : undefined,
      outputDone: term.outputDone,
      releaseOutput() {
        released = true;
        term.release();
      },
      resize(cols, rows) {
        term.resize(cols, rows);
      },
    };
    return handle;
  };
  launcher.preflight = () => {
    load();
  };
  return launcher;
}

/**
 * Input the terminal has not taken yet, above which write() returns false: a writer that waits for
 * 'drain' holds at most this much (plus its last chunk) in memory, however fast it produces.
 */
export const PTY_INPUT_HIGH_WATER = 64 * 1024;

/**
 * Keystrokes into the terminal, with a Writable's backpressure: write() says false once too much
 * waits for a program that does not read, and 'drain' says when to go on. end() types
 * end-of-input the way a user at the keyboard would.
 */
class PtyInput extends EventEmitter implements RunStdin {
  private ended = false;
  private lineOpen = false;
  private owed = false;
  private draining = false;

  constructor(
    private readonly term: PtyTerminal,
    private readonly platform: PtyPlatform,
    private readonly exited: () => boolean,
  ) {
    super();
  }

  /** The terminal took what was queued (or the run dropped it). */
  drained(): void {
    if (!this.owed || this.draining) return;
    this.draining = true;
    // As a Writable does: never from inside the write() that a listener may be making, and once
    // for the false writes made before it goes out.
    process.nextTick(() => {
      this.draining = false;
      this.owed = false;
      this.emit('drain');
    });
  }

  get writable(): boolean {
    return !this.ended && !this.exited();
  }

  write(data: string | Uint8Array): boolean {
    const input = checkInput(data);
    if (!this.writable) {
      // Dropped: a writer waiting for 'drain' must still go on.
      this.owed = true;
      this.drained();
      return false;
    }
    const bytes = typeof input === 'string' ? Buffer.from(input, 'utf8') : Buffer.from(input);
    if (bytes.length === 0) return true;
    const last = bytes[bytes.length - 1];
    this.lineOpen = last !== 0x0a && last !== 0x0d;
    if (this.term.write(bytes) <= PTY_INPUT_HIGH_WATER) return true;
    this.owed = true;
    return false;
  }

  /**
   * A terminal has no end of input, only a key the line discipline reads as one (VEOF, ^D) in
   * canonical mode, and a line editor in raw mode. Typed while the command is still setting its
   * terminal up, it is read in a mode other than the one it was typed in, and lost: a REPL goes
   * raw for its line editor once started, and the ^D taken in canonical mode reaches it as a NUL
   * (`printf 'print(1)\n' | run --pty -- python3` never ended). So, as script(1) does, the key
   * waits until the command has taken the input before it and waits for more; at most
   * END_OF_INPUT_WAIT_MS, for a command that never comes to read.
   */
  end(): void {
    if (this.ended) return;
    this.ended = true;
    this.typeEndWhenRead(performance.now());
  }

  private typeEndWhenRead(since: number, waitedOnce = false): void {
    if (this.exited()) return;
    // Only the platform can see the reader; bytes still queued for the terminal are not taken yet.
    const see = this.term.reader?.bind(this.term);
    const reader = !see ? 'unknown' : this.term.write(EMPTY) > 0 ? 'busy' : see();
    const late = performance.now() - since >= END_OF_INPUT_WAIT_MS;
    // 'waiting' twice in a row: input written just before may still be on its way to the reader
    // (the kernel hands it to the line discipline from a work queue).
    if (reader === 'unknown' || late || (reader === 'waiting' && waitedOnce)) {
      this.term.write(this.platform.endOfInput(this.lineOpen));
      return;
    }
    const timer = setTimeout(() => this.typeEndWhenRead(since, reader === 'waiting'), END_OF_INPUT_POLL_MS);
    timer.unref();
  }
}

/** How long end-of-input waits for the command to come to read, before it is typed anyway. */
export const END_OF_INPUT_WAIT_MS = 10_000;
const END_OF_INPUT_POLL_MS = 10;
const EMPTY = Buffer.alloc(0);

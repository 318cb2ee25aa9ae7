import { createRequire } from 'node:module';
import type { RunStdin } from '../types.js';
import { loadPtyModule, type PtyModule, type PtyProcess } from './pty-module.js';
import { type PtyPlatform, ptyPlatform } from './pty-platform.js';
import type { Launched, Launcher } from './types.js';

export interface PtyLauncherOptions {
  /** How node-pty is required (default: from procwarden's own location). Tests inject failures and fakes. */
  requireModule?: (id: string) => unknown;
  /** Whose PTY conventions apply (default: this host's). */
  platform?: NodeJS.Platform;
}

/**
 * Launches the plan's file on a pseudo-terminal through node-pty. On Unix the command leads a new
 * session with the terminal as its controlling tty (node-pty's forkpty does setsid), so the same
 * containment and termination sequence as child mode apply; stdout and stderr are one stream, 'pty'.
 */
export function createPtyLauncher(options: PtyLauncherOptions = {}): Launcher {
  const platform = ptyPlatform(options.platform ?? process.platform);
  let loaded: PtyModule | undefined;
  // Only a pty run pays for the require machinery and node-pty: every Supervisor makes a launcher.
  const load = () => {
    loaded ??= loadPtyModule(options.requireModule ?? createRequire(import.meta.url));
    return loaded;
  };

  const launcher: Launcher = (plan, launch, events) => {
    const pty = load();
    const refusal = platform.cannotExecute(plan);
    if (refusal) throw refusal;
    const term = pty.spawn(plan.file, plan.args, {
      name: launch.pty.term,
      cols: launch.pty.cols,
      rows: launch.pty.rows,
      cwd: plan.cwd,
      env: plan.env,
      encoding: null,
    });

    let released = false;
    let closed = false;
    let ended!: () => void;
    const outputDone = new Promise<void>((resolve) => {
      ended = resolve;
    });
    // node-pty rethrows terminal errors other than EIO when nobody else listens; the exit event
    // still follows, and a terminal error must never take the host down.
    term.on?.('error', () => {});
    const emit = (data: Buffer | string) => {
      if (!released) events.output('pty', typeof data === 'string' ? Buffer.from(data, 'utf8') : data);
    };
    term.onData(emit);
    // Runs before node-pty closes the master: what libuv left unread is still there to read.
    term.on?.('end', () => {
      for (const chunk of platform.unreadTail(term.fd)) emit(chunk);
    });
    // node-pty reports the exit only once the terminal has been read to its end (EIO when the last
    // holder of the slave closed it), or 200 ms after the exit if others still hold it open.
    term.onExit((e) => {
      closed = true;
      ended();
      const { code, signal } = platform.exitStatus(e);
      events.exited(code, signal);
    });
    events.spawned();

    const input = new PtyInput(term, platform, () => closed);
    if (launch.stdin.kind === 'data') {
      input.write(launch.stdin.data);
      input.end();
    }
    const handle: Launched = {
      pid: term.pid,
      stdin: launch.stdin.kind === 'pipe' ? input : undefined,
      outputDone,
      releaseOutput() {
        released = true;
      },
      resize(cols, rows) {
        if (closed) return;
        try {
          term.resize(cols, rows);
        } catch {
          // The terminal closed under us (EBADF): a size no one will read is not an error.
        }
      },
    };
    return handle;
  };
  launcher.preflight = () => {
    load();
  };
  return launcher;
}

/** Keystrokes into the terminal. end() types end-of-input the way a user at the keyboard would. */
class PtyInput implements RunStdin {
  private ended = false;
  private lineOpen = false;

  constructor(
    private readonly term: PtyProcess,
    private readonly platform: PtyPlatform,
    private readonly closed: () => boolean,
  ) {}

  write(data: string | Uint8Array): boolean {
    if (this.ended || this.closed()) return false;
    const bytes = typeof data === 'string' ? Buffer.from(data, 'utf8') : Buffer.from(data);
    if (bytes.length === 0) return true;
    const last = bytes[bytes.length - 1];
    this.lineOpen = last !== 0x0a && last !== 0x0d;
    this.term.write(bytes);
    return true;
  }

  end(): void {
    if (this.ended) return;
    this.ended = true;
    if (!this.closed()) this.term.write(this.platform.endOfInput(this.lineOpen));
  }
}

import { closeSync, constants, fstatSync, openSync, writeSync } from 'node:fs';
import { Writable } from 'node:stream';
import { tty } from '../lazy-builtins.js';

/** A write that could not finish at once: settled once it is out, or with the error that refused it. */
export type Pending = Promise<NodeJS.ErrnoException | null>;

/** After the run: a terminal that has taken nothing for this long is left behind, as `timeout 2 yes` leaves `yes`'s last write. */
const STALL_MS = 1000;
/** Retries of a write the terminal could not take yet: soon at first, then no more than 20 a second. */
const FIRST_RETRY_MS = 1;
const LAST_RETRY_MS = 50;

interface Queued {
  bytes: Uint8Array;
  done: (error: NodeJS.ErrnoException | null) => void;
}

/**
 * Output to a terminal that never blocks procwarden (the CLI's stdout and stderr, an output.file
 * that names a terminal). Node writes to a terminal with a blocking
 * write(2) (libuv), so a terminal that stops reading (Ctrl-S, a stalled ssh link) froze the event
 * loop: no timeout fired, no signal was acted on. This writes to a description of the terminal of
 * its own, opened non-blocking: the shell and the command share fd 1's, and must keep it blocking.
 * A write the terminal cannot take yet waits, retried on a timer, and holds the command (its
 * promise) as a full pipe would. Not the thread pool: a write(2) blocked there cannot be
 * abandoned, and Node's exit waits for it.
 */
export class TerminalOut {
  private readonly queue: Queued[] = [];
  private retry: NodeJS.Timeout | undefined;
  private delay = FIRST_RETRY_MS;
  /** When the terminal last took bytes, or the queue last began to wait. */
  private lastProgress = 0;
  private ending = false;
  private abandoned = false;
  private drainWaiters: (() => void)[] = [];

  constructor(private readonly fd: number) {}

  /** Null when all of `bytes` is out (or dropped); a promise otherwise. */
  write(bytes: Uint8Array): Pending | null {
    if (this.queue.length === 0) {
      const result = this.attempt(bytes);
      if (result === 'done') return null;
      if (result instanceof Error) return Promise.resolve(result);
      if (this.abandoned) return null;
      bytes = result;
      this.lastProgress = Date.now();
    }
    return new Promise((done) => {
      this.queue.push({ bytes, done });
      this.schedule();
    });
  }

  /**
   * The run is over: from now on a terminal that takes nothing for STALL_MS has what is queued
   * dropped, and every later write that it cannot take at once.
   */
  end(): void {
    this.ending = true;
  }

  /** Stops at once: what is queued is dropped, no retry is left pending (the fd is the caller's to close). */
  close(): void {
    if (this.retry) clearTimeout(this.retry);
    this.retry = undefined;
    this.abandon();
  }

  /** Resolves once nothing is queued: all of it written, refused, or dropped. */
  drained(): Promise<void> {
    if (this.queue.length === 0) return Promise.resolve();
    return new Promise((resolve) => this.drainWaiters.push(resolve));
  }

  /** One write(2): 'done', what is left, or the error that refused it. */
  private attempt(bytes: Uint8Array): 'done' | Uint8Array | NodeJS.ErrnoException {
    let rest = bytes;
    try {
      while (rest.length > 0) {
        rest = rest.subarray(writeSync(this.fd, rest));
        this.lastProgress = Date.now();
        this.delay = FIRST_RETRY_MS;
      }
      return 'done';
    } catch (error) {
      const e = error as NodeJS.ErrnoException;
      return e.code === 'EAGAIN' ? rest : e;
    }
  }

  private schedule(): void {
    if (this.retry || this.queue.length === 0) return;
    this.retry = setTimeout(() => {
      this.retry = undefined;
      this.pump();
    }, this.delay);
    this.delay = Math.min(this.delay * 2, LAST_RETRY_MS);
  }

  private pump(): void {
    while (this.queue.length > 0) {
      const head = this.queue[0] as Queued;
      const result = this.attempt(head.bytes);
      if (result === 'done' || result instanceof Error) {
        this.queue.shift();
        head.done(result === 'done' ? null : result);
        continue;
      }
      head.bytes = result;
      if (this.ending && Date.now() - this.lastProgress >= STALL_MS) this.abandon();
      else this.schedule();
      return;
    }
    this.wake();
  }

  private abandon(): void {
    this.abandoned = true;
    for (const item of this.queue.splice(0)) item.done(null);
    this.wake();
  }

  private wake(): void {
    for (const resolve of this.drainWaiters.splice(0)) resolve();
  }
}

/** Our terminals among stdout (1) and stderr (2), written without blocking. */
export interface TerminalOuts {
  /** The writer for this descriptor, when it is a terminal opened anew. */
  readonly 1?: TerminalOut;
  readonly 2?: TerminalOut;
  /** The run is over: a terminal that has stalled may have the rest dropped. */
  end(): void;
  /** Resolves once every writer has nothing queued. */
  drained(): Promise<void>;
}

/**
 * The terminals among stdout and stderr, each with a writer of its own description: one writer
 * when both are the same terminal, so that our own lines keep their place after the command's
 * output. Linux only: /proc/self/fd opens the terminal anew (elsewhere /dev/fd duplicates the
 * descriptor, and O_NONBLOCK would reach the shell's). A terminal that cannot be opened (not ours
 * to open) is written as before, through Node's blocking stream.
 */
export function terminalOuts(): TerminalOuts {
  const outs: { 1?: TerminalOut; 2?: TerminalOut } = {};
  const byDevice = new Map<number, TerminalOut>();
  for (const fd of process.platform === 'linux' ? ([1, 2] as const) : []) {
    try {
      if (!tty().isatty(fd)) continue;
      const device = fstatSync(fd).rdev;
      let out = byDevice.get(device);
      if (!out) {
        const { O_WRONLY, O_NOCTTY, O_NONBLOCK } = constants;
        out = new TerminalOut(openSync(`/proc/self/fd/${fd}`, O_WRONLY | O_NOCTTY | O_NONBLOCK));
        byDevice.set(device, out);
      }
      outs[fd] = out;
    } catch {
      // Not opened: this one goes through Node's stream, as it always did.
    }
  }
  const all = [...byDevice.values()];
  return {
    ...outs,
    end: () => {
      for (const out of all) out.end();
    },
    drained: async () => {
      await Promise.all(all.map((out) => out.drained()));
    },
  };
}

/**
 * A Writable over a terminal fd opened O_NONBLOCK (output.file naming /dev/tty, /dev/pts/N): a
 * file stream takes the terminal's EAGAIN for a failure, and Node's terminal stream writes with a
 * blocking write(2), which would hold the host's event loop while the terminal's reader is slow.
 * Closes the fd when it is done.
 */
export function terminalStream(fd: number): Writable {
  const out = new TerminalOut(fd);
  return new Writable({
    write(chunk: Uint8Array, _encoding, callback) {
      const pending = out.write(chunk);
      if (!pending) callback();
      else pending.then((error) => callback(error ?? undefined));
    },
    destroy(error, callback) {
      out.close();
      try {
        closeSync(fd);
      } catch {
        // already closed
      }
      callback(error);
    },
  });
}

import { closeSync, constants, openSync } from 'node:fs';
import { tty } from '../lazy-builtins.js';
import { MAX_PTY_CELLS } from '../options/index.js';
import type { PtyOptions, RunHandle } from '../types.js';
import { inForeground } from './foreground.js';
import { onJobControl } from './job-control.js';

/** How `procwarden run --pty` connects procwarden's own stdin and window to the command's terminal. */
export interface PtyConnection {
  /** The terminal the command gets: our window's size and TERM when we are on a terminal. */
  readonly pty: PtyOptions;
  /** Starts passing input (and window sizes) to the run; returns what undoes it, idempotent. */
  attach(handle: RunHandle): () => void;
}

/**
 * From a terminal, procwarden steps aside as a terminal emulator would: its stdin goes raw, so
 * every keystroke (Ctrl-C and Ctrl-D included) reaches the command's terminal as a byte and the
 * command decides what it means; the window size follows ours (SIGWINCH, seen as stdout 'resize').
 * From a pipe or a file, the input is typed into the terminal and ended with EOT when it ends.
 * `env` is the run's own (--env): a TERM there is the command's, not ours.
 */
export function connectPty(env: Readonly<Record<string, string>> = {}): PtyConnection {
  const stdin = process.stdin;
  const { window, windowFd, closeWindow } = openWindow(stdin);
  const size = sizeOf(window) ?? {};
  // pty.term outranks the run's env.TERM: a TERM the caller asked for (--env) must reach the command.
  const term = stdin.isTTY && process.env.TERM && env.TERM === undefined ? { term: process.env.TERM } : {};
  return {
    pty: { ...size, ...term },
    attach(handle) {
      let attached = true;
      // The stream our keystrokes come from: process.stdin, then, after each stop, one opened anew.
      let input: NodeJS.ReadStream = stdin;
      // Held while the command's terminal has a full queue: a pipe (`yes |`) that outruns a command
      // which reads slowly, or never, waits in the kernel instead of in our memory.
      const resume = () => {
        if (attached) input.resume();
      };
      const typed = (chunk: Buffer) => {
        // Keys read before a SIGCONT handler ran (after a SIGSTOP nothing of ours ran to let the
        // terminal go) or before a SIGWINCH was heard: the command gets the window's size first.
        if (window && tty().isatty(windowFd)) refreshSize(window);
        const stdin = handle.stdin;
        if (stdin?.write(chunk) !== false) return;
        input.pause();
        // Over (the command exited): left paused until detach, so keys typed meanwhile stay in our
        // terminal for the shell, and a pipe is not read and dropped as fast as it comes.
        if (stdin.writable) stdin.once('drain', resume);
      };
      const ended = () => handle.stdin?.end();
      const resized = (now = sizeOf(window)) => {
        if (!now) return;
        try {
          handle.resize(now.cols, now.rows);
        } catch {
          // The command's terminal is gone (the run ended): there is nothing left to resize.
        }
      };
      // Raw mode outlives us unless undone: 'exit' also runs after an uncaught exception and
      // process.exit(); a stop signal ends the run, whose end calls detach().
      const rawMode = (on: boolean) => {
        if (!input.isTTY) return;
        try {
          input.setRawMode(on);
        } catch {
          // Our terminal was hung up (its window closed, SIGHUP): there is no mode left to set.
        }
      };
      const restore = () => rawMode(false);
      // Closed by release(), to be opened anew by reclaim(); not a reader that ended by itself.
      let released = false;
      // The command is gone; its leftovers may take their grace.
      let over = false;

      const listen = (stream: NodeJS.ReadStream) => {
        input = stream;
        // A terminal hung up: its SIGHUP ends the run; a read error must not end procwarden first.
        if (stream !== stdin) stream.on('error', () => {});
        stream.on('data', typed);
        if (!stream.isTTY) stream.once('end', ended);
        stream.resume();
      };
      const unlisten = () => {
        handle.stdin?.off('drain', resume);
        input.off('data', typed);
        input.off('end', ended);
        // A reader left on stdin would keep procwarden alive after the run.
        input.destroy();
      };
      // Started in the background (`run --pty ... &`), procwarden leaves the terminal to the shell
      // until `fg`, as after a `bg`: setting its mode, or reading it, from there would stop us by
      // SIGTTOU (or SIGTTIN) before the timeouts and the watchdog were running.
      const held = !stdin.isTTY || inForeground();
      if (!held) released = true;
      else if (stdin.isTTY) stdin.setRawMode(true);
      // Without a terminal on either side there is nothing to give back or to measure.
      const endJobControl = !(stdin.isTTY || window)
        ? () => {}
        : onJobControl(held, {
            release() {
              restore();
              // Closed here, in the foreground. libuv resets a terminal whose mode it ever set when
              // it closes it (Node 22 and later) or at exit: from the background (a `kill %1` ends
              // the stopped run there), that stops us with SIGTTOU and leaves the job stopped.
              if (input.isTTY && !input.destroyed) {
                unlisten();
                released = true;
              }
            },
            reclaim() {
              if (over) return;
              if (released && attached) {
                released = false;
                let fresh: NodeJS.ReadStream;
                try {
                  fresh = new (tty().ReadStream)(0) as NodeJS.ReadStream;
                } catch {
                  // The terminal hung up while we were stopped: its SIGHUP ends the run.
                  return;
                }
                listen(fresh);
              }
              // A window changed while we were stopped sent its SIGWINCH to the shell, not to us.
              // The command gets the size the terminal holds now, before the terminal goes raw
              // again: what is typed from then on, keys typed ahead of `fg` too, reaches a command
              // that already has it. Not once the terminal has hung up: the stream would emit an
              // 'error' that `run` takes for a failed write of the output.
              if (window && tty().isatty(windowFd)) {
                if (!refreshSize(window)) process.kill(process.pid, 'SIGWINCH');
                resized();
              }
              // Node skips a switch to the mode it believes set, and after a SIGSTOP the shell may
              // have put the terminal back in its own mode meanwhile.
              if (input.isTTY && input.isRaw) restore();
              rawMode(true);
            },
          });
      process.on('exit', restore);
      window?.on('resize', resized);
      // Node follows SIGWINCH for process.stdout and process.stderr only; a window opened here
      // (/dev/tty) is asked for its size on each.
      const winched = () => refreshSize(window as NodeJS.WriteStream);
      if (window && windowFd > 2) process.on('SIGWINCH', winched);
      if (held) listen(stdin);
      // Closed now, while no mode of ours is set: closing it later from the background is safe too.
      else unlisten();
      // Once the command is gone, nothing more is read: keys typed while its leftovers end stay in
      // our terminal, cooked again, for the shell; a pipe keeps the rest of its input. A terminal
      // is closed here (a paused one still reads a chunk into Node's buffer, and loses it).
      void handle.commandEnded.then(() => {
        over = true;
        if (!attached) return;
        if (input.isTTY && !input.destroyed) {
          restore();
          unlisten();
          released = true;
        } else input.pause();
      });
      return () => {
        if (!attached) return;
        attached = false;
        endJobControl();
        if (!input.destroyed) restore();
        process.off('exit', restore);
        window?.off('resize', resized);
        process.off('SIGWINCH', winched);
        closeWindow();
        unlisten();
      };
    },
  };
}

/**
 * The terminal whose window the command's terminal follows: stdout's, else stderr's, as a terminal
 * emulator's; with both redirected (`> f 2>&1`, `| tee`, `$(...)`) while stdin is a terminal, that
 * terminal's, opened as /dev/tty (as script(1) sizes from the terminal it has). It used to be
 * stdout's only: a command in `procwarden run --pty ... | tee log` got 120 x 30 and no resize.
 */
function openWindow(stdin: NodeJS.ReadStream): {
  window: NodeJS.WriteStream | null;
  windowFd: number;
  closeWindow(): void;
} {
  const none = { window: null, windowFd: -1, closeWindow() {} };
  if (process.stdout.isTTY) return { ...none, window: process.stdout, windowFd: 1 };
  if (process.stderr.isTTY) return { ...none, window: process.stderr, windowFd: 2 };
  if (!stdin.isTTY) return none;
  let fd: number;
  try {
    fd = openSync('/dev/tty', constants.O_RDWR | constants.O_NOCTTY);
  } catch {
    // No controlling terminal (stdin is a terminal of another session): no window to follow.
    return none;
  }
  try {
    const window = new (tty().WriteStream)(fd);
    return { window, windowFd: fd, closeWindow: () => window.destroy() };
  } catch {
    closeSync(fd);
    return none;
  }
}

/**
 * Our window's size, when it has one a terminal can take: a terminal that reports 0 x 0 (a serial
 * console, some `docker exec -t` and `script` set-ups, or `stty cols 0 rows 0`) has no size to
 * pass on, and the command's terminal keeps its own (the default at the start).
 */
function sizeOf(window: NodeJS.WriteStream | null): { cols: number; rows: number } | null {
  return window ? fitting(window.columns, window.rows) : null;
}

/**
 * Has Node ask the terminal for the window's size now, emitting 'resize' on a change; false where
 * it cannot. Its columns and rows (getWindowSize() too) change only on a SIGWINCH, and one we send
 * ourselves is handled after the input already waiting (libuv runs signal watchers last): too late
 * for keys typed ahead. Its _refreshSize() is that ioctl, done at once.
 */
function refreshSize(window: NodeJS.WriteStream): boolean {
  const refresh = (window as NodeJS.WriteStream & { _refreshSize?: () => void })._refreshSize;
  if (typeof refresh !== 'function') return false;
  refresh.call(window);
  return true;
}

function fitting(cols: number, rows: number): { cols: number; rows: number } | null {
  const fits = (n: number) => Number.isInteger(n) && n >= 1 && n <= MAX_PTY_CELLS;
  return fits(cols) && fits(rows) ? { cols, rows } : null;
}

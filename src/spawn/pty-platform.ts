import { accessSync, constants, readSync, statSync } from 'node:fs';
import { delimiter, isAbsolute, join } from 'node:path';
import type { LaunchPlan } from '../containment/index.js';
import { signalName } from '../options/index.js';

/**
 * Everything about a PTY that differs between Unix (a pseudo-terminal pair, forkpty + setsid) and
 * Windows (ConPTY). The launcher is written once against this; node-pty's own
 * unixTerminal/windowsTerminal split is the model.
 */
export interface PtyPlatform {
  /**
   * Why `plan.file` cannot be executed, or null. Checked before the spawn because a failed exec
   * inside the PTY would otherwise look like a command that printed an error and exited 1.
   */
  cannotExecute(plan: LaunchPlan): NodeJS.ErrnoException | null;
  /** The keystrokes that mean end-of-input; `lineOpen`: the last input did not end a line. */
  endOfInput(lineOpen: boolean): string;
  /**
   * Output still in the terminal when node's stream reported end-of-file on its master `fd`.
   * (libuv treats POLLHUP after a short read as EOF, while a PTY master whose slave just closed can
   * still hold the tail of the output: up to tens of kilobytes of a fast writer, lost otherwise.)
   */
  unreadTail(fd: number | undefined): Buffer[];
  /** node-pty's exit event, as a run reports it. */
  exitStatus(e: { exitCode: number; signal?: number }): {
    code: number | null;
    signal: NodeJS.Signals | null;
  };
}

/**
 * Unix: Ctrl-D ends input at the start of a line; after a partial line the first one only delivers
 * that line, so a second one is needed. node-pty reports a signal death as exitCode 0 + signal number.
 */
const unix: PtyPlatform = {
  cannotExecute: (plan) => unixExecCheck(plan),
  endOfInput: (lineOpen) => (lineOpen ? '\x04\x04' : '\x04'),
  unreadTail: (fd) => (fd === undefined ? [] : readUntilClosed(fd)),
  exitStatus: ({ exitCode, signal }) =>
    signal ? { code: null, signal: signalName(signal) ?? null } : { code: exitCode, signal: null },
};

/**
 * Windows ConPTY: Ctrl-Z then Enter at the start of a line is end-of-input for console programs.
 * There are no signals: node-pty reports an exit code only. CreateProcess searches PATH/PATHEXT
 * itself and node-pty throws when it fails, which the run reports as a spawn error.
 */
const windows: PtyPlatform = {
  cannotExecute: () => null,
  endOfInput: (lineOpen) => (lineOpen ? '\r\x1a\r' : '\x1a\r'),
  // ConPTY output comes through a named pipe that ends only after everything was read.
  unreadTail: () => [],
  exitStatus: ({ exitCode }) => ({ code: exitCode, signal: null }),
};

export function ptyPlatform(platform: NodeJS.Platform): PtyPlatform {
  return platform === 'win32' ? windows : unix;
}

/** execvp's search: a name with a slash is a path; otherwise PATH (from the run's env) is searched. */
function unixExecCheck(plan: LaunchPlan): NodeJS.ErrnoException | null {
  const base = plan.cwd ?? process.cwd();
  const candidates = plan.file.includes('/')
    ? [isAbsolute(plan.file) ? plan.file : join(base, plan.file)]
    : (plan.env.PATH ?? '/usr/bin:/bin')
        .split(delimiter)
        .map((dir) => join(dir === '' ? base : dir, plan.file));
  let denied = false;
  for (const path of candidates) {
    try {
      if (!statSync(path).isFile()) {
        denied = true; // execvp says EACCES for a directory
        continue;
      }
      accessSync(path, constants.X_OK);
      return null;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'EACCES') denied = true;
    }
  }
  const code = denied ? 'EACCES' : 'ENOENT';
  return Object.assign(new Error(`spawn ${plan.file} ${code}`), {
    code,
    syscall: `spawn ${plan.file}`,
    path: plan.file,
  });
}

/**
 * Reads a non-blocking PTY master until the kernel has nothing more: EIO once the slave is closed
 * and drained (EAGAIN if someone reopened it). Never waits, so it is bounded by the terminal buffer.
 */
function readUntilClosed(fd: number): Buffer[] {
  const chunks: Buffer[] = [];
  for (;;) {
    const buffer = Buffer.alloc(65536);
    let n: number;
    try {
      n = readSync(fd, buffer, 0, buffer.length, null);
    } catch {
      return chunks;
    }
    if (n === 0) return chunks;
    chunks.push(buffer.subarray(0, n));
  }
}

import { accessSync, constants, statSync } from 'node:fs';
import { delimiter, isAbsolute, join } from 'node:path';
import type { LaunchPlan } from '../containment/index.js';
import { interpreterMissing } from './command-path.js';
import { loadPtyModule, loadUnixPtyBinding } from './pty-module.js';
import type { PtyDriver } from './pty-terminal.js';
import { openUnixTerminal } from './pty-unix.js';
import { openConpty } from './pty-windows.js';

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
  /** Loads what opens terminals here (throws PTY_UNAVAILABLE). */
  driver(requireModule: (id: string) => unknown): PtyDriver;
}

/** Unix: Ctrl-D ends input at the start of a line; after a partial line the first one only delivers that line. */
const unix: PtyPlatform = {
  cannotExecute: (plan) => unixExecCheck(plan),
  endOfInput: (lineOpen) => (lineOpen ? '\x04\x04' : '\x04'),
  driver(requireModule) {
    const binding = loadUnixPtyBinding(requireModule);
    return { open: (plan, size, on) => openUnixTerminal(binding, plan, size, on) };
  },
};

/**
 * Windows ConPTY: Ctrl-Z then Enter at the start of a line is end-of-input for console programs.
 * CreateProcess searches PATH/PATHEXT itself and node-pty throws when it fails, which the run
 * reports as a spawn error.
 */
const windows: PtyPlatform = {
  cannotExecute: () => null,
  endOfInput: (lineOpen) => (lineOpen ? '\r\x1a\r' : '\x1a\r'),
  driver(requireModule) {
    const pty = loadPtyModule(requireModule);
    return { open: (plan, size, on) => openConpty(pty, plan, size, on) };
  },
};

export function ptyPlatform(platform: NodeJS.Platform): PtyPlatform {
  return platform === 'win32' ? windows : unix;
}

/**
 * execvp's search: a name with a slash is a path; otherwise PATH (from the run's env) is searched.
 * The command's file, not the cgroup shim's shell that execs it: the shell would report a missing
 * #! interpreter as its own exit 127, on the terminal.
 */
function unixExecCheck(plan: LaunchPlan): NodeJS.ErrnoException | null {
  const base = plan.cwd ?? process.cwd();
  const file = plan.command ?? plan.file;
  const candidates = file.includes('/')
    ? [isAbsolute(file) ? file : join(base, file)]
    : (plan.env.PATH ?? '/usr/bin:/bin').split(delimiter).map((dir) => join(dir === '' ? base : dir, file));
  let denied = false;
  for (const path of candidates) {
    try {
      if (!statSync(path).isFile()) {
        denied = true; // execvp says EACCES for a directory
        continue;
      }
      accessSync(path, constants.X_OK);
      // A #! interpreter that is not there fails the exec with ENOENT, as the file itself would
      // (execvp then tries the rest of PATH); child mode reports it so, not as an exit 1.
      if (interpreterMissing(path, base)) continue;
      return null;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'EACCES') denied = true;
    }
  }
  const code = denied ? 'EACCES' : 'ENOENT';
  return Object.assign(new Error(`spawn ${file} ${code}`), {
    code,
    syscall: `spawn ${file}`,
    path: file,
  });
}

import type { LaunchPlan } from '../containment/index.js';
import { childProcess } from '../lazy-builtins.js';
import { BASH_NAMES, bashTouches } from './bash-variables.js';
import { spawnSealed } from './pty-masters.js';
import { executable, systemProgram } from './system-program.js';

/**
 * The plan, started through a shell that first closes `fds` (other runs' PTY masters, which
 * node-pty's forkpty hands to every child it forks: it never sets FD_CLOEXEC on them, and Node
 * cannot) and then execs the command in its place: same pid, same terminal, same environment.
 * null when no shell here can close a descriptor above 9 (dash, Debian's /bin/sh, cannot), or
 * there is no env(1) (or nice(1), for a command named with '='): the caller then starts the plan
 * as it is.
 *
 * The shell never runs the command itself: it execs env(1), which execs the command. So what the
 * command gets is decided by env(1), not by bash:
 * - The environment. The shell gets the run's environment without every variable bash knows of
 *   (bash-variables.ts), which env(1) gives back as `NAME=VALUE` operands, and env(1) unsets the
 *   ones the run has not (bash exports PWD and SHLVL of its own). Only those values are on a
 *   command line, which any user can read for that instant; everything else (API tokens...) goes
 *   through the shell's environment, which is its owner's alone. Without locale variables the
 *   shell cannot warn about one into the run's terminal.
 * - The program. env(1) finds it with execvp(3) in the run's own environment, as node-pty's fork
 *   does on the direct path: PATH, its default when there is none (bash's default differs), and a
 *   file without `#!` run by /bin/sh (bash would run it itself).
 */
export function closingFirst(plan: LaunchPlan, fds: readonly number[]): LaunchPlan | null {
  const shell = closingShell();
  const env = systemProgram('env');
  if (shell === null || env === null) return null;
  const shellEnv: Record<string, string> = {};
  const assign: string[] = [];
  for (const [name, value] of Object.entries(plan.env)) {
    if (passesThrough(name, shell)) shellEnv[name] = value;
    else assign.push(`${name}=${value}`);
  }
  const unset = BASH_NAMES.filter((name) => plan.env[name] === undefined).flatMap((name) => ['-u', name]);
  // env(1) takes every operand with '=' for a variable, even after `--`: a command named so is
  // exec'd by nice(1) (niceness unchanged), which takes its command as it is.
  let program = [plan.file];
  if (plan.file.includes('=')) {
    const nice = systemProgram('nice');
    if (nice === null) return null;
    program = [nice, '-n', '0', '--', plan.file];
  }
  const script = `exec ${fds.map((fd) => `${fd}>&-`).join(' ')}; exec -- "$@"`;
  // $0 is the command's name: what the shell might say names the command, not the shell.
  const command = [env, ...unset, '--', ...assign, ...program, ...plan.args];
  return { ...plan, file: shell, args: ['-c', script, plan.file, ...command], env: shellEnv };
}

const SHELL_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

/**
 * Whether the shell may see `name` (and so pass it on as it got it). A /bin/sh that is not bash
 * may also drop what is not a shell variable's name, as dash does.
 */
function passesThrough(name: string, shell: string): boolean {
  if (!shell.endsWith('bash') && !SHELL_NAME.test(name)) return false;
  return !bashTouches(name);
}

let shellPath: string | null | undefined;

/** bash, else a /bin/sh that shows it can close descriptor 10 (dash cannot). Found once. */
function closingShell(): string | null {
  shellPath ??= ['/bin/bash', '/usr/bin/bash'].find(executable) ?? (shClosesAbove9() ? '/bin/sh' : null);
  return shellPath;
}

/** Asked of the shell itself, once, and only where there is no bash. */
function shClosesAbove9(): boolean {
  if (!executable('/bin/sh')) return false;
  const probe = spawnSealed(['ignore', 'ignore', 'ignore'], (stdio) =>
    childProcess().spawnSync('/bin/sh', ['-c', 'exec 10>&-'], { stdio, timeout: 5000 }),
  );
  return probe.status === 0;
}

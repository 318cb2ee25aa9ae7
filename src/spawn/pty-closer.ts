import { accessSync, constants, statSync } from 'node:fs';
import type { LaunchPlan } from '../containment/index.js';
import { childProcess } from '../lazy-builtins.js';
import { spawnSealed } from './pty-masters.js';

/**
 * What bash reads from its environment or rewrites before it passes the environment on: kept from
 * the closing shell and given back by env(1), so the command gets the run's environment exactly.
 * BASH_ENV and ENV are files bash would source; SHELLOPTS could turn on xtrace into the terminal;
 * an exported function could even stand in for `exec`; SHLVL counts, unless it is a plain level.
 */
const BASH_READS = new Set(['BASH_ENV', 'ENV', 'SHELLOPTS', 'BASHOPTS', 'IFS', 'PPID', 'OPTIND', 'SHLVL']);

/**
 * The plan, started through a shell that first closes `fds` (other runs' PTY masters, which
 * node-pty's forkpty hands to every child it forks: it never sets FD_CLOEXEC on them, and Node
 * cannot) and then execs the command in its place: same pid, same terminal, same environment.
 * null when no shell here can close a descriptor above 9 (dash, Debian's /bin/sh, cannot), or
 * the environment needs env(1) and there is none: the caller then starts the plan as it is.
 */
export function closingFirst(plan: LaunchPlan, fds: readonly number[]): LaunchPlan | null {
  const shell = closingShell();
  if (shell === null) return null;
  const shellEnv: Record<string, string> = {};
  const assign: string[] = [];
  for (const [name, value] of Object.entries(plan.env)) {
    if (passesThrough(name, value, shell)) shellEnv[name] = value;
    else assign.push(`${name}=${value}`);
  }
  // bash exports a SHLVL of its own even where the run has none.
  const unset = plan.env.SHLVL === undefined ? ['-u', 'SHLVL'] : [];
  const script = `exec ${fds.map((fd) => `${fd}>&-`).join(' ')}; exec -- "$@"`;
  // $0 is the command's name: what the shell might say names the command, not the shell.
  if (assign.length === 0 && unset.length === 0)
    return { ...plan, file: shell, args: ['-c', script, plan.file, plan.file, ...plan.args], env: shellEnv };
  // Only then a second exec, env(1), which gives back what bash would change. It takes an operand
  // with '=' for a variable: such a command is started as before.
  const env = envProgram();
  if (env === null || plan.file.includes('=')) return null;
  const command = [env, ...unset, '--', ...assign, plan.file, ...plan.args];
  return { ...plan, file: shell, args: ['-c', script, plan.file, ...command], env: shellEnv };
}

const SHELL_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

/**
 * Whether the shell hands `name=value` on as it got it (SHLVL: bash counts it up, then down at
 * exec). A /bin/sh that is not bash may also drop what is not a shell variable's name, as dash does.
 */
function passesThrough(name: string, value: string, shell: string): boolean {
  if (name === 'SHLVL') return /^(0|[1-9][0-9]{0,2})$/.test(value) && Number(value) < 999;
  if (!shell.endsWith('bash') && !SHELL_NAME.test(name)) return false;
  return !BASH_READS.has(name) && !name.startsWith('BASH_FUNC_');
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

let envPath: string | null | undefined;

function envProgram(): string | null {
  envPath ??= ['/usr/bin/env', '/bin/env'].find(executable) ?? null;
  return envPath;
}

function executable(path: string): boolean {
  try {
    accessSync(path, constants.X_OK);
    return statSync(path).isFile();
  } catch {
    return false;
  }
}

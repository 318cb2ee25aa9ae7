import { accessSync, constants, statSync } from 'node:fs';
import { delimiter, isAbsolute, join, resolve } from 'node:path';
import type { LaunchPlan } from './types.js';

/**
 * The shim enters the cgroup before the command exists: it writes its own pid to cgroup.procs and
 * then execs the command, so the run's pid is the command's pid and nothing the command forks is
 * ever outside. If it cannot enter the cgroup it runs nothing (exit 125, like coreutils' own
 * failures). Its $0 is the command's name: what the shell says when the exec fails (an interpreter
 * that does not exist) names the command, not the cgroup's file.
 */
const SHIM =
  'echo $$ > "$1" || { echo "procwarden: cannot enter cgroup ($1)" >&2; exit 125; }; shift; exec "$@"';

/**
 * The plan, started through the shim. A command that cannot be executed is left to the launcher,
 * so that it fails the usual way (spawn-error ENOENT / EACCES) instead of as the shim's exit 127.
 */
export function throughShim(plan: LaunchPlan, procsFile: string): LaunchPlan {
  if (!canExecute(plan)) return plan;
  const env = shellWouldChange(plan.env) ? envProgram() : null;
  // `env` takes an argument with '=' for a variable: a command named so is run as before.
  if (env !== null && !plan.file.includes('=')) {
    // The shell gets no environment at all; `env -i` gives the command exactly its own.
    const pairs = Object.entries(plan.env).map(([name, value]) => `${name}=${value}`);
    const command = [env, '-i', '--', ...pairs, plan.file, ...plan.args];
    return { ...plan, env: {}, file: '/bin/sh', args: ['-c', SHIM, plan.file, procsFile, ...command] };
  }
  return { ...plan, file: '/bin/sh', args: ['-c', SHIM, plan.file, procsFile, plan.file, ...plan.args] };
}

/** What a POSIX shell sets at its start whatever its environment said (dash; bash sets these too). */
const SHELL_SETS = new Set(['IFS', 'PPID', 'OPTIND']);
const SHELL_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

/**
 * Whether the shim's shell would hand the command another environment than `env`: it resets IFS,
 * PPID and OPTIND, and drops what is not a shell variable's name (`A.B`, `my-var`), which other
 * programs use. PWD it corrects when it names another directory than the command's. Otherwise the
 * shell passes every variable on as it got it, and one exec less is saved.
 */
function shellWouldChange(env: Record<string, string>): boolean {
  for (const name of Object.keys(env)) if (SHELL_SETS.has(name) || !SHELL_NAME.test(name)) return true;
  return false;
}

let envPath: string | null | undefined;

/** env(1), by its absolute path: the shell's own environment is empty, PATH included. */
function envProgram(): string | null {
  envPath ??= ['/usr/bin/env', '/bin/env'].find(executable) ?? null;
  return envPath;
}

function canExecute(plan: LaunchPlan): boolean {
  const cwd = plan.cwd ?? currentDir();
  // A relative name against a current directory that was removed: only the exec can tell (`..`
  // still resolves from there), so it goes through the shim, and into the cgroup, like any other.
  const at = (path: string) => (isAbsolute(path) ? path : cwd === null ? null : resolve(cwd, path));
  const runnable = (path: string | null) => path === null || executable(path);
  if (plan.file.includes('/')) return runnable(at(plan.file));
  const path = plan.env.PATH ?? '/usr/local/bin:/usr/bin:/bin';
  return path.split(delimiter).some((dir) => {
    const base = at(dir === '' ? '.' : dir);
    return runnable(base === null ? null : join(base, plan.file));
  });
}

/** process.cwd() throws when the directory we are in was removed; the command may still run there. */
function currentDir(): string | null {
  try {
    return process.cwd();
  } catch {
    return null;
  }
}

function executable(path: string): boolean {
  try {
    accessSync(path, constants.X_OK);
    return statSync(path).isFile();
  } catch {
    return false;
  }
}

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
  return { ...plan, file: '/bin/sh', args: ['-c', SHIM, plan.file, procsFile, plan.file, ...plan.args] };
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

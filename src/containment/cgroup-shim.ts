import { accessSync, constants, statSync } from 'node:fs';
import { delimiter, isAbsolute, join, resolve } from 'node:path';
import type { LaunchPlan } from './types.js';

/**
 * The shim enters the cgroup before the command exists: it writes its own pid to cgroup.procs and
 * then execs the command, so the run's pid is the command's pid and nothing the command forks is
 * ever outside. If it cannot enter the cgroup it runs nothing (exit 125, like coreutils' own
 * failures).
 */
const SHIM = 'echo $$ > "$0" || { echo "procwarden: cannot enter cgroup ($0)" >&2; exit 125; }; exec "$@"';

/**
 * The plan, started through the shim. A command that cannot be executed is left to the launcher,
 * so that it fails the usual way (spawn-error ENOENT / EACCES) instead of as the shim's exit 127.
 */
export function throughShim(plan: LaunchPlan, procsFile: string): LaunchPlan {
  if (!canExecute(plan)) return plan;
  return { ...plan, file: '/bin/sh', args: ['-c', SHIM, procsFile, plan.file, ...plan.args] };
}

function canExecute(plan: LaunchPlan): boolean {
  const cwd = plan.cwd ?? process.cwd();
  if (plan.file.includes('/')) return executable(isAbsolute(plan.file) ? plan.file : resolve(cwd, plan.file));
  const path = plan.env.PATH ?? '/usr/local/bin:/usr/bin:/bin';
  return path
    .split(delimiter)
    .some((dir) => executable(join(dir === '' ? cwd : resolve(cwd, dir), plan.file)));
}

function executable(path: string): boolean {
  try {
    accessSync(path, constants.X_OK);
    return statSync(path).isFile();
  } catch {
    return false;
  }
}

import { lookUp } from '../spawn/command-path.js';
import { executable, systemProgram } from '../spawn/system-program.js';
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
  const found = lookUp(plan.file, plan.cwd, plan.env.PATH, executable);
  if (found === null) return plan;
  const lost = shellWouldChange(plan.env);
  const env = lost.length > 0 ? systemProgram('env') : null;
  // `env` takes an argument with '=' for a variable: a command named so is run as before.
  if (env !== null && !plan.file.includes('=')) {
    // The shell passes the rest on; `env` puts back what it dropped or reset. Only those values are
    // on a command line (which any user can read, where an environment is its owner's alone).
    // Without a PATH of the run's, the command found here is the one env runs (its own default
    // search differs).
    const file =
      plan.env.PATH === undefined && !plan.file.includes('/') && found !== 'unknown' ? found : plan.file;
    const command = [env, '--', ...lost, file, ...plan.args];
    // The shell must not see what it reads: dash refuses to start on an OPTIND that is no number.
    const shellEnv = Object.fromEntries(Object.entries(plan.env).filter(([name]) => !SHELL_SETS.has(name)));
    return {
      ...plan,
      file: '/bin/sh',
      args: ['-c', SHIM, plan.file, procsFile, ...command],
      env: shellEnv,
      command: plan.file,
    };
  }
  return {
    ...plan,
    file: '/bin/sh',
    args: ['-c', SHIM, plan.file, procsFile, plan.file, ...plan.args],
    command: plan.file,
  };
}

/** What a POSIX shell sets at its start whatever its environment said (dash; bash sets these too). */
const SHELL_SETS = new Set(['IFS', 'PPID', 'OPTIND']);
const SHELL_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

/**
 * What the shim's shell would not hand the command as `env` has it, as NAME=VALUE: it resets IFS,
 * PPID and OPTIND, and drops what is not a shell variable's name (`A.B`, `my-var`), which other
 * programs use. PWD it corrects when it names another directory than the command's. Everything
 * else it passes on as it got it.
 */
function shellWouldChange(env: Record<string, string>): string[] {
  const lost: string[] = [];
  for (const [name, value] of Object.entries(env))
    if (SHELL_SETS.has(name) || !SHELL_NAME.test(name)) lost.push(`${name}=${value}`);
  return lost;
}

import { interpreterMissing, lookUp } from '../spawn/command-path.js';
import { executable, systemProgram } from '../spawn/system-program.js';
import type { LaunchPlan } from './types.js';

/**
 * The shim: a /bin/sh that does, in the process that becomes the command, what must be done
 * before the command's first instruction, and then execs the command (same pid). What it does:
 *
 * - Enter the run's cgroup (cgroup containment): it writes its own pid to cgroup.procs, so that
 *   nothing the command forks is ever outside. If it cannot, it runs nothing (exit 125, like
 *   coreutils' own failures).
 * - Set the command's oom_score_adj (LaunchPlan.oomScore): the value is inherited at fork, and no
 *   spawn API of Node's runs anything between its fork and its exec, so this is the only way to
 *   start a command with a score other than ours and no instant with ours: set from outside after
 *   the spawn, the command could fork before, and that child would keep ours. (Raising our own
 *   score around the spawn would expose the host itself to the OOM killer: never.) The write
 *   comes after /bin/sh is exec'd, in a process with a memory of its own: the kernel applies a
 *   write to every process sharing the writer's memory, which a child of vfork() (before its exec)
 *   shares with its parent. A required write that fails runs nothing (exit 125, the reason on
 *   stderr); the default's failure is silent, and the command runs with the score it inherited.
 *
 * Every step is a builtin: the shell forks nothing. Its $0 is the command's name: what the shell
 * says when the exec fails (an interpreter that does not exist) names the command, not the shim.
 */
const ENTER_CGROUP =
  'echo $$ > "$1" || { echo "procwarden: cannot enter cgroup ($1)" >&2; exit 125; }; shift; ';
const OOM_FILE = '/proc/self/oom_score_adj';

function setScore({ value, required }: { value: number; required: boolean }): string {
  // An integer of our own making (planOomScore), safe as a literal. The shell's own complaint names
  // the command ($0): it is replaced by one that names procwarden.
  const write = `{ echo ${Math.trunc(value)} > ${OOM_FILE}; } 2>/dev/null`;
  return required
    ? `${write} || { echo "procwarden: cannot set oom_score_adj to ${Math.trunc(value)} (${OOM_FILE} refused it)" >&2; exit 125; }; `
    : `${write}; `;
}

/**
 * The plan, started through the shim: entering the cgroup whose cgroup.procs is `procsFile`
 * (null: no cgroup), and setting `plan.oomScore` when it has one. A command that cannot be executed
 * is left to the launcher, so that it fails the usual way (spawn-error ENOENT / EACCES) instead of
 * as the shim's exit 127; nothing runs then, so nothing needs a score.
 */
export function throughShim(plan: LaunchPlan, procsFile: string | null): LaunchPlan {
  const { oomScore, ...rest } = plan;
  plan = rest;
  if (procsFile === null && oomScore === undefined) return plan;
  const found = lookUp(plan.file, plan.cwd, plan.env.PATH, executable);
  if (found === null) return plan;
  // With no cgroup to enter, a script whose #! interpreter is missing is left to fail as it would
  // without the shim (spawn-error ENOENT naming the interpreter), not as the shell's exit 127.
  const cwd = plan.cwd ?? currentDir();
  if (procsFile === null && found !== 'unknown' && interpreterMissing(found, cwd)) return plan;
  const script = `${procsFile === null ? '' : ENTER_CGROUP}${oomScore ? setScore(oomScore) : ''}exec "$@"`;
  const shimArgs = ['-c', script, plan.file, ...(procsFile === null ? [] : [procsFile])];
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
      args: [...shimArgs, ...command],
      env: shellEnv,
      command: plan.file,
    };
  }
  return {
    ...plan,
    file: '/bin/sh',
    args: [...shimArgs, plan.file, ...plan.args],
    command: plan.file,
  };
}

/**
 * Why a shim started only to set the OOM score would start the command otherwise than the spawn
 * would, or null when it is faithful. Its `env` fix-up puts the values of names a shell drops on a
 * command line (anyone can read those), a name with '=' defeats it, and without a PATH the shell
 * searches its own. The default score gives way to these (the explicit one does not).
 */
export function shimUnfaithful(plan: LaunchPlan): string | null {
  if (plan.file.includes('='))
    return "the command's name holds '=', which a shell's env fix-up would read as a variable";
  const lost = shellWouldChange(plan.env);
  if (lost.length > 0)
    return `its environment has names a shell drops or changes (${lost
      .map((pair) => pair.slice(0, pair.indexOf('=')))
      .join(', ')}), which it would pass on only through a command line anyone can read`;
  if (plan.env.PATH === undefined && !plan.file.includes('/'))
    return 'its environment has no PATH, and a shell would search another default one than the spawn does';
  return null;
}

/** Ours, for a relative interpreter; null when it was removed (then the exec alone can tell). */
function currentDir(): string | null {
  try {
    return process.cwd();
  } catch {
    return null;
  }
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

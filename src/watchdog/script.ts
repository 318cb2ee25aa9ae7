import { isAbsolute } from 'node:path';

/**
 * The host guard as it runs while its host lives: a POSIX shell reading a pipe that only the host
 * writes (see ./guard.ts). It costs a shell's few MiB and no CPU while it waits. The host says:
 *
 *   d<JSON string>  a state directory its runs' records may be in (once per directory)
 *   b               busy: runs are in flight, or records were kept for a later reap
 *   i               idle: nothing to reap
 *
 * End-of-file is the host's death (it never closes the pipe otherwise). Busy then, the shell starts
 * the reaper (./main.ts) with the directories and waits for it; idle, it just exits.
 *
 * The signals a service manager, a terminal or a `kill` sends are ignored from the first line;
 * only SIGKILL (or SIGSTOP) takes it, and the host sees that and starts another. The reaper is a
 * child, not an exec: Node resets every ignored signal to its default at start-up, so a SIGTERM
 * sent to the guard's pid in the reaper's first milliseconds would end an exec'd one. A reaper
 * that dies of a signal all the same (one sent to the guard's process group before its handlers
 * exist, the OOM killer) is started again, up to 50 times: its claims die with it.
 */
export const GUARD_SCRIPT = [
  "trap '' HUP INT QUIT TERM USR1 USR2 ALRM PIPE",
  'n=$1 m=$2 h=$3 s=$4',
  'shift 4',
  'b=0',
  'while IFS= read -r l; do',
  '  case $l in',
  '    b) b=1 ;;',
  '    i) b=0 ;;',
  // A shell expansion, not a template placeholder: the line less its leading d.
  // biome-ignore lint/suspicious/noTemplateCurlyInString: shell syntax
  '    d*) set -- "$@" "${l#d}" ;;',
  '  esac',
  'done',
  '[ "$b" = 1 ] || exit 0',
  'i=0',
  'while :; do',
  '  "$n" "$m" "$h" "$s" "$@" </dev/null &',
  '  wait $!',
  '  r=$?',
  '  [ "$r" -gt 128 ] && [ "$i" -lt 50 ] || exit "$r"',
  '  i=$((i + 1))',
  'done',
].join('\n');

/** The guard's $0: how ps, /proc/PID/cmdline and `procwarden kill` tell it. */
export const GUARD_NAME = 'procwarden-guard';

/** What the host writes to its guard, each a whole line (a pipe write under PIPE_BUF is atomic). */
export const BUSY = 'b\n';
export const IDLE = 'i\n';
export const stateDirLine = (dir: string) => `d${JSON.stringify(dir)}\n`;

/** The shell's argv after `-c SCRIPT`: its $0, then what it hands the reaper. */
export function guardArgs(node: string, reaper: string, hostPid: number, hostStart: string | null): string[] {
  return [GUARD_NAME, node, reaper, String(hostPid), hostStart ?? '-'];
}

export interface ReaperArgs {
  hostPid: number;
  /** The host's start time as /proc showed it; null where none was read. */
  hostStart: string | null;
  stateDirs: string[];
}

/** The reaper's argv after its script: `HOST_PID HOST_START|- DIR…`, each DIR as JSON. */
export function parseReaperArgs(argv: readonly string[]): ReaperArgs | null {
  const [pid, start, ...dirs] = argv;
  const hostPid = Number(pid);
  if (!Number.isInteger(hostPid) || hostPid <= 1 || start === undefined) return null;
  const stateDirs: string[] = [];
  for (const d of dirs) {
    try {
      const dir = JSON.parse(d) as unknown;
      if (typeof dir === 'string' && isAbsolute(dir) && !stateDirs.includes(dir)) stateDirs.push(dir);
    } catch {
      // not a line the host wrote
    }
  }
  return { hostPid, hostStart: start === '-' ? null : start, stateDirs };
}

import { readdirSync, readFileSync } from 'node:fs';
import { holdsOpen } from './procfs-open.js';

/**
 * What the foreground of a terminal is doing, as /proc shows it:
 * - 'waiting': a process of the foreground group sleeps in a read (or a select/poll) while holding
 *   the terminal open, and none of the group is running: what is typed now is read in the mode
 *   that process set for its read;
 * - 'busy': the group runs, or sleeps on something else (a child, a timer): the terminal's mode
 *   may still change (a REPL starting up goes raw for its line editor);
 * - 'unknown': /proc cannot tell (no /proc, a process we may not inspect, the group outside the
 *   session's tree).
 */
export type TerminalReader = 'waiting' | 'busy' | 'unknown';

/**
 * Where a process sleeps when it waits for input (its /proc/PID/wchan): a tty read (n_tty_read
 * sleeps in wait_woken since Linux 3.19), select, poll, epoll. A name is matched up to a suffix
 * such as `.constprop.0`.
 */
const INPUT_WAITS = [
  'wait_woken',
  'n_tty_read',
  'poll_schedule_timeout',
  'do_select',
  'do_sys_poll',
  'ep_poll',
];

/** More descendants than this are not walked: a fork bomb is not something to type EOF into. */
const MAX_WALK = 512;

/**
 * How the foreground of `tty` (a path such as /dev/pts/3) looks, for the session `leader` leads
 * (a command on its own terminal: forkpty made it the session leader).
 */
export function terminalReader(leader: number, tty: string, root = '/proc'): TerminalReader {
  const head = stat(root, leader);
  // Field 8, tpgid: the terminal's foreground process group.
  const foreground = Number(head?.[5]);
  if (!head) return 'unknown';
  // No foreground yet: the leader has not made the terminal its controlling one (forkpty's child
  // before its exec).
  if (!(foreground > 0)) return 'busy';
  let members = 0;
  let waiting = false;
  let unknown = false;
  const seen = new Set<number>();
  const queue = [leader];
  while (queue.length > 0 && seen.size < MAX_WALK) {
    const pid = queue.shift() as number;
    if (seen.has(pid)) continue;
    seen.add(pid);
    queue.push(...children(root, pid));
    const fields = pid === leader ? head : stat(root, pid);
    if (!fields || Number(fields[2]) !== foreground) continue;
    const state = fields[0];
    if (state === 'Z' || state === 'X' || state === 'x') continue;
    members += 1;
    // Running or runnable (R), or in the middle of a disk read (D): it has not come to its read yet.
    if (state === 'R' || state === 'D') return 'busy';
    if (state !== 'S') continue;
    const wchan = read(root, `${pid}/wchan`) ?? '0';
    if (INPUT_WAITS.some((name) => wchan === name || wchan.startsWith(`${name}.`))) {
      if (holdsOpen(root, pid, tty)) waiting = true;
    } else if (wchan === '0' && !mayInspect(root, pid)) unknown = true;
    // Otherwise it sleeps on something else, or woke between the two reads ('0'): not yet.
  }
  if (waiting) return 'waiting';
  return members === 0 || unknown ? 'unknown' : 'busy';
}

/** The fields of /proc/PID/stat after the command: [0] is field 3 (state), field N is [N - 3]. */
function stat(root: string, pid: number): string[] | null {
  const text = read(root, `${pid}/stat`);
  if (text === null) return null;
  const close = text.lastIndexOf(')');
  return close < 0 ? null : text.slice(close + 2).split(' ');
}

/** Whether /proc shows us what `pid` waits on (wchan says '0' also to those it may not tell). */
function mayInspect(root: string, pid: number): boolean {
  try {
    readdirSync(`${root}/${pid}/fd`);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code !== 'EACCES';
  }
}

function children(root: string, pid: number): number[] {
  const text = read(root, `${pid}/task/${pid}/children`);
  return text ? text.trim().split(/\s+/).filter(Boolean).map(Number) : [];
}

function read(root: string, path: string): string | null {
  try {
    return readFileSync(`${root}/${path}`, 'utf8').trim();
  } catch {
    return null;
  }
}

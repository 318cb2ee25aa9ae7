import { closeSync, fstatSync, openSync, readFileSync } from 'node:fs';
import { childProcess, tty } from '../lazy-builtins.js';
import { spawnSealed } from '../spawn/pty-masters.js';

/**
 * Whether procwarden may set its stdin terminal's mode without being stopped for it: the terminal
 * is not our controlling one, or our process group is its foreground group. Node has no
 * tcgetpgrp(3): Linux tells through /proc, elsewhere ps(1) does. When neither can tell, yes: a
 * background process trying is then stopped by SIGTTOU until `fg`, as vim is.
 */
export function inForeground(): boolean {
  if (process.platform === 'linux') {
    try {
      const stat = readFileSync('/proc/self/stat', 'utf8');
      // After the command name: state ppid pgrp session tty_nr tpgid.
      const [, , pgrp, , ttyNr, tpgid] = stat
        .slice(stat.lastIndexOf(')') + 2)
        .split(' ')
        .map(Number);
      return ttyNr !== fstatSync(0).rdev || tpgid === pgrp;
    } catch {
      return true;
    }
  }
  // Asked while the run's terminal is open: its master is kept out of ps (see spawnSealed).
  const ps = spawnSealed(['ignore', 'pipe', 'ignore'], (stdio) =>
    childProcess().spawnSync('ps', ['-o', 'tpgid=,pgid=', '-p', String(process.pid)], {
      encoding: 'utf8',
      stdio,
    }),
  );
  const [tpgid, pgid] = (ps.stdout ?? '').trim().split(/\s+/).map(Number);
  return ps.status !== 0 || !tpgid || tpgid === pgid;
}

/**
 * Whether our stdin, stdout or stderr is our controlling terminal: procwarden then runs as (part of)
 * a shell's job on it, and the terminal's job control (Ctrl-Z, `fg`, `bg`, SIGTTIN for a read from
 * the background) must reach the command with us, as it reaches the command of GNU timeout. Linux
 * tells the terminal's number in /proc; elsewhere a terminal on one of them and a /dev/tty that
 * opens (it does only for a process with a controlling terminal) stand for it.
 */
export function onControllingTerminal(): boolean {
  if (process.platform === 'win32') return false;
  const fds = [0, 1, 2].filter((fd) => tty().isatty(fd));
  if (fds.length === 0) return false;
  if (process.platform === 'linux') {
    try {
      const stat = readFileSync('/proc/self/stat', 'utf8');
      // After the command name: state ppid pgrp session tty_nr.
      const ttyNr = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[4]);
      return ttyNr !== 0 && fds.some((fd) => fstatSync(fd).rdev === ttyNr);
    } catch {
      return false;
    }
  }
  try {
    closeSync(openSync('/dev/tty', 'r'));
    return true;
  } catch {
    return false;
  }
}

import { fstatSync, readFileSync } from 'node:fs';
import { childProcess } from '../lazy-builtins.js';
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

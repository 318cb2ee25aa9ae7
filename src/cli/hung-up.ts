import { closeSync, fstatSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';

/**
 * As it exits, Node gives back the settings of every terminal among descriptors 0-2, and aborts
 * when one of them has hung up meanwhile (its window closed): an assertion in node::ResetStdio,
 * status 134 with a core message, in place of the status procwarden meant to exit with, whatever
 * signal or none came first. Node 20 and 22 do it (nodejs/node#51519). A descriptor whose terminal
 * has hung up is closed first, which Node then skips. Costs three fstat calls where no terminal is
 * in use (pipes, files, /dev/null), which is what scripts and benchmarks run with; the check at
 * exit (loading node:tty) only where one may be.
 */
export function closeHungUpTerminalsAtExit(): void {
  if (process.platform === 'win32') return;
  const terminals = [0, 1, 2].filter(maybeTerminal);
  if (terminals.length === 0) return;
  process.on('exit', () => {
    // A hung-up terminal answers EIO to the isatty(3) ioctl: no longer a terminal. node:tty is
    // asked for here, not through lazy-builtins.ts: the CLI's entry imports this file, and the
    // bundle keeps that module in the options chunk, which `--version` and `--help` then loaded
    // too (1.8 ms of a 44 ms `--version` on Node 20, medians of 60 alternated).
    const load = process.getBuiltinModule ?? createRequire(import.meta.url);
    const { isatty } = load('node:tty') as typeof import('node:tty');
    for (const fd of terminals) {
      if (isatty(fd)) continue;
      try {
        closeSync(fd);
      } catch {
        // closed already
      }
    }
  });
}

/**
 * A character device other than /dev/null (what scripts and benchmarks give as stdin): compared by
 * device number with /dev/null itself, since majors and their encoding differ between kernels.
 */
function maybeTerminal(fd: number): boolean {
  try {
    const st = fstatSync(fd);
    return st.isCharacterDevice() && st.rdev !== nullDevice();
  } catch {
    return false;
  }
}

let devNull: number | undefined;
function nullDevice(): number {
  if (devNull === undefined) {
    try {
      devNull = statSync('/dev/null').rdev;
    } catch {
      devNull = -1;
    }
  }
  return devNull;
}

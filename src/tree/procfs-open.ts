import { readdirSync, readFileSync, readlinkSync } from 'node:fs';

/**
 * Per-pid reads of what a process runs and holds open, from /proc: its argv and what its
 * descriptors point to. Both need the access ptrace would (our own processes, or root); a process
 * we may not read, or one gone, answers null.
 */

/** /proc/PID/cmdline as argv (NUL-separated); null when gone, unreadable or empty (mid-exec). */
export function readArgv(root: string, pid: number): string[] | null {
  let raw: Buffer;
  try {
    raw = readFileSync(`${root}/${pid}/cmdline`);
  } catch {
    return null;
  }
  if (raw.length === 0) return null;
  const text = raw.toString('utf8');
  // Each argument ends with a NUL; a process that rewrote its own may have left off the last.
  return (text.endsWith('\0') ? text.slice(0, -1) : text).split('\0');
}

/** What descriptor `fd` of `pid` points to (`pipe:[123]`, a path...); null when gone or unreadable. */
export function readFdLink(root: string, pid: number, fd: number): string | null {
  try {
    return readlinkSync(`${root}/${pid}/fd/${fd}`);
  } catch {
    return null;
  }
}

/** Whether `pid` holds `link` (as readFdLink shows it) open on any descriptor. */
export function holdsOpen(root: string, pid: number, link: string): boolean {
  let fds: string[];
  try {
    fds = readdirSync(`${root}/${pid}/fd`);
  } catch {
    return false;
  }
  return fds.some((fd) => readFdLink(root, pid, Number(fd)) === link);
}

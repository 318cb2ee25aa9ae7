import { readFileSync, readlinkSync } from 'node:fs';
import { parseStat } from '../tree/procfs.js';

/**
 * Who this process is, as a record or a reaper's claim must say it, read synchronously: a host
 * that dies in the tick it made its Supervisor must still leave a record whose supervisor start
 * time tells it from a process that reuses its pid later (an asynchronous read came too late).
 */
export interface SelfIdentity {
  /** Field 22 of /proc/self/stat; null where there is no /proc (macOS, Windows). */
  start: string | null;
  /**
   * The pid namespace (`pid:[inode]` of /proc/self/ns/pid): pid numbers in a record mean
   * something only in the namespace that wrote it. Null where there is no /proc.
   */
  pidNamespace: string | null;
  /**
   * The time namespace (`time:[inode]` of /proc/self/ns/time): /proc shows start times shifted by
   * the reader's boot-time offset, so a start time in a record means something only in the time
   * namespace that wrote it. Null where there is none to read (no /proc, no time namespaces).
   */
  timeNamespace: string | null;
}

let cached: SelfIdentity | undefined;

export function selfIdentity(): SelfIdentity {
  // A pid namespace and a start time never change for a process: read once.
  cached ??= {
    start: readSelfStart(),
    pidNamespace: readPidNamespace('/proc/self/ns/pid'),
    timeNamespace: readNamespace('/proc/self/ns/time', 'time'),
  };
  return cached;
}

function readSelfStart(): string | null {
  // Field 22 means the start time only in Linux's /proc (a BSD's linprocfs may differ).
  if (process.platform !== 'linux' && process.platform !== 'android') return null;
  try {
    return parseStat(readFileSync('/proc/self/stat', 'utf8'))?.startTime ?? null;
  } catch {
    return null;
  }
}

/** `pid:[N]`, or null when the link cannot be read. */
export function readPidNamespace(link: string): string | null {
  return readNamespace(link, 'pid');
}

/** `<kind>:[N]`, or null when the link cannot be read. */
function readNamespace(link: string, kind: 'pid' | 'time'): string | null {
  try {
    const target = readlinkSync(link);
    return new RegExp(`^${kind}:\\[\\d+\\]$`).test(target) ? target : null;
  } catch {
    return null;
  }
}

/**
 * Why this process's /proc cannot be used to judge or act on pids, or null when it can: a /proc
 * mounted for another pid namespace (`unshare --pid --fork` without `--mount-proc`, a container
 * given the host's /proc) numbers processes differently from `kill()`, so a pid read there could
 * name another process here. Its `self` link names us by that namespace's number.
 */
export function foreignProc(): string | null {
  let self: string;
  try {
    self = readlinkSync('/proc/self');
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    // No /proc at all (macOS): the table is not procfs, nothing to mistake.
    if (code === 'ENOENT' && !procMounted()) return null;
    return `/proc/self cannot be read (${code ?? error}): this /proc is not this pid namespace's`;
  }
  if (self !== String(process.pid))
    return `/proc/self is ${self}, not this process (pid ${process.pid}): this /proc belongs to another pid namespace`;
  return null;
}

function procMounted(): boolean {
  try {
    readlinkSync('/proc/1/ns/pid');
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code !== 'ENOENT';
  }
}

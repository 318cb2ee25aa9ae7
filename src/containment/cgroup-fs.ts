import {
  closeSync,
  constants,
  type Dirent,
  openSync,
  readdirSync,
  readFileSync,
  rmdirSync,
  writeFileSync,
  writeSync,
} from 'node:fs';
import { join } from 'node:path';
import { realClock, sleep } from '../clock.js';
import type { ProcessInfo } from '../tree/index.js';

/**
 * Where cgroup v2 lives on this host and which cgroup we are in, read from /proc/self/mountinfo and
 * /proc/self/cgroup (never assumed: hybrid hosts mount v2 at /sys/fs/cgroup/unified, pure-v2 hosts
 * at /sys/fs/cgroup, containers wherever they like), plus the few file operations the cgroup
 * containment needs.
 */
export interface Cgroup2Mount {
  mountPoint: string;
  /** The path inside the hierarchy that is mounted there ("/" unless a namespace or bind mount). */
  root: string;
  readOnly: boolean;
}

/** Every cgroup2 mount listed in a mountinfo text. */
export function parseMountinfo(text: string): Cgroup2Mount[] {
  const out: Cgroup2Mount[] = [];
  for (const line of text.split('\n')) {
    const dash = line.indexOf(' - ');
    if (dash < 0) continue;
    const before = line.slice(0, dash).split(' ');
    const [fstype] = line.slice(dash + 3).split(' ');
    if (fstype !== 'cgroup2' || before.length < 6) continue;
    const options = (before[5] ?? '').split(',');
    out.push({
      root: unescapeMount(before[3] ?? '/'),
      mountPoint: unescapeMount(before[4] ?? ''),
      readOnly: options.includes('ro'),
    });
  }
  return out;
}

/** Our cgroup v2 path ("0::/path" in /proc/self/cgroup), or null when we are in no v2 hierarchy. */
export function parseOwnCgroup(text: string): string | null {
  for (const line of text.split('\n')) {
    if (line.startsWith('0::')) return line.slice(3).replace(/ \(deleted\)$/, '');
  }
  return null;
}

/** The directory of our own cgroup, or why there is none we could use. */
export function locateOwnCgroup(mountinfo: string, ownCgroup: string): { dir: string } | { reason: string } {
  const path = parseOwnCgroup(ownCgroup);
  if (path === null)
    return { reason: 'this process is in no cgroup v2 hierarchy (/proc/self/cgroup has no 0:: line)' };
  const mounts = parseMountinfo(mountinfo);
  if (mounts.length === 0)
    return { reason: 'no cgroup2 filesystem is mounted (none in /proc/self/mountinfo)' };
  const fits = mounts.filter((m) => m.root === '/' || path === m.root || path.startsWith(`${m.root}/`));
  if (fits.length === 0) return { reason: `no cgroup2 mount shows our cgroup ${path}` };
  const writable = fits.find((m) => !m.readOnly);
  if (!writable) return { reason: `the cgroup2 mount at ${fits[0]?.mountPoint} is read-only` };
  const inside = writable.root === '/' ? path : path.slice(writable.root.length);
  return { dir: join(writable.mountPoint, inside).replace(/(.)\/+$/, '$1') };
}

/** mountinfo escapes space, tab, newline and backslash as octal. */
function unescapeMount(field: string): string {
  return field.replace(/\\([0-7]{3})/g, (_, oct: string) => String.fromCharCode(Number.parseInt(oct, 8)));
}

/** `populated` from cgroup.events; null when the cgroup is gone. */
export function isPopulated(dir: string): boolean | null {
  let text: string;
  try {
    text = readFileSync(join(dir, 'cgroup.events'), 'utf8');
  } catch {
    return null;
  }
  return /^populated 1$/m.test(text);
}

/** The cgroup directories of a subtree, deepest first (the order rmdir needs). */
export function subtree(dir: string): string[] {
  const out: string[] = [];
  const walk = (d: string) => {
    let entries: Dirent[];
    try {
      entries = readdirSync(d, { withFileTypes: true });
    } catch {
      return; // removed under us
    }
    for (const e of entries) if (e.isDirectory()) walk(join(d, e.name));
    out.push(d);
  };
  walk(dir);
  return out;
}

/** Pids in cgroup.procs of every cgroup of the subtree. */
export function subtreeProcs(dir: string): number[] {
  return subtree(dir).flatMap(procsOf);
}

/** Pids in the cgroup.procs of this one cgroup (not its children); empty once it is gone. */
export function procsOf(dir: string): number[] {
  let text: string;
  try {
    text = readFileSync(join(dir, 'cgroup.procs'), 'utf8');
  } catch (error) {
    // A root member can make the cgroup threaded, whose cgroup.procs cannot be read: its members
    // would look gone while they run on. Its threads are listed, each with its process.
    const code = (error as NodeJS.ErrnoException).code;
    return code === 'ENOTSUP' || code === 'EOPNOTSUPP' ? processesOfThreads(dir) : [];
  }
  const out: number[] = [];
  for (const line of text.split('\n')) if (line) out.push(Number(line));
  return out;
}

function processesOfThreads(dir: string): number[] {
  let text: string;
  try {
    text = readFileSync(join(dir, 'cgroup.threads'), 'utf8');
  } catch {
    return [];
  }
  const out = new Set<number>();
  for (const line of text.split('\n')) {
    if (!line) continue;
    try {
      const tgid = /\nTgid:\s*(\d+)/.exec(readFileSync(`/proc/${line}/status`, 'utf8'))?.[1];
      if (tgid) out.add(Number(tgid));
    } catch {
      // exited meanwhile
    }
  }
  return [...out];
}

/** SIGKILL to the whole subtree in one write. False when the kernel has no cgroup.kill (before 5.14). */
export function killAll(dir: string): boolean {
  try {
    // O_WRONLY without O_CREAT: where the kernel has no cgroup.kill, never create a plain file.
    const fd = openSync(join(dir, 'cgroup.kill'), constants.O_WRONLY);
    try {
      writeSync(fd, '1');
    } finally {
      closeSync(fd);
    }
    return true;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT' && isPopulated(dir) !== null) return false;
    throw error;
  }
}

/** Moves a process into the cgroup at `dir`. */
export function moveInto(dir: string, pid: number): void {
  writeFileSync(join(dir, 'cgroup.procs'), String(pid));
}

/** rmdir, deepest first. Errors other than "already gone" are returned, not thrown. */
export function removeSubtree(dir: string): NodeJS.ErrnoException[] {
  const errors: NodeJS.ErrnoException[] = [];
  for (const d of subtree(dir)) {
    try {
      rmdirSync(d);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT') errors.push(error as NodeJS.ErrnoException);
    }
  }
  return errors;
}

/**
 * Whether a populated cgroup keeps holding tasks that cannot be identified: every pid it lists is
 * gone (or not a live process) by the time it is read. Tasks on their way out do that for a moment;
 * a process that re-forks faster than it can be read (each generation has exited before its stat
 * is read) does it for good. The listing is re-read until the cgroup is empty or `identify` (which
 * keeps what it identifies) accepts a listed task (false), or `patienceMs` passes with neither (true).
 */
export async function holdsUnidentified(
  dir: string,
  identify: (pid: number) => Promise<boolean>,
  patienceMs = UNIDENTIFIED_PATIENCE_MS,
): Promise<boolean> {
  const until = realClock.now() + patienceMs;
  for (;;) {
    if (isPopulated(dir) !== true) return false;
    for (const pid of subtreeProcs(dir)) if (await identify(pid)) return false;
    if (realClock.now() >= until) return true;
    await sleep(realClock, 1);
  }
}

/** How long a populated cgroup may hold only unreadable tasks before it counts as held by them. */
const UNIDENTIFIED_PATIENCE_MS = 100;

/**
 * A member that stands for the tasks of a cgroup that could not be identified (see
 * holdsUnidentified): the tree is not gone while it is there, and only cgroup.kill reaches it.
 * Its pid is 0, which no signal is ever sent to (the guard refuses pid <= 1).
 */
export function unidentifiedMember(dir: string): ProcessInfo {
  return {
    pid: 0,
    ppid: 0,
    pgid: 0,
    sid: -1,
    startTime: `cgroup:${dir}`,
    state: 'R',
    command: `(tasks of ${dir} that vanish before they can be read: re-forking, or exiting)`,
  };
}

export const isUnidentifiedMember = (p: ProcessInfo): boolean =>
  p.pid === 0 && p.startTime.startsWith('cgroup:');

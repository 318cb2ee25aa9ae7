import { readdirSync, readFileSync, rmdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { CgroupHost } from '../../src/containment/index.js';

/** Why cgroup tests cannot run here, or null when they can (root and a writable cgroup v2). */
export function cgroupSkipReason(): string | null {
  if (process.getuid?.() !== 0) return 'not root: cgroup tests need to create cgroups';
  const probe = new CgroupHost().probe();
  return probe.ok ? null : probe.reason;
}

/** The parent cgroup this test process's supervisors use (it exists only while runs are live). */
export function parentCgroup(): string | null {
  const probe = new CgroupHost().probe();
  return probe.ok ? probe.parent : null;
}

function subtree(dir: string): string[] {
  let entries: string[] = [];
  try {
    entries = readdirSync(dir, { withFileTypes: true })
      .filter((e) => e.isDirectory())
      .map((e) => join(dir, e.name));
  } catch {
    return [];
  }
  return [...entries.flatMap(subtree), dir];
}

/**
 * Every cgroup this test process's supervisors left behind: a test fails on them, after they are
 * emptied (cgroup.kill: only our runs are in there) and removed, so a failure never leaks. With
 * `host`, the cgroups of that (dead) host process started by this test instead: they sit beside
 * ours and are named after its pid and start time.
 */
export function sweepCgroups(host?: { pid: number; start: string }): Promise<string[]> {
  return sweep(host ? `procwarden-${host.pid}-${host.start}` : `procwarden-${process.pid}-`, !!host);
}

/**
 * The same for the supervisors of another process (a host this test started, now dead). Only
 * cgroups younger than this test process: an older one of the same pid number is another process's
 * (a run SIGKILLed with its guard, in an earlier session on this machine), not this host's.
 */
export function hostCgroups(pid: number): Promise<string[]> {
  return sweep(`procwarden-${pid}-`, false, OWN_START);
}

/** This process's start time (clock ticks since boot): every host it started is younger. */
const OWN_START = Number(readFileSync('/proc/self/stat', 'utf8').split(') ')[1]?.split(' ')[19] ?? 0);

async function sweep(prefix: string, exact = false, youngerThan = 0): Promise<string[]> {
  const parent = parentCgroup();
  if (!parent) return [];
  const base = dirname(parent);
  const mine = readdirSync(base).filter(
    (n) => (exact ? n === prefix : n.startsWith(prefix)) && Number(n.split('-').at(-1) ?? 0) >= youngerThan,
  );
  const left: string[] = [];
  for (const name of mine) {
    const dirs = subtree(join(base, name));
    left.push(...dirs);
    for (const d of dirs) {
      try {
        writeFileSync(join(d, 'cgroup.kill'), '1');
      } catch {
        // already empty or gone
      }
    }
    for (let i = 0; i < 100 && dirs.some(populated); i++) await new Promise((r) => setTimeout(r, 10));
    for (const d of dirs) {
      try {
        rmdirSync(d);
      } catch {
        // reported through the return value
      }
    }
  }
  return left;
}

function populated(dir: string): boolean {
  try {
    return /^populated 1$/m.test(readFileSync(join(dir, 'cgroup.events'), 'utf8'));
  } catch {
    return false;
  }
}

/** The cgroup v2 path of a process, as /proc/PID/cgroup says. */
export function cgroupOf(pid: number): string | null {
  try {
    const line = readFileSync(`/proc/${pid}/cgroup`, 'utf8')
      .split('\n')
      .find((l) => l.startsWith('0::'));
    return line ? line.slice(3) : null;
  } catch {
    return null;
  }
}

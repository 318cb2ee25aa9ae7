import { readdirSync, readFileSync, rmdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { CgroupHost } from '../../src/containment/index.js';
import { spawnedStart, startTime } from './procs.js';

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
  return sweep(`procwarden-${host?.pid ?? process.pid}-${host?.start ?? startTime(process.pid)}`);
}

/**
 * The same for the supervisors of another process (a host startHost or startCli started, now
 * dead), by its pid and the start time noted at its spawn: a pid alone may by now be another
 * test's host, whose live run a sweep would kill.
 */
export function hostCgroups(pid: number): Promise<string[]> {
  return sweep(`procwarden-${pid}-${spawnedStart(pid)}`);
}

/** Kills and removes the parent cgroup NAME beside ours and what is below it; returns what was there. */
async function sweep(name: string): Promise<string[]> {
  const parent = parentCgroup();
  if (!parent) return [];
  const base = dirname(parent);
  const mine = readdirSync(base).filter((n) => n === name);
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

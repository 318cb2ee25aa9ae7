import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { liveThreadOf, type ProcessInfo } from '../../src/tree/index.js';

export const FIXTURES = join(dirname(fileURLToPath(import.meta.url)), '..', 'fixtures');
export const fixture = (name: string) => join(FIXTURES, name);

/**
 * Alive means: exists and is not a zombie (on these hosts PID 1 never reaps orphans). A pid that
 * is not one (a pid file not written yet, read as undefined) throws: "not alive" would pass.
 */
export function alive(pid: number): boolean {
  if (!Number.isInteger(pid) || pid <= 0)
    throw new Error(`alive(${pid}): not a pid (a pid file not written yet?)`);
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const state = stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
    if (state === 'Z') return liveThreadOf({ pid, state } as ProcessInfo).state !== 'Z';
    return state !== 'X';
  } catch {
    return false;
  }
}

/**
 * SIGKILL to each pid, ours by the caller's check: one that is already gone is skipped. Killing one
 * can end another (a shell waiting on it) and its parent may reap it before the next kill.
 */
export function killEach(pids: Iterable<number>): void {
  for (const pid of pids) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ESRCH') throw error;
    }
  }
}

/**
 * Start times of the processes the helpers spawned, read while they were still our unreaped
 * children: a pid number alone names another process once it is reused, and pids wrap fast on a
 * machine whose pid_max is 32768 (a cgroup sweep by pid alone once killed another test's run).
 */
const spawned = new Map<number, string>();

/** Notes a child's start time; call it right after spawn(), before the loop can reap it. */
export function noteSpawned(pid: number | undefined): void {
  const start = pid ? startTime(pid) : null;
  if (pid && start) spawned.set(pid, start);
}

/** The start time noted for a child of ours; throws for a pid no helper spawned. */
export function spawnedStart(pid: number): string {
  const start = spawned.get(pid);
  if (start === undefined)
    throw new Error(`pid ${pid} was not spawned by startHost/startCli: its start is unknown`);
  return start;
}

export function startTime(pid: number): string | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19] ?? null;
  } catch {
    return null;
  }
}

export function makeTmp(prefix = 'pw-test-'): string {
  return mkdtempSync(join(tmpdir(), prefix));
}

/** Pids written by fixtures as `<name>.pid` files in `dir`. */
export function readPids(dir: string): Map<string, number> {
  const out = new Map<string, number>();
  for (const f of readdirSync(dir)) {
    if (!f.endsWith('.pid')) continue;
    const pid = Number(readFileSync(join(dir, f), 'utf8').trim());
    if (pid > 0) out.set(f.slice(0, -4), pid);
  }
  return out;
}

export function exists(path: string): boolean {
  try {
    readFileSync(path);
    return true;
  } catch {
    return false;
  }
}

export async function waitFor<T>(
  probe: () => T | undefined | null | false,
  { timeoutMs = 10_000, intervalMs = 10, what = 'condition' } = {},
): Promise<T> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const value = probe();
    if (value) return value;
    if (Date.now() > until) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}

/** Live (non-zombie) processes whose environment holds PROCWARDEN_RUN=<prefix...>. */
export function cookieHolders(prefix: string): number[] {
  const needle = Buffer.from(`PROCWARDEN_RUN=${prefix}`);
  const out: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const pid = Number(entry);
    if (pid === process.pid) continue;
    let env: Buffer;
    try {
      env = readFileSync(`/proc/${entry}/environ`);
    } catch {
      continue;
    }
    const at = env.indexOf(needle);
    if (at >= 0 && (at === 0 || env[at - 1] === 0) && alive(pid)) out.push(pid);
  }
  return out;
}

/**
 * A pid read from a file may have been recycled: it only counts as the fixture's when the process's
 * command line or environment names the test directory (fixtures always get it as an argument).
 */
function mentions(pid: number, dir: string): boolean {
  for (const file of ['cmdline', 'environ']) {
    try {
      if (readFileSync(`/proc/${pid}/${file}`).includes(dir)) return true;
    } catch {
      // gone or unreadable
    }
  }
  return false;
}

/**
 * Every test that starts processes ends with `await leaks.check()`: it fails the test if any process
 * it tracked (by pid files, explicit pids, or run cookie prefix) is still alive, after killing
 * those by pid so one failure does not poison the machine.
 */
/** How long LeakGuard.check gives processes that are already ending (see there). */
const SETTLE_MS = 2000;

export class LeakGuard {
  private readonly pids = new Map<number, string | null>();
  private readonly dirs = new Set<string>();
  private readonly prefixes = new Set<string>();

  track(pid: number | undefined): void {
    if (pid && pid > 1) this.pids.set(pid, startTime(pid));
  }

  trackDir(dir: string): string {
    this.dirs.add(dir);
    return dir;
  }

  trackCookie(prefix: string): void {
    this.prefixes.add(prefix);
  }

  /** Survivors right now, without killing them. */
  survivors(): number[] {
    const found = new Set<number>();
    for (const dir of this.dirs) {
      try {
        for (const pid of readPids(dir).values()) if (alive(pid) && mentions(pid, dir)) found.add(pid);
      } catch {
        // the directory may already be gone
      }
    }
    // And every process that names a tracked directory without having written a pid file: a
    // fixture's `sleep` child inherits the directory through its environment (FIXTURE_DIR).
    if (this.dirs.size > 0) {
      for (const entry of readdirSync('/proc')) {
        if (!/^\d+$/.test(entry)) continue;
        const pid = Number(entry);
        if (pid === process.pid || found.has(pid)) continue;
        for (const dir of this.dirs) if (mentions(pid, dir) && alive(pid)) found.add(pid);
      }
    }
    for (const [pid, start] of this.pids) {
      if (alive(pid) && startTime(pid) === start) found.add(pid);
    }
    for (const prefix of this.prefixes) for (const pid of cookieHolders(prefix)) found.add(pid);
    found.delete(process.pid);
    return [...found];
  }

  async check(): Promise<void> {
    let survivors = this.survivors();
    // A process on its way out is not left behind: a SIGKILL lands a moment after kill() returns,
    // and a watchdog its host started as it ended (a host stopped before the watchdog's delay ran
    // out, then continued into its exit) boots, finds nothing to guard and exits. On a loaded
    // machine either can take hundreds of milliseconds; the fixtures' leaks sleep for minutes.
    for (const until = Date.now() + SETTLE_MS; survivors.length > 0 && Date.now() < until; ) {
      await new Promise((resolve) => setTimeout(resolve, 50));
      survivors = this.survivors();
    }
    // Read before they are killed: a leak seen once in CI must say what it was.
    const described = survivors.map(describeProcess);
    for (const pid of survivors) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // already gone
      }
    }
    for (const dir of this.dirs) rmSync(dir, { recursive: true, force: true });
    this.pids.clear();
    this.dirs.clear();
    if (survivors.length > 0)
      throw new Error(`processes leaked by this test (now killed): ${described.join('; ')}`);
  }
}

/**
 * SIGKILLs a child of this process and waits for its exit: a SIGKILLed process is not gone at once,
 * and a leak check right after `kill()` can still see it running (under load, for milliseconds).
 */
export async function killAndWait(child: ChildProcess | null | undefined): Promise<void> {
  if (!child || child.exitCode !== null || child.signalCode !== null) return;
  const gone = new Promise((resolve) => child.once('exit', resolve));
  child.kill('SIGKILL');
  await gone;
}

/** `pid [state ppid] command line`, as /proc shows it now; what is gone says so. */
function describeProcess(pid: number): string {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const [state, ppid] = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const cmd = readFileSync(`/proc/${pid}/cmdline`, 'utf8').replaceAll('\0', ' ').trim().slice(0, 160);
    return `${pid} [${state} ppid ${ppid}] ${cmd}`;
  } catch {
    return `${pid} [gone]`;
  }
}

import type { ChildProcess } from 'node:child_process';
import { existsSync, readFileSync, writeSync } from 'node:fs';
import type { Socket } from 'node:net';
import { fileURLToPath } from 'node:url';
import { ProcwardenError } from '../errors.js';
import { foreignProc, selfIdentity } from '../journal/self.js';
import { childProcess } from '../lazy-builtins.js';
import { spawnSealed } from '../spawn/pty-masters.js';
import { parseStat } from '../tree/procfs.js';
import { BUSY, GUARD_SCRIPT, guardArgs, IDLE, stateDirLine } from './script.js';

/** How often a busy host looks at its guard: SIGSTOP sends the parent no event Node passes on. */
const CHECK_MS = 200;
const MAX_LOSSES = 5;
const LOSS_WINDOW_MS = 2000;

/**
 * The reaper script, dist/watchdog/main.cjs: two levels below the package root as this module is
 * (dist/watchdog/guard.js from tsc, a chunk in dist/chunks/ or dist/cjs/, or src/watchdog/guard.ts
 * when procwarden runs from its sources, where the built one is used if there is one).
 */
function reaperScript(): string | null {
  for (const rel of ['../watchdog/main.cjs', '../../dist/watchdog/main.cjs']) {
    const path = fileURLToPath(new URL(rel, import.meta.url));
    if (existsSync(path)) return path;
  }
  return null;
}

/**
 * The one guard of this host process, whatever its number of Supervisors: a small process that
 * outlives the host and ends its runs if it dies without ending them itself (SIGKILL, OOM kill, a
 * fatal signal, an uncaught exception or process.exit() with runs in flight). POSIX: a shell (see
 * ./script.ts), a few MiB while the host lives, Node only once it has work. Windows: the reaper
 * itself waits (no shell to wait in).
 *
 * It is started before the first run's process exists, and every record is on disk before its
 * run's process exists, so a host killed at any moment after spawn() returns leaves nothing the
 * guard does not find. Its pipe's write end is the host's only (close-on-exec, never passed on:
 * see `ownsFd`), so only the host's death closes it. A guard lost while the host lives (SIGKILL,
 * SIGSTOP, the OOM killer) is replaced at once, and told all it knew; one that cannot be is a
 * typed error at the next spawn, never a silent gap.
 */
export class HostGuard {
  private child: ChildProcess | null = null;
  private fd: number | null = null;
  /** Field 22 of its /proc/PID/stat when it was started: its identity when it is checked. */
  private startTime: string | undefined;
  /** State directories told to the current guard; a new guard is told them all. */
  private readonly dirs: string[] = [];
  /** Runs in flight (and records kept for a later reap) of every Supervisor of this process. */
  private holds = 0;
  private timer: NodeJS.Timeout | null = null;
  private warming = false;
  /** When the last guards were lost (see replace). */
  private losses: number[] = [];
  /** Why the last guard was lost or could not be started; null while all is well. */
  problem: string | null = null;
  /** How many guards were started (the first, and each replacement). */
  started = 0;

  /** `shell`: a seam for tests (one that cannot be run is a guard that cannot be had). */
  constructor(private readonly shell = '/bin/sh') {}

  /** Its pid while it runs. */
  get pid(): number | undefined {
    return this.child?.pid;
  }

  /**
   * A run is about to be recorded in `stateDir` and started: from here on the host's death is
   * the guard's cue. Throws GUARD_UNAVAILABLE when no guard can be had (nothing was started).
   */
  acquire(stateDir: string): void {
    this.ensure();
    try {
      if (!this.dirs.includes(stateDir)) {
        this.dirs.push(stateDir);
        this.say(stateDirLine(stateDir));
      }
      if (this.holds === 0) this.say(BUSY);
    } catch {
      throw this.unavailable();
    }
    if (++this.holds === 1) {
      this.timer = setInterval(() => this.check(), CHECK_MS);
      this.timer.unref();
    }
  }

  /**
   * Starts the guard on a later turn, so that a Supervisor made ahead of its first spawn (an agent
   * runtime at start-up) does not pay a fork and exec inside that spawn. Idle, it costs a shell
   * waiting on a pipe; a spawn that comes first starts it then.
   */
  warmSoon(): void {
    if (this.warming || this.child) return;
    this.warming = true;
    setTimeout(() => {
      this.warming = false;
      if (this.child) return;
      this.replace(null);
    }, 0).unref();
  }

  /** A run acquired for is over and its record gone: at zero, the host's death is nobody's business. */
  release(): void {
    if (this.holds === 0) return;
    if (--this.holds > 0) return;
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    try {
      this.say(IDLE);
    } catch {
      // Lost while idle: the next acquire starts another.
    }
  }

  /** A state directory the guard must also read (a journal's fallback). */
  addStateDir(stateDir: string): void {
    if (this.dirs.includes(stateDir)) return;
    this.dirs.push(stateDir);
    try {
      if (this.child) this.say(stateDirLine(stateDir));
    } catch {
      // No guard to tell: `problem` says why, and the next spawn starts one told every directory.
    }
  }

  /** Whether `fd` is the host's end of the guard's pipe: it must never reach a run. */
  ownsFd(fd: number): boolean {
    return this.fd === fd;
  }

  /**
   * At the host's exit, synchronously: is it there to do its job? Its 'exit' event may not have
   * been delivered (the host died in a busy loop, or is in its own exit), so the process itself
   * is asked: a dead one, a zombie, or a stopped one would leave the runs to no one.
   */
  alive(): boolean {
    const pid = this.child?.pid;
    if (pid === undefined) return false;
    if (!procReadable()) return signalable(pid);
    let stat: string;
    try {
      stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    } catch {
      return false;
    }
    const info = parseStat(stat);
    return (
      info !== null && info.startTime === this.startTime && !['Z', 'X', 'x', 'T', 't'].includes(info.state)
    );
  }

  /** A healthy guard, started or replaced now if need be; throws GUARD_UNAVAILABLE if none can be. */
  private ensure(): void {
    if (this.child && this.alive()) return;
    this.replace(this.child || this.started > 0 ? 'it was stopped or is gone' : null);
    if (!this.child) throw this.unavailable();
  }

  private unavailable(): ProcwardenError {
    return new ProcwardenError(
      'GUARD_UNAVAILABLE',
      `no host guard could be started (${this.problem}), so a crash of this process would leave this run's processes running; nothing was started. Fix the cause, or pass { watchdog: false } (PROCWARDEN_WATCHDOG=0) to run unguarded.`,
    );
  }

  /** While runs are in flight: a stopped or vanished guard is replaced without waiting for a spawn. */
  private check(): void {
    if (this.holds > 0 && !this.alive()) {
      try {
        this.replace('it was stopped or is gone');
      } catch {
        // this.problem says why; the next spawn throws
      }
    }
  }

  /**
   * Ends the current guard (if any) and starts another, told everything the old one knew. Not more
   * than MAX_LOSSES times in LOSS_WINDOW_MS: something that kills every guard as it comes (a member
   * with the right to signal it) would otherwise have the host fork in a loop; the check timer
   * tries again, and a spawn meanwhile is refused.
   */
  private replace(why: string | null): void {
    const old = this.child;
    if (old) {
      this.drop();
      // A stopped one, continued later, would reap beside the new one: it goes (it is ours: a child
      // not yet waited for keeps its pid).
      if (old.pid !== undefined && old.exitCode === null && old.signalCode === null) {
        try {
          process.kill(old.pid, 'SIGKILL');
        } catch {
          // gone already
        }
      }
    }
    if (why !== null) {
      const now = performance.now();
      this.losses = this.losses.filter((t) => now - t < LOSS_WINDOW_MS);
      if (this.losses.length >= MAX_LOSSES) {
        this.problem = `guard lost ${this.losses.length + 1} times in ${LOSS_WINDOW_MS / 1000} s (${why}): something keeps ending it; not replaced until that stops`;
        return;
      }
      this.losses.push(now);
      this.problem = `guard lost (${why}); replaced`;
    }
    this.start();
    if (!this.child) return;
    try {
      for (const dir of this.dirs) this.say(stateDirLine(dir), false);
      if (this.holds > 0) this.say(BUSY, false);
    } catch (error) {
      this.problem = `guard could not be told its state: ${(error as Error).message}`;
      this.drop();
    }
  }

  private start(): void {
    const reaper = reaperScript();
    if (!reaper) {
      this.problem = 'the reaper dist/watchdog/main.cjs is missing (procwarden runs from unbuilt sources?)';
      return;
    }
    // The host's NODE_OPTIONS (an --inspect port, a --require'd agent) are not the reaper's, nor its
    // NODE_EXTRA_CA_CERTS: it speaks no TLS, and Node 20 parses them at start-up.
    const { NODE_OPTIONS: _, NODE_EXTRA_CA_CERTS: _certs, ...env } = process.env;
    const host = selfIdentity().start;
    const [file, args] =
      process.platform === 'win32'
        ? [process.execPath, [reaper, '--wait', String(process.pid), host ?? '-']]
        : [this.shell, ['-c', GUARD_SCRIPT, ...guardArgs(process.execPath, reaper, process.pid, host)]];
    let child: ChildProcess;
    try {
      // detached: a session of its own, out of a signal to the host's group or its terminal's. It
      // outlives runs: a PTY master it inherited would keep that terminal open (spawnSealed).
      child = spawnSealed(['pipe', 'ignore', 'ignore'], (stdio) =>
        childProcess().spawn(file, args, { env, detached: true, stdio, windowsHide: true }),
      );
    } catch (error) {
      this.problem = `guard not started: ${(error as Error).message}`;
      return;
    }
    const fd = (child.stdin as unknown as { _handle?: { fd?: unknown } } | null)?._handle?.fd;
    if (child.pid === undefined || typeof fd !== 'number' || fd < 0) {
      // spawn reports ENOENT/EACCES asynchronously ('error'), with no pid.
      this.problem = `guard not started: ${this.shell} could not be run`;
      child.on('error', () => {});
      return;
    }
    this.child = child;
    this.fd = fd;
    this.started++;
    this.startTime = undefined;
    if (procReadable()) {
      try {
        this.startTime = parseStat(readFileSync(`/proc/${child.pid}/stat`, 'utf8'))?.startTime;
      } catch {
        // gone already: 'exit' says so
      }
    }
    const lost = (why: string) => {
      if (this.child !== child) return;
      this.drop();
      this.problem = `guard lost: ${why}`;
      // Runs in flight are guarded again at once; an idle host starts one at its next spawn.
      if (this.holds > 0) {
        this.replace(why);
        if (this.child) this.problem = `guard lost (${why}); replaced`;
      }
    };
    child.on('error', (error) => lost(error.message));
    child.on('exit', (code, signal) => lost(`it exited (${signal ?? code})`));
    child.stdin?.on('error', () => {}); // EPIPE when it died first: 'exit' reports that
    child.unref();
    (child.stdin as Socket | null)?.unref();
  }

  private drop(): void {
    this.child = null;
    this.fd = null;
  }

  /**
   * One whole line, written now (not queued behind the event loop: the host may die in the next
   * instant, and what the guard has not got it cannot act on). A pipe the guard stopped reading
   * fills: EAGAIN, as a guard gone is EPIPE, and both replace it, once.
   */
  private say(line: string, again = true): void {
    const fd = this.fd;
    try {
      if (fd === null) throw new Error('no guard');
      if (writeSync(fd, line) !== Buffer.byteLength(line)) throw new Error('short write');
    } catch (error) {
      if (!again) throw error;
      this.replace(`a write failed: ${(error as NodeJS.ErrnoException).code ?? (error as Error).message}`);
      if (!this.child) throw error;
      // The new guard was told every directory and the busy state as they stood; this line too.
      this.say(line, false);
    }
  }
}

let cachedProcReadable: boolean | undefined;

/** /proc describes this pid namespace (see foreignProc): its stat files name our children. */
function procReadable(): boolean {
  cachedProcReadable ??=
    (process.platform === 'linux' || process.platform === 'android') && foreignProc() === null;
  return cachedProcReadable;
}

function signalable(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

let shared: HostGuard | undefined;

/** The guard of this process, shared by all its Supervisors (process-wide, as the process's death is). */
export function hostGuard(): HostGuard {
  shared ??= new HostGuard();
  return shared;
}

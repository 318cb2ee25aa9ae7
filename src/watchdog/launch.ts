import type { ChildProcess } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import type { Socket } from 'node:net';
import { fileURLToPath } from 'node:url';
import { childProcess } from '../lazy-builtins.js';
import { spawnSealed } from '../spawn/pty-masters.js';
import { parseStat } from '../tree/procfs.js';
import { CLEAN, toArgv, type WatchdogArgs } from './protocol.js';

/**
 * The compiled watchdog script; absent when procwarden runs from its TypeScript sources. Named from
 * one level up: this module is dist/watchdog/launch.js as tsc emits it, or part of a bundle chunk in
 * dist/chunks/ or dist/cjs/, and all sit two levels below the package root beside dist/watchdog/main.cjs.
 */
const main = () => fileURLToPath(new URL('../watchdog/main.cjs', import.meta.url));

/**
 * How long after the first spawn that asks for it a watchdog is started. On the next event-loop
 * turn, as it used to be, half of the `timeout 10 true` runs measured on Node 24 were still live
 * (the shim's spawn and `true` take 5-12 ms in all; 10 ms still let 3 of 15 through): each paid 3-4
 * ms for the watchdog's spawn and booted a Node process (40-60 ms of CPU) after its host had exited,
 * for nothing, on every call of a shell loop. The price: a host SIGKILLed within these milliseconds
 * of its first spawn leaves that run to `procwarden reap` (its record is on disk), as a host killed
 * within the first turn did.
 */
export const START_DELAY_MS = 25;

/**
 * The host's side of a supervisor's watchdog (see ./main.ts). Started a little after the spawn
 * that asks for it, so no spawn waits for it. It is never waited for: the child and
 * the pipe are unref'd, and the host polls nothing. Its own session (detached) keeps it out of
 * a signal to the host's process group. The pipe's host end is close-on-exec (libuv opens every
 * descriptor so), and spawn passes a child only the descriptors listed in its stdio: the runs the
 * host starts never hold it, so only the host's death closes it.
 */
export class Watchdog {
  private child: ChildProcess | null = null;
  private asked = false;
  private stopped = false;
  /** Field 22 of its /proc/PID/stat, read when it was started: its identity at the host's exit. */
  private startTime: string | undefined;
  problem: string | null = null;

  constructor(private readonly args: WatchdogArgs) {}

  /** Its pid while it runs. */
  get pid(): number | undefined {
    return this.child?.pid;
  }

  /**
   * At the host's exit, synchronously: is it there to do its job? Its 'exit' event may not have
   * been delivered (the host died in a busy loop, or is in its own exit), so the process itself
   * is asked: a dead one, a zombie, or a stopped one (SIGSTOP) would leave the runs to no one.
   */
  alive(): boolean {
    const pid = this.child?.pid;
    if (pid === undefined) return false;
    let stat: string;
    try {
      stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    } catch (error) {
      // No /proc (not Linux): whether a process has the pid is all there is to ask.
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT' || existsSync('/proc/self/stat')) return false;
      try {
        process.kill(pid, 0);
        return true;
      } catch {
        return false;
      }
    }
    const info = parseStat(stat);
    return (
      info !== null && info.startTime === this.startTime && !['Z', 'X', 'x', 'T', 't'].includes(info.state)
    );
  }

  /**
   * Asks for it START_DELAY_MS from now; later calls cost nothing until then. If by then `needed()`
   * is false (the runs that asked have already settled, their records removed), it is not started:
   * it would guard nothing, and the next call asks again. The timer holds no event loop open.
   */
  startSoon(needed: () => boolean): void {
    if (this.asked) return;
    this.asked = true;
    setTimeout(() => {
      if (needed()) this.start();
      else this.asked = false;
    }, START_DELAY_MS).unref();
  }

  /** A normal shutdown: it is told so and exits without reaping. */
  stop(): void {
    this.stopped = true;
    const child = this.child;
    this.child = null;
    child?.stdin?.end(CLEAN);
  }

  /** Starts it now (once). */
  start(): void {
    if (this.stopped || this.child) return;
    // Found when needed, not at import: the first URL a process parses costs 1 ms, and most runs
    // end before a watchdog is wanted.
    const MAIN = main();
    if (!existsSync(MAIN)) {
      this.problem = `no watchdog: ${MAIN} does not exist (procwarden runs from its sources?)`;
      return;
    }
    let child: ChildProcess;
    try {
      // The host's NODE_OPTIONS (an --inspect port, a --require'd agent) are not the watchdog's, nor
      // its NODE_EXTRA_CA_CERTS: the watchdog speaks no TLS, and Node 20 parses them at start-up
      // (75 ms of CPU for a 220 KB bundle, while the run it guards wants that CPU).
      const { NODE_OPTIONS: _, NODE_EXTRA_CA_CERTS: _certs, ...env } = process.env;
      // It outlives runs: a PTY master it inherited would keep that terminal open for its lifetime.
      child = spawnSealed(['pipe', 'ignore', 'ignore'], (stdio) =>
        childProcess().spawn(process.execPath, [MAIN, ...toArgv(this.args)], {
          env,
          detached: true,
          stdio,
          windowsHide: true,
        }),
      );
    } catch (error) {
      this.problem = `no watchdog: ${(error as Error).message}`;
      return;
    }
    this.child = child;
    try {
      this.startTime = parseStat(readFileSync(`/proc/${child.pid}/stat`, 'utf8'))?.startTime;
    } catch {
      // no /proc, or it is gone already ('exit' will say so)
    }
    const lost = (why: string) => {
      if (this.child === child) {
        this.child = null;
        this.problem = `watchdog lost: ${why}`;
      }
    };
    child.on('error', (error) => lost(error.message));
    child.on('exit', (code, signal) => lost(`it exited (${signal ?? code})`));
    child.stdin?.on('error', () => {}); // EPIPE when it died first: 'exit' reports that
    child.unref();
    (child.stdin as Socket | null)?.unref();
  }
}

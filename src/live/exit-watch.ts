import type { Clock } from '../clock.js';
import { isGone, type ProcessInfo, type ProcessTable, platformTable, stillAlive } from '../tree/index.js';
import { OneShot } from './timer.js';

/**
 * How often watched pids are read. A live child is the agent's child, not ours: Node 20 has no
 * pidfd and we cannot wait for it, so it is polled. On procfs a read is one small file per pid,
 * microseconds; where every read is a process launch (ps), the reads of one poll are issued in
 * one turn, which those tables answer with one launch. The watch exists to unpin a session whose
 * child died unreported, not to be prompt: half a second is plenty.
 */
export const EXIT_POLL_MS = 500;

interface Watched {
  pid: number;
  /** The process as first read: a later read of the pid is that process only with its start time. */
  known: ProcessInfo | undefined;
  /** A read of it is in flight: a poll does not start a second one. */
  reading: boolean;
  gone: () => void;
}

/**
 * Tells when processes end, by identity (pid + start time): a pid that names another process by
 * the time it is read again (the child exited, the number was handed out anew) counts as ended.
 * One timer for all watched pids, on the injected clock, armed only while something is watched.
 */
export class ExitWatch {
  private readonly watched = new Set<Watched>();
  private readonly timer: OneShot;
  private table: ProcessTable | undefined;
  private polling = false;

  constructor(
    clock: Clock,
    private readonly makeTable: () => ProcessTable = platformTable,
    private readonly intervalMs = EXIT_POLL_MS,
  ) {
    this.timer = new OneShot(clock, () => void this.poll());
  }

  /** Pids watched now. */
  get size(): number {
    return this.watched.size;
  }

  /**
   * Calls `gone` once, when the process that has `pid` now has ended (a zombie counts as ended),
   * unless the returned function was called first. `gone` is never called synchronously. The
   * identity is read at once: a pid already gone is reported on the first read. Throws only when
   * no process table exists for this platform (UNSUPPORTED_PLATFORM), before watching anything.
   */
  watch(pid: number, gone: () => void): () => void {
    this.table ??= this.makeTable();
    const entry: Watched = { pid, known: undefined, reading: false, gone };
    this.watched.add(entry);
    void this.check(this.table, entry);
    if (!this.timer.armed && !this.polling) this.timer.arm(this.intervalMs);
    return () => {
      this.watched.delete(entry);
      if (this.watched.size === 0) this.timer.clear();
    };
  }

  private async poll(): Promise<void> {
    const table = this.table;
    if (!table) return;
    this.polling = true;
    try {
      await Promise.all([...this.watched].map((entry) => this.check(table, entry)));
    } finally {
      this.polling = false;
      if (this.watched.size > 0) this.timer.arm(this.intervalMs);
    }
  }

  /** Never rejects: a table that fails to read leaves the pid watched, to be read at the next poll. */
  private async check(table: ProcessTable, entry: Watched): Promise<void> {
    if (entry.reading) return;
    entry.reading = true;
    let info: ProcessInfo | null;
    try {
      info = await table.get(entry.pid);
    } catch {
      return;
    } finally {
      entry.reading = false;
    }
    if (!this.watched.has(entry)) return;
    if (entry.known === undefined) {
      if (!isGone(info)) {
        entry.known = info as ProcessInfo;
        return;
      }
    } else if (stillAlive(info, entry.known)) {
      return;
    }
    this.watched.delete(entry);
    if (this.watched.size === 0) this.timer.clear();
    try {
      entry.gone();
    } catch {
      // The session's release never throws (its listeners are called each on its own); a poll
      // must not die of a callback either way.
    }
  }
}

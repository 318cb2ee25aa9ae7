import { ROOT_READ_DELAY_MS } from '../containment/index.js';
import type { Journal, RunRecord, StoppingRecord } from '../journal/index.js';
import { selfIdentity } from '../journal/self.js';
import type { ProcessTable } from '../tree/index.js';
import type { RunResult } from '../types.js';
import type { ManagedRun } from './managed-run.js';

interface Tracked {
  record: RunRecord;
  done: boolean;
  /** A write of its record failed: what is on disk (if anything) may not let a watchdog find it. */
  failed: boolean;
  /** Its stopping record was written (once: a second write would replace a file, see recordFileNames). */
  stopping: boolean;
}

const MAX_PROBLEMS = 50;

/**
 * Keeps a supervisor's runs on disk: a record before the spawn (the cookie is known, the pid not
 * yet), the same record with pid, start time and group right after, removal once the tree is
 * extinct. A write that fails costs that run its crash recovery, never its start.
 */
export class RunJournal {
  readonly problems: string[] = [];
  /**
   * Read synchronously where /proc has it: a host SIGKILLed in the tick it made its Supervisor
   * leaves a launch record without a start time otherwise, and then a process that reuses its
   * pid passes for it forever (its runs are never reaped).
   */
  private selfStart: string | null = selfIdentity().start;
  private readonly pidNamespace = selfIdentity().pidNamespace;
  private readonly timeNamespace = selfIdentity().timeNamespace;
  private readonly tracked = new Map<string, Tracked>();

  constructor(
    private readonly journal: Journal,
    private readonly table: ProcessTable,
    private readonly supervisorId: string,
  ) {
    // Elsewhere (no /proc) the table reads it, later.
    if (this.selfStart === null)
      table.get(process.pid).then(
        (info) => {
          this.selfStart = info?.startTime ?? null;
        },
        () => {},
      );
  }

  get dir(): string {
    return this.journal.dir;
  }

  /** Before the spawn. */
  begin(run: ManagedRun): void {
    const record: RunRecord = {
      format: 'procwarden.run/1',
      supervisorId: this.supervisorId,
      supervisorPid: process.pid,
      supervisorStart: this.selfStart,
      supervisorPidNamespace: this.pidNamespace,
      supervisorTimeNamespace: this.timeNamespace,
      runId: run.id,
      pid: null,
      pidStart: null,
      pgid: null,
      cookie: run.spec.cookie,
      cgroupPath: run.cgroupPath ?? null,
      startedAt: run.startedAt,
      killSignal: run.spec.killSignal,
      graceMs: run.spec.graceMs,
      command: run.spec.argv.join(' ').slice(0, 200),
    };
    if (this.write(record)) this.tracked.set(run.id, { record, done: false, failed: false, stopping: false });
  }

  /**
   * Right after the spawn returned. The identity is read in the same tick: the child cannot have
   * been reaped yet, so its pid still names it even if it already exited.
   */
  launched(run: ManagedRun): void {
    const t = this.tracked.get(run.id);
    const pid = run.pid;
    if (!t || pid === undefined) return;
    // Deferred as the run's own read is (ps): the same read serves both, and a command that ends
    // before it is made is let go unread, its record about to be removed anyway.
    const read = this.table.getSoon?.(pid, ROOT_READ_DELAY_MS) ?? this.table.get(pid);
    read.then(
      (info) => {
        if (t.done || info === undefined) return;
        t.record = {
          ...t.record,
          supervisorStart: this.selfStart,
          pid,
          pidStart: info?.startTime ?? null,
          pgid: run.pgid,
          cgroupPath: run.cgroupPath ?? null,
        };
        if (!this.write(t.record)) t.failed = true;
      },
      () => {},
    );
  }

  /**
   * The run's termination sent its first signal: a watchdog that takes over after a crash goes on
   * with that signal and that deadline, and does not signal again what was signalled already (a
   * second SIGTERM restarts a trap's cleanup). A failed write leaves it starting over, as before.
   */
  stopping(run: ManagedRun, stopping: StoppingRecord): void {
    const t = this.tracked.get(run.id);
    if (!t || t.done || t.stopping) return;
    t.stopping = true;
    this.write({ ...t.record, stopping });
  }

  /** Whether a watchdog can end this run from its record: it was written, and every rewrite too. */
  recorded(run: ManagedRun): boolean {
    const t = this.tracked.get(run.id);
    return t !== undefined && !t.failed;
  }

  /**
   * The run settled: its record goes, unless members escaped even SIGKILL or the table failed its
   * end, so that what is left is not known (a later reap looks again).
   */
  end(run: ManagedRun, result: RunResult): void {
    const t = this.tracked.get(run.id);
    if (!t) return;
    t.done = true;
    this.tracked.delete(run.id);
    if (result.tree.escaped > 0) {
      this.note(`run ${run.id}: ${result.tree.escaped} member(s) escaped; its record is kept for reap`);
      return;
    }
    if (run.treeUnverified) {
      this.note(`run ${run.id}: whether it left processes is not known; its record is kept for reap`);
      return;
    }
    try {
      // An unlink of a file never written is a syscall per run for nothing (a stop record is
      // rare; a ps run let go of its root writes no pid record).
      this.journal.remove(run.id, { pid: t.record.pid !== null, stop: t.stopping });
    } catch (error) {
      this.note(`run ${run.id}: record not removed: ${(error as NodeJS.ErrnoException).code ?? error}`);
    }
  }

  private write(record: RunRecord): boolean {
    try {
      this.journal.write(record);
      return true;
    } catch (error) {
      this.note(
        `run ${record.runId}: not journalled (${(error as NodeJS.ErrnoException).code ?? error}) in ${this.journal.dir}`,
      );
      return false;
    }
  }

  private note(text: string): void {
    if (this.problems.length < MAX_PROBLEMS) this.problems.push(text);
  }
}

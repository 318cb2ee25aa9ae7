import { ROOT_READ_DELAY_MS } from '../containment/index.js';
import { fallbackDirs, Journal, type RunRecord, type StoppingRecord } from '../journal/index.js';
import { selfIdentity } from '../journal/self.js';
import type { ProcessTable } from '../tree/index.js';
import type { RunResult } from '../types.js';
import type { ManagedRun } from './managed-run.js';

interface Tracked {
  record: RunRecord;
  /** Where its files are: the journal it was first written to, even after a move. */
  journal: Journal;
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
 * extinct. A state directory that takes no record is left for the next of fallbackDirs, and the
 * guard told; only when none takes it does the run go unrecorded, said in `problems` and by
 * `onUnrecorded` (a warning), never by refusing the run.
 */
export class RunJournal {
  readonly problems: string[] = [];
  /** The journals still to try, after the current one. */
  private readonly fallbacks: string[];
  private journal: Journal;
  /**
   * Read synchronously where /proc has it: a host SIGKILLed in the tick it made its Supervisor
   * leaves a launch record without a start time otherwise, and then a process that reuses its
   * pid passes for it forever (its runs are never reaped).
   */
  private selfStart: string | null = selfIdentity().start;
  private readonly pidNamespace = selfIdentity().pidNamespace;
  private readonly timeNamespace = selfIdentity().timeNamespace;
  private readonly tracked = new Map<string, Tracked>();
  private warned = false;

  constructor(
    journal: Journal,
    private readonly table: ProcessTable,
    private readonly supervisorId: string,
    /** A directory records go to from now on (the guard must read it too). */
    private readonly onMoved: (dir: string) => void = () => {},
    /** No directory took a run's record: said once, where a user sees it. */
    private readonly onUnrecorded: (problem: string) => void = () => {},
  ) {
    this.journal = journal;
    this.fallbacks = fallbackDirs().filter((dir) => dir !== journal.dir);
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
    const journal = this.writeFirst(record);
    if (journal) this.tracked.set(run.id, { record, journal, done: false, failed: false, stopping: false });
  }

  /**
   * A run's first record, in the first directory that takes it. Before the spawn, so a move costs
   * nothing the guard could miss: it is told the new directory before the run's process exists.
   */
  private writeFirst(record: RunRecord): Journal | null {
    const failures: string[] = [];
    for (;;) {
      const journal = this.journal;
      try {
        journal.write(record);
        if (failures.length > 0)
          this.note(`records go to ${journal.dir} from run ${record.runId} on: ${failures.join('; ')}`);
        return journal;
      } catch (error) {
        failures.push(`${journal.dir}: ${describeWriteError(error)}`);
      }
      const next = this.fallbacks.shift();
      if (next === undefined) break;
      this.journal = new Journal(next);
      this.onMoved(next);
    }
    const problem = `run ${record.runId}: not journalled anywhere (${failures.join('; ')}): a crash of this process would leave it running; give a state directory this user can write (stateDir, PROCWARDEN_STATE_DIR)`;
    this.note(problem);
    if (!this.warned) {
      this.warned = true;
      this.onUnrecorded(problem);
    }
    return null;
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
        if (!this.write(t.record, t.journal)) t.failed = true;
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
    this.write({ ...t.record, stopping }, t.journal);
  }

  /** Whether a watchdog can end this run from its record: it was written, and every rewrite too. */
  recorded(run: ManagedRun): boolean {
    const t = this.tracked.get(run.id);
    return t !== undefined && !t.failed;
  }

  /**
   * The run settled: its record goes, unless members escaped even SIGKILL or the table failed its
   * end, so that what is left is not known (a later reap looks again). True when it was kept.
   */
  end(run: ManagedRun, result: RunResult): boolean {
    const t = this.tracked.get(run.id);
    if (!t) return false;
    t.done = true;
    this.tracked.delete(run.id);
    if (result.tree.escaped > 0) {
      this.note(`run ${run.id}: ${result.tree.escaped} member(s) escaped; its record is kept for reap`);
      return true;
    }
    if (run.treeUnverified) {
      this.note(`run ${run.id}: whether it left processes is not known; its record is kept for reap`);
      return true;
    }
    try {
      // An unlink of a file never written is a syscall per run for nothing (a stop record is
      // rare; a ps run let go of its root writes no pid record).
      t.journal.remove(run.id, { pid: t.record.pid !== null, stop: t.stopping });
    } catch (error) {
      this.note(`run ${run.id}: record not removed: ${(error as NodeJS.ErrnoException).code ?? error}`);
      return true;
    }
    return false;
  }

  private write(record: RunRecord, journal: Journal): boolean {
    try {
      journal.write(record);
      return true;
    } catch (error) {
      this.note(`run ${record.runId}: not journalled (${describeWriteError(error)}) in ${journal.dir}`);
      return false;
    }
  }

  private note(text: string): void {
    if (this.problems.length < MAX_PROBLEMS) this.problems.push(text);
  }
}

function describeWriteError(error: unknown): string {
  const code = (error as NodeJS.ErrnoException).code;
  return code ?? (error instanceof Error ? error.message : String(error));
}

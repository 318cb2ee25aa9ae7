import { ProcwardenError } from '../errors.js';
import { exists } from './blind.js';
import { type CommandRunner, execRunner } from './runner.js';
import type { ProcessInfo, ProcessTable } from './types.js';

const FIELDS = 'pid=,ppid=,pgid=,lstart=,stat=,comm=';
/** The same without the one free-text column: no name can forge a row in what it prints. */
const FIELDS_NO_NAME = 'pid=,ppid=,pgid=,lstart=,stat=';
/** The command of a row read without its name. */
const NAME_UNREAD = '?';

/** What the reads asked for in one turn share: one `ps` call, and its rows by pid. */
interface Batch {
  pids: Set<number>;
  all: boolean;
  rows: Promise<Map<number, ProcessInfo>>;
}

/** Reads deferred by getSoon: who waits for which pid, and the timer that will read them. */
interface Deferred {
  waiting: Map<number, Waiter[]>;
  timer: ReturnType<typeof setTimeout>;
}

interface Waiter {
  resolve: (info: ProcessInfo | null | undefined) => void;
  reject: (error: unknown) => void;
}

/**
 * The process table of macOS and the BSDs. Identity is the start time `lstart` prints (to the
 * second), the best those systems offer without native code. ps prints no session id there, so
 * `sid` is -1 for every process. No environment search: ps cannot read another process's
 * environment reliably, so the cookie sweep is a procfs feature.
 *
 * Every `ps` call is a process launch (a quarter of a second on a loaded machine, more on macOS),
 * so the reads issued in one turn share one call: `get`s become one `ps -p a,b,c`, and a `list`
 * in the same turn answers them all. The call is made once the turn's synchronous code and
 * microtasks have asked, so nobody gets an older view than a call of its own would have given.
 */
export class PsTable implements ProcessTable {
  readonly name = 'ps';
  readonly batchesReads = true;
  private pending: Batch | null = null;
  private deferred: Deferred | null = null;

  constructor(
    private readonly runner: CommandRunner = execRunner,
    private readonly command = 'ps',
  ) {}

  async list(): Promise<ProcessInfo[]> {
    const batch = this.batch();
    batch.all = true;
    return [...(await batch.rows).values()];
  }

  async get(pid: number): Promise<ProcessInfo | null> {
    if (!Number.isInteger(pid) || pid <= 0) return null;
    const batch = this.batch();
    batch.pids.add(pid);
    return (await batch.rows).get(pid) ?? null;
  }

  /**
   * A run's read of its root, which a command that ends within `ms` does not need (the run lets it
   * go): deferred, it costs such a run no `ps` launch at all, and the reads of the runs started
   * meanwhile share one launch. The window is the first deferred read's: later ones join it.
   */
  getSoon(pid: number, ms: number): Promise<ProcessInfo | null | undefined> {
    if (!Number.isInteger(pid) || pid <= 0) return Promise.resolve(null);
    // A read about to be made anyway takes it along for nothing.
    if (this.pending) return this.get(pid);
    return new Promise((resolve, reject) => {
      this.deferred ??= { waiting: new Map(), timer: setTimeout(() => this.batch(), ms) };
      // Nothing to hold the process open for: the command whose root it reads does that.
      this.deferred.timer.unref?.();
      const waiting = this.deferred.waiting;
      waiting.set(pid, [...(waiting.get(pid) ?? []), { resolve, reject }]);
    });
  }

  letGo(pid: number): void {
    const deferred = this.deferred;
    const waiters = deferred?.waiting.get(pid);
    if (!deferred || !waiters) return;
    deferred.waiting.delete(pid);
    for (const { resolve } of waiters) resolve(undefined);
    if (deferred.waiting.size === 0) {
      clearTimeout(deferred.timer);
      this.deferred = null;
    }
  }

  hurry(pid: number): void {
    if (this.deferred?.waiting.has(pid)) this.batch();
  }

  /** The deferred reads join `batch` (the window's end, or a read made at once before it). */
  private takeDeferred(batch: Batch): void {
    const deferred = this.deferred;
    if (!deferred) return;
    this.deferred = null;
    clearTimeout(deferred.timer);
    for (const pid of deferred.waiting.keys()) batch.pids.add(pid);
    batch.rows.then(
      (rows) => {
        for (const [pid, waiters] of deferred.waiting)
          for (const w of waiters) w.resolve(rows.get(pid) ?? null);
      },
      (error) => {
        for (const waiters of deferred.waiting.values()) for (const w of waiters) w.reject(error);
      },
    );
  }

  groupHasMembers(pgid: number): boolean {
    return exists(-pgid);
  }

  /** One snapshot instead of one `ps` call per ancestor (see Guard). */
  async ancestry(pid: number): Promise<ProcessInfo[]> {
    const batch = this.batch();
    batch.all = true;
    const rows = await batch.rows;
    const chain: ProcessInfo[] = [];
    for (
      let info = rows.get(pid);
      info && info.pid > 1 && !chain.includes(info);
      info = rows.get(info.ppid)
    ) {
      chain.push(info);
    }
    return chain;
  }

  private batch(): Batch {
    if (this.pending) {
      this.takeDeferred(this.pending);
      return this.pending;
    }
    const batch: Batch = {
      pids: new Set(),
      all: false,
      rows: Promise.resolve().then(async () => {
        this.pending = null;
        return new Map((await this.read(batch)).map((p) => [p.pid, p]));
      }),
    };
    this.pending = batch;
    this.takeDeferred(batch);
    return batch;
  }

  private async read({ all, pids }: Batch): Promise<ProcessInfo[]> {
    // ps exits 1 when a listed pid does not exist (some ps: when none does): the rows it printed
    // are still the answer, and no row means "no such process", not a failure.
    const args = all ? ['-ww', '-A', '-o', FIELDS] : ['-ww', '-o', FIELDS, '-p', [...pids].join(',')];
    const text = await this.run(args, !all);
    const { rows, twice } = parseRows(text);
    // Lines, and not one of them a row: a ps whose output this parser cannot read (another
    // format), not processes that are gone, which is what every member would otherwise look.
    if (rows.length === 0 && twice.size === 0 && text.trim() !== '') {
      const first = JSON.stringify(text.trim().split('\n')[0]?.slice(0, 100));
      throw this.unreadable(args, `no line of its output could be read, the first: ${first}`);
    }
    if (twice.size === 0) return rows;
    // A pid printed twice: a name holding a newline forged a row. Those pids are read again
    // without names, where nothing can forge a row, so that the forger hides neither itself nor
    // the process it named.
    const again = ['-ww', '-o', FIELDS_NO_NAME, '-p', [...twice].join(',')];
    const named = parseRows(await this.run(again, true)).rows.filter((p) => twice.has(p.pid));
    return [...rows, ...named];
  }

  private async run(args: string[], missingIsFine = false): Promise<string> {
    // Dates in one form whatever the host's locale (macOS and BSD ps print lstart with the
    // locale's strftime %c: "Wed  2 Dec" in en_GB) and one zone whatever TZ says now: the start
    // time is a process's identity, and a row in another form would be no row at all.
    // And at any width: BSD ps cuts its lines to COLUMNS (-ww lifts that), which could cut a row
    // before its start time.
    const { COLUMNS: _, ...env } = process.env;
    const r = await this.runner(this.command, args, { ...env, LC_ALL: 'C', TZ: 'UTC0' });
    if (r.code === 0 || (missingIsFine && r.code === 1)) return r.stdout;
    throw this.unreadable(args, r.error ? r.error.message : `exit code ${r.code}: ${r.stderr.trim()}`);
  }

  private unreadable(args: string[], why: string): ProcwardenError {
    return new ProcwardenError(
      'UNSUPPORTED_PLATFORM',
      `the process table could not be read with '${this.command} ${args.join(' ')}' (${why}); procwarden needs a working ps on this platform.`,
    );
  }
}

// pid ppid pgid  Dow Mon DD HH:MM:SS YYYY  stat  [comm (the rest of the line; may hold spaces)]
// FreeBSD and macOS print `-` for the start time of a process whose details they cannot read (a
// zombie; on FreeBSD one swapped out too): a row still, whose identity matches no process seen
// before it, never a line that cannot be read (a `ps -p` of a zombie alone would fail the read).
const ROW =
  /^\s*(\d+)\s+(\d+)\s+(\d+)\s+(\w{3}\s+\w{3}\s+\d{1,2}\s+\d{1,2}:\d{2}:\d{2}\s+\d{4}|-)\s+(\S+)(?:\s+(.*))?$/;

/**
 * Parses the output of `ps -o pid=,ppid=,pgid=,lstart=,stat=,comm=`; lines it cannot read are
 * skipped. A pid with two rows is dropped, both rows: a command name holding a newline can print a
 * second, forged row (another process's pid and start time), and neither can then be told to be
 * the real one. (PsTable reads such pids again without names.)
 */
export function parsePs(text: string): ProcessInfo[] {
  return parseRows(text).rows;
}

/** The rows of pids printed once, and the pids printed more than once. */
function parseRows(text: string): { rows: ProcessInfo[]; twice: Set<number> } {
  const out: ProcessInfo[] = [];
  const seen = new Set<number>();
  const twice = new Set<number>();
  for (const line of text.split('\n')) {
    const m = ROW.exec(line);
    if (!m) continue;
    const [, pid, ppid, pgid, lstart, stat, comm] = m as unknown as [string, ...(string | undefined)[]];
    if (seen.has(Number(pid))) twice.add(Number(pid));
    seen.add(Number(pid));
    out.push({
      pid: Number(pid),
      ppid: Number(ppid),
      pgid: Number(pgid),
      sid: -1,
      startTime: (lstart ?? '').replace(/\s+/g, ' '),
      state: (stat ?? '?').charAt(0),
      // Trailing blanks trimmed here, not by the pattern: a lazy match before `\s*$` is quadratic
      // in a command named with many blanks, and any process can name itself so.
      command: comm === undefined ? NAME_UNREAD : comm.trimEnd(),
    });
  }
  return { rows: twice.size === 0 ? out : out.filter((p) => !twice.has(p.pid)), twice };
}

/** One row of a process table. `startTime` is opaque: only equality matters (identity = pid + startTime). */
export interface ProcessInfo {
  pid: number;
  ppid: number;
  pgid: number;
  /** Session id; -1 where the table cannot tell (ps on macOS prints no session id). */
  sid: number;
  startTime: string;
  /** One-letter state as ps prints it: R, S, D, T, Z, X... */
  state: string;
  command: string;
}

/** What one sweep looks for besides the table: holders of `NAME=value` in their environment. */
export interface EnvQuery {
  name: string;
  value: string;
  /**
   * Also a holder: a process whose variable of this name lists `value` among its words (separated
   * by single spaces). How a run started inside another run's tree carries the outer run's cookie.
   */
  listName?: string;
  /**
   * The process the value was first given to. Everything that holds it descends from that process,
   * so a table that can order start times skips reading the environment of older processes.
   */
  firstHolder?: ProcessInfo | null;
  /**
   * The oldest process the caller counts as a member. A table may leave out of `processes` what
   * started before it: nothing that old descends from a member, shares a group or session one
   * founded, or holds the value. Absent: every process is listed.
   */
  olderThan?: ProcessInfo | null;
  /**
   * Called the moment a live holder is read, before the sweep reads on. A freeze stops holders
   * here: one that re-forks under a new session every few hundred microseconds has forked again
   * by the time a whole sweep is over, so a stop sent after the sweep reaches only its corpse.
   */
  onHolder?: (holder: ProcessInfo) => void;
  /**
   * A session the caller claims whole, with its founder's start time: every process in it is a
   * member by its session, so a table may skip reading their environments (none of them is
   * reported as a holder). It does so only while the founder, same start time, still leads it:
   * a founder gone no longer keeps its number from being someone else's session.
   */
  session?: { sid: number; startTime: string };
}

export interface Sweep {
  processes: ProcessInfo[];
  /** Pids (of `processes`) whose environment holds the queried entry. */
  holders: Set<number>;
  /**
   * Entries listed that were gone by the time they were read, and may have left a child nobody
   * read (0 when a later listing showed every process born meanwhile, and those were read).
   */
  vanished: number;
  /**
   * Live processes born since the first holder whose environment still read empty after re-reads,
   * with no command line either: between two execs (the kernel shows neither until the new program
   * is set up) or exiting. Whether they hold the entry is not known yet. Absent: none (or the
   * table cannot tell).
   */
  unsettled?: number;
  /**
   * What the table's `births` read just before this sweep listed the processes; null (or absent)
   * when it has none, or when the sweep could not read some environment it needed (a set-uid
   * program's): then it proves nothing about later sweeps.
   */
  births?: number | null;
}

/** Everything procwarden needs to know about processes, one implementation per platform. */
export interface ProcessTable {
  readonly name: string;
  /** Every process on the machine, as one snapshot. */
  list(): Promise<ProcessInfo[]>;
  /** One process, read fresh; null when it does not exist. */
  get(pid: number): Promise<ProcessInfo | null>;
  /**
   * `pid` and its ancestors, nearest first, down to (not including) PID 1, read from one snapshot.
   * Optional: offered by tables whose every read is a process launch (ps), where walking up by
   * `get` would cost one launch per ancestor. Tables with cheap per-pid reads (procfs) leave it out.
   */
  ancestry?(pid: number): Promise<ProcessInfo[]>;
  /**
   * Pids whose environment holds `NAME=value` (or lists value in `listName`, see EnvQuery). Optional: only tables that can read other processes'
   * environments (procfs) offer it.
   */
  findByEnv?(name: string, value: string, listName?: string): Promise<number[]>;
  /**
   * list() and findByEnv() in one pass over the table (one directory read on procfs). Optional,
   * offered by the tables that offer findByEnv.
   */
  sweep?(query: EnvQuery): Promise<Sweep>;
  /**
   * Whether any process is in process group `pgid` now, asked of the kernel (kill(-pgid, 0)), not
   * read from a snapshot. Optional: offered by the table whose every read is a process launch (ps),
   * where a scan that provably finds nothing is worth not taking.
   */
  groupHasMembers?(pgid: number): boolean;
  /**
   * True when per-pid reads issued in one turn cost one read, however many pids they ask for (ps:
   * one `ps -p a,b,c` launch): a caller that needs several asks for them all at once. Tables whose
   * per-pid reads are cheap (procfs) leave it out, and a caller may stop at the first it needs.
   */
  readonly batchesReads?: boolean;
  /**
   * get(pid), made within `ms` rather than at once: the reads deferred meanwhile share one, and one
   * made at once by anyone (a get, a list) takes them all along. Resolves undefined when letGo(pid)
   * came first: nobody needs the answer, and it is not read at all. Optional: offered by the tables
   * whose every read is a process launch (ps), where the read a short command's run would make of
   * its root is most of what the run costs.
   */
  getSoon?(pid: number, ms: number): Promise<ProcessInfo | null | undefined>;
  /** The deferred reads of `pid` are not needed any more: each resolves undefined, unread. */
  letGo?(pid: number): void;
  /** The deferred read of `pid` is needed now: it is made at once (with the others deferred). */
  hurry?(pid: number): void;
  /**
   * How many tasks (processes and threads) the kernel has created since boot, read now; null when
   * it cannot be read. It only ever grows, so two equal reads prove that nothing was born in
   * between, anywhere on the machine: what a scan saw between them is all there is, minus what has
   * died. Optional: procfs offers it (/proc/stat `processes`).
   */
  births?(): number | null;
  /**
   * Whether process `pid` ignores signal number `signal` now (its disposition is SIG_IGN); null
   * when that cannot be read (gone). Optional: procfs offers it (/proc/PID/status SigIgn).
   */
  ignores?(pid: number, signal: number): boolean | null;
  /**
   * The process that task `id` belongs to: `id` itself for a process, its thread group's leader
   * for a thread; null when gone. A thread's id opens /proc/ID as a pid does, though no listing
   * shows it, and kill(2) given one signals its whole process. Optional: procfs offers it
   * (/proc/ID/status Tgid).
   */
  processOf?(id: number): number | null;
  /** `pid`'s argv now; null when gone, unreadable or mid-exec. Optional: procfs (/proc/PID/cmdline). */
  argv?(pid: number): string[] | null;
  /**
   * What descriptor `fd` of `pid` points to (`pipe:[123]`, a path...); null when gone or
   * unreadable. Optional: procfs (readlink /proc/PID/fd/FD).
   */
  fdLink?(pid: number, fd: number): string | null;
  /** Whether `pid` holds `link` (as fdLink shows one) open on any descriptor. Optional: procfs. */
  holdsOpen?(pid: number, link: string): boolean;
}

/**
 * No platform hands out a pid above 2^32 - 1 (Linux's pid_max is at most 2^22, Windows' ids are
 * 32-bit); a larger number, or one past 2^53 that JavaScript has already rounded, names nobody.
 */
export const MAX_PID = 0xffffffff;

export function isProcessId(pid: unknown): pid is number {
  return typeof pid === 'number' && Number.isInteger(pid) && pid > 0 && pid <= MAX_PID;
}

/** Zombies and dead entries count as gone: on hosts whose PID 1 does not reap, they stay forever. */
export function isGone(info: ProcessInfo | null | undefined): boolean {
  return !info || info.state === 'Z' || info.state === 'X' || info.state === 'x';
}

export function sameProcess(a: ProcessInfo, b: Pick<ProcessInfo, 'pid' | 'startTime'>): boolean {
  return a.pid === b.pid && a.startTime === b.startTime;
}

/** `fresh`, a new read of `known`'s pid, is still that process (same start time), not a zombie. */
export function stillAlive(
  fresh: ProcessInfo | null | undefined,
  known: Pick<ProcessInfo, 'pid' | 'startTime'>,
): fresh is ProcessInfo {
  return !isGone(fresh) && sameProcess(fresh as ProcessInfo, known);
}

import { closeSync, openSync, readdirSync, readFileSync, readSync, statSync } from 'node:fs';
import { holdsOpen, readArgv, readFdLink } from './procfs-open.js';
import type { EnvQuery, ProcessInfo, ProcessTable, Sweep } from './types.js';

/**
 * Linux process table read from /proc. Reads are synchronous on purpose: each is a few
 * microseconds from the kernel, and a snapshot taken in one go is more coherent than one
 * spread over many event-loop turns. What a row says is always a fresh read; sweeps only remember
 * which old processes they may leave out (see `old`).
 */
export class ProcfsTable implements ProcessTable {
  readonly name = 'procfs';
  /** Reused for every stat read: one open/read/close, no allocation per process. */
  private readonly buf = Buffer.allocUnsafe(4096);
  private readonly envBuf = Buffer.allocUnsafe(64 * 1024);
  /**
   * Processes sweeps found older than every first holder, by pid: their start time and, once a
   * sweep has read it before their stat file, the inode of their /proc entry. procfs makes a new
   * inode, numbered from a counter, whenever it makes an entry for a process, so the same inode
   * under the same pid is the same process: one stat() of the directory then says so, where the
   * stat file costs three calls and a parse.
   */
  private old = new Map<number, OldProcess>();
  private birthsSeen: number | 'broken' | null = null;

  constructor(private readonly root = '/proc') {}

  async list(): Promise<ProcessInfo[]> {
    return this.listSync();
  }

  listSync(): ProcessInfo[] {
    const out: ProcessInfo[] = [];
    for (const pid of this.pids()) {
      const info = this.getSync(pid);
      if (info) out.push(info);
    }
    return out;
  }

  async get(pid: number): Promise<ProcessInfo | null> {
    return this.getSync(pid);
  }

  getSync(pid: number): ProcessInfo | null {
    const text = this.readSmall(`${this.root}/${pid}/stat`);
    // null: vanished between readdir and read
    return text === null ? null : processOfStat(text, this.root, (path) => this.readSmall(path));
  }

  ignores(pid: number, signal: number): boolean | null {
    if (!Number.isInteger(signal) || signal < 1 || signal > 64) return null;
    const text = this.readSmall(`${this.root}/${pid}/status`);
    const mask = text === null ? undefined : /\nSigIgn:\s*([0-9a-f]+)/.exec(text)?.[1];
    if (mask === undefined) return null;
    return ((BigInt(`0x${mask}`) >> BigInt(signal - 1)) & 1n) === 1n;
  }

  processOf(id: number): number | null {
    const text = this.readSmall(`${this.root}/${id}/status`);
    const tgid = text === null ? undefined : /\nTgid:\s*(\d+)/.exec(text)?.[1];
    return tgid === undefined ? null : Number(tgid);
  }

  argv(pid: number): string[] | null {
    return readArgv(this.root, pid);
  }

  fdLink(pid: number, fd: number): string | null {
    return readFdLink(this.root, pid, fd);
  }

  holdsOpen(pid: number, link: string): boolean {
    return holdsOpen(this.root, pid, link);
  }

  /**
   * /proc/stat's `processes`: every fork and clone since boot, in every namespace (see
   * ProcessTable.births). Never believed again once it has gone back.
   */
  births(): number | null {
    // Kilobytes on a host with many CPUs and interrupts: the large buffer, so the kernel makes it once.
    const text = this.readSmall(`${this.root}/stat`, this.envBuf);
    const at = text?.indexOf('\nprocesses ') ?? -1;
    const count = text == null || at < 0 ? Number.NaN : Number.parseInt(text.slice(at + 11), 10);
    const seen = this.birthsSeen;
    if (!Number.isSafeInteger(count) || seen === 'broken') return null;
    if (seen !== null && count < seen) {
      this.birthsSeen = 'broken';
      return null;
    }
    this.birthsSeen = count;
    return count;
  }

  async findByEnv(name: string, value: string, listName?: string): Promise<number[]> {
    const needle = envNeedle(name, value);
    return this.pids().filter((pid) => {
      const env = this.environ(pid);
      return (
        env !== null && (hasEntry(env, needle) || (listName !== undefined && lists(env, listName, value)))
      );
    });
  }

  async sweep(query: EnvQuery): Promise<Sweep> {
    return this.sweepManySync([query])[0] as Sweep;
  }

  async sweepMany(queries: readonly EnvQuery[]): Promise<Sweep[]> {
    return this.sweepManySync(queries);
  }

  /**
   * One readdir and one pass for the table and any number of environment searches (many runs
   * ending at once). An environment is read at most once, and only for a process that started no
   * earlier than some query's first holder: nothing older can have inherited the value. When
   * every query names the oldest process it counts (`olderThan`), a process older than all of
   * them that an earlier sweep already read is left out, once its /proc entry proves it the same
   * process (see `old`). This process and its ancestors are always in, read fresh: the guard
   * judges targets against them.
   */
  sweepManySync(queries: readonly EnvQuery[]): Sweep[] {
    const floors = queries.map((q) => (q.firstHolder ? Number(q.firstHolder.startTime) : 0));
    const lowest = Math.min(...floors);
    const oldBefore = Math.min(...queries.map((q) => (q.olderThan ? Number(q.olderThan.startTime) : 0)));
    // Where nothing may be left out, nothing is old: such a sweep reads all, and leaves what is known alone.
    const seenOld = this.old;
    const old = queries.length > 0 && oldBefore > 0 ? new Map<number, OldProcess>() : null;
    if (old) this.old = old;
    let leftOut = false;
    const names = [
      ...new Set(queries.flatMap((q) => (q.listName === undefined ? [q.name] : [q.name, q.listName]))),
    ];
    const processes: ProcessInfo[] = [];
    const holders = queries.map(() => new Set<number>());
    const ownSessions = queries.map((q) => this.ownSession(q));
    /** Sessions whose members this sweep left unread. */
    const skipped = new Set<number>();
    const retried = new Map<number, number>();
    const unsettled = new Set<number>();
    let unreadable = false;
    /** 'ok'; 'gone' (vanished, or died since the run began); 'again': alive, environment unreadable (mid-exec). */
    const read = (pid: number, last: boolean): 'ok' | 'gone' | 'again' => {
      const was = old ? seenOld.get(pid) : undefined;
      const entry = was && was.start < oldBefore ? this.entry(pid) : null;
      if (was?.ino !== undefined && entry?.ino === was.ino && entry.ctimeMs === was.ctimeMs) {
        old?.set(pid, was);
        leftOut = true;
        return 'ok';
      }
      // The entry was read before the stat file: if the stat file shows the process an earlier
      // sweep read under this pid (same start time), it held the pid all along, so the entry is its.
      const info = this.getSync(pid);
      if (!info) return 'gone';
      const start = Number(info.startTime);
      if (start < oldBefore) old?.set(pid, entry && was?.start === start ? { start, ...entry } : { start });
      // Kernel threads (children of kthreadd, pid 2) have no environment and never a cookie.
      if (queries.length > 0 && start >= lowest && info.ppid !== 2 && info.pid !== 2) {
        // Dead since the run began (a zombie: PID 1 may never reap it): it may have forked a
        // child this pass did not list.
        if (info.state === 'Z' || info.state === 'X') {
          processes.push(info);
          return 'gone';
        }
        if (queries.every((_, i) => start < (floors[i] as number) || ownSessions[i] === info.sid)) {
          skipped.add(info.sid);
          processes.push(info);
          return 'ok';
        }
        const env = this.environ(pid);
        if (!env || env.length === 0) {
          const tries = (retried.get(pid) ?? 0) + 1;
          retried.set(pid, tries);
          if (!last && tries <= MAX_REREADS) return 'again';
          processes.push(info);
          // Still empty. An environment of its own (env -i and nothing) comes with a command line;
          // a process between two execs (or exiting) shows neither: whose it is, is not known yet.
          if (this.noCommandLine(pid)) unsettled.add(pid);
          // Not ours to read (a set-uid program): an exec may yet show what it holds.
          if (!env) unreadable = true;
          return tries <= MAX_REREADS ? 'again' : 'ok';
        }
        // Each variable found once for all the queries that name it; a process that holds none of
        // them (most do not) costs no pass over the queries.
        const values = new Map<string, string>();
        for (const name of names) {
          const value = envValue(env, name);
          if (value !== null) values.set(name, value);
        }
        let stopped = false;
        if (values.size > 0) {
          queries.forEach((q, i) => {
            if (start < (floors[i] as number)) return;
            const holds =
              values.get(q.name) === q.value ||
              (q.listName !== undefined && (values.get(q.listName)?.split(' ').includes(q.value) ?? false));
            if (!holds) return;
            holders[i]?.add(pid);
            if (!q.onHolder) return;
            q.onHolder(info);
            stopped = true;
          });
        }
        if (stopped) {
          lastStopped = pid;
          if (!chasing) successors(pid, last);
        }
      }
      processes.push(info);
      return 'ok';
    };
    /**
     * A holder stopped on sight may have forked a moment before its stop: its child most likely took
     * one of the next pids (they are handed out in increasing order until they wrap) and, if it
     * re-forks too, lives well under a millisecond, less than a listing of a busy /proc takes. So
     * the next pids are read at once, until a few in a row hold no process; a thread's id is not a
     * process's. A successor stopped in turn carries the read on past it (in a loop: a chain of
     * thousands must not take as many stack frames).
     */
    const successors = (pid: number, last: boolean): void => {
      chasing = true;
      for (let next = pid + 1, misses = 0; misses < SUCCESSOR_MISSES; next++) {
        if (listed.has(next)) continue;
        if (this.processOf(next) !== next) {
          misses++;
          continue;
        }
        listed.add(next);
        const outcome = read(next, last);
        // Alive a moment ago: read again with the next pass (it may have forked, or be mid-exec).
        if (outcome !== 'ok') probedAgain.push(next);
        if (lastStopped === next) misses = 0;
      }
      chasing = false;
    };
    let probedAgain: number[] = [];
    let chasing = false;
    let lastStopped = 0;
    // A process that vanished or died mid-sweep may have forked first (a process that re-forks
    // under a new session again and again is always alive as one of its generations, yet each is
    // read after it exited): the pids that appeared since the listing are read at once, with those
    // whose environment could not be read yet, until a pass sees nothing vanish. Its generation
    // alive at the last listing is then among what was read.
    // Before the listing: a birth after this read and before the listing is counted, so can only
    // make a later read differ (see ProcessTable.births).
    const births = this.births();
    // Newest first: pids are handed out in increasing order (until they wrap), and the youngest
    // processes are the likeliest to be gone, or to have forked, by the end of a long listing.
    let batch = this.pids().reverse();
    const listed = new Set(batch);
    let vanished = 0;
    for (let pass = 0; pass < CHASE_PASSES && batch.length > 0; pass++) {
      const last = pass === CHASE_PASSES - 1;
      const again: number[] = [];
      vanished = 0;
      for (const pid of batch) {
        const outcome = read(pid, last);
        if (outcome === 'again') again.push(pid);
        if (outcome !== 'ok') vanished++;
      }
      vanished += probedAgain.length;
      again.push(...probedAgain);
      probedAgain = [];
      if (vanished === 0) break;
      const born = this.pids()
        .filter((pid) => !listed.has(pid))
        .reverse();
      for (const pid of born) listed.add(pid);
      // Nothing born since and nothing to read again: whatever vanished left no one unread.
      if (born.length === 0 && again.length === 0) vanished = 0;
      batch = [...again, ...born];
    }
    // The founder reaped and its number handed on while this sweep read: what it left unread may
    // not be the caller's after all. It takes a wrap of the pid numbers within one sweep; read again.
    const changed = (sid: number | undefined, i: number) =>
      sid !== undefined && skipped.has(sid) && this.ownSession(queries[i] as EnvQuery) !== sid;
    if (ownSessions.some(changed)) {
      return this.sweepManySync(queries.map((q) => ({ ...q, session: undefined })));
    }
    if (leftOut) this.addOwnAncestry(processes);
    // Read newest first, handed on oldest first (by start time, then pid): members are signalled
    // one by one in this order, and a parent signalled after its child could see it die and go on
    // (a shell runs its next command, or exits with the child's status) before its own came.
    processes.sort((a, b) => Number(a.startTime) - Number(b.startTime) || a.pid - b.pid);
    const rank = new Map(processes.map((p, k) => [p.pid, k]));
    const last = processes.length;
    const byAge = (a: number, b: number) => (rank.get(a) ?? last) - (rank.get(b) ?? last) || a - b;
    return queries.map((_, i) => ({
      processes,
      holders: new Set([...(holders[i] as Set<number>)].sort(byAge)),
      vanished,
      unsettled: unsettled.size,
      births: unreadable ? null : births,
    }));
  }

  /**
   * The query's `session`, while its founder holds the number (alive or a zombie: same start time,
   * still leading it): no one else's session can have it then, so everyone in it is the caller's.
   * A founder gone is no such proof (a session that empties gives its number back, and a
   * stranger's setsid can take it), so then everything is read. Never for a sweep that stops
   * holders on sight, which must read them as it goes.
   */
  private ownSession(query: EnvQuery): number | undefined {
    const session = query.session;
    if (!session || query.onHolder) return undefined;
    const founder = this.getSync(session.sid);
    const holds = founder !== null && founder.startTime === session.startTime && founder.sid === session.sid;
    return holds ? session.sid : undefined;
  }

  /** This process and its ancestors, read fresh where the sweep left them out as old. */
  private addOwnAncestry(processes: ProcessInfo[]): void {
    const read = new Map(processes.map((p) => [p.pid, p]));
    let pid = process.pid;
    for (let hops = 0; hops < 4096 && pid > 1; hops++) {
      let info = read.get(pid) ?? null;
      if (!info) {
        info = this.getSync(pid);
        if (!info) return;
        processes.push(info);
      }
      pid = info.ppid;
    }
  }

  /** The identity of a /proc/PID directory (see `old`); null when it is gone. */
  private entry(pid: number): { ino: number; ctimeMs: number } | null {
    try {
      const st = statSync(`${this.root}/${pid}`, { throwIfNoEntry: false });
      return st ? { ino: st.ino, ctimeMs: st.ctimeMs } : null;
    } catch {
      return null;
    }
  }

  private pids(): number[] {
    const out: number[] = [];
    for (const entry of readdirSync(this.root)) {
      const code = entry.charCodeAt(0);
      if (code >= 48 && code <= 57) out.push(Number(entry));
    }
    return out;
  }

  /** An empty /proc/PID/cmdline: the kernel shows none while an exec has not set up the new one. */
  private noCommandLine(pid: number): boolean {
    try {
      return readFileSync(`${this.root}/${pid}/cmdline`).length === 0;
    } catch {
      return false; // gone: nothing left to find
    }
  }

  /**
   * The environment block, in a buffer reused by the next read (every caller is done with it
   * before then): one open, read until end-of-file, close, without the fstat and allocation of
   * readFileSync.
   */
  private environ(pid: number): Buffer | null {
    const env = this.environAt(`${this.root}/${pid}`);
    if (env !== null && env.length > 0) return env;
    // Empty or unreadable: between two execs, env -i, not ours to read, or a leader thread that
    // exited while others run (ESRCH: its memory is read through a live thread).
    const task = liveTask(pid, this.root, (path) => this.readSmall(path));
    return (task && this.environAt(`${this.root}/${pid}/task/${task.tid}`)) ?? env;
  }

  private environAt(dir: string): Buffer | null {
    let fd: number;
    try {
      fd = openSync(`${dir}/environ`, 'r');
    } catch {
      return null; // gone, or not ours to read
    }
    try {
      let length = 0;
      for (;;) {
        const n = readSync(fd, this.envBuf, length, this.envBuf.length - length, null);
        if (n === 0) return this.envBuf.subarray(0, length);
        length += n;
        if (length === this.envBuf.length) return readFileSync(`${dir}/environ`); // unusually large
      }
    } catch {
      return null; // exited between open and read
    } finally {
      closeSync(fd);
    }
  }

  /**
   * A stat line in one read: procfs builds the whole record on the first read and returns all of
   * it when the buffer is larger, so a short read is the end (no second read to see end-of-file).
   */
  private readSmall(path: string, buf = this.buf): string | null {
    let fd: number;
    try {
      fd = openSync(path, 'r');
    } catch {
      return null;
    }
    try {
      const n = readSync(fd, buf, 0, buf.length, null);
      if (n === buf.length) return readFileSync(path, 'utf8'); // unusually long: read whole
      return buf.toString('utf8', 0, n);
    } catch {
      return null; // ESRCH: the process exited between open and read
    } finally {
      closeSync(fd);
    }
  }
}

interface OldProcess {
  start: number;
  ino?: number;
  ctimeMs?: number;
}

/** Re-listings of /proc in one sweep while processes keep vanishing (a busy host always has some). */
const CHASE_PASSES = 32;
/** Pids in a row without a process after which the read of a stopped holder's successors ends. */
const SUCCESSOR_MISSES = 4;
/** Reads of a live process whose environment is empty (mid-exec) before it is believed empty. */
const MAX_REREADS = 3;

const envNeedle = (name: string, value: string) => Buffer.from(`${name}=${value}\0`);

function hasEntry(env: Buffer, needle: Buffer): boolean {
  let from = 0;
  for (;;) {
    const at = env.indexOf(needle, from);
    if (at < 0) {
      // The last entry may lack its terminating NUL.
      const bare = needle.subarray(0, needle.length - 1);
      const tail = env.length - bare.length;
      return tail >= 0 && (tail === 0 || env[tail - 1] === 0) && env.subarray(tail).equals(bare);
    }
    if (at === 0 || env[at - 1] === 0) return true;
    from = at + 1;
  }
}

/** The value of `name` in an environment block (NUL-separated NAME=value entries), or null. */
/** Whether variable `name` lists `value` among its words (separated by single spaces). */
function lists(env: Buffer, name: string, value: string): boolean {
  return envValue(env, name)?.split(' ').includes(value) ?? false;
}

function envValue(env: Buffer, name: string): string | null {
  const prefix = `${name}=`;
  for (let at = env.indexOf(prefix); at >= 0; at = env.indexOf(prefix, at + 1)) {
    if (at > 0 && env[at - 1] !== 0) continue; // inside another entry's value
    const end = env.indexOf(0, at);
    return env.toString('utf8', at + prefix.length, end < 0 ? env.length : end);
  }
  return null;
}

/**
 * Now, in the unit of /proc/PID/stat's start time (clock ticks since boot, USER_HZ = 100): from
 * /proc/uptime, in the same time namespace. Null where there is no /proc to read.
 */
export function ticksNow(): string | null {
  if (process.platform !== 'linux' && process.platform !== 'android') return null;
  try {
    const m = /^(\d+)\.(\d\d)\s/.exec(readFileSync('/proc/uptime', 'latin1'));
    return m ? String(Number(m[1]) * 100 + Number(m[2])) : null;
  } catch {
    return null;
  }
}

/** Parses /proc/PID/stat. The command sits in parentheses and may itself contain spaces and ')'. */
export function parseStat(text: string): ProcessInfo | null {
  const open = text.indexOf('(');
  const close = text.lastIndexOf(')');
  if (open < 0 || close < open) return null;
  const rest = text.slice(close + 2).split(' ');
  // rest[0] is field 3 (state); field N is rest[N - 3].
  const starttime = rest[19];
  if (rest.length < 20 || starttime === undefined) return null;
  return {
    pid: Number(text.slice(0, open - 1)),
    command: text.slice(open + 1, close),
    state: rest[0] ?? '?',
    ppid: Number(rest[1]),
    pgid: Number(rest[2]),
    sid: Number(rest[3]),
    startTime: starttime,
  };
}

/**
 * A stat line read as the process it shows: a zombie leader with other threads still counted is
 * looked at closer (see liveThreadOf). A zombie that counts one thread, itself, is dead: a thread
 * leaves the count only when it is released, after its exit, so no live thread goes uncounted.
 * That spares the readdir of its task directory on every command that exits before it is read.
 */
export function processOfStat(
  text: string,
  root = '/proc',
  read: (path: string) => string | null = readOrNull,
): ProcessInfo | null {
  const info = parseStat(text);
  if (info?.state !== 'Z' || threadsOf(text) === 1) return info;
  return liveThreadOf(info, root, read);
}

/** Field 20 of a stat line, num_threads; NaN where the line has none. */
function threadsOf(text: string): number {
  return Number(text.slice(text.lastIndexOf(')') + 2).split(' ')[17]);
}

/**
 * A process whose main thread exited while other threads run shows its leader's state, Z, but
 * lives on: a signal to its pid still reaches it, and it must not count as gone. It takes the
 * state of a thread still running. A zombie's task directory lists only itself: one readdir.
 */
export function liveThreadOf(
  info: ProcessInfo,
  root = '/proc',
  read: (path: string) => string | null = readOrNull,
): ProcessInfo {
  const state = liveTask(info.pid, root, read)?.state;
  return state === undefined ? info : { ...info, state };
}

/** A thread of `pid` other than its leader that is not a zombie, with its state; undefined if none. */
function liveTask(
  pid: number,
  root: string,
  read: (path: string) => string | null,
): { tid: string; state: string } | undefined {
  let tids: string[];
  try {
    tids = readdirSync(`${root}/${pid}/task`);
  } catch {
    return undefined;
  }
  for (const tid of tids) {
    if (tid === String(pid)) continue;
    const state = parseStat(read(`${root}/${pid}/task/${tid}/stat`) ?? '')?.state;
    if (state !== undefined && state !== 'Z' && state !== 'X') return { tid, state };
  }
  return undefined;
}

function readOrNull(path: string): string | null {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return null;
  }
}

import { basename, dirname } from 'node:path';
import { type Clock, realClock } from '../clock.js';
import { describeThrown, ProcwardenError } from '../errors.js';
import { Deliverer, Guard, type SendSignal, terminate } from '../kill/index.js';
import { checkDuration, DEFAULT_GRACE_MS, normalizeSignal } from '../options/index.js';
import {
  CoalescingTable,
  isGone,
  type ProcessInfo,
  type ProcessTable,
  platformTable,
} from '../tree/index.js';
import { CgroupRemains, clearSupervisorCgroups } from './cgroup-remains.js';
import { claimRun } from './claim.js';
import { Journal, type JournalEntry, type JournalProblem } from './journal.js';
import { SupervisorJudge } from './judge.js';
import { OrphanTarget } from './orphan-target.js';
import { writeReaperStop } from './reaper-stop.js';
import { type RunRecord, recordFileNames, type StoppingRecord } from './record.js';
import { checkStateDir, defaultStateDir } from './state-dir.js';

export interface ReapOptions {
  /** Report what would be terminated; signal nothing, remove nothing. */
  dryRun?: boolean;
  /** Default: PROCWARDEN_STATE_DIR, else $XDG_STATE_HOME/procwarden, else ~/.local/state/procwarden. */
  stateDir?: string;
  /**
   * Only the records of this host process's supervisors, which the caller knows is dead (its
   * guard's pipe closed): they are reaped without asking the process table whether it lives, since
   * a dying host can still look alive for a moment after its files closed. Only their files are
   * read (by name), so other supervisors' records cost nothing; those are untouched.
   */
  deadHost?: { pid: number; start: string | null };
  /** Grace for every orphaned tree; default: the grace each run was started with. */
  graceMs?: number;
  /**
   * Seams for tests and other platforms: not in the published types (their types are internal).
   * @internal
   */
  table?: ProcessTable;
  /** @internal */
  send?: SendSignal;
  /** What the grace is timed by; default the real clock. */
  clock?: Clock;
}

export type ReapAction =
  /** The supervisor is dead; what remained of the run was terminated and the record removed. */
  | 'reaped'
  /** Dry run: the supervisor is dead and these members would be terminated. */
  | 'would-reap'
  /** The supervisor is alive: its runs are its own business. */
  | 'supervisor-alive'
  /**
   * Whether its supervisor lives cannot be told from here (written in another pid namespace, or
   * by a procwarden that did not record its namespace, or this /proc is another namespace's):
   * nothing was signalled, the record stays. See `notes`.
   */
  | 'not-judged'
  /** Another reaper that is alive (the watchdog, a concurrent reap) is ending this run: left to it. */
  | 'claimed'
  /**
   * The supervisor is dead but the run's end is not complete: members survived SIGKILL, its
   * cgroup could not be removed, or the reap failed. The record stays for the next reap.
   */
  | 'incomplete'
  /**
   * The supervisor is dead, and the record names a process or cgroup reap cannot prove is the
   * run's (see `refused`): that was left alone, the proven rest ended, the record kept.
   */
  | 'refused';

export interface ReapedRun {
  runId: string;
  files: string[];
  supervisorId: string;
  supervisorPid: number;
  command: string;
  action: ReapAction;
  /** Live members found when the record was examined. */
  members: { pid: number; command: string }[];
  signalled: number;
  killed: number;
  escaped: number;
  cgroupPath: string | null;
  notes: string[];
  /** What the record named but could not be proven the run's, with why: left alone. */
  refused: string[];
}

export interface ReapReport {
  stateDir: string;
  dryRun: boolean;
  runs: ReapedRun[];
  /**
   * Files (or the directory) that are not trusted, readable, valid procwarden records: reported,
   * never acted on. A failed write's stale temporary file is removed (unless dry run).
   */
  skipped: JournalProblem[];
  /** Processes still alive after reaping (sum of `escaped`). */
  survivors: number;
}

/**
 * Crash recovery: for every record whose supervisor is dead (pid gone, or start time changed),
 * terminates what remains of that run's tree, then removes the record and any empty cgroup.
 * Runs of a live supervisor are never touched. Orphaned trees are terminated in parallel.
 */
export async function reap(options: ReapOptions = {}): Promise<ReapReport> {
  checkReapOptions(options);
  const stateDir = options.stateDir === undefined ? defaultStateDir() : checkStateDir(options.stateDir);
  const dryRun = options.dryRun === true;
  // Orphaned trees are terminated in parallel: their scans can share snapshots.
  const table = options.table ?? new CoalescingTable(platformTable());
  const clock = options.clock ?? realClock;
  const journal = new Journal(stateDir);
  const dead = options.deadHost;
  // The dead host's pid still free: nobody is writing under its name, its broken temporary file
  // (a write cut by the SIGKILL) goes now, not 60 s later.
  const read = journal.read(
    Date.now(),
    dead ? hostRecordName(dead.pid) : undefined,
    dead ? pidFree(dead.pid) : false,
  );
  const entries = dead
    ? read.entries.filter(
        (e) =>
          e.record.supervisorPid === dead.pid &&
          (dead.start === null ||
            e.record.supervisorStart === null ||
            e.record.supervisorStart === dead.start),
      )
    : read.entries;
  // A dead host's reaper reports nothing of the directory; its own leftovers it still removes.
  const problems = dead ? read.problems.filter((p) => p.kind === 'stale') : read.problems;
  const judge = new SupervisorJudge(table);

  const runs = await Promise.all(
    groupByRun(entries).map(async (files) => {
      const record = best(files);
      const base: ReapedRun = {
        runId: record.runId,
        files: files.map((f) => f.file),
        supervisorId: record.supervisorId,
        supervisorPid: record.supervisorPid,
        command: record.command,
        action: 'supervisor-alive',
        members: [],
        signalled: 0,
        killed: 0,
        escaped: 0,
        cgroupPath: record.cgroupPath,
        notes: [],
        refused: [],
      };
      try {
        const verdict = dead ? judge.knownDead() : await judge.judge(record, startInCgroupName(record));
        if (verdict === 'alive') return base;
        if (verdict !== 'dead') return { ...base, action: 'not-judged' as const, notes: [verdict.notJudged] };
        return await reapOne(record, base, {
          table,
          clock,
          send: options.send,
          graceMs: options.graceMs,
          dryRun,
          journal,
          supervisorDead: dead !== undefined,
        });
      } catch (error) {
        // One record's failure must not cost the others their reap; the record stays for a retry.
        const note = `reap failed: ${describeThrown(error)}`;
        return { ...base, action: 'incomplete' as const, notes: [note] };
      }
    }),
  );
  if (!dryRun && runs.some((r) => r.cgroupPath !== null)) {
    // Once all of a dead supervisor's runs are reaped, its parent cgroup and what is left in it.
    const guard = await Guard.load(table);
    await clearSupervisorCgroups(
      runs,
      async (pid, start) => {
        const info = await table.get(pid);
        return dead === undefined && !isGone(info) && info?.startTime === start;
      },
      (pid) => guard.forbidsPid(pid),
      new Set(read.entries.flatMap((e) => (e.record.cgroupPath ? [e.record.cgroupPath] : []))),
    );
  }
  if (!dryRun) removeStaleTemporaries(journal, problems);
  return {
    stateDir,
    dryRun,
    runs,
    skipped: problems,
    survivors: runs.reduce((n, r) => n + r.escaped, 0),
  };
}

/** How long a killed run's cgroup gets for its last tasks to finish exiting before it is removed. */
const EMPTIED_MS = 2000;

interface ReapContext {
  table: ProcessTable;
  clock: Clock;
  send: SendSignal | undefined;
  graceMs: number | undefined;
  dryRun: boolean;
  journal: Journal;
  supervisorDead: boolean;
}

async function reapOne(record: RunRecord, out: ReapedRun, ctx: ReapContext): Promise<ReapedRun> {
  const notes: string[] = [];
  const refusedCgroup: string[] = [];
  let cgroup: CgroupRemains | null = null;
  if (record.cgroupPath) {
    const opened = CgroupRemains.forRecord({ ...record, cgroupPath: record.cgroupPath });
    if (typeof opened === 'string') refusedCgroup.push(`${opened}: left alone`);
    else cgroup = opened;
  }
  if (record.pid === null && !record.cookie && !cgroup) {
    // The host died before it knew the pid, and the run had no cookie and no cgroup: nothing tells
    // its processes from anyone's. Said so, and the record is kept: it is the only trace.
    refusedCgroup.push(
      'the record names no pid, no cookie and no cgroup (the host died right after the spawn of a run with cookie: false): what the run started cannot be found',
    );
    return { ...out, action: 'refused', refused: refusedCgroup };
  }
  const guard = await Guard.load(ctx.table);
  const deliverer = new Deliverer(ctx.table, guard, ctx.send);
  const target = new OrphanTarget(record, ctx.table, guard, deliverer, cgroup, notes);
  const found = await target.members();
  out.members = found.map((p) => ({ pid: p.pid, command: p.command }));
  const refused = () => [...refusedCgroup, ...target.refused];
  if (ctx.dryRun) {
    // Only a sequence's scans, which stop what they read, could settle it: a dry run says so.
    const unsure = found.unconfirmed
      ? [`${found.unconfirmed}: that nothing of the run is left could not be confirmed`]
      : [];
    return { ...out, action: 'would-reap', notes: [...target.notes, ...unsure], refused: refused() };
  }
  const claim = await claimRun(ctx.journal.dir, record.runId, ctx.table);
  if (!claim.claimed) {
    // Left to the reaper that holds it; a claim that cannot be judged or taken is a person's to look at.
    if (claim.live) return { ...out, action: 'claimed', notes: [claim.why] };
    return { ...out, action: 'refused', refused: [claim.why] };
  }
  try {
    return await endClaimed(record, out, ctx, target, cgroup, refused, notes);
  } finally {
    claim.release();
  }
}

/** The run's end, once this reaper holds its claim: the signals, the cgroup, the record. */
async function endClaimed(
  record: RunRecord,
  out: ReapedRun,
  ctx: ReapContext,
  target: OrphanTarget,
  cgroup: CgroupRemains | null,
  refused: () => string[],
  notes: string[],
): Promise<ReapedRun> {
  // A host that died while the run was ending had signalled it already: the sequence goes on with
  // that signal, to what it did not reach, until the deadline it set.
  const stop = record.stopping;
  let signal: NodeJS.Signals = 'SIGTERM';
  try {
    signal = normalizeSignal(stop?.signal ?? record.killSignal);
  } catch {
    notes.push(`recorded signal ${stop?.signal ?? record.killSignal} is unknown here; SIGTERM used`);
  }
  // What is left of the grace, never more than all of it: a clock stepped back since (or a record
  // dated in the future) must not put SIGKILL off.
  const grace = stop
    ? stop.graceMs >= Number.MAX_SAFE_INTEGER
      ? crashGrace(stop.graceMs)
      : Math.min(stop.graceMs, Math.max(0, stop.atMs + stop.graceMs - Date.now()))
    : crashGrace(record.graceMs);
  const signalled = new Set(stop?.signalled);
  let instead: NodeJS.Signals | undefined;
  try {
    instead = normalizeSignal(record.killSignal);
  } catch {
    // noted above when it was the signal used
  }
  if (stop)
    // Its supervisor, or a reaper that died before this one, had sent it: the record says which
    // signal and when, not who.
    notes.push(
      `the run was already ending (${stop.signal} sent by its supervisor or an earlier reaper); its sequence was taken over`,
    );
  const graceMs = ctx.graceMs ?? grace;
  let stopProblem: string | null = null;
  const report = await terminate(target, {
    signal,
    graceMs,
    onSignalled: (reached) => {
      stopProblem = writeReaperStop(ctx.journal, record, { signal, graceMs }, reached);
    },
    clock: ctx.clock,
    table: ctx.table,
    // As the host would have: a passed-on signal (SIGINT) goes to those that ignore it as the run's own.
    ...(instead ? { insteadIfIgnored: instead } : {}),
    ...(stop ? { signalledBefore: (m: ProcessInfo) => signalledBefore(stop, signalled, m) } : {}),
  });
  const result: ReapedRun = {
    ...out,
    // A member spared (this reaper's own ancestor) lives on: the run is not over.
    action:
      report.escaped > 0 || target.spared > 0 ? 'incomplete' : refused().length > 0 ? 'refused' : 'reaped',
    signalled: report.signalled,
    killed: report.killed,
    escaped: report.escaped,
    notes: [...report.notes, ...(stopProblem ? [stopProblem] : [])],
    refused: refused(),
  };
  if (result.action !== 'reaped') return result;
  await cgroup?.emptied(ctx.clock, EMPTIED_MS);
  const problem = cgroup?.remove();
  if (problem) {
    // A cgroup that is still there holds something (EBUSY: a task reap would not or could not end,
    // such as its own ancestor): the run is not over, and its record is the only trace left.
    result.notes.push(`${problem}; the record is kept`);
    return { ...result, action: 'incomplete' };
  }
  // Its own stop record too, which the files read at the start did not include.
  const files = new Set([...out.files, recordFileNames(record.runId).stop]);
  for (const file of files) {
    try {
      ctx.journal.removeFile(file);
    } catch (error) {
      result.notes.push(`could not remove ${file}: ${(error as NodeJS.ErrnoException).code ?? error}`);
    }
  }
  return result;
}

/**
 * What the host had signalled, or would not have: a member forked after its first signal (a trap's
 * cleanup at work) gets no graceful signal from the host's polls while its parent lives, and none
 * from a reaper taking over either; the grace's end reaches it as it would have.
 */
function signalledBefore(stop: StoppingRecord, signalled: ReadonlySet<string>, m: ProcessInfo): boolean {
  if (signalled.has(`${m.pid}@${m.startTime}`)) return true;
  return (
    stop.bornFrom !== undefined && /^\d+$/.test(m.startTime) && BigInt(m.startTime) >= BigInt(stop.bornFrom)
  );
}

/** Temporary files a failed write left behind (old and unparseable): nothing else will remove them. */
function removeStaleTemporaries(journal: Journal, problems: JournalProblem[]): void {
  for (const p of problems) {
    if (p.kind !== 'stale') continue;
    try {
      journal.removeFile(p.file);
      p.problem += '; removed';
    } catch (error) {
      p.problem += `; could not remove it: ${(error as NodeJS.ErrnoException).code ?? error}`;
    }
  }
}

/** A run's launch record, its pid record and any temporary file name the same run: one run, one reap. */
function groupByRun(entries: JournalEntry[]): JournalEntry[][] {
  const byRun = new Map<string, JournalEntry[]>();
  for (const e of entries) {
    const list = byRun.get(e.record.runId);
    if (list) list.push(e);
    else byRun.set(e.record.runId, [e]);
  }
  return [...byRun.values()];
}

/** The most informed version: the one that knows the pid, with the stopping record's news. */
function best(files: JournalEntry[]): RunRecord {
  const withPid = files.find((f) => f.record.pid !== null);
  const record = (withPid ?? (files[0] as JournalEntry)).record;
  const stopping = files.find((f) => f.record.stopping)?.record.stopping;
  return stopping ? { ...record, stopping } : record;
}

/**
 * The grace a crashed supervisor's run gets. A run that was never to get SIGKILL (timeout(1)'s
 * meaning of no -k) is waited for while its host lives, which can stop it; after a crash nothing
 * is left to end that wait, the watchdog would live as long as the tree: it gets the default grace.
 */
function crashGrace(recorded: number): number {
  // `procwarden timeout` without -k records Number.MAX_SAFE_INTEGER; any grace as long is unbounded.
  return recorded >= Number.MAX_SAFE_INTEGER ? DEFAULT_GRACE_MS : recorded;
}

/** Checked before any record is read: a grace of -1 or NaN would otherwise reach a live tree. */
function checkReapOptions(options: ReapOptions): void {
  if (typeof options !== 'object' || options === null) {
    throw new ProcwardenError('INVALID_OPTION', 'reap options must be an object, e.g. { dryRun: true }.');
  }
  if (options.dryRun !== undefined && typeof options.dryRun !== 'boolean') {
    throw new ProcwardenError('INVALID_OPTION', 'dryRun must be true or false.');
  }
  if (options.graceMs !== undefined) checkDuration(options.graceMs, 'graceMs');
}

/** The files of a host's runs: `pw`, its pid in base 36, six hex digits (its supervisor), `-`. */
function hostRecordName(pid: number): (file: string) => boolean {
  const name = new RegExp(`^pw${pid.toString(36)}[0-9a-f]{6}-`);
  return (file) => name.test(file);
}

/** The supervisor's start time in the name of the cgroup the record names (`procwarden-<pid>-<start>[/run]`). */
function startInCgroupName(r: RunRecord): string | null {
  if (!r.cgroupPath) return null;
  for (const dir of [r.cgroupPath, dirname(r.cgroupPath)]) {
    const m = /^procwarden-(\d+)-(\d+)$/.exec(basename(dir));
    if (m && Number(m[1]) === r.supervisorPid) return m[2] as string;
  }
  return null;
}

function pidFree(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return false;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'ESRCH';
  }
}

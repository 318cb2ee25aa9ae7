import { type Clock, realClock } from '../clock.js';
import { Deliverer, Guard, type SendSignal, terminate } from '../kill/index.js';
import { normalizeSignal } from '../options/index.js';
import { CoalescingTable, isGone, type ProcessTable, platformTable } from '../tree/index.js';
import { CgroupRemains, removeSupervisorCgroup } from './cgroup-remains.js';
import { Journal, type JournalEntry, type JournalProblem } from './journal.js';
import { OrphanTarget } from './orphan-target.js';
import type { RunRecord } from './record.js';
import { defaultStateDir } from './state-dir.js';

export interface ReapOptions {
  /** Report what would be terminated; signal nothing, remove nothing. */
  dryRun?: boolean;
  /** Default: PROCWARDEN_STATE_DIR, else $XDG_STATE_HOME/procwarden, else ~/.local/state/procwarden. */
  stateDir?: string;
  /** Grace for every orphaned tree; default: the grace each run was started with. */
  graceMs?: number;
  /** Seams for tests and other platforms. */
  table?: ProcessTable;
  send?: SendSignal;
  clock?: Clock;
}

export type ReapAction =
  /** The supervisor is dead; what remained of the run was terminated and the record removed. */
  | 'reaped'
  /** Dry run: the supervisor is dead and these members would be terminated. */
  | 'would-reap'
  /** The supervisor is alive: its runs are its own business. */
  | 'supervisor-alive'
  /** The supervisor is dead but members survived SIGKILL; the record stays for the next reap. */
  | 'incomplete';

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
}

export interface ReapReport {
  stateDir: string;
  dryRun: boolean;
  runs: ReapedRun[];
  /** Files that are not (readable, valid) procwarden records: reported, never touched. */
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
  const stateDir = options.stateDir ?? defaultStateDir();
  const dryRun = options.dryRun === true;
  // Orphaned trees are terminated in parallel: their scans can share snapshots.
  const table = options.table ?? new CoalescingTable(platformTable());
  const clock = options.clock ?? realClock;
  const journal = new Journal(stateDir);
  const { entries, problems } = journal.read();
  const alive = new Map<string, Promise<boolean>>();
  const supervisorAlive = (r: RunRecord) => {
    const k = `${r.supervisorPid}@${r.supervisorStart}`;
    let p = alive.get(k);
    if (!p) {
      p = table.get(r.supervisorPid).then((info) => {
        if (isGone(info) || !info) return false;
        // Without a recorded start time the pid alone decides, the cautious way: alive.
        return r.supervisorStart === null || info.startTime === r.supervisorStart;
      });
      alive.set(k, p);
    }
    return p;
  };

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
      };
      try {
        if (await supervisorAlive(record)) return base;
        return await reapOne(record, base, {
          table,
          clock,
          send: options.send,
          graceMs: options.graceMs,
          dryRun,
          journal,
        });
      } catch (error) {
        // One record's failure must not cost the others their reap; the record stays for a retry.
        const note = `reap failed: ${(error as Error)?.message ?? error}`;
        return { ...base, action: 'incomplete' as const, notes: [note] };
      }
    }),
  );
  return {
    stateDir,
    dryRun,
    runs,
    skipped: problems,
    survivors: runs.reduce((n, r) => n + r.escaped, 0),
  };
}

interface ReapContext {
  table: ProcessTable;
  clock: Clock;
  send: SendSignal | undefined;
  graceMs: number | undefined;
  dryRun: boolean;
  journal: Journal;
}

async function reapOne(record: RunRecord, out: ReapedRun, ctx: ReapContext): Promise<ReapedRun> {
  const notes: string[] = [];
  let cgroup: CgroupRemains | null = null;
  if (record.cgroupPath) {
    const opened = CgroupRemains.open(record.cgroupPath);
    if (typeof opened === 'string') notes.push(`${opened}; its members are found by pid and cookie only`);
    else cgroup = opened;
  }
  const guard = await Guard.load(ctx.table);
  const deliverer = new Deliverer(ctx.table, guard, ctx.send);
  const target = new OrphanTarget(record, ctx.table, guard, deliverer, cgroup, notes);
  const found = await target.members();
  out.members = found.map((p) => ({ pid: p.pid, command: p.command }));
  if (ctx.dryRun) return { ...out, action: 'would-reap', notes: [...target.notes] };

  let signal: NodeJS.Signals = 'SIGTERM';
  try {
    signal = normalizeSignal(record.killSignal);
  } catch {
    notes.push(`recorded signal ${record.killSignal} is unknown here; SIGTERM used`);
  }
  const report = await terminate(target, {
    signal,
    graceMs: ctx.graceMs ?? record.graceMs,
    clock: ctx.clock,
    table: ctx.table,
  });
  const result: ReapedRun = {
    ...out,
    action: report.escaped === 0 ? 'reaped' : 'incomplete',
    signalled: report.signalled,
    killed: report.killed,
    escaped: report.escaped,
    notes: [...report.notes],
  };
  if (report.escaped > 0) return result;
  const problem = cgroup?.remove();
  if (problem) result.notes.push(problem);
  else if (cgroup) {
    const supervisor = await ctx.table.get(record.supervisorPid);
    const parentProblem = removeSupervisorCgroup(
      cgroup.path,
      record.supervisorPid,
      (_pid, start) => !isGone(supervisor) && supervisor?.startTime === start,
    );
    if (parentProblem) result.notes.push(parentProblem);
  }
  for (const file of out.files) {
    try {
      ctx.journal.removeFile(file);
    } catch (error) {
      result.notes.push(`could not remove ${file}: ${(error as NodeJS.ErrnoException).code ?? error}`);
    }
  }
  return result;
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

/** The most informed version: the one that knows the pid. */
function best(files: JournalEntry[]): RunRecord {
  const withPid = files.find((f) => f.record.pid !== null);
  return (withPid ?? (files[0] as JournalEntry)).record;
}

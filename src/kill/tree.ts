import { type Clock, realClock } from '../clock.js';
import { ProcwardenError, showValue } from '../errors.js';
import { checkDuration, normalizeSignal } from '../options/index.js';
import {
  descendantsOf,
  isGone,
  isProcessId,
  isWindowsTable,
  MAX_PID,
  type ProcessInfo,
  type ProcessTable,
  platformTable,
  refuseBlind,
  SnapshotTable,
  stillAlive,
} from '../tree/index.js';
import type { TerminateReport } from '../types.js';
import { Deliverer, type SendSignal } from './deliver.js';
import { Guard } from './guard.js';
import { HostGuards } from './host-guards.js';
import { type KillTarget, terminate } from './terminate.js';
import { WindowsTreeTarget } from './windows-target.js';

export interface TerminateTreeOptions {
  /** Default 5000. */
  graceMs?: number;
  /** The graceful signal, a name or a number; default SIGTERM. */
  signal?: NodeJS.Signals | number;
  /** Signal `pid` itself too (default true); false ends only its descendants. */
  includeRoot?: boolean;
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

const key = (p: ProcessInfo) => `${p.pid}@${p.startTime}`;

/**
 * Terminates a process tree procwarden did not start: the root and its descendants by parent
 * link, as seen in snapshots (earlier members are remembered by identity, so a grandchild whose
 * parent exited during the grace is still chased).
 */
export async function terminateTree(
  pid: number,
  options: TerminateTreeOptions = {},
): Promise<TerminateReport> {
  checkTreeArgs(pid, options);
  const graceMs = options.graceMs === undefined ? 5000 : checkDuration(options.graceMs, 'graceMs');
  const signal = normalizeSignal(options.signal ?? 'SIGTERM');
  const table = options.table ?? platformTable();
  refuseBlind(table, `end the tree of pid ${pid}`);
  const { guard, root } = await openTree(pid, table);
  const includeRoot = options.includeRoot !== false;
  const clock = options.clock ?? realClock;
  if (isWindowsTable(table)) {
    const windowsTarget = new WindowsTreeTarget(table, guard, { send: options.send, includeRoot });
    windowsTarget.adopt(root);
    return terminate(windowsTarget, { signal, graceMs, clock, table });
  }
  return terminateUnix(root, table, guard, { ...options, signal, graceMs, includeRoot, clock });
}

/**
 * Delivers `signal` once to the tree of `pid` (the root and its descendants by parent link, each
 * identity-checked right before), and waits for nothing: for a signal that does not ask a process
 * to end (SIGUSR2 to reload, SIGSTOP, SIGCONT), where a grace and SIGKILL would be wrong. Where
 * every signal is a taskkill (Windows), the tree is ended instead, as tree-kill does there.
 */
export async function signalTree(
  pid: number,
  signal: NodeJS.Signals,
  options: Pick<TerminateTreeOptions, 'table' | 'send'> = {},
): Promise<{ signalled: number; refused: number; notes: string[] }> {
  checkTreeArgs(pid, options);
  const table = options.table ?? platformTable();
  refuseBlind(table, `signal the tree of pid ${pid}`);
  const { guard, root } = await openTree(pid, table);
  if (isWindowsTable(table)) {
    const report = await terminateTree(pid, { ...options, signal: 'SIGKILL' });
    return { signalled: report.signalled, refused: report.escaped, notes: report.notes };
  }
  const list = await table.list();
  const fresh = list.find((p) => p.pid === root.pid && p.startTime === root.startTime);
  // Gone since it was read: its pid may be another's now, and so may its children be.
  const members = (fresh ? [fresh, ...descendantsOf(list, [root.pid])] : []).filter(
    (m) => !isGone(m) && !guard.forbidsPid(m.pid),
  );
  const deliverer = new Deliverer(table, guard, options.send);
  const reached = new Set(await deliverer.toMembers(members, signal));
  // Not reached and still there: refused (EPERM), not merely gone before its signal.
  const missed = members.filter((m) => !reached.has(m));
  const now = await Promise.all(missed.map((m) => table.get(m.pid)));
  const refused = missed.filter((m, i) => stillAlive(now[i] ?? null, m)).length;
  return { signalled: reached.size, refused, notes: deliverer.notes };
}

/** The options a caller may give (the last three are seams for tests and other platforms). */
const TREE_OPTION_KEYS = ['graceMs', 'signal', 'includeRoot', 'table', 'send', 'clock'];

/** Checks `pid` and reads it: the root of a tree to act on, never PID 1, ourselves or an ancestor. */
function checkTreeArgs(pid: number, options: TerminateTreeOptions): void {
  if (!isProcessId(pid)) {
    throw new ProcwardenError(
      'INVALID_PID',
      `pid ${showValue(pid)} is not a valid process id; give a whole number from 1 to ${MAX_PID}.`,
    );
  }
  if (typeof options !== 'object' || options === null) {
    throw new ProcwardenError(
      'INVALID_OPTION',
      'terminateTree options must be an object, e.g. { graceMs: 2000 }.',
    );
  }
  for (const key of Object.keys(options)) {
    if (!TREE_OPTION_KEYS.includes(key))
      throw new ProcwardenError(
        'INVALID_OPTION',
        `unknown option ${JSON.stringify(key)}; check its spelling (${TREE_OPTION_KEYS.slice(0, 3).join(', ')}).`,
      );
  }
  if (options.includeRoot !== undefined && typeof options.includeRoot !== 'boolean') {
    throw new ProcwardenError('INVALID_OPTION', 'includeRoot must be true or false.');
  }
}

/** Reads `pid`: the root of a tree to act on, never PID 1, ourselves or an ancestor. */
async function openTree(given: number, table: ProcessTable): Promise<{ guard: Guard; root: ProcessInfo }> {
  const windows = isWindowsTable(table);
  // One enumeration instead of a PowerShell launch per ancestor; its parent links are already checked.
  const guard = await Guard.load(windows ? new SnapshotTable(await table.list()) : table);
  // A thread's id: kill(2) would signal its whole process, and so does this (its tree is the
  // process's); read as a process of its own it would have no members, and "all gone" would be
  // said of a process left running.
  const owner = table.processOf?.(given);
  const pid = owner ?? given;
  const which = pid === given ? `pid ${pid}` : `pid ${given} (a thread of process ${pid})`;
  if (pid === 1 || guard.isOwnOrAncestor(pid)) {
    throw new ProcwardenError(
      'FORBIDDEN_TARGET',
      `refusing to terminate ${which}: it is PID 1, this process or one of its ancestors.`,
    );
  }
  const root = await table.get(pid);
  if (isGone(root) || !root) {
    throw new ProcwardenError(
      'NO_SUCH_PROCESS',
      `no live process has pid ${given}; it may have exited already.`,
    );
  }
  return { guard, root };
}

async function terminateUnix(
  root: ProcessInfo,
  table: ProcessTable,
  guard: Guard,
  options: TerminateTreeOptions & {
    signal: NodeJS.Signals;
    graceMs: number;
    includeRoot: boolean;
    clock: Clock;
  },
): Promise<TerminateReport> {
  const { signal, graceMs, includeRoot, clock } = options;
  const deliverer = new Deliverer(table, guard, options.send);
  const known = new Map<string, ProcessInfo>([[key(root), root]]);
  // Everything alive at the first scan: what appears later, in a group or session a member leads,
  // was started by a member while it ended.
  let baseline: Set<string> | undefined;
  // Groups and sessions a member leads that held a process outside the tree at the first scan (a
  // job-control pipeline `a | b` is one group): what appears in them later may be that process's.
  let shared: Set<number> | undefined;
  const hostGuards = new HostGuards(table, deliverer.notes);
  /** Every member a scan has handed out: see HostGuards.sift. */
  const offered = new Set<string>();

  const target: KillTarget = {
    notes: deliverer.notes,
    async members() {
      await guard.refresh(table);
      const list = await table.list();
      baseline ??= new Set(list.map(key));
      const byPid = new Map(list.map((p) => [p.pid, p]));
      const roots: number[] = [];
      for (const k of known.values()) if (byPid.get(k.pid)?.startTime === k.startTime) roots.push(k.pid);
      for (const late of lateForks(list, baseline, known, shared ?? new Set())) {
        known.set(key(late), late);
        roots.push(late.pid);
      }
      for (const d of descendantsOf(list, roots)) known.set(key(d), d);
      // Before anything is signalled, and not looked in for late forks: they are not the tree's.
      hostGuards.sift(list, known, offered);
      shared ??= sharedLeaders(list, known);
      const out: ProcessInfo[] = [];
      for (const k of known.values()) {
        const now = byPid.get(k.pid);
        if (!now || now.startTime !== k.startTime || isGone(now) || guard.forbidsPid(now.pid)) continue;
        if (!includeRoot && now.pid === root.pid) continue;
        out.push(now);
        offered.add(key(now));
      }
      return out;
    },
    signal: (sig, members) => deliverer.toMembers(members, sig),
    patient: (member) => hostGuards.hasGuard(member),
  };
  const report = await terminate(target, { signal, graceMs, clock, table });
  const unfinished = await hostGuards.unfinished(clock, graceMs + GUARD_FINISH_MS);
  if (unfinished.length > 0) {
    report.escaped += unfinished.length;
    report.notes.push(
      `${unfinished.length} process(es) spared as a supervisor's guard (or started by one) still alive ${Math.round((graceMs + GUARD_FINISH_MS) / 1000)} s after the tree ended, pid ${unfinished
        .slice(0, 10)
        .map((p) => p.pid)
        .join(
          ', ',
        )}: not signalled, counted as escaped (a guard whose host has died ends by itself once that host's runs are over)`,
    );
  }
  if (report.signalled > 0) report.notes.push(UNVERIFIED_LATE_FORKS);
  return report;
}

/** What a spared guard gets, beyond the grace, to finish its dead host's runs (see HostGuards.unfinished). */
const GUARD_FINISH_MS = 5000;

/**
 * Said whenever a tree procwarden did not start was signalled: without a cookie or a cgroup, a
 * process a member started while ending and that left the tree at once (`( cmd & )` re-parents it
 * to init) is found only through a process group or session a member leads; one that also left
 * those cannot be seen, so a clean end is not proven.
 */
export const UNVERIFIED_LATE_FORKS =
  'late forks not verifiable: procwarden did not start this tree (no cookie, no cgroup); processes a member started while ending were looked for in the process groups and sessions the members lead, and one that left those too cannot be seen';

/** Pids of members that lead a group or session some non-member is in. */
function sharedLeaders(list: ProcessInfo[], known: Map<string, ProcessInfo>): Set<number> {
  const members = new Set([...known.values()].map((k) => k.pid));
  const out = new Set<number>();
  for (const p of list) {
    if (known.has(key(p))) continue;
    if (members.has(p.pgid)) out.add(p.pgid);
    if (members.has(p.sid)) out.add(p.sid);
  }
  return out;
}

/**
 * Processes started since the first scan (not in `baseline`) whose process group or session is led
 * by a known member: a re-parented fork keeps the group and session of the member that made it.
 * The kernel does not hand out a pid while a group or session of that number has members, so a
 * group or session numbered after a member is that member's, unless the pid is another process's
 * now: a member that died, whose group emptied, frees its number, and a stranger that gets it
 * leads a group and session of that number (as a detached process does), and is not ours. Nor are
 * groups and sessions that held processes outside the tree (`shared`). Left open: a stranger that
 * got the number, forked there and exited before the next look (a pid wrap, or root writing
 * ns_last_pid, within one termination), as for sessions in docs/containment.md.
 *
 * A group or session is not the tree's to fill: any process in that session may fork a child into
 * the group a member leads (setpgid), and that child is no member's. So a late fork must also be
 * shown to come from the tree (see fromTheTree).
 */
function lateForks(
  list: ProcessInfo[],
  baseline: Set<string>,
  known: Map<string, ProcessInfo>,
  shared: Set<number>,
): ProcessInfo[] {
  const byPid = new Map(list.map((p) => [p.pid, p]));
  const leaders = new Set<number>();
  for (const k of known.values()) {
    const now = byPid.get(k.pid);
    // Still there, or gone and its number held by nobody: a member that led a group and died with
    // a late fork in it is the common case (its parent reaps it at once). A pid held by another
    // process now is not ours.
    if ((!now || now.startTime === k.startTime) && !shared.has(k.pid)) leaders.add(k.pid);
  }
  const candidates = new Map<number, ProcessInfo>();
  for (const p of list) {
    if (
      !baseline.has(key(p)) &&
      !known.has(key(p)) &&
      (leaders.has(p.pgid) || leaders.has(p.sid)) &&
      !isGone(p)
    )
      candidates.set(p.pid, p);
  }
  const verdicts = new Map<number, boolean>();
  return [...candidates.values()].filter((p) =>
    fromTheTree(p, { byPid, baseline, known, candidates, verdicts }),
  );
}

/**
 * Whether a candidate late fork (see lateForks) comes from the tree, by its parent:
 * - a member, or a candidate that comes from the tree: yes;
 * - none in the listing (exited since it forked, or being re-parented as the list was read), or
 *   PID 1 (where orphans go): re-parented, its maker gone, and the group or session vouches;
 * - a process present at the first scan and no member: yes only if the candidate is not in its
 *   parent's session. A fork inherits its parent's session and can leave it only for one of its
 *   own (setsid), so a child in another session than its parent's, led by a member, was not made
 *   by that parent: it was re-parented there (a subreaper). One in its parent's session may be that
 *   process's own child, put in the member's group by setpgid: a stranger's, never signalled;
 * - a process new since the first scan, neither member nor candidate: nothing vouches for it.
 * Left open: an orphan re-parented to a subreaper in its own session is not claimed (the report's
 * UNVERIFIED_LATE_FORKS note covers it), and a stranger that forked into a member's group and
 * exited at once leaves an orphan that is claimed.
 */
function fromTheTree(
  p: ProcessInfo,
  seen: {
    byPid: Map<number, ProcessInfo>;
    baseline: Set<string>;
    known: Map<string, ProcessInfo>;
    candidates: Map<number, ProcessInfo>;
    verdicts: Map<number, boolean>;
  },
): boolean {
  const cached = seen.verdicts.get(p.pid);
  if (cached !== undefined) return cached;
  // A cycle in a torn listing proves nothing: refused while it is being decided.
  seen.verdicts.set(p.pid, false);
  const parent = seen.byPid.get(p.ppid);
  let ours: boolean;
  if (!parent || parent.pid === 1 || seen.known.has(key(parent))) ours = true;
  else if (seen.candidates.get(parent.pid) === parent) ours = fromTheTree(parent, seen);
  else if (seen.baseline.has(key(parent))) ours = p.sid !== -1 && p.sid !== parent.sid && p.sid !== p.pid;
  else ours = false;
  seen.verdicts.set(p.pid, ours);
  return ours;
}

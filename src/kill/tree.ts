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
  SnapshotTable,
} from '../tree/index.js';
import type { TerminateReport } from '../types.js';
import { Deliverer, type SendSignal } from './deliver.js';
import { Guard } from './guard.js';
import { type KillTarget, terminate } from './terminate.js';
import { WindowsTreeTarget } from './windows-target.js';

export interface TerminateTreeOptions {
  /** Default 5000. */
  graceMs?: number;
  /** The graceful signal; default SIGTERM. */
  signal?: string;
  /** Signal `pid` itself too (default true); false ends only its descendants. */
  includeRoot?: boolean;
  /** Seams for tests and other platforms. */
  table?: ProcessTable;
  send?: SendSignal;
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
  if (options.includeRoot !== undefined && typeof options.includeRoot !== 'boolean') {
    throw new ProcwardenError('INVALID_OPTION', 'includeRoot must be true or false.');
  }
  const graceMs = options.graceMs === undefined ? 5000 : checkDuration(options.graceMs, 'graceMs');
  const signal = normalizeSignal(options.signal ?? 'SIGTERM');
  const table = options.table ?? platformTable();
  const windows = isWindowsTable(table);
  // One enumeration instead of a PowerShell launch per ancestor; its parent links are already checked.
  const guard = await Guard.load(windows ? new SnapshotTable(await table.list()) : table);
  if (pid === 1 || guard.isOwnOrAncestor(pid)) {
    throw new ProcwardenError(
      'FORBIDDEN_TARGET',
      `refusing to terminate pid ${pid}: it is PID 1, this process or one of its ancestors.`,
    );
  }
  const root = await table.get(pid);
  if (isGone(root) || !root) {
    throw new ProcwardenError(
      'NO_SUCH_PROCESS',
      `no live process has pid ${pid}; it may have exited already.`,
    );
  }
  const includeRoot = options.includeRoot !== false;
  const clock = options.clock ?? realClock;
  if (windows) {
    const windowsTarget = new WindowsTreeTarget(table, guard, { send: options.send, includeRoot });
    windowsTarget.adopt(root);
    return terminate(windowsTarget, { signal, graceMs, clock, table });
  }
  const deliverer = new Deliverer(table, guard, options.send);
  const known = new Map<string, ProcessInfo>([[key(root), root]]);
  // Everything alive at the first scan: what appears later, in a group or session a member leads,
  // was started by a member while it ended.
  let baseline: Set<string> | undefined;

  const target: KillTarget = {
    notes: deliverer.notes,
    async members() {
      await guard.refresh(table);
      const list = await table.list();
      baseline ??= new Set(list.map(key));
      const byPid = new Map(list.map((p) => [p.pid, p]));
      const roots: number[] = [];
      for (const k of known.values()) if (byPid.get(k.pid)?.startTime === k.startTime) roots.push(k.pid);
      for (const late of lateForks(list, baseline, known)) {
        known.set(key(late), late);
        roots.push(late.pid);
      }
      for (const d of descendantsOf(list, roots)) known.set(key(d), d);
      const out: ProcessInfo[] = [];
      for (const k of known.values()) {
        const now = byPid.get(k.pid);
        if (!now || now.startTime !== k.startTime || isGone(now) || guard.forbidsPid(now.pid)) continue;
        if (!includeRoot && now.pid === root.pid) continue;
        out.push(now);
      }
      return out;
    },
    signal: (sig, members) => deliverer.toMembers(members, sig),
  };
  const report = await terminate(target, { signal, graceMs, clock, table });
  if (report.signalled > 0) report.notes.push(UNVERIFIED_LATE_FORKS);
  return report;
}

/**
 * Said whenever a tree procwarden did not start was signalled: without a cookie or a cgroup, a
 * process a member started while ending and that left the tree at once (`( cmd & )` re-parents it
 * to init) is found only through a process group or session a member leads; one that also left
 * those cannot be seen, so a clean end is not proven.
 */
export const UNVERIFIED_LATE_FORKS =
  'late forks not verifiable: procwarden did not start this tree (no cookie, no cgroup); processes a member started while ending were looked for in the process groups and sessions the members lead, and one that left those too cannot be seen';

/**
 * Processes started since the first scan (not in `baseline`) whose process group or session is led
 * by a known member: a re-parented fork keeps the group and session of the member that made it.
 * The kernel does not hand out a pid still in use as a group or session id, so the leader is ours.
 */
function lateForks(
  list: ProcessInfo[],
  baseline: Set<string>,
  known: Map<string, ProcessInfo>,
): ProcessInfo[] {
  const leaders = new Set([...known.values()].map((k) => k.pid));
  return list.filter(
    (p) =>
      !baseline.has(key(p)) &&
      !known.has(key(p)) &&
      (leaders.has(p.pgid) || leaders.has(p.sid)) &&
      !isGone(p),
  );
}

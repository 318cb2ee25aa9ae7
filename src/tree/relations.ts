import type { ProcessInfo } from './types.js';

/** The lookups a scan makes in one snapshot: by pid, and the lists by parent, group and session. */
export interface SnapshotIndex {
  byPid: Map<number, ProcessInfo>;
  children: Map<number, ProcessInfo[]>;
  byGroup: Map<number, ProcessInfo[]>;
  bySession: Map<number, ProcessInfo[]>;
}

const indexes = new WeakMap<readonly ProcessInfo[], { size: number; index: SnapshotIndex }>();

/**
 * Built once per snapshot: the runs that end together share one sweep's table, and each building
 * its own maps made their scans cost runs × processes. A snapshot is never changed once taken; one
 * that grew since (a caller's array) is indexed again.
 */
export function indexOf(table: readonly ProcessInfo[]): SnapshotIndex {
  const cached = indexes.get(table);
  if (cached && cached.size === table.length) return cached.index;
  const index: SnapshotIndex = {
    byPid: new Map(),
    children: new Map(),
    byGroup: new Map(),
    bySession: new Map(),
  };
  const push = (map: Map<number, ProcessInfo[]>, key: number, p: ProcessInfo) => {
    const list = map.get(key);
    if (list) list.push(p);
    else map.set(key, [p]);
  };
  for (const p of table) {
    index.byPid.set(p.pid, p);
    push(index.children, p.ppid, p);
    push(index.byGroup, p.pgid, p);
    push(index.bySession, p.sid, p);
  }
  indexes.set(table, { size: table.length, index });
  return index;
}

/** All processes reachable from `roots` by parent links in one snapshot (roots excluded). */
export function descendantsOf(table: readonly ProcessInfo[], roots: Iterable<number>): ProcessInfo[] {
  const { children } = indexOf(table);
  const seen = new Set<number>(roots);
  const queue = [...seen];
  const out: ProcessInfo[] = [];
  while (queue.length > 0) {
    const pid = queue.pop() as number;
    for (const child of children.get(pid) ?? []) {
      if (seen.has(child.pid)) continue;
      seen.add(child.pid);
      out.push(child);
      queue.push(child.pid);
    }
  }
  return out;
}

/** `pid` and its ancestors up to PID 1, as found in `table`. */
export function ancestorsOf(table: readonly ProcessInfo[], pid: number): Set<number> {
  const { byPid } = indexOf(table);
  const out = new Set<number>();
  let current = byPid.get(pid);
  while (current && !out.has(current.pid)) {
    out.add(current.pid);
    if (current.ppid <= 0) break;
    current = byPid.get(current.ppid);
  }
  return out;
}

/**
 * `members` with every one placed after its parent where that parent is among them, otherwise in
 * the order given. Signalled one by one, a parent signalled after its child could see it die and
 * go on (a shell runs its next command, a manager restarts its worker) before its own signal came.
 * Start times cannot promise this order: they tick at 10 ms, and pids wrap.
 */
export function parentsFirst(members: readonly ProcessInfo[]): ProcessInfo[] {
  const byPid = new Map(members.map((m) => [m.pid, m]));
  const placed = new Set<ProcessInfo>();
  const out: ProcessInfo[] = [];
  for (const m of members) {
    const chain: ProcessInfo[] = [];
    for (let p: ProcessInfo | undefined = m; p && !placed.has(p); p = byPid.get(p.ppid)) {
      placed.add(p);
      chain.push(p);
    }
    for (let i = chain.length - 1; i >= 0; i--) out.push(chain[i] as ProcessInfo);
  }
  return out;
}

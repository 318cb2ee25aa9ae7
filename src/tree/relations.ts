import type { ProcessInfo } from './types.js';

/** Lookups over one snapshot. */
export interface TableIndex {
  byPid: Map<number, ProcessInfo>;
  children: Map<number, ProcessInfo[]>;
  byGroup: Map<number, ProcessInfo[]>;
}

// One snapshot is shared by every run that scanned in the same event-loop turn (ProcfsTable.list
// batches them): indexing it once rather than once per run keeps a thousand runs ending together
// linear. Weakly keyed by the snapshot array, which nobody mutates, so nothing is kept alive.
const indexes = new WeakMap<readonly ProcessInfo[], TableIndex>();

export function indexTable(table: readonly ProcessInfo[]): TableIndex {
  let index = indexes.get(table);
  if (index) return index;
  index = { byPid: new Map(), children: new Map(), byGroup: new Map() };
  for (const p of table) {
    index.byPid.set(p.pid, p);
    push(index.children, p.ppid, p);
    push(index.byGroup, p.pgid, p);
  }
  indexes.set(table, index);
  return index;
}

function push(map: Map<number, ProcessInfo[]>, key: number, p: ProcessInfo): void {
  const list = map.get(key);
  if (list) list.push(p);
  else map.set(key, [p]);
}

/** All processes reachable from `roots` by parent links in one snapshot (roots excluded). */
export function descendantsOf(table: readonly ProcessInfo[], roots: Iterable<number>): ProcessInfo[] {
  const { children } = indexTable(table);
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
  const { byPid } = indexTable(table);
  const out = new Set<number>();
  let current = byPid.get(pid);
  while (current && !out.has(current.pid)) {
    out.add(current.pid);
    if (current.ppid <= 0) break;
    current = byPid.get(current.ppid);
  }
  return out;
}

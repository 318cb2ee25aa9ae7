import type { ProcessInfo } from './types.js';

/** All processes reachable from `roots` by parent links in one snapshot (roots excluded). */
export function descendantsOf(table: readonly ProcessInfo[], roots: Iterable<number>): ProcessInfo[] {
  const children = new Map<number, ProcessInfo[]>();
  for (const p of table) {
    const list = children.get(p.ppid);
    if (list) list.push(p);
    else children.set(p.ppid, [p]);
  }
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
  const byPid = new Map(table.map((p) => [p.pid, p]));
  const out = new Set<number>();
  let current = byPid.get(pid);
  while (current && !out.has(current.pid)) {
    out.add(current.pid);
    if (current.ppid <= 0) break;
    current = byPid.get(current.ppid);
  }
  return out;
}

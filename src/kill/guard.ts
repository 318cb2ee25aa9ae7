import { indexOf, type ProcessInfo, type ProcessTable } from '../tree/index.js';

/**
 * Invariant 2: never signal pid <= 1, ourselves, an ancestor of ours, or a process group that
 * holds us or an ancestor. Ancestors are re-read for every sequence: if our parent dies we are
 * re-parented, and yesterday's list would be wrong.
 */
export class Guard {
  private pids = new Set<number>();
  private groups = new Set<number>();
  private sessions = new Set<number>();

  static async load(table: ProcessTable): Promise<Guard> {
    const guard = new Guard();
    await guard.refresh(table);
    return guard;
  }

  async refresh(table: ProcessTable): Promise<void> {
    this.take(table.ancestry ? await table.ancestry(process.pid) : await walkUp(table));
  }

  /**
   * The same from a whole-table snapshot a scan just took: no read of its own (on the ps table,
   * one process launch fewer per scan), and the ancestry is exactly the one the scan's members
   * are judged against.
   */
  refreshFrom(snapshot: readonly ProcessInfo[]): void {
    const { byPid } = indexOf(snapshot);
    const chain: ProcessInfo[] = [];
    let info = byPid.get(process.pid);
    let whole = info !== undefined;
    for (let hops = 0; info && hops < 4096; hops++) {
      chain.push(info);
      const parent = info.ppid;
      info = parent > 1 ? byPid.get(parent) : undefined;
      if (parent > 1 && !info) whole = false;
    }
    // A snapshot that misses us or an ancestor (read mid-change) only ever adds protection.
    this.take(chain, !whole);
  }

  private take(chain: readonly ProcessInfo[], keep = false): void {
    const pids = new Set<number>(keep ? [...this.pids, process.pid] : [process.pid]);
    const groups = new Set<number>(keep ? this.groups : []);
    const sessions = new Set<number>(keep ? this.sessions : []);
    for (const info of chain) {
      pids.add(info.pid);
      groups.add(info.pgid);
      if (info.sid > 0) sessions.add(info.sid);
    }
    this.pids = pids;
    this.groups = groups;
    this.sessions = sessions;
  }

  forbidsPid(pid: number): boolean {
    return !Number.isInteger(pid) || pid <= 1 || this.pids.has(pid);
  }

  forbidsGroup(pgid: number): boolean {
    return !Number.isInteger(pgid) || pgid <= 1 || this.groups.has(pgid) || this.pids.has(pgid);
  }

  /** A session that holds us or an ancestor: its members are never claimed by their session. */
  forbidsSession(sid: number): boolean {
    return !Number.isInteger(sid) || sid <= 1 || this.sessions.has(sid) || this.pids.has(sid);
  }

  isOwnOrAncestor(pid: number): boolean {
    return this.pids.has(pid);
  }
}

/** Our ancestry by one fresh read per ancestor: cheap where a read is a file read (procfs). */
async function walkUp(table: ProcessTable): Promise<ProcessInfo[]> {
  const chain: ProcessInfo[] = [];
  let pid = process.pid;
  for (let hops = 0; hops < 4096 && pid > 1; hops++) {
    const info = await table.get(pid);
    if (!info) break;
    chain.push(info);
    pid = info.ppid;
  }
  return chain;
}

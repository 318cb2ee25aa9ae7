import type { Deliverer, Guard, KillTarget } from '../kill/index.js';
import { COOKIE_NAME } from '../options/index.js';
import { descendantsOf, isGone, type ProcessInfo, type ProcessTable } from '../tree/index.js';
import type { CgroupRemains } from './cgroup-remains.js';
import type { RunRecord } from './record.js';

const key = (p: ProcessInfo) => `${p.pid}@${p.startTime}`;

/**
 * What remains of a run whose supervisor died, found from its record: the root while it is still
 * the same process (pid + start time), its process group while the root still leads it, the holders
 * of its cookie, the members of its cgroup, every process seen as a member before, and all their
 * descendants. A leaderless group is not trusted: after a crash its number may have been recycled.
 */
export class OrphanTarget implements KillTarget {
  private readonly known = new Map<string, ProcessInfo>();

  constructor(
    private readonly record: RunRecord,
    private readonly table: ProcessTable,
    private readonly guard: Guard,
    private readonly deliverer: Deliverer,
    private readonly cgroup: CgroupRemains | null,
    private readonly extraNotes: string[],
  ) {}

  get notes(): readonly string[] {
    return [...this.extraNotes, ...this.deliverer.notes];
  }

  async members(): Promise<ProcessInfo[]> {
    await this.guard.refresh(this.table);
    const list = await this.table.list();
    const byPid = new Map(list.map((p) => [p.pid, p]));
    const found = new Map<string, ProcessInfo>();
    const add = (p: ProcessInfo | undefined) => {
      if (p && !isGone(p) && !this.guard.forbidsPid(p.pid)) found.set(key(p), p);
    };
    const { pid, pidStart, pgid, cookie } = this.record;
    const root = pid === null ? undefined : byPid.get(pid);
    const rootIsOurs = root !== undefined && pidStart !== null && root.startTime === pidStart;
    if (rootIsOurs) add(root);
    if (rootIsOurs && pgid !== null && pgid === pid) for (const p of list) if (p.pgid === pgid) add(p);
    for (const k of this.known.values()) {
      const now = byPid.get(k.pid);
      if (now && now.startTime === k.startTime) add(now);
    }
    if (cookie && this.table.findByEnv) {
      for (const p of await this.table.findByEnv(COOKIE_NAME, cookie)) add(byPid.get(p));
    }
    if (this.cgroup) for (const p of this.cgroup.pids()) add(byPid.get(p));
    for (const d of descendantsOf(
      list,
      [...found.values()].map((p) => p.pid),
    ))
      add(d);
    for (const [k, p] of found) this.known.set(k, p);
    return [...found.values()];
  }

  async signal(signal: NodeJS.Signals, members: ProcessInfo[]): Promise<ProcessInfo[]> {
    const reached: ProcessInfo[] = [];
    let rest = members;
    if (signal === 'SIGKILL' && this.cgroup) {
      const inside = new Set(this.cgroup.pids());
      const problem = this.cgroup.kill((p) => this.guard.forbidsPid(p));
      if (problem) this.extraNotes.push(problem);
      else {
        reached.push(...members.filter((m) => inside.has(m.pid)));
        rest = members.filter((m) => !inside.has(m.pid));
      }
    }
    for (const m of rest) if ((await this.deliverer.toMember(m, signal)) === 'sent') reached.push(m);
    return reached;
  }
}

import type { Guard } from '../kill/index.js';
import { COOKIE_NAME } from '../spec/index.js';
import { descendantsOf, indexTable, isGone, type ProcessInfo, type ProcessTable } from '../tree/index.js';

const key = (p: ProcessInfo) => `${p.pid}@${p.startTime}`;

/**
 * Who belongs to a run's tree, from one process-table snapshot: the members of its process group
 * (when it has one), every process seen as a member before and still the same process, the holders
 * of its environment cookie, and all their descendants by parent link. Remembering earlier members
 * is what catches a grandchild whose parent exited and who was re-parented away.
 */
export class TreeMembership {
  private root: ProcessInfo | null = null;
  private readonly known = new Map<string, ProcessInfo>();

  constructor(
    private readonly table: ProcessTable,
    private readonly guard: Guard,
    private readonly cookie: string | null,
    private readonly useGroup: boolean,
  ) {}

  get rootInfo(): ProcessInfo | null {
    return this.root;
  }

  async attach(pid: number): Promise<void> {
    this.root = await this.table.get(pid);
    if (this.root) this.known.set(key(this.root), this.root);
  }

  async scan(): Promise<ProcessInfo[]> {
    await this.guard.refresh(this.table);
    const list = await this.table.list();
    const { byPid, byGroup } = indexTable(list);
    const members = new Map<string, ProcessInfo>();
    const add = (p: ProcessInfo | undefined) => {
      if (p && !isGone(p) && !this.guard.forbidsPid(p.pid)) members.set(key(p), p);
    };

    const root = this.root;
    const group = this.useGroup && root ? this.groupOf(root, byPid) : null;
    if (group !== null) for (const p of byGroup.get(group) ?? []) if (p.sid === root?.sid) add(p);
    for (const k of this.known.values()) {
      const now = byPid.get(k.pid);
      if (now && now.startTime === k.startTime) add(now);
    }
    if (this.cookie && this.table.findByEnv) {
      const search = { among: list, ...(root ? { bornSince: root } : {}) };
      for (const pid of await this.table.findByEnv(COOKIE_NAME, this.cookie, search)) add(byPid.get(pid));
    }
    const roots = [...members.values()].map((p) => p.pid);
    if (root && byPid.get(root.pid)?.startTime === root.startTime) roots.push(root.pid);
    for (const d of descendantsOf(list, roots)) add(d);

    for (const [k, p] of members) this.known.set(k, p);
    return [...members.values()];
  }

  /**
   * The run's process group, while it is provably still the one the root created: a group number
   * is not reused while any process is in it, and if the number now leads a different process
   * (same pid, other start time) the group is someone else's.
   */
  private groupOf(root: ProcessInfo, byPid: Map<number, ProcessInfo>): number | null {
    const leader = byPid.get(root.pgid);
    if (root.pgid !== root.pid) return null;
    if (leader && leader.startTime !== root.startTime) return null;
    return root.pgid;
  }
}

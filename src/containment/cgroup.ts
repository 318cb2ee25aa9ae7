import { type Deliverer, type Guard, type MemberScan, type Members, unconfirmed } from '../kill/index.js';
import { descendantsOf, isGone, type ProcessInfo, type ProcessTable, stillAlive } from '../tree/index.js';
import {
  holdsUnidentified,
  isPopulated,
  isUnidentifiedMember,
  killAll,
  subtreeProcs,
  unidentifiedMember,
} from './cgroup-fs.js';
import type { CgroupHost } from './cgroup-host.js';
import { TreeMembership } from './membership.js';
import { throughShim } from './shim.js';
import type { Containment, LaunchPlan } from './types.js';

const key = (p: ProcessInfo) => `${p.pid}@${p.startTime}`;
/** Signals after which SIGCONT would undo or duplicate what was asked. */
const NO_CONT = new Set<NodeJS.Signals>(['SIGKILL', 'SIGCONT', 'SIGSTOP', 'SIGTSTP', 'SIGTTIN', 'SIGTTOU']);

/**
 * Linux cgroup v2: the run lives in its own cgroup, which no descendant leaves without privileges —
 * setsid, double forks and cleared environments included. SIGKILL is one write to cgroup.kill.
 *
 * A root member can still move itself (or anyone) out, move protected processes in, or remove the
 * cgroup. So the tree is the union the other modes use too — cgroup members, holders of the run's
 * cookie born after its root, and descendants of members — read from the process table whenever
 * the cgroup showed it no longer holds everything (a member left it, the cgroup vanished), before
 * the first signal, and once before a termination believes the tree gone. A normal exit whose
 * cgroup is empty costs no scan.
 */
export class CgroupContainment implements Containment {
  readonly kind = 'cgroup' as const;
  /** The run's cgroup directory (the journal records it, so that a crashed supervisor's runs can be reaped). */
  readonly cgroupPath: string;
  private readonly membership: TreeMembership;
  private inside = new Map<string, ProcessInfo>();
  /** The cgroup no longer holds the whole tree: every scan reads the process table too. */
  private wide = false;
  private signalled = false;
  /** A protected process was found inside: the cgroup is never killed whole again. */
  private noWholeKill = false;
  private released = false;

  constructor(
    private readonly host: CgroupHost,
    name: string,
    private readonly table: ProcessTable,
    private readonly guard: Guard,
    private readonly deliverer: Deliverer,
    cookie: string | null,
    beforeCreate?: (dir: string) => void,
  ) {
    this.cgroupPath = host.createRun(name, beforeCreate);
    this.membership = new TreeMembership(table, guard, cookie, false, deliverer.notes);
  }

  get notes(): readonly string[] {
    return this.deliverer.notes;
  }

  prepare(plan: LaunchPlan): LaunchPlan {
    this.membership.beforeLaunch();
    return throughShim({ ...plan, newSession: true }, `${this.cgroupPath}/cgroup.procs`);
  }

  attach(pid: number): Promise<void> {
    return this.membership.attach(pid);
  }

  lastSeen(): { root: ProcessInfo | null; members: ProcessInfo[] } {
    return { root: this.membership.rootInfo, members: this.membership.knownMembers };
  }

  async members(scan?: MemberScan): Promise<Members> {
    await this.guard.refresh(this.table);
    const out = await this.cgroupMembers();
    // Until the shim has written itself into cgroup.procs the root is outside; it has forked
    // nothing yet, so the root alone is the whole tree then.
    const root = this.membership.rootInfo;
    if (root && !out.has(key(root))) {
      const fresh = await this.table.get(root.pid);
      if (stillAlive(fresh, root)) out.set(key(fresh), fresh);
    }
    // Before the first signal, the descendants of what is inside: a child a root member moved out
    // of the cgroup (and out of its session, without the cookie) is tied to the run by its parent
    // alone, and that link is gone once the parent, inside, has died of the signal. One listing,
    // no environment read: the cookie outlives the signal, and the scans below still read it.
    if (!this.wide && !this.signalled && out.size > 0) {
      const list = await this.table.list();
      const inside = [...out.values()].filter((m) => !isUnidentifiedMember(m)).map((m) => m.pid);
      let outside = descendantsOf(list, inside).filter(
        (d) => !out.has(key(d)) && !isGone(d) && !this.guard.forbidsPid(d.pid),
      );
      // Born inside between the read of cgroup.procs and the listing: inside, not out. A second
      // read, after the listing, tells them from what really left.
      if (outside.length > 0) {
        const now = await this.cgroupMembers();
        outside = outside.filter((d) => !now.has(key(d)));
      }
      if (outside.length > 0)
        this.widen(`${outside.length} member(s) of the run were outside cgroup ${this.cgroupPath}`);
      this.membership.remember(outside);
    }
    // Once signalled, "gone" is only believed after the table agrees: the cgroup alone cannot see
    // members that were moved out before we first looked.
    if (this.wide || (this.signalled && out.size === 0)) {
      const before = out.size;
      const onSight = scan?.stopOnSight ? (m: ProcessInfo) => this.deliverer.stopNow(m) : undefined;
      const found = await this.membership.scan(onSight);
      if (found.unconfirmed && out.size === 0) return unconfirmed(found.unconfirmed);
      for (const m of found) out.set(key(m), m);
      if (!this.wide && out.size > before) {
        this.widen(`${out.size - before} member(s) of the run were outside cgroup ${this.cgroupPath}`);
      }
    }
    return [...out.values()];
  }

  async signal(signal: NodeJS.Signals, members: ProcessInfo[]): Promise<ProcessInfo[]> {
    this.signalled = true;
    let pending = members;
    const reached: ProcessInfo[] = [];
    if (signal === 'SIGKILL' && members.some((m) => this.inside.has(key(m))) && this.mayKillWhole()) {
      try {
        if (killAll(this.cgroupPath)) {
          reached.push(...members.filter((m) => this.inside.has(key(m))));
          pending = members.filter((m) => !this.inside.has(key(m)));
        } else {
          this.note('this kernel has no cgroup.kill (Linux < 5.14): SIGKILL goes to members one by one');
        }
      } catch (error) {
        this.note(
          `writing cgroup.kill failed (${(error as NodeJS.ErrnoException).code ?? error}); killing by pid`,
        );
      }
    }
    for (const m of pending) {
      if (isUnidentifiedMember(m)) continue; // only cgroup.kill reaches it, above
      if ((await this.deliverer.toMember(m, signal)) === 'sent') reached.push(m);
    }
    // A stopped member cannot act on the graceful signal until it is continued.
    if (!NO_CONT.has(signal))
      for (const m of reached) if (!isUnidentifiedMember(m)) await this.deliverer.toMember(m, 'SIGCONT');
    return reached;
  }

  async release(notes?: string[], keepLeftovers = false): Promise<void> {
    if (this.released) return;
    this.released = true;
    await this.host.releaseRun(this.cgroupPath, {
      ...(notes ? { notes } : {}),
      keep: keepLeftovers,
      // The last run's release ends what members left in the parent cgroup, never these: the
      // guard as the run's last look read it (no read of our ancestry on every release), and
      // ourselves and our parent whatever it says.
      protect: (pid) => this.guard.forbidsPid(pid) || pid === process.pid || pid === process.ppid,
    });
  }

  /** The live processes of the cgroup now; notes members that left it since the last look. */
  private async cgroupMembers(): Promise<Map<string, ProcessInfo>> {
    const out = new Map<string, ProcessInfo>();
    const populated = isPopulated(this.cgroupPath);
    if (populated === null) {
      this.widen(
        `cgroup ${this.cgroupPath} disappeared; its members are followed by identity, cookie and parent links`,
      );
    }
    let protectedInside = false;
    if (populated) {
      for (const pid of subtreeProcs(this.cgroupPath)) {
        if (this.guard.forbidsPid(pid)) protectedInside = true;
        const info = await this.table.get(pid);
        if (info && !isGone(info) && !this.guard.forbidsPid(pid)) out.set(key(info), info);
      }
    }
    // Populated, yet nothing in it could be read: the tree is not gone (a pid-hopper looks like
    // this for good), and cgroup.kill is what reaches it.
    const identify = async (pid: number) => {
      const info = await this.table.get(pid);
      if (info === null || isGone(info)) return false;
      out.set(key(info), info);
      return true;
    };
    if (
      populated &&
      out.size === 0 &&
      !protectedInside &&
      (await holdsUnidentified(this.cgroupPath, identify))
    ) {
      const stand = unidentifiedMember(this.cgroupPath);
      out.set(key(stand), stand);
    }
    for (const [k, m] of this.inside) {
      if (out.has(k) || this.guard.forbidsPid(m.pid)) continue;
      const now = await this.table.get(m.pid);
      if (now && !isGone(now) && now.startTime === m.startTime) {
        this.widen(`pid ${m.pid} left cgroup ${this.cgroupPath}; it is still followed as a member`);
      }
    }
    this.inside = out;
    this.membership.remember([...out.values()].filter((m) => !isUnidentifiedMember(m)));
    return new Map(out);
  }

  /**
   * Whether cgroup.kill may be written: never while a protected process (procwarden, an ancestor,
   * pid 1; a root member can write any pid into cgroup.procs) is inside. Those are moved back to
   * our own cgroup, and the run's SIGKILLs go by pid, identity-checked, from then on.
   */
  private mayKillWhole(): boolean {
    if (this.noWholeKill) return false;
    const held = subtreeProcs(this.cgroupPath).filter((pid) => this.guard.forbidsPid(pid));
    if (held.length === 0) return true;
    this.noWholeKill = true;
    const moved: string[] = [];
    for (const pid of held) {
      try {
        moved.push(`${pid} to ${this.host.evict(pid)}`);
      } catch (error) {
        moved.push(`${pid} could not be moved (${(error as NodeJS.ErrnoException).code ?? error})`);
      }
    }
    this.note(
      `cgroup ${this.cgroupPath} held protected pid(s) ${held.join(', ')} (procwarden, an ancestor or pid 1): moved ${moved.join(', ')}; cgroup.kill is not used for this run, SIGKILL goes to members one by one`,
    );
    return false;
  }

  private widen(why: string): void {
    this.wide = true;
    this.note(why);
  }

  private note(text: string): void {
    if (!this.deliverer.notes.includes(text)) this.deliverer.notes.push(text);
  }
}

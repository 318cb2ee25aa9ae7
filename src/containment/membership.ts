import type { Guard, Members } from '../kill/index.js';
import { COOKIE_NAME, OUTER_COOKIES_NAME } from '../options/index.js';
import {
  BLIND_START,
  descendantsOf,
  indexOf,
  isGone,
  type ProcessInfo,
  type ProcessTable,
  type SnapshotIndex,
  type Sweep,
  stillAlive,
} from '../tree/index.js';
import { type ScanOutcome, scanUntilSure } from './confirm-empty.js';

const key = (p: ProcessInfo) => `${p.pid}@${p.startTime}`;

/**
 * How long a run's read of its root waits where every read is a process launch (ps): a command
 * that ends sooner is not read at all (the run lets the read go), and the runs started meanwhile
 * share one launch. A signal due sooner has it read at once.
 */
export const ROOT_READ_DELAY_MS = 20;

/**
 * Who belongs to a run's tree, from one process-table snapshot: the members of its process group
 * (when it has one), every process seen as a member before and still the same process, the holders
 * of its environment cookie, every process in a session a member founded, and all their
 * descendants by parent link. Remembering earlier members is what catches a grandchild whose
 * parent exited and who was re-parented away; their sessions catch the one forked after the last
 * look, whose parent exited before the next.
 */
export class TreeMembership {
  private root: ProcessInfo | null = null;
  private readonly known = new Map<string, ProcessInfo>();
  /**
   * Sessions of dead founders seen empty: nothing of the run can enter one again, so whoever holds
   * that number later founded it anew (a stranger given the pid), and is not the run's.
   */
  private readonly endedSessions = new Set<number>();
  /**
   * What a look proved the tree to be: while the table's birth count still reads `births`, no
   * process has been born since, and nothing but a birth makes a process a member (a group or
   * session is only entered by a process already in that session, a parent link only ever moves
   * to init or to a subreaper among the process's own ancestors): the tree is at most `members`,
   * those still alive. One exception, on purpose: a process can write the run's cookie into its
   * own environment (an execve with a chosen one, PR_SET_MM) without a birth. A sweep would then
   * count it; the proof does not, so the proof can only ever signal fewer processes, never one
   * that is not the run's. Set by a scan that read every process it listed, and by the launch;
   * dropped when members are learned some other way.
   */
  private proof: { births: number; members: ProcessInfo[] } | null = null;
  /** The birth count read just before the command was spawned. */
  private launchBirths: number | null = null;
  /**
   * The count has been seen to grow past launchBirths (the root's own birth must show): a count
   * that stands still whatever happens (an emulated /proc) would otherwise prove every scan.
   */
  private countMoves = false;
  /** The pid whose identity attach is reading, until it has it. */
  private reading: number | null = null;

  constructor(
    private readonly table: ProcessTable,
    private readonly guard: Guard,
    private readonly cookie: string | null,
    private readonly useGroup: boolean,
    /** Where a scan that could not confirm an empty tree says so. */
    private readonly notes: string[] = [],
  ) {}

  get rootInfo(): ProcessInfo | null {
    return this.root;
  }

  /** Every process ever seen as a member (the exit hook re-verifies each before signalling it). */
  get knownMembers(): ProcessInfo[] {
    return [...this.known.values()];
  }

  /** Members found by other means (a cgroup's list): their descendants belong to the tree too. */
  remember(members: Iterable<ProcessInfo>): void {
    const proven = this.proof && new Set(this.proof.members.map(key));
    for (const m of members) {
      // One the proof does not hold (a process moved into the run's cgroup) brings its descendants.
      if (proven && !proven.has(key(m))) this.proof = null;
      this.known.set(key(m), m);
    }
  }

  /** Called right before the command is spawned. */
  beforeLaunch(): void {
    this.launchBirths = this.table.births?.() ?? null;
  }

  async attach(pid: number): Promise<void> {
    this.reading = pid;
    // Deferred where the read is a launch (ps) and the run can do without it once the root is gone
    // (see rootReaped): a command that ends sooner costs its run no read at all.
    const root =
      this.table.getSoon && this.canLetRootGo
        ? await this.table.getSoon(pid, ROOT_READ_DELAY_MS)
        : await this.table.get(pid);
    if (root === undefined || this.reading !== pid) return; // let go: rootReaped() stood in
    this.reading = null;
    this.root = root;
    if (this.root) this.known.set(key(this.root), this.root);
    else if (this.useGroup && this.noCookieSearch) this.root = exitedLeader(pid);
    // The root was born after launchBirths was read: while the count reads one more, the root is
    // the only process born since, and so the whole tree (none, if it was already gone).
    if (this.launchBirths !== null) {
      const root = this.root && !isGone(this.root) ? [this.root] : [];
      this.proof = { births: this.launchBirths + 1, members: root };
    }
  }

  /**
   * The root was reaped while attach still waited for its identity. Without a cookie search the
   * read can add nothing to a scan: the root is gone, its children re-parented, and its group
   * stands in for it, as when the read comes back after the exit. So the run need not wait for it,
   * and a read not made yet is not made. Returns whether attach was let go.
   */
  rootReaped(): boolean {
    const pid = this.reading;
    if (pid === null || !this.canLetRootGo) return false;
    this.reading = null;
    this.root = exitedLeader(pid);
    if (this.launchBirths !== null) this.proof = { births: this.launchBirths + 1, members: [] };
    this.table.letGo?.(pid);
    return true;
  }

  /** A signal is due: a deferred read of the root is made now (it joins a read made at once). */
  identityNow(): void {
    if (this.reading !== null) this.table.hurry?.(this.reading);
  }

  /** `onHolder`: called the moment a cookie holder is read (see EnvQuery.onHolder). */
  async scan(onHolder?: (holder: ProcessInfo) => void): Promise<Members> {
    if (this.nothingToFind()) return [];
    const proven = await this.proven();
    if (proven) return proven;
    return scanUntilSure(() => this.scanOnce(onHolder), this.table.sweep !== undefined, this.notes);
  }

  /**
   * The members a scan would find, from per-pid reads of the proven ones, while the proof holds
   * (nothing born since it was made); null when it does not. This is what lets a tree that died
   * without forking, or a command that forked nothing, be confirmed gone without a sweep.
   */
  private async proven(): Promise<ProcessInfo[] | null> {
    const proof = this.proof;
    if (!proof) return null;
    const alive: ProcessInfo[] = [];
    for (const m of proof.members) {
      const now = await this.table.get(m.pid);
      if (stillAlive(now, m) && !this.guard.forbidsPid(now.pid)) alive.push(now);
    }
    // Read after the members, not before: a member alive at its read may have forked, then exited.
    // The count only grows, so one that reads what the proof read now has read it all along: nothing
    // was born since the proof, nor while the members were read. (One read, not one on each side.)
    if (this.table.births?.() !== proof.births) return null;
    // Nothing born since: the sessions of dead founders that no member is in are empty for good.
    const sessions = new Set(alive.map((p) => p.sid));
    for (const k of this.known.values())
      if (k.sid === k.pid && !sessions.has(k.pid) && !alive.some((p) => p.pid === k.pid))
        this.endedSessions.add(k.pid);
    return alive;
  }

  private async scanOnce(onHolder?: (holder: ProcessInfo) => void): Promise<ScanOutcome> {
    const {
      processes: list,
      holders,
      vanished,
      unsettled = 0,
      births = null,
    } = await this.snapshot(onHolder);
    this.guard.refreshFrom(list);
    const index = indexOf(list);
    const { byPid } = index;
    const members = new Map<string, ProcessInfo>();
    const add = (p: ProcessInfo | undefined) => {
      if (p && !isGone(p) && !this.guard.forbidsPid(p.pid)) members.set(key(p), p);
    };

    // The root may have been read before it called setsid (forkpty does so after the fork):
    // its current row, same process, has the group and session it really leads.
    const current = this.root && byPid.get(this.root.pid);
    if (current && current.startTime === this.root?.startTime) this.root = current;
    const root = this.root;
    const group = this.useGroup && root ? this.groupOf(root, byPid) : null;
    if (group !== null) for (const p of index.byGroup.get(group) ?? []) if (p.sid === root?.sid) add(p);
    for (const k of this.known.values()) {
      const now = byPid.get(k.pid);
      if (now && now.startTime === k.startTime) add(now);
    }
    for (const pid of holders) add(byPid.get(pid));
    for (const p of this.sessionMembers(index, members.values(), vanished === 0 && unsettled === 0)) add(p);
    const roots = [...members.values()].map((p) => p.pid);
    if (root && byPid.get(root.pid)?.startTime === root.startTime) roots.push(root.pid);
    for (const d of descendantsOf(list, roots)) add(d);

    for (const [k, p] of members) this.known.set(k, p);
    const found = [...members.values()];
    if (births !== null && this.launchBirths !== null && births > this.launchBirths) this.countMoves = true;
    // Only a sweep that read every process it listed proves anything.
    const proves = this.countMoves && births !== null && vanished === 0 && unsettled === 0;
    this.proof = proves ? { births, members: found } : null;
    return { members: found, vanished, unsettled };
  }

  /**
   * Every process in a session a member founded. A process forked while its parent ends (a SIGTERM
   * handler's `cmd &`, a shell's last `sleep &`) is re-parented away at once, and the cookie is its
   * only other tie: one it cleared, or one read while it is between two execs (its environment
   * reads empty then, for as long as the loaded machine keeps it off the CPU), would leave it
   * unseen. Its session it keeps until it calls setsid itself, and the kernel does not hand out a
   * number still in use as a session id: while the founder's pid is free, or still its own
   * (alive or a zombie, same start time), everyone in the session was started inside it, by the
   * founder or its descendants. Sessions that hold procwarden or an ancestor are never claimed, nor
   * one seen empty after its founder died (endedSessions): a long watch (a held run's) would
   * otherwise claim a stranger that was given the founder's pid and founded its own.
   */
  private sessionMembers(
    { byPid, bySession }: SnapshotIndex,
    members: Iterable<ProcessInfo>,
    /** The snapshot read every process it listed: a session it shows empty is empty. */
    whole: boolean,
  ): ProcessInfo[] {
    const founders = new Set<number>();
    const leads = (p: ProcessInfo | undefined) => {
      if (p && p.sid === p.pid && !this.guard.forbidsSession(p.sid)) founders.add(p.pid);
    };
    for (const k of this.known.values()) {
      const now = byPid.get(k.pid);
      if (now && now.startTime !== k.startTime) continue; // that number is someone else's now
      if (whole && !now && k.sid === k.pid && !bySession.get(k.pid)?.length) this.endedSessions.add(k.pid);
      if (this.endedSessions.has(k.pid)) continue;
      leads(k);
      leads(now); // a row read before its setsid (forkpty, setsid(1)) does not show it leads
    }
    for (const m of members) leads(m);
    return [...founders].flatMap((sid) => bySession.get(sid) ?? []);
  }

  /**
   * Whether a scan provably finds nothing, so that a table whose every read is a process launch
   * (ps) is not read twice for it. Without a cookie search, and with no sessions reported, a scan
   * finds only the group, the remembered members and their descendants. When the root is the only
   * one remembered and the kernel says no process is in its group (kill(-pgid, 0): ESRCH; the
   * root was started as the leader of a new session, which cannot leave its group, so it is gone
   * too), none of them is left. One syscall, no snapshot to go stale.
   */
  private nothingToFind(): boolean {
    const { root, table } = this;
    if (!this.noCookieSearch || !table.groupHasMembers || !this.useGroup || !root) return false;
    // A table that reports sessions (sid >= 0) would also find the root's session in other groups.
    if (root.pgid !== root.pid || root.sid >= 0) return false;
    if ([...this.known.values()].some((k) => key(k) !== key(root))) return false;
    return !table.groupHasMembers(root.pgid);
  }

  /** A table that cannot read environments (ps): its scans find no cookie holder. */
  private get noCookieSearch(): boolean {
    return !this.table.sweep && !this.table.findByEnv;
  }

  /** Whether a scan can do without the root's identity once it was reaped (see rootReaped). */
  private get canLetRootGo(): boolean {
    return this.useGroup && this.noCookieSearch;
  }

  /** The table and the cookie holders, in one pass where the table offers it. */
  private async snapshot(onHolder?: (holder: ProcessInfo) => void): Promise<Sweep> {
    const { table, cookie } = this;
    if (cookie && table.sweep)
      return table.sweep({
        name: COOKIE_NAME,
        value: cookie,
        listName: OUTER_COOKIES_NAME,
        firstHolder: this.root,
        olderThan: this.oldest(),
        onHolder,
        session: this.rootSession(),
      });
    // No birth count: a plain listing does not say whether it read everything it listed.
    const processes = await table.list();
    const holders = new Set(
      cookie && table.findByEnv ? await table.findByEnv(COOKIE_NAME, cookie, OUTER_COOKIES_NAME) : [],
    );
    return { processes, holders, vanished: 0 };
  }

  /** The session the root founded, which sessionMembers claims whole (see there). */
  private rootSession(): { sid: number; startTime: string } | undefined {
    const root = this.root;
    if (!root || root.sid !== root.pid || this.guard.forbidsSession(root.sid)) return undefined;
    return { sid: root.sid, startTime: root.startTime };
  }

  /**
   * The oldest process counted as the run's: the root, unless a cgroup's list brought an older one
   * (a process someone moved into the run's cgroup), whose own descendants are members too.
   */
  private oldest(): ProcessInfo | null {
    let oldest = this.root;
    for (const k of this.known.values())
      if (!oldest || Number(k.startTime) < Number(oldest.startTime)) oldest = k;
    return oldest;
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

/**
 * The root as far as it is known when a table that reads by launching a process (ps) answered
 * after it had exited (a command that backgrounds a daemon and exits at once). It was started as
 * the leader of a new session, so its group's number is its pid, taken for as long as anyone is in
 * the group: what a scan finds there is the run's. Its start time is unknown, so it never passes
 * for a live process itself.
 */
function exitedLeader(pid: number): ProcessInfo {
  // sid -1: unknown, as such a table reports every process's session.
  return { pid, ppid: process.pid, pgid: pid, sid: -1, startTime: BLIND_START, state: 'Z', command: '' };
}

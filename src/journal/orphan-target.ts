import {
  holdsUnidentified,
  isUnidentifiedMember,
  type ScanOutcome,
  scanUntilSure,
  unidentifiedMember,
} from '../containment/index.js';
import type { Deliverer, Guard, KillTarget, MemberScan, Members } from '../kill/index.js';
import { COOKIE_NAME, OUTER_COOKIES_NAME } from '../options/index.js';
import { descendantsOf, isGone, type ProcessInfo, type ProcessTable, type Sweep } from '../tree/index.js';
import type { CgroupRemains } from './cgroup-remains.js';
import type { RunRecord } from './record.js';

const key = (p: ProcessInfo) => `${p.pid}@${p.startTime}`;

/**
 * What remains of a run whose supervisor died, found from its record: the root while it is still
 * the same process (pid + start time) and proves it is the run's (it carries the run's cookie or
 * sits in its verified cgroup, where the run had either), its process group only through that
 * proven leader, the holders of its cookie born no earlier than the run, the members of its
 * verified cgroup, every process seen as a member before, and all their descendants. What a
 * record names but cannot be proven is left alone and listed in `refused`.
 */
export class OrphanTarget implements KillTarget {
  private readonly known = new Map<string, ProcessInfo>();
  private readonly refusedSet = new Set<string>();
  /** Members no reap may signal (itself, its ancestors, PID 1), by identity: each noted once. */
  private readonly sparedSet = new Set<string>();

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

  /** What the record named that could not be proven the run's: left alone. */
  get refused(): string[] {
    return [...this.refusedSet];
  }

  /**
   * Members of the run that this reaper may not signal: itself or one of its ancestors (a reap
   * started from inside the run's tree), or PID 1. Left alive, so the run is not over.
   */
  get spared(): number {
    return this.sparedSet.size;
  }

  async members(scan?: MemberScan): Promise<Members> {
    await this.guard.refresh(this.table);
    // As a live supervisor's scans do (see KillTarget.members): what re-forks is stopped as it is read.
    const onHolder = scan?.stopOnSight ? (m: ProcessInfo) => this.deliverer.stopNow(m) : undefined;
    return scanUntilSure(() => this.scanOnce(onHolder), this.table.sweep !== undefined, this.extraNotes);
  }

  private async scanOnce(onHolder?: (holder: ProcessInfo) => void): Promise<ScanOutcome> {
    const { processes: list, holders, vanished, unsettled = 0 } = await this.snapshot(onHolder);
    const byPid = new Map(list.map((p) => [p.pid, p]));
    const inCgroup = new Set(this.cgroup?.pids() ?? []);
    const found = new Map<string, ProcessInfo>();
    const add = (p: ProcessInfo | undefined) => {
      if (!p || isGone(p)) return;
      if (!this.guard.forbidsPid(p.pid)) found.set(key(p), p);
      else if (!this.sparedSet.has(key(p))) {
        this.sparedSet.add(key(p));
        this.extraNotes.push(
          `pid ${p.pid} (${p.command}) is the run's, but it is ${p.pid === process.pid ? 'this reaper' : p.pid === 1 ? 'PID 1' : "this reaper's ancestor"}, which a reap never signals: left alive, and the record kept`,
        );
      }
    };
    const root = this.provenRoot(byPid, holders, inCgroup);
    if (root) add(root);
    const { pgid } = this.record;
    if (root && pgid !== null && pgid === root.pid && root.pgid === pgid)
      for (const p of list) if (p.pgid === pgid && p.sid === root.sid) add(p);
    for (const k of this.known.values()) {
      const now = byPid.get(k.pid);
      if (now && now.startTime === k.startTime) add(now);
    }
    for (const p of holders) add(byPid.get(p));
    for (const p of inCgroup) add(byPid.get(p));
    for (const d of descendantsOf(
      list,
      [...found.values()].map((p) => p.pid),
    ))
      add(d);
    for (const [k, p] of found) this.known.set(k, p);
    // The cgroup still holds tasks none of which could be read (a pid-hopper, or tasks exiting):
    // the tree is not gone, and cgroup.kill reaches them.
    const cgroup = this.cgroup;
    if (cgroup && ![...found.values()].some((p) => inCgroup.has(p.pid))) {
      const identify = async (pid: number) => {
        if (this.guard.forbidsPid(pid)) return true; // not ours to stand for: cgroup.kill is refused
        const info = await this.table.get(pid);
        if (info === null || isGone(info)) return false;
        found.set(key(info), info);
        this.known.set(key(info), info);
        return true;
      };
      if (await holdsUnidentified(cgroup.path, identify)) {
        const stand = unidentifiedMember(cgroup.path);
        found.set(key(stand), stand);
      }
    }
    return { members: [...found.values()], vanished, unsettled };
  }

  /**
   * The recorded root, when it is the same process and, where the run had a cookie or a cgroup,
   * carries that cookie or sits in that (verified) cgroup: pid and start time alone are readable
   * by anyone in /proc, so a record could name any process with them.
   */
  private provenRoot(
    byPid: Map<number, ProcessInfo>,
    holders: Set<number>,
    inCgroup: Set<number>,
  ): ProcessInfo | null {
    const { pid, pidStart, cookie, cgroupPath } = this.record;
    const root = pid === null ? undefined : byPid.get(pid);
    if (!root || isGone(root) || pidStart === null || root.startTime !== pidStart) return null;
    if (cookie === null && cgroupPath === null) return root;
    if (holders.has(root.pid) || inCgroup.has(root.pid)) return root;
    if (this.known.has(key(root))) return root;
    const failed = [
      cookie !== null ? 'its environment lacks the run cookie' : '',
      cgroupPath === null
        ? ''
        : this.cgroup
          ? 'it is not in the run cgroup'
          : 'the run cgroup is not trusted',
    ].filter(Boolean);
    this.refusedSet.add(
      `pid ${root.pid} (${root.command}) has the recorded pid and start time, but ${failed.join(' and ')}: left alone, its group too`,
    );
    return null;
  }

  /**
   * The table and the holders of the run's cookie born no earlier than the run (its root, or its
   * supervisor when the root is unknown): an older process with the same value did not inherit it
   * from the run, as a live supervisor reasons too.
   */
  private async snapshot(onHolder?: (holder: ProcessInfo) => void): Promise<Sweep> {
    const { cookie, pidStart, supervisorStart } = this.record;
    const floor = Number(pidStart ?? supervisorStart);
    const bornAfter = (p: ProcessInfo | undefined) =>
      p !== undefined && (!Number.isFinite(floor) || Number(p.startTime) >= floor);
    if (!cookie) return { processes: await this.table.list(), holders: new Set(), vanished: 0 };
    if (this.table.sweep) {
      const firstHolder = Number.isFinite(floor) ? this.floorInfo(String(floor)) : null;
      return this.table.sweep({
        name: COOKIE_NAME,
        value: cookie,
        listName: OUTER_COOKIES_NAME,
        firstHolder,
        onHolder,
      });
    }
    const processes = await this.table.list();
    const byPid = new Map(processes.map((p) => [p.pid, p]));
    const found = this.table.findByEnv
      ? await this.table.findByEnv(COOKIE_NAME, cookie, OUTER_COOKIES_NAME)
      : [];
    return { processes, holders: new Set(found.filter((p) => bornAfter(byPid.get(p)))), vanished: 0 };
  }

  /** The sweep filters by the first holder's start time only. */
  private floorInfo(startTime: string): ProcessInfo {
    return { pid: this.record.pid ?? 0, ppid: 0, pgid: 0, sid: -1, startTime, state: 'S', command: '' };
  }

  async signal(signal: NodeJS.Signals, members: ProcessInfo[]): Promise<ProcessInfo[]> {
    const reached: ProcessInfo[] = [];
    let rest = members;
    if (signal === 'SIGKILL' && this.cgroup) {
      const inside = new Set(this.cgroup.pids());
      const problem = this.cgroup.kill((p) => this.guard.forbidsPid(p));
      if (problem) this.extraNotes.push(problem);
      else {
        reached.push(...members.filter((m) => inside.has(m.pid) || isUnidentifiedMember(m)));
        rest = members.filter((m) => !inside.has(m.pid) && !isUnidentifiedMember(m));
      }
    }
    for (const m of rest) {
      if (isUnidentifiedMember(m)) continue; // only cgroup.kill reaches it, above
      if ((await this.deliverer.toMember(m, signal)) === 'sent') reached.push(m);
    }
    return reached;
  }
}

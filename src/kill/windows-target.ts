import { descendantsOf, type ProcessInfo, SnapshotTable } from '../tree/index.js';
import type { WindowsSnapshot, WindowsTable } from '../tree/windows.js';
import { compareCreated, createdBefore } from '../tree/windows-cim.js';
import { defaultSend, type SendSignal } from './deliver.js';
import type { Guard } from './guard.js';
import { Taskkill, type TaskkillResult } from './taskkill.js';

/** The launcher's own handle on the direct child: on Windows a process handle, immune to pid reuse. */
export interface ChildHandle {
  kill?(signal?: NodeJS.Signals): boolean;
  /**
   * When (Unix ms) the launcher reported the child's exit; null while it has not. Only from a
   * launcher that keeps the child's process handle open until then (node:child_process: libuv
   * closes it after the exit callback), so that its pid cannot be anyone else's before. node-pty's
   * ConPTY thread closes it first, and reports the exit later: a PTY run offers none.
   */
  exitHeardAt?(): number | null;
}

/**
 * How far apart Windows' process creation dates and Node's Date.now() may be: both are the system
 * time, but either may be a sample of the 15.6 ms clock tick. A comparison between them only
 * counts when it holds by two ticks, in the direction that never adopts a stranger (a leftover of
 * a command that lived less than this may be missed).
 */
const CLOCK_SLACK_MS = 32;

export interface WindowsTargetOptions {
  /** The per-pid fallback when taskkill cannot be used (process.kill by default). */
  send?: SendSignal;
  /** Count the root as a member (default true). */
  includeRoot?: boolean;
}

interface Step {
  pid: number;
  tree: boolean;
  /** The members this taskkill call is meant to reach. */
  covers: ProcessInfo[];
}

const key = (p: ProcessInfo) => `${p.pid}@${p.startTime}`;

/**
 * A process tree on Windows, as the termination sequence sees it. Windows never re-parents, so a
 * grandchild whose parent exited has no link left to the root: membership remembers every process
 * seen in the tree by identity (pid, CreationDate), and the force step ends each snapshotted
 * survivor by its own pid after the /T walk. Every signal is preceded by a fresh enumeration; a
 * member whose pid now has another CreationDate is never signalled.
 *
 * Mapping: any graceful signal is `taskkill /PID p /T` (WM_CLOSE; Windows has nothing closer to
 * SIGTERM), SIGKILL is `taskkill /PID p /T /F` then `/PID s /F` per survivor. /T is used only from
 * a pid that no older process names as its parent (a stale link taskkill would follow).
 * Fallbacks, each noted in the report: taskkill missing or failing → process.kill per pid from the
 * snapshot → the launcher's child.kill() for the direct child.
 */
export class WindowsTreeTarget {
  readonly notes: string[] = [];
  private readonly noted = new Set<string>();
  private readonly known = new Map<string, ProcessInfo>();
  /** Per member, a time (Unix ms) taken before the last read that showed it alive: it held its pid then. */
  private readonly aliveAt = new Map<string, number>();
  /** Members already asked to close: a console process refuses every time, so it is asked once. */
  private readonly asked = new Set<string>();
  private readonly taskkill: Taskkill;
  private readonly send: SendSignal;
  private root: ProcessInfo | null = null;
  private child: ChildHandle | undefined;
  private taskkillUnavailable = false;
  private childKilled = false;

  constructor(
    private readonly table: WindowsTable,
    private readonly guard: Guard,
    private readonly options: WindowsTargetOptions = {},
  ) {
    this.taskkill = new Taskkill(table.runner, table.env);
    this.send = options.send ?? defaultSend;
  }

  /**
   * Records the root by identity; `child` is the launcher's handle when procwarden started it.
   * With `exitHeardAt` (see ChildHandle), the launcher holds the child's process handle until it
   * has reported the exit, and Windows gives no process a pid that an open handle still names: a
   * row read while the exit was unheard is the command. Once it was heard, the pid may already be
   * a newer process's (a command that exits at once, and PowerShell answers in hundreds of
   * milliseconds): the row is taken for the command only if it was created before the exit was
   * heard by more than the clocks' slack.
   */
  async attach(pid: number, child?: ChildHandle): Promise<void> {
    this.child = child;
    const before = Date.now();
    const root = await this.table.get(pid);
    const heard = child?.exitHeardAt?.() ?? null;
    if (root && heard !== null && createdBefore(root.startTime, heard - CLOCK_SLACK_MS) !== true) {
      this.note(
        `pid ${pid} was read after the command had exited and belongs to "${root.command}", created since (or too close to tell): not the run's, left alone`,
      );
      this.adopt(null);
      return;
    }
    this.adopt(root);
    if (root) this.aliveAt.set(key(root), before);
  }

  adopt(root: ProcessInfo | null): void {
    this.root = root;
    if (root) this.known.set(key(root), root);
  }

  async members(): Promise<ProcessInfo[]> {
    const snap = await this.read();
    if (!snap) return this.blindMembers();
    const byPid = new Map(snap.processes.map((p) => [p.pid, p]));
    const out: ProcessInfo[] = [];
    for (const k of this.known.values()) {
      const now = byPid.get(k.pid);
      if (!now || now.startTime !== k.startTime || this.guard.forbidsPid(now.pid)) continue;
      if (this.options.includeRoot === false && now.pid === this.root?.pid) continue;
      out.push(now);
    }
    return out;
  }

  /**
   * What a snapshot taken at `before` says of the tree, whichever step took it (a member's child
   * seen in the graceful step's read is remembered even if the member dies before the next): the
   * members it shows alive held their pids then, their descendants are members, and so are the
   * orphans of those that died.
   */
  private observe(snap: WindowsSnapshot, before: number): void {
    const byPid = new Map(snap.processes.map((p) => [p.pid, p]));
    const roots: number[] = [];
    const gone: ProcessInfo[] = [];
    for (const k of this.known.values()) {
      if (byPid.get(k.pid)?.startTime === k.startTime) roots.push(k.pid);
      else gone.push(k);
    }
    const found = this.orphansOf(gone, snap);
    roots.push(...found.map((p) => p.pid));
    for (const p of [...found, ...descendantsOf(snap.processes, roots)]) {
      this.known.set(key(p), p);
      this.aliveAt.set(key(p), before);
    }
    for (const pid of roots) this.aliveAt.set(key(byPid.get(pid) as ProcessInfo), before);
  }

  /**
   * Processes whose parent is a member that died since it was last read: Windows keeps the dead
   * parent's pid as their ppid, so no walk from a live member finds them. A pid may have gone to a
   * newer process whose children name it too: only a process created while the member still held
   * the pid (after its creation, before the last time it was seen alive) is the member's child.
   */
  private orphansOf(gone: ProcessInfo[], snap: WindowsSnapshot): ProcessInfo[] {
    if (gone.length === 0) return [];
    const out: ProcessInfo[] = [];
    for (const p of snap.processes) {
      if (this.known.has(key(p))) continue;
      // The table cuts a link to a pid now held by a process newer than the child: that link is ours.
      const named = snap.cutLinks.get(p.pid) ?? p.ppid;
      const parent = gone.find(
        (k) =>
          k.pid === named && (compareCreated(k.startTime, p.startTime) ?? 1) <= 0 && this.bornWhileHeld(p, k),
      );
      if (parent) out.push(p);
    }
    return out;
  }

  /** Whether `p` was created while `member` still held its pid, by more than the clocks' slack. */
  private bornWhileHeld(p: ProcessInfo, member: ProcessInfo): boolean {
    let until = this.aliveAt.get(key(member)) ?? 0;
    if (this.root && key(member) === key(this.root) && this.child?.exitHeardAt) {
      // The launcher's handle keeps the root's pid from reuse until the exit is reported.
      const heard = this.child.exitHeardAt();
      if (heard === null) return true;
      until = Math.max(until, heard);
    }
    return createdBefore(p.startTime, until - CLOCK_SLACK_MS) === true;
  }

  async signal(signal: NodeJS.Signals, members: ProcessInfo[]): Promise<ProcessInfo[]> {
    const force = signal === 'SIGKILL';
    const targets = force ? members : members.filter((m) => !this.asked.has(key(m)));
    if (targets.length === 0) return [];
    const snap = await this.read();
    if (!snap) return this.blindSignal(signal, targets);
    const live = this.verify(targets, snap);
    if (live.length === 0) return [];
    return force ? this.force(live, snap) : this.graceful(live, snap);
  }

  private async graceful(live: ProcessInfo[], snap: WindowsSnapshot): Promise<ProcessInfo[]> {
    for (const m of live) this.asked.add(key(m));
    if (this.taskkillUnavailable) return [];
    const reached: ProcessInfo[] = [];
    const steps = this.plan(live, snap);
    const results = await Promise.all(steps.map((s) => this.run(s, false)));
    results.forEach((result, i) => {
      const step = steps[i] as Step;
      if (result.outcome === 'unavailable') {
        this.note(
          'graceful step skipped: taskkill is the only way to ask a Windows process to close; nobody was ' +
            'asked, so the force step does not wait for the grace',
        );
      }
      reached.push(...reachedBy(step, result));
    });
    return reached;
  }

  private async force(live: ProcessInfo[], snap: WindowsSnapshot): Promise<ProcessInfo[]> {
    const reached = new Map<string, ProcessInfo>();
    if (!this.taskkillUnavailable) {
      const steps = this.plan(live, snap);
      const results = await Promise.all(steps.map((s) => this.run(s, true)));
      results.forEach((result, i) => {
        for (const m of reachedBy(steps[i] as Step, result)) reached.set(key(m), m);
      });
    }
    // Each snapshotted survivor by its own pid: /T cannot reach a child whose parent already exited.
    const again = await this.read();
    if (!again) return [...reached.values(), ...this.blindSignal('SIGKILL', live)];
    for (const survivor of this.verify(live, again)) {
      if (await this.forceOne(survivor)) reached.set(key(survivor), survivor);
    }
    return [...reached.values()];
  }

  /** taskkill /F by pid → process.kill by pid → child.kill() (direct child only). */
  private async forceOne(member: ProcessInfo): Promise<boolean> {
    if (!this.taskkillUnavailable) {
      const result = await this.run({ pid: member.pid, tree: false, covers: [member] }, true);
      if (result.outcome === 'ok' || result.outcome === 'not-found') return result.outcome === 'ok';
    }
    this.note(`pid ${member.pid} (${member.command}): fell back to process.kill by pid from the snapshot`);
    try {
      this.send(member.pid, 'SIGKILL');
      return true;
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      if (code === 'ESRCH') return false;
      this.note(`process.kill(${member.pid}) failed: ${code ?? error}`);
    }
    return this.killChild(member);
  }

  private killChild(member: ProcessInfo): boolean {
    const root = this.root;
    if (!root || key(member) !== key(root) || !this.child?.kill || this.childKilled) return false;
    this.childKilled = true;
    this.note(`pid ${member.pid}: fell back to child.kill() through the launcher's process handle`);
    return this.child.kill('SIGKILL');
  }

  /**
   * One taskkill per top of the tree (a member whose parent is not a member) with /T, unless the
   * subtree holds a pid that an older process names as parent, or one we must never touch: then
   * its members go one by one without /T.
   */
  private plan(live: ProcessInfo[], snap: WindowsSnapshot): Step[] {
    const parentOf = new Map(snap.processes.map((p) => [p.pid, p.ppid]));
    const livePids = new Set(live.map((m) => m.pid));
    const byPid = new Map(live.map((m) => [m.pid, m]));
    const steps: Step[] = [];
    for (const top of live) {
      if (livePids.has(parentOf.get(top.pid) ?? 0)) continue;
      const subtree = [top, ...descendantsOf(snap.processes, [top.pid])];
      const covers = subtree.flatMap((p) => byPid.get(p.pid) ?? []);
      const unsafe = subtree.find((p) => snap.staleParents.has(p.pid) || this.guard.forbidsPid(p.pid));
      if (!unsafe && !snap.danglingParents) {
        steps.push({ pid: top.pid, tree: true, covers });
        continue;
      }
      this.note(
        unsafe
          ? `pid ${top.pid}: no /T (pid ${unsafe.pid} in its tree is named as parent by an unrelated older process, or is protected); members signalled one by one`
          : `pid ${top.pid}: no /T (a process names a dead pid as its parent, which a new member could be given); members signalled one by one`,
      );
      for (const m of covers) steps.push({ pid: m.pid, tree: false, covers: [m] });
    }
    return steps;
  }

  private async run(step: Step, force: boolean): Promise<TaskkillResult> {
    const result = await this.taskkill.run({ pid: step.pid, tree: step.tree, force });
    if (result.note) this.note(result.note);
    if (result.outcome === 'unavailable') {
      this.taskkillUnavailable = true;
      this.note('taskkill unavailable: forced ends fall back to process.kill by pid from the snapshot');
    }
    return result;
  }

  /** Members still the same process (pid and CreationDate) and allowed to be signalled. */
  private verify(members: ProcessInfo[], snap: WindowsSnapshot): ProcessInfo[] {
    const byPid = new Map(snap.processes.map((p) => [p.pid, p]));
    const live: ProcessInfo[] = [];
    for (const m of members) {
      const now = byPid.get(m.pid);
      if (!now) continue;
      if (now.startTime !== m.startTime) {
        this.note(
          `pid ${m.pid} was reused by ${JSON.stringify(now.command)} (created ${now.startTime || 'at an unknown time'}); ` +
            `the member (${JSON.stringify(m.command)}) is gone, the new process was not signalled`,
        );
        continue;
      }
      if (this.guard.forbidsPid(m.pid)) {
        this.note(`refused to signal pid ${m.pid}: it is procwarden itself or an ancestor`);
        continue;
      }
      live.push(m);
    }
    return live;
  }

  /** A fresh enumeration, which also refreshes our ancestry for the guard; null when it failed. */
  private async read(): Promise<WindowsSnapshot | null> {
    const before = Date.now();
    try {
      const snap = await this.table.snapshot();
      await this.guard.refresh(new SnapshotTable(snap.processes));
      this.observe(snap, before);
      return snap;
    } catch (error) {
      this.note(`process table unavailable: ${(error as Error).message}`);
      return null;
    }
  }

  /** Without a table only the direct child can be reached safely: through its handle, not its pid. */
  private blindMembers(): ProcessInfo[] {
    return this.root && this.child?.kill && !this.childKilled ? [this.root] : [];
  }

  private blindSignal(signal: NodeJS.Signals, members: ProcessInfo[]): ProcessInfo[] {
    if (signal !== 'SIGKILL') return [];
    const root = members.find((m) => this.root && key(m) === key(this.root));
    if (!root || !this.killChild(root)) return [];
    this.note('without a process table, descendants of the direct child could not be seen or verified');
    return [root];
  }

  private note(text: string): void {
    if (this.noted.has(text)) return;
    this.noted.add(text);
    this.notes.push(text);
  }
}

function reachedBy(step: Step, result: TaskkillResult): ProcessInfo[] {
  if (result.outcome === 'ok') return step.covers;
  const confirmed = new Set(result.confirmed);
  return step.covers.filter((m) => confirmed.has(m.pid));
}

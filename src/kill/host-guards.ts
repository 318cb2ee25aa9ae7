import { type Clock, sleep } from '../clock.js';
import { descendantsOf, indexOf, isGone, type ProcessInfo, type ProcessTable } from '../tree/index.js';
import { GUARD_NAME, GUARD_SCRIPT } from '../watchdog/script.js';

const key = (p: ProcessInfo) => `${p.pid}@${p.startTime}`;

/**
 * procwarden's host guards among the members of a tree being ended (see src/watchdog/script.ts):
 * the one small process each supervisor host keeps, which ends the host's runs if the host dies.
 * Signalled, it would be lost just when it is needed: a recognised guard and whatever it started
 * (its reaper) are never members. Its host stays one, and gets time to stop its runs (patient).
 */
export class HostGuards {
  /** Recognised guards, by identity: once the host is gone nothing vouches for them any more. */
  private readonly guards = new Map<string, ProcessInfo>();
  /** Their hosts, by identity. */
  private readonly hosts = new Set<string>();
  /** Each recognised guard's host (by the guard's identity). */
  private readonly hostOf = new Map<string, ProcessInfo>();

  constructor(
    private readonly table: ProcessTable,
    private readonly notes: string[],
  ) {}

  /**
   * Takes the guards and their descendants out of `members` (a scan's, by identity, read from
   * `list`), first looking for guards among the members new to this scan. One an earlier scan
   * handed out as a member stays one (`offered`): a member cannot leave the tree by turning into
   * a guard, and a process counted is never dropped from the count while it lives.
   */
  sift(list: readonly ProcessInfo[], members: Map<string, ProcessInfo>, offered: ReadonlySet<string>): void {
    const { byPid } = indexOf(list);
    for (const m of members.values()) {
      if (offered.has(key(m)) || this.guards.has(key(m))) continue;
      const host = byPid.get(m.ppid);
      if (host && members.has(key(host)) && isGuardOf(this.table, m, host)) {
        this.guards.set(key(m), m);
        this.hosts.add(key(host));
        this.hostOf.set(key(m), host);
        this.notes.push(
          `pid ${m.pid} is procwarden's guard of supervisor ${host.pid}: left to end ${host.pid}'s runs`,
        );
      }
    }
    const live = [...this.guards.values()].filter((g) => byPid.get(g.pid)?.startTime === g.startTime);
    for (const p of [
      ...live,
      ...descendantsOf(
        list,
        live.map((g) => g.pid),
      ),
    ]) {
      if (!offered.has(key(p))) members.delete(key(p));
    }
  }

  /**
   * Once the tree is over: spared guards (and what they started) whose host is gone get `withinMs`
   * to finish their host's runs and exit, as a real one does (at once when its host was idle, after
   * the rest of a run's grace otherwise). What is still alive then is returned: counted as escaped,
   * never signalled. So a member disguised as a guard, whose "host" holds its pipe open elsewhere
   * or whose "reaper" is anything, cannot make a report say that nothing is left.
   */
  async unfinished(clock: Clock, withinMs: number): Promise<ProcessInfo[]> {
    // A guard whose host lives (left out of the tree, or escaped: counted already) is doing its job.
    const orphaned: ProcessInfo[] = [];
    for (const [k, guard] of this.guards) {
      const host = this.hostOf.get(k) as ProcessInfo;
      const now = await this.table.get(host.pid);
      if (!now || isGone(now) || now.startTime !== host.startTime) orphaned.push(guard);
    }
    if (orphaned.length === 0) return [];
    const until = clock.now() + withinMs;
    for (;;) {
      const list = await this.table.list();
      const live = orphaned.filter((g) =>
        list.some((p) => p.pid === g.pid && p.startTime === g.startTime && !isGone(p)),
      );
      const left = [
        ...live,
        ...descendantsOf(
          list,
          live.map((g) => g.pid),
        ),
      ].filter((p) => !isGone(p));
      if (left.length === 0 || clock.now() >= until) return left;
      await sleep(clock, Math.min(100, until - clock.now()));
    }
  }

  /** A member with a recognised guard: a supervisor host that can stop its own runs. */
  hasGuard(member: ProcessInfo): boolean {
    return this.hosts.has(key(member));
  }
}

/**
 * Whether `g` is `host`'s guard, by four things only procwarden's own start of it gives together:
 * its parent is `host`; its command line is the guard's (`sh -c GUARD_SCRIPT procwarden-guard NODE
 * REAPER HOST_PID HOST_START|-`) naming `host` by pid (and start time, where it gives one); it
 * leads its own session (spawned detached); and its stdin is the host's socket pair (Node's
 * 'pipe'), or a pipe `host` holds too. A process that merely names itself a guard is a member like any
 * other. A table that cannot show command lines and descriptors (ps on macOS and the BSDs, the
 * Windows tables) recognises none: no /proc, no guard spared.
 */
export function isGuardOf(table: ProcessTable, g: ProcessInfo, host: ProcessInfo): boolean {
  if (!table.argv || !table.fdLink || !table.holdsOpen) return false;
  if (g.ppid !== host.pid || g.sid !== g.pid) return false;
  const argv = table.argv(g.pid);
  if (argv?.length !== 8) return false;
  const [shell, c, script, name, , , hostPid, hostStart] = argv;
  if (
    !shell?.endsWith('/sh') ||
    c !== '-c' ||
    script !== GUARD_SCRIPT ||
    name !== GUARD_NAME ||
    hostPid !== String(host.pid) ||
    (hostStart !== '-' && hostStart !== host.startTime)
  ) {
    return false;
  }
  const stdin = table.fdLink(g.pid, 0);
  if (stdin === null) return false;
  // Node's stdio pipes are socket pairs, and /proc does not say which socket is another's peer
  // (only sock_diag does): a socket stdin is taken as it is. Not a hole of its own: a member that
  // disguises itself as the guard of a host must be that host's child, so a run's root, which
  // that host's real guard ends from the run's record once the host is gone.
  if (/^socket:\[\d+\]$/.test(stdin)) return true;
  return /^pipe:\[\d+\]$/.test(stdin) && table.holdsOpen(host.pid, stdin);
}

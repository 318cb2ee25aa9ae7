import { type Clock, sleep } from '../clock.js';
import { signalNumber } from '../options/index.js';
import { type ProcessInfo, type ProcessTable, parentsFirst, stillAlive } from '../tree/index.js';
import type { MemberReport, TerminateReport } from '../types.js';

/** What a termination sequence acts on: a containment, or an arbitrary existing tree. */
export interface KillTarget {
  /**
   * A fresh scan: every live member of the tree now, with its identity. With `stopOnSight`, a
   * target that finds members by reading each process (the cookie) sends SIGSTOP to each the
   * moment it is read, not after the scan: the only way to catch a process that re-forks faster
   * than a scan completes.
   */
  members(scan?: MemberScan): Promise<Members>;
  /**
   * Delivers `signal` to all of `members` at once; returns those it reached. With `only`, to them
   * and nobody else: no group signal that would also reach their group's other members.
   */
  signal(signal: NodeJS.Signals, members: ProcessInfo[], only?: boolean): Promise<ProcessInfo[]>;
  /** Notes gathered while signalling (refusals, EPERM). */
  readonly notes?: readonly string[];
  /**
   * Members that get the SIGKILL bound (killTimeoutMs) more, once the grace is over, to exit by
   * themselves, while the rest get SIGKILL at once: a process that ends processes of its own, in
   * its own time, and has a helper to finish that if it is killed (a supervisor host with its guard).
   */
  patient?(member: ProcessInfo): boolean;
}

export interface MemberScan {
  stopOnSight?: boolean;
}

/**
 * A scan's members. `unconfirmed` (why, in words): it found none, yet cannot rule out one it
 * missed. Processes vanished between the listing and their read faster than they could be chased,
 * which is what a member that re-forks under a new session without pause looks like to a scan
 * that does not stop what it reads. The sequence treats the tree as alive then, never as gone.
 */
export type Members = ProcessInfo[] & { readonly unconfirmed?: string };

/** An empty scan that cannot rule out a member it missed (see Members). */
export const unconfirmed = (why: string): Members => Object.assign([], { unconfirmed: why });

export interface TerminatePlan {
  signal: NodeJS.Signals;
  graceMs: number;
  clock: Clock;
  table: ProcessTable;
  /** Aborted: the grace ends at once, even mid-wait (kill() during a graceful sequence). */
  escalate?: AbortSignal;
  /** How long survivors of SIGKILL are chased before being reported as escaped. Default 3000 ms. */
  killTimeoutMs?: number;
  /**
   * A sequence taken over from a host that died while it ran (reap): members for which this is
   * true got the graceful signal from it, and get only the rest of the grace, not a second signal.
   */
  signalledBefore?: (member: ProcessInfo) => boolean;
  /**
   * A member that ignores `signal` (as the table reads it) gets this graceful signal instead, by
   * its pid, once no member that heeds `signal` is left. A signal passed on from a terminal
   * (Ctrl-C's SIGINT) is one a shell's background jobs ignore, and they would sit out the grace
   * until SIGKILL; but a parent that catches it may be ending its workers its own way, and a
   * second graceful signal would cut that short. Never SIGKILL: that is the grace's end.
   */
  insteadIfIgnored?: NodeJS.Signals;
  /** Called once the first signal has gone out, with the members it reached (not when there were none). */
  onSignalled?: (reached: readonly ProcessInfo[]) => void;
  /**
   * Called with a way to send another signal while the grace runs (timeout(1)'s timer running out
   * after a passed-on signal the command ignores), and with null when the grace is over: from then
   * on SIGKILL is under way and another signal has nothing to add. Each one goes to every member
   * alive at a fresh scan, identity-checked, and is in the report; the grace and SIGKILL stand.
   */
  onRepeatable?: (repeat: ((signal: NodeJS.Signals) => Promise<void>) | null) => void;
}

const MAX_POLL_MS = 25;
const MAX_LAUNCH_POLL_MS = 250;
const key = (p: ProcessInfo) => `${p.pid}@${p.startTime}`;

/**
 * The one termination sequence: graceful signal to every member at once, wait up to the grace
 * for the whole tree to be gone, SIGKILL the survivors only, confirm extinction.
 */
export async function terminate(target: KillTarget, plan: TerminatePlan): Promise<TerminateReport> {
  const { clock } = plan;
  const t0 = clock.now();
  const reports = new Map<string, MemberReport & { info: ProcessInfo }>();
  let killedAt: number | null = null;
  /** Gone before their SIGKILL at the bound, in a re-forking tree: they may have left a child. */
  let lost = 0;
  const notes: string[] = [];
  /**
   * Members whose latest signal did not reach them while they lived on: another user's process
   * or a set-uid program (EPERM), a Windows process taskkill could not ask. Not sticky: a later
   * signal that reaches one (a set-uid program that dropped its privileges) takes it out. The
   * grace does not wait for what is left of them alone: it was not asked to leave. SIGKILL is
   * still retried for its whole bound: a set-uid program may drop its privileges a moment later.
   */
  const refused = new Set<string>();

  const record = (members: ProcessInfo[], signal: NodeJS.Signals) => {
    const atMs = Math.round(clock.now() - t0);
    for (const m of members) {
      let r = reports.get(key(m));
      if (!r) {
        r = { pid: m.pid, command: m.command, signals: [], outcome: 'exited-in-grace', info: m };
        reports.set(key(m), r);
      }
      // A signal repeated to a member that outlives it (SIGKILL round after round to a process in
      // D state, or to a group that only zombies hold) is said once: the outcome tells the rest.
      if (r.signals.at(-1)?.signal !== signal) r.signals.push({ signal, atMs });
    }
  };
  const send = async (
    signal: NodeJS.Signals,
    members: ProcessInfo[],
    only?: boolean,
  ): Promise<ProcessInfo[]> => {
    if (members.length === 0) return [];
    const reached = await target.signal(signal, parentsFirst(members), only);
    record(reached, signal);
    // Listed, then gone (or refused) before its signal: still part of the report.
    const hit = new Set(reached.map(key));
    for (const m of reached) refused.delete(key(m));
    const missed = members.filter((m) => !hit.has(key(m)));
    if (missed.length > 0) for (const m of await aliveAmong(plan.table, missed, 0)) refused.add(key(m));
    for (const m of members) {
      if (hit.has(key(m)) || reports.has(key(m))) continue;
      reports.set(key(m), {
        pid: m.pid,
        command: m.command,
        signals: [],
        outcome: 'gone-before-signal',
        info: m,
      });
    }
    return reached;
  };
  /** Members that ignore the graceful signal, and those that heed it: see insteadIfIgnored. */
  const deferred = new Map<string, ProcessInfo>();
  let heeding: ProcessInfo[] = [];
  const substitute = async (signal: NodeJS.Signals): Promise<ProcessInfo[]> => {
    if (deferred.size === 0) return [];
    heeding = await aliveAmong(plan.table, heeding, 0);
    if (heeding.length > 0) return [];
    const due = [...deferred.values()];
    deferred.clear();
    // They may share a group with members that heed the signal: by pid, never to the group.
    return send(signal, due, true);
  };
  /** Members the graceful signal went (or is going) to: never twice (a second SIGTERM restarts a trap). */
  const claimed = new Set<string>();
  const graceful = async (found: ProcessInfo[]): Promise<ProcessInfo[]> => {
    const members = found.filter((m) => !claimed.has(key(m)));
    for (const m of members) claimed.add(key(m));
    const { heed, ignore } = byDisposition(plan, members);
    const reached = await send(plan.signal, heed);
    heeding.push(...reached);
    for (const m of ignore.members) deferred.set(key(m), m);
    // A script's background jobs go at once when the script died of the signal: on a later poll.
    reached.push(...(await substitute(ignore.signal)));
    // A stopped member cannot act on SIGTERM until it is continued.
    if (
      plan.signal !== 'SIGKILL' &&
      plan.signal !== 'SIGCONT' &&
      members.some((m) => m.state === 'T' || m.state === 't')
    ) {
      await target.signal('SIGCONT', members);
    }
    return reached;
  };

  let members: Members = await target.members();
  // The grace is what the tree gets after the graceful signal: it counts from the delivery, not
  // from the scan before it (slow on a loaded machine).
  let graceFrom = t0;
  // An unconfirmed empty scan is no proof that the tree is gone: it gets the whole sequence, whose
  // later scans give the graceful signal to whatever they find.
  if (members.length > 0 || members.unconfirmed) {
    const before = plan.signal === 'SIGKILL' ? undefined : plan.signalledBefore;
    const reached = await graceful(before ? members.filter((m) => !before(m)) : members);
    // Signalled by the host that started the sequence: waited for in the grace like the rest.
    if (before)
      for (const m of members.filter(before)) {
        if (!reports.has(key(m)))
          reports.set(key(m), {
            pid: m.pid,
            command: m.command,
            signals: [],
            outcome: 'exited-in-grace',
            info: m,
          });
      }
    if (members.length > 0) plan.onSignalled?.(reached);
    graceFrom = clock.now();
    if (plan.signal !== 'SIGKILL') {
      let repeatable = true;
      plan.onRepeatable?.(async (signal) => {
        const now = await target.members();
        // The grace ended during the scan: SIGKILL is under way (and may have stopped the tree).
        if (!repeatable) return;
        // Forked since the last look: the graceful signal first, as the grace's own polls give it.
        await graceful(now.filter((m) => !reports.has(key(m))));
        await send(signal, now);
      });
      try {
        members = await waitForGrace(target, plan, reports, graceful, graceFrom, refused);
      } finally {
        repeatable = false;
        plan.onRepeatable?.(null);
      }
    }
    if (members.length > 0 || members.unconfirmed) {
      killedAt = clock.now();
      // kill(): the first signal was the SIGKILL; a second round before looking again only costs time.
      const kill =
        plan.signal === 'SIGKILL'
          ? await killUntilGone(target, plan, members, send, true)
          : await killPatientLast(target, plan, members, send);
      members = kill.left;
      // None found at the end, and none ruled out: one is counted, never a false "none escaped".
      lost = kill.lost + (kill.unconfirmed ? 1 : 0);
      const unreached = members.filter((m) => refused.has(key(m)));
      if (unreached.length > 0) {
        notes.push(
          `${unreached.length} process(es) could not be signalled (not permitted: another user's process or a set-uid program; run as its owner or root), pid ${unreached
            .slice(0, 10)
            .map((m) => m.pid)
            .join(', ')}${unreached.length > 10 ? ', …' : ''}; counted as escaped`,
        );
      }
      const survivors = members.length - unreached.length;
      if (survivors > 0) {
        notes.push(
          kill.reforking
            ? `${survivors} process(es) kept forking under new sessions faster than they could be stopped; counted as escaped`
            : `${survivors} process(es) still alive after SIGKILL for ${plan.killTimeoutMs ?? 3000} ms (uninterruptible, or re-forking faster than the tree could be read); counted as escaped`,
        );
      }
      if (kill.unconfirmed) {
        notes.push(
          `${kill.unconfirmed} when the ${plan.killTimeoutMs ?? 3000} ms bound ran out: that nothing of the tree is left could not be confirmed; counted as escaped`,
        );
      }
      if (kill.lost > 0) {
        notes.push(
          `${kill.lost} process(es) of a tree that kept forking under new sessions were gone before their SIGKILL when the ${plan.killTimeoutMs ?? 3000} ms bound ran out: what they forked last could not be looked for; counted as escaped`,
        );
      }
    }
  }

  for (const r of reports.values()) if (r.signals.some((s) => s.signal === 'SIGKILL')) r.outcome = 'killed';
  for (const m of members) {
    const r = reports.get(key(m));
    if (r) r.outcome = 'escaped';
  }
  const list = [...reports.values()].map(({ info: _info, ...r }) => r);
  // A SIGKILL stage that only looked (an unconfirmed scan, then none found) needed no SIGKILL; one
  // that counts an escapee did, whether or not its SIGKILL could reach it.
  const escaped = members.length + lost;
  const escalated = killedAt !== null && (escaped > 0 || list.some((r) => r.outcome === 'killed'));
  return {
    members: list,
    signalled: list.filter((r) => r.signals.length > 0).length,
    killed: list.filter((r) => r.outcome === 'killed').length,
    escaped,
    escalated,
    durationMs: Math.round(clock.now() - t0),
    graceUsedMs: escalated && killedAt !== null ? Math.round(killedAt - graceFrom) : null,
    notes: [...(target.notes ?? []), ...notes],
  };
}

/** Splits `members` by whether they ignore the plan's graceful signal (see insteadIfIgnored). */
function byDisposition(
  plan: TerminatePlan,
  members: ProcessInfo[],
): { heed: ProcessInfo[]; ignore: { signal: NodeJS.Signals; members: ProcessInfo[] } } {
  const instead = plan.insteadIfIgnored;
  const number = signalNumber(plan.signal);
  if (
    !instead ||
    instead === plan.signal ||
    instead === 'SIGKILL' ||
    plan.signal === 'SIGKILL' ||
    !plan.table.ignores ||
    number === 0
  ) {
    return { heed: members, ignore: { signal: plan.signal, members: [] } };
  }
  const ignores = plan.table.ignores.bind(plan.table);
  const heed: ProcessInfo[] = [];
  const ignoring: ProcessInfo[] = [];
  for (const m of members) (ignores(m.pid, number) === true ? ignoring : heed).push(m);
  return { heed, ignore: { signal: instead, members: ignoring } };
}

/**
 * Poll pacing: a fraction of the time waited so far. A tree that takes t ms to die is seen gone
 * at about 1.15 t (doubling delays could report it at up to 2 t), and a long grace still costs few
 * reads. Where every read is a process launch (ps), polls are spaced up to MAX_LAUNCH_POLL_MS: a
 * tree that ignores the signal for a 10 s grace cost 167 `ps` launches at 25 ms, back to back.
 */
const pace = (elapsedMs: number, table: ProcessTable) =>
  Math.min(table.batchesReads ? MAX_LAUNCH_POLL_MS : MAX_POLL_MS, Math.max(1, elapsedMs / 8));

/** Polls the signalled members (cheap per-pid reads) until the grace ends; a full scan confirms extinction. */
async function waitForGrace(
  target: KillTarget,
  plan: TerminatePlan,
  reports: Map<string, { info: ProcessInfo }>,
  graceful: (m: ProcessInfo[]) => Promise<unknown>,
  t0: number,
  refused: ReadonlySet<string>,
): Promise<Members> {
  const deadline = t0 + plan.graceMs;
  let from = 0;
  for (;;) {
    // Reports only grow, at the end: the members before `from` were seen gone and stay gone.
    const known = [...reports.values()].map((r) => r.info);
    from = await firstAlive(plan.table, known, from);
    // Alive, but no signal of ours reached it: not waited for (it is read again at every poll).
    let waitedFor = from;
    while (waitedFor < known.length && refused.has(key(known[waitedFor] as ProcessInfo))) {
      waitedFor = await firstAlive(plan.table, known, waitedFor + 1);
    }
    let alive: Members | null = null;
    if (waitedFor === known.length) {
      alive = await target.members();
      if (!alive.unconfirmed && alive.every((m) => refused.has(key(m)))) return alive;
      // Forked after the first signal: they are members too and get the same graceful signal.
      const unseen = alive.filter((m) => !reports.has(key(m)));
      if (unseen.length > 0) await graceful(unseen);
    }
    const now = plan.clock.now();
    // SIGKILL goes out on time to the known members still alive (per-pid reads); a full scan
    // here would delay it by a whole /proc sweep. killUntilGone's scans find any others.
    if (now >= deadline || plan.escalate?.aborted) {
      if (alive) return alive;
      // The last known member may have died since its read, forking first: then a scan decides.
      const left = await aliveAmong(plan.table, known, from);
      return left.length > 0 ? left : target.members();
    }
    await sleep(plan.clock, Math.min(pace(now - t0, plan.table), deadline - now), plan.escalate);
  }
}

/**
 * SIGKILL until nothing is left (Bazel's process-wrapper does the same), within a bound. When a
 * scan after a SIGKILL shows processes born since (a member forking in a loop, or one that re-forks
 * under a new session on every signal, a "pid-hopper"), every member is first stopped (SIGSTOP
 * cannot be caught) and the tree rescanned until no new one appears: stopped processes cannot fork
 * while the rest are being found. The freeze only comes after a first SIGKILL, so the graceful
 * signal is never preceded by a stop and a quiet tree pays nothing for it.
 */
async function killUntilGone(
  target: KillTarget,
  plan: TerminatePlan,
  first: Members,
  send: (signal: NodeJS.Signals, m: ProcessInfo[]) => Promise<ProcessInfo[]>,
  firstSent: boolean,
): Promise<{ left: ProcessInfo[]; reforking: boolean; lost: number; unconfirmed?: string }> {
  const start = plan.clock.now();
  const giveUpAt = start + (plan.killTimeoutMs ?? 3000);
  const killed = new Set<string>();
  let reforking = false;
  let lost = 0;
  let members: Members = first;
  let rounds = 0;
  // Once the tree re-forks, every scan stops what it finds as it reads it (see KillTarget.members).
  const scan = () => target.members(reforking ? { stopOnSight: true } : undefined);
  while (members.length > 0 || members.unconfirmed) {
    // A tree whose processes vanish faster than a scan reads them is re-forking: from now on the
    // scans stop what they read, which a process that hops without pause can rarely outrun.
    if (members.unconfirmed) reforking = true;
    if (killed.size > 0 && members.some((m) => !killed.has(key(m)))) {
      reforking = true;
      members = await freeze(target, plan, members, (m) => send('SIGSTOP', m), giveUpAt, killed);
    }
    if (!firstSent) await send('SIGKILL', members);
    firstSent = false;
    for (const m of members) killed.add(key(m));
    // Wait on the killed members by pid; a full scan (which also finds late forks) at least
    // every MAX_POLL_MS, and once they are all gone. Where a read by pid costs a launch, as a
    // scan does (ps), the scan comes at once: it takes longer to start than a SIGKILL to land, and
    // one it finds alive is killed again.
    if (members.length > 0 && !plan.table.batchesReads) {
      await untilGone(plan, members, Math.min(plan.clock.now() + MAX_POLL_MS, giveUpAt), start);
    } else if (members.length === 0 || rounds++ > 0) {
      // Found alive by the last scan, or none to wait on (an unconfirmed empty scan): paced as
      // untilGone paces its reads, never scan after scan with nothing in between.
      const now = plan.clock.now();
      await sleep(plan.clock, Math.max(0, Math.min(pace(now - start, plan.table), giveUpAt - now)));
    }
    members = await scan();
    // A re-forking tree seen empty once may only have been between two generations: a second
    // scan that also stops what it reads must agree.
    if (members.length === 0 && reforking) members = await scan();
    if (plan.clock.now() >= giveUpAt) {
      // Out of time. What this scan saw for the first time (on a loaded host one scan can take
      // most of the bound) was never sent a SIGKILL: it gets one, and only what outlives it, or
      // what outlived an earlier one, is left. No new scan: the bound is spent.
      const fresh = members.filter((m) => !killed.has(key(m)));
      if (fresh.length > 0) {
        const reached = new Set((await send('SIGKILL', fresh)).map(key));
        await untilGone(plan, fresh, plan.clock.now() + MAX_POLL_MS, start);
        members = await aliveAmong(plan.table, members, 0);
        // One that died of its SIGKILL forked nothing after it; one that was gone already (or
        // ignored a stop) may have forked its successor, and the bound leaves no scan to find it.
        if (reforking) lost = fresh.filter((m) => !reached.has(key(m))).length;
      }
      if (members.unconfirmed) return { left: [], reforking, lost, unconfirmed: members.unconfirmed };
      break;
    }
  }
  return { left: members, reforking, lost };
}

type KillOutcome = Awaited<ReturnType<typeof killUntilGone>>;

/**
 * killUntilGone, except for the patient members (see KillTarget.patient): the others get SIGKILL
 * at once, the patient ones the SIGKILL bound to exit by themselves, then SIGKILL with the rest of
 * whatever is left.
 */
async function killPatientLast(
  target: KillTarget,
  plan: TerminatePlan,
  members: Members,
  send: (signal: NodeJS.Signals, m: ProcessInfo[]) => Promise<ProcessInfo[]>,
): Promise<KillOutcome> {
  const isPatient = target.patient?.bind(target);
  const patient = isPatient ? members.filter(isPatient) : [];
  if (!isPatient || patient.length === 0) return killUntilGone(target, plan, members, send, false);
  const until = plan.clock.now() + (plan.killTimeoutMs ?? 3000);
  const impatient: KillTarget = {
    members: async (scan) => {
      const all = await target.members(scan);
      return Object.assign(
        all.filter((m) => !isPatient(m)),
        all.unconfirmed ? { unconfirmed: all.unconfirmed } : {},
      );
    },
    signal: (signal, m, only) => target.signal(signal, m, only),
  };
  const first = await killUntilGone(
    impatient,
    plan,
    members.filter((m) => !isPatient(m)),
    send,
    false,
  );
  await untilGone(plan, patient, until, plan.clock.now());
  // Whatever is left now, the patient ones included: SIGKILL, with a bound of its own.
  const last = await killUntilGone(target, plan, await target.members(), send, false);
  return {
    left: last.left,
    reforking: first.reforking || last.reforking,
    lost: first.lost + last.lost,
    unconfirmed: last.unconfirmed,
  };
}

/** Polls `members` by pid until all are gone or `until` passes. */
async function untilGone(
  plan: TerminatePlan,
  members: ProcessInfo[],
  until: number,
  start: number,
): Promise<void> {
  let from = 0;
  for (;;) {
    from = await firstAlive(plan.table, members, from);
    const now = plan.clock.now();
    if (from === members.length || now >= until) return;
    await sleep(plan.clock, Math.min(pace(now - start, plan.table), until - now));
  }
}

/** Rounds of stop-and-rescan before the stopped members are killed anyway. */
const FREEZE_ROUNDS = 20;

/** Stops every member, rescanning until a scan finds no one new; returns the members then. */
async function freeze(
  target: KillTarget,
  plan: TerminatePlan,
  members: ProcessInfo[],
  stop: (m: ProcessInfo[]) => Promise<unknown>,
  giveUpAt: number,
  killed: ReadonlySet<string>,
): Promise<Members> {
  // A process with a SIGKILL pending can no longer fork: stopping it too only clutters the report.
  const stopped = new Set<string>(killed);
  let now = members;
  for (let round = 0; round < FREEZE_ROUNDS && plan.clock.now() < giveUpAt; round++) {
    const fresh = now.filter((m) => !stopped.has(key(m)));
    if (fresh.length === 0) break;
    await stop(fresh);
    for (const m of fresh) stopped.add(key(m));
    now = await target.members({ stopOnSight: true });
  }
  return now;
}

/** The members from `from` on that are still alive (same identity, not a zombie). */
async function aliveAmong(table: ProcessTable, members: ProcessInfo[], from: number): Promise<ProcessInfo[]> {
  if (table.batchesReads) {
    const rest = members.slice(from);
    const fresh = await readAll(table, rest);
    return rest.filter((m, k) => stillAlive(fresh[k], m));
  }
  const out: ProcessInfo[] = [];
  for (
    let i = await firstAlive(table, members, from);
    i < members.length;
    i = await firstAlive(table, members, i + 1)
  ) {
    out.push(members[i] as ProcessInfo);
  }
  return out;
}

/**
 * Index of the first member still alive at or after `from`; `members.length` when none is. procfs
 * reads in windows of 1, 2, 4… members at once, and stops at the first live one, having read at
 * most twice as many as it needed. A table whose reads of one turn cost one launch (ps) reads all
 * of them in one window: 10 members dying in order took it 4 `ps` calls in windows.
 */
async function firstAlive(table: ProcessTable, members: ProcessInfo[], from: number): Promise<number> {
  for (
    let i = from, width = table.batchesReads ? members.length : 1;
    i < members.length;
    i += width, width *= 2
  ) {
    const window = members.slice(i, i + width);
    const fresh = await readAll(table, window);
    const alive = window.findIndex((m, k) => stillAlive(fresh[k], m));
    if (alive >= 0) return i + alive;
  }
  return members.length;
}

/**
 * Fresh reads of `members`, issued together (one turn: one call on a table that batches). A table
 * that cannot answer proves nothing gone: the member counts as alive, and the target's own scans
 * (which report why) decide.
 */
const readAll = (table: ProcessTable, members: ProcessInfo[]) =>
  Promise.all(members.map((m) => table.get(m.pid).catch(() => m)));

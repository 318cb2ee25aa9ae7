import { existsSync, mkdirSync, readdirSync, readFileSync, rmdirSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { Supervisor } from '../src/index.js';
import type { SendSignal } from '../src/kill/index.js';
import { ProcfsTable } from '../src/tree/index.js';
import { type MemberKind, type MemberStart, type TreeNode, writeTree } from './fixtures/tree.mjs';
import { cgroupSkipReason, hostCgroups, parentCgroup, sweepCgroups } from './helpers/cgroups.js';
import { journalFiles, startHost } from './helpers/host.js';
import { alive, makeTmp, readPids, waitFor } from './helpers/procs.js';

/**
 * The zero-survivor proof: random process trees (depth <= 4, width <= 5) mixing every way a process
 * can try to outlive its run (a pid-hopper included), ended by a random trigger in each containment
 * mode (in cgroup mode also a cgroup tampered with by its members). Two properties: nothing of the
 * tree is alive when `result` resolves (env -i escapees are only required to die in cgroup mode,
 * and not when the cgroup was tampered with), and no signal ever reaches a process outside the tree (every signal procwarden
 * sends goes through a recorder that checks its target, and each member of a target group, first).
 *
 * PROCWARDEN_FUZZ_RUNS=N runs N trees (default 200); PROCWARDEN_FUZZ_SEED=S replays a sequence
 * (tree i uses seed S + i, so a failing tree replays alone with its own seed and RUNS=1).
 */
const RUNS = Number(process.env.PROCWARDEN_FUZZ_RUNS ?? 200);
const SEED = Number(process.env.PROCWARDEN_FUZZ_SEED ?? Math.floor(Math.random() * 2 ** 31));
const CONCURRENCY = 6;
const MAX_MEMBERS = 8;
const cgroupSkip = cgroupSkipReason();
const MODES: Array<'cgroup' | 'process-group' | 'none'> =
  cgroupSkip === null ? ['cgroup', 'process-group', 'none'] : ['process-group', 'none'];
/**
 * 'tamper' (cgroup mode): a member is moved out of the run's cgroup, or all are and the cgroup is
 * removed; then cancel. 'host-dies': the host process is SIGKILLed and its watchdog must end the tree.
 */
type Trigger = 'timeout' | 'cancel' | 'abort' | 'exit' | 'tamper' | 'host-dies';
const TRIGGERS: Trigger[] =
  cgroupSkip === null
    ? ['timeout', 'cancel', 'abort', 'exit', 'tamper']
    : ['timeout', 'cancel', 'abort', 'exit'];

/** mulberry32: small, fast, and the same on every machine. */
function prng(seed: number) {
  let a = seed >>> 0;
  const next = () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const int = (lo: number, hi: number) => lo + Math.floor(next() * (hi - lo + 1));
  const pick = <T>(items: readonly T[]): T => items[int(0, items.length - 1)] as T;
  return { next, int, pick };
}

interface Case {
  seed: number;
  mode: (typeof MODES)[number];
  trigger: Trigger;
  graceMs: number;
  timeoutMs: number;
  /** cancel/abort: wait for the whole tree first, then this many ms; or fire this many ms after spawn. */
  waitForTree: boolean;
  delayMs: number;
  /** tamper: move one member into the supervisor's parent cgroup, or empty the run cgroup elsewhere and remove it. */
  tamper: 'out' | 'away';
  root: TreeNode;
}

const STARTS: MemberStart[] = ['child', 'child', 'setsid', 'doublefork', 'envi'];
const KINDS: MemberKind[] = ['plain', 'trapper', 'trapper', 'ignorer', 'stopped', 'forker', 'hopper'];

function generate(seed: number): Case {
  const rng = prng(seed);
  // The host's death costs two Node processes (host, watchdog): one case in ten.
  const trigger = rng.next() < 0.1 ? 'host-dies' : rng.pick(TRIGGERS);
  const mode = trigger === 'tamper' ? 'cgroup' : rng.pick(MODES);
  // A pid-hopper is held only where its forks cannot leave what is killed at once: an untouched
  // cgroup. Elsewhere procwarden may only count it as escaped (test/edges.test.ts checks that).
  const kinds = mode === 'cgroup' && trigger !== 'tamper' ? KINDS : KINDS.filter((k) => k !== 'hopper');
  let budget = rng.int(1, MAX_MEMBERS);
  let n = 0;
  const node = (depth: number, start: MemberStart, kind: MemberKind): TreeNode => {
    budget--;
    const self: TreeNode = { id: `n${n++}`, start, kind, children: [] };
    if (kind === 'exits') self.exitAfter = rng.int(5, 30) / 100;
    const width = depth < 4 ? Math.min(rng.int(0, 5), budget) : 0;
    for (let i = 0; i < width && budget > 0; i++) {
      self.children.push(node(depth + 1, rng.pick(STARTS), rng.pick(kinds)));
    }
    return self;
  };
  const root = node(1, 'child', trigger === 'exit' ? 'exits' : rng.pick(kinds));
  return {
    seed,
    mode,
    trigger,
    graceMs: rng.int(50, 250),
    timeoutMs: rng.int(20, 300),
    waitForTree: rng.next() < 0.7,
    delayMs: rng.int(0, 150),
    tamper: rng.pick(['out', 'away'] as const),
    root,
  };
}

const flatten = (n: TreeNode): TreeNode[] => [n, ...n.children.flatMap(flatten)];

function environ(pid: number): Buffer | null {
  try {
    return readFileSync(`/proc/${pid}/environ`);
  } catch {
    return null;
  }
}

/**
 * A process between two execs shows an empty environment for a moment (the kernel has dropped the
 * old image and not yet set up the new one), as procwarden's sweep knows: read again until it has
 * one, for up to 100 ms, before judging it by the fallbacks (a fork re-parented at once, caught in
 * its exec, was reported as outside the tree).
 */
function settledEnviron(pid: number): Buffer | null {
  const pause = new Int32Array(new SharedArrayBuffer(4));
  let env = environ(pid);
  const settling = () => {
    const st = stat(pid);
    return st !== null && st.state !== 'Z' && !st.exiting;
  };
  for (let i = 0; i < 20 && env !== null && env.length === 0 && settling(); i++) {
    Atomics.wait(pause, 0, 0, 5);
    env = environ(pid);
  }
  return env;
}

function stat(
  pid: number,
): { state: string; ppid: number; pgid: number; sid: number; start: string; exiting: boolean } | null {
  try {
    const s = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const f = s.slice(s.lastIndexOf(')') + 2).split(' ');
    return {
      state: f[0] ?? '?',
      ppid: Number(f[1]),
      pgid: Number(f[2]),
      sid: Number(f[3]),
      start: f[19] ?? '',
      // PF_EXITING in the flags (field 9): on its way out, its environment already released.
      exiting: (Number(f[6]) & 0x4) !== 0,
    };
  } catch {
    return null;
  }
}

function cgroupOf(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/cgroup`, 'utf8');
  } catch {
    return '';
  }
}

const pids = () =>
  readdirSync('/proc')
    .filter((e) => /^\d+$/.test(e))
    .map(Number);

/**
 * Live processes of this tree (by the marker every member carries), with whether they cleared their
 * env. The pids come from a plain listing and from procwarden's chasing sweep: one listing misses a
 * process that re-forks faster than it is read (a hopper).
 */
async function treeProcesses(dir: string): Promise<{ pid: number; envi: boolean }[]> {
  const marker = Buffer.from(`PW_FUZZ_TREE=${dir}\0`);
  const out: { pid: number; envi: boolean }[] = [];
  const chased = await new ProcfsTable().sweep({ name: 'PW_FUZZ_TREE', value: dir });
  for (const pid of new Set([...pids(), ...chased.holders])) {
    if (pid === process.pid) continue;
    const env = environ(pid);
    const st = stat(pid);
    if (!env || !st || st.state === 'Z' || st.state === 'X' || !env.includes(marker)) continue;
    out.push({ pid, envi: env.includes(Buffer.from('PW_FUZZ_ENVI=1\0')) });
  }
  return out;
}

/**
 * The recording `send`: before any signal leaves, every process it would reach must carry this
 * tree's marker. A process that is exiting (or a zombie) shows an empty environment; it passes when
 * the same identity (pid + start time) was verified before, its parent carries the marker, it is in
 * the run's cgroup, or its session or group was founded by the run's root or a verified member (a
 * session or group number cannot be recycled while the group has members). A target outside the tree is recorded as
 * a violation and never signalled.
 */
function recorder(
  dir: string,
  violations: string[],
  stats: { sent: number; groups: number },
  run: () => { id: string; pid: number | undefined } | undefined = () => undefined,
): SendSignal {
  const marker = Buffer.from(`PW_FUZZ_TREE=${dir}\0`);
  const verified = new Map<number, string>();
  const founders = new Set<number>();
  const ours = (pid: number): boolean => {
    const env = settledEnviron(pid);
    const st = stat(pid);
    // No such process, or a zombie (its pid stays taken until reaped): the signal reaches nobody.
    if (!st || st.state === 'Z' || (st.exiting && !env?.length)) return true;
    if (env?.includes(marker)) {
      verified.set(pid, st.start);
      if (st.sid === pid || st.pgid === pid) founders.add(pid);
      return true;
    }
    if (env && env.length > 0) return false;
    const r = run();
    return (
      verified.get(pid) === st.start ||
      environ(st.ppid)?.includes(marker) === true ||
      (r !== undefined && cgroupOf(pid).includes(`/${r.id}\n`)) ||
      founders.has(st.sid) ||
      founders.has(st.pgid) ||
      (r?.pid !== undefined && (st.sid === r.pid || st.pgid === r.pid))
    );
  };
  return (target, signal) => {
    const reached = target > 0 ? [target] : pids().filter((p) => stat(p)?.pgid === -target);
    const outside = reached.filter((p) => !ours(p));
    if (outside.length > 0) {
      violations.push(`${signal} to ${target} would reach pids outside the tree: ${outside.join(', ')}`);
      return;
    }
    stats.sent++;
    if (target < 0) stats.groups++;
    process.kill(target, signal);
  };
}

/**
 * The host (test/fixtures/host-tree.mjs) is SIGKILLed at a random moment after its spawn; its
 * watchdog must end the tree. The recorder cannot follow signals into that process: this trigger
 * checks survivors only.
 */
async function hostDies(c: Case, dir: string, script: string): Promise<string[]> {
  const host = startHost('host-tree.mjs', [script, dir, c.mode, String(c.graceMs)], {
    PROCWARDEN_STATE_DIR: join(dir, 'state'),
  });
  const watchdog = Number(await host.line('spawned'));
  if (c.waitForTree) await treeBuilt(dir, c.root);
  await new Promise((r) => setTimeout(r, c.delayMs));
  host.child.kill('SIGKILL');
  const survivors = async () => (await treeProcesses(dir)).filter((p) => c.mode === 'cgroup' || !p.envi);
  // Until the tree and the watchdog are gone, or the bound passes (what is left is then reported).
  const until = Date.now() + c.graceMs + 20_000;
  let left = await survivors();
  while ((left.length > 0 || alive(watchdog)) && Date.now() < until) {
    await new Promise((r) => setTimeout(r, 50));
    left = await survivors();
  }
  const problems = left.map((p) => `survivor ${p.pid} after the host died`);
  if (alive(watchdog)) problems.push(`watchdog ${watchdog} still alive`);
  const records = journalFiles(join(dir, 'state'));
  if (records.length > 0) problems.push(`journal not emptied: ${records.join(', ')}`);
  const cgroups = await hostCgroups(host.child.pid as number);
  if (cgroups.length > 0) problems.push(`cgroups left: ${cgroups.join(', ')}`);
  for (const p of [...(await treeProcesses(dir)).map((t) => t.pid), ...(alive(watchdog) ? [watchdog] : [])]) {
    try {
      process.kill(p, 'SIGKILL'); // ours by marker (or the watchdog by pid): a failure leaks nothing
    } catch {
      // gone meanwhile
    }
  }
  return problems;
}

async function runCase(c: Case, stats: { sent: number; groups: number }): Promise<string[]> {
  const dir = makeTmp('pw-fuzz-');
  const problems: string[] = [];
  let scratch: string | null = null;
  try {
    const script = writeTree(dir, c.root);
    if (c.trigger === 'host-dies') {
      problems.push(...(await hostDies(c, dir, script)));
      return problems;
    }
    let run: { id: string; pid: number | undefined } | undefined;
    const sup = new Supervisor({ send: recorder(dir, problems, stats, () => run) });
    const controller = new AbortController();
    const handle = sup.spawn({
      argv: ['/bin/sh', script],
      env: { PW_FUZZ_TREE: dir },
      containment: c.mode,
      graceMs: c.graceMs,
      drainMs: 100,
      leftovers: 'kill',
      ...(c.trigger === 'timeout' ? { timeoutMs: c.timeoutMs } : {}),
      signal: controller.signal,
    });
    run = { id: handle.id, pid: handle.pid };
    if (c.trigger === 'cancel' || c.trigger === 'abort' || c.trigger === 'tamper') {
      if (c.waitForTree || c.trigger === 'tamper') await treeBuilt(dir, c.root);
      await new Promise((r) => setTimeout(r, c.delayMs));
      if (c.trigger === 'tamper')
        scratch = tamper(c, dir, (handle as unknown as { cgroupPath: string }).cgroupPath);
      if (c.trigger === 'abort') controller.abort();
      else handle.cancel('fuzz');
    }
    const result = await handle.result;
    const expected =
      c.trigger === 'exit'
        ? ['exit', 'signal']
        : [
            c.trigger === 'timeout'
              ? 'overall-timeout'
              : c.trigger === 'cancel' || c.trigger === 'tamper'
                ? 'cancelled'
                : 'aborted',
          ];
    // A root that dies early (SIGHUP of an orphaned stopped group...) ends the run before the trigger.
    if (!expected.includes(result.reason) && !['exit', 'signal'].includes(result.reason)) {
      problems.push(`unexpected reason ${result.reason}`);
    }
    if (result.containment !== c.mode) problems.push(`containment ${result.containment}, asked ${c.mode}`);
    const left = await treeProcesses(dir);
    // An env -i escapee taken out of a tampered cgroup before procwarden looked has no tie left to
    // the run (no cookie, re-parented): only the cgroup held it.
    const survivors = left.filter((p) => (c.mode === 'cgroup' && c.trigger !== 'tamper') || !p.envi);
    if (survivors.length > 0) {
      const names = [...readPids(dir)]
        .filter(([, pid]) => survivors.some((s) => s.pid === pid))
        .map(([n]) => n);
      const about = survivors.map((s) => {
        const st = stat(s.pid);
        let cmd = '';
        try {
          cmd = readFileSync(`/proc/${s.pid}/cmdline`, 'utf8').replaceAll('\0', ' ').trim();
        } catch {
          // gone
        }
        return `${s.pid} [${cmd}] state=${st?.state} ppid=${st?.ppid} pgid=${st?.pgid} sid=${st?.sid}`;
      });
      problems.push(
        `survivors: ${about.join('; ')} (${names.join(', ') || 'unnamed'}) reason=${result.reason} escaped=${result.tree.escaped} notes=${JSON.stringify(result.notes)} report=${JSON.stringify(result.tree.report?.members.map((m) => [m.pid, m.command, m.outcome, m.signals.map((x) => `${x.signal}@${x.atMs}`).join(' ')]))}`,
      );
    }
    for (const p of left) {
      try {
        process.kill(p.pid, 'SIGKILL'); // ours by marker; env -i escapees outside cgroup mode end here
      } catch {
        // gone meanwhile
      }
    }
    if (c.mode === 'cgroup' && existsSync(join(parentCgroup() ?? '/nonexistent', handle.id))) {
      problems.push(`run cgroup ${handle.id} not removed`);
    }
  } finally {
    // Nothing of the tree may still write here once the checks passed: a writer now is a survivor
    // the scans missed (a hopper chain's heartbeat). Report it; the stop file then ends the chain.
    try {
      rmSync(dir, { recursive: true, force: true });
    } catch (error) {
      problems.push(
        `something still wrote into the tree's directory after the checks (${(error as NodeJS.ErrnoException).code})`,
      );
      try {
        writeFileSync(join(dir, 'stop'), '');
      } catch {
        // the directory is going
      }
      rmSync(dir, { recursive: true, force: true, maxRetries: 20, retryDelay: 50 });
    }
    if (scratch) await removeScratch(scratch);
  }
  return problems;
}

/**
 * Tampers with the run's cgroup as a root member could. Only pids listed in the run's own
 * cgroup.procs are moved (they are this tree's). Returns the scratch cgroup made, if any.
 */
function tamper(c: Case, dir: string, runCgroup: string): string | null {
  const procs = readFileSync(join(runCgroup, 'cgroup.procs'), 'utf8').split('\n').filter(Boolean);
  const move = (to: string, pid: string) => {
    try {
      writeFileSync(join(to, 'cgroup.procs'), pid);
    } catch {
      // exited meanwhile
    }
  };
  if (c.tamper === 'out') {
    const members = [...readPids(dir).values()].map(String).filter((p) => procs.includes(p));
    const pid = members[c.seed % Math.max(1, members.length)];
    if (pid) move(dirname(runCgroup), pid);
    return null;
  }
  const scratch = join(dirname(dirname(runCgroup)), `pw-fuzz-${process.pid}-${c.seed}`);
  mkdirSync(scratch);
  for (const pid of procs) move(scratch, pid);
  try {
    rmdirSync(runCgroup);
  } catch {
    // a member forked into it meanwhile: then it stays, tampered with all the same
  }
  return scratch;
}

async function removeScratch(dir: string): Promise<void> {
  try {
    writeFileSync(join(dir, 'cgroup.kill'), '1'); // only this tree's processes were moved there
  } catch {
    // gone
  }
  await waitFor(() => !/^populated 1$/m.test(readFileSync(join(dir, 'cgroup.events'), 'utf8')), {
    timeoutMs: 3000,
    what: 'scratch cgroup empty',
  }).catch(() => undefined);
  try {
    rmdirSync(dir);
  } catch {
    // reported by the run cgroup check of the next case, if ever
  }
}

/** Every member's pid file written and every stopped member stopped (bounded: slow machines go on). */
async function treeBuilt(dir: string, root: TreeNode): Promise<void> {
  const nodes = flatten(root);
  await waitFor(
    () => {
      const found = readPids(dir);
      return nodes.every((n) => {
        const pid = found.get(n.id);
        return pid !== undefined && (n.kind !== 'stopped' || stat(pid)?.state === 'T');
      });
    },
    { timeoutMs: 3000, what: 'tree built' },
  ).catch(() => undefined);
}

describe('zero survivors', () => {
  it('the recorder refuses (and never sends) a signal to a process outside the tree', () => {
    const violations: string[] = [];
    const stats = { sent: 0, groups: 0 };
    const send = recorder(makeTmp('pw-fuzz-'), violations, stats);
    send(process.pid, 'SIGCONT');
    send(-(stat(process.pid)?.pgid ?? 0), 'SIGCONT');
    expect(violations).toHaveLength(2);
    expect(violations[0]).toContain(`outside the tree: ${process.pid}`);
    expect(stats.sent).toBe(0);
  });

  it(
    `${RUNS} random trees in ${MODES.join(', ')} mode${cgroupSkip ? ` (cgroup mode skipped: ${cgroupSkip})` : ''}; seed ${SEED}`,
    async () => {
      const failures: string[] = [];
      const stats = { sent: 0, groups: 0 };
      const modes = new Map<string, number>();
      let next = 0;
      const worker = async () => {
        while (next < RUNS) {
          const c = generate(SEED + next++);
          modes.set(`${c.mode}/${c.trigger}`, (modes.get(`${c.mode}/${c.trigger}`) ?? 0) + 1);
          const problems = await runCase(c, stats);
          if (problems.length > 0) {
            failures.push(
              `seed ${c.seed} (replay: PROCWARDEN_FUZZ_SEED=${c.seed} PROCWARDEN_FUZZ_RUNS=1) mode=${c.mode} trigger=${c.trigger} grace=${c.graceMs}: ${problems.join('; ')}\n  tree: ${JSON.stringify(c.root)}`,
            );
          }
        }
      };
      try {
        await Promise.all(Array.from({ length: CONCURRENCY }, worker));
      } finally {
        await sweepCgroups();
      }
      expect(failures, `base seed ${SEED}`).toEqual([]);
      // The checks saw real traffic: signals by pid and, outside cgroup mode, to whole groups.
      // (Signals from a host's watchdog are not recorded: those cases do not count.)
      const hostCases = [...modes].reduce((n, [k, v]) => n + (k.endsWith('/host-dies') ? v : 0), 0);
      expect(stats.sent).toBeGreaterThanOrEqual(RUNS - hostCases);
      if (MODES.includes('process-group') && RUNS >= 20) expect(stats.groups).toBeGreaterThan(0);
      expect(modes.size).toBeGreaterThan(Math.min(RUNS, MODES.length * 4) / 2);
    },
    RUNS * 3000 + 60_000,
  );
});

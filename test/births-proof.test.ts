import { spawn } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { TreeMembership } from '../src/containment/index.js';
import { Guard } from '../src/kill/index.js';
import { Supervisor } from '../src/supervisor/index.js';
import {
  type EnvQuery,
  isGone,
  type ProcessInfo,
  type ProcessTable,
  ProcfsTable,
  type Sweep,
} from '../src/tree/index.js';
import type { ContainmentMode } from '../src/types.js';
import { cgroupSkipReason } from './helpers/cgroups.js';
import { alive, killEach, LeakGuard, makeTmp, readPids, waitFor } from './helpers/procs.js';

const cgroupSkip = cgroupSkipReason();

// A scan that saw every process it listed proves the tree while /proc/stat's count of births has
// not moved: the confirmation after a tree died, and the leftover check after a command that forked
// nothing, then cost per-pid reads instead of a sweep. These tests pin both halves: the sweeps it
// saves (with a scripted count, since a shared machine forks all the time), and that a real count
// (or one that never moves) is never fooled by a fork it did not see.

const leaks = new LeakGuard();
afterEach(() => leaks.check());

/** A procfs table whose birth count is `count()`, and which counts its full listings. */
function scriptedTable(count: () => number | null) {
  const inner = new ProcfsTable();
  let sweeps = 0;
  const table: ProcessTable & { sweeps(): number } = {
    name: 'procfs',
    sweeps: () => sweeps,
    list: () => {
      sweeps++;
      return inner.list();
    },
    get: (pid) => inner.get(pid),
    findByEnv: (name, value) => inner.findByEnv(name, value),
    sweep: async (query: EnvQuery): Promise<Sweep> => {
      sweeps++;
      const births = count(); // read before the listing, as procfs does
      // As on a quiet machine: on a shared one, a process of another test's vanishing mid-read, or
      // caught between two execs, would rightly keep this sweep from proving anything.
      return { ...(await inner.sweep(query)), births, vanished: 0, unsettled: 0 };
    },
    births: count,
  };
  return table;
}

// On SIGTERM the shell starts a sleeper in its own session through a subshell that exits at once:
// re-parented away and out of the group before anyone looks again, it is tied to the run by its
// cookie only, and only a sweep after the fork finds it. It was born after the scan that found
// the shell: the proof of that scan no longer holds.
const LATE = `trap '( setsid sleep 30 & echo $! > "$1/late.pid" ); exit 0' TERM; echo ready; while :; do sleep 0.05; done`;

async function cancelLateForker(sup: Supervisor, containment: ContainmentMode) {
  const dir = leaks.trackDir(makeTmp());
  let out = '';
  const handle = sup.spawn({
    argv: ['sh', '-c', LATE, 'sh', dir],
    containment,
    graceMs: 5000,
    env: { PW_DIR: dir },
    output: {
      onData: (text) => {
        out += text;
      },
    },
  });
  leaks.track(handle.pid);
  await waitFor(() => out.includes('ready'), { what: 'the trap script ready' });
  handle.cancel('test');
  const result = await handle.result;
  const late = await waitFor(() => readPids(dir).get('late'), { what: 'the late fork' });
  return { result, late };
}

describe('the birth count (/proc/stat processes)', () => {
  it('is read from <root>/stat, and never believed again once it went back', () => {
    const root = makeTmp();
    leaks.trackDir(root);
    const table = new ProcfsTable(root);
    expect(table.births()).toBeNull(); // no stat file
    writeFileSync(
      join(root, 'stat'),
      'cpu  1 2 3\nintr 5 0 0\nctxt 9\nbtime 1\nprocesses 1200\nprocs_running 1\n',
    );
    expect(table.births()).toBe(1200);
    writeFileSync(join(root, 'stat'), 'cpu  1 2 3\nprocesses 1250\n');
    expect(table.births()).toBe(1250);
    writeFileSync(join(root, 'stat'), 'cpu  1 2 3\nprocesses 1100\n');
    expect(table.births()).toBeNull();
    writeFileSync(join(root, 'stat'), 'cpu  1 2 3\nprocesses 1300\n');
    expect(table.births()).toBeNull();
    const garbled = new ProcfsTable(root);
    writeFileSync(join(root, 'stat'), 'cpu  1 2 3\nprocesses many\n');
    expect(garbled.births()).toBeNull();
    writeFileSync(join(root, 'stat'), 'cpu  1 2 3\nprocesses 1400\n');
    expect(garbled.births()).toBe(1400); // unreadable once is not a step back
    mkdirSync(join(root, 'empty'));
    expect(new ProcfsTable(join(root, 'empty')).births()).toBeNull();
  });

  it('this machine has a count, and a sweep reports the one it read before listing', () => {
    const table = new ProcfsTable();
    const before = table.births();
    expect(before).not.toBeNull();
    // Ours and younger: processes older than the first holder are not read (pid 1 may be unreadable).
    const self = table.getSync(process.pid);
    // A sweep that met a process whose environment it could not read (one exiting as it was
    // read, on a busy machine) rightly reports no count: such a sweep proves nothing. Try again.
    let births: number | null | undefined = null;
    for (let i = 0; i < 20 && births === null; i++) {
      const sweep = table.sweepManySync([{ name: 'PROCWARDEN_RUN', value: 'none', firstHolder: self }]);
      births = sweep[0]?.births;
    }
    expect(births).toBeGreaterThanOrEqual(before as number);
  });
});

describe('what a sweep proves', () => {
  it('nothing, when an environment it needed could not be read', () => {
    const root = leaks.trackDir(makeTmp());
    writeFileSync(join(root, 'stat'), 'cpu  1 2 3\nprocesses 900\n');
    const proc = (pid: number, withEnviron: boolean) => {
      mkdirSync(join(root, String(pid)));
      writeFileSync(
        join(root, String(pid), 'stat'),
        `${pid} (sh) S 1 ${pid} ${pid} 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 ${pid}00 0 0`,
      );
      writeFileSync(join(root, String(pid), 'cmdline'), 'sh\0');
      if (withEnviron) writeFileSync(join(root, String(pid), 'environ'), 'A=b\0');
    };
    proc(50, true);
    const table = new ProcfsTable(root);
    const query = { name: 'PROCWARDEN_RUN', value: 'x' };
    expect(table.sweepManySync([query])[0]?.births).toBe(900);
    proc(51, false); // a set-uid program's environment: not ours to read
    expect(table.sweepManySync([query])[0]?.births).toBeNull();
  });
});

describe('a proof saves sweeps', () => {
  it('a command that forked nothing: its exit costs no leftover sweep (count moved by its own birth only)', async () => {
    let reads = 0;
    const table = scriptedTable(() => (reads++ === 0 ? 100 : 101));
    const sup = new Supervisor({ table, journal: false });
    const result = await sup.spawn({ argv: ['/bin/true'], containment: 'process-group' }).result;
    expect(result.exitCode).toBe(0);
    expect(result.tree.leftovers).toBe(0);
    expect(table.sweeps()).toBe(0);
  });

  it('a tree that died of SIGTERM without forking: one sweep found it, none confirms it gone', async () => {
    let reads = 0;
    // The launch read, then a count that moved once (the tree's births) and never again.
    const table = scriptedTable(() => (reads++ === 0 ? 100 : 110));
    const sup = new Supervisor({ table, journal: false });
    const dir = leaks.trackDir(makeTmp());
    const handle = sup.spawn({
      argv: ['sh', '-c', 'sleep 30 & echo $! > "$1/a.pid"; sleep 30 & echo $! > "$1/b.pid"; wait', 'sh', dir],
      containment: 'process-group',
      graceMs: 5000,
    });
    leaks.track(handle.pid);
    const pids = await waitFor(() => (readPids(dir).size === 2 ? readPids(dir) : undefined), {
      what: 'both sleepers',
    });
    handle.cancel('test');
    const result = await handle.result;
    expect(result.tree.escaped).toBe(0);
    expect(result.tree.report?.members.map((m) => m.pid).sort()).toEqual(
      [handle.pid as number, ...pids.values()].sort(),
    );
    for (const pid of pids.values()) await waitFor(() => !alive(pid), { what: `sleeper ${pid} gone` });
    expect(table.sweeps()).toBe(1);
  });
});

describe('a proof is never believed past a fork it did not see', () => {
  const modes =
    cgroupSkip === null
      ? (['process-group', 'none', 'cgroup'] as const)
      : (['process-group', 'none'] as const);
  if (cgroupSkip !== null) it.skip(`cgroup: ${cgroupSkip}`, () => {});
  for (const containment of modes) {
    it(`${containment}: a SIGTERM handler's late fork (own session, re-parented) is found and ended`, async () => {
      const sup = new Supervisor({ journal: false });
      const { result, late } = await cancelLateForker(sup, containment);
      expect(result.tree.escaped).toBe(0);
      expect(result.tree.report?.members.map((m) => m.pid)).toContain(late);
      await waitFor(() => !alive(late), { what: 'the late fork gone' });
    });
  }

  it('a member that forks and exits while the proven members are re-read: the sweep runs', async () => {
    const dir = leaks.trackDir(makeTmp());
    const cookie = `births-race-${process.pid}`;
    const inner = new ProcfsTable();
    let count = 100; // scripted, so that only the births this test makes move it
    let armed = false;
    let rootPid = 0;
    const table: ProcessTable = {
      name: 'procfs',
      list: () => inner.list(),
      get: async (pid) => {
        if (armed && pid === rootPid) {
          armed = false;
          // Between the proof's first look at the count and this read: it forks, then exits.
          process.kill(rootPid, 'SIGUSR1');
          await waitFor(() => readPids(dir).get('late'), { what: 'the late fork' });
          count++;
          await waitFor(() => isGone(inner.getSync(rootPid)), { what: 'the root gone' });
        }
        return inner.get(pid);
      },
      sweep: async (query) => ({ ...(await inner.sweep(query)), births: count, vanished: 0, unsettled: 0 }),
      births: () => count,
    };
    const membership = new TreeMembership(table, new Guard(), cookie, true);
    membership.beforeLaunch();
    const script = `trap '( setsid sleep 30 & echo $! > "$1/late.pid" ); exit 0' USR1; sleep 30 & echo $$ > "$1/root.pid"; wait`;
    const child = spawn('sh', ['-c', script, 'sh', dir], {
      detached: true,
      stdio: 'ignore',
      env: { ...process.env, PROCWARDEN_RUN: cookie, PW_DIR: dir },
    });
    rootPid = child.pid ?? 0;
    leaks.track(rootPid);
    count++; // the root
    await membership.attach(rootPid);
    await waitFor(() => readPids(dir).get('root'), { what: 'the script ready' });
    expect((await membership.scan()).map((m) => m.pid)).toContain(rootPid);
    armed = true;
    const found = await membership.scan();
    const late = readPids(dir).get('late') as number;
    expect(found.map((m) => m.pid)).toContain(late);
    killEach(found.map((m) => m.pid));
    // Every one of them, not only the late fork: a SIGKILL lands a moment after kill() returns,
    // and the leak check after the test must not see the root still alive (a loaded run did).
    await waitFor(() => found.every((m) => !alive(m.pid)), { what: 'the members gone' });
  });

  it('a count that never moves proves nothing: the late fork is still found', async () => {
    const table = scriptedTable(() => 7);
    const sup = new Supervisor({ table, journal: false });
    const { result, late } = await cancelLateForker(sup, 'process-group');
    expect(result.tree.escaped).toBe(0);
    expect(result.tree.report?.members.map((m) => m.pid)).toContain(late);
    await waitFor(() => !alive(late), { what: 'the late fork gone' });
  });
});

describe('TreeMembership: what drops a proof', () => {
  const row = (pid: number, ppid: number, startTime = `${pid}00`): ProcessInfo => ({
    pid,
    ppid,
    pgid: 1_000_000,
    sid: 1_000_000,
    startTime,
    state: 'S',
    command: 'fake',
  });

  /** A table of made-up rows (pids no process here has), with a settable birth count. */
  function fakeTable(rows: ProcessInfo[]) {
    let births = 500;
    let sweeps = 0;
    let next: Partial<Sweep> = {};
    const table: ProcessTable = {
      name: 'fake',
      list: async () => rows,
      get: async (pid) => rows.find((r) => r.pid === pid) ?? null,
      sweep: async () => {
        sweeps++;
        const sweep = { processes: [...rows], holders: new Set<number>(), vanished: 0, births, ...next };
        next = {};
        return sweep;
      },
      births: () => births,
    };
    return {
      table,
      sweeps: () => sweeps,
      born: () => {
        births++;
      },
      /** What the next sweep reports besides its rows. */
      nextSweep: (sweep: Partial<Sweep>) => {
        next = sweep;
      },
    };
  }

  async function proven(fake: ReturnType<typeof fakeTable>, rootPid: number) {
    const membership = new TreeMembership(fake.table, new Guard(), 'cookie', false);
    membership.beforeLaunch();
    fake.born();
    await membership.attach(rootPid);
    fake.born();
    return membership;
  }

  it('a sweep that saw a process vanish mid-read, or one between two execs, proves nothing', async () => {
    for (const odd of [{ vanished: 1 }, { unsettled: 1 }]) {
      const root = row(4_000_011, process.pid);
      const fake = fakeTable([root]);
      const membership = await proven(fake, root.pid);
      fake.nextSweep(odd);
      await membership.scan();
      const after = fake.sweeps();
      await membership.scan();
      expect(fake.sweeps(), JSON.stringify(odd)).toBeGreaterThan(after);
    }
  });

  it('a member learned another way (a cgroup list) brings back the sweep; so does a birth', async () => {
    const root = row(4_000_001, process.pid);
    const child = row(4_000_002, root.pid);
    const stranger = row(4_000_003, 1, '1');
    const fake = fakeTable([root, child]);
    const membership = new TreeMembership(fake.table, new Guard(), 'cookie', false);
    membership.beforeLaunch();
    fake.born();
    await membership.attach(root.pid);
    fake.born(); // the child
    expect((await membership.scan()).map((m) => m.pid).sort()).toEqual([root.pid, child.pid]);
    expect(fake.sweeps()).toBe(1);
    expect((await membership.scan()).length).toBe(2);
    expect(fake.sweeps()).toBe(1); // proven: nothing born since
    membership.remember([child]);
    await membership.scan();
    expect(fake.sweeps()).toBe(1); // one the proof holds changes nothing
    membership.remember([stranger]);
    await membership.scan();
    expect(fake.sweeps()).toBe(2);
    await membership.scan();
    expect(fake.sweeps()).toBe(2);
    fake.born();
    await membership.scan();
    expect(fake.sweeps()).toBe(3);
  });
});
